# The check a queued compare-and-set carries on PostgreSQL (sagas.coordinator.sql.pipeline): raise when it changed no
# row, so the transaction fails before its COMMIT. SQLite never queues writes and needs nothing.
#
# It belongs to the coordinator, whose statements call it. audit migration 0003 installed it first; that migration is
# now empty, so a new database gets the function here, and an existing one has it replaced by the same definition.

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION saga_expect_rows(changed bigint, expected integer, message text)
RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    IF changed <> expected THEN
        RAISE EXCEPTION USING MESSAGE = message, HINT = 'saga-stale-write';
    END IF;
    RETURN changed;
END
$$
"""

DROP = "DROP FUNCTION IF EXISTS saga_expect_rows(bigint, integer, text)"


def _on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("sagas", "0009_approval_snapshot"),
        ("audit", "0003_saga_expect_rows"),
    ]

    operations = [
        migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP), elidable=False),
    ]
