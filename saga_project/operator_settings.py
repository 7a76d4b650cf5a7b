"""Settings for the operator verbs of the console script (`pending`, `approve`, `deny`, `ledger`, `status`,
`verify`, `preview-report`): saga_project.settings with the apps that hold the data and its rules only.

Those verbs read a few rows or decide one held call, from a terminal, often in a loop while a call waits; they
serve no HTTP, render no page and run no action. The full set-up would load the operator console (the admin's
autodiscovery of every screen, and through them the operation table, the MCP SDK and DRF) and Celery to print three
lines. Here the apps whose models hold the data stay, in the same order (auth and contenttypes, which our models
reference, then ours), and the web surfaces go: the admin and its console, sessions, messages, static files, DRF,
drf-spectacular and the OIDC views. None of their models is referenced by ours. `sagas` and the project come with
app configs that register no Celery tasks and load no Celery app (sagas.apps.OperatorSagasConfig,
saga_project.apps.OperatorProjectConfig); the system checks of the remaining apps still run before the verb does
(the URL check against the empty URL list below: there is no HTTP here), all but the few whose answer these
settings settle (saga_project.cli._drop_settled_checks).

saga_project.cli picks this module for `approve` and `deny`, and saga_project.read_settings (this one less the apps
a read never touches: auth, contenttypes, governance) for the verbs that only read, and only when the full settings
would be saga_project.settings; every other command (`serve`, `proxy`, `mcp`, `migrate`, `check`, workers) and the tests
use saga_project.settings unchanged. A database that still needs migrating is migrated with the full settings
first (saga_project.cli), so the schema is always the whole project's.
"""

from __future__ import annotations

from saga_project.settings import *  # noqa: F403  (everything else exactly as configured)
from saga_project.settings import DATABASES as CONFIGURED_DATABASES
from saga_project.settings import INSTALLED_APPS as FULL_INSTALLED_APPS

# Apps kept as they are, in the full list's order; then sagas and the project, each with its operator config.
OPERATOR_APPS = ("django.contrib.auth", "django.contrib.contenttypes", "audit", "registry", "governance")
INSTALLED_APPS = [
    *(app for app in FULL_INSTALLED_APPS if app in OPERATOR_APPS),
    "sagas.apps.OperatorSagasConfig",  # sagas without its Celery tasks: these verbs run nothing
    "saga_project.apps.OperatorProjectConfig",
]

# No HTTP is served: this module is its own (empty) URL configuration.
ROOT_URLCONF = "saga_project.operator_settings"
urlpatterns: list[object] = []

# Nor does a request pass through middleware (the session and message apps are not even installed): listed, each
# class would be imported by auth's system check only to be looked at.
MIDDLEWARE = []

# Nor is a page rendered: no template engine, which the template checks would otherwise build (and load every
# template tag library) only to look at.
TEMPLATES = []

# One command, one query or a few: one connection, opened when the command first needs it. PostgreSQL's connection
# pool (on by default, saga_project.database) would start its threads and open a second connection for a process
# that ends at once. The pool as configured is still what the start-up check judges (saga.E042 reads
# SAGA_CONFIGURED_DATABASE).
SAGA_CONFIGURED_DATABASE = CONFIGURED_DATABASES["default"]
DATABASES = {
    alias: {**database, "OPTIONS": {k: v for k, v in database.get("OPTIONS", {}).items() if k != "pool"}}
    for alias, database in CONFIGURED_DATABASES.items()
}

# Django's logging set-up builds its mail_admins handler (which mails nothing while ADMINS is empty) with this class,
# and importing django.views.debug to find it loads the error page's views and template libraries: here the class is
# imported when a report is made (saga_project.operator_reporting).
DEFAULT_EXCEPTION_REPORTER = "saga_project.operator_reporting.ExceptionReporter"
