"""What an undo of a proxy session does with each call, decided from what the call kept, before anything is sent.

The undo walk (sagas.coordinator._undo_walk), its dry run and the ledger's `undo_plan` all read it here, so the plan
a person sees is the plan that runs: the verdict, and for an R call its inverse rendered exactly as the compensation
will send it (registry.compensation_plan, from the receipt the compensation reads). An inverse that cannot be built
(a result that carries no JSON, one kept only in part, a missing field) is `cannot_undo` with the reason, as soon as
the call is journaled, not at undo time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from registry.capture_outcomes import POST_STATE, effective_contract, no_inverse, reads_itself_after
from registry.compensation_plan import InversePlan, inverse_plan
from registry.contracts import has_compensation
from registry.templating import references_forward_answer
from sagas.models import Step
from sagas.selectors.undo_existing import existed_before
from sagas.states import StepStatus

NOT_SENT = frozenset({StepStatus.REFUSED, StepStatus.DRY})
# An undo's reason (kept with the session's undo requests): a sentence or two for the record, not a document.
MAX_UNDO_REASON_CHARS = 2000


@dataclass(frozen=True)
class UndoItem:
    """What the walk did (or, in a dry run, would do) with one proxied call."""

    seq: int
    step_id: str
    tool: str
    server: str
    effect_class: str
    # undone | would_undo | cannot_undo | needs_decision | no_way_back | inverse_blocked | existed_before | skipped
    # | already_undone | drifted | failed | needs_person | left | withdrawn (a held call, never sent, that the undo
    # ends)
    verdict: str
    detail: str
    inverse: dict[str, Any] | None = None  # {"tool", "arguments"} when an inverse is declared and can be built


def forward_receipt(step: Step) -> Any:
    """What the compensation templates read as the forward result: the stored result, or, for an uncertain step
    whose answer never arrived, the receipt its action kept (an MCP capture's pre_state) when the compensation
    reads only that pre-state. Restoring a captured prior state is correct whether or not the lost call applied."""
    if step.result is not None:
        return step.result
    receipt = (step.error or {}).get("receipt") if isinstance(step.error, dict) else None
    compensation = step.action_definition.get("compensation", {})
    if (
        step.uncertain_outcome
        and isinstance(receipt, dict)
        and "pre_state" in receipt
        and not references_forward_answer(compensation)
    ):
        return receipt
    return None


def step_contract(step: Step) -> dict[str, Any]:
    """The step's contract as its undo applies: with the inverse its capture's recorded outcome chose."""
    return effective_contract(step.action_definition, forward_receipt(step))


def step_inverse(step: Step) -> InversePlan | None:
    """The step's inverse as its compensation would send it now, or None when it declares none."""
    compensation = step_contract(step).get("compensation")
    if not isinstance(compensation, dict):
        return None
    base = {"input": step.input, "saga": {"id": str(step.saga_id)}, "step": {"id": str(step.id)}}
    return inverse_plan(compensation, base, forward_receipt(step))


def verdict_of(step: Step) -> tuple[str, str]:
    """What the walk does with `step`, before any call."""
    effect_class = proxy_section(step).get("class", "unknown")
    if step.status == StepStatus.COMPENSATED:
        return "already_undone", "undone by an earlier rollback"
    if step.status in NOT_SENT:
        return "skipped", f"{step.status.lower()}: it never reached the world"
    if step.status == StepStatus.FAILED and not step.uncertain_outcome and not _changed_despite_error(step):
        read_after = POST_STATE in (step.result if isinstance(step.result, dict) else {})
        return "skipped", "failed: the tool answered an error or the call was never sent" + (
            "" if read_after else " (nothing was read after it, so a change it made anyway is not seen)"
        )
    if effect_class == "read" or step.action_definition.get("semantic", {}).get("reversibility") == "read_only":
        return "skipped", "a read: nothing to undo"
    if _changed_nothing(step):
        return "skipped", "it changed nothing: its capture read the same state right after it as before it"
    if (branch := no_inverse(step.action_definition, forward_receipt(step))) is not None:
        why = f"what the capture read before it is not what an inverse needs, so it has none: {branch.reason}"
        return ("no_way_back", why) if branch.effect_class == "I" else ("needs_decision", why)
    if has_compensation(step_contract(step)):
        plan = step_inverse(step)
        if plan is not None and plan.problem:
            return "cannot_undo", plan.problem
        compensation = step_contract(step)["compensation"]
        if plan is not None and plan.arguments and (seen := existed_before(step, compensation, plan.arguments)):
            return "existed_before", (
                f"no inverse: its answer names what existed before it ({seen}), so {plan.tool} would remove what was "
                "there before the session; a person checks what the call changed"
            )
        if (gate := inverse_gate(step)) is not None and gate.action in ("block", "hide"):
            return "inverse_blocked", (
                f"its inverse {gate.tool} is gated {gate.action} ({gate.reason}), so the undo never sends it: a "
                "person corrects it outside the proxy"
            )
        if gate is not None and gate.action == "confirm":
            return "would_undo", (
                f"its inverse {gate.tool} is gated confirm: it runs when a person undoes the session (an agent's undo "
                "leaves it waiting for one)"
            )
        if not _read_around(step):
            # Nothing was read around the call, so a change made to its target since cannot be seen: say so.
            return (
                "would_undo",
                "its inverse would run (nothing is read around this call, so a change made since is not checked)",
            )
        return "would_undo", "its inverse would run"
    declared = _pack_reason(step)
    if effect_class == "C":
        return (
            "needs_decision",
            declared or "cannot be undone, only corrected afterwards: an operator decides what to do",
        )
    if effect_class == "I":
        return "no_way_back", declared or "irreversible: no way back once executed"
    if not proxy_section(step):
        return "no_way_back", f"{step.action} declares no compensation: its effect remains"
    return "no_way_back", (
        f"class {effect_class}: no usable inverse was declared when it ran (a pack entry whose tools its server "
        "offers makes the next calls undoable)"
    )


@dataclass(frozen=True)
class InverseGate:
    tool: str
    action: str
    reason: str


def inverse_gate(step: Step) -> InverseGate | None:
    """The gate the inverse the undo would send got as a call of its own when the call was made (the proxy's
    `inverse_gates`), or None where nothing was recorded (calls journaled before inverses were gated)."""
    compensation = step_contract(step).get("compensation")
    gates = proxy_section(step).get("inverse_gates")
    if not isinstance(compensation, dict) or not isinstance(gates, dict):
        return None
    tool = str(compensation.get("tool", ""))
    gate = gates.get(tool)
    if not isinstance(gate, dict):
        return None
    return InverseGate(tool, str(gate.get("gate", "allow")), str(gate.get("reason", "")))


def _read_around(step: Step) -> bool:
    return bool({"capture", "read_after"} & step.action_definition.keys())


def _changed_despite_error(step: Step) -> bool:
    """The call answered an error, yet what its capture read right after it differs from what it read before: it
    changed something (a batch that failed half-way), so its undo puts back the state read before."""
    stored = step.result if isinstance(step.result, dict) else {}
    return (
        stored.get("is_error") is True
        and "pre_state" in stored
        and POST_STATE in stored
        and stored[POST_STATE] != stored["pre_state"]
    )


def _changed_nothing(step: Step) -> bool:
    """The capture read again right after the call (`read_after: true`) found what it found before: an edit's dry
    run, a write of the same content. Its inverse would change nothing either, and a later change to the same thing
    is no reason to stop the undo."""
    capture = step.action_definition.get("capture")
    stored = step.result if isinstance(step.result, dict) else {}
    return (
        step.status == StepStatus.COMPLETED
        and isinstance(capture, dict)
        and reads_itself_after(capture)
        and "pre_state" in stored
        and stored.get(POST_STATE, object()) == stored["pre_state"]
    )


def _pack_reason(step: Step) -> str:
    """A pack's reason why the call has no inverse, when a pack declared it ('' otherwise)."""
    proxy = proxy_section(step)
    if proxy.get("class_source") != "pack":
        return ""
    return str(proxy.get("class_reason", ""))  # 'pack "<name>": no inverse: <reason>'


def item(step: Step, verdict: str, detail: str) -> UndoItem:
    proxy = proxy_section(step)
    plan = step_inverse(step)
    return UndoItem(
        seq=step.sequence,
        step_id=str(step.id),
        tool=str(proxy.get("exposed_name") or proxy.get("tool", step.action)),
        server=str(proxy.get("server", "")),
        effect_class=str(proxy.get("class", "unknown")),
        verdict=verdict,
        detail=detail,
        inverse={"tool": plan.tool, "arguments": plan.arguments} if plan and plan.arguments is not None else None,
    )


def undo_plan(step: Step) -> dict[str, Any]:
    """The ledger's `undo_plan` of a step: the verdict, why, and the inverse as it would be sent."""
    verdict, detail = verdict_of(step)
    plan = step_inverse(step)
    return {
        "verdict": verdict,
        "detail": detail,
        "inverse": plan.as_json() if plan is not None else None,
    }


def proxy_section(step: Step) -> dict[str, Any]:
    section = step.action_definition.get("proxy", {})
    return section if isinstance(section, dict) else {}
