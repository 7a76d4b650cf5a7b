"""The preview report of a proxy session run dry (`semantic-saga proxy --preview`; docs/proxy.md, "Preview").

A proxy session in preview forwards its reads and records every other call DRY (sagas.coordinator.proxy.calls).
Its report speaks the proxy's vocabulary: calls are grouped by their Sagaz class (I, unknown, C, R, read: most
dangerous first), each group with its tools (`server/tool`) and the gates the calls would have met outside
preview. The would-have gate follows the order a live call is decided in: the proxy's gate `block` (or `hide`)
first, then a tenant policy that denies, then the gate `confirm` or a policy requiring approval; otherwise `allow`.
The compensation plan says what an undo would have done: an R call runs its declared inverse, a C call needs an
operator's decision, an I or unknown call (or an R one known only by its name) has no way back.

Every fact comes from the steps' pinned snapshots (their `proxy` section) and dry verdicts; nothing is stored twice.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sagas.models import Saga, Step
from sagas.states import NodeStatus, StepStatus

# Report order, most dangerous first; unknown is never assumed safe.
SAGAZ_CLASSES = ("I", "unknown", "C", "R", "read")
SAGAZ_MEANING = {
    "I": "irreversible: no way back once executed",
    "unknown": "reversibility unknown: no rule, declared inverse, annotation or name decided; treated as irreversible",
    "C": "compensable: cannot be undone, only corrected afterwards",
    "R": "reversible: a declared inverse restores the prior state",
    "read": "reads: forwarded in preview (a blind agent cannot plan); they change nothing",
}
GATES = ("allow", "confirm", "block")
OUTSIDE_PREVIEW = {
    ("allow", ""): "would run",
    ("confirm", ""): "would wait for approval",
    ("block", "gate"): "would be blocked by the gate",
    ("block", "policy"): "would be denied by policy",
}
# Steps that reached a downstream: forwarded reads (a failed read was sent too). REFUSED and DRY ones never were.
SENT = (StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.EXECUTING)


def proxy_items(steps: list[Step], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The dry items with the proxy's facts: server, tool, Sagaz class and the gate the call would have met."""
    return [_proxy_item(step, item) for step, item in zip(steps, items, strict=True)]


def _proxy_item(step: Step, item: dict[str, Any]) -> dict[str, Any]:
    facts = _facts(step)
    gate, by, why = _would_gate(facts, item)
    return {
        **item,
        "server": facts["server"],
        "tool": facts["tool"],
        "effect_class": facts["class"],
        "would_gate": gate,
        "outside_preview": OUTSIDE_PREVIEW[(gate, by)],
        "why": why,
        "inverse": _inverse(step, facts["class"]),
    }


def _facts(step: Step) -> dict[str, str]:
    proxy = (step.action_definition or {}).get("proxy", {})
    effect_class = str(proxy.get("class") or "unknown")
    return {
        "server": str(proxy.get("server", "")),
        "tool": str(proxy.get("exposed_name") or proxy.get("tool") or step.action),
        "class": effect_class if effect_class in SAGAZ_CLASSES else "unknown",
        "gate": str(proxy.get("gate") or "allow"),
        "gate_reason": str(proxy.get("gate_reason", "")),
    }


def _would_gate(facts: dict[str, str], item: dict[str, Any]) -> tuple[str, str, str]:
    """(gate, what decided a block, why), in the order proxy_call_begin decides a live call."""
    policy = str(item.get("policy_effect", "allow"))
    rules = ", ".join(item.get("matched_rules") or []) or "default"
    if facts["gate"] in ("block", "hide"):
        return "block", "gate", f"the proxy's gate for it is {facts['gate']} ({facts['gate_reason']})"
    if policy == "deny":
        return "block", "policy", str(item.get("why") or f"tenant policy denies it ({rules})")
    if facts["gate"] == "confirm":
        return "confirm", "", facts["gate_reason"]
    if policy == "require_approval":
        return "confirm", "", f"tenant policy requires approval ({rules})"
    return "allow", "", ""


def _inverse(step: Step, effect_class: str) -> dict[str, str] | None:
    """The declared inverse of an R call (or of a C or I one whose pack undoes it when its capture finds the thing):
    its tool and the capture read it restores from (`server/tool`, or "")."""
    definition = step.action_definition or {}
    compensation, capture = definition.get("compensation"), definition.get("capture")
    from_pack = definition.get("proxy", {}).get("class_source") == "pack"
    if (effect_class != "R" and not from_pack) or not isinstance(compensation, dict) or not compensation.get("tool"):
        return None
    server = str(definition.get("proxy", {}).get("server", ""))

    def named(tool: object) -> str:
        return f"{server}/{tool}" if server else str(tool)

    read_first = named(capture["tool"]) if isinstance(capture, dict) and capture.get("tool") else ""
    return {"tool": named(compensation["tool"]), "capture": read_first}


def read_items(saga: Saga) -> list[dict[str, Any]]:
    """The calls forwarded in preview: reads (and reads by the protocol), in order."""
    steps = saga.steps.filter(status__in=SENT).order_by("sequence")
    return [{"sequence": s.sequence, "status": s.status, **_facts(s), "would_gate": "allow"} for s in steps]


def refused_items(saga: Saga) -> list[dict[str, Any]]:
    """Calls refused in preview (the kill switch, a gate or policy refusing a read): nothing was sent."""
    steps = saga.steps.filter(status=StepStatus.REFUSED).order_by("sequence")
    return [_refused(step) for step in steps]


def _refused(step: Step) -> dict[str, Any]:
    error = step.error if isinstance(step.error, dict) else {}
    facts = _facts(step)
    return {"sequence": step.sequence, **facts, "code": error.get("code", ""), "why": error.get("message", "")}


def held_count(saga: Saga) -> int:
    """Calls held for an operator's approval (a read policy holds; in preview nothing else is ever held)."""
    return saga.nodes.filter(status=NodeStatus.WAITING_APPROVAL).count()


def proxy_groups(items: list[dict[str, Any]], reads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per Sagaz class: how many calls, their tools and the gates they would have met (reads: the gate they met)."""
    groups = []
    for name in SAGAZ_CLASSES:
        members = reads if name == "read" else [i for i in items if i["effect_class"] == name]
        if not members:
            continue
        gates = Counter(str(m["would_gate"]) for m in members)
        tools = Counter(_tool_name(m) for m in members)
        groups.append(
            {
                "class": name,
                "meaning": SAGAZ_MEANING[name],
                "count": len(members),
                "executed": name == "read",
                "tools": sorted(tools),
                "calls_by_tool": dict(sorted(tools.items())),
                "gates": {gate: gates.get(gate, 0) for gate in GATES},
                "outside_preview": dict(Counter(str(m.get("outside_preview", "ran")) for m in members)),
            }
        )
    return groups


def _tool_name(member: dict[str, Any]) -> str:
    return f"{member['server']}/{member['tool']}" if member["server"] else str(member["tool"])


def proxy_summary(items: list[dict[str, Any]], reads: int, refused: int, held: int) -> str:
    outcomes = Counter(str(i["outside_preview"]) for i in items)
    parts = [f"{count} {what}" for what, count in sorted(outcomes.items())]
    text = f"Nothing reached the world. {reads} read(s) executed, {len(items)} call(s) recorded dry" + (
        f": {'; '.join(parts)}." if parts else "."
    )
    if refused:
        text += f" {refused} call(s) refused, nothing sent."
    if held:
        text += f" {held} call(s) held for an operator's approval."
    return text


def proxy_compensation_plan(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an undo would do had the dry calls run: newest first, as `semantic-saga undo` walks a session."""
    return [_plan_entry(item) for item in reversed(items)]


def _plan_entry(item: dict[str, Any]) -> dict[str, Any]:
    effect_class = item["effect_class"]
    if inverse := item["inverse"]:
        undo, text = "inverse", f"runs its declared inverse {inverse['tool']}"
        if inverse["capture"]:
            text += f" from the captured {inverse['capture']}"
    elif effect_class == "C":
        undo, text = "decision", "an operator must decide: it cannot be undone, only corrected afterwards"
    elif effect_class == "R":
        undo, text = "no way back", "no declared inverse: R by its name only (a pack would declare one)"
    elif effect_class == "I":
        undo, text = "no way back", "irreversible once executed"
    else:
        undo, text = "no way back", "nothing says how it could be undone (class unknown)"
    return {
        "sequence": item["sequence"],
        "key": item["key"],
        "action": item["action"],
        "server": item["server"],
        "tool": item["tool"],
        "effect_class": effect_class,
        "undo": undo,
        "compensation": text,
    }
