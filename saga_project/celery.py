"""The Celery app: `celery -A saga_project worker` executes ready nodes, `celery -A saga_project beat` sweeps.

Configuration comes from Django settings under the CELERY_ namespace (saga_project/settings.py).
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")

app = Celery("saga_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
