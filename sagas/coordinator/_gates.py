"""Gate texts: what an agent is told when a call is held for approval, denied, over budget or stopped.

An LLM reads these as the whole answer to its tool call, so each one says, in this order: what did not run, why
(the class, rule or budget that decided), that it must not retry or work around the gate, and the durable path
forward. Every surface returns them as an error result (MCP `isError`, A2A failed task, REST 403/409).
"""

from __future__ import annotations

from governance.policy.facts import Decision
from sagas.errors import ApprovalRequired, SagaError

DO_NOT_WORK_AROUND = (
    "Do not retry this call and do not work around the gate (no other action, tool, saga or changed parameters to "
    "get the same effect)."
)


def gate_text(*, what: str, why: str, forward: str) -> str:
    return f"{what} was NOT executed: {why}. {DO_NOT_WORK_AROUND} {forward}"


def approval_needed(action: str, version: str, source: str) -> ApprovalRequired:
    """An immediate execution of an action that must be approved first (by its contract or tenant policy)."""
    return ApprovalRequired(
        message=gate_text(
            what=f"Executing {action}@{version} immediately",
            why=f"it needs a person's approval first ({source})",
            forward="Plan it with plan_saga_step instead: the node waits in WAITING_APPROVAL until an operator "
            "approves it (console approval queue, or approve_saga_step by another principal), and then "
            "run_ready_steps runs it.",
        ),
        action=action,
        gate="approval",
    )


def policy_denied(decision: Decision, what: str) -> SagaError:
    if decision.budget:
        why = f"it would exceed the tenant budget {decision.budget} ({decision.reason})"
        forward = (
            "Finish or roll back work in this saga, or ask an operator of your tenant to raise the budget; the "
            "saga itself is unchanged."
        )
    else:
        rules = ", ".join(decision.matched_rules) or "the tenant's default effect"
        why = f"tenant policy denies it: {decision.reason} (rule {rules})"
        forward = (
            "Ask an operator of your tenant to change the policy, or plan the step for human approval where the "
            "policy allows that; the saga itself is unchanged."
        )
    return SagaError(
        "POLICY_DENIED",
        gate_text(what=what[:1].upper() + what[1:], why=f"{why}, policy revision {decision.revision}", forward=forward),
        decision_id=decision.decision_id,
        matched_rules=list(decision.matched_rules),
        budget=decision.budget,
        gate="budget" if decision.budget else "policy",
    )


def kill_switch(scope: str, reason: str, engaged_by: str, what: str) -> SagaError:
    return SagaError(
        "KILL_SWITCH_ENGAGED",
        gate_text(
            what=what[:1].upper() + what[1:],
            why=f"the kill switch for {scope} is engaged ({reason!r}, by {engaged_by})",
            forward="Rollback and rejection still work. Wait for an admin of your tenant to release the switch "
            "(get_policy_status shows it), then call again.",
        ),
        gate="kill_switch",
    )
