"""`semantic-saga preview_report [ID|last]` (also `preview-report`, and `--session ID` as Sagaz spells it): what a
preview saga would have done to the world (a proxy session run dry: by Sagaz class with the would-have gates,
sagas.management.proxy_preview_output). Without an id: `last`, the newest proxy session. A whole saga id names any
preview saga; `last` and a short id name a proxy session of SAGA_DEFAULT_TENANT."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.errors import ServiceError
from governance.identity.principal import system_principal
from sagas.management.proxy_cli import operator, session
from sagas.management.proxy_preview_output import proxy_report_lines
from sagas.management.terminal import Paint
from sagas.models import Saga
from sagas.selectors import preview_report
from sagas.selectors.proxy_sessions import LAST


class Command(BaseCommand):
    help = (
        "Print the preview report of a preview saga: its dry-run steps grouped by reversibility (a proxy session: "
        "by class I, unknown, C, R, read, with the gates they would have met), which would wait for approval or be "
        "denied, the budget impact and the compensation plan. Nothing is executed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "saga_id",
            nargs="?",
            default=None,
            metavar="ID",
            help="The preview saga's id (begin_saga with preview=true), or a proxy session's short id, or `last` (the "
            "newest proxy session; the default).",
        )
        parser.add_argument("--session", default=None, help="The same as ID (Sagaz's spelling).")
        parser.add_argument("--json", action="store_true", help="Print the report as one JSON document.")

    def handle(self, *args: Any, **options: Any) -> None:
        ref = options["session"] or options["saga_id"] or LAST
        saga_id, tenant = _whole_id(ref) if _uuid_or_none(ref) else _proxy_session(ref)
        try:
            # An operator at the shell reads as the coordinator of the saga's own tenant.
            report = preview_report(actor=system_principal(tenant), saga_id=saga_id)
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
        elif report.get("grouping") == "sagaz_class":
            # Colour only on a terminal, never with NO_COLOR (sagas.management.terminal).
            self.stdout.write("\n".join(proxy_report_lines(report, Paint.for_stream(self.stdout))))
        else:
            self._table(report)

    def _table(self, report: dict[str, Any]) -> None:
        self.stdout.write(f"preview report: saga {report['saga_id']} ({report['status']})")
        self.stdout.write(report["summary"])
        self.stdout.write("\nwhat would have happened")
        for group in report["classes"]:
            outcomes = ", ".join(f"{n} {what}" for what, n in sorted(group["outside_preview"].items()))
            self.stdout.write(f"  {group['class']:<13} {group['count']:>3}  {', '.join(group['actions'])}")
            self.stdout.write(f"  {'':<13}      {group['meaning']}; {outcomes}")
        self.stdout.write(f"\n{'seq':>4}  {'key':<16} {'action':<24} {'class':<13} outside preview")
        for item in report["items"]:
            action = f"{item['action']}@{item['action_version']}"
            why = f" ({item['why']})" if item["why"] else ""
            self.stdout.write(
                f"{item['sequence']:>4}  {(item['key'] or '-'):<16} {action:<24} {item['class']:<13} "
                f"{item['outside_preview']}{why}"
            )
        self.stdout.write("\ncompensation plan (newest first, if it had run and were rolled back)")
        for entry in report["compensation_plan"] or [{"sequence": "-", "action": "nothing", "compensation": ""}]:
            self.stdout.write(f"  {entry['sequence']:>4}  {entry['action']}: {entry['compensation']}")
        budget = report["budget_impact"]
        self.stdout.write(f"\nbudget impact: {budget['steps']} step(s), {budget['risk_units']} risk unit(s)")
        audit = report["audit"]
        self.stdout.write(f"audit chain: {'valid' if audit['valid'] else 'BROKEN'} ({audit['events_checked']} events)")


def _whole_id(ref: str) -> tuple[str, str]:
    """A whole saga id: any preview saga, read in its own tenant."""
    tenant = Saga.objects.filter(pk=_uuid_or_none(ref) or "").values_list("tenant_id", flat=True).first()
    if tenant is None:
        raise CommandError(f"No saga {ref!r}. list_sagas (or the console) shows saga ids.")
    return ref, tenant


def _proxy_session(ref: str) -> tuple[str, str]:
    """`last` or a short id: a proxy session of the local operator's tenant, which must have run in preview."""
    saga = session(operator(), ref)
    if not saga.preview:
        which = "The newest proxy session" if ref.strip().lower() == LAST else f"Proxy session {ref!r}"
        raise CommandError(
            f"{which} ({saga.id}) did not run in preview: its calls really ran (`semantic-saga ledger --session "
            f"{saga.id}` shows them). Name a preview session: `semantic-saga status` marks them (preview)."
        )
    return str(saga.id), saga.tenant_id


def _uuid_or_none(value: str) -> str | None:
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None
