"""Semantic Saga: the Django project package (settings, ASGI composition, Celery app, console script).

The Celery app (saga_project.celery) is imported when Django sets the project up (ProjectConfig.ready, so every
server, worker and test process has it as Celery's current app before anything is sent) or when `celery_app` is
first read here, not on importing this package: an operator's `semantic-saga pending` loads no Celery at all.
`celery -A saga_project` finds the app as before (it imports saga_project.celery itself).
"""

from __future__ import annotations

from typing import Any

__all__ = ["celery_app"]


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from saga_project.celery import app

        return app
    raise AttributeError(f"module 'saga_project' has no attribute {name!r}")
