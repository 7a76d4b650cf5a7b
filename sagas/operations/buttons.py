"""The operator console's saga buttons (run, commit, roll back, retry compensation, resume rollback, promote):
the words of each confirmation page and the message shown once the operation ran. The table's entries name them
(sagas.operations.table), and the console builds its buttons and pages from there.
"""

from __future__ import annotations

from typing import Any

from sagas.operations.operation import Button
from sagas.states import SagaStatus


def _ran(saga_id: str, result: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in sorted(result["run"]["node_counts"].items())) or "no nodes"
    return f"Run requested for saga {saga_id} ({counts}). The executor runs the ready nodes; refresh to follow them."


def _committed(saga_id: str, result: dict[str, Any]) -> str:
    return f"Saga {result['id']} is {result['status']}."


ROLLBACK_OUTCOMES: dict[str, str] = {
    SagaStatus.ROLLED_BACK: "rolled back: every completed step was compensated",
    SagaStatus.ROLLBACK_FAILED: "ROLLBACK_FAILED: some compensations failed; see the recovery screen",
    SagaStatus.FAILED: "waiting for attempts in flight to finish; the rollback starts then",
    SagaStatus.ROLLING_BACK: "rolling back (another runner holds the rollback)",
}


def _rolled_back(saga_id: str, result: dict[str, Any]) -> str:
    return f"Saga {result['id']}: {ROLLBACK_OUTCOMES.get(result['status'], result['status'])}."


def _promoted(saga_id: str, result: dict[str, Any]) -> str:
    planned = len(result.get("workflow", {}).get("nodes", []))
    return (
        f"Preview {saga_id} promoted: saga {result['id']} is a real saga with {planned} node(s) planned again, every "
        "check made afresh. Open it from the saga list and run its ready nodes."
    )


# Never hold a console page: the executor (Celery or the embedded pool) runs the nodes, and a rollback waiting
# for attempts in flight starts when they finish.
AT_ONCE = {"wait_seconds": 0}

RUN = Button(
    "run",
    "Run ready nodes",
    "Starts a run: READY nodes are executed by the workers in dependency waves, and nodes that become "
    "ready follow. Nodes waiting for approval stay waiting.",
    "Run ready nodes",
    _ran,
    fixed=AT_ONCE,
)

COMMIT = Button(
    "commit",
    "Commit saga",
    "Commits the saga: its work is final and it can no longer be rolled back. Only an ACTIVE saga whose "
    "nodes all COMPLETED commits.",
    "Commit",
    _committed,
)

ROLLBACK = Button(
    "rollback",
    "Roll back saga",
    "Stops new work and compensates every completed step, newest first, with the contract each step ran "
    "with. Nodes that never started are blocked. This cannot be undone.",
    "Roll back",
    _rolled_back,
    fixed=AT_ONCE,
    danger=True,
)

RETRY_COMPENSATION = Button(
    "retry_compensation",
    "Retry compensation",
    "Retries the compensations that failed (the others are never compensated twice). Fix the downstream "
    "system first; if a compensation fails again the saga returns to ROLLBACK_FAILED.",
    "Retry compensation",
    _rolled_back,
    fixed=AT_ONCE,
    danger=True,
)

RESUME_ROLLBACK = Button(
    "resume_rollback",
    "Resume rollback",
    "Starts the pending or interrupted rollback now instead of waiting for the recovery sweeper.",
    "Resume rollback",
    _rolled_back,
    fixed=AT_ONCE,
)

PROMOTE = Button(
    "promote",
    "Promote preview",
    "Creates a new, real saga that plans this preview's steps again, with the same keys, dependencies "
    "and inputs. Every check runs afresh (registry, schema, policy, kill switch, approvals); nothing is "
    "trusted from the dry run. The preview itself is unchanged.",
    "Promote to a real saga",
    _promoted,
)
