"""completion/complete for the resource templates' arguments (saga ids of the caller's tenant, action ids) and the
prompts' arguments (known, but free text: no suggestions)."""

from __future__ import annotations

from collections.abc import Mapping

import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.mcp.resources.reads import ACTION_TEMPLATE, AUDIT_TEMPLATE, SAGA_TEMPLATE, TIMELINE_TEMPLATE
from sagas.selectors.scope import tenant_sagas

# The spec's cap on completion values per answer.
MAX_VALUES = 100
_ARGUMENTS = {
    SAGA_TEMPLATE: "saga_id",
    TIMELINE_TEMPLATE: "saga_id",
    AUDIT_TEMPLATE: "saga_id",
    ACTION_TEMPLATE: "action_id",
}


def complete(
    principal: Principal, params: types.CompleteRequestParams, prompts: Mapping[str, frozenset[str]] | None = None
) -> types.CompleteResult:
    """ORM unit: the values that complete `params.argument` for `principal`, at most MAX_VALUES. `prompts`: the
    server's prompts and their arguments (-32602 is for a prompt or argument that does not exist; an argument that
    does but has nothing to suggest answers no values, as the spec says)."""
    ref = params.ref
    if isinstance(ref, types.PromptReference):
        return _prompt_argument(ref, params.argument.name, prompts or {})
    if not isinstance(ref, types.ResourceTemplateReference):
        raise MCPError(
            INVALID_PARAMS, "Complete a prompt's or a resource template's argument (ref/prompt or ref/resource)."
        )
    expected = _ARGUMENTS.get(ref.uri)
    if expected is None:
        raise MCPError(
            INVALID_PARAMS,
            f"Unknown resource template {ref.uri!r}; resources/templates/list shows the templates: "
            f"{', '.join(_ARGUMENTS)}.",
        )
    if params.argument.name != expected:
        raise MCPError(
            INVALID_PARAMS, f"Template {ref.uri} has one argument, {expected!r}, not {params.argument.name!r}."
        )
    prefix = params.argument.value
    values, total = _saga_ids(principal, prefix) if expected == "saga_id" else _action_ids(principal, prefix)
    return types.CompleteResult(completion=types.Completion(values=values, total=total, has_more=total > len(values)))


def _prompt_argument(
    ref: types.PromptReference, argument: str, prompts: Mapping[str, frozenset[str]]
) -> types.CompleteResult:
    names = prompts.get(ref.name)
    if names is None:
        shown = ", ".join(prompts) or "none"
        raise MCPError(INVALID_PARAMS, f"Unknown prompt {ref.name!r}; prompts/list shows the prompts: {shown}.")
    if argument not in names:
        raise MCPError(
            INVALID_PARAMS, f"Prompt {ref.name!r} has the argument(s) {', '.join(sorted(names))}, not {argument!r}."
        )
    # Free text written by the agent: nothing to suggest.
    return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))


def _saga_ids(principal: Principal, prefix: str) -> tuple[list[str], int]:
    # list_sagas' own check: whoever may list the tenant's sagas may have their ids completed.
    authorize(principal, READ, "list_sagas")
    query = tenant_sagas(principal)
    if prefix:
        query = query.filter(pk__startswith=prefix)
    newest = query.order_by("-created_at", "-id")
    values = [str(pk) for pk in newest.values_list("pk", flat=True)[:MAX_VALUES]]
    total = len(values) if len(values) < MAX_VALUES else newest.count()
    return values, total


def _action_ids(principal: Principal, prefix: str) -> tuple[list[str], int]:
    actions = invoke(OPERATIONS["list_actions"], principal, {})["actions"]
    matching = sorted({action["id"] for action in actions if action["id"].startswith(prefix)})
    return matching[:MAX_VALUES], len(matching)
