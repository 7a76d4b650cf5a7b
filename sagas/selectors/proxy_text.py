"""How the proxy's ledger and undo read as text, the same in the terminal (`semantic-saga ledger`, `undo`) and in
the console's session screens: durations, sizes, a call's status, and an undo report's rows and summary line. One
place, so an operator who ran `semantic-saga undo --dry-run` sees the same words on the console's undo page."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from sagas.selectors.proxy_ledger import LedgerRow

# verdict -> (what an operator reads, its terminal colour)
UNDO_VERDICTS: dict[str, tuple[str, str]] = {
    "undone": ("undone", "green"),
    "would_undo": ("would undo", "green"),
    "needs_decision": ("needs a decision", "yellow"),
    "no_way_back": ("no way back", "red"),
    "cannot_undo": ("cannot undo", "red"),
    "skipped": ("skipped", "dim"),
    "already_undone": ("already undone", "dim"),
    "drifted": ("refused: drift", "red"),
    "failed": ("FAILED", "red+bold"),
    "left": ("left", "yellow"),
    "withdrawn": ("withdrawn", "yellow"),
    # Refused because the call's journal row was edited, or its chain does not verify (issue 39): never --force'd.
    "edited": ("refused: row edited", "red+bold"),
    "unverified": ("refused: chain broken", "red+bold"),
}
UNDO_COLUMNS = ["seq", "tool", "server", "class", "undo", "what"]
# Verdicts whose row names the inverse (what was, or would be, sent).
SHOWS_INVERSE = frozenset({"undone", "would_undo", "drifted", "failed", "left"})
# Verdicts that mean an undo did not finish: the command exits 1, the console shows an error.
UNDO_FAILED = frozenset({"failed", "drifted", "edited", "unverified"})
# The detail of a dry run's `would undo` whose state differs now (sagas.coordinator.proxy.undo `_dry`).
DEPENDS = "if undoing the newer calls puts back what it left"
# Verdicts of calls an undo leaves in the world.
WOULD_STAY = frozenset(
    {"needs_decision", "no_way_back", "cannot_undo", "left", "drifted", "failed", "edited", "unverified"}
)


def milliseconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}ms" if value >= 1 else f"{value:.1f}ms"


def size(value: int | None) -> str:
    if value is None:
        return "-"
    if value < 1024:
        return f"{value}B"
    return f"{value / 1024:.1f}K" if value < 1024 * 1024 else f"{value / 1024 / 1024:.1f}M"


def call_status(row: LedgerRow) -> str:
    """A ledger row's status as the terminal shows it: `completed`, `failed (uncertain)`, `held (definition
    changed)`, `completed (row edited)`, ..."""
    status = f"{row.status} (uncertain)" if row.uncertain else row.status
    status += " (row edited)" if row.extra.get("journal_edited") else ""  # issue 39: undo refuses it
    return status + " (definition changed)" if row.definition_changed else status


# An inverse can carry a whole file's content back: a table cell shows its start and says how long it is.
SHOWN_CHARS = 80


def shown(value: Any) -> str:
    """An argument as JSON (null, objects), unless it is a short one-line string, which is shown bare; a long value
    is cut at SHOWN_CHARS and says how long it was, so a restored file does not flood the table."""
    if isinstance(value, str) and value.isprintable() and value == value.strip() and len(value) <= SHOWN_CHARS:
        return value
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}… ({len(text):,} characters)"


def undo_label(verdict: str) -> str:
    return UNDO_VERDICTS.get(verdict, (verdict, ""))[0]


def undo_what(item: dict[str, Any]) -> str:
    """The `what` cell: the detail, led by the inverse call when one was or would be sent."""
    what = str(item["detail"])
    if item.get("inverse") and item["verdict"] in SHOWS_INVERSE:
        arguments = ", ".join(f"{key}={shown(value)}" for key, value in item["inverse"]["arguments"].items())
        what = f"{item['inverse']['tool']}({arguments}): {what}"
    return what


def undo_cells(item: dict[str, Any]) -> list[str]:
    """One row of an undo report (an item of proxy_session_undo's answer), cell by cell (UNDO_COLUMNS)."""
    return [
        str(item["seq"]),
        item["tool"],
        item["server"],
        item["effect_class"],
        undo_label(item["verdict"]),
        undo_what(item),
    ]


def undo_heading(report: dict[str, Any]) -> str:
    """What follows `undo session <id>` on the report's first line."""
    scope = f" after checkpoint {report['checkpoint']!r}" if report["checkpoint"] else ""
    mode = "dry run: nothing changed; " if report["dry_run"] else ""
    return f"{scope} ({mode}newest first)"


def undo_summary(report: dict[str, Any]) -> str:
    """The report's closing lines: the verdicts counted, then how the session ended, in the words every surface
    uses (`undone, 2 calls left: send_email (needs a decision), ...`); a dry run says what the undo would leave."""
    counts = Counter(item["verdict"] for item in report["items"])
    summary = ", ".join(f"{n} {undo_label(verdict)}" for verdict, n in counts.items()) or "no call to undo"
    outcome = report.get("outcome")
    if outcome:
        line = outcome["summary"]
        return f"{summary}\n{'the session is ' + line if outcome['state'].startswith('undone') else line}"
    if report["dry_run"]:
        stays = [item for item in report["items"] if item["verdict"] in WOULD_STAY]
        named = ", ".join(f"{item['tool']} ({undo_label(item['verdict'])})" for item in reversed(stays))
        would = f"the undo would leave {len(stays)} call(s): {named}" if stays else "the undo would leave nothing"
        pending = sum(1 for item in report["items"] if item["verdict"] == "would_undo" and DEPENDS in item["detail"])
        if pending:  # a difference read now that a newer inverse may or may not put back
            would += f", or more: {pending} call(s) depend on what the newer inverses put back (see their rows)"
        return f"{summary}; the session is {report['status']}\n{would}"
    return f"{summary}; the session is {report['status']}"
