"""A subscriber of `saga://{id}` hears the commit a Celery worker makes: the server nudges the node to Redis, a real
worker process runs and records it, and the server's watcher (driven by committed rows) tells the MCP client. Also
the node's step records the worker as the one that ran it, so the update did not come from the server itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp.types import ResourceUpdatedNotification

from sagas.models import Node
from tests.contracts import register
from tests.distributed.conftest import require_postgresql
from tests.distributed.workers import CeleryWorker
from tests.protocols.conftest import ALICE, start_server
from tests.protocols.mcp_client import call
from tests.protocols.test_mcp_resources import connect

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "action_registry.json"
NOTICE_WITHIN = 60.0

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # resources/subscribe is handshake-era


def _register_noop() -> None:
    register(next(a for a in json.loads(EXAMPLES.read_text())["actions"] if a["id"] == "noop"))


def test_a_subscriber_hears_the_commit_of_a_node_a_celery_worker_ran(
    celery_worker: CeleryWorker | None, broker_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    require_postgresql()
    _register_noop()
    monkeypatch.setenv("CELERY_BROKER_URL", broker_url)  # the server nudges ready nodes to the workers
    server = start_server(tmp_path)
    updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            await updated.put(str(message.params.uri))

    async def scenario() -> tuple[str, str]:
        async with connect(server.mcp_url, ALICE, "legacy", message_handler=on_message) as client:
            saga = await call(client, "begin_saga", {"metadata": {}})
            node = await call(client, "plan_saga_step", {"saga_id": saga["id"], "action": "noop", "input": {}})
            await client.subscribe_resource(f"saga://{saga['id']}")
            # wait_seconds 0: the server hands the node to the workers and answers at once (a fast worker may have
            # finished it already; that the worker ran it is read from its log below)
            await call(client, "run_ready_steps", {"saga_id": saga["id"], "wait_seconds": 0})
            deadline = asyncio.get_running_loop().time() + NOTICE_WITHIN
            while True:
                remaining = deadline - asyncio.get_running_loop().time()
                assert await asyncio.wait_for(updated.get(), remaining) == f"saga://{saga['id']}"
                read = await client.read_resource(f"saga://{saga['id']}")
                state = json.loads(read.contents[0].text)  # type: ignore[union-attr]
                if state["workflow"]["nodes"][0]["status"] == "COMPLETED":
                    return saga["id"], node["id"]

    try:
        _, node_id = asyncio.run(scenario())
    finally:
        server.proc.terminate()
        server.proc.wait(timeout=30)
    assert Node.objects.get(pk=node_id).status == "COMPLETED"
    assert celery_worker is not None
    log = celery_worker.log.read_text()
    assert "sagas.tasks." in log and "succeeded" in log, log[-2000:]  # the worker ran it
