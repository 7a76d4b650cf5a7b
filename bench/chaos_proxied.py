"""The chaos suite's proxied sagas: an agent's MCP session through the proxy, then committed or rolled back.

One run is one client session (the official `mcp` client, 2025-11-25 over Streamable HTTP, bearer token) on a proxy
replica: two `chaos_put` calls (class R by the pack's inverse) and a `chaos_get` (a read), each a durable step of
the session's saga, forwarded to the downstream with the step id as its idempotency key. A call that gets no answer
(the proxy was killed, its database connection cut) ends the session: the client cannot know whether it acted, so
it never repeats it, as an agent must not. The harness, as the session's operator, then finds the session saga
(by the client name it connected with, as an operator finds sessions in the console) and, once nothing is in
flight, commits it (even runs) or rolls it back (odd runs, and any session with an uncertain call) over REST. A
session the proxy recovery made RECOVERY_REQUIRED (a killed proxy's call, uncertain) is left as it is: terminal.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from bench.chaos_drive import POLL_SECONDS, REQUEST_DEADLINE, TERMINAL, TOKEN, Api, ApiError, SagaRun
from bench.chaos_fleet import Fleet

PROXY_PATH = "/proxy/mcp"
NO_SESSION = "NO_SESSION"  # the proxy died before it opened one: nothing was journaled or sent
CALL_SECONDS = 20.0  # one call's answer; the downstream answers within 0.3 s, the rest is the proxy's journaling
# How long the operator waits for an answered read's step (written behind its answer) before ending the session.
JOURNALED_SECONDS = 10.0


def drive_proxied(api: Api, fleet: Fleet, index: int, deadline: float) -> SagaRun:
    run = SagaRun("proxied")
    started = time.monotonic()
    name = f"chaos-proxied-{index}"
    try:
        outcome = _session(fleet, name, index)
        run.saga_id = _find_session(name)
        if run.saga_id:
            # A session whose calls were all answered is ended once each has its step: a read's is written behind
            # its answer (docs/proxy.md), later still while the proxy is busy (a notification flood).
            answered = len(_plan(index)) if outcome == "done" else 0
            _finish(api, run, index % 2 == 0, deadline, answered)
        else:
            run.status = NO_SESSION
    except ApiError as exc:
        run.error = str(exc)
    run.seconds = time.monotonic() - started
    return run


def _session(fleet: Fleet, name: str, index: int) -> str:
    """Connect (retrying while the proxy is down) and make the calls until one gets no answer; 'done' or 'lost'."""
    give_up = time.monotonic() + REQUEST_DEADLINE
    while True:
        member = fleet.proxies[index % len(fleet.proxies)]
        url = f"http://127.0.0.1:{member.port}{PROXY_PATH}"
        outcome = anyio.run(_calls, url, name, index)
        if outcome != "not connected":
            return outcome
        if time.monotonic() > give_up:
            raise ApiError(f"proxy {member.name}: no session within {REQUEST_DEADLINE:.0f}s")
        time.sleep(0.2)


async def _calls(url: str, name: str, index: int) -> str:
    """'done', 'lost' (a call went unanswered: the session ends there) or 'not connected' (no handshake)."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx2.Timeout(CALL_SECONDS))
    connected = False
    try:
        async with (
            http,
            Client(
                streamable_http_client(url, http_client=http),
                mode="legacy",
                client_info=Implementation(name=name, version="1.0.0"),
                read_timeout_seconds=CALL_SECONDS,
            ) as client,
        ):
            connected = True
            for tool, arguments in _plan(index):
                with anyio.fail_after(CALL_SECONDS):
                    result = await client.call_tool(tool, arguments)
                if result.is_error:
                    return "lost"  # e.g. refused or failed downstream: the saga says which; stop here too
        return "done"
    except Exception:  # any transport failure, timeout or SDK error mid-session: the answer is lost
        return "lost" if connected else "not connected"


def _plan(index: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("chaos_put", {"name": f"p{index}-a", "value": "1"}),
        ("chaos_put", {"name": f"p{index}-b", "value": "2"}),
        ("chaos_get", {"name": f"p{index}-a"}),
    ]


def _find_session(name: str) -> str:
    from django.db import connections

    from sagas.models import Saga

    try:
        found = Saga.objects.filter(metadata__proxy__client__name=name).values_list("id", flat=True).first()
    finally:
        connections.close_all()  # this thread's connection; the next lookup opens its own
    return str(found) if found else ""


def _finish(api: Api, run: SagaRun, commit: bool, deadline: float, answered: int = 0) -> None:
    """As the session's operator: once no call is in flight and the `answered` calls each have a step (or
    JOURNALED_SECONDS passed: a killed proxy loses a read's line), commit or roll back; poll until terminal."""
    base = f"/sagas/{run.saga_id}"
    journaled_by = time.monotonic() + JOURNALED_SECONDS
    while time.monotonic() < deadline:
        saga = api.call("GET", f"{base}/")
        run.status = saga["status"]
        if run.status in TERMINAL:
            return
        journaled = time.monotonic() > journaled_by or _steps(run.saga_id) >= answered
        if run.status == "ACTIVE" and not _in_flight(run.saga_id) and journaled:
            # 409/4xx: the other verb is needed (a call with an unknown outcome cannot be committed) or a repeated
            # request's first answer was lost; the next poll reads the truth.
            verb = "commit" if commit else "rollback"
            try:
                api.call("POST", f"{base}/{verb}/", {}, ok=(200, 202))
            except ApiError:
                commit = False
        time.sleep(POLL_SECONDS)


def _in_flight(saga_id: str) -> bool:
    from django.db import connections

    from sagas.models import Step

    try:
        return Step.objects.filter(saga_id=saga_id, status="EXECUTING").exists()
    finally:
        connections.close_all()


def _steps(saga_id: str) -> int:
    from django.db import connections

    from sagas.models import Step

    try:
        return Step.objects.filter(saga_id=saga_id).count()
    finally:
        connections.close_all()


def close_held_sessions(api: Api, kills: list[tuple[str, str]], deadline: float) -> None:
    """The sessions whose held call lost its proxy (the held-call fault): once the sweep withdrew the call, the
    harness, as their operator, rolls them back (nothing else will end them)."""
    from django.db import connections

    from sagas.models import Node

    for saga_id, node_id in kills:
        try:
            while time.monotonic() < deadline and not Node.objects.filter(pk=node_id, step__isnull=False).exists():
                time.sleep(POLL_SECONDS)
        finally:
            connections.close_all()
        run = SagaRun("proxied")
        run.saga_id = saga_id
        with contextlib.suppress(ApiError):  # the settle check says what state it was left in
            _finish(api, run, False, deadline)


# How long an abandoned held-call fault's agent may still take to have its call held (it stops retrying at once,
# but the attempt in flight may still get there).
ABANDONED_HOLD_SECONDS = 15.0


def close_abandoned_holds(api: Api, names: list[str], deadline: float) -> None:
    """The held-call faults abandoned when the faults stopped (their proxy was never killed): a call held meanwhile
    waits for a person, so the harness, as its operator, rejects it (the proxy withdraws it, nothing sent) and then
    closes its session as close_held_sessions does."""
    from django.db import connections

    from sagas.models import Node

    for name in names:
        found_by = min(deadline, time.monotonic() + ABANDONED_HOLD_SECONDS)
        held = None
        try:
            while held is None and time.monotonic() < found_by:
                held = Node.objects.filter(status="WAITING_APPROVAL", saga__metadata__proxy__client__name=name).first()
                if held is None:
                    time.sleep(POLL_SECONDS)
        finally:
            connections.close_all()
        if held is None:  # never held: its session, if any, holds nothing to settle
            continue
        with contextlib.suppress(ApiError):  # the settle check says what state it was left in
            reason = {"reason": "chaos: the held-call fault was abandoned as the faults stopped"}
            api.call("POST", f"/sagas/{held.saga_id}/nodes/{held.id}/reject/", reason)
        close_held_sessions(api, [(str(held.saga_id), str(held.id))], deadline)
