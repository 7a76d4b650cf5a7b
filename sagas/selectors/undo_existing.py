"""Whether what a create's answer names was already there: an inverse never removes what existed before.

A create is undone by deleting what its answer names (`delete_contact(id=$.result.id)`). A downstream may answer an
id that existed before the call (an upsert over someone's record, a hostile server naming a victim): deleting it
would remove what was there before the session. Where the journal can know it, the call gets no inverse: when an
earlier call of the session on the same server read that thing (a read's answer, a capture's state before or after
a call) before this call answered its name, or this call's own capture found it before it. Only the
READS_LOOKED_AT calls before it are looked at: every surface that shows a plan (the ledger, status) asks this of each
create, so it stays one small indexed read per call.

A thing is "named" by the inverse's scalar arguments (`{"id": "c-1"}`): an earlier state names it when it holds an
object with every one of those keys at those values. The search is bounded (depth, items), so a session of huge
answers costs a bounded walk.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from registry.templating import references_forward_answer
from sagas.models import Step
from sagas.states import StepStatus

READS_LOOKED_AT = 25
MAX_DEPTH = 8
MAX_OBJECTS = 20_000
# Where a step keeps the states its capture read (before the call) and its read after the call.
STATE_KEYS = ("pre_state", "post_state")
_NEVER_SENT = (StepStatus.REFUSED, StepStatus.DRY)


def existed_before(step: Step, compensation: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """Why `step`'s inverse (`compensation`, rendered with `arguments`) would delete something that existed before
    it (the earlier read that saw it), or None."""
    if not references_forward_answer(dict(compensation)):
        return None  # not built from the answer: a create's inverse is
    templates = compensation.get("arguments")
    built = (
        {key for key, value in (templates or {}).items() if _from_the_call(value)}
        if isinstance(templates, dict)
        else set()
    )
    # What names the thing: the scalar arguments built from the call, never a constant the pack adds (`confirm: true`).
    named = {
        key: value
        for key, value in arguments.items()
        if key in built and isinstance(value, str | int) and not isinstance(value, bool) and value != ""
    }
    if not named:
        return None
    own = step.result.get("pre_state") if isinstance(step.result, dict) else None
    if own is not None and _names(own, named):
        return f"its own capture read {_shown(named)} before it ran"
    server = _section(step).get("server")
    window = (step.sequence - READS_LOOKED_AT, step.sequence - 1)
    earlier = Step.objects.filter(saga_id=step.saga_id, sequence__range=window).exclude(status__in=_NEVER_SENT)
    for before in earlier.order_by("-sequence").only("sequence", "action", "result", "action_definition"):
        if _section(before).get("server") != server:
            continue
        if any(_names(state, named) for state in _states(before)):
            tool = _section(before).get("tool", before.action)
            return f"call {before.sequence} ({tool}) of this session read {_shown(named)} before it"
    return None


def _states(step: Step) -> Iterator[Any]:
    """What `step` read of the world: a read's answer, and any state its capture read around it."""
    result = step.result
    if isinstance(result, dict):
        for key in STATE_KEYS:
            if result.get(key) is not None:
                yield result[key]
    if _section(step).get("class") == "read" and result is not None:
        yield result


def _section(step: Step) -> dict[str, Any]:
    section = step.action_definition.get("proxy") if isinstance(step.action_definition, dict) else None
    return section if isinstance(section, dict) else {}


def _names(state: Any, named: Mapping[str, Any]) -> bool:
    seen = 0
    stack: list[tuple[Any, int]] = [(state, 0)]
    while stack and seen < MAX_OBJECTS:
        value, depth = stack.pop()
        seen += 1
        if isinstance(value, dict):
            if all(_same(value.get(key), wanted) for key, wanted in named.items()):
                return True
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth < MAX_DEPTH:
            stack.extend((child, depth + 1) for child in children)
    return False


def _from_the_call(template: Any) -> bool:
    """An inverse argument built from the call (a `${...}` template or a JMESPath value), not a constant."""
    return (isinstance(template, str) and "${" in template) or (isinstance(template, dict) and "$jmespath" in template)


def _same(found: Any, wanted: Any) -> bool:
    """The same name, whether a server writes an id as a number or as a string (7 and "7")."""
    if found is None or isinstance(found, bool | dict | list):
        return False
    return found == wanted or str(found) == str(wanted)


def _shown(named: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} {str(value)[:80]!r}" for key, value in named.items())
