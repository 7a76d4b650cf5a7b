"""Thin Celery entry points: ids in, one coordinator call, nothing else.

A message is a nudge, never the source of truth: each task re-reads state under the saga lock, so a duplicate,
late or redelivered message finds nothing to do and returns. Only transient database errors are retried here;
anything else is left to the recovery sweep (an attempt whose worker died is reclaimed when its lease expires).
"""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

TRANSIENT = (OperationalError, InterfaceError)


@shared_task(acks_late=True, ignore_result=True, autoretry_for=TRANSIENT, max_retries=5, retry_backoff=True)
def node_execute_task(saga_id: str, node_id: str, trace: dict[str, str] | None = None) -> None:
    from sagas.coordinator import node_execute

    node_execute(saga_id=saga_id, node_id=node_id, trace=trace)


@shared_task(acks_late=True, ignore_result=True, autoretry_for=TRANSIENT, max_retries=5, retry_backoff=True)
def saga_rollback_task(saga_id: str, trace: dict[str, str] | None = None) -> None:
    from sagas.coordinator import saga_rollback_resume

    saga_rollback_resume(saga_id=saga_id, trace=trace)


@shared_task(ignore_result=True)
def sagas_recover_task() -> None:
    from sagas.coordinator import sagas_recover

    sagas_recover()
