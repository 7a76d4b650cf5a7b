# Installed saga_expect_rows, the check a queued compare-and-set carries on PostgreSQL. The function belongs to the
# coordinator and is installed by sagas migration 0010 (which replaces it, with the same definition, where this
# migration once created it); this one is kept, empty, so the migration graph of existing databases still holds.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0002_control_plane_chain"),
    ]

    operations = []
