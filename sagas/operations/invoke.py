"""Running an operation: validate its arguments, check the principal's capability, call the handler.

Every surface calls an operation through `invoke` (MCP tools/call, A2A commands, REST routes, the console's saga
buttons), so "authorize, then call the handler" exists once. The coordinator and selectors check the capability
they need again, so a caller that skipped this could still do nothing the table does not allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from governance.identity.principal import Principal
from governance.identity.rbac import authorize
from sagas.errors import InvalidInput
from sagas.operations.arguments import Args, argument_problems
from sagas.operations.operation import Operation


def invoke(operation: Operation[Any], principal: Principal, arguments: Args | Mapping[str, Any]) -> dict[str, Any]:
    """The operation's answer. `arguments` is its validated model, or a mapping validated strictly here (refused
    as INVALID_ARGUMENTS, naming each problem). Forbidden is raised before the handler runs."""
    validated = arguments if isinstance(arguments, Args) else _parse(operation, arguments)
    if type(validated) is not operation.arguments:
        raise TypeError(f"{operation.name} takes {operation.arguments.__name__}, not {type(validated).__name__}")
    authorize(principal, operation.capability, operation.verb)
    return operation.handler(principal, validated)


def _parse(operation: Operation[Any], arguments: Mapping[str, Any]) -> Args:
    try:
        validated: Args = operation.arguments.model_validate(dict(arguments))
    except ValidationError as error:
        problems = [p.message for p in argument_problems(error, root="(arguments)")]
        raise InvalidInput(
            "INVALID_ARGUMENTS",
            f"{operation.name} was not called: {'; '.join(problems)}. Nothing was created or changed. Fix the "
            "arguments and call again.",
            problems=problems,
        ) from error
    return validated
