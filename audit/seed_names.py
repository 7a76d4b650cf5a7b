"""semantic-saga-mcp's names for our audit events, so that a query written against it finds ours.

Stored names never change (they are hashed into chains), so the seed's names are aliases: every answer that lists
events carries each event's `seed_name`, and every filter by event type accepts the seed's names beside ours
(`matching`). One of our events has at most one seed name; a seed name may stand for several of ours (its
`APPROVAL_DECIDED` is our `APPROVAL_GRANTED` or `APPROVAL_REJECTED`). Its per-node events are named by the node's
new status (`WORKFLOW_NODE_COMPLETED`), and so are ours: `NODE_*` transitions map by their status. The seed wrote
ACTION_REQUESTED / _COMPLETED / _FAILED for a step executed directly (`execute_saga_step`) and only an
ACTION_ATTEMPT_SUMMARY for a workflow node's step, so a step event maps by whether the step has a node.

docs/observability.md#semantic-saga-mcps-event-names has the table in words.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable

from django.db.models import Q

from audit.models import EventType as E

# Ours -> the seed's, where the two record the same moment.
SEED_NAME_OF: dict[str, str] = {
    E.SAGA_STARTED: "SAGA_STARTED",
    E.SAGA_COMMITTED: "SAGA_COMMITTED",
    E.CHECKPOINT_CREATED: "CHECKPOINT_CREATED",
    E.POLICY_DECISION: "POLICY_DECISION",
    E.POLICY_SAFETY_OVERRIDE: "POLICY_SAFETY_OVERRIDE",
    E.ROLLBACK_REQUESTED: "ROLLBACK_REQUESTED",
    E.ROLLBACK_COMPLETED: "ROLLBACK_COMPLETED",
    E.ROLLBACK_FAILED: "ROLLBACK_FAILED",
    E.NODE_PLANNED: "WORKFLOW_NODE_PLANNED",
    E.RUN_REQUESTED: "WORKFLOW_RUN_REQUESTED",
    E.APPROVAL_GRANTED: "APPROVAL_DECIDED",
    E.APPROVAL_REJECTED: "APPROVAL_DECIDED",
    E.NODE_RETRIED: "OPERATOR_RETRY_REQUESTED",
    E.COMPENSATION_COMPLETED: "COMPENSATION_RESULT",
    E.COMPENSATION_FAILED: "COMPENSATION_RESULT",
    E.RECOVERY_REQUIRED: "RECOVERY_REQUIRES_OPERATOR",
}

# A step executed directly (no node): ours -> the seed's. A proxied call refused by a gate, policy or a person is
# a failed call to the seed.
DIRECT_STEP_NAME_OF: dict[str, str] = {
    E.STEP_STARTED: "ACTION_REQUESTED",
    E.STEP_COMPLETED: "ACTION_COMPLETED",
    E.STEP_FAILED: "ACTION_FAILED",
    E.STEP_REFUSED: "ACTION_FAILED",
}
# A step's outcome, direct or a node's: the seed's per-invocation attempt summary.
ATTEMPT_SUMMARY = "ACTION_ATTEMPT_SUMMARY"
STEP_OUTCOMES: frozenset[str] = frozenset({E.STEP_COMPLETED, E.STEP_FAILED})

# Our node transitions the seed names WORKFLOW_NODE_<new status>.
NODE_TRANSITIONS: frozenset[str] = frozenset(
    {E.NODE_READY, E.NODE_BLOCKED, E.NODE_COMPLETED, E.NODE_FAILED, E.NODE_RECOVERED}
)
NODE_PREFIX = "WORKFLOW_NODE_"

# Seed names with no event of ours, accepted (a seed query stays valid) and matching nothing, and why.
NOT_RECORDED: dict[str, str] = {
    "WORKFLOW_RUN_COMPLETED": "a run goes on in the executor after run_ready_steps answers; each node's own "
    "event (WORKFLOW_NODE_COMPLETED, ...) records its end",
    "RECOVERY_COMPLETED": "a resumed rollback ends in ROLLBACK_COMPLETED or ROLLBACK_FAILED like any other",
}


def seed_name(event_type: str, status: str, node_id: str) -> str | None:
    """The seed's name for one of our events, or None when the seed records no such moment."""
    if event_type in NODE_TRANSITIONS:
        return f"{NODE_PREFIX}{status}" if status else None
    if event_type in DIRECT_STEP_NAME_OF:
        if not node_id:
            return DIRECT_STEP_NAME_OF[event_type]
        return ATTEMPT_SUMMARY if event_type in STEP_OUTCOMES else None
    return SEED_NAME_OF.get(event_type)


def seed_only_names() -> list[str]:
    """The seed's names that are not also ours (its per-status node names apart: they are open-ended)."""
    theirs = {*SEED_NAME_OF.values(), *DIRECT_STEP_NAME_OF.values(), ATTEMPT_SUMMARY, *NOT_RECORDED}
    return sorted(theirs - set(E.values))


def matching(names: Iterable[str], node_statuses: Collection[str]) -> Q:
    """The events any of `names` (ours or the seed's) stands for, as one bounded filter however many names repeat;
    ValueError names an unknown one. `node_statuses` are the statuses a WORKFLOW_NODE_<status> may name."""
    ours: set[str] = set()
    direct: set[str] = set()
    statuses: set[str] = set()
    for name in dict.fromkeys(names):
        if name in E.values:
            ours.add(name)
        elif name == ATTEMPT_SUMMARY:
            ours |= STEP_OUTCOMES
        elif name.startswith(NODE_PREFIX) and name.removeprefix(NODE_PREFIX) in node_statuses:
            statuses.add(name.removeprefix(NODE_PREFIX))
        elif renamed := [o for o, seed in SEED_NAME_OF.items() if seed == name]:
            ours.update(renamed)
        elif stepped := [o for o, seed in DIRECT_STEP_NAME_OF.items() if seed == name]:
            direct.update(stepped)
        elif name not in NOT_RECORDED:
            raise ValueError(unknown_name_message(name, node_statuses))
    query = Q(event_type__in=sorted(ours))
    if direct:
        query |= Q(event_type__in=sorted(direct), node_id="")
    if statuses:
        query |= Q(event_type__in=sorted(NODE_TRANSITIONS), status__in=sorted(statuses))
    return query


def unknown_name_message(name: str, node_statuses: Collection[str]) -> str:
    known = [*E.values, *seed_only_names(), *(f"{NODE_PREFIX}{status}" for status in node_statuses)]
    close = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]}?" if close else ""
    shown = name if len(name) <= 80 else f"{name[:80]}..."
    return (
        f"{shown!r} is not an audit event type we record or one of semantic-saga-mcp's names for them.{hint} "
        "Ask for our names (e.g. STEP_COMPLETED) or the seed's (e.g. ACTION_COMPLETED); docs/observability.md lists "
        "both."
    )
