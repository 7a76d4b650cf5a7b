"""The demo world (examples/demo_mcp_server.py) over Streamable HTTP, holding back the answer to the first undo
inverse it receives for one tool: the call is applied, then its answer waits until a release file exists. An undo
killed while it waits has sent an inverse that took effect without learning so, the worst moment to die.

    python tests/proxy/held_demo_server.py --port N --hold create_contact --held-file H --release-file R

`--held-file` is written (with the held call's idempotency key) once the answer is being held. Only the first
matching call is held, so the resumed undo's repeat of it is answered at once.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import uvicorn

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo_mcp_server.py"
IDEMPOTENCY_META_KEY = "io.semantic-saga/idempotency_key"
RELEASE_POLL_SECONDS = 0.05
# A held answer is given up after this long, so a test that failed early does not leave a request open for ever.
HOLD_LIMIT_SECONDS = 120.0

Scope = dict[str, Any]
Message = dict[str, Any]


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_mcp_server", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class HoldFirstInverse:
    """ASGI middleware: reads each POST body, and for the first tools/call of `tool` whose idempotency key ends in
    `:rollback` lets the world apply it but holds its answer (the response body carrying the result)."""

    def __init__(self, app: Any, tool: str, held_file: Path, release_file: Path) -> None:
        self.app, self.tool, self.held_file, self.release_file = app, tool, held_file, release_file
        self.holding = False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        buffered = await _read_body(receive)
        body = b"".join(message.get("body", b"") for message in buffered)
        key = self._inverse_key(body)
        if key and not self.holding:
            self.holding = True
            send = self._holding_send(send, key)

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)

    def _inverse_key(self, body: bytes) -> str:
        try:
            request = json.loads(body)
        except ValueError:
            return ""
        params = request.get("params") if isinstance(request, dict) else None
        if request.get("method") != "tools/call" or not isinstance(params, dict) or params.get("name") != self.tool:
            return ""
        key = (params.get("_meta") or {}).get(IDEMPOTENCY_META_KEY, "")
        return key if isinstance(key, str) and key.endswith(":rollback") else ""

    def _holding_send(self, send: Any, key: str) -> Any:
        async def held(message: Message) -> None:
            if message["type"] == "http.response.body" and b'"result"' in message.get("body", b""):
                self.held_file.write_text(key)
                with anyio.move_on_after(HOLD_LIMIT_SECONDS):
                    while not self.release_file.exists():
                        await anyio.sleep(RELEASE_POLL_SECONDS)
            await send(message)

        return held


async def _read_body(receive: Any) -> list[Message]:
    messages = [await receive()]
    while messages[-1].get("more_body", False):
        messages.append(await receive())
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--hold", required=True, help="the tool whose first undo inverse's answer is held")
    parser.add_argument("--held-file", type=Path, required=True)
    parser.add_argument("--release-file", type=Path, required=True)
    args = parser.parse_args()
    demo = _demo()
    app = HoldFirstInverse(demo.http_app(demo.build_server(demo.World())), args.hold, args.held_file, args.release_file)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
