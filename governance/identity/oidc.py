"""Operator login to the admin through the organisation's OpenID Connect provider (mozilla-django-oidc).

An operator account is keyed by the provider's `sub` (an email address can be reassigned to someone else), and
every login re-reads tenant and role from the claims with the same mapping as JWT access tokens, so the identity
provider stays the source of truth for who may see which tenant.

Everything here is inert while SAGA_OIDC_ENABLED is false: the backend returns None and the views answer 404.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Permission
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from governance.errors import AuthenticationFailed
from governance.identity.principal import Principal
from governance.identity.tokens import principal_from_claims
from governance.models import OperatorProfile, OperatorRole

logger = logging.getLogger(__name__)

USERNAME_PREFIX = "oidc:"
# Highest first: an operator listed with several roles gets the strongest one.
ROLE_ORDER = (OperatorRole.ADMIN, OperatorRole.OPERATOR, OperatorRole.VIEWER)
# The admin lists a model only to users holding its view permission. Saga state and evidence are read-only there
# and tenant-scoped, and what an operator may *do* is decided by the coordinator's RBAC from the profile role,
# so the view permissions of these apps are exactly what an SSO operator needs, whatever the role.
VIEW_PERMISSION_APPS = ("sagas", "audit", "registry")
# Provider failures end the login with a message on the login page instead of a 500 or a bare 400.
_PROVIDER_ERRORS = (requests.RequestException, jwt.PyJWTError, SuspiciousOperation)


def oidc_enabled() -> bool:
    return bool(settings.SAGA_OIDC_ENABLED)


class OperatorOIDCBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    """Creates or updates the operator's account, profile and view permissions from the provider's claims."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django builds every listed backend for each password login and session lookup too; an unconfigured
        # OIDC must not break those (the base class insists on the endpoint settings).
        if oidc_enabled():
            super().__init__(*args, **kwargs)
        else:
            self.UserModel = get_user_model()

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> AbstractBaseUser | None:
        # Only the callback view passes `nonce`; username/password attempts are ModelBackend's to answer.
        if not oidc_enabled() or request is None or "nonce" not in kwargs:
            return None
        try:
            user: AbstractBaseUser | None = super().authenticate(request, **kwargs)
        except _PROVIDER_ERRORS as exc:
            logger.warning("oidc login failed: %s", exc)
            _login_error(request, "the identity provider's answer could not be verified or it could not be reached.")
            return None
        return user

    def get_user(self, user_id: Any) -> AbstractBaseUser | None:
        # As ModelBackend: a deactivated operator's session ends at once (the base class skips that check).
        return ModelBackend.get_user(self, user_id)

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> AbstractBaseUser:
        """`payload` is the verified id_token. Raises SuspiciousOperation (a refused login) before writing
        anything when the token is not ours or the claims name no tenant."""
        self._check_id_token(payload)
        claims = self._merge_userinfo(payload, self.get_userinfo(access_token, id_token, payload))
        try:
            principal = principal_from_claims(claims, protocol="admin")
        except AuthenticationFailed as exc:
            raise self._refuse(exc.message) from exc
        return sync_operator(claims, principal)

    def _check_id_token(self, payload: Mapping[str, Any]) -> None:
        issuer = settings.OIDC_OP_ISSUER
        if issuer and payload.get("iss") != issuer:
            raise self._refuse(f"the id_token was issued by {payload.get('iss')!r}, not by {issuer!r}.")
        # mozilla-django-oidc does not check the audience; OIDC Core 3.1.3.7 requires it.
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if settings.OIDC_RP_CLIENT_ID not in audiences:
            raise self._refuse("the id_token was issued for another client (aud).")
        if not payload.get("sub"):
            raise self._refuse("the id_token names no subject (sub).")

    def _merge_userinfo(self, id_claims: Mapping[str, Any], userinfo: Any) -> dict[str, Any]:
        """Userinfo wins (profile fields are freshest there); tenant and roles may come from either."""
        if not isinstance(userinfo, dict):
            raise self._refuse("the userinfo answer is not a JSON object.")
        # OIDC Core 5.3.2: a userinfo answer about someone else must not be merged into this login.
        if userinfo.get("sub") != id_claims.get("sub"):
            raise self._refuse("the userinfo answer is about another subject than the id_token.")
        return {**id_claims, **userinfo}

    def _refuse(self, reason: str) -> SuspiciousOperation:
        # mozilla-django-oidc turns SuspiciousOperation into a failed login; the message tells the operator why.
        _login_error(self.request, reason)
        return SuspiciousOperation(f"oidc login refused: {reason}")


def sync_operator(claims: Mapping[str, Any], principal: Principal) -> AbstractBaseUser:
    """Create or update the staff account for `claims["sub"]` with its profile and view permissions."""
    user_model = get_user_model()
    with transaction.atomic(durable=True):
        user, created = user_model.objects.get_or_create(username=oidc_username(str(claims["sub"])))
        if created:
            user.set_unusable_password()  # an SSO account never logs in with a password
        for field, value in _profile_fields(claims).items():
            setattr(user, field, value)
        user.is_staff = True  # the admin admits staff only
        user.is_superuser = False  # the claims grant a tenant role, never the whole installation
        user.save()
        OperatorProfile.objects.update_or_create(
            user=user, defaults={"tenant_id": principal.tenant_id, "role": operator_role(principal.roles)}
        )
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label__in=VIEW_PERMISSION_APPS, codename__startswith="view_")
        )
    return user


def oidc_username(sub: str) -> str:
    username = f"{USERNAME_PREFIX}{sub}"
    # `sub` may be 255 characters and usernames hold 150: long ones are stored by digest, still one per sub.
    if len(username) > get_user_model()._meta.get_field("username").max_length:  # type: ignore[operator]
        username = f"{USERNAME_PREFIX}sha256:{hashlib.sha256(sub.encode()).hexdigest()}"
    return username


def operator_role(roles: Iterable[str]) -> str:
    granted = set(roles)
    return next((role.value for role in ROLE_ORDER if role.value in granted), settings.SAGA_OIDC_DEFAULT_ROLE)


def _profile_fields(claims: Mapping[str, Any]) -> dict[str, str]:
    # Cut to the column sizes: a long display name must not turn a login into a database error.
    email = str(claims.get("email") or "")
    return {
        "email": email if len(email) <= 254 else "",
        "first_name": str(claims.get("given_name") or "")[:150],
        "last_name": str(claims.get("family_name") or "")[:150],
    }


def _login_error(request: HttpRequest, reason: str) -> None:
    messages.error(request, f"Single sign-on did not log you in: {reason}", fail_silently=True)


def _require_enabled() -> None:
    if not oidc_enabled():
        raise Http404("Single sign-on is not configured (OIDC_* settings).")


class OperatorOIDCAuthenticateView(OIDCAuthenticationRequestView):  # type: ignore[misc]
    """Starts the login at the provider; 404 while OIDC is not configured."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        _require_enabled()
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)
        return response


class OperatorOIDCCallbackView(OIDCAuthenticationCallbackView):  # type: ignore[misc]
    """The provider's redirect back; 404 while OIDC is not configured. A failure lands on the admin login page
    with a message."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        _require_enabled()
        response: HttpResponseBase = super().dispatch(request, *args, **kwargs)
        return response

    def login_failure(self) -> HttpResponse:
        # The backend queues a specific reason when it knows one; otherwise say at least what happened.
        if not len(messages.get_messages(self.request)):
            error = self.request.GET.get("error")
            _login_error(self.request, f"the identity provider answered {error!r}." if error else "please try again.")
        response: HttpResponse = super().login_failure()
        return response
