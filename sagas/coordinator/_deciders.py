"""Who may make the decisions the MCP proxy leaves to a person: deciding a call it holds, committing one of its
sessions (which ends what an undo could do), and undoing one another principal opened. An authenticated person,
through a surface agents do not drive: the console, REST with their own token, the terminal, or the agent's client
when the proxy asks there. Never through MCP or A2A (agents drive them, whatever role their token has), and never
unauthenticated."""

from __future__ import annotations

from governance.errors import Forbidden, ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import DECIDE, can

WHERE = (
    "in the console, over REST with their own token, with `semantic-saga approve|deny` (or `undo`) at an interactive "
    "terminal, or at the agent's client when the proxy asks there"
)


def not_a_person(actor: Principal, what: str) -> ServiceError | None:
    """The refusal for `actor` doing `what` (e.g. "decide a call the MCP proxy holds"), or None when it may."""
    if actor.through_an_agent_surface:
        how = f"through {actor.protocol}, a surface agents drive"
    elif not actor.authenticated:
        how = "without signing in (SAGA_AUTH_MODE=none lets any process on this machine act as its admin)"
    else:
        return None
    return Forbidden(
        "DECIDED_BY_A_PERSON",
        f"{actor.principal_id} may not {what} {how}. Nothing was changed. A person does it: {WHERE}.",
    )


def not_the_sessions(actor: Principal, owner: str, session: str) -> ServiceError | None:
    """The refusal for `actor` undoing (rolling back) proxy session `session` opened by `owner`, or None when it
    may: the session's own principal (its inverses then pass their gates), a person who may decide in its tenant, or
    the coordinator resuming an undo already asked for. Never another agent, whatever its role."""
    if actor.principal_id == owner or actor.principal_type == "system":
        return None
    if can(actor, DECIDE) and not_a_person(actor, "undo a session") is None:
        return None
    return Forbidden(
        "SESSION_NOT_YOURS",
        f"{actor.principal_id} may not undo proxy session {session}: it belongs to {owner}, who opened it. Nothing "
        "was changed. Its own agent may undo it, or a person of its tenant who may decide: `semantic-saga undo` at "
        "an interactive terminal, Undo in the console, or REST with their own token.",
    )
