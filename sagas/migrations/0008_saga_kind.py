"""Saga.kind: what a saga is (a plain saga or a proxy session), set by the server. Sagas the MCP proxy opened before
this column existed are recognised by their `metadata.proxy.connection`, which the proxy always wrote."""

from django.db import migrations, models


def proxy_sessions_by_metadata(apps, schema_editor):  # type: ignore[no-untyped-def]
    saga = apps.get_model("sagas", "Saga")
    saga.objects.filter(metadata__proxy__has_key="connection").update(kind="proxy_session")


class Migration(migrations.Migration):
    dependencies = [
        ("sagas", "0007_mcp_tasks"),
    ]

    operations = [
        migrations.AddField(
            model_name="saga",
            name="kind",
            field=models.CharField(
                choices=[("saga", "Saga"), ("proxy_session", "Proxy Session")], default="saga", max_length=32
            ),
        ),
        migrations.RunPython(proxy_sessions_by_metadata, migrations.RunPython.noop),
    ]
