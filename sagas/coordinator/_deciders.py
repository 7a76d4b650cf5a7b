"""Who may make the decisions the MCP proxy leaves to a person: deciding a call it holds, and committing one of its
sessions (which ends what an undo could do). An authenticated person, through a surface agents do not drive: the
console, REST with their own token, the terminal, or the agent's client when the proxy asks there. Never through
MCP or A2A (agents drive them, whatever role their token has), and never unauthenticated."""

from __future__ import annotations

from governance.errors import Forbidden, ServiceError
from governance.identity.principal import Principal

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
