"""What a downstream server sends the proxy on its own: its requests (elicitation, sampling, roots) and its
notifications (log messages, progress), on their way to the agent in flight (sagas.protocols.proxy.relay).

Notifications go through the server's NotificationGate (sagas.protocols.proxy.floods): one that would wait for an
agent that is not reading is dropped and counted.

A server's elicitation reaches the agent's client marked as the server's, so the person shown it can tell it from
the proxy's own approval of a held call (sagas.protocols.proxy.elicited): its message starts with
`[asked by the MCP server "NAME", not by Semantic Saga]`, NAME being the server's name in the proxy configuration
(the operator's, never the server's own). A form that uses a property of the proxy's approval form (`approve`) is
refused: answered with an error, nobody asked. A server whose configuration says `"elicitation": "refuse"` never
reaches the agent with one: it is answered with an error saying so.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable
from typing import Any

import mcp.types as types
from mcp.shared.dispatcher import ProgressFnT
from mcp_types.jsonrpc import INVALID_REQUEST

from sagas.protocols.proxy.floods import NotificationGate
from sagas.protocols.proxy.relay import ClientRelay, RelayRouter
from sagas.protocols.proxy.specs import ServerSpec

logger = logging.getLogger("sagas.protocols.proxy")

# The properties of the proxy's own approval form (sagas.protocols.proxy.elicited.SCHEMA, which cannot be imported
# here: it depends on the call path, which depends on the downstream connections). A test keeps the two in step.
RESERVED_PROPERTIES = frozenset({"approve"})


def marked(server: str, params: types.ElicitRequestParams) -> types.ElicitRequestParams:
    """`params` with its message labelled as `server`'s, and cleared of characters that could move, hide or reorder
    what a client shows after the label (terminal escapes, carriage returns, bidirectional controls)."""
    label = f'[asked by the MCP server "{server}", not by Semantic Saga]'
    return params.model_copy(update={"message": f"{label}\n{shown_plainly(params.message)}"})


def shown_plainly(text: str) -> str:
    """`text` with control and format characters (Unicode categories Cc and Cf: ESC, CR, backspace, U+202E, zero
    width ones) written as visible `\\uXXXX` escapes; newlines and tabs stay."""
    return "".join(
        char if char in "\n\t" or unicodedata.category(char) not in ("Cc", "Cf") else f"\\u{ord(char):04x}"
        for char in text
    )


def elicitation_refusal(spec: ServerSpec, params: types.ElicitRequestParams) -> types.ErrorData | None:
    """The error `spec`'s server gets instead of its elicitation reaching the agent, or None to relay it."""
    if spec.elicitation == "refuse":
        return types.ErrorData(
            code=INVALID_REQUEST,
            message=f'This proxy does not pass elicitation from the MCP server "{spec.name}" to its agents (its '
            f'configuration says servers.{spec.name}.elicitation: "refuse"), so nobody was asked. Go on without the '
            "answer, or ask the proxy's operator to relay this server's questions.",
        )
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    reused = sorted(RESERVED_PROPERTIES & set(properties)) if isinstance(properties, dict) else []
    if reused:
        return types.ErrorData(
            code=INVALID_REQUEST,
            message=f"The form names the property {reused[0]!r}, which this proxy reserves for its own approval of "
            "held calls (a person could take the form for one), so nobody was asked. Name the property otherwise.",
        )
    return None


class DownstreamInbound:
    """The callbacks of one downstream's client session for what the server sends on its own."""

    def __init__(
        self, spec: ServerSpec, router: RelayRouter, gate: NotificationGate, on_transport_problem: Callable[[], object]
    ) -> None:
        self._spec = spec
        self._router = router
        self._gate = gate
        self._on_transport_problem = on_transport_problem

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        relay = self._router.refusal(self._spec.name, "sampling")
        return relay if isinstance(relay, types.ErrorData) else await relay.sample(params)

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> Any:
        if (refusal := elicitation_refusal(self._spec, params)) is not None:
            logger.warning('downstream "%s" asked for an elicitation; refused: %s', self._spec.name, refusal.message)
            return refusal
        relay = self._router.refusal(self._spec.name, "elicitation")
        if isinstance(relay, types.ErrorData):
            return relay
        return await relay.elicit(marked(self._spec.name, params))

    async def roots(self, context: Any) -> Any:
        relay = self._router.refusal(self._spec.name, "roots")
        return relay if isinstance(relay, types.ErrorData) else await relay.list_roots()

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self._gate.relay(lambda: self._router.log(self._spec.name, params), "notifications/message")

    def progress(self, relay: ClientRelay) -> ProgressFnT:
        """The progress callback of a request served for `relay`'s client."""

        async def forward(progress: float, total: float | None, message: str | None) -> None:
            await self._gate.relay(lambda: relay.progress(progress, total, message), "notifications/progress")

        return forward

    async def message(self, message: types.ServerNotification | Exception) -> None:
        # list_changed never gets here: the gate queues the re-listing (sagas.protocols.proxy.floods).
        if isinstance(message, Exception):
            logger.warning('downstream "%s" transport problem: %r', self._spec.name, message)
            self._on_transport_problem()
