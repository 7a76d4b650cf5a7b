"""A call held by the MCP proxy, as its approver reads it: in the proxy's terms (tool and server, the class with how
it was decided, the gate and why), what the class means and what an undo could do about it, and the tool's
definition as the deployment pinned it (with the one its server lists now, when that differs).

Everything comes from the snapshot the held call's approval binds (sagas.coordinator.proxy.contract: the derived
contract plus its `proxy` section) and from the tool pins (registry.models.ToolPin), read once for all held calls
of a page. Nothing is stored for it. The class texts are registry.tool_classes.CLASS_MEANING, the one table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from registry.compensation_plan import inverse_plan
from registry.models import ToolPin
from registry.tool_classes import ClassMeaning, class_meaning
from registry.tool_pins import definition_text

# A template argument of the inverse that the held call's own arguments cannot fill yet (it reads the answer).
_UNFILLED = "…"


@dataclass(frozen=True)
class HeldCallView:
    """One held proxied call. `pinned_definition` and `current_definition` are JSON text ("" when not known);
    `current_definition` is set only when it is not the pinned one. `definition_note` says what could not be
    shown and why."""

    server: str
    tool: str
    exposed_name: str
    effect_class: str
    class_source: str
    class_reason: str
    gate: str
    gate_source: str
    gate_reason: str
    meaning: ClassMeaning
    consequence: str
    undo: str
    definition_changed: bool
    pinned_definition: str
    current_definition: str
    definition_note: str

    @property
    def reversibility(self) -> str:
        return self.meaning.reversibility


def held_call_views(snapshots: Mapping[Any, Mapping[str, Any]], inputs: Mapping[Any, Any]) -> dict[Any, HeldCallView]:
    """The view of each held call by the same key as `snapshots` (an approval's snapshot holding a `proxy` section;
    others are left out), with `inputs[key]` its exact arguments. One query for the tool pins of all of them."""
    held = {key: s for key, s in snapshots.items() if isinstance(s.get("proxy"), Mapping)}
    pins = _pins((str(s["proxy"].get("server", "")), str(s["proxy"].get("tool", ""))) for s in held.values())
    views = {}
    for key, snapshot in held.items():
        proxy = snapshot["proxy"]
        pin = pins.get((str(proxy.get("server", "")), str(proxy.get("tool", ""))))
        views[key] = _view(snapshot, proxy, inputs.get(key), pin)
    return views


def _view(snapshot: Mapping[str, Any], proxy: Mapping[str, Any], arguments: Any, pin: ToolPin | None) -> HeldCallView:
    compensation = snapshot.get("compensation")
    # The derived contract carries a compensation only for an R with a declared inverse (_proxy_contract._contract).
    inverse = compensation if isinstance(compensation, Mapping) and "tool" in compensation else None
    effect_class = str(proxy.get("class", "unknown"))
    meaning = class_meaning(effect_class, has_inverse=inverse is not None)
    call = _inverse_call(inverse, arguments) if inverse is not None else ""
    pinned, current, note = _definitions(snapshot, proxy, pin)
    return HeldCallView(
        server=str(proxy.get("server", "")),
        tool=str(proxy.get("tool", "")),
        exposed_name=str(proxy.get("exposed_name") or proxy.get("tool", "")),
        effect_class=effect_class,
        class_source=str(proxy.get("class_source", "")),
        class_reason=str(proxy.get("class_reason", "")),
        gate=str(proxy.get("gate", "")),
        gate_source=str(proxy.get("gate_source", "")),
        gate_reason=str(proxy.get("gate_reason", "")),
        meaning=meaning,
        consequence=meaning.consequence.format(tool=inverse["tool"] if inverse else "", inverse=call),
        undo=meaning.undo.format(tool=inverse["tool"] if inverse else "", inverse=call),
        definition_changed=bool(proxy.get("definition_changed")),
        pinned_definition=pinned,
        current_definition=current,
        definition_note=note,
    )


def _inverse_call(inverse: Mapping[str, Any], arguments: Any) -> str:
    """`delete_contact(id=…)`: the inverse with what the held call's arguments already fill; a value read from the
    answer (`${result.id}`) is not known before the call runs, so it shows as its template."""
    plan = inverse_plan(inverse, {"input": arguments if isinstance(arguments, dict) else {}}, None)
    rendered = plan.arguments if plan.arguments is not None else inverse.get("arguments", {})
    if not isinstance(rendered, Mapping):
        return f"{plan.tool}({_UNFILLED})"
    shown = (f"{name}={v if isinstance(v, str) else json.dumps(v, sort_keys=True)}" for name, v in rendered.items())
    return f"{plan.tool}({', '.join(shown)})"


def _definitions(snapshot: Mapping[str, Any], proxy: Mapping[str, Any], pin: ToolPin | None) -> tuple[str, str, str]:
    """(pinned, current, note). The pin keeps the trusted definition and the one last seen, each with its hash; the
    snapshot names the hashes the call was held under, so a pin accepted or seen changed since is told apart."""
    if "tool_definition_hash" not in proxy:  # read from the planning's audit facts: no snapshot was kept
        return "", "", "this call's approval keeps no snapshot of the tool's definition; Tool pins shows its pin"
    pinned_hash, seen_hash = str(proxy.get("pinned_definition_hash", "")), str(proxy["tool_definition_hash"])
    notes = []
    pinned = ""
    if pin is not None and pin.pinned_definition is not None and pin.pinned_hash == pinned_hash:
        pinned = definition_text(pin.pinned_definition)
    elif not pinned_hash:
        notes.append("nothing was pinned for this tool when the call was held (a tool its server listed later)")
    else:
        notes.append(
            f"the pin this call was held under ({pinned_hash[:12]}…) has been replaced since; "
            "Tool pins shows the one trusted now"
        )
    if not proxy.get("definition_changed") and pinned:
        return pinned, "", "; ".join(notes)
    current = ""
    if pin is not None and pin.seen_hash == seen_hash:
        current = definition_text(pin.seen_definition)
    else:
        # The snapshot keeps what the derived contract needs of the listed definition, not its annotations.
        kept = {"description": snapshot.get("description"), "inputSchema": snapshot.get("input_schema")}
        current = definition_text({k: v for k, v in kept.items() if v is not None})
        notes.append("the definition listed when the call was held is shown as its snapshot kept it (no annotations)")
    return pinned, current, "; ".join(notes)


def _pins(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], ToolPin]:
    query = Q()
    wanted = set(pairs)
    for server, tool in wanted:
        query |= Q(server=server, tool=tool)
    if not wanted:
        return {}
    return {(p.server, p.tool): p for p in ToolPin.objects.filter(query)}
