"""semantic-saga-mcp's names for our audit events, so that a query written against it finds ours.

Stored names never change (they are hashed into chains), so the seed's names are aliases: every answer that lists
events carries each event's `seed_name`, and every filter by event type accepts the seed's names beside ours
(`matching`). One of our events has at most one seed name; a seed name may stand for several of ours (its
`APPROVAL_DECIDED` is our `APPROVAL_GRANTED` or `APPROVAL_REJECTED`). Its per-node events are named by the node's
new status (`WORKFLOW_NODE_COMPLETED`), and so are ours: `NODE_*` transitions map by their status.

docs/observability.md#semantic-saga-mcps-event-names has the table in words.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

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
    E.STEP_STARTED: "ACTION_REQUESTED",
    E.STEP_COMPLETED: "ACTION_COMPLETED",
    E.STEP_FAILED: "ACTION_FAILED",
    # A proxied call refused by a gate, policy or a person: the seed records a refused call as a failed one.
    E.STEP_REFUSED: "ACTION_FAILED",
    E.NODE_PLANNED: "WORKFLOW_NODE_PLANNED",
    E.RUN_REQUESTED: "WORKFLOW_RUN_REQUESTED",
    E.APPROVAL_GRANTED: "APPROVAL_DECIDED",
    E.APPROVAL_REJECTED: "APPROVAL_DECIDED",
    E.NODE_RETRIED: "OPERATOR_RETRY_REQUESTED",
    E.COMPENSATION_COMPLETED: "COMPENSATION_RESULT",
    E.COMPENSATION_FAILED: "COMPENSATION_RESULT",
    E.RECOVERY_REQUIRED: "RECOVERY_REQUIRES_OPERATOR",
}

# Our node transitions the seed names WORKFLOW_NODE_<new status>.
NODE_TRANSITIONS: frozenset[str] = frozenset(
    {E.NODE_READY, E.NODE_BLOCKED, E.NODE_COMPLETED, E.NODE_FAILED, E.NODE_RECOVERED}
)
NODE_PREFIX = "WORKFLOW_NODE_"

# Seed names that stand for ours beyond SEED_NAME_OF: its per-invocation attempt summary is our step's outcome.
MORE_OF_OURS: dict[str, tuple[str, ...]] = {"ACTION_ATTEMPT_SUMMARY": (E.STEP_COMPLETED, E.STEP_FAILED)}

# Seed names with no event of ours, accepted (a seed query stays valid) and matching nothing, and why.
NOT_RECORDED: dict[str, str] = {
    "WORKFLOW_RUN_COMPLETED": "a run goes on in the executor after run_ready_steps answers; each node's own "
    "event (WORKFLOW_NODE_COMPLETED, ...) records its end",
    "RECOVERY_COMPLETED": "a resumed rollback ends in ROLLBACK_COMPLETED or ROLLBACK_FAILED like any other",
}


def seed_name(event_type: str, status: str) -> str | None:
    """The seed's name for one of our events, or None when the seed records no such moment."""
    if event_type in NODE_TRANSITIONS:
        return f"{NODE_PREFIX}{status}" if status else None
    return SEED_NAME_OF.get(event_type)


def _ours_named(seed: str) -> tuple[str, ...]:
    return tuple(ours for ours, name in SEED_NAME_OF.items() if name == seed) + MORE_OF_OURS.get(seed, ())


def known_names() -> list[str]:
    """Every name a filter accepts: ours, and the seed's (bar its per-status node names, which are open-ended)."""
    return sorted({*E.values, *SEED_NAME_OF.values(), *MORE_OF_OURS, *NOT_RECORDED})


def matching(names: Iterable[str]) -> Q:
    """The events any of `names` (ours or the seed's) stands for; ValueError names an unknown one."""
    query = Q(pk__in=[])
    stored = set(E.values)
    for name in names:
        if name in stored:
            query |= Q(event_type=name)
        if name.startswith(NODE_PREFIX) and name != "WORKFLOW_NODE_PLANNED":
            query |= Q(event_type__in=NODE_TRANSITIONS, status=name.removeprefix(NODE_PREFIX))
        elif ours := _ours_named(name):
            query |= Q(event_type__in=ours)
        elif name not in stored and name not in NOT_RECORDED:
            raise ValueError(unknown_name_message(name))
    return query


def unknown_name_message(name: str) -> str:
    close = difflib.get_close_matches(name.upper(), known_names(), n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]}?" if close else ""
    return (
        f"{name!r} is not an audit event type we record or one of semantic-saga-mcp's names for them.{hint} "
        "Ask for our names (e.g. STEP_COMPLETED) or the seed's (e.g. ACTION_COMPLETED); docs/observability.md lists "
        "both."
    )
