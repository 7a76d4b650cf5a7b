from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class ConsoleAdminConfig(AdminConfig):
    """django.contrib.admin with the console's site (sagas.console.site.ConsoleAdminSite) as `admin.site`, and the
    model pages of sagas, registry, audit and governance registered on it from here: those apps hold no admin
    module, so they never import the console (Django's autodiscovery still finds django.contrib.auth's)."""

    default_site = "sagas.console.site.ConsoleAdminSite"

    def ready(self) -> None:
        super().ready()  # the admin's checks, and autodiscovery of the installed apps' admin modules
        # Imported only now: the model pages import the models, which are loaded once every app is.
        from sagas.console import audit_admin, governance_admin, registry_admin, sagas_admin  # noqa: F401
