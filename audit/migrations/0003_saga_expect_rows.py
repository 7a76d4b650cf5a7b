# The check a queued compare-and-set carries on PostgreSQL (audit.write_behind): raise when it changed no row, so
# the transaction fails before its COMMIT. SQLite never queues writes and needs nothing.

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


def _on_postgresql(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0002_control_plane_chain"),
    ]

    operations = [
        migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP), elidable=False),
    ]
