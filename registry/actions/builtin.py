"""Builtin actions, run in-process: `create_text_file` (+ `create_text_file.undo`) and `noop`.

create_text_file never overwrites and its undo never deletes a file it cannot prove it created. Proof is an
ownership ledger, `SAGA_FILE_ROOT/.saga-ledger/<step id>.json` (relative path + sha256 of the content), written
after the file exists. Known crash window: a crash between creating the file and writing the ledger leaves a
file nobody owns; undo then leaves it alone (an orphan is recoverable by hand, a wrongly deleted file is not).
The file and its record are flushed to disk only when SAGA_FILE_FSYNC says the journal's commits are (settings).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings

from registry.actions.context import InvocationContext
from registry.errors import ActionFailure

LEDGER_DIR = ".saga-ledger"
FILE_SUFFIX = ".txt"
# Step ids become ledger file names, so they must not carry separators or start a hidden name.
_STEP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
# Read size when hashing an existing file; 64 KiB balances syscalls against memory.
_HASH_CHUNK_BYTES = 64 * 1024
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

BuiltinHandler = Callable[[InvocationContext], Any]


def call(request: dict[str, Any], ctx: InvocationContext) -> Any:
    name = request.get("builtin")
    handler = BUILTIN_HANDLERS.get(name) if isinstance(name, str) else None
    if handler is None:
        raise ActionFailure(
            "UNKNOWN_BUILTIN",
            f"No builtin handler named {name!r} (known: {', '.join(sorted(BUILTIN_HANDLERS))}). Nothing ran.",
            retryable=False,
        )
    return handler(ctx)


# --- create_text_file -------------------------------------------------------------------------------------------


def create_text_file(ctx: InvocationContext) -> dict[str, Any]:
    """Create `input.path` (relative, .txt) under SAGA_FILE_ROOT with `input.content`; never overwrite.

    `input.simulate_error` true fails the step after the path and content are checked and before anything is
    written (semantic-saga-mcp's builtin does the same; its demo uses it to show a rollback)."""
    root = _file_root()
    rel, content = _file_input(ctx.input)
    target = _safe_target(root, rel)
    if ctx.input.get("simulate_error"):
        raise ActionFailure(
            "SIMULATED_ERROR",
            f"simulated file transaction failure: input simulate_error is true, so this step failed on purpose and "
            f"{rel} was not written. Drop simulate_error (or set it false) to create the file.",
            retryable=False,
        )
    data = content.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    owned = _read_ledger(root, ctx.step_id)
    if owned is not None:
        # A retry of a step whose first attempt succeeded but whose result was lost: answer the same again.
        return _replay(root, owned, rel, digest, ctx.step_id)
    _create_exclusive(root, target, rel, data)
    _write_ledger(root, ctx.step_id, {"step_id": ctx.step_id, "path": rel, "sha256": digest, "bytes": len(data)})
    return {"path": rel, "bytes": len(data), "sha256": digest}


def create_text_file_undo(ctx: InvocationContext) -> dict[str, Any]:
    """Delete the file this step created, only if it is unchanged; idempotent (a second undo finds no ledger)."""
    root = _file_root()
    owned = _read_ledger(root, ctx.step_id)
    if owned is None:
        return {
            "deleted": False,
            "reason": f"step {ctx.step_id} has no ownership record, so it created no file; any file at that path "
            "belongs to someone else and was left alone",
        }
    rel = owned["path"]
    target = _safe_target(root, rel)
    current = _current_sha256(target, rel)
    if current is None:
        _remove_ledger(root, ctx.step_id)
        return {"deleted": False, "path": rel, "reason": "the file this step created is already gone"}
    if current != owned["sha256"]:
        raise _changed(rel, ctx.step_id)
    # A write between the hash check and the unlink is not detected; files under the root are not meant to be
    # shared with other writers, and the ledger still records what was created.
    os.unlink(target)
    _remove_ledger(root, ctx.step_id)
    return {"deleted": True, "path": rel}


def _file_root() -> str:
    root = str(settings.SAGA_FILE_ROOT)
    os.makedirs(root, exist_ok=True)
    # Resolve the root itself once: every containment check compares real paths.
    return os.path.realpath(root)


def _file_input(payload: dict[str, Any]) -> tuple[str, str]:
    rel, content = payload.get("path"), payload.get("content")
    if not isinstance(rel, str) or not isinstance(content, str):
        raise ActionFailure(
            "INVALID_INPUT",
            'create_text_file needs input {"path": "<relative>.txt", "content": "<text>"} with both '
            "values strings. Nothing was written.",
            retryable=False,
        )
    return rel, content


def _safe_target(root: str, rel: str) -> str:
    """The absolute path for `rel`, or ActionFailure when it could leave the root or is not an allowed name."""
    if os.path.isabs(rel) or rel.startswith(("/", "\\")):
        raise _escape(rel, "absolute paths are refused; give a path relative to the file root")
    parts = rel.split("/")
    if ".." in parts:
        raise _escape(rel, "'..' components are refused")
    if "\\" in rel or "\x00" in rel or any(not part or part.startswith(".") for part in parts):
        raise _invalid_path(rel, "empty, hidden ('.'-prefixed) components, backslashes and NUL are refused")
    if not parts[-1].endswith(FILE_SUFFIX):
        raise _invalid_path(rel, f"only {FILE_SUFFIX} files can be created")
    target = os.path.join(root, *parts)
    _ensure_inside(root, os.path.realpath(target), rel)
    return target


def _ensure_inside(root: str, real: str, rel: str) -> None:
    # realpath follows symlinks (also dangling ones), so a link pointing outside the root, or into the hidden
    # ledger directory, is caught here.
    inside = os.path.commonpath([root, real]) == root
    # relpath of the root itself is "." (a file directly in the root), which is not a hidden component.
    parts = [part for part in os.path.relpath(real, root).split(os.sep) if part != "."]
    if not inside or any(part.startswith(".") for part in parts):
        raise _escape(rel, "it resolves (through a symbolic link) outside the file root")


def _create_exclusive(root: str, target: str, rel: str, data: bytes) -> None:
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise _write_failed(rel, exc, retryable=False) from None
    # Re-check after creating directories: a link swapped in since the first check must not be followed.
    _ensure_inside(root, os.path.realpath(parent), rel)
    try:
        fd = os.open(target, _OPEN_FLAGS, 0o644)
    except FileExistsError:
        raise ActionFailure(
            "FILE_EXISTS",
            f"{rel} already exists and was left untouched (create_text_file never overwrites). Choose another "
            "path; retrying the same path will fail the same way.",
            retryable=False,
        ) from None
    except OSError as exc:
        raise _write_failed(rel, exc, retryable=False) from None
    _write_all(fd, target, rel, data)


def _write_all(fd: int, target: str, rel: str, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if settings.SAGA_FILE_FSYNC:
            os.fsync(fd)  # the content is durable before the ledger claims it
    except OSError as exc:
        os.close(fd)
        # We created this file a moment ago (O_EXCL), so removing the partial file is ours to do.
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise _write_failed(rel, exc, retryable=True) from None
    os.close(fd)


def _replay(root: str, owned: dict[str, Any], rel: str, digest: str, step_id: str) -> dict[str, Any]:
    if owned.get("path") != rel or owned.get("sha256") != digest:
        raise ActionFailure(
            "IDEMPOTENCY_CONFLICT",
            f"step {step_id} already created {owned.get('path')} with other input; a retry of the same step must "
            "use the same input. Nothing was written.",
            retryable=False,
        )
    if _current_sha256(_safe_target(root, rel), rel) != digest:
        raise _changed(rel, step_id)
    return {"path": rel, "bytes": owned["bytes"], "sha256": digest}


def _current_sha256(target: str, rel: str) -> str | None:
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise ActionFailure(
            "FILE_CHANGED",
            f"{rel} is no longer a regular file; it was not touched. An operator must reconcile it by hand.",
            retryable=False,
        )
    digest = hashlib.sha256()
    with open(target, "rb") as handle:
        for chunk in iter(lambda: handle.read(_HASH_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- ownership ledger -------------------------------------------------------------------------------------------


def _ledger_path(root: str, step_id: str) -> str:
    if not _STEP_ID.fullmatch(step_id):
        raise ActionFailure(
            "INVALID_STEP_ID",
            f"step id {step_id!r} cannot name a ledger file (letters, digits, '_' and '-' only). Nothing was written.",
            retryable=False,
        )
    return os.path.join(root, LEDGER_DIR, f"{step_id}.json")


def _read_ledger(root: str, step_id: str) -> dict[str, Any] | None:
    path = _ledger_path(root, step_id)
    try:
        with open(path, encoding="utf-8") as handle:
            entry: dict[str, Any] = json.load(handle)
    except FileNotFoundError:
        return None
    except ValueError:
        raise ActionFailure(
            "LEDGER_CORRUPT",
            f"The ownership record {path} is not valid JSON; nothing was touched. An operator must inspect it.",
            retryable=False,
        ) from None
    return entry


def _write_ledger(root: str, step_id: str, entry: dict[str, Any]) -> None:
    path = _ledger_path(root, step_id)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # tmp + os.replace: a reader sees the old state or the complete new record, never a torn one.
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(entry, handle, sort_keys=True)
        handle.flush()
        if settings.SAGA_FILE_FSYNC:
            os.fsync(handle.fileno())
    os.replace(tmp, path)
    if settings.SAGA_FILE_FSYNC:
        _fsync_dir(os.path.dirname(path))


def _remove_ledger(root: str, step_id: str) -> None:
    # A concurrent undo of the same step may have got there first; the outcome is the same.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_ledger_path(root, step_id))


def _fsync_dir(path: str) -> None:
    # Makes the rename itself durable; not every platform can open a directory, which is harmless.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


# --- failures ---------------------------------------------------------------------------------------------------


def _escape(rel: str, why: str) -> ActionFailure:
    return ActionFailure(
        "PATH_ESCAPE",
        f"{rel!r} is refused: {why}. Nothing was written; use a relative .txt path inside the file root.",
        retryable=False,
    )


def _invalid_path(rel: str, why: str) -> ActionFailure:
    return ActionFailure("INVALID_PATH", f"{rel!r} is refused: {why}. Nothing was written.", retryable=False)


def _write_failed(rel: str, exc: OSError, *, retryable: bool) -> ActionFailure:
    return ActionFailure(
        "FILE_WRITE_FAILED",
        f"{rel} could not be written ({exc.strerror or type(exc).__name__}); no file was left behind."
        + (" Retrying may succeed." if retryable else " Retrying the same path will fail the same way."),
        retryable=retryable,
    )


def _changed(rel: str, step_id: str) -> ActionFailure:
    return ActionFailure(
        "FILE_CHANGED",
        f"{rel} was modified after step {step_id} created it, so it was not deleted. An operator must reconcile "
        "the file by hand (keep or remove it), then resolve the step.",
        retryable=False,
    )


# --- noop -------------------------------------------------------------------------------------------------------


def noop(ctx: InvocationContext) -> dict[str, Any]:
    """Does nothing; measures the coordinator's own per-step cost in benchmarks."""
    return {}


# Names are part of contracts (`{"builtin": name}`); the published schema enumerates exactly these.
BUILTIN_HANDLERS: dict[str, BuiltinHandler] = {
    "create_text_file": create_text_file,
    "create_text_file.undo": create_text_file_undo,
    "noop": noop,
}
