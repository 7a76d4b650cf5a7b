"""Resolving pinned contracts and validating payloads against them, with registry errors mapped once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from registry.contracts import definition_hash, resolved_execution_policy, validate_instance
from registry.errors import RegistryError
from registry.models import ActionDefinition
from registry.selectors import action_get
from sagas.errors import InvalidInput, NotFound, SagaError


@dataclass(frozen=True)
class Pinned:
    """One contract version as a step or node pins it."""

    action: str
    version: str
    definition_hash: str
    definition: dict[str, Any]

    @property
    def policy(self) -> dict[str, Any]:
        return resolved_execution_policy(self.definition)


def resolve(action: object, version: object = None) -> Pinned:
    if not isinstance(action, str) or not action:
        raise InvalidInput(message="action must be a non-empty string naming a registered action (see list_actions).")
    if version is not None and not isinstance(version, str):
        raise InvalidInput(message="version must be a string such as '1.0.0', or omitted for the active version.")
    try:
        row = action_get(action, version)
    except RegistryError as exc:
        raise NotFound(exc.code, exc.message) from exc
    return pinned_from_row(row)


def pinned_from_row(row: ActionDefinition) -> Pinned:
    return Pinned(row.action_id, row.version, row.definition_hash, row.definition)


def pinned_version(action: str, version: str, expected_hash: str) -> Pinned:
    """The exact version a node pinned; refuses a registry row whose content no longer matches the pin."""
    pinned = resolve(action, version)
    if pinned.definition_hash != expected_hash or definition_hash(pinned.definition) != expected_hash:
        raise SagaError(
            "DEFINITION_HASH_MISMATCH",
            f"The registered contract {action}@{version} no longer matches the hash this node pinned "
            f"({expected_hash[:12]}...). Nothing was executed. An operator must restore the contract or the node "
            "must be re-planned against a new version.",
        )
    return pinned


def check_input(pinned: Pinned, payload: object) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise InvalidInput(
            message=f"input for {pinned.action}@{pinned.version} must be a JSON object. Nothing was written "
            "and nothing ran.",
        )
    errors = validate_instance(pinned.definition["input_schema"], payload)
    if errors:
        raise InvalidInput(
            message=f"input does not match the input_schema of {pinned.action}@{pinned.version}: "
            f"{'; '.join(errors[:5])}. Nothing was written and nothing ran. Fix the input (get_action shows "
            "the schema) and call again.",
            errors=errors,
        )
    return payload


def output_errors(definition: dict[str, Any], result: Any) -> list[str]:
    schema = definition.get("output_schema")
    return validate_instance(schema, result) if schema else []
