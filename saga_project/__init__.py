"""Semantic Saga: the Django project package (settings, ASGI composition, Celery app, console script)."""

from saga_project.celery import app as celery_app

__all__ = ["celery_app"]
