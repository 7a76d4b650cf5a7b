"""Contracts every server has without a registry file: `create_text_file`, semantic-saga-mcp's builtin.

`register_defaults` runs at every start of a serving command (sagas.management.commands.serve), after
SAGA_ACTIONS_FILE is loaded. The contracts are registry/builtin_actions.json; for each of them:

- the registry holds no version of its id: it is registered, active;
- the registry's active version of the id is one this server registered by default before (PREVIOUS_DEFAULTS: the
  same version and definition hash), the new version is not registered at all, and SAGA_ACTIONS_FILE does not
  name the id: the new version is registered and becomes active. The previous version stays registered (inactive)
  and its steps keep their pinned snapshot, so they compensate exactly as they would have; new steps pin the new
  version. This happens once: when the new version is registered, whatever an operator does afterwards (activate
  the old version again, deactivate both) stands at every later start;
- otherwise a registry file, an operator or an earlier start decided about the id (another version, `"active":
  false`, the file naming it), and nothing changes.

Contracts are immutable (steps pin them), so a changed default is a new version where the old one may be
registered. builtin_actions.json holds semantic-saga-mcp's contract for its builtin under the seed's version,
`create_text_file@1.0.0` (resource `text_file`, reversibility `full`, `effects`, path minLength 1, 1 forward and 3
compensation attempts, output additionalProperties false): a new database gets exactly the seed's. A database that
holds this server's earlier default under 1.0.0 (resource `file`, reversibility `compensable`, 2 forward attempts)
gets today's contract as UPGRADE_VERSION (1.1.0), active, and keeps the earlier 1.0.0 for the steps that pin it.
The upgrade waits while unfinished work still pins the earlier version (`postpone`, given by the serving command:
a node planned under it and not yet run would otherwise find its contract inactive and fail).

The example registry (examples/action_registry.json) leaves the contract out, as the seed's example does: a
database that loaded an earlier example (create_text_file@1.0.0 without simulate_error, pinned by its steps) goes
on loading today's example; that contract was a file's choice, not a default, so it is kept as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from registry.errors import RegistryError
from registry.models import ActionDefinition
from registry.services import action_register

logger = logging.getLogger(__name__)

DEFAULTS_FILE = Path(__file__).resolve().parent / "builtin_actions.json"
# The version today's default is registered under where an earlier default holds the file's version, per id.
UPGRADE_VERSION: dict[str, str] = {"create_text_file": "1.1.0"}
# (version, definition hash) of every contract register_defaults registered before today's, per id: an active one
# of these is replaced by today's version once. Append a line whenever builtin_actions.json changes a contract.
PREVIOUS_DEFAULTS: dict[str, frozenset[tuple[str, str]]] = {
    "create_text_file": frozenset(
        {
            # resource file, reversibility compensable, path minLength 5, forward max_attempts 2 (to 2026-12)
            ("1.0.0", "dd885ba558822c13c1b66ab8c9bda1d36d221026fea890ca8d65725b4d817ee1"),
        }
    ),
}


def default_contracts() -> list[dict[str, Any]]:
    from registry.files import read_registry_file  # JSON Schema validation: loaded only when needed

    return read_registry_file(DEFAULTS_FILE)


def register_defaults(postpone: Callable[[str, str], bool] = lambda action, version: False) -> list[str]:
    """Register each default contract that the rules above call for; returns the `id@version`s added.

    `postpone(action, version)` says whether unfinished work still pins that version of a previous default, so that
    replacing it must wait for a later start.
    """
    added: list[str] = []
    for contract in default_contracts():
        versions = list(ActionDefinition.objects.filter(action_id=contract["id"]))
        wanted = _upgrade_of(contract, versions, postpone) if versions else contract
        if wanted is None:
            continue  # a registry file, an operator or an earlier start decided about this id; its choice stands
        try:
            row, _ = action_register(wanted)
        except RegistryError:
            # Another replica starting at the same moment registered it first; its row is the same contract.
            if ActionDefinition.objects.filter(action_id=wanted["id"], version=wanted["version"]).exists():
                continue
            raise
        if versions:
            logger.info(
                "%s@%s registered and active; the previous default version stays registered (inactive) for the "
                "steps that pin it.",
                row.action_id,
                row.version,
            )
        added.append(f"{row.action_id}@{row.version}")
    return added


def _upgrade_of(
    contract: dict[str, Any], versions: list[ActionDefinition], postpone: Callable[[str, str], bool]
) -> dict[str, Any] | None:
    """Today's contract under its upgrade version when it is to replace an earlier default now, else None."""
    upgrade = {**contract, "version": UPGRADE_VERSION.get(contract["id"], contract["version"])}
    if any(row.version == upgrade["version"] for row in versions):
        return None  # upgraded already (by an earlier start), or the version is someone else's
    active = next((row for row in versions if row.active), None)
    if active is None or (active.version, active.definition_hash) not in PREVIOUS_DEFAULTS.get(contract["id"], ()):
        return None
    named = _ids_named_by_actions_file()
    if named is None or contract["id"] in named:
        return None
    if postpone(active.action_id, active.version):
        logger.warning(
            "%s@%s is not replaced by today's default %s@%s yet: unfinished work still pins it. It is at the first "
            "start after that work has finished (or been rolled back).",
            active.action_id,
            active.version,
            upgrade["id"],
            upgrade["version"],
        )
        return None
    return upgrade


def _ids_named_by_actions_file() -> set[str] | None:
    """The ids SAGA_ACTIONS_FILE declares (it decides about them); None when it cannot be read (decide nothing)."""
    path = settings.SAGA_ACTIONS_FILE
    if not path:
        return set()
    from registry.files import read_registry_file_with_notes  # the load before this one logged its notes

    try:
        contracts, _ = read_registry_file_with_notes(path)
        return {str(contract["id"]) for contract in contracts}
    except (RegistryError, OSError, ValueError):
        return None
