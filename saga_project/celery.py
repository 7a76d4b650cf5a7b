"""The Celery app: `celery -A saga_project worker` executes ready nodes, `celery -A saga_project beat` sweeps.

Configuration comes from Django settings under the CELERY_ namespace (saga_project/settings.py). A worker with a bad
configuration stops before it consumes anything, with the same one message `semantic-saga serve` prints
(saga_project.checks), instead of failing every task it receives.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")

app = Celery("saga_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _settings_or_exit(**kwargs: Any) -> None:
    """Celery reads its configuration (so settings.py) while parsing its command line: a value settings.py refuses
    ends the process with that one line instead of a traceback through click. Processes that set Django up
    themselves (serve, commands, tests) loaded settings long before, so this changes nothing for them."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        settings.INSTALLED_APPS  # noqa: B018  (imports settings.py)
    except ImproperlyConfigured as exc:
        sys.exit(f"celery: configuration error: {exc}")


def _refuse_bad_configuration(**kwargs: Any) -> None:
    """Sent while the worker is built, before any bootstep connects to the broker or consumes a message.
    SystemExit passes through Celery's signal dispatch (it catches Exception only), so the worker exits 1."""
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
        from saga_project.checks import configuration_report

        report = configuration_report("celery worker")
    except ImproperlyConfigured as exc:
        report = f"celery worker: configuration error: {exc}"
    if report:
        sys.exit(report)


def _keep_the_connection_pool(**kwargs: Any) -> None:
    """Celery's Django fixup closes the whole connection pool after every task in a prefork child (celery#10554),
    so each task would open new PostgreSQL backends. With the pool (saga_project.database) its task-boundary
    handlers give way to ones that return each connection to the pool instead; its post-fork handling (a child
    drops what it inherited) stays. Runs after the fixup's own worker_init handler, which installed them."""
    from celery.fixups.django import DjangoFixup
    from django.conf import settings

    if not settings.DATABASES["default"].get("OPTIONS", {}).get("pool"):
        return
    for fixup in app._fixups or []:
        if isinstance(fixup, DjangoFixup) and fixup._worker_fixup is not None:
            signals.task_prerun.disconnect(fixup._worker_fixup.on_task_prerun)
            signals.task_postrun.disconnect(fixup._worker_fixup.on_task_postrun)
    signals.task_prerun.connect(_return_connections)
    signals.task_postrun.connect(_return_connections)


def _return_connections(sender: Any = None, **kwargs: Any) -> None:
    """Around each task: close() hands a pooled connection back (a broken one is discarded by the pool)."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return  # an eager task runs inside its caller, whose connection it shares
    from django.core.cache import close_caches
    from django.db import close_old_connections

    close_old_connections()
    close_caches()


# Connected by call, not as decorators: Celery ships no type hints, and an untyped decorator would erase ours.
app.on_configure.connect(_settings_or_exit)
signals.worker_init.connect(_refuse_bad_configuration)
signals.worker_init.connect(_keep_the_connection_pool)
