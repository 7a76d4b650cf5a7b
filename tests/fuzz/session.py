"""One official MCP client session kept open on a background event loop, so that a synchronous hypothesis test can
send many tool calls through it (hypothesis' @given does not drive an async test, and a session per example would
spend the budget on handshakes). Every HTTP answer's status is recorded: a fuzzer fails on any 5xx."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

Job = Callable[[Client], Awaitable[Any]]


class Session:
    def __init__(self, url: str, token: str | None, mode: str = "auto") -> None:
        self.url, self.token, self.mode = url, token, mode
        self.statuses: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._queue: asyncio.Queue[tuple[Job, Future[Any]] | None] | None = None
        self._done: Future[None] = Future()

    async def _record(self, response: httpx2.Response) -> None:
        self.statuses.append(response.status_code)

    async def _serve(self, ready: Future[None]) -> None:
        # The client's context is entered and left by this one task (anyio's cancel scopes require it).
        self._queue = asyncio.Queue()
        timeout = httpx2.Timeout(30.0, read=120.0)
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks={"response": [self._record]}) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=self.mode) as client,
        ):
            ready.set_result(None)
            while (item := await self._queue.get()) is not None:
                job, future = item
                try:
                    future.set_result(await job(client))
                except Exception as error:  # handed to the test thread, which raises it there
                    future.set_exception(error)

    def run(self, job: Job, timeout: float = 120) -> Any:
        future: Future[Any] = Future()
        assert self._queue is not None
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (job, future))
        return future.result(timeout)

    def call_tool(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The tool result, or the MCPError of a JSON-RPC error answer."""

        async def job(client: Client) -> Any:
            try:
                return await client.call_tool(tool, arguments)
            except MCPError as error:
                return error

        return self.run(job)


@contextmanager
def open_session(url: str, token: str | None, mode: str = "auto") -> Iterator[Session]:
    session = Session(url, token, mode)
    thread = threading.Thread(target=session._loop.run_forever, daemon=True)
    thread.start()
    ready: Future[None] = Future()
    served = asyncio.run_coroutine_threadsafe(session._serve(ready), session._loop)
    try:
        ready.result(60)
        yield session
    finally:
        if session._queue is not None:
            session._loop.call_soon_threadsafe(session._queue.put_nowait, None)
        try:
            served.result(60)
        finally:
            session._loop.call_soon_threadsafe(session._loop.stop)
            thread.join(10)
