# Control-plane chains: one head row per tenant, locked by appends (audit.control_plane).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='ControlPlaneChain',
            fields=[
                ('chain_id', models.UUIDField(editable=False, primary_key=True, serialize=False)),
                ('tenant_id', models.CharField(max_length=200, unique=True)),
                ('head_sequence', models.PositiveBigIntegerField(default=0)),
                ('head_hash', models.CharField(blank=True, max_length=64, null=True)),
            ],
        ),
    ]
