"""Tool definitions pinned across sessions (trust on first use), the MCP proxy's tool quarantine.

A tool's definition is what decides what a call means and how an agent is told to use it: its name, title,
description, input and output schemas and annotations (`tool_definition`), hashed with SHA-256 over canonical JSON.
The first time the proxy lists a server no pin exists for, every tool it lists is pinned as seen (`approved`,
accepted by "first use"). Afterwards:

    the server lists the pinned definition       -> approved
    it lists another definition of a pinned tool -> changed (the pin stays; what is seen is kept beside it)
    it lists a tool it did not list before       -> pending (nothing pinned yet)

A changed or pending tool is never trusted by the proxy: each call of it is held for a person with what changed
(`changes`), and only an operator's `accept` re-pins it (CLI `semantic-saga pins accept`, the console). Unlike
MCPProxy's quarantine, which drops such a tool, it stays callable, call by call, with its diff in front of a person.

Every first pin, change seen and acceptance is control-plane evidence (audit.control_plane, the deployment's chain).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
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
from registry.models import ToolPin, ToolPinStatus

PINNED_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
FIRST_USE = "first use"
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


def observe(server: str, listed: Mapping[str, Mapping[str, Any]]) -> dict[str, PinState]:
    """Record what `server` lists now (tool name -> tool_definition) and answer each tool's state."""
    hashes = {name: definition_hash(definition) for name, definition in listed.items()}
    with transaction.atomic(savepoint=False):
        known = {pin.tool: pin for pin in ToolPin.objects.filter(server=server)}
        first_use = not known
        drafts = _new_pins(server, listed, hashes, known, first_use)
        drafts += _seen_again(server, listed, hashes, known)
        for start in range(0, len(drafts), BATCH):  # a server listing thousands of tools stays within SQL's limits
            control_plane.record_changes(control_plane.SYSTEM_TENANT, drafts[start : start + BATCH])
        pins = {pin.tool: pin for pin in ToolPin.objects.filter(server=server) if pin.tool in listed}
    return {name: state_of(pins[name], listed[name]) for name in listed if name in pins}


def recheck(server: str, tool: str, listed: Mapping[str, Any]) -> PinState | None:
    """The state of `listed` (the tool's definition as this process lists it) against the pin as it is now: an
    operator may have accepted it since, in another process."""
    pin = ToolPin.objects.filter(server=server, tool=tool).first()
    return state_of(pin, listed) if pin is not None else None


def state_of(pin: ToolPin, listed: Mapping[str, Any]) -> PinState:
    """Whether `listed` is the pinned definition, and if not what differs from it."""
    if pin.pinned_hash and pin.pinned_hash == definition_hash(listed):
        return PinState(ToolPinStatus.APPROVED, pin.pinned_hash, pin.pinned_definition, ())
    status = ToolPinStatus.CHANGED if pin.pinned_hash else ToolPinStatus.PENDING
    changes = tuple(definition_changes(pin.pinned_definition, listed))
    return PinState(status, pin.pinned_hash, pin.pinned_definition, changes)


def _new_pins(
    server: str,
    listed: Mapping[str, Mapping[str, Any]],
    hashes: Mapping[str, str],
    known: Mapping[str, ToolPin],
    first_use: bool,
) -> list[Any]:
    status = ToolPinStatus.APPROVED if first_use else ToolPinStatus.PENDING
    now = timezone.now()
    fresh = [
        ToolPin(
            server=server,
            tool=name,
            status=status,
            pinned_definition=dict(listed[name]) if first_use else None,
            pinned_hash=hashes[name] if first_use else "",
            seen_definition=dict(listed[name]),
            seen_hash=hashes[name],
            accepted_at=now if first_use else None,
            accepted_by=FIRST_USE if first_use else "",
        )
        for name in listed
        if name not in known
    ]
    # Two proxies seeing a new server at once both insert: the unique (server, tool) keeps the first.
    ToolPin.objects.bulk_create(fresh, ignore_conflicts=True, batch_size=BATCH)
    event = EventType.TOOL_PINNED if first_use else EventType.TOOL_DEFINITION_CHANGED
    return [_evidence(event, pin, control_plane.process_actor()) for pin in fresh]


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


def accept(*, actor: Principal, server: str, tool: str) -> ToolPin:
    """Trust what `server` lists now for `tool`: a person's decision (the `decide` capability, signed in, not
    through a surface agents drive) of the deployment's own tenant (SAGA_DEFAULT_TENANT), since a pin applies to
    every tenant's calls. Evidence TOOL_PIN_ACCEPTED. PinNotFound for a tool the proxy never listed; an approved
    tool is left as it is."""
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
    if pin.status == ToolPinStatus.APPROVED:
        return pin
    with transaction.atomic(savepoint=False):
        # Exactly what the person reviewed: a definition the server listed since is not accepted with it.
        accepted = ToolPin.objects.filter(pk=pin.pk, seen_hash=pin.seen_hash).update(
            pinned_definition=pin.seen_definition,
            pinned_hash=pin.seen_hash,
            status=ToolPinStatus.APPROVED,
            accepted_at=timezone.now(),
            accepted_by=actor.principal_id,
        )
        if accepted:
            pin.refresh_from_db()
            who = control_plane.Actor(actor.principal_id, actor.principal_type)
            evidence = [_evidence(EventType.TOOL_PIN_ACCEPTED, pin, who)]
            control_plane.record_changes(control_plane.SYSTEM_TENANT, evidence)
    if not accepted:
        raise PinNotFound(
            "TOOL_DEFINITION_MOVED",
            f"{server}/{tool[:64]} was listed with yet another definition while it was reviewed; nothing was accepted. "
            "Review it again (`semantic-saga pins diff`).",
        )
    return pin


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
