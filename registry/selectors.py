"""Reads of the action registry, and the dict shapes list_actions / get_action return."""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Mapping
from typing import Any

from registry.contracts import resolved_execution_policy
from registry.errors import RegistryError
from registry.models import ActionDefinition


def action_get(action_id: str, version: str | None = None, *, include_inactive: bool = False) -> ActionDefinition:
    """The active version of `action_id`, or the given version.

    An inactive version is refused (ACTION_INACTIVE) unless `include_inactive`: execution must not pick up a
    retired contract, while inspection (get_action) may still show it.
    """
    rows = list(ActionDefinition.objects.filter(action_id=action_id))
    if not rows:
        raise RegistryError(
            "ACTION_NOT_FOUND",
            f"No action {action_id!r} is registered. Call list_actions to see the available actions.",
        )
    if version is None:
        row = next((row for row in rows if row.active), None)
        if row is None:
            raise _inactive(action_id, None, rows)
        return row
    row = next((row for row in rows if row.version == version), None)
    if row is None:
        raise RegistryError(
            "ACTION_NOT_FOUND",
            f"Action {action_id!r} has no version {version!r} (registered: {_versions(rows)}). Use one of those, "
            "or omit the version for the active one; list_actions shows what is available.",
        )
    if not row.active and not include_inactive:
        raise _inactive(action_id, version, rows)
    return row


def action_list(include_inactive: bool = False) -> list[ActionDefinition]:
    rows = ActionDefinition.objects.order_by("action_id", "-created_at", "-pk")
    return list(rows if include_inactive else rows.filter(active=True))


# semantic-saga-mcp called an in-process action `runtime`; an answer's `kind` uses its name for our builtins, and
# `contract_kind` always says the contract's own kind (builtin, http, mcp).
SEED_KIND = {"builtin": "runtime"}


def action_summary(row: ActionDefinition) -> dict[str, Any]:
    definition = row.definition
    return {
        "id": row.action_id,
        "version": row.version,
        "kind": SEED_KIND.get(row.kind, row.kind),
        "contract_kind": row.kind,
        "description": definition.get("description"),
        "definition_hash": row.definition_hash,
        "semantic": definition.get("semantic"),
        "input_schema": definition.get("input_schema"),
        "output_schema": definition.get("output_schema"),
        # As semantic-saga-mcp lists it: the policy in force, every default filled in; the contract's own words are
        # declared_execution_policy (and get_action's `definition`).
        "execution_policy": resolved_execution_policy(definition),
        "declared_execution_policy": definition.get("execution_policy", {}),
        "active": row.active,
    }


def action_detail(row: ActionDefinition) -> dict[str, Any]:
    """get_action's answer: the summary, the contract as registered (`definition`, which `definition_hash` is
    over), and semantic-saga-mcp's fields beside them: `forward` and `compensation` at the top level (as its
    get_action shows a contract's requests) and `implementation` / `implementation_hash`."""
    return {
        **action_summary(row),
        "definition": row.definition,
        "resolved_execution_policy": resolved_execution_policy(row.definition),
        **{part: shown_request(row.definition[part]) for part in REQUEST_PARTS if part in row.definition},
        **builtin_implementation(row.definition),
    }


REQUEST_PARTS = ("forward", "compensation")
# Header names whose value is a credential. A contract gives a secret as a reference ({"secret_ref": "env://NAME"}),
# which names where the secret lives and never holds it; a literal value under one of these names is a credential
# written into the contract, and a shown request says REDACTED instead (semantic-saga-mcp's request previews
# redact the same names).
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})
REDACTED = "[REDACTED]"


def shown_request(request: Any) -> Any:
    """A contract's request (forward or compensation) as answers show it: secret references as references, a
    literal credential header as REDACTED, everything else as registered."""
    headers = request.get("headers") if isinstance(request, dict) else None
    if not isinstance(headers, dict):
        return request
    shown = {
        name: REDACTED if isinstance(value, str) and name.lower() in CREDENTIAL_HEADERS else value
        for name, value in headers.items()
    }
    return {**request, "headers": shown}


def builtin_implementation(definition: Mapping[str, Any]) -> dict[str, str | None]:
    """semantic-saga-mcp's `implementation` (the code that runs an in-process action) and `implementation_hash`
    (SHA-256 of that code's source, forward and compensation): a different hash means different code runs it.
    Both are null for an action another service runs (http, mcp), whose contract is all there is to pin.

    They describe the code this server runs now, not a part of the contract: no definition hash covers them."""
    if definition.get("kind") != "builtin":
        return {"implementation": None, "implementation_hash": None}
    parts = (definition.get("forward"), definition.get("compensation"))
    names = tuple(part.get("builtin") for part in parts if isinstance(part, dict))
    return dict(_implementation_of(tuple(name for name in names if isinstance(name, str))))


@functools.lru_cache(maxsize=64)
def _implementation_of(names: tuple[str, ...]) -> tuple[tuple[str, str | None], ...]:
    """Per pair of handler names, once per process: the source is read from disk."""
    from registry.actions.builtin import BUILTIN_HANDLERS

    handlers = [BUILTIN_HANDLERS[name] for name in names if name in BUILTIN_HANDLERS]
    if not handlers:
        return (("implementation", None), ("implementation_hash", None))
    source = "".join(inspect.getsource(handler) for handler in handlers)
    return (
        ("implementation", f"{handlers[0].__module__}.{handlers[0].__qualname__}"),
        ("implementation_hash", hashlib.sha256(source.encode("utf-8")).hexdigest()),
    )


def _inactive(action_id: str, version: str | None, rows: list[ActionDefinition]) -> RegistryError:
    which = f"{action_id}@{version} is" if version else f"{action_id!r} has no active version; all versions are"
    return RegistryError(
        "ACTION_INACTIVE",
        f"{which} inactive (registered: {_versions(rows)}). Use the active version (omit the version) if there "
        "is one, or ask an operator to activate a version; list_actions shows what is available.",
    )


def _versions(rows: list[ActionDefinition]) -> str:
    return ", ".join(f"{row.version}{' (active)' if row.active else ''}" for row in rows)
