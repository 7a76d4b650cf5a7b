"""Contract builders for tests: real registry rows, registered through the registry service."""

from __future__ import annotations

from typing import Any

from registry.models import ActionDefinition
from registry.services import action_register

FAST_RETRY = {"initial_backoff_seconds": 0, "backoff_multiplier": 1, "max_backoff_seconds": 0, "jitter": 0}


def http_contract(
    action_id: str,
    base_url: str,
    *,
    version: str = "1.0.0",
    forward_path: str | None = None,
    compensation_path: str | None = None,
    max_attempts: int = 3,
    compensation_attempts: int = 3,
    failure_mode: str = "rollback",
    approval_required: bool = False,
    idempotent: bool = False,
    reversibility: str = "compensable",
    headers: dict[str, Any] | None = None,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    body: Any = None,
    active: bool = True,
) -> dict[str, Any]:
    contract: dict[str, Any] = {
        "id": action_id,
        "version": version,
        "kind": "http",
        "active": active,
        "semantic": {
            "domain": "test",
            "operation": "call",
            "resource": action_id,
            "risk": "low",
            "reversibility": reversibility,
        },
        "input_schema": input_schema or {"type": "object"},
        "execution_policy": {
            "forward": {"max_attempts": max_attempts, **FAST_RETRY},
            "compensation": {"max_attempts": compensation_attempts, **FAST_RETRY},
            "failure_mode": failure_mode,
            "approval_required": approval_required,
            "idempotent": idempotent,
        },
        "forward": {
            "url": f"{base_url}{forward_path or '/' + action_id}",
            "method": "POST",
            "headers": headers or {},
            "body": body if body is not None else {"input": "${input}", "step": "${step.id}"},
            "timeout_seconds": 5,
        },
    }
    if output_schema is not None:
        contract["output_schema"] = output_schema
    if reversibility in ("compensable", "reversible"):
        contract["compensation"] = {
            "url": f"{base_url}{compensation_path or '/' + action_id + '/undo'}",
            "method": "POST",
            "headers": headers or {},
            "body": {"result": "${result}", "step": "${step.id}"},
            "timeout_seconds": 5,
        }
    return contract


def register(contract: dict[str, Any]) -> ActionDefinition:
    row, _ = action_register(contract)
    return row
