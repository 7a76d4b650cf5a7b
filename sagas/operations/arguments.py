"""The strict argument models of every operation, and the words for a refused argument.

Names, fields and defaults follow semantic-saga-mcp's tools (docs/mcp.md) so its agents work unchanged; fields are
only ever added. Every surface validates with these models: MCP and A2A as sent, REST bodies as sent and REST query
strings with conversion (they are text).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sagas.states import SagaStatus


def storable_problem(value: object, where: str, depth: int = 0, *, bound_strings: bool = True) -> str | None:
    """What makes `value` unstorable, if anything: text no database column can hold (a NUL character, which
    PostgreSQL refuses in text and jsonb, or an unpaired UTF-16 surrogate from a JSON escape), or nesting deeper
    than SAGA_MAX_ARGUMENT_DEPTH (stored, it would come back in answers some clients' parsers refuse to read), or
    NaN or an infinity (JSON has no such numbers: PostgreSQL's jsonb and SQLite's JSON check refuse them), or a
    string (a key too) longer than SAGA_MAX_ARGUMENT_STRING_BYTES (stored, every read of the saga would carry it)
    unless `bound_strings` is false."""
    if depth > settings.SAGA_MAX_ARGUMENT_DEPTH:
        return (
            f"{where} is nested more than {settings.SAGA_MAX_ARGUMENT_DEPTH} levels deep (SAGA_MAX_ARGUMENT_DEPTH); "
            "send a flatter value"
        )
    if isinstance(value, str):
        if "\x00" in value:
            return f"{where} contains a NUL character (\\u0000), which cannot be stored"
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            return f"{where} contains an unpaired UTF-16 surrogate; send valid Unicode"
        if bound_strings and size > settings.SAGA_MAX_ARGUMENT_STRING_BYTES:
            return (
                f"{where} is a string of {size} bytes; strings in arguments may be at most "
                f"{settings.SAGA_MAX_ARGUMENT_STRING_BYTES} bytes (SAGA_MAX_ARGUMENT_STRING_BYTES). Keep large "
                "content elsewhere and pass a reference to it (a URL, a file name, an id)"
            )
    elif isinstance(value, float) and not math.isfinite(value):
        return f"{where} is {value!r}, a number JSON cannot carry and no database column stores; send a finite number"
    elif isinstance(value, dict):
        for key, item in value.items():
            problem = storable_problem(key, f"{where} (a key)", depth + 1, bound_strings=bound_strings)
            if problem := problem or storable_problem(item, f"{where}.{key}", depth + 1, bound_strings=bound_strings):
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if problem := storable_problem(item, f"{where}[{index}]", depth + 1, bound_strings=bound_strings):
                return problem
    return None


@dataclass(frozen=True)
class ArgumentProblem:
    field: str  # the argument's dotted path, or the root's name when the whole object is wrong
    message: str  # "<field>: <what is wrong>"


def argument_problems(
    error: ValidationError, *, root: str, takes: Sequence[str] | None = None
) -> list[ArgumentProblem]:
    """One problem per refused argument (`input.amount: Input should be a valid integer`).

    MCP and REST clients read an input schema (tools/list, OpenAPI), so pydantic's words suffice there. A peer that
    sees no schema (A2A) passes `takes`, the fields it may send: then an unknown field names them, a missing one and
    a fractional number (protobuf carries every number as a double) are said plainly.
    """
    problems = []
    for found in error.errors(include_url=False):
        field = ".".join(str(part) for part in found["loc"]) or root
        problems.append(ArgumentProblem(field, f"{field}: {_wording(found, takes)}"))
    return problems


def _wording(found: Any, takes: Sequence[str] | None) -> str:
    if takes is not None:
        if found["type"] == "extra_forbidden":
            return f"unknown field (this operation takes: {', '.join(takes)})"
        if found["type"] == "missing":
            return "required field missing"
        if found["type"] == "int_type" and isinstance(found.get("input"), float):
            return f"must be a whole number (got {found['input']})"
    return str(found["msg"])


class Args(BaseModel):
    # Strict: unknown keys and wrong types are refused before anything runs ("5" is not an integer).
    model_config = ConfigDict(extra="forbid", strict=True)
    # False for the proxy's operations: they carry an agent's arguments to a downstream tool and that tool's answer,
    # which the proxy passes on unchanged (bounded by SAGA_MAX_REQUEST_BYTES and, journaled, ledger.maxResultBytes).
    bound_strings: ClassVar[bool] = True

    @model_validator(mode="after")
    def _storable(self) -> Args:
        # Refused here, once for MCP, A2A and REST, instead of as a database error after work began.
        for name, value in self.__dict__.items():
            if problem := storable_problem(value, name, bound_strings=self.bound_strings):
                raise ValueError(problem)
        return self


class NoArgs(Args):
    pass


class SagaRef(Args):
    saga_id: str = Field(description="The saga's id (from begin_saga or list_sagas).")


class NodeRef(SagaRef):
    node_id: str = Field(description="The node's id, or the key it was planned with.")


class BeginArgs(Args):
    metadata: dict[str, Any] = Field(default_factory=dict, description="Your own labels for the saga.")
    preview: bool = Field(
        default=False,
        description="true: a dry run. Plan, execute and run do everything except the side effect (nothing reaches "
        "the world); get_preview_report shows what would happen, promote_preview runs it for real.",
    )


class ExecuteArgs(SagaRef):
    action: str = Field(description="A registered action id (list_actions).")
    input: dict[str, Any] = Field(description="Input matching the action's input_schema (get_action).")


class PlanArgs(ExecuteArgs):
    key: str | None = Field(default=None, description="Your unique name for the node; replanning it is idempotent.")
    depends_on: list[str] = Field(default_factory=list, description="Node ids or keys that must complete first.")
    approval_required: bool | None = Field(default=None, description="Ask for human approval (null: contract).")


class RunArgs(SagaRef):
    max_parallel: int = Field(default=4, ge=1, le=32, description="Nodes in flight at once.")
    max_steps: int = Field(default=100, ge=1, le=1000, description="Attempts this run may start.")
    wait_seconds: float = Field(default=60, ge=0, le=300, description="How long to wait for the wave to settle.")


class RollbackArgs(SagaRef):
    wait_seconds: float = Field(
        default=60,
        ge=0,
        le=300,
        description="How long to wait for attempts in flight before answering (the rollback starts when they end).",
    )


class ApproveArgs(NodeRef):
    node_id: str = Field(description="The node id or key waiting for approval.")
    approved: bool = Field(default=True, description="true approves, false rejects.")
    reason: str | None = Field(default=None, max_length=4000, description="Kept with the decision, never audited.")


class RejectArgs(NodeRef):
    node_id: str = Field(description="The node id or key waiting for approval.")
    # A rejection stops the saga (RECOVERY_REQUIRED): whoever picks it up next needs to know why.
    reason: str = Field(min_length=1, max_length=4000, description="Why; kept with the decision, never audited.")


class RetryArgs(NodeRef):
    node_id: str = Field(description="A FAILED, REJECTED or BLOCKED node's id or key.")
    force: bool = Field(default=False, description="Required when the last attempt's outcome is uncertain.")


class CheckpointArgs(SagaRef):
    name: str = Field(min_length=1, max_length=200)
    data: dict[str, Any] = Field(default_factory=dict)


class TimelineArgs(SagaRef):
    limit: int = Field(default=1000, ge=1, le=5000)


class AuditArgs(SagaRef):
    limit: int = Field(default=500, ge=1, le=5000)
    event_types: list[str] = Field(default_factory=list)


class VerifyArgs(SagaRef):
    # semantic-saga-mcp's verify_audit_chain accepted the audit read's arguments; the whole chain is always checked.
    limit: int = Field(
        default=500, ge=1, le=5000, description="Accepted for semantic-saga-mcp clients; the whole chain is checked."
    )
    event_types: list[str] = Field(
        default_factory=list, description="Accepted for semantic-saga-mcp clients; every event type is checked."
    )


class PolicyStatusArgs(Args):
    tenant_id: str | None = Field(default=None, description="Another tenant's status needs the admin capability.")


class PolicyDecisionsArgs(SagaRef):
    limit: int = Field(default=500, ge=1, le=5000)


class ActionArgs(Args):
    action: str
    version: str | None = None


class ListSagasArgs(Args):
    status: Annotated[str, Field(json_schema_extra={"enum": list(SagaStatus.values)})] | None = Field(
        default=None, description="Only sagas in this status (e.g. ACTIVE)."
    )
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str | None = Field(default=None, description="next_cursor from the previous page.")
    created_after: datetime | None = Field(
        default=None, description="Only sagas created after this ISO 8601 time (no offset = UTC)."
    )
    created_before: datetime | None = Field(
        default=None, description="Only sagas created before this ISO 8601 time (no offset = UTC)."
    )
    action: str | None = Field(default=None, description="Only sagas with a node or step of this action id.")

    @field_validator("created_after", "created_before", mode="before")
    @classmethod
    def _iso_8601(cls, value: object) -> object:
        # Only ISO 8601 text: pydantic alone would also read "0.5" as a Unix timestamp.
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value)
            except ValueError:
                raise ValueError("must be an ISO 8601 timestamp such as 2025-01-31T12:00:00Z") from None
        return value


class ListApprovalsArgs(Args):
    limit: int = Field(default=100, ge=1, le=500, description="Approvals per page.")
    cursor: str | None = Field(default=None, description="next_cursor from the previous page.")
