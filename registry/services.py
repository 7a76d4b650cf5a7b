"""Writes to the action registry: registering contracts and loading registry files.

Invariants: a row's content never changes (same id+version with another hash is refused), and at most one
version per id is active (also a partial unique constraint). Loading a file is all-or-nothing and idempotent.

Every change is evidence: ACTION_REGISTERED, ACTION_ACTIVATED and ACTION_DEACTIVATED (id, version, definition
hash, previous and new state; never the contract's content) go to the deployment's control-plane chain
(audit.control_plane.SYSTEM_TENANT: contracts belong to no tenant) in the transaction that makes the change. An
unchanged contract records nothing, so re-loading the same file at every start does not grow the chain.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from audit import control_plane
from audit.chain import EventDraft
from audit.control_plane import Actor
from audit.models import EventType
from registry import legacy_action_map
from registry.contracts import definition_hash, stored_definition, validate_contract
from registry.errors import RegistryError
from registry.files import read_registry, tell
from registry.models import ActionDefinition

CREATED = "created"
UNCHANGED = "unchanged"
ACTIVATED = "activated"
# Registering an existing active version with "active": false retires it (a file is the desired state).
DEACTIVATED = "deactivated"


@dataclass
class LoadReport:
    path: str
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    activated: list[str] = field(default_factory=list)
    deactivated: list[str] = field(default_factory=list)

    def record(self, row: ActionDefinition, outcome: str) -> None:
        getattr(self, outcome).append(f"{row.action_id}@{row.version}")

    def summary(self) -> str:
        parts = [self._part(CREATED), self._part(UNCHANGED), self._part(ACTIVATED)]
        if self.deactivated:
            parts.append(self._part(DEACTIVATED))
        return f"Loaded {self.path}: " + ", ".join(parts) + "."

    def _part(self, outcome: str) -> str:
        names: list[str] = getattr(self, outcome)
        return f"{len(names)} {outcome}" + (f" ({', '.join(names)})" if names else "")


def action_register(contract: dict[str, Any], *, actor: Actor | None = None) -> tuple[ActionDefinition, str]:
    """Register one contract; returns (row, outcome) with outcome created | unchanged | activated | deactivated.

    `actor` is who registers (default: this process). Errors: INVALID_CONTRACT (nothing written),
    ACTION_VERSION_CONFLICT (same id+version, other content).
    """
    validate_contract(contract)
    evidence = _Evidence(actor or control_plane.process_actor())
    with _registry_transaction():
        result = _register(contract, evidence)
        control_plane.record_changes(control_plane.SYSTEM_TENANT, evidence.drafts)
    return result


def registry_load_file(path: str | os.PathLike[str], *, actor: Actor | None = None) -> LoadReport:
    """Validate the whole file first, then register every contract in one transaction (all or nothing).

    An entry of semantic-saga-mcp's older action map whose content changed since it was loaded is registered as
    the next `legacy-vN` (registry.legacy_action_map.versioned): that format has no version to raise."""
    read = read_registry(path)
    tell(read.notes)
    report = LoadReport(path=str(path))
    evidence = _Evidence(actor or control_plane.process_actor(), file=str(path))
    with _registry_transaction():
        contracts = legacy_action_map.versioned(read.contracts) if read.legacy else read.contracts
        for contract in contracts:
            report.record(*_register(contract, evidence))
        control_plane.record_changes(control_plane.SYSTEM_TENANT, evidence.drafts)
    return report


@dataclass
class _Evidence:
    """The control-plane events of one registration or load, appended when its contracts are written."""

    actor: Actor
    file: str | None = None
    drafts: list[EventDraft] = field(default_factory=list)

    def registered(self, row: ActionDefinition) -> None:
        self._add(EventType.ACTION_REGISTERED, row, "active" if row.active else "inactive", kind=row.kind)

    def activated(self, row: ActionDefinition) -> None:
        self._add(EventType.ACTION_ACTIVATED, row, "active", previous="inactive")

    def deactivated(self, row: ActionDefinition, replaced_by: str | None = None) -> None:
        extra = {"replaced_by": replaced_by} if replaced_by else {}
        self._add(EventType.ACTION_DEACTIVATED, row, "inactive", previous="active", **extra)

    def _add(self, event_type: str, row: ActionDefinition, status: str, **details: str) -> None:
        data = {"definition_hash": row.definition_hash, **details}
        if self.file:
            data["file"] = self.file
        self.drafts.append(
            control_plane.change(
                event_type, self.actor, action=row.action_id, action_version=row.version, status=status, data=data
            )
        )


@contextmanager
def _registry_transaction() -> Iterator[None]:
    try:
        with transaction.atomic(durable=True):
            yield
    except IntegrityError as exc:
        # Two registrations of the same id raced; the unique constraints kept the registry consistent.
        raise RegistryError(
            "ACTION_VERSION_CONFLICT",
            "Another process registered the same action at the same time; nothing from this call was written. "
            "Register or load again (it is idempotent).",
        ) from exc


def _register(contract: dict[str, Any], evidence: _Evidence) -> tuple[ActionDefinition, str]:
    with transaction.atomic(savepoint=False):
        # Lock every version of this id (pk order, like every other locker): activation flips flags across
        # versions, and two registrations of one id must not interleave between read and write.
        versions = list(
            ActionDefinition.objects.select_for_update(no_key=True).filter(action_id=contract["id"]).order_by("pk")
        )
        digest = definition_hash(contract)
        row = next((version for version in versions if version.version == contract["version"]), None)
        if row is None:
            return _create(contract, digest, versions, evidence), CREATED
        if row.definition_hash != digest:
            raise _conflict(row, digest)
        return row, _set_active(row, bool(contract.get("active", True)), versions, evidence)


def _create(
    contract: dict[str, Any], digest: str, versions: list[ActionDefinition], evidence: _Evidence
) -> ActionDefinition:
    active = bool(contract.get("active", True))
    if active:
        _deactivate_others(versions, None, evidence, replaced_by=contract["version"])
    row = ActionDefinition.objects.create(
        action_id=contract["id"],
        version=contract["version"],
        kind=contract["kind"],
        definition=stored_definition(contract),
        definition_hash=digest,
        active=active,
    )
    evidence.registered(row)
    return row


def _set_active(row: ActionDefinition, active: bool, versions: list[ActionDefinition], evidence: _Evidence) -> str:
    if row.active == active:
        return UNCHANGED
    if active:
        # Deactivate first: the partial unique index allows one active row per id at every moment.
        _deactivate_others(versions, row.pk, evidence, replaced_by=row.version)
    row.active = active
    row.save(update_fields=["active"])
    if active:
        evidence.activated(row)
        return ACTIVATED
    evidence.deactivated(row)
    return DEACTIVATED


def _deactivate_others(
    versions: list[ActionDefinition], keep: int | None, evidence: _Evidence, *, replaced_by: str
) -> None:
    others = [version for version in versions if version.active and version.pk != keep]
    for version in others:
        evidence.deactivated(version, replaced_by=replaced_by)
    if others:
        ActionDefinition.objects.filter(pk__in=[version.pk for version in others]).update(active=False)


def _conflict(row: ActionDefinition, digest: str) -> RegistryError:
    return RegistryError(
        "ACTION_VERSION_CONFLICT",
        f"{row.action_id}@{row.version} is already registered with different content (hash "
        f"{row.definition_hash[:12]}..., this one {digest[:12]}...). Contracts are immutable because steps pin "
        "them: register it as a new version (e.g. bump the version) instead. Nothing was written.",
    )
