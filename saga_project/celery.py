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


# Connected by call, not as decorators: Celery ships no type hints, and an untyped decorator would erase ours.
app.on_configure.connect(_settings_or_exit)
signals.worker_init.connect(_refuse_bad_configuration)
