"""A2A tasks in the admin: readable by the operators of their tenant only, never editable."""

from __future__ import annotations

from a2a.types.a2a_pb2 import Task, TaskState, TaskStatus

from sagas.models import A2ATask
from sagas.protocols.a2a.task_store import _save
from tests.admin.test_readonly_admin import _login


def _task(task_id: str, tenant_id: str) -> None:
    status = TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
    status.timestamp.GetCurrentTime()
    _save(tenant_id, Task(id=task_id, context_id="ctx", status=status))


def test_a2a_tasks_are_listed_for_their_tenant_and_read_only():
    # given a task in each of two tenants, and an admin of acme
    _task("acme-task-0001", "acme")
    _task("globex-task-01", "globex")
    client = _login("root", "acme")

    # when the admin opens the list, a task and the add form
    listing = client.get("/admin/sagas/a2atask/").content.decode()
    detail = client.get("/admin/sagas/a2atask/acme-task-0001/change/")
    foreign = client.get("/admin/sagas/a2atask/globex-task-01/change/")
    add = client.get("/admin/sagas/a2atask/add/")

    # then only acme's task shows, read-only
    assert "acme-task-0001" in listing and "globex-task-01" not in listing
    assert "TASK_STATE_COMPLETED" in detail.content.decode() and 'name="_save"' not in detail.content.decode()
    assert foreign.status_code == 302  # another tenant's task is "not found" (redirect to the index with a message)
    assert add.status_code == 403
    assert A2ATask.objects.get(pk="acme-task-0001").state == "TASK_STATE_COMPLETED"
