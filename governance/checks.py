"""System checks for identity and policy settings: a bad value is reported at start-up, never at a request.

Registered in GovernanceConfig.ready. `semantic-saga check` lists the problems; `serve`, `mcp`, the seed command
lines and the Celery worker refuse to start on any of them (saga_project.checks.require_valid_configuration).
Each check reuses the code that reads the setting at request time (StaticTokenVerifier, JsonPolicy, RegoPolicy),
so start-up and requests can never disagree about what is valid.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.core.checks import Warning as CheckWarning
from django.core.exceptions import ImproperlyConfigured

from governance.identity.rbac import ROLE_CAPABILITIES, SCOPE_CAPABILITIES, SCOPE_PREFIX

# `semantic-saga check --tag saga` runs only Semantic Saga's own checks (every module's checks carry this tag).
TAG = "saga"
TOKENS_DOC = "docs/identity.md, 'Static tokens'"
# The readers a check reuses (PyJWT, the token file's verifier, the policy engines) are imported by the check that
# needs them, when its setting is in use: every command runs these checks, most with none of them configured.


def known_algorithms() -> frozenset[str]:
    """Signing algorithms PyJWT verifies; `none` and HMAC are refused earlier, in settings."""
    import jwt

    return frozenset(jwt.algorithms.get_default_algorithms()) - {"none", "HS256", "HS384", "HS512"}


def http_url_problem(value: str) -> str | None:
    """What keeps `value` from being an absolute http(s) URL (None when it is one); shared by the URL settings."""
    if not value:
        return "is not set"
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"is {value!r}, which is not an absolute http:// or https:// URL"
    if parts.username or parts.password:
        return f"is {value!r}, which carries credentials; they would be logged and shown wherever the URL is"
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number from 0 to 65535)
    except ValueError:
        return f"is {value!r}, whose port is not a number from 0 to 65535"
    return None


@register(TAG)
def static_tokens_check(**kwargs: Any) -> list[CheckMessage]:
    """SAGA_AUTH_MODE=static: the token file exists, parses, and every entry is one the verifier accepts."""
    if settings.SAGA_AUTH_MODE != "static":
        return []
    setting = settings.SAGA_AUTH_STATIC_TOKENS
    path = Path(os.path.abspath(setting)) if setting else None
    if path is None or not path.is_file():
        return [_tokens_missing(setting, path)]
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [
            Error(
                f"SAGA_AUTH_STATIC_TOKENS: {path} cannot be read as JSON ({exc}).",
                hint=f'Make it valid JSON of the form {{"tokens": {{"<token>": {{"principal_id", "tenant_id", '
                f'"roles"}}}}}} ({TOKENS_DOC}).',
                id="saga.E002",
            )
        ]
    try:
        from governance.identity.tokens import StaticTokenVerifier

        verifier = StaticTokenVerifier(str(path))  # the request-time loader: structure, fields, token length
    except ImproperlyConfigured as exc:
        return [_tokens_invalid(str(exc))]
    return _unknown_grants(path, document) + _expired_tokens(verifier.expired_tokens)


def _expired_tokens(expired: list[str]) -> list[CheckMessage]:
    """Entries already past their expires_at: they load, and every request with them is refused."""
    if not expired:
        return []
    return [
        CheckWarning(
            f"SAGA_AUTH_STATIC_TOKENS: {len(expired)} token(s) already expired: {'; '.join(expired)}.",
            hint="Give the entries a later expires_at (Unix seconds) or remove them; every request with them is "
            f"refused ({TOKENS_DOC}).",
            id="saga.W001",
        )
    ]


def _tokens_missing(setting: str, path: Path | None) -> Error:
    problem = "is not set" if path is None else f"names {path}, which does not exist or is not a file"
    return Error(
        f"SAGA_AUTH_STATIC_TOKENS {problem}, and SAGA_AUTH_MODE=static needs it.",
        hint=f"Point SAGA_AUTH_STATIC_TOKENS at the token file ({TOKENS_DOC}), or set SAGA_AUTH_MODE=none or jwt.",
        id="saga.E001",
    )


def _tokens_invalid(problem: str) -> Error:
    problem = problem.removeprefix("SAGA_AUTH_STATIC_TOKENS: ")
    return Error(
        f"SAGA_AUTH_STATIC_TOKENS: {problem}",
        hint='Every token must be at least 16 characters (make one with `python -c "import secrets; '
        'print(secrets.token_urlsafe(32))"`; shorter ones only on a server listening on loopback only) and name a '
        "principal_id and a tenant_id, or in semantic-saga-mcp's format a client_id and a tenant claim "
        f"({TOKENS_DOC}).",
        id="saga.E003",
    )


def _unknown_grants(path: Path, document: dict[str, Any]) -> list[CheckMessage]:
    """A misspelled role or scope grants nothing, silently: every request of that token would be refused."""
    from governance.identity.seed_tokens import is_seed_document

    seed = is_seed_document(document)
    problems = []
    for index, spec in enumerate((document if seed else document["tokens"]).values()):
        if seed:  # semantic-saga-mcp's format: roles among the claims, the principal its subject or client
            roles, who = spec.get("claims", {}).get(settings.SAGA_JWT_ROLES_CLAIM, []), spec.get("subject")
            who = who or spec["client_id"]
        else:
            roles, who = spec.get("roles", []), spec["principal_id"]
        scopes = spec.get("scopes", [])
        where = f"{path}: tokens entry {index + 1} ({who})"
        # The verifier has already refused roles or scopes that are not lists; role names compare lowercased.
        unknown_roles = sorted({name.strip().lower() for name in _names(roles)} - set(ROLE_CAPABILITIES))
        unknown_scopes = sorted(s for s in _names(scopes) if s.startswith(SCOPE_PREFIX) and s not in SCOPE_CAPABILITIES)
        if unknown_roles:
            problems.append(f"{where}: unknown role(s) {', '.join(unknown_roles)}")
        if unknown_scopes:
            problems.append(f"{where}: unknown scope(s) {', '.join(unknown_scopes)}")
    if not problems:
        return []
    return [
        Error(
            f"SAGA_AUTH_STATIC_TOKENS: {'; '.join(problems)}.",
            hint=f"Roles are {', '.join(ROLE_CAPABILITIES)}; Semantic Saga scopes are "
            f"{', '.join(sorted(SCOPE_CAPABILITIES))} ({TOKENS_DOC}).",
            id="saga.E004",
        )
    ]


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.replace(",", " ").split()
    return [str(item) for item in value] if isinstance(value, list) else []


@register(TAG)
def jwt_check(**kwargs: Any) -> list[CheckMessage]:
    """SAGA_AUTH_MODE=jwt: issuer and audience set, the JWKS an http(s) URL, only asymmetric known algorithms."""
    if settings.SAGA_AUTH_MODE != "jwt":
        return []
    errors: list[CheckMessage] = []
    missing = [name for name in ("SAGA_JWT_ISSUER", "SAGA_JWT_AUDIENCE") if not getattr(settings, name)]
    if missing:
        errors.append(
            Error(
                f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set, and SAGA_AUTH_MODE=jwt "
                "needs them to check every token.",
                hint="Set SAGA_JWT_ISSUER to your identity provider's exact issuer and SAGA_JWT_AUDIENCE to the "
                "audience its tokens carry for this server (docs/identity.md, 'JWT access tokens').",
                id="saga.E010",
            )
        )
    if problem := http_url_problem(settings.SAGA_JWT_JWKS_URL):
        errors.append(
            Error(
                f"SAGA_JWT_JWKS_URL {problem}.",
                hint="Set it to the issuer's published signing keys, e.g. https://id.example.com/.well-known/jwks.json "
                "(the jwks_uri of its /.well-known/openid-configuration).",
                id="saga.E011",
            )
        )
    known = known_algorithms()
    unknown = [a for a in settings.SAGA_JWT_ALGORITHMS if a not in known]
    if unknown or not settings.SAGA_JWT_ALGORITHMS:
        errors.append(
            Error(
                f"SAGA_JWT_ALGORITHMS {'lists ' + ', '.join(unknown) if unknown else 'is empty'}: tokens could "
                "never verify.",
                hint=f"Use a comma-separated list of {', '.join(sorted(known))} (default RS256,ES256).",
                id="saga.E012",
            )
        )
    return errors


@register(TAG)
def issuer_check(**kwargs: Any) -> list[CheckMessage]:
    """SAGA_JWT_ISSUER, whenever set: an absolute http(s) URL (it is published as the authorization server and
    compared with `iss`), and used: in mode none nothing reads it."""
    issuer = settings.SAGA_JWT_ISSUER
    if not issuer:
        return []
    problem = http_url_problem(issuer)
    if problem is None and (urlsplit(issuer).query or urlsplit(issuer).fragment):
        problem = f"is {issuer!r}, which has a query or fragment (an OAuth issuer identifier has neither, RFC 8414)"
    if problem:
        return [
            Error(
                f"SAGA_JWT_ISSUER {problem}.",
                hint="Set it (semantic-saga-mcp's --auth-issuer) to your identity provider's issuer URL, e.g. "
                "https://idp.example.com/ (the issuer of its /.well-known/openid-configuration).",
                id="saga.E013",
            )
        ]
    if settings.SAGA_AUTH_MODE == "none":
        return [
            CheckWarning(
                f"SAGA_JWT_ISSUER is {issuer}, but SAGA_AUTH_MODE is none: no token is checked, and no "
                "protected-resource metadata names the issuer.",
                hint="Set SAGA_AUTH_MODE=static or jwt (--auth-mode) to use it, or unset SAGA_JWT_ISSUER "
                "(docs/identity.md).",
                id="saga.W013",
            )
        ]
    return []


@register(TAG)
def policy_check(**kwargs: Any) -> list[CheckMessage]:
    """SAGA_POLICY_MODE json or rego: the file exists and loads as the policy engine will load it; opa: a URL."""
    mode = settings.SAGA_POLICY_MODE
    if mode == "opa":
        return _opa_url_errors()
    if mode not in ("json", "rego"):
        return []
    setting = settings.SAGA_POLICY_FILE
    path = Path(os.path.abspath(setting)) if setting else None
    if path is None or not path.is_file():
        problem = "is not set" if path is None else f"names {path}, which does not exist or is not a file"
        return [
            Error(
                f"SAGA_POLICY_FILE {problem}, and SAGA_POLICY_MODE={mode} needs it.",
                hint="Point SAGA_POLICY_FILE at the policy (docs/policy_governance.md), or set SAGA_POLICY_MODE=none.",
                id="saga.E020",
            )
        ]
    return _json_policy_errors(path) if mode == "json" else _rego_policy_errors(path)


def _json_policy_errors(path: Path) -> list[CheckMessage]:
    from governance.policy.facts import PolicyFileError
    from governance.policy.json_rules import JsonPolicy

    try:
        JsonPolicy.load(path)
    except PolicyFileError as exc:
        return [
            Error(
                f"SAGA_POLICY_FILE: {exc.message}",
                hint="Correct the file (docs/policy_governance.md explains each field; notes go in title, "
                "description, comment or $comment), or set SAGA_POLICY_MODE=none.",
                id="saga.E021",
            )
        ]
    return []


def _rego_policy_errors(path: Path) -> list[CheckMessage]:
    from governance.policy.facts import PolicyFileError
    from governance.policy.rego import RegoPolicy

    with _stdout_captured() as captured:
        try:
            RegoPolicy(path, settings.SAGA_OPA_DECISION_PATH)
        except PolicyFileError as exc:
            failure: PolicyFileError | None = exc
        else:
            failure = None
        # regopy prints readable compiler errors (file:line:column, the line, a caret) and raises an S-expression.
        details = captured.text().strip()
    if failure is None:
        return []
    message = f"Rego policy {path} does not compile:\n{details}" if details else failure.message
    return [
        Error(
            f"SAGA_POLICY_FILE: {message}",
            hint="Correct the Rego (`opa check FILE` shows the same errors); the decision is read at data."
            f"{settings.SAGA_OPA_DECISION_PATH.strip('/').replace('/', '.')} (docs/policy_governance.md).",
            id="saga.E022",
        )
    ]


def _opa_url_errors() -> list[CheckMessage]:
    if problem := http_url_problem(settings.SAGA_OPA_URL):
        return [
            Error(
                f"SAGA_OPA_URL {problem}.",
                hint="Set it to the OPA server's base URL, e.g. http://127.0.0.1:8181 (docs/policy_governance.md).",
                id="saga.E023",
            )
        ]
    return []


class _Captured:
    def __init__(self, sink: Any) -> None:
        self._sink = sink

    def text(self) -> str:
        self._sink.seek(0)
        return str(self._sink.read().decode("utf-8", "replace"))


@contextmanager
def _stdout_captured() -> Iterator[_Captured]:
    """Redirect file descriptor 1 for the block: regopy's C++ core writes compiler errors there, and stdout is the
    protocol stream of `semantic-saga mcp`. Only at start-up or in `check`, before any other thread writes."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            yield _Captured(sink)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
