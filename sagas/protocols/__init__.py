"""Protocol surfaces (MCP and A2A; REST joins them): thin translations into the coordinator.

Invariants:
- authentication happens once per request, before the protocol layer, and yields one Principal
  (governance.identity.authentication.authenticate); tools never read identity from arguments or headers themselves;
- each operation names its RBAC operation (governance.identity.rbac) and the coordinator checks it again, so a
  protocol client can do nothing an admin with the same permissions could not;
- handlers call coordinator or selector functions only and never write to the ORM; every ORM unit runs off the
  event loop on the request's own thread and closes its connections (orm.py);
- domain refusals (governance.errors.ServiceError) are answered in-band; malformed requests are refused before
  anything is created.
Tests: tests/protocols/test_mcp_*.py, tests/protocols/test_a2a_*.py.
"""
