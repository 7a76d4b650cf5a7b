"""The operations every surface serves, defined once and independent of any surface.

`table.py` holds one `Operation` record per operation (`operation.py`): its MCP tool name, A2A operation name,
strict arguments model (`arguments.py`), handler (`handlers.py`), RBAC capability, result schema (`schemas.py`),
words for agents and for the REST docs, MCP annotations, REST route and console buttons (`buttons.py`). MCP
(sagas.protocols.mcp.server), A2A (sagas.protocols.a2a.commands), REST and its OpenAPI document (sagas.api) and the
console's saga buttons (sagas.console.screens.saga_operations) are built by reading the table, so adding an operation is
one entry plus its arguments model and handler.

Invariants:
- every call goes through `invoke.invoke`: arguments validated, then the capability checked, then the handler;
- handlers call coordinator or selector functions only, never write to the ORM and never check RBAC themselves
  (the coordinator and selectors check the capability they need again);
- this package imports no surface.
Tests: tests/operations/.
"""
