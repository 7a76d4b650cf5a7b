"""Contracts every server has without a registry file: `create_text_file@1.0.0`, as semantic-saga-mcp always had it.

`register_defaults` runs at every start of a serving command (sagas.management.commands.serve), after
SAGA_ACTIONS_FILE is loaded, and registers a default contract only when the registry holds no version of its id at
all. So a registry file replaces it (another version of the id, active) or deactivates it (`"active": false`),
and that choice survives every later start. The contract is registry/builtin_actions.json. The example registry
(examples/action_registry.json) leaves it out, as the seed's example does: a database that loaded an earlier example
(create_text_file@1.0.0 without simulate_error, pinned by its steps) must go on loading today's example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from registry.errors import RegistryError
from registry.models import ActionDefinition
from registry.services import action_register

DEFAULTS_FILE = Path(__file__).resolve().parent / "builtin_actions.json"


def default_contracts() -> list[dict[str, Any]]:
    from registry.files import read_registry_file  # JSON Schema validation: loaded only when needed

    return read_registry_file(DEFAULTS_FILE)


def register_defaults() -> list[str]:
    """Register each default contract whose id the registry does not know yet; returns the `id@version`s added."""
    added: list[str] = []
    for contract in default_contracts():
        if ActionDefinition.objects.filter(action_id=contract["id"]).exists():
            continue  # a registry file (or an earlier start) decided about this id; its choice stands
        try:
            row, _ = action_register(contract)
        except RegistryError:
            # Another replica starting at the same moment registered it first; its row is the same contract.
            if ActionDefinition.objects.filter(action_id=contract["id"]).exists():
                continue
            raise
        added.append(f"{row.action_id}@{row.version}")
    return added
