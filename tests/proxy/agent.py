"""The agent: the official `mcp` client talking to the proxy, with callbacks that answer and record what the
proxy relays from downstream servers (elicitation, sampling, roots, progress, logs, list_changed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

MODES = ["legacy", "auto"]
WAIT_SECONDS = 30


@dataclass
class Agent:
    """What the agent's client was asked and told."""

    elicitations: list[str] = field(default_factory=list)
    samplings: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    notifications: list[str] = field(default_factory=list)
    answer: str = "forty-two"
    heard: anyio.Event = field(default_factory=anyio.Event)

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicitations.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": self.answer})

    async def sample(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.samplings.append(str(params.messages[0].content.text))  # type: ignore[union-attr]
        content = types.TextContent(type="text", text="a short summary")
        return types.CreateMessageResult(role="assistant", content=content, model="agent-model")

    async def roots(self, context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/agent-root", name="agent")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(str(params.data))

    async def message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.notifications.append(message.method)
            self.heard.set()

    async def wait_for(self, method: str) -> None:
        """Until a notification `method` arrived (fails after WAIT_SECONDS)."""
        with anyio.fail_after(WAIT_SECONDS):
            while method not in self.notifications:
                self.heard = anyio.Event()
                await self.heard.wait()

    def callbacks(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicit,
            "sampling_callback": self.sample,
            "list_roots_callback": self.roots,
            "logging_callback": self.log,
            "message_handler": self.message,
        }


@asynccontextmanager
async def connect(url: str, mode: str, agent: Agent | None = None, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    callbacks = (agent or Agent()).callbacks()
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, cache=None, **callbacks) as client,
    ):
        yield client


async def tool_names(client: Client) -> list[str]:
    """Every page of tools/list."""
    names: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        names += [tool.name for tool in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return names


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))
