"""Approval reads: whether a node holds a binding approval, and what an approver needs to judge one request,
computed once for every surface (the tenant's requests still waiting: sagas.selectors.approval_requests).

The console's queue, decide page and saga detail, the REST approval list and the MCP and A2A views of a waiting
node (sagas.selectors.shapes.node_to_dict) all read an approval through `approval_contexts`: the node's input (field by
field, long values folded), the pinned contract's risk, reversibility and compensation, the rule or contract that
required the approval, and the input digest the approval binds to (`input_digest`, the one the coordinator stores
when it requests an approval and compares, through `has_binding_approval`, before the node may run).

Inputs hold no secrets (secret_ref values live only in contract headers and are resolved at call time), so an
input is shown as stored. None of this is written to the audit chain, which stays payload-free.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import Q

from audit.canonical import sha256_hex
from audit.models import AuditEvent, EventType
from registry.models import ActionDefinition
from registry.semantics import reversibility_of, risk_of
from sagas.models import Approval, Node
from sagas.states import ApprovalStatus, NodeStatus

if TYPE_CHECKING:
    from sagas.selectors.held_call_view import HeldCallView

# Characters of one input value shown unfolded. About one table cell line: an amount, a currency, an email or an
# id reads at a glance; a note, a list or an object longer than this is folded to a preview with the whole value
# one click (or one field) away, so a long value never pushes the decision off the screen.
PREVIEW_CHARS = 80
# requested_by values the coordinator stores (sagas.coordinator.approvals.approval_request).
POLICY_PREFIX = "policy:"
RETRY = "retry"
# A call held by the MCP proxy: its approval's requested_by, action prefix and node key prefix.
PROXY_REQUEST = "proxy:"
PROXY_PREFIX = "proxy."
HELD_KEY = "proxy-call-"

CONSEQUENCE = {
    "reversible": "reversible — undone by {call}",
    "compensable": "compensable — corrected afterwards by {call}",
    "irreversible": "irreversible — no undo",
    "read_only": "read only — changes nothing, nothing to undo",
    "unknown": "reversibility unknown — treat it as irreversible",
}


def input_digest(payload: Any) -> str:
    """The digest an approval binds to: the SHA-256 of the node input's canonical JSON."""
    return sha256_hex(payload)


def has_binding_approval(node: Node) -> bool:
    """An APPROVED decision bound to the node's current contract hash and input digest exists."""
    approval = node.approvals.filter(status=ApprovalStatus.APPROVED).order_by("-decided_at").first()
    return (
        approval is not None
        and approval.definition_hash == node.action_definition_hash
        and approval.input_digest == input_digest(node.input)
    )


@dataclass(frozen=True)
class InputField:
    """One top-level input value as an operator reads it: strings as they are, anything else as JSON."""

    name: str
    text: str
    preview: str
    folded: bool  # too long or multi-line for a table cell: show `preview`, fold `text`

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.name, "preview": self.preview, "folded": self.folded}


@dataclass(frozen=True)
class ApprovalContext:
    """The facts of one approval request. `required_by` is contract, policy or caller."""

    approval: Approval
    node: Node
    fields: tuple[InputField, ...]
    risk: str
    reversibility: str
    compensation: str | None  # the call a rollback makes, e.g. "POST https://pay.example/refunds"
    consequence: str  # e.g. "compensable — corrected afterwards by POST https://pay.example/refunds"
    required_by: str
    policy_rules: tuple[str, ...]
    required_because: str
    input_digest: str
    digest_current: bool  # the node's input still hashes to input_digest; otherwise approving lets nothing run
    # A held proxied call whose tool definition is not its pin: what differs, one line each (empty otherwise).
    definition_changes: tuple[str, ...] = ()
    # A call held by the MCP proxy, in the proxy's terms (tool, server, class, gate, undo, pinned definition).
    held: HeldCallView | None = None

    @property
    def definition_hash(self) -> str:
        return self.approval.definition_hash

    def as_dict(self, *, payload: bool = True) -> dict[str, Any]:
        """JSON-ready; without `payload` (payload-free views such as the timeline) the input preview is left out."""
        out: dict[str, Any] = {
            "approval_id": str(self.approval.id),
            "risk": self.risk,
            "reversibility": self.reversibility,
            "compensation": self.compensation,
            "consequence": self.consequence,
            "required_by": self.required_by,
            "policy_rules": list(self.policy_rules),
            "required_because": self.required_because,
            "input_digest": self.input_digest,
            "input_digest_current": self.digest_current,
            "definition_hash": self.definition_hash,
            "definition_changed": bool(self.definition_changes),
            "definition_changes": list(self.definition_changes),
        }
        if payload:
            out["input_preview"] = [f.as_dict() for f in self.fields]
        return out


def approval_context(approval: Approval) -> ApprovalContext:
    return approval_contexts([approval])[approval.id]


def approval_contexts(approvals: Iterable[Approval]) -> dict[uuid.UUID, ApprovalContext]:
    """Each approval's context by approval id, in three queries at most whatever the count (`approval.node` is
    read, so select or prefetch it)."""
    # Imported here: the pins and their description scan behind it cost some 20 ms to load, and whoever imports
    # this module for another read should not pay for them.
    from sagas.selectors.held_call_view import held_call_views

    rows = list(approvals)
    nodes = [a.node for a in rows]
    contracts = _contracts(nodes)
    first_reasons = _first_reasons([a for a in rows if a.requested_by == RETRY])
    # A held proxied call's approval keeps the snapshot it binds: that is what the approver judges.
    judged = {a.id: a.snapshot or contracts.get((a.node.action, a.node.action_version)) for a in rows}
    held = held_call_views({k: c for k, c in judged.items() if c}, {a.id: a.node.input for a in rows})
    return {a.id: _context(a, judged[a.id], first_reasons, held.get(a.id)) for a in rows}


def waiting_contexts(nodes: Iterable[Node]) -> dict[uuid.UUID, ApprovalContext]:
    """Contexts of the pending requests of WAITING_APPROVAL nodes (their prefetched approvals), by approval id."""
    return approval_contexts(p for n in nodes if (p := pending_of(n)) is not None)


def pending_of(node: Node, approvals: Iterable[Approval] | None = None) -> Approval | None:
    """The request a WAITING_APPROVAL node waits on, among `approvals` (default: node.approvals, prefetched or
    not), else None."""
    if node.status != NodeStatus.WAITING_APPROVAL:
        return None
    pending = [
        a for a in (node.approvals.all() if approvals is None else approvals) if a.status == ApprovalStatus.PENDING
    ]
    return max(pending, key=lambda a: a.created_at) if pending else None


def _context(
    approval: Approval, contract: dict[str, Any] | None, first_reasons: dict[uuid.UUID, str], held: HeldCallView | None
) -> ApprovalContext:
    node = approval.node
    semantic = dict((contract or {}).get("semantic") or {})
    reversibility = reversibility_of(semantic.get("reversibility"))  # semantic-saga-mcp's words read as ours
    call = _compensation_call(contract)
    consequence = _consequence(reversibility, call, contract is not None)
    if held is not None:
        # A held call is judged by its class (a C's contract says irreversible, but it is corrected afterwards).
        reversibility, consequence = held.reversibility, held.consequence
    required_by, rules, because = _requirement(approval, node, contract, first_reasons.get(node.id))
    return ApprovalContext(
        approval=approval,
        node=node,
        fields=tuple(_field(name, value) for name, value in (node.input or {}).items()),
        risk=risk_of(semantic.get("risk")) if contract else "unknown",
        reversibility=reversibility,
        compensation=call,
        consequence=consequence,
        required_by=required_by,
        policy_rules=rules,
        required_because=because,
        input_digest=approval.input_digest,
        digest_current=input_digest(node.input) == approval.input_digest,
        definition_changes=_definition_changes(contract),
        held=held,
    )


def _definition_changes(contract: dict[str, Any] | None) -> tuple[str, ...]:
    proxy = (contract or {}).get("proxy") or {}
    if not proxy.get("definition_changed"):
        return ()
    return tuple(str(line) for line in proxy.get("definition_changes") or ("its definition is not the pinned one",))


def _field(name: str, value: Any) -> InputField:
    one_line = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    folded = len(one_line) > PREVIEW_CHARS or "\n" in one_line
    # Folded structures unfold pretty-printed; everything else reads best exactly as it is stored.
    text = json.dumps(value, ensure_ascii=False, indent=2) if folded and not isinstance(value, str) else one_line
    flat = " ".join(one_line.split()) if "\n" in one_line else one_line
    preview = flat[: PREVIEW_CHARS - 1] + "…" if len(flat) > PREVIEW_CHARS else flat
    return InputField(name=str(name), text=text, preview=preview, folded=folded)


def _contracts(nodes: list[Node]) -> dict[tuple[str, str], dict[str, Any]]:
    """The pinned contract of each node (an id + version row is immutable, so the pin names exactly one)."""
    pairs = {(n.action, n.action_version) for n in nodes}
    if not pairs:
        return {}
    query = Q()
    for action, version in pairs:
        query |= Q(action_id=action, version=version)
    rows = ActionDefinition.objects.filter(query).values_list("action_id", "version", "definition")
    return {(a, v): dict(d) for a, v, d in rows} | _held_proxied_calls(nodes)


def _held_proxied_calls(nodes: list[Node]) -> dict[tuple[str, str], dict[str, Any]]:
    """A call held by the MCP proxy has no registry row: what the approver judges comes from its planning's audit
    facts (server, tool, class, gate), as the contract its step will pin says it (sagas.coordinator.proxy.contract)."""
    held = {str(n.id): n for n in nodes if n.action.startswith(PROXY_PREFIX) and (n.key or "").startswith(HELD_KEY)}
    if not held:
        return {}
    from registry.tool_classes import CLASS_REVERSIBILITY, CLASS_RISK  # as held_call_views: only when judging

    planned = AuditEvent.objects.filter(event_type=EventType.NODE_PLANNED, node_id__in=list(held))
    contracts = {}
    for node_id, data in planned.values_list("node_id", "data"):
        node, effect_class = held[node_id], str(data.get("class", "unknown"))
        # An R is reversible only through the inverse its step will pin; until it runs, say unknown.
        semantic = {
            "risk": CLASS_RISK.get(effect_class, "medium"),
            "reversibility": CLASS_REVERSIBILITY.get(effect_class, "unknown") if effect_class != "R" else "unknown",
        }
        contracts[(node.action, node.action_version)] = {"semantic": semantic, "proxy": dict(data)}
    return contracts


def _first_reasons(retried: list[Approval]) -> dict[uuid.UUID, str]:
    """A re-requested approval (after a retry) keeps the reason of the node's first request."""
    if not retried:
        return {}
    rows = (
        Approval.objects.filter(node_id__in={a.node_id for a in retried})
        .exclude(requested_by=RETRY)
        .order_by("-created_at")
        .values_list("node_id", "requested_by")
    )
    return dict(rows)  # newest first, so the dict keeps each node's oldest request


def _requirement(
    approval: Approval, node: Node, contract: dict[str, Any] | None, first_reason: str | None
) -> tuple[str, tuple[str, ...], str]:
    """(required_by, policy rule ids, the sentence an approver reads) from what the coordinator stored."""
    contract_gate = bool(((contract or {}).get("execution_policy") or {}).get("approval_required"))
    retried = approval.requested_by == RETRY
    source = (first_reason or ("contract" if contract_gate else "caller")) if retried else approval.requested_by
    pinned = f"{node.action}@{node.action_version}"
    rules: tuple[str, ...] = ()
    if source.startswith(PROXY_REQUEST) and contract is not None and "proxy" in contract:
        facts = contract["proxy"]
        gate = f"gate {facts.get('gate')} ({source[len(PROXY_REQUEST) :]})"
        because = (
            f"the MCP proxy holds this call of {facts.get('tool')} on {facts.get('server')} for confirmation: "
            f"class {facts.get('class')} (by {facts.get('class_source')}), {gate}"
        )
        return "proxy", (), because
    if source.startswith(POLICY_PREFIX):
        required_by = "policy"
        rules = tuple(r for r in source[len(POLICY_PREFIX) :].split(",") if r)
        because = f"tenant policy requires approval (rule {', '.join(rules) or 'default effect'})"
        if contract_gate:
            because += f"; the contract {pinned} requires it too"
    elif source == "contract":
        required_by, because = (
            "contract",
            f"the contract {pinned} requires approval (execution_policy.approval_required)",
        )
    else:
        required_by, because = "caller", "the planner asked for approval (plan_saga_step with approval_required=true)"
    if retried:
        because += "; requested again because the node was retried"
    return required_by, rules, because


def _compensation_call(contract: dict[str, Any] | None) -> str | None:
    """The request a rollback would make, as the contract declares it (templates unrendered, no headers)."""
    request = (contract or {}).get("compensation")
    if not isinstance(request, dict):
        return None
    if "url" in request:
        return f"{request.get('method', 'POST')} {request['url']}"
    if "tool" in request:
        return f"MCP tool {request['tool']}"
    if "builtin" in request:
        return f"built-in {request['builtin']}"
    return "its declared compensation"


def _consequence(reversibility: str, call: str | None, known: bool) -> str:
    if not known:
        return "contract not found in the registry — treat it as irreversible"
    if reversibility in ("reversible", "compensable"):
        return CONSEQUENCE[reversibility].format(call=call) if call else f"{reversibility} — no compensation declared"
    text = CONSEQUENCE.get(reversibility, CONSEQUENCE["unknown"])
    return f"{text} (a rollback still runs {call})" if call else text
