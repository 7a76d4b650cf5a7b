"""One downstream MCP server behind the proxy: a long-lived client session (the official `mcp` client, stdio or
Streamable HTTP), supervised for the proxy's lifetime.

The supervisor connects (secret references resolved now, never stored or logged), initializes, lists everything,
then serves: it re-lists a kind when the server says it changed, pings while idle, and on a lost connection
reports the server down and reconnects with exponential backoff. A server that is down never stops the others.

The session uses the 2025-11-25 handshake on purpose: one stateful session carries the server's own requests
(elicitation, sampling, roots) and its notifications (list_changed, progress, logs) back to the proxy.

Limits: a server has `connectTimeoutMs` to start and answer initialize (else it is reported down and retried in the
background) and `timeoutMs` to answer each request (else the request is cancelled and its outcome is unknown:
`DownstreamTimedOut`); no answer is read past SAGA_PROXY_MAX_RESULT_BYTES (`ResultTooLarge`,
sagas.protocols.proxy.result_cap); its notifications are bounded by its rate (sagas.protocols.proxy.floods), and its
own requests are relayed, marked or refused by sagas.protocols.proxy.inbound.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from django.conf import settings
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from registry.errors import ActionFailure
from registry.secrets import resolve_header, scrub
from sagas.protocols.proxy import listing as lists
from sagas.protocols.proxy.catalog import ServerListing
from sagas.protocols.proxy.downstream_faults import (
    DownstreamLost,
    DownstreamTimedOut,
    DownstreamUnavailable,
    describe_failure,
    sdk_closed,
    sdk_timeout,
)
from sagas.protocols.proxy.floods import ListKind, NotificationGate
from sagas.protocols.proxy.http_channel import ChannelDeclined, HttpChannel
from sagas.protocols.proxy.inbound import DownstreamInbound
from sagas.protocols.proxy.raw_channel import (
    ChannelClosed,
    ChannelLost,
    RawChannel,
    not_a_result,
    plain_error,
    plain_result,
    unreadable,
)
from sagas.protocols.proxy.relay import ClientRelay, RelayRouter
from sagas.protocols.proxy.result_cap import CappedBodies, too_large
from sagas.protocols.proxy.specs import ServerSpec
from sagas.protocols.proxy.status import DownstreamStatus, where
from sagas.protocols.proxy.stdio_transport import bounded_stdio_client

logger = logging.getLogger("sagas.protocols.proxy")

CLIENT_INFO = types.Implementation(name="semantic-saga-proxy", version="0.1.0")
USER_AGENT = "semantic-saga-proxy"

# What the supervisor does next: list one kind again, or check (ping) that the server is still there.
Work = Literal["tools", "prompts", "resources", "check"]
WORK_ORDER: tuple[Work, ...] = ("tools", "prompts", "resources", "check")
ListingCallback = Callable[["DownstreamConnection", ServerListing, frozenset[str]], Awaitable[None]]


@dataclass(frozen=True)
class Timing:
    """How patient the proxy is with its downstreams (seconds)."""

    # How long a server may take to start and answer initialize; None: SAGA_PROXY_CONNECT_TIMEOUT_SECONDS (a
    # server's own `connectTimeoutMs` wins over both).
    connect_timeout: float | None = None
    # One page of a listing; a server slower than this is treated as down rather than stalling the proxy.
    list_timeout: float = 20.0
    # Reconnection backoff: doubles from the first to the last value, so a flapping server is not hammered.
    retry_initial: float = 0.5
    retry_max: float = 30.0
    # Re-listings asked by list_changed start at most this often: a server sending them without pause costs one
    # re-listing per interval, not a re-listing loop.
    relist_spacing: float = 1.0
    # An idle session is pinged this often to notice a dead server before a call does.
    ping_interval: float = 15.0
    ping_timeout: float = 10.0


@dataclass
class _Live:
    session: ClientSession
    init: types.InitializeResult
    secrets: tuple[str, ...]
    raw: RawChannel | HttpChannel | None = None  # the server's channel for the fast path's plain calls
    lost: anyio.Event = field(default_factory=anyio.Event)
    reason: str = ""


class DownstreamConnection:
    def __init__(self, spec: ServerSpec, router: RelayRouter, on_listing: ListingCallback, timing: Timing) -> None:
        self.spec = spec
        self.status = DownstreamStatus(server=spec.name, transport=spec.transport, where=where(spec))
        self.listing: ServerListing | None = None
        self.tools_listed_at = 0.0  # time.monotonic() of the last tool listing read (0: none yet)
        self.tools_stale = False  # the server said its tools changed (list_changed) and they were not read since
        self.first_attempt = anyio.Event()
        self._relisting = anyio.Lock()
        self._router = router
        self._on_listing = on_listing
        self._timing = timing
        self._live: _Live | None = None
        # The work asked for and not started yet: asking again for what is already due adds nothing (a flood of
        # list_changed costs one re-listing).
        self._work: set[Work] = set()
        self._work_asked = anyio.Event()
        self._gate = NotificationGate(
            spec.name,
            self._relist_due,
            per_second=spec.notifications_per_second,
            burst=spec.notification_burst,
            counts=self.status.notifications,
        )
        self._inbound = DownstreamInbound(spec, router, self._gate, lambda: self._wake("check"))

    def scrubbed(self, value: Any) -> Any:
        """`value` with the secrets resolved for this connection replaced (a result is journaled after this)."""
        live = self._live
        return scrub(value, live.secrets) if live is not None else value

    # --- supervision --------------------------------------------------------------------------------------------

    async def supervise(self) -> None:
        """Connect, serve until lost, wait, reconnect: for the proxy's lifetime (cancelled at shutdown); what its
        notifications cost is logged meanwhile."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._gate.report)
            await self._reconnecting()

    async def _reconnecting(self) -> None:
        delay = self._timing.retry_initial
        while True:
            self.status.state, self.status.attempts = "connecting", self.status.attempts + 1
            reason = await self._connect_and_serve()
            if self.status.connected_since is not None:
                delay = self._timing.retry_initial  # it was up a moment ago: try again soon
            self.status.state, self.status.problem = "down", reason
            self.status.connected_since = None
            self.status.retry_at = time.time() + delay
            logger.warning("%s", self.status.describe())
            self.first_attempt.set()
            await anyio.sleep(delay)
            delay = min(delay * 2, self._timing.retry_max)

    async def _connect_and_serve(self) -> str:
        """Returns why the connection ended (or never started)."""
        secrets: tuple[str, ...] = ()
        try:
            limit = settings.SAGA_PROXY_MAX_RESULT_BYTES
            raw = RawChannel() if self.spec.transport == "stdio" else HttpChannel(str(self.spec.url), limit)
            async with self._session(raw) as (session, init, secrets):
                listing = await lists.first_listing(session, self.spec, init, self._timing.list_timeout)
                self.tools_listed_at = time.monotonic()
                live = self._live = _Live(session, init, secrets, raw)
                self._connected(init, listing)
                await self._on_listing(self, listing, frozenset({"tools", "prompts", "resources", "instructions"}))
                self.first_attempt.set()
                await self._serve(live)
                return f"lost: {live.reason}"
        except ActionFailure as failure:  # a secret reference that cannot be resolved: nothing was started
            return failure.message
        except Exception as exc:
            return describe_failure(exc, secrets)
        finally:
            self._live = None

    def _connected(self, init: types.InitializeResult, listing: ServerListing) -> None:
        self.listing = listing
        self.status.state, self.status.problem, self.status.retry_at = "connected", "", None
        self.status.connected_since = time.time()
        self.status.server_name, self.status.server_version = init.server_info.name, init.server_info.version
        self.status.protocol_version = init.protocol_version
        self.status.tools = len(listing.tools)
        logger.info("%s", self.status.describe())

    async def _serve(self, live: _Live) -> None:
        """Until the connection is lost: re-list what changed, ping while idle."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._work_loop, live)
            await live.lost.wait()
            group.cancel_scope.cancel()

    async def _work_loop(self, live: _Live) -> None:
        while True:
            with anyio.move_on_after(self._timing.ping_interval):
                await self._work_asked.wait()
            # Nothing asked for a while: make sure the server is still there.
            due, self._work, self._work_asked = self._work or {"check"}, set(), anyio.Event()
            for kind in WORK_ORDER:
                if kind in due:
                    await self._refresh(live, kind)
            if due != {"check"}:
                await anyio.sleep(self._timing.relist_spacing)

    async def _ping(self, live: _Live) -> None:
        try:
            with anyio.fail_after(self._timing.ping_timeout):
                await live.session.send_request(types.PingRequest(), types.EmptyResult)
        except Exception as exc:
            self._mark_lost(live, f"no answer to a ping ({describe_failure(exc, live.secrets)})")

    async def _refresh(self, live: _Live, kind: Work) -> None:
        if kind == "check":
            await self._ping(live)
            return
        if self.listing is None:
            return
        try:
            timeout = self._timing.list_timeout
            fresh = await lists.fetch(live.session, kind, live.init.capabilities, timeout)
        except Exception as exc:  # the previous listing stays: a failed rebuild changes nothing
            self.status.listing_problem = f"listing its {kind} again failed ({describe_failure(exc, live.secrets)})"
            logger.error('downstream "%s": %s; the previous list stays', self.spec.name, self.status.listing_problem)
            self._wake("check")
            return
        self.status.listing_problem = ""
        if live is not self._live or self.listing is None:
            return  # the connection this answer came from has been replaced meanwhile
        if kind == "tools":
            self.tools_listed_at, self.tools_stale = time.monotonic(), False
        listing = self.listing = dataclasses.replace(self.listing, **fresh)
        self.status.tools = len(listing.tools)
        await self._on_listing(self, listing, frozenset({kind}))

    def _mark_lost(self, live: _Live, reason: str) -> None:
        if not live.lost.is_set():
            live.reason = reason
            live.lost.set()

    def _wake(self, kind: Work) -> bool:
        """Ask the work loop for `kind`; True when it was already due (this asking adds nothing)."""
        due = kind in self._work
        self._work.add(kind)
        self._work_asked.set()
        return due

    def _relist_due(self, kind: ListKind) -> bool:
        """The server said its `kind` list changed (the gate's list_changed); True when a re-listing was due."""
        if kind == "tools":
            self.tools_stale = True  # a call arriving before the re-listing reads the tools itself first
        return self._wake(kind)

    # --- the session --------------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _session(
        self, raw: RawChannel | HttpChannel
    ) -> AsyncIterator[tuple[ClientSession, types.InitializeResult, tuple[str, ...]]]:
        values, secrets = _resolve(self.spec)
        async with contextlib.AsyncExitStack() as stack:
            streams = await stack.enter_async_context(self._transport(stack, values, raw))
            inbound = self._inbound
            session = ClientSession(
                self._gate.gated(
                    raw.merged(streams[0], self._gate.admit, self._inbound.log)
                    if isinstance(raw, HttpChannel)
                    else streams[0]
                ),
                streams[1],
                sampling_callback=inbound.sampling,
                elicitation_callback=inbound.elicitation,
                list_roots_callback=inbound.roots,
                logging_callback=inbound.log,
                message_handler=inbound.message,
                client_info=CLIENT_INFO,
            )
            await stack.enter_async_context(session)
            with anyio.fail_after(self.connect_timeout):
                init = await session.initialize()
            if isinstance(raw, HttpChannel):
                raw.handshake_done(init.protocol_version)
            yield session, init, secrets

    @property
    def connect_timeout(self) -> float:
        chosen = self.spec.connect_timeout_seconds or self._timing.connect_timeout
        return float(chosen if chosen is not None else settings.SAGA_PROXY_CONNECT_TIMEOUT_SECONDS)

    @property
    def call_timeout(self) -> float:
        return float(self.spec.call_timeout_seconds or settings.SAGA_PROXY_CALL_TIMEOUT_SECONDS)

    def _transport(
        self, stack: contextlib.AsyncExitStack, values: dict[str, str], raw: RawChannel | HttpChannel
    ) -> Any:
        spec, limit = self.spec, settings.SAGA_PROXY_MAX_RESULT_BYTES
        if isinstance(raw, RawChannel):
            # The child's stderr joins ours: stdout is the MCP stream, stderr is where a server says what is wrong.
            return bounded_stdio_client(
                spec.command, list(spec.args), env=values or None, cwd=spec.cwd, max_message_bytes=limit, raw=raw
            )
        # No read timeout: a call may legitimately wait long (an elicitation waits for a person); pings notice a
        # dead server, and each request has its own call timeout.
        http = httpx2.AsyncClient(
            headers={"User-Agent": USER_AGENT, **values},
            timeout=httpx2.Timeout(30.0, read=None),
            transport=CappedBodies(limit, observe=raw.observe),
        )
        stack.push_async_callback(http.aclose)
        raw.attach(http)  # the fast path's plain calls go on the session's own client
        return streamable_http_client(spec.url, http_client=http, max_sse_event_size=limit)

    # --- requests from the proxy --------------------------------------------------------------------------------

    def _require(self) -> _Live:
        live = self._live
        if live is None or live.lost.is_set():
            problem = self.status.problem or "still connecting"
            raise DownstreamUnavailable(f'the MCP server "{self.spec.name}" is not connected ({problem})')
        return live

    async def request(self, request: Any, result_type: type[Any], relay: ClientRelay) -> Any:
        """Send one request for a client; its progress and the server's own requests go back through `relay`.
        Raises DownstreamUnavailable (not sent), DownstreamLost or DownstreamTimedOut (sent, no answer),
        ResultTooLarge (it answered past the limit) or the server's own MCPError."""
        live = self._require()
        timeout = self.call_timeout
        with self._router.serving(self.spec.name, relay):
            try:
                return await live.session.send_request(
                    request,
                    result_type,
                    request_read_timeout_seconds=timeout,
                    progress_callback=self._inbound.progress(relay),
                )
            except ValidationError as invalid:  # the server answered something that is not this method's result
                self._wake("check")
                raise not_a_result(str(getattr(request, "method", "the request's")), invalid) from None
            except MCPError as error:
                if (oversized := too_large(error, settings.SAGA_PROXY_MAX_RESULT_BYTES)) is not None:
                    raise oversized from None
                if sdk_timeout(error):
                    raise self._timed_out(timeout) from None
                if sdk_closed(error):
                    raise self._lost(live, error.message) from None
                self._wake("check")
                raise

    async def call_plain(self, params: dict[str, Any], relay: ClientRelay) -> dict[str, Any]:
        """tools/call with `params` as JSON; the `result` object as JSON. A stdio server is asked through its raw
        channel (sagas.protocols.proxy.raw_channel), any other through the session. Raises as `request` does, and
        MCPError for an answer that is not a tools/call result."""
        live = self._require()
        if live.raw is None or not live.raw.attached:
            return await self._call_through_session(params, relay)
        timeout = self.call_timeout
        with self._router.serving(self.spec.name, relay):
            try:
                message = await live.raw.call(params, timeout)
            except ChannelDeclined:  # the server did not take it (a redirect, say): the session asks it
                return await self._call_through_session(params, relay)
            except ChannelClosed:
                problem = self.status.problem or "its input is closed"
                raise DownstreamUnavailable(f'the MCP server "{self.spec.name}" is not connected ({problem})') from None
            except ChannelLost as lost:
                raise self._lost(live, str(lost)) from None
            except TimeoutError:
                raise self._timed_out(timeout) from None
        if "error" in message:
            if unreadable(message["error"]):
                raise DownstreamLost(
                    f'the MCP server "{self.spec.name}" answered with text that cannot be passed on (a lone UTF-16 '
                    "surrogate), so what it did is not known"
                )
            error = plain_error(message["error"])
            if (oversized := too_large(error, settings.SAGA_PROXY_MAX_RESULT_BYTES)) is not None:
                raise oversized
            if isinstance(live.raw, HttpChannel) and sdk_closed(error):  # the server ended the HTTP session
                raise self._lost(live, error.message)
            self._wake("check")
            raise error
        return plain_result(message.get("result"))

    async def _call_through_session(self, params: dict[str, Any], relay: ClientRelay) -> dict[str, Any]:
        request = types.CallToolRequest(params=types.CallToolRequestParams.model_validate(params))
        result = await self.request(request, types.CallToolResult, relay)
        dumped: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped

    def _timed_out(self, timeout: float) -> DownstreamTimedOut:
        return DownstreamTimedOut(
            f'the MCP server "{self.spec.name}" did not answer within {timeout:g}s (its timeoutMs, or '
            "SAGA_PROXY_CALL_TIMEOUT_SECONDS), so the request was cancelled"
        )

    def _lost(self, live: _Live, why: str) -> DownstreamLost:
        self._mark_lost(live, f"the connection closed during a request ({why})")
        return DownstreamLost(f'the connection to the MCP server "{self.spec.name}" was lost before it answered')

    async def relist(self, kind: lists.Kind) -> None:
        """Re-read one kind now (a client asked for the list); a failure keeps the previous list."""
        if (live := self._live) is not None and not live.lost.is_set():
            await self._refresh(live, kind)

    async def relist_tools_if_older(self, seconds: float) -> None:
        """Re-read the tools unless they were read less than `seconds` ago (calls waiting on one re-listing share
        it)."""
        async with self._relisting:
            if self.tools_stale or time.monotonic() - self.tools_listed_at >= seconds:
                await self.relist("tools")


def _resolve(spec: ServerSpec) -> tuple[dict[str, str], tuple[str, ...]]:
    """The env (stdio) or headers (HTTP) with secret references resolved, and the secret values to scrub from
    anything shown. ActionFailure (naming the reference, never a value) when one cannot be resolved."""
    raw = spec.env if spec.transport == "stdio" else spec.headers
    values = {name: resolve_header(value) for name, value in raw.items()}
    secrets = tuple(
        values[name].removeprefix(value.get("prefix", "")) for name, value in raw.items() if not isinstance(value, str)
    )
    return values, secrets
