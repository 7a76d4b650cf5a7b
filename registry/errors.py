"""Errors raised by the action registry and by action invocations.

`RegistryError` is about contracts (registering, loading, looking up). `ActionFailure` is about one call of an
action: the coordinator records it on the step and decides between retry, rollback and operator recovery from
`retryable` and `uncertain`, so those two flags must be honest.
"""

from __future__ import annotations

from typing import Any


class RegistryError(Exception):
    """A contract or registry file problem, or a lookup that found nothing usable.

    Codes are stable (clients branch on them): INVALID_CONTRACT, INVALID_REGISTRY_FILE, ACTION_VERSION_CONFLICT,
    ACTION_NOT_FOUND, ACTION_INACTIVE. `problems` lists every individual finding when there are several.
    """

    def __init__(self, code: str, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.problems: list[str] = list(problems or [])

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ActionFailure(Exception):
    """One action call failed.

    `retryable`: the same call (same idempotency key) may succeed later. `uncertain`: the side effect may or may
    not have happened (for example the request was sent but the answer never came), so the step must be
    compensated or reconciled rather than assumed untouched. `receipt` is what the remote answered, never
    secret material.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool,
        uncertain: bool = False,
        receipt: Any | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.uncertain = uncertain
        self.receipt = receipt

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "uncertain": self.uncertain,
        }
        if self.receipt is not None:
            data["receipt"] = self.receipt
        return data
