"""What the audit chain holds of the values a proxy session's journal stored, and whether a step row still says it.

The chain hashes event data, not step rows, so a call's arguments or result edited in the database would otherwise
pass `verify` and be acted on by `undo` (issue 39). So each write of a journaled value carries, in the data of the
audit event that records it, the digest of the value as written (sagas.coordinator._journal_digests):

    arguments       the call's arguments (Step.input)
    result          what was kept of its answer (Step.result, without the two states below)
    captured_state  what the capture read before the call (result.pre_state with its pre_state_sha256), or null
    state_after     what was read again right after it (result.post_state), or null
    error           its error (Step.error, with the receipt an uncertain call kept), or null
    contract        its contract snapshot's hash (Step.action_definition_hash, which the snapshot must hash to)
    status          not a digest: the step's status as the write left it (Step.status)
    uncertain_outcome  not a digest either: its uncertain flag as the write left it (Step.uncertain_outcome)

A digest is audit.canonical.sha256_hex of the value as the database gives it back: a JSON round trip first, with
whole-number floats read as integers (PostgreSQL's jsonb writes 1e16 as 10000000000000000). Only digests go into the
chain, never the values. The newest digest of each field is the one a row must match; a row journaled before
digests were kept has none and is not checked (it is accepted, as before).

The digests object of an event is keyed (`digests_mac`): an HMAC-SHA256 of it, bound to the saga, the step and the
event's sequence, under a key derived from settings.SECRET_KEY (django.utils.crypto.salted_hmac, salt MAC_SALT),
which is not in the database. Anyone who can write the database can re-hash the keyless chain after editing a row
and its digest; without SECRET_KEY they cannot make the MAC match, so such digests vouch for nothing and the step is
reported (`FORGED`). SECRET_KEY_FALLBACKS are tried too, so a rotated key still verifies older sessions.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.utils.crypto import constant_time_compare, salted_hmac

from audit.canonical import canonical_json, sha256_hex
from audit.models import AuditEvent
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from registry.capture_outcomes import POST_STATE
from registry.contracts import definition_hash
from sagas.models import Saga, Step

DIGESTS = "digests"  # the key of an event's data that holds them
ARGUMENTS, RESULT, CAPTURED, AFTER, ERROR, CONTRACT = (
    "arguments",
    "result",
    "captured_state",
    "state_after",
    "error",
    "contract",
)
STATUS, UNCERTAIN = "status", "uncertain_outcome"
PLAIN = frozenset({STATUS, UNCERTAIN})  # held as the values themselves: nothing to hide, and an operator reads them
# The key of an event's data that holds the MAC of its digests, and, among a step's recorded fields, the sequence
# of the first event whose digests did not carry this deployment's MAC.
FORGED = "digests_mac"
MAC_SALT = "semantic-saga.journal-digests.v1"  # fixed: changing it makes every keyed session read as rewritten
# What an operator reads for each field.
LABELS: dict[str, str] = {
    ARGUMENTS: "arguments",
    RESULT: "result",
    CAPTURED: "captured state",
    AFTER: "state read after the call",
    ERROR: "error",
    CONTRACT: "contract snapshot",
    STATUS: "status",
    UNCERTAIN: "uncertain outcome",
    FORGED: "the chain's digests",
}
# The step columns the digests are computed from: writing a column writes its digests.
FIELDS_OF_COLUMN: dict[str, tuple[str, ...]] = {
    "input": (ARGUMENTS,),
    "result": (RESULT, CAPTURED, AFTER),
    "error": (ERROR,),
    "action_definition": (CONTRACT,),
    "action_definition_hash": (CONTRACT,),
    "status": (STATUS,),
    "uncertain_outcome": (UNCERTAIN,),
}
COLUMNS = frozenset(FIELDS_OF_COLUMN)
CAPTURE_KEYS = ("pre_state", "pre_state_sha256")
# Rows fetched per round trip while checking a session's rows: bounds the memory a large session takes.
STEP_BATCH = 500
SHOWN_DIGEST_CHARS = 12
RESTORE = (
    "Such a row was edited outside Semantic Saga: the chain keeps the digest of what was written, not the value. "
    "Restore the row from a backup or an export taken before the edit (its digests must match again); until then "
    "`semantic-saga undo` refuses to act on that call"
)
REWRITTEN = (
    "Digests that do not carry this deployment's key were written by someone who could write the database but did "
    "not hold SECRET_KEY, or under a SECRET_KEY since rotated away (list the old one in SECRET_KEY_FALLBACKS). "
    "Restore the session's journal (its steps and audit events) from a backup or an export taken before; until then "
    "`semantic-saga undo` refuses to act on that call"
)

_NULL = sha256_hex(None)
Recorded = dict[str, dict[str, Any]]  # step id -> field -> the newest digest (or plain value) the chain holds


def digest(value: Any) -> str:
    if value is None:
        return _NULL  # most journaled values start out empty: no JSON round trip for them
    stored = _as_stored(value)
    try:
        return sha256_hex(stored)
    except (ValueError, UnicodeError):
        # NaN or a lone surrogate: canonical JSON refuses them, but the column keeps them (as JSON escapes).
        text = json.dumps(stored, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
        return hashlib.sha256(text.encode("ascii")).hexdigest()


def _as_stored(value: Any) -> Any:
    """`value` as the JSON column gives it back (tuples as lists, keys as text), whole floats as integers."""
    return json.loads(json.dumps(value, allow_nan=True), parse_float=_number)


def _number(text: str) -> float | int:
    number = float(text)
    return int(number) if number.is_integer() else number


def fields_of(columns: Iterable[str]) -> list[str]:
    return sorted({name for column in columns for name in FIELDS_OF_COLUMN.get(column, ())})


def digests_of(step: Step, fields: Iterable[str]) -> dict[str, Any]:
    """The digests of `fields` of the step as it is in memory (what a write just stored)."""
    return {name: _digest_of(step, name) for name in fields}


def _digest_of(step: Step, name: str) -> Any:
    if name == STATUS:
        return str(step.status)
    if name == UNCERTAIN:
        return bool(step.uncertain_outcome)
    if name == ARGUMENTS:
        return digest(step.input)
    if name == ERROR:
        return None if step.error is None else digest(step.error)
    if name == CONTRACT:
        return str(step.action_definition_hash)
    stored = step.result if isinstance(step.result, dict) else None
    if name == RESULT:
        kept = {k: v for k, v in stored.items() if k not in (*CAPTURE_KEYS, POST_STATE)} if stored else step.result
        return digest(kept)
    if name == CAPTURED:
        capture = {key: stored[key] for key in CAPTURE_KEYS if key in stored} if stored else {}
        return digest(capture) if capture else None
    return digest(stored[POST_STATE]) if stored and POST_STATE in stored else None


def digests_mac(
    saga_id: object, step_id: str, sequence: int, digests: dict[str, Any], secret: str | None = None
) -> str:
    """The keyed MAC of an event's digests (None for `secret`: settings.SECRET_KEY)."""
    message = canonical_json({"saga": str(saga_id), "step": step_id, "sequence": sequence, "digests": digests})
    return salted_hmac(MAC_SALT, message, secret, algorithm="sha256").hexdigest()


def mac_holds(saga_id: object, step_id: str, sequence: int, data: dict[str, Any]) -> bool:
    """Whether the event's digests carry this deployment's MAC, under SECRET_KEY or one of SECRET_KEY_FALLBACKS."""
    held, digests = data.get(FORGED), data.get(DIGESTS)
    if not isinstance(held, str) or not isinstance(digests, dict):
        return False
    for secret in (settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", ())):
        try:
            if constant_time_compare(digests_mac(saga_id, step_id, sequence, digests, secret), held):
                return True
        except (TypeError, ValueError):  # digests canonical JSON refuses: written by no coordinator
            return False
    return False


def _found(step: Step, name: str) -> Any:
    """The digest of `name` that the row now yields; a contract whose snapshot no longer hashes to its stored hash
    yields the snapshot's hash, so an edit to either is seen."""
    if name != CONTRACT:
        return _digest_of(step, name)
    stored = str(step.action_definition_hash)
    snapshot = step.action_definition
    if not snapshot:  # a dry step that pinned no contract keeps none; its hash is its node's
        return stored
    if not isinstance(snapshot, dict):  # no contract at all any more: it cannot hash to what was pinned
        return digest(snapshot)
    actual = definition_hash(snapshot)
    return stored if actual == stored else actual


@dataclass(frozen=True)
class Edit:
    """A field of a step row that no longer matches the newest digest the chain holds of it."""

    saga_id: str
    step_id: str
    seq: int
    tool: str
    field: str
    recorded: str | bool | None  # the chain's digest or value (None: absent when written; FORGED: the event's seq)
    found: str | bool | None  # the row's

    @property
    def label(self) -> str:
        return LABELS.get(self.field, self.field)

    def sentence(self) -> str:
        def short(value: str | bool | None) -> str:
            return str(value)[:SHOWN_DIGEST_CHARS] if value else "nothing"

        if self.field == FORGED:
            return (
                f"call {self.seq} ({self.tool}): the chain's digests were rewritten without this deployment's key "
                f"(the event at seq {self.recorded}), so they vouch for nothing of this row"
            )
        if self.field in PLAIN:
            return (
                f"call {self.seq} ({self.tool}), {self.label}: the row says {_plain(self.found)}, the chain says "
                + (_plain(self.recorded))
            )
        return (
            f"call {self.seq} ({self.tool}), {self.label}: the row no longer matches what was journaled (the chain "
            f"holds {short(self.recorded)}, the row now hashes to {short(self.found)})"
        )

    def as_json(self) -> dict[str, Any]:
        remedy = REWRITTEN if self.field == FORGED else RESTORE
        return {**asdict(self), "label": self.label, "message": f"{self.sentence()}. {remedy}."}


def _plain(value: object) -> str:
    if isinstance(value, bool):
        return "uncertain" if value else "not uncertain"
    return str(value) if value else "nothing"


def edits_of(step: Step, recorded: Recorded) -> list[Edit]:
    """The fields of `step` whose row differs from the chain's newest digest ([] for a row the chain holds none of:
    journaled before digests were kept), after a FORGED one when some of its digests lack this deployment's MAC."""
    held = recorded.get(str(step.id), {})
    facts = (str(step.saga_id), str(step.id), step.sequence, tool_of(step))
    forged = [Edit(*facts, FORGED, str(held[FORGED]), None)] if FORGED in held else []
    return forged + [
        Edit(*facts, name, value, found)
        for name, value in sorted(held.items())
        if name in LABELS and name != FORGED and (found := _found(step, name)) != value
    ]


def tool_of(step: Step) -> str:
    proxy = step.action_definition.get("proxy", {}) if isinstance(step.action_definition, dict) else {}
    if not isinstance(proxy, dict) or not proxy.get("tool"):
        return step.action
    return f"{proxy.get('server', '')}/{proxy.get('exposed_name') or proxy['tool']}"


def merge(recorded: Recorded, saga_id: object, step_id: str, sequence: int, data: Any) -> None:
    """Keep an event's digests as the newest of its step's (events are read in chain order); digests without this
    deployment's MAC are not kept, the first such event's sequence is (FORGED)."""
    held = data.get(DIGESTS) if isinstance(data, dict) else None
    if not step_id or not isinstance(held, dict):
        return
    fields = recorded.setdefault(step_id, {})
    if mac_holds(saga_id, step_id, sequence, data):
        fields.update({name: value for name, value in held.items() if name != FORGED})
    else:
        fields.setdefault(FORGED, sequence)


def recorded_digests(saga_id: uuid.UUID | str) -> Recorded:
    """The newest digest of each field of each step of the saga, in one query (events that carry digests only)."""
    events = AuditEvent.objects.filter(saga_id=saga_id, data__has_key=DIGESTS).order_by("sequence")
    recorded: Recorded = {}
    rows = events.values_list("step_id", "sequence", "data").iterator(chunk_size=STEP_BATCH * 4)
    for step_id, sequence, data in rows:
        merge(recorded, saga_id, step_id, sequence, data)
    return recorded


@dataclass(frozen=True)
class JournalCheck:
    """A session's step rows against the digests its chain holds."""

    saga_id: str
    checked: int  # steps the chain holds digests of
    unchecked: int  # steps journaled before digests were kept (accepted, not checked)
    edits: tuple[Edit, ...]

    @property
    def valid(self) -> bool:
        return not self.edits

    def as_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "calls_checked": self.checked,
            "calls_without_digests": self.unchecked,
            "edited": [edit.as_json() for edit in self.edits],
        }


def journal_check(*, actor: Principal, saga: Saga) -> JournalCheck:
    """Every step row of the saga against its newest digests: one query for the digests, one per STEP_BATCH steps."""
    authorize(actor, READ, "verify_audit")
    recorded = recorded_digests(saga.id)
    checked = unchecked = 0
    edits: list[Edit] = []
    steps = Step.objects.filter(saga_id=saga.id).order_by("sequence")
    for step in steps.iterator(chunk_size=STEP_BATCH):
        if str(step.id) in recorded:
            checked += 1
            edits += edits_of(step, recorded)
        else:
            unchecked += 1
    return JournalCheck(str(saga.id), checked, unchecked, tuple(edits))


@dataclass(frozen=True)
class SessionDigests:
    """What an undo checks each call against: the chain's digests, once the chain itself verified (`broken` says
    why it did not, and then nothing it holds is vouched for)."""

    recorded: Recorded
    broken: str = ""


def verified_digests(saga_id: uuid.UUID | str) -> SessionDigests:
    """The session's digests from one pass over its chain that also verifies it, and its end against the head the
    session row records (a chain whose newest events were deleted still verifies on its own)."""
    from audit.chain import iter_events, verify_events  # the undo's walk alone verifies here: not the ledger's rows

    head_sequence, head_hash = Saga.objects.filter(pk=saga_id).values_list("audit_sequence", "audit_head_hash").get()
    recorded: Recorded = {}
    at_head: list[str] = []

    def collected() -> Iterable[AuditEvent]:
        for event in iter_events(saga_id):
            merge(recorded, saga_id, event.step_id, event.sequence, event.data)
            if event.sequence == head_sequence:
                at_head.append(event.event_hash)
            yield event

    result = verify_events(str(saga_id), collected())
    if not result.valid:
        return SessionDigests(recorded, f"its audit chain is broken at seq {result.failed_sequence} ({result.reason})")
    if head_sequence and at_head != [head_hash]:
        return SessionDigests(recorded, f"its audit chain no longer ends at the seq {head_sequence} its row records")
    return SessionDigests(recorded)
