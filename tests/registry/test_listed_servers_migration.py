"""Migrating a deployment that already pinned tools (registry 0003 -> 0004): every server pinned before has had its
first use, once, whatever the number of its tools; a tool it lists from then on is new."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("registry", "0003_tool_pins")]
AFTER = [("registry", "0004_listed_servers")]


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def test_servers_pinned_before_are_listed_once_each():
    old_apps = _migrate(BEFORE).loader.project_state(BEFORE).apps
    pin = old_apps.get_model("registry", "ToolPin")
    for server, tool in [("files", "read"), ("files", "write"), ("files", "purge"), ("crm", "create")]:
        pin.objects.create(server=server, tool=tool, status="approved", seen_definition={}, seen_hash="x")
    new_apps = _migrate(AFTER).loader.project_state(AFTER).apps
    listed = new_apps.get_model("registry", "ListedServer")
    assert sorted(listed.objects.values_list("server", "trust")) == [("crm", "first-use"), ("files", "first-use")]
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
