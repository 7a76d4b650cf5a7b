"""The exception reporter of the operator verbs' settings (saga_project.operator_settings): Django's own, imported
when a report is made. Django's logging set-up resolves DEFAULT_EXCEPTION_REPORTER when it builds its mail_admins
handler, at every start; django.views.debug, where Django's reporter lives, loads the error page's views, template
engine and tag libraries, which a verb that prints a few rows never uses."""

from __future__ import annotations

from typing import Any


class ExceptionReporter:
    """Stands for django.views.debug.ExceptionReporter: constructing one makes and returns Django's."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from django.views.debug import ExceptionReporter as DjangoExceptionReporter

        return DjangoExceptionReporter(*args, **kwargs)
