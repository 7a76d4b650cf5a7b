"""An agent that speaks to `semantic-saga proxy` in raw JSON-RPC lines over its stdin and stdout: what an official
client would never send (batches, malformed lines, reused ids) can be sent, and every line that comes back is seen."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

PROTOCOL = "2025-11-25"


class RawAgent:
    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, stderr: Path) -> None:
        self._stderr = stderr.open("wb")
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=cwd
        )
        self._lines: queue.Queue[Any] = queue.Queue()
        self.seen: list[Any] = []  # every message received, in order
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(json.loads(line))
        self._lines.put(None)

    def send(self, message: Any) -> None:
        """A message (a dict or a list, written as one JSON line) or raw bytes (written as they are)."""
        assert self.process.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def call(self, request_id: Any, name: str, arguments: dict[str, Any] | None = None, **params: Any) -> None:
        body = {"name": name, "arguments": arguments or {}, **params}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body})

    def answer(self, request_id: Any, timeout: float = 60.0) -> dict[str, Any]:
        """The response (result or error) to `request_id`."""
        found = self.wait_for(
            lambda m: isinstance(m, dict) and m.get("id") == request_id and ("result" in m or "error" in m), timeout
        )
        return dict(found)

    def answers(self, request_id: Any, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The first `count` responses to `request_id` (an id used twice may be answered twice)."""

        def answered() -> list[dict[str, Any]]:
            return [m for m in self.seen if isinstance(m, dict) and m.get("id") == request_id and "method" not in m]

        with contextlib.suppress(AssertionError):
            self.wait_for(lambda m: len(answered()) >= count, timeout)
        return answered()

    def wait_for(self, matches: Any, timeout: float = 60.0) -> Any:
        for message in self.seen:
            if matches(message):
                return message
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if message is None:
                raise AssertionError(f"the proxy closed its stdout; stderr: {self.stderr()[-3000:]}")
            self.seen.append(message)
            if matches(message):
                return message
        raise AssertionError(f"no matching message within {timeout}s; seen: {self.seen[-10:]}")

    def handshake(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        params = {
            "protocolVersion": PROTOCOL,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw-agent", "version": "1.0.0"},
        }
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params})
        initialized = self.answer("init")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        self.answer("list")
        return initialized

    def close(self, timeout: float = 60.0) -> int:
        """Close stdin (the MCP way to end a stdio session) and wait for the proxy to exit."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(timeout)
        finally:
            self._stderr.close()

    def stderr(self) -> str:
        self._stderr.flush()
        return Path(self._stderr.name).read_text(errors="replace")
