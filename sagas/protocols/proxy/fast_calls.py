"""The fast path of the stdio proxy: a plain tools/call decided on its parsed envelope and answered without the
SDK's server or client session (docs/proxy.md, "The fast path"; the measurements in docs/benchmarks.md).

The SDK validates every message into pydantic models on the way in and out of both of the proxy's sessions, and
passes each through memory streams and tasks: about 3 ms per call on a 2-core machine, more than a whole call
through Sagaz. For the common case none of it is needed, so the stdio front (sagas.protocols.proxy.stdio_front)
offers each line here first. A line is taken only when all of this holds, else it goes to the SDK as before:

- one JSON object `{"jsonrpc": "2.0", "id", "method": "tools/call", "params": {"name", "arguments"?, "_meta"?}}`
  with nothing else in it, an id that is a string or an integer and not in flight on either path, arguments an
  object, no progress token (progress needs the SDK's request context) and no task;
- the agent's connection finished its handshake in a handshake era (not a stateless 2026-07-28 one), may act
  (execute) and read, and the proxy is not in preview;
- the tool is in the catalog, its definition is the pinned one, its server has not said its tools changed (and for
  a non-read the listing is younger than SAGA_PROXY_RELIST_SECONDS), its gate is `allow`, and its pack declares no
  capture read and no read after (those calls take the SDK path with their reads).

Then a read is checked (`may_read_now`, by one statement on a connection of its own: DurableCallPath.read_cleared),
forwarded and journaled behind its answer, as on the SDK path; any other call is journaled ahead
(`proxy_call_begin`, durable before it is sent), forwarded with its step id as idempotency key, and its outcome
(`proxy_call_finish`) written just after the answer went out, on the write-behind thread, before the session's next
call is journaled (a crash in that moment leaves the step EXECUTING, and the recovery sweep records its outcome as
unknown, as for a crash while the call was out). What the journal, the gate and the policy see is what they see for
the same call on the SDK path: the same facts, the same operations; what differs is that the downstream's result is
relayed as it came, without being rebuilt. A begin that does not forward (refused, held, dry) is answered by the
durable path's own code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import mcp.types as types
from django.conf import settings
from mcp.server.connection import Connection
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, INTERNAL_ERROR

from governance.errors import ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, READ, can
from sagas.operations.arguments import storable_problem
from sagas.protocols.proxy.behind import finished_call
from sagas.protocols.proxy.calls import ClientIdentity, ProxiedCall, refused_result, unjournalable_result
from sagas.protocols.proxy.catalog import Catalog, ExposedTool
from sagas.protocols.proxy.durable import DurableCallPath
from sagas.protocols.proxy.elicited import can_ask
from sagas.protocols.proxy.intended import forward_intended, may_intend
from sagas.protocols.proxy.raw_channel import strict_loads
from sagas.protocols.proxy.relay import ConnectionRelay
from sagas.protocols.proxy.server import ENVELOPE_PREFIX, ProxyServer, forwarded_meta
from sagas.protocols.proxy.stdio_front import StdioFront, request_key
from sagas.proxied_facts import CallFacts

logger = logging.getLogger("sagas.protocols.proxy")

_TOOLS_CALL = b'"tools/call"'
_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})
_PARAMS = frozenset({"name", "arguments", "_meta"})


@dataclass(frozen=True)
class PlainCall:
    request_id: str | int
    name: str
    arguments: dict[str, Any]
    meta: dict[str, Any]


@dataclass
class Flight:
    task: asyncio.Task[Any] | None = None
    withdrawn: bool = False  # the agent cancelled it: no answer is sent


@dataclass(frozen=True)
class _Decided:
    """What a call's facts were decided from: kept while none of it changed (the catalog and the trust state are
    replaced, never mutated, when they change)."""

    catalog: Catalog
    pin: object
    offered: object
    facts: CallFacts


class FastDecider:
    """What both fast paths share (stdio, and Streamable HTTP: sagas.protocols.proxy.http_fast): whether a plain
    call is taken, decided on its envelope, and its answer."""

    def __init__(self, server: ProxyServer, path: DurableCallPath) -> None:
        self.server = server
        self.path = path
        self._decided: dict[tuple[str, str, str, str], _Decided] = {}

    def acts(self, principal: Principal) -> bool:
        """Whether `principal`'s calls may take the fast path at all (it may act and read; no preview)."""
        return can(principal, EXECUTE) and can(principal, READ) and not self.path.config.preview

    def request(
        self, call: PlainCall, principal: Principal, client: ClientIdentity, connection: Connection
    ) -> tuple[ProxiedCall, CallFacts] | None:
        """The call and its facts, if the fast path takes it (module docstring); else None."""
        if client.stateless:
            return None
        catalog = self.path.downstreams.catalog
        exposed = catalog.tools.get(call.name)
        if exposed is None:
            return None
        log_level = self.server.clients.log_levels.get(client.key)
        request = ProxiedCall(
            principal=principal,
            client=client,
            exposed_name=exposed.name,
            server=exposed.server,
            tool=exposed.tool.name,
            definition_hash=exposed.definition_hash,
            definition=exposed.tool,
            arguments=call.arguments,
            meta=forwarded_meta(call.meta),
            relay=ConnectionRelay(connection, client.key, log_level=log_level),
            request_id=call.request_id,
            client_elicits=can_ask(connection.client_capabilities) and connection.has_standalone_channel,
        )
        facts = self._facts(catalog, exposed, request, client)
        plain = facts.gate == "allow" and not facts.definition_changed and self._fresh(exposed, facts.effect_class)
        if not plain or "capture" in facts.inverse or "read_after" in facts.inverse:
            return None
        return request, facts

    def _fresh(self, exposed: ExposedTool, effect_class: str) -> bool:
        """As DurableCallPath._fresh would leave the call unchanged without re-listing first."""
        downstreams = self.path.downstreams
        if downstreams.tools_stale(exposed.server):
            return False
        if effect_class == "read":
            return True
        return downstreams.tools_listed_within(exposed.server, float(settings.SAGA_PROXY_RELIST_SECONDS))

    def _facts(self, catalog: Catalog, exposed: ExposedTool, request: ProxiedCall, client: ClientIdentity) -> CallFacts:
        # A connection is one principal's (the SDK refuses a session to any other credential), so its key names
        # the principal too.
        key = (exposed.name, exposed.definition_hash, client.key, request.principal.tenant_id)
        trust = self.path.trust
        pin, offered = trust.states.get((exposed.server, exposed.tool.name)), trust.offered
        kept = self._decided.get(key)
        if kept is not None and kept.catalog is catalog and kept.pin is pin and kept.offered is offered:
            return kept.facts
        facts = self.path._facts(request)
        self._decided[key] = _Decided(catalog, pin, offered, facts)
        return facts

    async def respond(self, request: ProxiedCall, facts: CallFacts) -> Answer | None:
        """The call's answer; None when a read's quick check did not clear it (the SDK path decides it then)."""
        path = self.path
        if problem := storable_problem(request.arguments, "arguments", bound_strings=False):
            return unjournalable_result(request, problem)  # as the SDK path: refused before anything is written
        with path.behind.busy():
            try:
                if facts.effect_class == "read":
                    return await self._read(request, facts)
                if may_intend(facts):  # journaled by its intent, its step written behind (None: not intended)
                    sent = forward_intended(path, request, facts, path.forwarder.forward_plain)
                    intended: Answer | None = await _protocol_errors(sent)
                    if intended is not None:
                        return intended
                begun = await path._begin(request, facts)
            except ServiceError as refused:
                return refused_result(request, refused.message.rstrip("."))
            if begun["outcome"] != "forward":
                return await path._after_begin(request, facts, begun)

            async def record(started: float, outcome: dict[str, Any]) -> None:
                done = finished_call(begun, outcome, started, time.monotonic())
                path.finishes.park(request.principal, begun["saga_id"], done)  # folded into the next call's begin

            return await _protocol_errors(path.forwarder.forward_plain(request, begun, record))

    async def _read(self, request: ProxiedCall, facts: CallFacts) -> Answer | None:
        """As the SDK path's read behind its answer: checked, forwarded (relayed as it came), journaled behind."""
        return await _protocol_errors(self.path.read_behind(request, facts, self.path.forwarder.forward_plain))


class FastCalls:
    """The stdio proxy's fast path: the agent's one connection, its plain calls each answered on a task of its own
    and written through the front."""

    def __init__(self, server: ProxyServer, path: DurableCallPath, principal: Principal) -> None:
        self.decider = FastDecider(server, path)
        self.principal = principal
        self._flights: dict[Any, Flight] = {}
        self._acts = self.decider.acts(principal)

    # --- what the front asks -------------------------------------------------------------------------------------

    def take(self, line: bytes, busy: Any, front: StdioFront) -> bool:
        if _TOOLS_CALL not in line or not self._acts:
            return False
        try:
            call = plain_call(strict_loads(line))
        except ValueError:  # not JSON the SDK reads the same: its path answers it
            return False
        if call is None or busy(call.request_id) or request_key(call.request_id) in self._flights:
            return False
        latest = self.decider.server.clients.latest
        taken = None if latest is None else self.decider.request(call, self.principal, *latest)
        if taken is None:
            return False
        flight = self._flights[request_key(call.request_id)] = Flight()
        # A task of its own (asyncio's, not a task group's: spawning one costs less than the call on this path).
        flight.task = asyncio.get_running_loop().create_task(self._answer(call, taken, flight, front))
        return True

    def cancel(self, request_id: Any) -> bool:
        flight = self._flights.get(request_key(request_id))
        if flight is None or flight.task is None:
            return False
        flight.withdrawn = True
        flight.task.cancel()
        return True

    async def aclose(self, front: StdioFront | None = None) -> None:
        """The agent's input ended: its calls still out are cancelled (each records what became of it), awaited,
        and answered as the SDK answers its own then (CONNECTION_CLOSED), for an agent still reading."""
        flights = {key: flight for key, flight in self._flights.items() if flight.task is not None}
        for flight in flights.values():
            flight.withdrawn = True  # no answer of their own: the one below
            assert flight.task is not None
            flight.task.cancel()
        await asyncio.gather(*(flight.task for flight in flights.values() if flight.task), return_exceptions=True)
        if front is not None:
            closed = MCPError(CONNECTION_CLOSED, "Connection closed")
            for _kind, request_id in flights:
                with contextlib.suppress(Exception):  # the agent may have stopped reading too
                    await front.write(frame(request_id, closed))

    # --- answering -----------------------------------------------------------------------------------------------

    async def _answer(
        self, call: PlainCall, taken: tuple[ProxiedCall, CallFacts], flight: Flight, front: StdioFront
    ) -> None:
        try:
            answer = await answered(self.decider, call, taken, flight)
        finally:
            self._flights.pop(request_key(call.request_id), None)
        if flight.withdrawn and answer is None:
            return  # the agent withdrew it: no answer is sent (the journal recorded what became of it)
        if answer is None:  # the read's quick check did not clear it: the SDK path decides and journals it
            await front.to_sdk(call_line(call))
            return
        await front.write(framed(call, answer))


async def answered(
    decider: FastDecider, call: PlainCall, taken: tuple[ProxiedCall, CallFacts], flight: Flight
) -> Answer | None:
    """The call's answer, or None: its read's quick check did not clear it (`flight.withdrawn` false), or the agent
    withdrew it (true). A bug of ours is answered as an error, never silence."""
    try:
        return await decider.respond(*taken)
    except asyncio.CancelledError:
        if flight.withdrawn:
            return None
        raise
    except Exception as error:
        logger.exception("the fast path could not answer %s", call.name)
        return MCPError(INTERNAL_ERROR, f"the proxy failed while answering this call ({type(error).__name__})")


Answer = dict[str, Any] | types.CallToolResult | MCPError


async def _protocol_errors(answered: Any) -> Answer:
    try:
        result: Answer = await answered
    except MCPError as error:  # the server's own protocol error, passed on as the SDK path passes it
        return error
    return result


def plain_call(message: Any) -> PlainCall | None:
    """The call, if `message` is a plain tools/call by the envelope's rules (module docstring); else None."""
    if not isinstance(message, dict) or message.keys() - _ENVELOPE or message.get("jsonrpc") != "2.0":
        return None
    request_id, params = message.get("id"), message.get("params")
    if message.get("method") != "tools/call" or not isinstance(params, dict):
        return None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    if params.keys() - _PARAMS or not isinstance(name := params.get("name"), str):
        return None
    arguments, meta = params.get("arguments", {}), params.get("_meta", {})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict) or not isinstance(meta, dict) or "progressToken" in meta:
        return None
    if any(key.startswith(ENVELOPE_PREFIX) for key in meta):  # the 2026-07-28 envelope: the SDK judges it
        return None
    return PlainCall(request_id, name, arguments, meta)


def call_line(call: PlainCall) -> bytes:
    params: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
    if call.meta:
        params["_meta"] = call.meta
    message = {"jsonrpc": "2.0", "id": call.request_id, "method": "tools/call", "params": params}
    return json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"


def framed(call: PlainCall, answer: Answer) -> bytes:
    """The answer's line; one that cannot be written as JSON text becomes the proxy's error (never silence)."""
    try:
        return frame(call.request_id, answer)
    except (UnicodeEncodeError, ValueError, RecursionError):
        logger.exception("the fast path's answer to %s could not be written as JSON", call.name)
        failed = MCPError(INTERNAL_ERROR, "the proxy could not write this call's answer as JSON text")
        return frame(call.request_id, failed)


def frame(request_id: str | int, answer: Answer) -> bytes:
    """The JSON-RPC line that answers the call."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if isinstance(answer, MCPError):
        error: dict[str, Any] = {"code": answer.code, "message": answer.message}
        if answer.error.data is not None:
            error["data"] = answer.error.data
        message["error"] = error
    elif isinstance(answer, types.CallToolResult):
        message["result"] = answer.model_dump(by_alias=True, exclude_none=True, mode="json")
    else:
        message["result"] = answer
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
