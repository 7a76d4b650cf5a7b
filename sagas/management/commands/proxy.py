"""`semantic-saga proxy --config FILE [--preview]`: the MCP proxy over stdio for a local client (Claude Code,
Claude Desktop), in front of the downstream servers the configuration names.

There is no token: the process acts as the local agent of SAGA_DEFAULT_TENANT (role `agent`: it calls tools, and
never decides a held call; a person does, as someone else: governance.identity.principal.local_agent).
Logs, and the stderr of stdio downstream servers, go to stderr so they never corrupt the protocol stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import os
import signal
import threading
from typing import Any

import anyio
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.identity.principal import Principal, local_agent
from sagas.management.commands.serve import refuse_to_start_unless_ready
from sagas.protocols.proxy.catalog import NameCollision
from sagas.protocols.proxy.config import ProxyConfigError, load_proxy_config
from sagas.protocols.proxy.durable import DurableCallPath
from sagas.protocols.proxy.fast_calls import FastCalls
from sagas.protocols.proxy.runtime import Proxy, build_proxy, journaled
from sagas.protocols.proxy.stdio_front import stdio_front

logger = logging.getLogger("sagas.protocols.proxy")


class Command(BaseCommand):
    help = (
        "Serve the MCP proxy over stdio as the local operator: one MCP server in front of the downstream servers "
        "the --config file names."
    )
    # The system checks run in handle, reported as one start-up message on stderr (stdout is the protocol).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--config", required=True, help="The proxy configuration file (a sagaz.config.json works).")
        parser.add_argument(
            "--preview", action="store_true", help="Run the session dry: reads run, nothing else reaches the world."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        refuse_to_start_unless_ready("semantic-saga proxy")
        try:
            config = load_proxy_config(options["config"])
        except ProxyConfigError as problem:
            raise CommandError(problem.message) from None
        config = dataclasses.replace(config, served_over="stdio", preview=config.preview or options["preview"])
        principal = local_agent(protocol="mcp-proxy-stdio", tenant_id=settings.SAGA_DEFAULT_TENANT)
        proxy = build_proxy(config, lambda: principal, call_path=journaled)
        signal.signal(signal.SIGTERM, _stop_as_on_ctrl_c)
        try:
            anyio.run(self._serve, proxy, principal)
        except NameCollision as collision:
            raise CommandError(f"semantic-saga proxy did not start ({config.path}): {collision}") from None

    @staticmethod
    async def _serve(proxy: Proxy, principal: Principal) -> None:
        with anyio.CancelScope() as serving:
            # From here SIGTERM stops the proxy as the end of the agent's input does, at the next await of each task
            # (never between a call's answer and the line that records it, which no await separates).
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, _stop_serving, serving)
            await Command._serve_until_stopped(proxy, principal)

    @staticmethod
    async def _serve_until_stopped(proxy: Proxy, principal: Principal) -> None:
        async with proxy.running():
            # What is loaded by now (Django, the SDK, the catalog: some hundred thousand objects) stays for the
            # session: out of the collector's sight, a full collection during a call walks the call's objects only
            # instead of pausing it for milliseconds (the proxy's p99, docs/benchmarks.md).
            gc.freeze()
            path = proxy.call_path
            fast = FastCalls(proxy.server, path, principal) if isinstance(path, DurableCallPath) else None
            async with stdio_front(fast if settings.SAGA_PROXY_FAST_PATH else None) as ((reads, writes), front):
                try:
                    await proxy.server.run(reads, writes, proxy.server.create_initialization_options())
                finally:
                    if fast is not None:  # the agent's input ended: its fast calls still out end as the SDK's do
                        with anyio.CancelScope(shield=True):
                            await fast.aclose(front)


# How long a stopping proxy may take to shut down before it exits anyway: its shutdown (the reads' journal lines
# queued behind their answers first) takes well under this; what can outlast it is the SDK's reader of stdin, which
# waits for a line a client that sent SIGTERM may never send or close.
STOP_GRACE_SECONDS = 10.0


def _stop_serving(serving: anyio.CancelScope) -> None:
    """SIGTERM while serving: cancel the session's tasks, whose shutdown then runs as on the end of the input
    (calls still out recorded, the journal closed with nothing lost), and exit even if that hangs."""
    _exit_after_grace(signal.SIGTERM)
    serving.cancel()


def _exit_after_grace(signum: int) -> None:
    deadline = threading.Timer(STOP_GRACE_SECONDS, os._exit, args=(128 + signum,))
    deadline.daemon = True  # a shutdown that finishes sooner exits sooner
    deadline.start()


def _stop_as_on_ctrl_c(signum: int, frame: object) -> None:
    """SIGTERM, as supervisors and clients stop a child: shut down as on Ctrl-C (journal, leases, downstreams), not
    vanish with the reads' lines still queued; then exit even if stdin is still open. (While the proxy starts; once
    it serves, `_stop_serving` takes SIGTERM.)"""
    _exit_after_grace(signum)
    raise KeyboardInterrupt
