"""SAGA_A2A_MAX_TASK_HISTORY: a waiting task continued past the limit keeps the command it was created from
(history[0]) and its newest messages, so a peer repeating refused approve commands cannot grow the stored task
without bound; the task still goes on with its run afterwards. A real `serve` started with a limit of 4."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Task

from sagas.models import A2ATask
from tests.httpserver import RecordingHTTPServer
from tests.protocols.a2a_client import COMPLETED, INPUT_REQUIRED, connect
from tests.protocols.conftest import ALICE, VERA, RunningServer, start_server
from tests.protocols.test_a2a_input_required import approve, gated_saga, register_actions
from tests.startup import refused_at_start_up

KEPT = 4


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    os.environ["SAGA_A2A_MAX_TASK_HISTORY"] = str(KEPT)  # start_server passes the environment on
    try:
        running = start_server(tmp_path_factory.mktemp("server"))
    finally:
        del os.environ["SAGA_A2A_MAX_TASK_HISTORY"]
    try:
        yield running
    finally:
        running.proc.terminate()
        running.proc.wait(timeout=30)


def _stored(task_id: str) -> dict[str, Any]:
    stored: dict[str, Any] = A2ATask.objects.get(pk=task_id).task
    return stored


def test_a_task_continued_past_the_limit_keeps_its_command_and_its_newest_messages(
    server: RunningServer, downstream: RecordingHTTPServer
):
    register_actions(downstream)

    async def scenario() -> tuple[Task, list[Task], list[dict[str, Any]], Task]:
        async with connect(server.base, ALICE) as alice, connect(server.base, VERA) as vera:
            sid = await gated_saga(alice)
            waiting = await alice.send({"operation": "run", "saga_id": sid})
            refusals, sizes = [], []
            for _ in range(6):  # a viewer may not approve: each refusal adds two messages to the task
                refusals.append(await approve(vera, refusals[-1] if refusals else waiting))
                sizes.append(await asyncio.to_thread(_stored, waiting.id))
            return waiting, refusals, sizes, await approve(alice, refusals[-1])

    waiting, refusals, stored, done = asyncio.run(scenario())

    assert all(task.id == waiting.id and task.status.state == INPUT_REQUIRED for task in refusals)
    assert [len(task["history"]) for task in stored] == [3, KEPT, KEPT, KEPT, KEPT, KEPT]
    first, last = stored[0]["history"][0], stored[-1]["history"]
    assert last[0] == first and json.dumps(first).count('"operation": "run"') == 1  # the run command stays
    assert last[-1]["role"] == "ROLE_USER" and last[-2]["role"] == "ROLE_AGENT"  # the newest: status, then vera's
    assert last[-1]["messageId"] not in json.dumps(stored[-2]["history"])  # the sixth approve, not an older one
    assert len(json.dumps(stored[-1])) < 2 * len(json.dumps(stored[1]))  # bounded, not growing with each refusal
    assert done.status.state == COMPLETED and len(done.history) <= KEPT  # the run command still drives the run


@pytest.mark.parametrize("value", ["1", "10001", "many"])
def test_a_history_limit_out_of_range_stops_start_up(value: str):
    refused_at_start_up("SAGA_A2A_MAX_TASK_HISTORY", value)
