"""Thin Celery entry points: ids in, one coordinator call, nothing else.

A message is a nudge, never the source of truth: each task re-reads state under the saga lock, so a duplicate,
late or redelivered message finds nothing to do and returns. Only transient database errors are retried here;
anything else is left to the recovery sweep (an attempt whose worker died is reclaimed when its lease expires).

The coordinator sends these tasks by name (sagas.task_names, sagas.coordinator.execution.nudges) and never imports this
module; each task imports the coordinator in its body, so registering the tasks does not load the coordinator.
Without a broker the embedded executor runs these same functions in-process; SagasConfig.ready registers them in
every process for that reason.
"""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from sagas.task_names import NODE_EXECUTE_TASK, SAGA_ROLLBACK_TASK, SAGAS_RECOVER_TASK

TRANSIENT = (OperationalError, InterfaceError)


@shared_task(
    name=NODE_EXECUTE_TASK,
    acks_late=True,
    ignore_result=True,
    autoretry_for=TRANSIENT,
    max_retries=5,
    retry_backoff=True,
)
def node_execute_task(saga_id: str, node_id: str, trace: dict[str, str] | None = None) -> None:
    from sagas import coordinator

    coordinator.node_execute(saga_id=saga_id, node_id=node_id, trace=trace)


@shared_task(
    name=SAGA_ROLLBACK_TASK,
    acks_late=True,
    ignore_result=True,
    autoretry_for=TRANSIENT,
    max_retries=5,
    retry_backoff=True,
)
def saga_rollback_task(saga_id: str, trace: dict[str, str] | None = None) -> None:
    from sagas import coordinator

    coordinator.saga_rollback_resume(saga_id=saga_id, trace=trace)


@shared_task(name=SAGAS_RECOVER_TASK, ignore_result=True)
def sagas_recover_task() -> None:
    from sagas import coordinator

    coordinator.sagas_recover()
