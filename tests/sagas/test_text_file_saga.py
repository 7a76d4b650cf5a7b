from __future__ import annotations

from pathlib import Path

import pytest

from governance.identity.principal import Principal
from registry.defaults import register_defaults
from registry.services import registry_load_file
from sagas import coordinator
from sagas.errors import ActionFailedPermanent
from sagas.states import SagaStatus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "action_registry.json"


@pytest.fixture
def example_registry() -> None:
    # as a server starts: the example registry, then the default contracts (create_text_file@1.0.0)
    registry_load_file(str(EXAMPLES))
    register_defaults()


def test_rollback_deletes_only_the_file_its_step_created(operator: Principal, file_root: Path, example_registry: None):
    # given a file that existed before, and a saga that creates another one
    (file_root / "notes").mkdir()
    (file_root / "notes" / "existing.txt").write_text("keep me")
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_step_execute(
        actor=operator, saga_id=saga.id, action="create_text_file", input={"path": "notes/new.txt", "content": "hi"}
    )
    assert (file_root / "notes" / "new.txt").read_text() == "hi"
    # when the saga tries to overwrite the existing file, the step fails and the saga rolls back
    with pytest.raises(ActionFailedPermanent):
        coordinator.saga_step_execute(
            actor=operator,
            saga_id=saga.id,
            action="create_text_file",
            input={"path": "notes/existing.txt", "content": "overwrite"},
        )
    # then its own file is gone and the existing one is untouched
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ROLLED_BACK
    assert not (file_root / "notes" / "new.txt").exists()
    assert (file_root / "notes" / "existing.txt").read_text() == "keep me"


def test_path_escape_is_refused_before_anything_is_written(
    operator: Principal, file_root: Path, example_registry: None
):
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(ActionFailedPermanent) as failure:
        coordinator.saga_step_execute(
            actor=operator, saga_id=saga.id, action="create_text_file", input={"path": "../escape.txt", "content": "x"}
        )
    assert not (file_root.parent / "escape.txt").exists()
    assert failure.value.extra["error"]["code"] == "PATH_ESCAPE"
