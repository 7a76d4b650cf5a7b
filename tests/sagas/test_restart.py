"""State survives a process restart: one process plans and runs part of a saga and exits; a fresh one finishes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from django.db import connection

from sagas.models import Saga, Step
from sagas.states import SagaStatus, StepStatus

ROOT = Path(__file__).resolve().parents[2]

FIRST_PROCESS = """
import django, json
django.setup()
from governance.identity.principal import local_principal
from registry.defaults import register_defaults
from registry.services import registry_load_file
from sagas import coordinator
actor = local_principal()
registry_load_file("examples/action_registry.json")
register_defaults()
saga = coordinator.saga_begin(actor=actor, metadata={"run": "restart"})
coordinator.saga_step_execute(actor=actor, saga_id=saga.id, action="create_text_file",
                              input={"path": "a.txt", "content": "first"})
coordinator.node_plan(actor=actor, saga_id=saga.id, action="create_text_file", key="b",
                      input={"path": "b.txt", "content": "second"})
print(json.dumps({"saga_id": str(saga.id)}))
"""

SECOND_PROCESS = """
import django, json, sys
django.setup()
from governance.identity.principal import local_principal
from sagas import coordinator
actor = local_principal()
coordinator.saga_run_ready(actor=actor, saga_id=sys.argv[1])
saga = coordinator.saga_commit(actor=actor, saga_id=sys.argv[1])
print(json.dumps({"status": saga.status}))
"""


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgresql://{db.get('USER') or 'postgres'}@{host}:{port}/{db['NAME']}"


def _run(script: str, *args: str, file_root: Path) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": _database_url(), "SAGA_FILE_ROOT": str(file_root)}
    env["DJANGO_SETTINGS_MODULE"] = "saga_project.settings"
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_saga_state_survives_a_process_restart(tmp_path: Path):
    # given a process that ran one step, planned a node, and exited
    first = _run(FIRST_PROCESS, file_root=tmp_path)
    saga = Saga.objects.get(pk=first["saga_id"])
    assert saga.status == SagaStatus.ACTIVE
    assert list(Step.objects.filter(saga=saga).values_list("status", flat=True)) == [StepStatus.COMPLETED]
    # when a brand-new process picks the saga up by id
    second = _run(SECOND_PROCESS, first["saga_id"], file_root=tmp_path)
    # then it finishes the durable plan and commits
    assert second["status"] == SagaStatus.COMMITTED
    assert (tmp_path / "a.txt").read_text() == "first" and (tmp_path / "b.txt").read_text() == "second"
    assert Step.objects.filter(saga=saga, status=StepStatus.COMPLETED).count() == 2
