"""Protocol surfaces (MCP and A2A; REST in sagas.api): thin translations of the operation table (sagas.operations).

Invariants:
- authentication happens once per request, before the protocol layer, and yields one Principal
  (governance.identity.authentication.authenticate); tools never read identity from arguments or headers themselves;
- each operation is invoked through sagas.operations.invoke, which checks the table's RBAC capability before the
  handler runs, and the coordinator checks it again, so a protocol client can do nothing an admin with the same
  permissions could not;
- handlers call coordinator or selector functions only and never write to the ORM; every ORM unit runs off the
  event loop on a long-lived thread of orm.py's pool and hands its connection back after the unit;
- domain refusals (governance.errors.ServiceError) are answered in-band; malformed requests are refused before
  anything is created.
Tests: tests/protocols/test_mcp_*.py, tests/protocols/test_a2a_*.py.
"""
