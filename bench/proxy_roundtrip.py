"""A no-op downstream tool called directly vs through the MCP proxy (issue 17, "Measure"), over Streamable HTTP.

Downstream: bench/mcp_bare.py (a bare MCPServer with one no-op tool and a static bearer token). Direct: the
official `mcp` client calls that tool on it. Proxied: the same client calls the same tool through
`semantic-saga serve` at /proxy/mcp (SAGA_PROXY_CONFIG names the downstream, a tool rule gates `noop` allow), with
the bench database (PostgreSQL) behind it, so whatever the proxy journals per call is paid for in the figure.
One call per iteration, one stateful session per round (client mode `legacy`), rounds alternating.

Standalone: `.venv/bin/python -m bench.proxy_roundtrip [--rounds N] [--iterations N]` prints both sides' p50 and
p99 and the ratio; `bench/run.py` runs it as its `proxy` phase.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import Child, Children, free_port, median, progress, saga_env
from bench.mcp_roundtrip import PRINCIPAL, TOKEN, wait_ready

PROXY_PATH = "/proxy/mcp"


def start_downstream(children: Children) -> tuple[Child, str]:
    """Start (without waiting) the no-op downstream; returns it and its /mcp URL."""
    port = free_port()
    command = [sys.executable, "-m", "bench.mcp_bare", "--port", str(port), "--token", TOKEN]
    return children.start("proxy-downstream", command, saga_env()), f"http://127.0.0.1:{port}/mcp"


def proxy_config(downstream_url: str) -> dict[str, Any]:
    """The proxy configuration: the no-op downstream, its token as a header, and `noop` gated allow."""
    return {
        # The benchmark's own server: trusted on first use (an HTTP proxy reviews every tool first by default).
        "servers": {
            "bench": {"url": downstream_url, "headers": {"Authorization": f"Bearer {TOKEN}"}, "trust": "first-use"}
        },
        "policy": {"tools": [{"tool": "noop", "action": "allow", "reason": "the benchmark's no-op"}]},
    }


def start_proxy(children: Children, downstream_url: str) -> tuple[Child, str]:
    """Start (without waiting) `semantic-saga serve` with the proxy in front of `downstream_url` (start the proxy
    once the downstream answers, so its first connection attempt succeeds); returns it and its /proxy/mcp URL."""
    port = free_port()
    children.log_dir.mkdir(parents=True, exist_ok=True)
    config = children.log_dir / "bench-proxy.json"
    config.write_text(json.dumps(proxy_config(downstream_url)))
    tokens = children.log_dir / "proxy-tokens.json"
    tokens.write_text(json.dumps({"tokens": {TOKEN: PRINCIPAL}}))
    env = saga_env(
        SAGA_AUTH_MODE="static",
        SAGA_AUTH_STATIC_TOKENS=str(tokens),
        SAGA_PUBLIC_URL=f"http://127.0.0.1:{port}",
        SAGA_PROXY_CONFIG=str(config),
        SAGA_SWEEP_INTERVAL_SECONDS="86400",  # as for the MCP round trip: the sweeper stays out of the run
    )
    command = [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port), "--log-level", "warning"]
    return children.start("proxy-serve", command, env), f"http://127.0.0.1:{port}{PROXY_PATH}"


async def _calls(url: str, iterations: int) -> list[float]:
    """Seconds per no-op call over one session; the first call of the session is not timed."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timeout = httpx2.Timeout(30.0, read=60.0)
    samples: list[float] = []
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        await _noop(client)  # warm-up: the session, the tool list, server-side imports
        for _ in range(iterations):
            started = time.perf_counter()
            await _noop(client)
            samples.append(time.perf_counter() - started)
    return samples


async def _noop(client: Client) -> None:
    result = await client.call_tool("noop", {})
    if result.is_error:
        text = result.content[0].text if result.content else result  # type: ignore[union-attr]
        raise RuntimeError(f"the no-op call failed: {text}")


def round_trip(url: str, iterations: int) -> list[float]:
    return asyncio.run(_calls(url, iterations))


@dataclass(frozen=True)
class Servers:
    downstream: Child
    direct_url: str
    proxy: Child
    proxied_url: str

    def stop(self) -> None:
        self.proxy.stop()
        self.downstream.stop()


def start_both(children: Children) -> Servers:
    """Start the downstream, then the proxy in front of it, and wait for both."""
    downstream, direct_url = start_downstream(children)
    wait_ready(downstream, direct_url)
    proxy, proxied_url = start_proxy(children, direct_url)
    wait_ready(proxy, proxied_url)
    return Servers(downstream, direct_url, proxy, proxied_url)


def alternate(servers: Servers, rounds: int, iterations: int) -> dict[str, list[list[float]]]:
    """Per-call samples of each side, round by round, the order of the two sides swapped every round."""
    out: dict[str, list[list[float]]] = {"direct": [], "proxied": []}
    for round_no in range(rounds):
        pair = [("direct", servers.direct_url), ("proxied", servers.proxied_url)]
        for name, url in pair if round_no % 2 == 0 else pair[::-1]:
            out[name].append(round_trip(url, iterations))
            progress(f"proxy round {round_no + 1} {name}: {median(out[name][-1]) * 1000:.2f} ms per no-op call")
    return out


def main() -> None:
    from bench import common

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args()
    common.setup_django()  # the bench database, created and migrated, as the proxy's serve uses it
    children = common.Children(common.WORK / "logs")
    try:
        samples = alternate(start_both(children), args.rounds, args.iterations)
    finally:
        children.stop_all()
    direct, proxied = common.summarize(samples["direct"]), common.summarize(samples["proxied"])
    paired = common.paired_ratio(proxied.round_medians, direct.round_medians)
    print(f"direct:  p50 {direct.p50 * 1000:.2f} ms  p99 {direct.p99 * 1000:.2f} ms  (n={direct.n})")
    print(f"proxied: p50 {proxied.p50 * 1000:.2f} ms  p99 {proxied.p99 * 1000:.2f} ms  (n={proxied.n})")
    print(f"proxied p50 / direct p50 (median of per-round ratios): {paired:.2f}x (target <= 2.00x)")


if __name__ == "__main__":
    main()
