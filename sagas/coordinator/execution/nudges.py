"""Nudges: telling an executor that a node may be ready, or that a rollback should run.

A nudge is sent only after the transaction that made the work ready commits (`transaction.on_commit`), carries
ids only, and decides nothing: the fenced claim under the saga lock decides who runs what. A nudge names a Celery
task of `sagas.tasks` and finds it in Celery's task registry, so the coordinator never imports the task module
(which imports the coordinator): with `CELERY_BROKER_URL` set, the task is sent to a worker on Redis; without it,
the same task runs on the embedded executor's threads in this process, so both executors run one body. A nudge
that cannot be sent is logged and dropped; the recovery sweep re-sends it.
"""

from __future__ import annotations

import logging
import threading
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from audit import telemetry
from sagas import executor
from sagas.task_names import NODE_EXECUTE_TASK, SAGA_ROLLBACK_TASK, SAGAS_RECOVER_TASK

logger = logging.getLogger("sagas.nudges")

# The tasks nudges send (registered by sagas.tasks under these names, which beat and queued messages also use).
__all__ = ["NODE_EXECUTE_TASK", "SAGAS_RECOVER_TASK", "SAGA_ROLLBACK_TASK", "nudge_node", "nudge_rollback"]


def uses_celery() -> bool:
    return bool(settings.CELERY_BROKER_URL)


def nudge_node(saga_id: object, node_id: object, *, delay: float = 0.0) -> None:
    """After commit, ask an executor to run the node (after `delay` seconds for a scheduled retry)."""
    _after_commit(NODE_EXECUTE_TASK, {"saga_id": str(saga_id), "node_id": str(node_id)}, delay)


def nudge_rollback(saga_id: object) -> None:
    """After commit, ask an executor to run (or resume) the saga's rollback."""
    _after_commit(SAGA_ROLLBACK_TASK, {"saga_id": str(saga_id)}, 0.0)


def _after_commit(task_name: str, ids: dict[str, str], delay: float) -> None:
    trace = telemetry.carrier()  # the caller's trace continues on whichever worker runs the task
    transaction.on_commit(partial(_send, task_name, {**ids, "trace": trace}, delay))


def _send(task_name: str, kwargs: dict[str, Any], delay: float) -> None:
    # Celery is imported by the first nudge, not with the coordinator: a command that only reads never loads it.
    from celery import current_app

    task = current_app.tasks.get(task_name)
    if task is None:  # an operator command's process registers no tasks (sagas.apps.OperatorSagasConfig)
        logger.warning("nudge not sent task=%s: this process runs no tasks; the recovery sweep will send it", task_name)
        return
    if uses_celery():
        try:
            task.apply_async(kwargs=kwargs, countdown=delay or None, retry=True)
        except Exception as exc:  # broker down: the row still says READY/FAILED, and the sweep re-sends
            logger.warning(
                "nudge not sent task=%s kwargs=%s error=%s; the recovery sweep will re-send it",
                task_name,
                {k: v for k, v in kwargs.items() if k != "trace"},
                type(exc).__name__,
            )
        return
    # Calling a task object runs its own function here, in this thread, exactly as a worker would.
    job = executor.in_worker_thread(partial(task, **kwargs))
    if delay > 0:
        timer = threading.Timer(delay, executor.submit, args=(job,))
        timer.daemon = True
        timer.start()
    else:
        executor.submit(job)
