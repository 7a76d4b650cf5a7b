"""How a downstream call or connection failed, in the proxy's words: not sent, lost, timed out; and the SDK's own
errors that mean one of them (as opposed to a server's error answer that happens to use the same code)."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT

from registry.secrets import scrub

# Kept from a failure's text in status and logs.
DETAIL_LIMIT = 500


class DownstreamUnavailable(Exception):
    """The server is not connected: the request was NOT sent."""


class DownstreamLost(Exception):
    """The request was sent but the connection was lost before the answer: it may or may not have acted."""


class DownstreamTimedOut(DownstreamLost):
    """The request was sent and no answer came within the server's call timeout: it was cancelled, and whether it
    acted is unknown."""


def sdk_timeout(error: MCPError) -> bool:
    """The client session's own timeout, not a server's error that happens to use its code (-32001): the session
    says `Request '<method>' timed out` and attaches nothing."""
    return error.code == REQUEST_TIMEOUT and error.error.data is None and error.message.endswith("timed out")


def sdk_closed(error: MCPError) -> bool:
    """The connection closed under the request: the session's own -32000 ("Connection closed", or the Streamable
    HTTP client's "SSE stream failed / ended ..."), or an HTTP session the server ended; not a server's error
    answer that uses the same code with words of its own."""
    if "Session terminated" in error.message:
        return True
    own = error.message == "Connection closed" or error.message.startswith(_HTTP_STREAM_LOST)
    return error.code == CONNECTION_CLOSED and error.error.data is None and own


# How the SDK's Streamable HTTP client words a request whose response stream broke or ended without an answer.
_HTTP_STREAM_LOST = "SSE stream "


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe_failure(exc: BaseException, secrets: tuple[str, ...]) -> str:
    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        text = f"MCP error {leaf.code}: {leaf.message}"
    elif isinstance(leaf, TimeoutError):
        text = "no answer in time"
    else:
        text = f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__
    text = str(scrub(text, secrets))
    return text if len(text) <= DETAIL_LIMIT else text[: DETAIL_LIMIT - 3] + "..."
