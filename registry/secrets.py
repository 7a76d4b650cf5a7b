"""Secret references in contracts (`{"secret_ref": "env://NAME", "prefix": "Bearer "}`), resolved at call time.

Contracts, snapshots, hashes, audit rows and errors only ever hold the reference. The resolved value lives in a
local variable for the duration of one request: it is never stored, logged or returned, and error messages name
the reference, never the value.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from registry.errors import ActionFailure

ENV_SCHEME = "env://"
# Characters that would let a value end the header line and inject another header (or break the request).
_FORBIDDEN_IN_HEADERS = ("\r", "\n", "\x00")


class SecretProvider(Protocol):
    """Turns a reference such as `env://NAME` into the secret value; raises ActionFailure when it cannot."""

    def resolve(self, ref: str) -> str: ...


class EnvSecretProvider:
    """`env://NAME`: the environment variable NAME of the process that makes the call (server or worker)."""

    def resolve(self, ref: str) -> str:
        if not ref.startswith(ENV_SCHEME) or not ref[len(ENV_SCHEME) :]:
            raise ActionFailure(
                "SECRET_UNAVAILABLE",
                f"Secret reference {ref!r} is not supported; use env://NAME. The request was not sent.",
                retryable=False,
            )
        name = ref[len(ENV_SCHEME) :]
        value = os.environ.get(name)
        if not value:
            # Empty counts as missing: an empty bearer token is always a deployment mistake.
            raise ActionFailure(
                "SECRET_UNAVAILABLE",
                f"Secret {ref} is unavailable: the environment variable {name} is "
                f"{'empty' if value == '' else 'not set'} in the process running the action. The request was "
                f"not sent. Set {name} for the server/worker process, then retry the step.",
                retryable=False,
            )
        return value


default_provider: SecretProvider = EnvSecretProvider()


def resolve_header(value: str | Mapping[str, Any], provider: SecretProvider | None = None) -> str:
    """A header value from a contract: a literal string, or `prefix + secret + suffix` for a secret reference
    (`suffix`, as semantic-saga-mcp's files may have it, is empty unless given)."""
    if isinstance(value, str):
        return value
    ref = str(value["secret_ref"])
    secret = (provider or default_provider).resolve(ref)
    if any(char in secret for char in _FORBIDDEN_IN_HEADERS):
        raise ActionFailure(
            "SECRET_INVALID",
            f"Secret {ref} contains a line break or NUL and cannot be sent in a header. The request was not "
            "sent. Fix the secret's value (without the line break), then retry the step.",
            retryable=False,
        )
    return f"{value.get('prefix', '')}{secret}{value.get('suffix', '')}"


REDACTED = "[REDACTED]"


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every resolved secret replaced by REDACTED, in strings, keys and nested containers.

    A remote may echo request headers or its environment back; resolved secrets never reach a receipt, a message or
    a log through that echo.
    """
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {scrub(key, secrets): scrub(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub(item, secrets) for item in value]
    return value
