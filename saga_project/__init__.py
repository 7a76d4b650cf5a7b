"""Semantic Saga: the Django project package (settings, ASGI composition, console script)."""
