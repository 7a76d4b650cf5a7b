"""`semantic-saga mcp`: MCP over stdio for a local client (Claude Desktop, Claude Code, any MCP client).

The client starts this process and talks on stdin/stdout. There is no token: the process acts as the local
operator (`local-operator`, admin role, tenant SAGA_DEFAULT_TENANT), because whoever can start it already has the
database credentials. Logs go to stderr so they never corrupt the protocol stream.
"""

from __future__ import annotations

from typing import Any

import anyio
from django.conf import settings
from django.core.management.base import BaseCommand
from mcp.server.stdio import stdio_server

from governance.identity.principal import local_principal
from sagas.coordinator.execution.nudges import uses_celery
from sagas.management.commands.serve import refuse_to_start_unless_ready
from sagas.protocols.mcp.server import SagaServer, build_server
from sagas.sweeper import EmbeddedSweeper


class Command(BaseCommand):
    help = "Serve MCP over stdio as the local operator (admin of SAGA_DEFAULT_TENANT). Loads SAGA_ACTIONS_FILE."
    # The system checks run in handle, reported as one start-up message on stderr (stdout is the protocol).
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        refuse_to_start_unless_ready("semantic-saga mcp")
        principal = local_principal(protocol="stdio", tenant_id=settings.SAGA_DEFAULT_TENANT)
        server = build_server(lambda: principal)
        sweeper = None if uses_celery() else EmbeddedSweeper().start()
        try:
            anyio.run(self._serve, server)
        finally:
            if sweeper is not None:
                sweeper.stop()

    @staticmethod
    async def _serve(server: SagaServer) -> None:
        async with server.running(), stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
