"""Nudges: telling an executor that a node may be ready, or that a rollback should run.

A nudge is sent only after the transaction that made the work ready commits (`transaction.on_commit`), carries
ids only, and decides nothing: the fenced claim under the saga lock decides who runs what. With
`CELERY_BROKER_URL` set, nudges are Celery tasks on Redis; without it, they run on the embedded executor's
threads in this process. A nudge that cannot be sent is logged and dropped; the recovery sweep re-sends it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from audit import telemetry
from sagas import executor
from sagas.tasks import node_execute_task, saga_rollback_task

logger = logging.getLogger("sagas.dispatch")


def uses_celery() -> bool:
    return bool(settings.CELERY_BROKER_URL)


def nudge_node(saga_id: object, node_id: object, *, delay: float = 0.0) -> None:
    """After commit, ask an executor to run the node (after `delay` seconds for a scheduled retry)."""
    trace = telemetry.carrier()  # the caller's trace continues on whichever worker runs the node
    transaction.on_commit(partial(_send, node_execute_task, _run_node, (str(saga_id), str(node_id)), delay, trace))


def nudge_rollback(saga_id: object) -> None:
    """After commit, ask an executor to run (or resume) the saga's rollback."""
    trace = telemetry.carrier()
    transaction.on_commit(partial(_send, saga_rollback_task, _run_rollback, (str(saga_id),), 0.0, trace))


def _send(task: Any, embedded: Callable[..., None], args: tuple[str, ...], delay: float, trace: dict[str, str]) -> None:
    if uses_celery():
        try:
            task.apply_async(args=args, kwargs={"trace": trace}, countdown=delay or None, retry=True)
        except Exception as exc:  # broker down: the row still says READY/FAILED, and the sweep re-sends
            logger.warning(
                "nudge not sent task=%s args=%s error=%s; the recovery sweep will re-send it",
                task.name,
                args,
                type(exc).__name__,
            )
        return
    job = executor.in_worker_thread(partial(embedded, *args, trace=trace))
    if delay > 0:
        timer = threading.Timer(delay, executor.submit, args=(job,))
        timer.daemon = True
        timer.start()
    else:
        executor.submit(job)


def _run_node(saga_id: str, node_id: str, trace: dict[str, str] | None = None) -> None:
    from sagas.coordinator import node_execute

    node_execute(saga_id=saga_id, node_id=node_id, trace=trace)


def _run_rollback(saga_id: str, trace: dict[str, str] | None = None) -> None:
    from sagas.coordinator import saga_rollback_resume

    saga_rollback_resume(saga_id=saga_id, trace=trace)
