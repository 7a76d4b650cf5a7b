"""Tool definitions pinned across sessions, the MCP proxy's tool quarantine.

A tool's definition is what decides what a call means and how an agent is told to use it: its name, title,
description, input and output schemas and annotations (`tool_definition`), hashed with SHA-256 over canonical JSON.

A server's first listing is its first use, whatever it holds (nothing included; `ListedServer` records it). How it
is trusted is the server's trust mode:

    first-use   every tool listed then is pinned as seen (`approved`, accepted by "first use"), except one whose
                definition shows signs of tool poisoning (registry.tool_poisoning): that one is `pending`
    review      nothing is trusted: every tool listed then is `pending` until an operator accepts it

Afterwards:

    the server lists the pinned definition       -> approved
    it lists another definition of a pinned tool -> changed (the pin stays; what is seen is kept beside it)
    it lists a tool it did not list before       -> pending (nothing pinned yet)

A changed or pending tool is never trusted by the proxy: each call of it is held for a person with what changed
(`changes`), and only an operator's `accept` re-pins it (CLI `semantic-saga pins accept`, the console). The accept
names the definition the operator reviewed (its hash): if the server lists anything else by then, nothing is
accepted (TOOL_DEFINITION_MOVED) and the new difference is shown. Unlike MCPProxy's quarantine, which drops such a
tool, it stays callable, call by call, with its diff in front of a person.

Every first pin, change seen and acceptance is control-plane evidence (audit.control_plane, the deployment's chain).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit import control_plane
from audit.canonical import sha256_hex
from audit.models import EventType
from governance.errors import Forbidden, ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import DECIDE, READ, authorize
from registry.models import ListedServer, ToolPin, ToolPinStatus
from registry.tool_poisoning import poisoning_signs

PINNED_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
FIRST_USE = "first use"
# A server's trust mode (its first listing trusted as listed, or reviewed tool by tool).
TRUST_FIRST_USE = "first-use"
TRUST_REVIEW = "review"
TRUST_MODES = (TRUST_FIRST_USE, TRUST_REVIEW)
# Rows written per statement (SQLite allows a few thousand parameters per statement).
BATCH = 200
# A diff says at most this many lines, each value clipped: enough to see what changed, never a flood.
CHANGES_SHOWN = 20
VALUE_SHOWN = 120


def tool_definition(tool: Mapping[str, Any]) -> dict[str, Any]:
    """The pinned parts of a tool as MCP lists it (wire form: `inputSchema`, `readOnlyHint`, ...)."""
    return {key: tool[key] for key in PINNED_KEYS if tool.get(key) is not None}


def definition_hash(definition: Mapping[str, Any]) -> str:
    return sha256_hex(dict(definition))


def definition_text(definition: Mapping[str, Any]) -> str:
    """A definition as a person reads it (the console's pin review and held calls): indented JSON, keys sorted so
    the pinned and the current one line up."""
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class PinState:
    """What the proxy acts on for one tool: whether its listed definition is the trusted one, and if not, why."""

    status: str  # approved | changed | pending
    pinned_hash: str  # "" while pending
    pinned_definition: dict[str, Any] | None
    changes: tuple[str, ...]  # readable lines, empty when approved

    @property
    def trusted(self) -> bool:
        return self.status == ToolPinStatus.APPROVED


class PinNotFound(ServiceError):
    code = "TOOL_PIN_NOT_FOUND"


def observe(
    server: str,
    listed: Mapping[str, Mapping[str, Any]],
    *,
    trust: str = TRUST_FIRST_USE,
    other_tools: Collection[str] = (),
) -> dict[str, PinState]:
    """Record what `server` lists now (tool name -> tool_definition) and answer each tool's state. `trust` says how
    the server's first listing is trusted; `other_tools` are the names the proxy's other servers list (a description
    naming one of them is a sign of tool poisoning)."""
    hashes = {name: definition_hash(definition) for name, definition in listed.items()}
    with transaction.atomic(savepoint=False):
        first = _first_listing(server, trust, len(listed))
        known = {pin.tool: pin for pin in ToolPin.objects.filter(server=server)}
        drafts = _new_pins(server, listed, hashes, known, first, other_tools)
        drafts += _seen_again(server, listed, hashes, known)
        for start in range(0, len(drafts), BATCH):  # a server listing thousands of tools stays within SQL's limits
            control_plane.record_changes(control_plane.SYSTEM_TENANT, drafts[start : start + BATCH])
        pins = {pin.tool: pin for pin in ToolPin.objects.filter(server=server) if pin.tool in listed}
    return {name: state_of(pins[name], listed[name]) for name in listed if name in pins}


def _first_listing(server: str, trust: str, tools: int) -> str:
    """The trust mode this listing is trusted by when it is the server's first (recorded now), else "": a tool that
    appears in a later listing is new. Two processes listing a new server at once: one records it first."""
    if trust not in TRUST_MODES:
        raise ValueError(f"unknown trust mode {trust!r}: use one of {', '.join(TRUST_MODES)}")
    _, created = ListedServer.objects.get_or_create(
        server=server, defaults={"trust": trust, "tools_at_first_listing": tools}
    )
    return trust if created else ""


def recheck(server: str, tool: str, listed: Mapping[str, Any]) -> PinState | None:
    """The state of `listed` (the tool's definition as this process lists it) against the pin as it is now: an
    operator may have accepted it since, in another process."""
    pin = ToolPin.objects.filter(server=server, tool=tool).first()
    return state_of(pin, listed) if pin is not None else None


def state_of(pin: ToolPin, listed: Mapping[str, Any]) -> PinState:
    """Whether `listed` is the pinned definition, and if not what differs from it (and what looks poisoned)."""
    if pin.pinned_hash and pin.pinned_hash == definition_hash(listed):
        return PinState(ToolPinStatus.APPROVED, pin.pinned_hash, pin.pinned_definition, ())
    status = ToolPinStatus.CHANGED if pin.pinned_hash else ToolPinStatus.PENDING
    if status == ToolPinStatus.PENDING and pin.review_reasons:
        # Why it was not trusted when it was first listed (its signs of poisoning among them), and the signs of
        # what it lists now if that is something else.
        now = poisoning_signs(listed) if pin.seen_hash != definition_hash(listed) else ()
        changes = (*pin.review_reasons, *now)
    else:
        changes = (*definition_changes(pin.pinned_definition, listed), *poisoning_signs(listed))
    return PinState(status, pin.pinned_hash, pin.pinned_definition, changes[: CHANGES_SHOWN + 1])


def _new_pins(
    server: str,
    listed: Mapping[str, Mapping[str, Any]],
    hashes: Mapping[str, str],
    known: Mapping[str, ToolPin],
    first: str,
    other_tools: Collection[str],
) -> list[Any]:
    """Pin the tools never listed before: trusted as listed only at a first-use first listing, and only when their
    definition shows no sign of poisoning; else pending, with why."""
    now = timezone.now()
    fresh = []
    for name in listed:
        if name in known:
            continue
        reasons = _review_reasons(server, first, poisoning_signs(listed[name], other_tools))
        trusted = first == TRUST_FIRST_USE and not reasons
        fresh.append(
            ToolPin(
                server=server,
                tool=name,
                status=ToolPinStatus.APPROVED if trusted else ToolPinStatus.PENDING,
                pinned_definition=dict(listed[name]) if trusted else None,
                pinned_hash=hashes[name] if trusted else "",
                seen_definition=dict(listed[name]),
                seen_hash=hashes[name],
                accepted_at=now if trusted else None,
                accepted_by=FIRST_USE if trusted else "",
                review_reasons=reasons,
            )
        )
    # Two proxies seeing a new server at once both insert: the unique (server, tool) keeps the first.
    ToolPin.objects.bulk_create(fresh, ignore_conflicts=True, batch_size=BATCH)
    actor = control_plane.process_actor()
    return [
        _evidence(EventType.TOOL_PINNED if pin.pinned_hash else EventType.TOOL_DEFINITION_CHANGED, pin, actor)
        for pin in fresh
    ]


def _review_reasons(server: str, first: str, signs: tuple[str, ...]) -> list[str]:
    """What the operator reviewing a tool that was not trusted on first use is told."""
    if first == TRUST_REVIEW:
        why = [
            f'server "{server}" is trusted by review: no tool it lists is trusted until an operator accepts it '
            "(trust: review)"
        ]
    elif first == TRUST_FIRST_USE:
        why = (
            ["listed at its server's first listing, but its definition shows signs of tool poisoning:"] if signs else []
        )
    else:
        why = ["a new tool: its server did not list it when the server was first seen, and nothing is pinned for it"]
    return [*why, *signs]


def _seen_again(
    server: str, listed: Mapping[str, Mapping[str, Any]], hashes: Mapping[str, str], known: Mapping[str, ToolPin]
) -> list[Any]:
    drafts = []
    for name, pin in known.items():
        if name not in listed or hashes[name] == pin.seen_hash:
            continue
        if not pin.pinned_hash:
            status = ToolPinStatus.PENDING
        else:
            status = ToolPinStatus.APPROVED if hashes[name] == pin.pinned_hash else ToolPinStatus.CHANGED
        updated = ToolPin.objects.filter(pk=pin.pk, seen_hash=pin.seen_hash).update(
            seen_definition=dict(listed[name]), seen_hash=hashes[name], status=status, seen_at=timezone.now()
        )
        if updated and status != ToolPinStatus.APPROVED:
            pin.seen_hash, pin.status = hashes[name], status
            drafts.append(_evidence(EventType.TOOL_DEFINITION_CHANGED, pin, control_plane.process_actor()))
    return drafts


def pin_state(pin: ToolPin) -> PinState:
    """The pin's state as last seen (by any proxy process)."""
    return state_of(pin, pin.seen_definition)


class DefinitionMoved(ServiceError):
    code = "TOOL_DEFINITION_MOVED"


def accept(*, actor: Principal, server: str, tool: str, reviewed_hash: str) -> ToolPin:
    """Trust the definition of `tool` the person reviewed (`reviewed_hash`, its `seen_hash` as they were shown it):
    a person's decision (the `decide` capability, signed in, not through a surface agents drive) of the deployment's
    own tenant (SAGA_DEFAULT_TENANT), since a pin applies to every tenant's calls. Evidence TOOL_PIN_ACCEPTED.
    PinNotFound for a tool the proxy never listed; DefinitionMoved, with the new difference, when the server lists
    anything else by now (nothing is accepted); an approved tool whose pin is the one reviewed is left as it is."""
    authorize(actor, DECIDE, "accept a tool definition")
    if actor.tenant_id != settings.SAGA_DEFAULT_TENANT or actor.through_an_agent_surface or not actor.authenticated:
        raise Forbidden(
            message=f"{actor.principal_id} may not accept a tool definition: a pin applies to every tenant's calls, "
            f"so an operator of the deployment's own tenant ({settings.SAGA_DEFAULT_TENANT}) accepts it, signed in, "
            "in the console or with `semantic-saga pins accept` at a terminal. Nothing was changed.",
            operation="accept a tool definition",
        )
    pin = ToolPin.objects.filter(server=server, tool=tool).first()
    if pin is None:
        raise PinNotFound(
            message=f"No tool {tool[:64]!r} of server {server[:64]!r} has been listed by the proxy. "
            "`semantic-saga pins` lists the tools it knows."
        )
    if pin.status == ToolPinStatus.APPROVED and pin.pinned_hash == reviewed_hash:
        return pin
    with transaction.atomic(savepoint=False):
        # Exactly what the person reviewed: a definition the server listed since is not accepted with it.
        accepted = ToolPin.objects.filter(pk=pin.pk, seen_hash=reviewed_hash or "-").update(
            pinned_definition=pin.seen_definition,
            pinned_hash=reviewed_hash,
            status=ToolPinStatus.APPROVED,
            accepted_at=timezone.now(),
            accepted_by=actor.principal_id,
            review_reasons=[],
        )
        pin.refresh_from_db()
        if accepted:
            who = control_plane.Actor(actor.principal_id, actor.principal_type)
            control_plane.record_changes(
                control_plane.SYSTEM_TENANT, [_evidence(EventType.TOOL_PIN_ACCEPTED, pin, who)]
            )
    if not accepted:
        raise _moved(pin, reviewed_hash)
    return pin


def _moved(pin: ToolPin, reviewed_hash: str) -> DefinitionMoved:
    state = pin_state(pin)
    now = "\n".join(f"  {line}" for line in state.changes) or "  it lists the trusted definition again"
    reviewed = f"the definition you reviewed ({reviewed_hash[:12]})" if reviewed_hash else "no reviewed definition"
    return DefinitionMoved(
        message=f"{pin.server}/{pin.tool[:64]}: its server lists another definition ({pin.seen_hash[:12]}) than "
        f"{reviewed}, so nothing was accepted. What it lists now, against the trusted one:\n{now}\n"
        f"Review it again (`semantic-saga pins diff {pin.server}/{pin.tool[:64]}`, or the console's review page) and "
        "accept what you see.",
        server=pin.server,
        tool=pin.tool,
        seen_hash=pin.seen_hash,
        changes=list(state.changes),
    )


def pins(*, actor: Principal, server: str = "", status: str = "") -> list[ToolPin]:
    """The tool pins, by server and tool, optionally of one server or status."""
    authorize(actor, READ, "list tool pins")
    found = ToolPin.objects.all()
    if server:
        found = found.filter(server=server)
    if status:
        found = found.filter(status=status)
    return list(found.order_by("server", "tool"))


def _evidence(event_type: str, pin: ToolPin, actor: control_plane.Actor) -> Any:
    data = {"server": pin.server, "tool": pin.tool, "seen_hash": pin.seen_hash, "pinned_hash": pin.pinned_hash}
    return control_plane.change(
        event_type, actor, action=f"{pin.server}/{pin.tool}"[:200], status=pin.status, data=data
    )


# --- what changed -----------------------------------------------------------------------------------------------


def definition_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[str]:
    """What differs between two tool definitions, one readable line each (`annotations.readOnlyHint: absent ->
    true`); a tool with nothing pinned says so."""
    if before is None:
        return ["a new tool: its server did not list it when the server was first seen, and nothing is pinned for it"]
    lines = list(_diff("", before, after))
    shown = lines[:CHANGES_SHOWN]
    if len(lines) > CHANGES_SHOWN:
        shown.append(f"... and {len(lines) - CHANGES_SHOWN} more difference(s)")
    return shown


def _diff(path: str, before: Any, after: Any) -> Iterable[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in before:
                yield f"{where}: added ({_shown(after[key])})"
            elif key not in after:
                yield f"{where}: removed (was {_shown(before[key])})"
            else:
                yield from _diff(where, before[key], after[key])
    elif before != after:
        yield f"{path}: {_shown(before)} -> {_shown(after)}"


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= VALUE_SHOWN else text[: VALUE_SHOWN - 3] + "..."
