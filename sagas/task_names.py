"""The names of the Celery tasks of sagas.tasks, shared by the tasks that register them and the coordinator's
nudges that send them (sagas.coordinator.execution.nudges), so that neither imports the other. Queued messages and
beat's schedule (settings.CELERY_BEAT_SCHEDULE) carry these names too: they never change."""

from __future__ import annotations

NODE_EXECUTE_TASK = "sagas.tasks.node_execute_task"
SAGA_ROLLBACK_TASK = "sagas.tasks.saga_rollback_task"
SAGAS_RECOVER_TASK = "sagas.tasks.sagas_recover_task"
