"""Listing a downstream server's tools (tools/list, every page) for `import_mcp_tools`.

The same connection and failure handling as a tool call: a server that cannot be reached or started is an
ActionFailure saying so; nothing is called.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
from mcp.types import Tool

from registry.actions.mcp._connection import (
    DEFAULT_TIMEOUT_SECONDS,
    Connection,
    Progress,
    connection,
    open_client,
    run_blocking,
    stderr_log,
)
from registry.actions.mcp._failures import failure

logger = logging.getLogger("registry.actions.mcp")

# Pages of tools/list read at most; 100 pages is far beyond any real server and bounds a misbehaving cursor.
MAX_TOOL_PAGES = 100


@dataclass(frozen=True)
class ServerListing:
    name: str | None
    version: str | None
    protocol_version: str
    tools: list[Tool]


async def _list(conn: Connection, progress: Progress, timeout: float, errlog: TextIO) -> None:
    with anyio.fail_after(timeout):
        async with open_client(conn, timeout, errlog) as client:
            progress.phase = "list"
            progress.server = client.server_info
            progress.protocol_version = client.protocol_version
            cursor: str | None = None
            for _ in range(MAX_TOOL_PAGES):
                page = await client.list_tools(cursor=cursor)
                progress.tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            progress.phase = "done"


def list_tools(server: dict[str, Any], *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> ServerListing:
    """Connect to a server block (literal values or secret references) and list its tools; ActionFailure when the
    server cannot be reached or started."""
    conn = connection(server)
    progress = Progress()
    with stderr_log() as errlog:
        try:
            run_blocking(functools.partial(_list, conn, progress, timeout, errlog))
        except Exception as exc:
            if progress.phase != "done":
                raise failure(exc, progress, conn, "tools/list", timeout, errlog, retry_lost=True) from None
            logger.warning("closing the MCP connection to %s failed after listing: %r", conn.where, exc)
    info = progress.server
    return ServerListing(
        name=info.name if info else None,
        version=info.version if info else None,
        protocol_version=progress.protocol_version,
        tools=progress.tools,
    )
