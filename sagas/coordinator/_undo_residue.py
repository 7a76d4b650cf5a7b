"""What a session's undo has left in the world so far, walking newest first, and what that means for an older call.

An undo plans the session, not its calls one by one. When the walk reaches a call, the newer calls of the same
session are either undone (their inverse ran: the world is back to what this call left, as far as they touched it)
or still in the world: listed for a person (C, I, no usable inverse), left themselves, or refused (drift) or failed.
For the older call that means:

    a newer call whose inverse was refused or failed touches the same thing  -> left: undoing this one now would
                                                                                act on a state the walk could not put
                                                                                back (run the undo again once that
                                                                                call is dealt with)
    its state differs from what it left, and a newer call of the session     -> left, because that call built on it
    with no way back touches the same thing                                      and has no way back: the session's
                                                                                own change, never drift or "someone"
    its state differs, and no newer call of the session touches it           -> drift: a change made outside the
                                                                                session; refused unless --force

"Touches the same thing" is judged by what the calls address (`reach`): two calls on the same server whose reads,
inverse or arguments name a common value (a path, an id, an entity's name). It errs towards "the same": a false
match leaves a call for a person, never undoes one that should have stayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from registry.capture_outcomes import after_read
from registry.errors import ActionFailure
from registry.templating import render
from sagas.models import Step
from sagas.selectors.undo_plan import proxy_section, step_inverse

# Values shorter than this are not addresses (a flag, an empty string), and long ones are content (a file's text):
# neither names what a call touches.
_MIN_ADDRESS_CHARS = 1
_MAX_ADDRESS_CHARS = 512


@dataclass(frozen=True)
class Residue:
    """A newer call of the session whose effect is still in the world."""

    seq: int
    tool: str
    server: str
    reach: frozenset[str] | None  # None: what it touches is not known (it may touch anything on its server)
    refused: bool  # its inverse was refused or failed (as opposed to: it has none, or it was left)

    def touches(self, server: str, reach: frozenset[str] | None) -> bool:
        if server != self.server:
            return False
        return self.reach is None or reach is None or bool(self.reach & reach)

    @property
    def label(self) -> str:
        return f"call {self.seq} ({self.tool})"


@dataclass
class Residues:
    """The newer calls still in the world, as the walk goes."""

    left: list[Residue] = field(default_factory=list)

    def add(self, step: Step, *, refused: bool) -> None:
        proxy = proxy_section(step)
        tool = str(proxy.get("exposed_name") or proxy.get("tool", step.action))
        self.left.append(Residue(step.sequence, tool, server_of(step), reach(step), refused))

    def blocker(self, step: Step) -> Residue | None:
        """A newer call whose inverse was refused or failed and that touches what `step` touched."""
        return self._first(step, refused=True)

    def built_on(self, step: Step) -> Residue | None:
        """A newer call of the session, still in the world with no way back, that touches what `step` touched."""
        return self._first(step, refused=False)

    def _first(self, step: Step, *, refused: bool) -> Residue | None:
        """The nearest newer call (the first after `step` in the session) that touches what it touched: the one
        most likely to have built on it."""
        server, mine = server_of(step), reach(step)
        return next((r for r in reversed(self.left) if r.refused == refused and r.touches(server, mine)), None)


def server_of(step: Step) -> str:
    return str(proxy_section(step).get("server", ""))


def reach(step: Step) -> frozenset[str] | None:
    """The values a call addresses: its capture's and read-after's arguments when it has a capture; a create's read
    of what it made and its inverse's arguments; else its inverse's arguments when it has one, else its own
    arguments. None when they cannot be rendered, or name nothing (a read of a whole collection): unknown, so it may
    touch anything on its server."""
    capture = step.action_definition.get("capture")
    made = step.action_definition.get("read_after")
    rendered: list[Any]
    try:
        if isinstance(made, dict) and not isinstance(capture, dict):  # a create's read of what it made
            scope = {"input": step.input, "result": (step.result or {}).get("result")}
            rendered = [render(made.get("arguments", {}), scope, "read_after.arguments")]
            plan = step_inverse(step)
            rendered += [plan.arguments] if plan is not None and plan.arguments is not None else []
        elif isinstance(capture, dict):
            reads = [capture, after_read(capture) or {}]
            scope = {"input": step.input}
            rendered = [render(read.get("arguments", {}), scope, "capture.arguments") for read in reads]
        else:
            plan = step_inverse(step)
            rendered = [plan.arguments] if plan is not None and plan.arguments is not None else [step.input]
    except ActionFailure:
        return None
    addresses = frozenset(value for arguments in rendered for value in _addresses(arguments))
    return addresses or None  # a read of everything (list_records with no arguments) touches anything


def _addresses(value: Any) -> Iterator[str]:
    """Every scalar leaf of a JSON value that could name a thing, as text."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _addresses(item)
    elif isinstance(value, list):
        for item in value:
            yield from _addresses(item)
    elif isinstance(value, str):
        if _MIN_ADDRESS_CHARS <= len(value) <= _MAX_ADDRESS_CHARS and "\n" not in value:
            yield value
    elif value is not None and not isinstance(value, bool):
        yield json.dumps(value)
