"""What one entry of the operation table holds: everything each surface needs to serve the operation.

An `Operation` names the MCP tool, the A2A operation, the strict arguments, the handler, the RBAC capability, the
result schema, the words for agents and for the REST docs, the MCP annotations, the REST route and the console
buttons. The surfaces (sagas/protocols, sagas/api, sagas/console) are built by reading these records and add
nothing of their own per operation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from governance.identity.principal import Principal
from governance.identity.rbac import Capability
from sagas.operations.arguments import Args
from sagas.operations.schemas import Output

A = TypeVar("A", bound=Args)

# The refusals REST documents by default: a read, and a write (which may also conflict with the saga's state or
# be sent as something other than JSON).
READ_ERRORS = (400, 401, 403, 404)
WRITE_ERRORS = (400, 401, 403, 404, 409, 415)
PATH_ARGUMENT = re.compile(r"<(?:\w+:)?(\w+)>")


@dataclass(frozen=True)
class Hints:
    """MCP tool annotations: what a client may assume about the call."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False  # the tool may act on systems outside Semantic Saga


READ = Hints(read_only=True, idempotent=True)


@dataclass(frozen=True)
class Route:
    """Where REST serves an operation under /api/v1/. A GET reads its arguments from the query string, a POST from
    a JSON body; the path's <placeholders> are arguments too, and `fixed` ones are decided by the URL itself."""

    method: Literal["GET", "POST"]
    path: str  # Django syntax, e.g. "sagas/<str:saga_id>/commit/"
    name: str  # the URL name (sagas_api:<name>); operations on one path share it
    tag: str  # the OpenAPI tag the docs group it under
    status: int = 200
    errors: tuple[int, ...] = ()  # the documented refusals; empty: READ_ERRORS or WRITE_ERRORS by method
    fixed: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""  # what only a REST client needs to know, added to the description

    @property
    def path_arguments(self) -> tuple[str, ...]:
        return tuple(PATH_ARGUMENT.findall(self.path))

    @property
    def refusals(self) -> tuple[int, ...]:
        return self.errors or (READ_ERRORS if self.method == "GET" else WRITE_ERRORS)


@dataclass(frozen=True)
class Button:
    """A saga-level button of the operator console: its confirmation page, the arguments the console fixes, and
    the message shown once the operation ran (from the saga id and the operation's result)."""

    slug: str  # the console URL's <operation> (admin:sagas_saga_do)
    title: str
    explanation: str
    button: str
    report: Callable[[str, dict[str, Any]], str]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    danger: bool = False


@dataclass(frozen=True)
class Operation(Generic[A]):
    name: str  # the MCP tool name and the OpenAPI operationId
    verb: str  # the A2A operation name; RBAC refusals name it ("may not commit")
    arguments: type[A]
    handler: Callable[[Principal, A], dict[str, Any]]
    capability: Capability
    output: Output
    title: str  # one line for people (the OpenAPI summary)
    description: str  # for agents: the MCP tool description, and the OpenAPI description
    hints: Hints = Hints()
    rest: Route | None = None
    mcp: bool = True
    a2a: bool = True
    console: tuple[Button, ...] = ()
