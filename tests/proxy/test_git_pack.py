"""builtin:git against the real mcp-server-git (PyPI, pinned in tests/proxy/reference_servers/git-requirements.txt),
which answers in prose: an agent session through the journaled proxy, `semantic-saga undo`, and the repository
(HEAD, branches, index, working tree) compared with what it was before wherever the pack says R; what has no
inverse is classed C from the pack and listed with its reason."""

from __future__ import annotations

import json
import subprocess
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from tests.proxy.demo_session import command
from tests.proxy.reference import agent_session, git_server, refused_undo, succeeded

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout


def _commit(repo: Path, message: str) -> None:
    """Someone commits a new file after the agent's session."""
    (repo / "NOTES.md").write_text(f"{message}\n")
    _git(repo, "add", "NOTES.md")
    _git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository on main with one commit, a branch `feature`, and an edited file not yet staged."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "ada@example.test")
    _git(root, "config", "user.name", "Ada")
    (root / "README.md").write_text("hello\n")
    _git(root, "add", "README.md")
    _git(root, "commit", "-q", "-m", "first")
    _git(root, "branch", "feature")
    (root / "README.md").write_text("hello, world\n")
    return root


@pytest.fixture
def git(repo: Path) -> dict[str, Any]:
    return {"command": str(git_server()), "args": ["--repository", str(repo)]}


def _state(repo: Path) -> dict[str, str]:
    """Everything the pack's R calls could change: HEAD, every ref, the index and the working tree."""
    return {
        "head": _git(repo, "symbolic-ref", "-q", "HEAD"),
        "refs": _git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "index": _git(repo, "ls-files", "--stage"),
        "staged": _git(repo, "diff", "--cached"),
        "worktree": _git(repo, "diff"),
        "readme": (repo / "README.md").read_text(),
    }


def _session(tmp_path: Path, server: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> None:
    """The agent's calls through the proxy with builtin:git, each of them answered without an error."""
    succeeded(agent_session(tmp_path, "git", server, "builtin:git", calls))


def test_a_git_session_undone_leaves_the_repository_as_it_was(tmp_path: Path, repo: Path, git: dict[str, Any]) -> None:
    before = _state(repo)
    _session(
        tmp_path,
        git,
        [
            ("git_status", {"repo_path": str(repo)}),
            ("git_add", {"repo_path": str(repo), "files": ["README.md"]}),
            ("git_checkout", {"repo_path": str(repo), "branch_name": "feature"}),
        ],
    )
    assert _state(repo)["head"] == "refs/heads/feature\n" and _state(repo)["staged"]
    report = json.loads(command("undo", "--json"))
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("git_checkout", "undone"),
        ("git_add", "undone"),
        ("git_status", "skipped"),
    ]
    # the branch came from git_status's prose, by the pack's named group
    assert report["items"][0]["inverse"]["arguments"]["branch_name"] == "main"
    assert _state(repo) == before


def test_what_the_git_pack_cannot_undo_is_classed_c_with_its_reason(
    tmp_path: Path, repo: Path, git: dict[str, Any]
) -> None:
    _git(repo, "add", "README.md")  # something is staged before the agent adds more
    (repo / "NOTES.md").write_text("notes\n")
    _session(
        tmp_path,
        git,
        [
            ("git_add", {"repo_path": str(repo), "files": ["NOTES.md"]}),
            ("git_commit", {"repo_path": str(repo), "message": "by the agent"}),
            ("git_create_branch", {"repo_path": str(repo), "branch_name": "agent-work"}),
        ],
    )
    ledger = [json.loads(line) for line in command("ledger", "--json").splitlines()]
    assert [(row["tool"], row["class"], row["class_source"]) for row in ledger] == [
        ("git_add", "C", "pack"),
        ("git_commit", "C", "pack"),
        ("git_create_branch", "C", "pack"),
    ]
    report = json.loads(command("undo", "--dry-run", "--json"))
    details = {item["tool"]: (item["verdict"], item["detail"]) for item in report["items"]}
    assert details["git_add"][0] == "needs_decision" and "already staged" in details["git_add"][1]
    assert details["git_commit"][0] == "needs_decision"
    assert details["git_create_branch"][0] == "needs_decision"


def test_a_checkout_with_commits_made_since_is_not_undone(tmp_path: Path, repo: Path, git: dict[str, Any]) -> None:
    _git(repo, "stash", "-q")  # a clean tree, so checkouts carry nothing
    _session(tmp_path, git, [("git_checkout", {"repo_path": str(repo), "branch_name": "feature"})])
    _commit(repo, "a colleague's commit on feature")
    item = refused_undo()[0]  # a refused inverse fails the undo (exit 1)
    assert item["verdict"] == "drifted" and "head changed since the call (read with git_log)" in item["detail"]
    assert _git(repo, "symbolic-ref", "HEAD") == "refs/heads/feature\n"


def test_commits_on_a_detached_head_are_not_left_unreachable(tmp_path: Path, repo: Path, git: dict[str, Any]) -> None:
    _git(repo, "stash", "-q")
    first = _git(repo, "rev-parse", "HEAD").strip()
    _session(tmp_path, git, [("git_checkout", {"repo_path": str(repo), "branch_name": first})])  # a bare commit
    _commit(repo, "detached work")
    assert refused_undo()[0]["verdict"] == "drifted"
    assert _git(repo, "log", "-1", "--format=%s") == "detached work\n"  # HEAD still on it


def test_what_was_staged_after_the_add_is_not_unstaged_by_the_undo(
    tmp_path: Path, repo: Path, git: dict[str, Any]
) -> None:
    _session(tmp_path, git, [("git_add", {"repo_path": str(repo), "files": ["README.md"]})])
    (repo / "NOTES.md").write_text("staged by a colleague\n")
    _git(repo, "add", "NOTES.md")
    item = refused_undo()[0]  # a refused inverse fails the undo (exit 1)
    assert (
        item["verdict"] == "drifted" and "staged changed since the call (read with git_diff_staged)" in item["detail"]
    )
    assert "NOTES.md" in _git(repo, "diff", "--cached", "--name-only")


def test_an_add_in_a_repository_without_a_commit_has_no_inverse(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q", "-b", "main")
    (empty / "a.txt").write_text("a\n")
    server = {"command": str(git_server()), "args": ["--repository", str(empty)]}
    _session(tmp_path, server, [("git_add", {"repo_path": str(empty), "files": ["a.txt"]})])
    item = json.loads(command("undo", "--dry-run", "--json"))["items"][0]
    assert item["verdict"] == "needs_decision" and "no commit yet" in item["detail"]


def test_an_add_the_session_then_committed_is_left_not_called_drift(
    tmp_path: Path, repo: Path, git: dict[str, Any]
) -> None:
    # given a session that stages, commits what it staged, then checks out another branch
    _session(
        tmp_path,
        git,
        [
            ("git_add", {"repo_path": str(repo), "files": ["README.md"]}),
            ("git_commit", {"repo_path": str(repo), "message": "by the agent"}),
            ("git_checkout", {"repo_path": str(repo), "branch_name": "feature"}),
            ("git_create_branch", {"repo_path": str(repo), "branch_name": "agent-work"}),
        ],
    )
    committed = _git(repo, "rev-parse", "main")
    # when undone
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("undo", "--json", stdout=out)
    report = json.loads(out.getvalue())
    # then the checkout is undone, the commit needs a decision, and the add is left because of the commit: the
    # session's own later call, never "drift" or "someone", and the undo did not fail
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("git_create_branch", "needs_decision"),
        ("git_checkout", "undone"),
        ("git_commit", "needs_decision"),
        ("git_add", "left"),
    ]
    # the call named is the one right after it that stays (the commit), not the newest one (the branch)
    assert "call 2 (git_commit) of this session built on it" in report["items"][3]["detail"]
    assert exited.value.code == 3 and report["status"] == "ROLLED_BACK"
    assert report["outcome"]["summary"] == (
        "undone, 3 calls left: git_add (call 2 of the session built on it), git_commit (needs a decision), "
        "git_create_branch (needs a decision)"
    )
    assert "Someone" not in out.getvalue() and "drift" not in out.getvalue()
    # and the repository is back on main with the agent's commit, which only a person can take back
    assert _git(repo, "symbolic-ref", "HEAD") == "refs/heads/main\n"
    assert _git(repo, "rev-parse", "main") == committed
