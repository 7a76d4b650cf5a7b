"""Running the proxy under test and its real downstream servers (examples/demo_mcp_server.py and
tests/proxy/tiny_server.py), each a process of its own on 127.0.0.1; the expensive ones are shared per module."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

from governance.identity.principal import Principal, local_agent
from sagas.protocols.proxy.config import load_proxy_config
from sagas.protocols.proxy.downstream import Timing
from sagas.protocols.proxy.runtime import CallPathFactory, Proxy, build_proxy, forwarding
from tests.distributed.workers import free_port, shared_database_url
from tests.protocols.conftest import TOKENS

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo_mcp_server.py"
TINY = Path(__file__).with_name("tiny_server.py")
# Quick retries, so a test that starts a server late does not wait half a minute for the next attempt.
FAST = Timing(retry_initial=0.2, retry_max=1.0, ping_interval=2.0, ping_timeout=5.0)
READY_SECONDS = 60


def stdio(script: Path, *args: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(script), *args], **extra}


def config_file(directory: Path, servers: dict[str, Any], **extra: Any) -> Path:
    path = directory / f"proxy-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"servers": servers, **extra}))
    return path


def wait_for_port(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server on port {port} exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listened on port {port} within {READY_SECONDS}s")


@dataclass
class HttpDownstream:
    script: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpDownstream:
        command = [sys.executable, str(self.script), "--http", "--port", str(self.port)]
        self.proc = subprocess.Popen(command, cwd=ROOT)
        wait_for_port(self.port, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def demo_http() -> Iterator[HttpDownstream]:
    """The demo world over Streamable HTTP (its state is shared by the module's tests)."""
    server = HttpDownstream(DEMO, free_port()).start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class ServedProxy:
    """A proxy served over Streamable HTTP by uvicorn in a thread of this process (no auth: the local operator)."""

    proxy: Proxy
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@contextlib.contextmanager
def serve_proxy(
    config_path: Path,
    *,
    page_size: int | None = None,
    call_path: CallPathFactory = forwarding,
    principal: Principal | None = None,
) -> Iterator[ServedProxy]:
    """Every request is `principal`'s (default: the local agent of tenant acme, as `semantic-saga proxy` acts)."""
    principal = principal or local_agent(protocol="test", tenant_id="acme")
    proxy = build_proxy(load_proxy_config(config_path), lambda: principal, timing=FAST, call_path=call_path)
    if page_size is not None:
        proxy.server.page_size = page_size
    sdk_app = proxy.server.streamable_http_app(streamable_http_path="/mcp")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with proxy.running(), proxy.server.session_manager.run():
            yield

    port = free_port()
    app = Starlette(routes=[Route("/mcp", endpoint=sdk_app)], lifespan=lifespan)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="proxy-under-test", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not server.started:
            assert thread.is_alive(), "the proxy stopped during start-up (see the log above)"
            assert time.monotonic() < deadline, "the proxy did not start"
            time.sleep(0.05)
        yield ServedProxy(proxy, port)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def served(demo_http: HttpDownstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedProxy]:
    """demo over HTTP (no prefix) and tiny over stdio (prefix `tiny`), three items per page to the client."""
    servers = {"demo": {"url": demo_http.url}, "tiny": stdio(TINY, prefix="tiny")}
    with serve_proxy(config_file(tmp_path_factory.mktemp("proxy"), servers), page_size=3) as running:
        yield running


def serve_command(workdir: Path, proxy_config: Path) -> tuple[list[str], dict[str, str], int]:
    """`semantic-saga serve` with the proxy at /proxy/mcp on the test database (static tokens: TOKENS of
    tests/protocols/conftest.py): its command, environment and port."""
    tokens = workdir / "tokens.json"
    tokens.write_text(json.dumps({"tokens": TOKENS}))
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "SAGA_AUTH_MODE": "static",
        "SAGA_AUTH_STATIC_TOKENS": str(tokens),
        "SAGA_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "SAGA_PROXY_CONFIG": str(proxy_config),
    }
    command = [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port), "--log-level", "warning"]
    return command, env, port
