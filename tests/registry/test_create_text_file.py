from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from registry.actions import InvocationContext, invoke_compensation, invoke_forward
from registry.errors import ActionFailure

DEFINITION: dict[str, Any] = {
    "id": "create_text_file",
    "version": "1.0.0",
    "kind": "builtin",
    "forward": {"builtin": "create_text_file"},
    "compensation": {"builtin": "create_text_file.undo"},
}


def _ctx(step_id: str, path: str = "notes/a.txt", content: str = "hello") -> InvocationContext:
    return InvocationContext(
        saga_id="saga-1", step_id=step_id, idempotency_key=step_id, input={"path": path, "content": content}
    )


def _undo_ctx(step_id: str) -> InvocationContext:
    return InvocationContext(saga_id="saga-1", step_id=step_id, idempotency_key=f"{step_id}:rollback", input={})


def _failure(ctx: InvocationContext) -> ActionFailure:
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(DEFINITION, ctx)
    return caught.value


def test_create_text_file_creates_file_and_ledger(file_root: Path) -> None:
    # given an empty file root
    # when a step creates notes/a.txt
    result = invoke_forward(DEFINITION, _ctx("step-1", content="héllo"))
    # then the file exists with the content, the result describes it, and the ledger records ownership
    data = "héllo".encode()
    digest = hashlib.sha256(data).hexdigest()
    assert (file_root / "notes" / "a.txt").read_bytes() == data
    assert result == {"path": "notes/a.txt", "bytes": len(data), "sha256": digest}
    ledger = json.loads((file_root / ".saga-ledger" / "step-1.json").read_text())
    assert (ledger["path"], ledger["sha256"]) == ("notes/a.txt", digest)


def test_create_text_file_retry_of_same_step_replays_result(file_root: Path) -> None:
    # given a step that already created its file (its result was lost)
    first = invoke_forward(DEFINITION, _ctx("step-1"))
    # when the same step is retried with the same input
    again = invoke_forward(DEFINITION, _ctx("step-1"))
    # then the same result comes back and nothing else happens
    assert again == first


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("../x.txt", "PATH_ESCAPE"),
        ("notes/../../x.txt", "PATH_ESCAPE"),
        ("/abs.txt", "PATH_ESCAPE"),
        (".hidden/x.txt", "INVALID_PATH"),
        ("notes/.x.txt", "INVALID_PATH"),
        (".saga-ledger/step-2.txt", "INVALID_PATH"),
        ("notes/x.md", "INVALID_PATH"),
        ("notes//x.txt", "INVALID_PATH"),
        ("notes\\x.txt", "INVALID_PATH"),
    ],
)
def test_create_text_file_refuses_unsafe_paths(file_root: Path, path: str, code: str) -> None:
    # given an unsafe or disallowed path
    # when a step tries to create it
    failure = _failure(_ctx("step-1", path=path))
    # then it is refused permanently and nothing was written
    assert (failure.code, failure.retryable, failure.uncertain) == (code, False, False)
    assert "Nothing was written" in failure.message
    assert list(file_root.rglob("*")) == []


def test_create_text_file_refuses_symlink_escape(file_root: Path, tmp_path: Path) -> None:
    # given a directory link inside the root pointing outside it
    outside = tmp_path / "outside"
    outside.mkdir()
    (file_root / "link").symlink_to(outside)
    # when a step writes through the link
    failure = _failure(_ctx("step-1", path="link/x.txt"))
    # then it is an escape and nothing appeared outside
    assert failure.code == "PATH_ESCAPE"
    assert list(outside.iterdir()) == []


def test_create_text_file_refuses_dangling_file_symlink(file_root: Path, tmp_path: Path) -> None:
    # given a dangling link at the target name pointing outside the root
    (file_root / "x.txt").symlink_to(tmp_path / "elsewhere.txt")
    # when a step creates x.txt
    failure = _failure(_ctx("step-1", path="x.txt"))
    # then it is refused and the link target was not created
    assert failure.code == "PATH_ESCAPE"
    assert not (tmp_path / "elsewhere.txt").exists()


def test_create_text_file_never_overwrites(file_root: Path) -> None:
    # given an existing file
    existing = file_root / "a.txt"
    existing.write_text("precious", encoding="utf-8")
    # when a step tries to create it
    failure = _failure(_ctx("step-1", path="a.txt", content="new"))
    # then it fails permanently, the file is untouched, and no ownership was recorded
    assert (failure.code, failure.retryable) == ("FILE_EXISTS", False)
    assert existing.read_text(encoding="utf-8") == "precious"
    assert not (file_root / ".saga-ledger" / "step-1.json").exists()


def test_create_text_file_undo_deletes_own_file(file_root: Path) -> None:
    # given a file created by step-1
    invoke_forward(DEFINITION, _ctx("step-1"))
    # when step-1 is compensated
    result = invoke_compensation(DEFINITION, _undo_ctx("step-1"))
    # then the file and its ledger are gone
    assert result == {"deleted": True, "path": "notes/a.txt"}
    assert not (file_root / "notes" / "a.txt").exists()
    assert not (file_root / ".saga-ledger" / "step-1.json").exists()


def test_create_text_file_undo_second_time_is_noop(file_root: Path) -> None:
    # given a step already compensated, and someone re-creating the same path afterwards
    invoke_forward(DEFINITION, _ctx("step-1"))
    invoke_compensation(DEFINITION, _undo_ctx("step-1"))
    (file_root / "notes" / "a.txt").write_text("someone else's", encoding="utf-8")
    # when compensated again
    result = invoke_compensation(DEFINITION, _undo_ctx("step-1"))
    # then it succeeds without deleting anything
    assert result["deleted"] is False
    assert (file_root / "notes" / "a.txt").read_text(encoding="utf-8") == "someone else's"


def test_create_text_file_undo_leaves_other_steps_files(file_root: Path) -> None:
    # given a file created by step-1 and a pre-existing file that step-2 failed to create
    invoke_forward(DEFINITION, _ctx("step-1", path="mine.txt"))
    (file_root / "theirs.txt").write_text("theirs", encoding="utf-8")
    _failure(_ctx("step-2", path="theirs.txt"))
    # when step-2 (which created nothing) is compensated
    result = invoke_compensation(DEFINITION, _undo_ctx("step-2"))
    # then no file is deleted: neither the pre-existing one nor step-1's
    assert result["deleted"] is False
    assert "no ownership record" in result["reason"]
    assert (file_root / "theirs.txt").exists()
    assert (file_root / "mine.txt").exists()


def test_create_text_file_undo_refuses_modified_file(file_root: Path) -> None:
    # given a file created by step-1 and then edited
    invoke_forward(DEFINITION, _ctx("step-1"))
    (file_root / "notes" / "a.txt").write_text("edited", encoding="utf-8")
    # when step-1 is compensated
    with pytest.raises(ActionFailure) as caught:
        invoke_compensation(DEFINITION, _undo_ctx("step-1"))
    # then it fails permanently, asks for an operator, and keeps file and ledger
    assert (caught.value.code, caught.value.retryable) == ("FILE_CHANGED", False)
    assert "operator must reconcile" in caught.value.message
    assert (file_root / "notes" / "a.txt").read_text(encoding="utf-8") == "edited"
    assert (file_root / ".saga-ledger" / "step-1.json").exists()


def test_create_text_file_undo_when_file_already_gone(file_root: Path) -> None:
    # given a created file removed by hand
    invoke_forward(DEFINITION, _ctx("step-1"))
    os.unlink(file_root / "notes" / "a.txt")
    # when compensated
    result = invoke_compensation(DEFINITION, _undo_ctx("step-1"))
    # then the undo succeeds and clears the ledger
    assert result["deleted"] is False
    assert not (file_root / ".saga-ledger" / "step-1.json").exists()


def test_create_text_file_retry_with_other_input_refused(file_root: Path) -> None:
    # given step-1 created a.txt
    invoke_forward(DEFINITION, _ctx("step-1"))
    # when the same step id is used with different content
    failure = _failure(_ctx("step-1", content="different"))
    # then
    assert failure.code == "IDEMPOTENCY_CONFLICT"


def test_noop_builtin_returns_empty(file_root: Path) -> None:
    definition = {"kind": "builtin", "forward": {"builtin": "noop"}, "compensation": {"builtin": "noop"}}
    ctx = _ctx("step-1")
    assert invoke_forward(definition, ctx) == {}
    assert invoke_compensation(definition, ctx) == {}
