"""The journal's digests in the audit chain (issue 39; sagas.selectors.journal_digests says what they are), and the
undo's refusal of a call whose row no longer matches them.

A transaction (sagas.coordinator._tx.Tx) notes each step of a proxy session whose journaled columns it writes; just
before its events are chained, the newest event of the transaction naming that step gets the digests of what was
written, so a result recorded at finish, or one a dry run rewrites after its event, is covered by its own write. Only
the fields of the columns written are stamped: a value read back from a row (perhaps edited since) is never vouched
for again by a later write of another column.

A step's status is written by every transition of it, its uncertain flag by the forward call's outcome and the
sweep's recovery; both are stamped like the digests (every coordinator path that writes them records an event naming
the step in the same transaction). The one exception: a transition whose compensation error is one of the journal
refusals below (the undo refusing a row it cannot trust) does not vouch for the status it leaves, so the refusal of
an edited status cannot launder it into a status the chain holds; verify names that status until the row is restored.
Each stamped digests object gets its keyed MAC (`digests_mac`, sagas.selectors.journal_digests.digests_mac), bound to
the sequence the event will take: one HMAC-SHA256 per stamped event, no SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from audit.chain import EventDraft
from sagas.models import Step
from sagas.selectors.journal_digests import (
    COLUMNS,
    DIGESTS,
    FORGED,
    STATUS,
    SessionDigests,
    digests_mac,
    digests_of,
    edits_of,
    fields_of,
)
from sagas.selectors.undo_plan import UndoItem
from sagas.states import COMPENSABLE_STEP_STATES

EDITED = "edited"  # the undo verdict of a call whose row no longer matches its digests
UNVERIFIED = "unverified"  # ... of a call whose session's chain does not verify, so no digest is vouched for
EDITED_CODE, FORGED_CODE, BROKEN_CODE = "JOURNAL_ROW_EDITED", "JOURNAL_DIGESTS_FORGED", "JOURNAL_CHAIN_BROKEN"
REFUSALS = frozenset({EDITED_CODE, FORGED_CODE, BROKEN_CODE})


class JournalWrites:
    """The steps whose journaled columns one transaction wrote (a proxy session's only: `active`)."""

    def __init__(self, active: bool, saga_id: object = None) -> None:
        self.active = active
        self.saga_id = saga_id
        self._written: dict[Any, tuple[Step, frozenset[str]]] = {}
        self._refused: set[Any] = set()  # steps whose status this transaction wrote as a journal refusal

    def note(self, obj: object, columns: Iterable[str]) -> None:
        if not self.active or not isinstance(obj, Step):
            return
        columns = frozenset(columns)
        if "compensation_error" in columns and _refusal_code(obj.compensation_error) in REFUSALS:
            self._refused.add(obj.pk)
        covered = COLUMNS.intersection(columns)
        if covered:
            _, before = self._written.get(obj.pk, (obj, frozenset()))
            self._written[obj.pk] = (obj, before | covered)

    def note_new(self, step: Step) -> None:
        """A step row just inserted: every journaled column was written."""
        self.note(step, COLUMNS)

    def stamped(self, drafts: list[EventDraft], head: int) -> list[EventDraft]:
        """`drafts` with the digests of each noted step, and their MAC, in the data of the newest draft naming it
        (`head`: the chain's last sequence, so draft i takes head + i + 1)."""
        if not self._written:
            return drafts
        out = list(drafts)
        for pk, (step, columns) in self._written.items():
            index = _newest_naming(out, str(pk))
            draft = out[index]
            fields = [name for name in fields_of(columns) if not (name == STATUS and pk in self._refused)]
            held = {**draft.data.get(DIGESTS, {}), **digests_of(step, fields)}
            mac = digests_mac(self.saga_id, str(pk), head + index + 1, held)
            out[index] = replace(draft, data={**draft.data, DIGESTS: held, FORGED: mac})
        self._written.clear()
        self._refused.clear()
        return out


def _refusal_code(error: object) -> object:
    return error.get("code") if isinstance(error, dict) else None


def _newest_naming(drafts: list[EventDraft], step_id: str) -> int:
    for index in range(len(drafts) - 1, -1, -1):
        if drafts[index].step_id == step_id:
            return index
    # A programming error, raised so its transaction stores nothing: a journaled value written without an event
    # naming its step would leave the chain's older digest standing, and the row would read as edited.
    raise RuntimeError(
        f"Step {step_id}'s journaled values were written without an audit event naming the step; record one "
        "(tx.record or tx.transition with event=) in the same transaction."
    )


@dataclass(frozen=True)
class Untrusted:
    """Why the undo does not act on a call: the compensation error it records, and the report's row."""

    error: dict[str, Any]
    item: UndoItem


def journal_refusal(step: Step, digests: SessionDigests) -> Untrusted | None:
    """Why the undo must not act on `step`, whatever `--force` says: its row no longer matches the digests the chain
    holds, or the chain cannot vouch for them. None for a row that matches, one journaled before digests were kept,
    and a call the undo does not act on anyway (never sent, already undone)."""
    if step.status not in COMPENSABLE_STEP_STATES:
        return None
    if digests.broken:
        message = (
            f"The inverse was not run and nothing was sent: {digests.broken}, so what this call's row says cannot be "
            "checked against what was journaled. Run `semantic-saga verify` to see what broke, restore the journal "
            "from a backup or an export taken before, then run the undo again (--force does not override this)."
        )
        detail = f"refused: {digests.broken}; restore the journal, then undo again (--force does not override this)"
        return _untrusted(step, BROKEN_CODE, message, UNVERIFIED, detail)
    edits = edits_of(step, digests.recorded)
    if not edits:
        return None
    if edits[0].field == FORGED:
        message = (
            "The inverse was not run and nothing was sent: the audit chain's digests of this call were rewritten "
            f"without this deployment's key ({edits[0].sentence()}), so nothing the row says can be checked. "
            "Someone who could write the database re-hashed the chain; restore the session's journal from a backup "
            "or an export taken before, then run the undo again (--force does not override this). If SECRET_KEY "
            "was rotated, list the old key in SECRET_KEY_FALLBACKS instead."
        )
        detail = (
            "refused: the chain's digests of this call were rewritten without this deployment's key; restore the "
            "journal, then undo again (--force does not override this)"
        )
        return _untrusted(step, FORGED_CODE, message, UNVERIFIED, detail)
    fields = "; ".join(edit.label for edit in edits)
    message = (
        "The inverse was not run and nothing was sent: this call's row no longer matches what was journaled "
        f"({fields}: the audit chain holds the digests of what was written). The row was edited outside Semantic "
        "Saga, so it cannot be trusted to undo anything, --force included. Restore the row from a backup or an "
        "export taken before the edit (`semantic-saga verify` names what differs), then run the undo again."
    )
    detail = f"refused: its row was edited outside Semantic Saga ({fields}); restore the row, then undo again"
    untrusted = _untrusted(step, EDITED_CODE, message, EDITED, detail)
    untrusted.error["fields"] = [edit.field for edit in edits]
    return untrusted


def _untrusted(step: Step, code: str, message: str, verdict: str, detail: str) -> Untrusted:
    # Read defensively, and with no inverse shown: the snapshot may be among the values that cannot be trusted.
    snapshot = step.action_definition if isinstance(step.action_definition, dict) else {}
    section = snapshot.get("proxy")
    proxy: dict[str, Any] = section if isinstance(section, dict) else {}
    row = UndoItem(
        seq=step.sequence,
        step_id=str(step.id),
        tool=str(proxy.get("exposed_name") or proxy.get("tool", step.action)),
        server=str(proxy.get("server", "")),
        effect_class=str(proxy.get("class", "unknown")),
        verdict=verdict,
        detail=detail,
    )
    return Untrusted({"code": code, "message": message, "retryable": False}, row)
