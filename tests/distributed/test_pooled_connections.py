"""Pooled PostgreSQL connections: work that closes its connection after each unit (an embedded-executor job, an MCP
tool call) hands it back to the pool, so the number of backends ever started stays flat as the work grows.

New backends are counted by PostgreSQL itself (`pg_stat_database.sessions` of the test database), so a connection
opened anywhere, pooled or not, by this process or by the server, is seen. PostgreSQL only: SQLite has no
backends (skipped, with that reason, in the SQLite pass).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
import pytest
from django.conf import settings
from django.db import connection

from governance.identity.principal import Principal
from registry.services import registry_load_file
from sagas import coordinator
from sagas.models import Node
from sagas.states import NodeStatus
from tests.protocols.conftest import ALICE, start_server
from tests.protocols.mcp_client import call, connect
from tests.sagas.helpers import wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "action_registry.json"
RUNS = 100


def require_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite has no server backends to count: runs in the PostgreSQL pass")


def backends_started() -> int:
    """Sessions ever started on the test database (PostgreSQL's own count, across every process)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # read the counters now, not a cached snapshot
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        (sessions,) = cursor.fetchone()
    return int(sessions)


def pool_max_size() -> int:
    pool = settings.DATABASES["default"]["OPTIONS"].get("pool")
    assert pool, "PostgreSQL runs without the connection pool (SAGA_DB_POOL is off?): this test measures the pool"
    return int(pool["max_size"])


def completed(saga_ids: list[object]) -> int:
    return Node.objects.filter(saga_id__in=saga_ids, status=NodeStatus.COMPLETED).count()


def test_embedded_executor_reuses_connections_over_100_chained_nodes_and_100_jobs(
    operator: Principal, settings: object
):
    require_postgresql()
    settings.CELERY_BROKER_URL = ""  # type: ignore[attr-defined]  # the embedded executor runs the nodes
    registry_load_file(EXAMPLES)
    chain = coordinator.saga_begin(actor=operator)
    previous: list[str] = []
    for i in range(RUNS):
        node = coordinator.node_plan(
            actor=operator, saga_id=chain.id, action="noop", input={"i": i}, depends_on=previous
        )
        previous = [str(node.id)]
    singles = []
    for i in range(RUNS):  # each one-node saga is its own executor job, which closes its connections at the end
        saga = coordinator.saga_begin(actor=operator)
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="noop", input={"i": i})
        singles.append(saga.id)
    before = backends_started()
    # when the chain, then the 100 jobs, run on the executor's threads
    coordinator.saga_run_ready(actor=operator, saga_id=chain.id, max_parallel=1, max_steps=1000, wait_seconds=0)
    wait_until(lambda: completed([chain.id]) == RUNS, 120)
    for saga_id in singles:
        coordinator.saga_run_ready(actor=operator, saga_id=saga_id, max_parallel=1, wait_seconds=0)
    wait_until(lambda: completed(singles) == RUNS, 120)
    # then at most the pool's worth of backends was started, not one per node or per job
    assert backends_started() - before <= pool_max_size()


def test_served_mcp_endpoint_reuses_connections_over_100_tool_calls(operator: Principal):
    require_postgresql()
    registry_load_file(EXAMPLES)
    with tempfile.TemporaryDirectory() as workdir:
        server = start_server(Path(workdir))
        try:

            async def calls() -> None:
                async with connect(server.mcp_url, ALICE, "legacy") as client:
                    await call(client, "begin_saga", {})  # warm-up: the server's first checkouts
                    for _ in range(RUNS // 2):
                        saga = await call(client, "begin_saga", {})
                        await call(client, "execute_saga_step", {"saga_id": saga["id"], "action": "noop", "input": {}})

            before = backends_started()
            anyio.run(calls)
            after = backends_started()
        finally:
            server.proc.terminate()
            server.proc.wait(timeout=30)
    # then the server's pool served all 100 calls: at most its size in new backends, not one (or two) per call
    assert after - before <= pool_max_size()
