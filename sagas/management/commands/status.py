"""`semantic-saga status`: the proxy sessions of this tenant, newest first, with their state, calls by status and
checkpoints, and what needs an operator (held calls, sessions waiting for recovery or a failed rollback)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sagas.management.proxy_cli import operator
from sagas.management.terminal import Paint, table
from sagas.selectors.proxy_session_lines import SessionLine, session_lines
from sagas.selectors.proxy_sessions import held_calls_pending, proxy_sessions
from sagas.selectors.undo_outcome import UNDO_STATE_WORDS, attention
from sagas.states import SagaStatus

NEEDS_AN_OPERATOR = {SagaStatus.RECOVERY_REQUIRED, SagaStatus.ROLLBACK_FAILED}
SAGA_STYLES: dict[str, str] = {
    SagaStatus.ACTIVE: "green",
    SagaStatus.COMMITTED: "cyan",
    SagaStatus.ROLLED_BACK: "cyan",
    SagaStatus.RECOVERY_REQUIRED: "red",
    SagaStatus.ROLLBACK_FAILED: "red",
    SagaStatus.FAILED: "yellow",
    SagaStatus.ROLLING_BACK: "yellow",
    "undone": "cyan",
    "undone, calls left": "yellow",
    "undo stopped": "red",
    "undo interrupted": "red",
    "undoing": "yellow",
}
COLUMNS = [("session", "<"), ("started", "<"), ("state", "<"), ("client", "<"), ("calls", ">"), ("by status", "<")]


class Command(BaseCommand):
    help = "Show the proxy sessions (newest first), their state and calls, and what waits for an operator."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--limit", type=int, default=20, help="How many sessions to show (20).")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = operator()
        lines = session_lines(actor=actor, limit=options["limit"])
        held = held_calls_pending(actor=actor)
        paint = Paint.for_stream(self.stdout)
        if not lines:
            self.stdout.write(
                "No proxy session yet. Route an MCP client through `semantic-saga proxy --config FILE` and make a "
                "call: each client session is recorded as a saga."
            )
            return
        self.stdout.write(table(COLUMNS, [_cells(line) for line in lines], paint, _style))
        waiting = [line for line in lines if line.status in NEEDS_AN_OPERATOR or _undo_stuck(line)]
        residue = [line for line in lines if line.undo is not None and line.undo.state == "undone_with_calls_left"]
        shown = {line.id for line in lines}
        # Older sessions past --limit count too: an undo stopped a month ago still needs someone.
        everywhere = attention(proxy_sessions(actor))
        unseen_stuck = [pk for pk in everywhere.stuck if pk not in shown]
        unseen_left = [pk for pk in everywhere.with_calls_left if pk not in shown]
        running = [line for line in lines if line.undo is not None and line.undo.state == "undoing"]
        overall, colour = _overall(bool(waiting or held or unseen_stuck), bool(residue or unseen_left), bool(running))
        self.stdout.write(
            paint(f"overall: {overall}", colour)
            + f" ({len(lines)} session(s) shown, {len(held)} call(s) held for approval, {len(waiting)} session(s) "
            f"waiting for recovery or an undo to finish, {len(residue)} undone with calls left in the world)"
        )
        if held:
            self.stdout.write("held calls: semantic-saga pending, then approve ID or deny ID")
        for line in waiting + residue + running:
            if line.undo is not None:
                self.stdout.write(f"session {line.id[-8:]}: {line.undo.summary}")
        if unseen_stuck or unseen_left:
            self.stdout.write(
                f"older sessions not shown: {len(unseen_stuck)} waiting for an operator, {len(unseen_left)} undone "
                f"with calls left ({', '.join(pk[-8:] for pk in [*unseen_stuck, *unseen_left][:10])}); "
                "`semantic-saga ledger --session ID` shows one"
            )


def _overall(waiting: bool, residue: bool, running: bool) -> tuple[str, str]:
    if waiting:
        return "needs an operator", "red"
    if residue:
        return "calls left in the world by an undo (below)", "yellow"
    if running:  # a live runner, or one killed outright whose lease has not lapsed yet: not "ok" either way
        return "an undo is running (below); look again when it ends", "yellow"
    return "ok", "green"


def _undo_stuck(line: SessionLine) -> bool:
    return line.undo is not None and line.undo.state in ("undo_stopped", "undo_interrupted")


def _cells(line: SessionLine) -> list[str]:
    status = UNDO_STATE_WORDS[line.undo.state] if line.undo is not None else line.status
    state = f"{status} (preview)" if line.preview else status
    counts = ", ".join(f"{n} {status}" for status, n in sorted(line.by_status.items()))
    marks = f"; checkpoints {', '.join(line.checkpoints)}" if line.checkpoints else ""
    return [
        line.id,
        line.created_at.strftime("%Y-%m-%d %H:%M:%SZ"),
        state,
        line.client,
        str(line.calls),
        counts + marks,
    ]


def _style(column: int, cell: str) -> str | None:
    return SAGA_STYLES.get(cell.removesuffix(" (preview)")) if column == 2 else None
