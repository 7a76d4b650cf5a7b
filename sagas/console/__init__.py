"""The operator console: Django's admin, extended, at /admin/. Everything of it lives here.

- `apps.py`, `site.py`: the admin site installed in place of django.contrib.admin's (dashboard index, SSO login,
  the screens' URLs) and the registration of every model page on it.
- `screens/`: the console's own screens, one module per subject (approvals, recovery, one saga with its DAG,
  policy, kill switch, contract diff) and the saga-level operation buttons (`screens/saga_operations.py`).
- `queues.py`, `detail.py`, `dag.py`: the reads behind the screens and the dashboard.
- `sagas_admin.py`, `registry_admin.py`, `audit_admin.py`, `governance_admin.py`: the read-only model pages of each
  app (`mixins.py`: read-only and tenant scoping), kept here so those apps never import the console.

Reads take the acting Principal (governance.identity.operators.principal_for_user) and see that principal's tenant
alone; every change an operator makes goes through sagas.coordinator (or governance.kill_switch).
"""
