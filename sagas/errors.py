"""Errors with stable codes and messages written for an agent: what happened, what did not run, what to do next.

Every boundary maps these once: protocols answer in-band, the admin shows a message, tasks retry or fail.
"""

from __future__ import annotations

from governance.errors import ServiceError


class SagaError(ServiceError):
    """A refusal or domain failure. `code` is stable; `message` says what happened and what to do next."""

    code = "SAGA_ERROR"


class NotFound(SagaError):
    code = "NOT_FOUND"


class InvalidTransition(SagaError):
    code = "INVALID_TRANSITION"


class StaleState(SagaError):
    """A compare-and-set found the row in another state: someone else got there first."""

    code = "STALE_STATE"


class ApprovalRequired(SagaError):
    code = "APPROVAL_REQUIRED"


class InvalidInput(SagaError):
    code = "INVALID_INPUT"


class QuotaExceeded(SagaError):
    """A configured quota (sagas.coordinator.quotas) would be exceeded; the same request may succeed later."""

    code = "QUOTA_EXCEEDED"


class ActionFailedTransient(SagaError):
    code = "ACTION_FAILED_TRANSIENT"


class ActionFailedPermanent(SagaError):
    code = "ACTION_FAILED_PERMANENT"


def saga_not_found(saga_id: object) -> NotFound:
    # Identical for a missing saga and another tenant's saga: existence must not leak across tenants.
    return NotFound(
        "SAGA_NOT_FOUND",
        f"Saga not found: {saga_id}. Nothing was changed. Check the saga_id (list_sagas shows your tenant's sagas).",
    )
