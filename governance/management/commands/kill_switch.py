"""`semantic-saga kill_switch engage|release|status --tenant T [--saga ID]`: stop or resume new forward work."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.control_plane import cli_actor
from governance.identity.principal import Principal, local_principal
from governance.kill_switch import engaged, kill_switch_engage, kill_switch_release
from governance.models import KillSwitch


class Command(BaseCommand):
    help = (
        "Engage, release or show the kill switch of a tenant (or of one saga): while engaged, no saga begins and no "
        "step is planned, executed or started by any worker; rollback and rejection keep working."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["engage", "release", "status"])
        parser.add_argument("--tenant", required=True, help="Tenant id.")
        parser.add_argument("--saga", help="Only this saga (default: the whole tenant).")
        parser.add_argument("--reason", default="", help="Why (required to engage; shown to every refused caller).")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = self._actor(options["tenant"])
        saga_id = self._saga(options["saga"])
        if options["action"] == "engage":
            if not options["reason"]:
                raise CommandError("--reason is required to engage the kill switch.")
            switch = kill_switch_engage(actor=actor, reason=options["reason"], saga_id=saga_id)
            self.stdout.write(f"engaged: {switch} since {switch.engaged_at:%Y-%m-%d %H:%M:%S} ({switch.reason})")
        elif options["action"] == "release":
            released = kill_switch_release(actor=actor, saga_id=saga_id)
            self.stdout.write("released" if released else "was not engaged")
        else:
            current = engaged(options["tenant"], saga_id)
            others = KillSwitch.objects.filter(tenant_id=options["tenant"]).count()
            self.stdout.write(f"engaged: {current} ({current.reason})" if current else "not engaged")
            self.stdout.write(f"switches in tenant {options['tenant']}: {others}")

    @staticmethod
    def _actor(tenant_id: str) -> Principal:
        """The local operator, named by the OS account that ran the command: `engaged_by` and the control-plane
        chain say who did it (cli:<user>), not just that someone at a shell did."""
        shell = cli_actor()
        return replace(
            local_principal(protocol="cli", tenant_id=tenant_id),
            principal_id=shell.principal_id,
            principal_type=shell.principal_type,
        )

    @staticmethod
    def _saga(value: str | None) -> uuid.UUID | None:
        if value is None:
            return None
        try:
            return uuid.UUID(value)
        except ValueError as exc:
            raise CommandError(f"--saga must be a saga id (a UUID), got {value!r}.") from exc
