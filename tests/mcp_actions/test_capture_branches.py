"""A registered `kind: mcp` action whose capture says what undoes a call when it found nothing (`absent_when`,
`when_absent`), against the real @modelcontextprotocol/server-filesystem: an overwrite is rolled back from the
captured content, a new file by the contract's other call (moved aside), each by the outcome its receipt kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Step
from sagas.states import SagaStatus, StepStatus
from tests.contracts import register
from tests.mcp_actions.conftest import mcp_contract
from tests.proxy.reference import npm_server


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Executor threads run the steps: test rows must be committed."""


def _write_contract(world: Path) -> dict[str, Any]:
    server = {"transport": "stdio", "command": str(npm_server("mcp-server-filesystem")), "args": [str(world)]}
    contract = mcp_contract(
        "files_write",
        server,
        {"tool": "write_file", "arguments": {"path": "${input.path}", "content": "${input.content}"}},
        capture={
            "tool": "read_text_file",
            "arguments": {"path": "${input.path}"},
            "absent_when": "^ENOENT",
            "when_absent": {
                "tool": "move_file",
                "arguments": {"source": "${input.path}", "destination": "${input.aside}"},
            },
        },
        compensation={"tool": "write_file", "arguments": {"path": "${input.path}", "content": "${pre_state.content}"}},
        reversibility="reversible",
    )
    contract["input_schema"] = {"type": "object", "required": ["path", "content", "aside"]}
    return contract


def test_each_write_is_rolled_back_by_what_its_capture_found(operator: Principal, tmp_path: Path) -> None:
    world = tmp_path / "world"
    (world / "aside").mkdir(parents=True)
    (world / "notes.txt").write_text("kept\n")
    register(_write_contract(world))
    saga = coordinator.saga_begin(actor=operator)
    for name in ("notes.txt", "new.txt"):
        coordinator.node_plan(
            actor=operator,
            saga_id=saga.id,
            action="files_write",
            input={"path": str(world / name), "content": "by the saga\n", "aside": str(world / "aside" / name)},
        )
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=60)
    steps = {Path(step.input["path"]).name: step for step in Step.objects.filter(saga=saga)}
    assert all(step.status == StepStatus.COMPLETED for step in steps.values()), [s.error for s in steps.values()]
    assert steps["notes.txt"].result["pre_state"] == {"content": "kept\n"}
    assert steps["new.txt"].result["capture_outcome"] == "absent" and "pre_state" not in steps["new.txt"].result

    assert coordinator.saga_rollback(actor=operator, saga_id=saga.id).status == SagaStatus.ROLLED_BACK
    assert (world / "notes.txt").read_text() == "kept\n"  # written back from the capture
    assert not (world / "new.txt").exists()  # moved aside by the branch's call
    assert (world / "aside" / "new.txt").read_text() == "by the saga\n"
