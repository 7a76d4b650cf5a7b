"""The REST API at /api/v1/ (Django REST framework), for automation: docs/rest_api.md.

Invariants and the tests that pin them:
- one engine: every route is an operation of the table (sagas.operations): its validation model, RBAC capability
  and handler, so REST accepts, refuses and answers exactly as MCP does (tests/api/test_saga_lifecycle.py,
  tests/operations/);
- one identity: bearer tokens through governance.identity.authentication, console sessions through
  principal_for_user; no identity answers 401 with WWW-Authenticate (tests/api/test_authentication.py);
- tenancy: another tenant's saga is "Saga not found" (404) everywhere and never appears in a list
  (tests/api/test_tenant_isolation_and_roles.py, and the schema fuzz in tests/api/test_schema_fuzz.py);
- errors: every refusal is {"error": {"code", "message"}} with a status from sagas.api.errors; bad JSON or wrong
  types are 400, never 500 (tests/api/test_errors.py, test_schema_fuzz.py).
"""
