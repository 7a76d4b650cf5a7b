"""Template context shared by every page: the admin login page offers single sign-on only when it is configured."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def oidc(request: HttpRequest) -> dict[str, bool]:
    return {"saga_oidc_enabled": bool(settings.SAGA_OIDC_ENABLED)}
