"""The MCP proxy's ledger as an operator reads it (`semantic-saga ledger`, `undo`, the console's session page): one
row per proxied call of a session (the line per session `status` shows: sagas.selectors.proxy_session_lines). Every
proxied call is a step of its session's saga whose snapshot holds a `proxy` section
(sagas.coordinator.proxy.contract); nothing here is stored twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet

from audit.models import AuditEvent
from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.errors import NotFound
from sagas.models import Checkpoint, Node, ProxyCallIntent, Saga, Step
from sagas.selectors.proxy_sessions import HELD_STATUSES
from sagas.states import COMPENSABLE_STEP_STATES, StepStatus

# The journal's digests, the undo plan and the audit chain are imported by the functions that read them (a ledger's
# rows; its undo plans only for the --json line and the console): the terminal's table needs no undo plan, nor the
# registry's compensation plans behind it. A SESSION argument is resolved by sagas.selectors.proxy_sessions and
# `semantic-saga status` reads its lines in sagas.selectors.proxy_session_lines: neither loads this module's rows.
if TYPE_CHECKING:
    from sagas.selectors.journal_digests import Recorded

# A held call has not reached the world: an undo has nothing to do for it.
HELD_UNDO_PLAN = {"verdict": "skipped", "detail": "held: not sent, nothing to undo", "inverse": None}
# A call out on its intent: an undo waits for its outcome (UNDO_BUSY) before it decides anything for it.
OUT_UNDO_PLAN = {"verdict": "skipped", "detail": "sent, its outcome not recorded yet: undo waits", "inverse": None}
# The audit events that record a proxied call's outcome: the link of the session's chain a ledger row names.
OUTCOME_EVENTS = frozenset({E.STEP_COMPLETED, E.STEP_FAILED, E.STEP_DRY, E.STEP_REFUSED, E.STEP_RECOVERED})
# A step's undo status from its state; otherwise what an undo listed for it (UNDO_LISTED), otherwise "none".
UNDO_STATUSES: dict[str, str] = {
    StepStatus.COMPENSATED: "undone",
    StepStatus.COMPENSATING: "undoing",
    StepStatus.COMPENSATION_FAILED: "failed",
}


@dataclass(frozen=True)
class Link:
    """The link of the session's audit chain that recorded a call (`semantic-saga verify` walks them all)."""

    sequence: int
    previous_hash: str  # "" for the first link of a chain
    event_hash: str
    recorded_at: str  # the event's canonical timestamp (UTC, ISO 8601)


@dataclass(frozen=True)
class LedgerRow:
    """One proxied call as `semantic-saga ledger` shows it (and, whole, as its --json line: docs/proxy.md, "The
    ledger from a terminal", names each key and the Sagaz field it stands for)."""

    seq: int  # the step's journal sequence; 0 for a held call not yet journaled (it has no step yet)
    tool: str
    server: str
    effect_class: str
    # The step's status, lowercase: completed, failed, refused, dry, executing, compensated, ...; a held call not
    # yet journaled is `held` (waiting for a decision) or `approved` (about to be sent).
    status: str
    duration_ms: float | None
    result_bytes: int | None
    id: str
    gate: str
    uncertain: bool
    error_code: str
    created_at: datetime
    undo: str = ""  # what an undo left for a person: needs_decision (C) or no_way_back (I, unknown); "" otherwise
    definition_changed: bool = False  # the tool's definition differed from its pin when the call was made
    class_source: str = ""  # what decided the class: rule, pack, annotation, heuristic, ...
    class_reason: str = ""
    gate_reason: str = ""
    arguments: Any = None  # the call's arguments as the agent sent them
    pre_state: Any = None  # what the capture read found before the call (R calls a pack captures for)
    result: Any = None  # the result as stored (a prefix when truncated); None when nothing was answered
    result_truncated: bool = False  # the answer passed ledger.maxResultBytes: `result` keeps only a prefix
    link: Link | None = None  # the audit link that recorded it (for a call still running or held: its newest)
    extra: dict[str, Any] = field(default_factory=dict)  # more keys for the --json line, added by other readers

    @property
    def undo_status(self) -> str:
        """none | undone | undoing | failed | needs_decision | no_way_back."""
        return UNDO_STATUSES.get(self.status.upper(), self.undo or "none")

    def as_json(self) -> dict[str, Any]:
        """The --json line: Sagaz's keys where they mean the same (seq, tool, server, class, class_source,
        class_reason, status, id, ts_start, ts_end, undo_status, prev_hash, hash), ours beside them."""
        return {**self._call(), **self._outcome(), **self._chain(), **self.extra}

    def _call(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "id": self.id,
            "tool": self.tool,
            "server": self.server,
            "arguments": self.arguments,
            "pre_state": self.pre_state,
            "class": self.effect_class,
            "class_source": self.class_source,
            "class_reason": self.class_reason,
            "gate": self.gate,
            "gate_reason": self.gate_reason,
            "definition_changed": self.definition_changed,
        }

    def _outcome(self) -> dict[str, Any]:
        from audit.chain import canonical_timestamp

        return {
            "status": self.status,
            "uncertain": self.uncertain,
            "error_code": self.error_code,
            "result": self.result,
            "result_truncated": self.result_truncated,
            "result_bytes": self.result_bytes,
            "duration_ms": self.duration_ms,
            "created_at": self.created_at.isoformat(),
            "ts_start": canonical_timestamp(self.created_at),  # as ts_end: UTC, microseconds, Z
            "ts_end": self.link.recorded_at if self.link and self.status not in HELD_ROW_STATUSES else None,
            "undo": self.undo,
            "undo_status": self.undo_status,
        }

    def _chain(self) -> dict[str, Any]:
        link = self.link
        return {
            "audit_seq": link.sequence if link else None,
            "prev_hash": link.previous_hash if link else "",
            "hash": link.event_hash if link else "",
        }


HELD_ROW_STATUSES = frozenset(HELD_STATUSES.values()) | {"executing"}


def ledger_rows(
    *, actor: Principal, saga: Saga, tool: str = "", status: str = "", plans: bool = True
) -> list[LedgerRow]:
    """The session's proxied calls in order (then the calls out on an intent, then held calls not yet journaled),
    optionally only one tool's or one
    status's. `plans=False` leaves each row's undo plan (`extra["undo_plan"]`, which the --json line and the console
    show) out, for a reader that shows none: the terminal's table. Every row is still checked against the digests
    its chain holds (`extra["journal_edited"]`)."""
    from sagas.selectors.journal_digests import recorded_digests

    authorize(actor, READ, "get")
    steps = Step.objects.filter(saga=saga, action__startswith="proxy.").order_by("sequence")
    listed, links = _undo_listed(saga), call_links(saga)
    recorded = recorded_digests(saga.id)  # each row against the digests its chain holds (issue 39)
    rows = [
        replace(
            ledger_row(step),
            undo=str(listed.get(str(step.id), {}).get("verdict", "")),
            link=links.get(str(step.id)),
            extra=_extra(step, listed.get(str(step.id)), recorded, plans=plans),
        )
        for step in steps
    ]
    out = {"undo_plan": OUT_UNDO_PLAN} if plans else {}
    rows += [replace(out_row(intent), extra=out) for intent in calls_out(saga)]
    rows += [
        replace(held_row(node), link=links.get(str(node.id)), extra={"undo_plan": HELD_UNDO_PLAN} if plans else {})
        for node in held_nodes(saga)
    ]
    return [row for row in rows if (not tool or row.tool == tool) and (not status or row.status == status.lower())]


def calls_out(saga: Saga) -> QuerySet[ProxyCallIntent]:
    """The session's calls sent on an intent whose step is not written yet (out now, or answered a moment ago; or
    left by a proxy that died, until the recovery sweep records them: sagas.coordinator.proxy.intents)."""
    return ProxyCallIntent.objects.filter(saga=saga).order_by("created_at", "id")


def out_row(intent: ProxyCallIntent) -> LedgerRow:
    """A call sent on its intent, as `executing`: it reached (or may have reached) the downstream, and its outcome is
    not recorded yet. Its facts are the call's (sagas.proxied_facts.CallFacts), its class under `effect_class`."""
    call = json.loads(intent.call)
    facts = {**call, "class": call.get("effect_class", "unknown")}
    return _unjournaled_row(facts, "executing", str(intent.id), intent.created_at, intent.arguments)


def held_nodes(saga: Saga) -> QuerySet[Node]:
    """The session's held calls not yet journaled (waiting for a decision, or approved and about to be sent)."""
    held = Node.objects.filter(saga=saga, step__isnull=True, action__startswith="proxy.")
    return held.filter(status__in=HELD_STATUSES).prefetch_related("approvals").order_by("position")


def held_row(node: Node) -> LedgerRow:
    """A held call not yet journaled, from the snapshot its approval keeps."""
    approval = max(node.approvals.all(), key=lambda a: a.created_at, default=None)
    proxy = ((approval.snapshot if approval is not None else None) or {}).get("proxy", {})
    server, _, tool = node.action.removeprefix("proxy.").partition(".")
    facts = {"gate": "confirm", **proxy, "server": proxy.get("server") or server}
    facts["exposed_name"] = proxy.get("exposed_name") or tool
    return _unjournaled_row(facts, HELD_STATUSES[node.status], str(node.id), node.planned_at, node.input)


def _unjournaled_row(facts: dict[str, Any], status: str, row_id: str, at: datetime, arguments: Any) -> LedgerRow:
    """A call with no step yet (held, or out on its intent), from its proxy facts (a snapshot's `proxy` section)."""
    return LedgerRow(
        seq=0,
        tool=str(facts.get("exposed_name") or facts.get("tool", "")),
        server=str(facts.get("server", "")),
        effect_class=str(facts.get("class", "unknown")),
        status=status,
        duration_ms=None,
        result_bytes=None,
        id=row_id,
        gate=str(facts.get("gate", "")),
        uncertain=False,
        error_code="",
        created_at=at,
        definition_changed=bool(facts.get("definition_changed")),
        class_source=str(facts.get("class_source", "")),
        class_reason=str(facts.get("class_reason", "")),
        gate_reason=str(facts.get("gate_reason", "")),
        arguments=arguments,
    )


def _undo_listed(saga: Saga) -> dict[str, dict[str, Any]]:
    """step id -> the data of the UNDO_LISTED event an undo of the session recorded for it (its verdict, ...)."""
    events = AuditEvent.objects.filter(saga_id=saga.id, event_type=E.UNDO_LISTED).values_list("step_id", "data")
    return {step_id: data for step_id, data in events if isinstance(data, dict)}


def _extra(step: Step, listed: dict[str, Any] | None, recorded: Recorded, *, plans: bool) -> dict[str, Any]:
    """The --json line's `undo_plan` (with `plans`); for a row edited since it was journaled, `journal_edited` names
    the fields, and an undo would refuse the call (as the walk does, sagas.coordinator._journal_digests)."""
    from sagas.selectors.journal_digests import edits_of

    edited = edits_of(step, recorded)
    fields = {"journal_edited": [edit.field for edit in edited]} if edited else {}
    if not plans:
        return fields
    if not edited or step.status not in COMPENSABLE_STEP_STATES:
        return {"undo_plan": _plan(step, listed), **fields}
    detail = f"its row was edited outside Semantic Saga ({'; '.join(edit.label for edit in edited)}): undo refuses it"
    return {"undo_plan": {"verdict": "edited", "detail": detail, "inverse": None}, **fields}


def _plan(step: Step, listed: dict[str, Any] | None) -> dict[str, Any]:
    """What undo would do now, the inverse rendered as it would be sent; a call an undo left because a newer call
    of the session built on it (or could not be undone) says so, as the undo did."""
    from sagas.selectors.undo_outcome import left_words
    from sagas.selectors.undo_plan import undo_plan

    plan = undo_plan(step)
    if listed and listed.get("verdict") == "left" and step.status != StepStatus.COMPENSATED:
        return {**plan, "verdict": "left", "detail": f"left by the undo: {left_words(listed)}"}
    return plan


def call_links(saga: Saga) -> dict[str, Link]:
    """step or held node id -> the link of the session's audit chain that recorded the call's outcome (its first
    outcome event); for a call still running, or held, its newest link so far."""
    events = (
        AuditEvent.objects.filter(saga_id=saga.id)
        .exclude(step_id="", node_id="")
        .order_by("sequence")
        .values_list("step_id", "node_id", "event_type", "sequence", "previous_hash", "event_hash", "created_at_text")
    )
    links: dict[str, Link] = {}
    closed: set[str] = set()
    for step_id, node_id, event_type, sequence, previous, own, at in events:
        link = Link(sequence, previous or "", own, at)
        if step_id and step_id not in closed:
            links[step_id] = link
            if event_type in OUTCOME_EVENTS:
                closed.add(step_id)
        if node_id and not step_id:
            links[node_id] = link
    return links


def ledger_row(step: Step) -> LedgerRow:
    proxy = (step.action_definition or {}).get("proxy", {})
    result = step.result if isinstance(step.result, dict) else {}
    error = step.error if isinstance(step.error, dict) else {}
    duration = result.get("duration_ms", error.get("duration_ms"))
    size = result.get("size_bytes", error.get("size_bytes"))
    return LedgerRow(
        seq=step.sequence,
        tool=str(proxy.get("exposed_name") or proxy.get("tool", step.action)),
        server=str(proxy.get("server", "")),
        effect_class=str(proxy.get("class", "unknown")),
        status=step.status.lower(),
        duration_ms=float(duration) if isinstance(duration, int | float) else None,
        result_bytes=int(size) if isinstance(size, int) else None,
        id=str(step.id),
        gate=str(proxy.get("gate", "")),
        uncertain=step.uncertain_outcome,
        error_code=str(error.get("code", "")),
        created_at=step.created_at,
        definition_changed=bool(proxy.get("definition_changed")),
        class_source=str(proxy.get("class_source", "")),
        class_reason=str(proxy.get("class_reason", "")),
        gate_reason=str(proxy.get("gate_reason", "")),
        arguments=step.input,
        pre_state=result.get("pre_state"),
        result=_as_stored(result),
        result_truncated=bool(result.get("truncated") or error.get("truncated")),
    )


def _as_stored(envelope: dict[str, Any]) -> Any:
    """The result as stored: its payload when the answer carried JSON, else the content blocks the agent got (the
    text of a server that answers in sentences); a truncated answer's prefix as kept."""
    stored = envelope.get("result")
    if envelope.get("result_from") == "none" and not envelope.get("truncated") and envelope.get("content"):
        return envelope["content"]
    return stored


def session_checkpoint(*, actor: Principal, saga: Saga, label: str) -> Checkpoint:
    """The session's checkpoint named `label` (the latest of that name). NotFound naming the ones there are."""
    authorize(actor, READ, "get")
    found = Checkpoint.objects.filter(saga=saga, name=label).order_by("-created_at").first()
    if found is None:
        names = list(Checkpoint.objects.filter(saga=saga).order_by("created_at").values_list("name", flat=True))
        there = f"its checkpoints are {', '.join(names)}" if names else "it has no checkpoint"
        raise NotFound(
            "CHECKPOINT_NOT_FOUND",
            f"Session {saga.id} has no checkpoint {label!r}; {there}. `semantic-saga checkpoint LABEL` marks one.",
        )
    return found
