"""A2A `SendMessage` (JSON-RPC over HTTP, a2a-sdk 1.3 client) against our /a2a and against a bare a2a-sdk server.

Bare: `python -m bench.a2a_bench --port N --database URL`, an a2a-sdk Starlette app (DefaultRequestHandler,
InMemoryTaskStore, the card and JSON-RPC routes) whose AgentExecutor answers each message with one completed task
after one write (bench/mcp_bare.py's Store: one INSERT+COMMIT on SQLite or PostgreSQL). Ours: `semantic-saga serve`
(bench/mcp_surfaces.py starts it on each database), each message `{"operation": "begin"}`, which writes a saga.
One client per round (card resolved once, untimed), one SendMessage per iteration, rounds alternating the sides.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from typing import Any

from bench.common import Child, Children, free_port, median, progress, saga_env
from bench.mcp_roundtrip import TOKEN


def build(port: int, database: str) -> Any:
    from a2a.helpers import new_data_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Task, TaskState, TaskStatus
    from starlette.applications import Starlette

    from bench.mcp_bare import Store

    store = Store(database)

    class OneWrite(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task_id, context_id = context.task_id or "", context.context_id or ""
            submitted = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
            await event_queue.enqueue_event(
                Task(id=task_id, context_id=context_id, status=submitted, history=[context.message])
            )
            row = await asyncio.to_thread(store.write, task_id, {"a2a": True})
            updater = TaskUpdater(event_queue, task_id, context_id)
            await updater.add_artifact([new_data_part(row)], name="bare")
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    card = AgentCard(
        name="bench-bare-a2a",
        description="One write per message",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"http://127.0.0.1:{port}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["application/json"],
        default_output_modes=["application/json"],
        skills=[AgentSkill(id="write", name="write", description="one write", tags=["bench"])],
    )
    handler = DefaultRequestHandler(OneWrite(), InMemoryTaskStore(), card)
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")])


def start_bare(children: Children, database_url: str, name: str) -> tuple[Child, str]:
    """Start (without waiting) the bare A2A server; returns it and its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "bench.a2a_bench", "--port", str(port), "--database", database_url]
    return children.start(name, command, saga_env()), f"http://127.0.0.1:{port}"


def card_url(base: str) -> str:
    return f"{base}/.well-known/agent-card.json"


async def _session(base: str, iterations: int, ours: bool) -> list[float]:
    import httpx
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.helpers import new_data_part
    from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, TaskState

    data = {"operation": "begin", "metadata": {"bench": "a2a"}} if ours else {"write": "bench"}
    samples: list[float] = []
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)

        async def send() -> None:
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[new_data_part(data)])
            task = None
            async for event in client.send_message(SendMessageRequest(message=message)):
                task = event.task if event.HasField("task") else task
            if task is None or task.status.state != TaskState.TASK_STATE_COMPLETED:
                raise RuntimeError(f"A2A SendMessage to {base} did not complete: {task}")

        await send()  # warm-up
        for _ in range(iterations):
            started = time.perf_counter()
            await send()
            samples.append(time.perf_counter() - started)
    return samples


def measure(pairs: dict[str, tuple[str, str]], rounds: int, iterations: int) -> dict[str, dict[str, list[list[float]]]]:
    """database -> side -> per-round samples; `pairs` maps a database to (our base URL, the bare base URL)."""
    out: dict[str, dict[str, list[list[float]]]] = {}
    for round_no in range(rounds):
        for database, (ours, bare) in pairs.items():
            figure = out.setdefault(database, {"ours": [], "bare": []})
            sides = [("ours", ours), ("bare", bare)]
            for side, base in sides if round_no % 2 == 0 else sides[::-1]:
                figure[side].append(asyncio.run(_session(base, iterations, side == "ours")))
            progress(
                f"A2A round {round_no + 1}/{rounds} {database}: ours {median(figure['ours'][-1]) * 1000:.1f} ms, "
                f"bare {median(figure['bare'][-1]) * 1000:.1f} ms per SendMessage"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database", required=True)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(build(args.port, args.database), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
