"""create_text_file flushes its file and ownership record to disk exactly when SAGA_FILE_FSYNC says so: as
durable as the journal's commits (PostgreSQL: yes; SQLite WAL with synchronous=NORMAL: left to the OS)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from registry.actions import InvocationContext, invoke_forward
from tests.registry.test_create_text_file import DEFINITION


def _create(step_id: str) -> None:
    ctx = InvocationContext(
        saga_id="saga-1", step_id=step_id, idempotency_key=step_id, input={"path": f"{step_id}.txt", "content": "x"}
    )
    invoke_forward(DEFINITION, ctx)


@pytest.fixture
def flushes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        seen.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return seen


def test_with_fsync_on_the_file_its_record_and_the_rename_reach_the_disk(
    file_root: Path, settings: Any, flushes: list[int]
) -> None:
    settings.SAGA_FILE_FSYNC = True
    _create("step-durable")
    assert len(flushes) == 3  # the file, the ledger record, the ledger directory (the rename)
    assert (file_root / "step-durable.txt").read_text() == "x"


def test_with_fsync_off_nothing_waits_for_the_disk_and_the_file_is_still_owned(
    file_root: Path, settings: Any, flushes: list[int]
) -> None:
    settings.SAGA_FILE_FSYNC = False
    _create("step-fast")
    assert flushes == []
    assert (file_root / "step-fast.txt").read_text() == "x"
    assert (file_root / ".saga-ledger" / "step-fast.json").exists()


def test_the_default_follows_the_database(settings: Any) -> None:
    on_sqlite = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    assert settings.SAGA_FILE_FSYNC is not on_sqlite
