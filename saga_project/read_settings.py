"""Settings for the operator verbs that only read (`pending`, `ledger`, `status`, `verify`, `preview-report`):
saga_project.operator_settings less the apps those reads never touch.

Such a verb reads the proxy's sessions, calls, held calls and audit events (the sagas, audit and registry apps'
rows) as the local operator of SAGA_DEFAULT_TENANT: it authenticates nobody and decides nothing. So Django's auth
and contenttypes are not set up, nor governance, whose rows (operator profiles, which reference auth's users; kill
switches, which only a decision consults) no read here touches: setting auth up loads its models, password hashers
and validators and, through its system checks, the migration framework, some 9 ms of a command meant to answer in
0.2 s. `approve` and `deny` decide through the operation table, which consults the kill switches: they keep
saga_project.operator_settings.

What is still checked before a read: every configuration check (governance's identity and policy checks are
registered by the project's app, saga_project.apps.OperatorProjectConfig; registry's, the proxy's and the project's
own by their apps) and the model definitions of the apps installed here. What is not: the model definitions of the
three apps left out, and auth's checks of its user model, none of which depends on the environment: every other
command (`check`, `serve`, `approve`) and the tests check them. The database is the whole project's either way:
one still to be migrated is migrated with the full settings first (saga_project.cli).
"""

from __future__ import annotations

from saga_project.operator_settings import *  # noqa: F403  (everything else exactly as the operator verbs have it)
from saga_project.operator_settings import INSTALLED_APPS as OPERATOR_INSTALLED_APPS

# Left out; the others stay in the operator list's order.
NOT_READ_APPS = ("django.contrib.auth", "django.contrib.contenttypes", "governance")
INSTALLED_APPS = [app for app in OPERATOR_INSTALLED_APPS if app not in NOT_READ_APPS]
