"""Misconfiguration fails at start, not at the first request: each bad setting makes `semantic-saga serve` (a real
process on a free loopback port) exit non-zero with one message naming the setting and no traceback, and
`semantic-saga check` reports the same problem without serving."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from saga_project.environment import absolutize_paths, load_dotenv
from tests.distributed.workers import free_port

ROOT = Path(__file__).resolve().parents[2]
# Generous: only a process that wrongly starts serving runs into it (it would then serve until killed).
EXIT_DEADLINE_SECONDS = 90
GOOD_TOKEN = "a-long-random-token-for-alice"
BAD_REGO = 'package semantic_saga\n\ndecision := {"effect": "allow"\n'


def tokens_file(token: str, **spec: object) -> str:
    return json.dumps({"tokens": {token: {"principal_id": "alice", "tenant_id": "acme", **spec}}})


@dataclass(frozen=True)
class Misconfiguration:
    """Environment (values may name files of `files` as {dir}/name) and the setting and check id it must report;
    check_id None: settings.py refuses the value at import, before any check runs."""

    env: dict[str, str]
    setting: str
    check_id: str | None
    files: dict[str, str] = field(default_factory=dict)


STATIC = {"SAGA_AUTH_MODE": "static", "SAGA_AUTH_STATIC_TOKENS": "{dir}/tokens.json"}
JWT = {"SAGA_AUTH_MODE": "jwt", "SAGA_JWT_ISSUER": "https://id.example.test", "SAGA_JWT_AUDIENCE": "semantic-saga"}

CASES = {
    "short token": Misconfiguration(
        STATIC, "SAGA_AUTH_STATIC_TOKENS", "saga.E003", {"tokens.json": tokens_file("short", roles=["operator"])}
    ),
    "unknown role": Misconfiguration(
        STATIC, "SAGA_AUTH_STATIC_TOKENS", "saga.E004", {"tokens.json": tokens_file(GOOD_TOKEN, roles=["operater"])}
    ),
    "unparsable tokens file": Misconfiguration(
        STATIC, "SAGA_AUTH_STATIC_TOKENS", "saga.E002", {"tokens.json": '{"tokens": {'}
    ),
    "missing tokens file": Misconfiguration(STATIC, "SAGA_AUTH_STATIC_TOKENS", "saga.E001"),
    "JWT settings missing": Misconfiguration({"SAGA_AUTH_MODE": "jwt"}, "SAGA_JWT_AUDIENCE", None),
    "JWKS URL without a scheme": Misconfiguration(
        {**JWT, "SAGA_JWT_JWKS_URL": "id.example.test/jwks"}, "SAGA_JWT_JWKS_URL", "saga.E011"
    ),
    "unknown JWT algorithm": Misconfiguration(
        {**JWT, "SAGA_JWT_JWKS_URL": "https://id.example.test/jwks", "SAGA_JWT_ALGORITHMS": "RS256,RS1024"},
        "SAGA_JWT_ALGORITHMS",
        "saga.E012",
    ),
    "policy file not the schema": Misconfiguration(
        {"SAGA_POLICY_MODE": "json", "SAGA_POLICY_FILE": "{dir}/policy.json"},
        "SAGA_POLICY_FILE",
        "saga.E021",
        {"policy.json": '{"schema_version": 1, "revision": 7}'},
    ),
    "Rego that does not compile": Misconfiguration(
        {"SAGA_POLICY_MODE": "rego", "SAGA_POLICY_FILE": "{dir}/policy.rego"},
        "SAGA_POLICY_FILE",
        "saga.E022",
        {"policy.rego": BAD_REGO},
    ),
    "missing actions file": Misconfiguration(
        {"SAGA_ACTIONS_FILE": "{dir}/actions.json"}, "SAGA_ACTIONS_FILE", "saga.E030"
    ),
    "invalid actions file": Misconfiguration(
        {"SAGA_ACTIONS_FILE": "{dir}/actions.json"},
        "SAGA_ACTIONS_FILE",
        "saga.E030",
        {"actions.json": '{"schema_version": 1, "actions": [{"id": "charge"}]}'},
    ),
    "public URL without a scheme": Misconfiguration(
        {"SAGA_PUBLIC_URL": "saga.example.com"}, "SAGA_PUBLIC_URL", "saga.E040"
    ),
    "OTel endpoint without a scheme": Misconfiguration(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT", "saga.E041"
    ),
    "number that is not one": Misconfiguration({"SAGA_LEASE_SECONDS": "thirty"}, "SAGA_LEASE_SECONDS", None),
}


def process_env(case: Misconfiguration, workdir: Path) -> dict[str, str]:
    """The test runner's environment without any Semantic Saga or OTel setting, plus the case's own."""
    for name, text in case.files.items():
        (workdir / name).write_text(text, encoding="utf-8")
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("SAGA_", "OTEL_"))}
    return {
        **inherited,
        "DATABASE_URL": f"sqlite:///{workdir / 'semantic-saga.db'}",
        "DJANGO_SETTINGS_MODULE": "saga_project.settings",
        **{key: value.format(dir=workdir) for key, value in case.env.items()},
    }


def run(command: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=EXIT_DEADLINE_SECONDS,
        stdin=subprocess.DEVNULL,
    )


def semantic_saga(*args: str) -> list[str]:
    return [sys.executable, "-m", "saga_project.cli", *args]


def assert_refused(done: subprocess.CompletedProcess[str], case: Misconfiguration) -> None:
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert case.setting in done.stderr, done.stderr
    if case.check_id:
        assert case.check_id in done.stderr, done.stderr


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_serve_refuses_to_start(case: Misconfiguration, tmp_path: Path):
    # A short token is refused only beyond loopback (on loopback it is accepted with a warning: tests/seed_parity).
    beyond = ["--host", "0.0.0.0"] if case is CASES["short token"] else []
    done = run(semantic_saga("serve", *beyond, "--port", str(free_port())), process_env(case, tmp_path))
    assert_refused(done, case)
    assert "Semantic Saga on" not in done.stdout  # refused before the port was ever opened


@pytest.mark.parametrize("case", [CASES["short token"], CASES["JWT settings missing"]], ids=["check", "settings"])
def test_check_command_reports_the_same_problem(case: Misconfiguration, tmp_path: Path):
    done = run(semantic_saga("check", "--deploy"), process_env(case, tmp_path))
    assert_refused(done, case)


def test_a_good_configuration_gets_past_the_checks(tmp_path: Path):
    """The control: valid tokens, policy and registry pass every check; this fresh database then stops serve."""
    case = Misconfiguration(
        {
            **STATIC,
            "SAGA_POLICY_MODE": "json",
            "SAGA_POLICY_FILE": str(ROOT / "examples" / "governance_policy.json"),
            "SAGA_ACTIONS_FILE": str(ROOT / "examples" / "action_registry.json"),
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        },
        "",
        None,
        {"tokens.json": tokens_file(GOOD_TOKEN, roles=["operator"], scopes=["semantic-saga:read", "openid"])},
    )
    done = run(semantic_saga("serve", "--port", str(free_port())), process_env(case, tmp_path))
    assert done.returncode != 0
    assert "did not start" not in done.stderr and "unapplied migration" in done.stderr, done.stderr


def test_a_contract_changed_under_a_loaded_version_stops_serve_before_the_port_opens(tmp_path: Path):
    """Valid on its own, so no check can see it: the conflict with the database is found by loading the file."""
    registry = json.loads((ROOT / "examples" / "action_registry.json").read_text(encoding="utf-8"))
    (tmp_path / "actions.json").write_text(json.dumps(registry), encoding="utf-8")
    env = process_env(Misconfiguration({"SAGA_ACTIONS_FILE": "{dir}/actions.json"}, "", None), tmp_path)
    for step in (["migrate", "--no-input", "--verbosity", "0"], ["load_actions", str(tmp_path / "actions.json")]):
        assert run(semantic_saga(*step), env).returncode == 0
    registry["actions"][0]["description"] = "edited without a new version"
    (tmp_path / "actions.json").write_text(json.dumps(registry), encoding="utf-8")
    done = run(semantic_saga("serve", "--port", str(free_port())), env)
    assert_refused(done, Misconfiguration({}, "SAGA_ACTIONS_FILE could not be loaded", None))
    assert "already registered with different content" in done.stderr and "new version" in done.stderr
    assert "Semantic Saga on" not in done.stdout


def test_the_token_file_is_read_at_start_so_no_request_is_the_first_to_read_it(tmp_path: Path):
    case = Misconfiguration(STATIC, "", None, {"tokens.json": tokens_file(GOOD_TOKEN, roles=["viewer"])})
    env = process_env(case, tmp_path)
    assert run(semantic_saga("migrate", "--no-input", "--verbosity", "0"), env).returncode == 0
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        command = semantic_saga("serve", "--port", str(port))
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    try:
        base = f"http://127.0.0.1:{port}"
        poll_until_healthy(base, server, log)
        (tmp_path / "tokens.json").unlink()  # removed after start: requests must not depend on reading it
        answer = httpx.get(f"{base}/api/v1/sagas/", headers={"Authorization": f"Bearer {GOOD_TOKEN}"}, timeout=10)
        assert answer.status_code == 200, answer.text
    finally:
        server.terminate()
        server.wait(timeout=30)


def poll_until_healthy(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + EXIT_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail("serve did not become healthy:\n" + log.read_text())


def test_mcp_over_stdio_refuses_before_speaking(tmp_path: Path):
    case = CASES["Rego that does not compile"]
    done = run(semantic_saga("mcp"), process_env(case, tmp_path))
    assert_refused(done, case)
    assert done.stdout == ""  # stdout is the protocol stream: not even regopy's compiler output reaches it
    assert "policy:3:" in done.stderr  # the readable compiler error (module:line:column), not an S-expression


@pytest.mark.parametrize(
    ("program", "flags"),
    [
        ("saga_project.seed_cli", ["--transport", "streamable-http"]),
        ("saga_project.seed_a2a_cli", []),
    ],
    ids=["semantic-saga-mcp", "semantic-saga-a2a"],
)
def test_seed_command_lines_refuse_before_creating_a_database(program: str, flags: list[str], tmp_path: Path):
    (tmp_path / "policy.rego").write_text(BAD_REGO, encoding="utf-8")
    database = tmp_path / "seed.db"
    command = [sys.executable, "-m", program, *flags, "--port", str(free_port()), "--database", str(database)]
    command += ["--policy-mode", "rego", "--policy-file", str(tmp_path / "policy.rego")]
    done = run(command, process_env(Misconfiguration({}, "", None), tmp_path))
    # named as given: the flag, not the variable it became (tests/seed_parity/test_seed_flag_errors.py)
    assert_refused(done, Misconfiguration({}, "--policy-file: Rego policy", "saga.E022"))
    assert not database.exists()


# --- the same checks in process (the Django check framework, as `semantic-saga check` runs it) -------------------


def check_ids() -> set[str]:
    return {message.id for message in run_checks() if message.is_serious() and message.id}


def test_every_check_passes_on_the_defaults():
    assert {i for i in check_ids() if i.startswith("saga.")} == set()


def test_a_short_token_is_a_check_error(settings: object, tmp_path: Path):
    path = tmp_path / "tokens.json"
    path.write_text(tokens_file("short", roles=["admin"]), encoding="utf-8")
    settings.SAGA_AUTH_MODE = "static"  # type: ignore[attr-defined]
    settings.SAGA_AUTH_STATIC_TOKENS = str(path)  # type: ignore[attr-defined]
    with pytest.raises(SystemCheckError, match=r"saga\.E003.*at least 16 characters"):
        call_command("check", "--deploy")


def test_a_misspelled_scope_of_ours_is_an_error_but_other_scopes_are_not(settings: object, tmp_path: Path):
    path = tmp_path / "tokens.json"
    path.write_text(tokens_file(GOOD_TOKEN, scopes=["semantic-saga:raed", "openid", "profile"]), encoding="utf-8")
    settings.SAGA_AUTH_MODE = "static"  # type: ignore[attr-defined]
    settings.SAGA_AUTH_STATIC_TOKENS = str(path)  # type: ignore[attr-defined]
    messages = [m for m in run_checks() if m.id == "saga.E004"]
    assert len(messages) == 1 and "semantic-saga:raed" in messages[0].msg and "openid" not in messages[0].msg


def test_an_opa_url_must_be_a_url(settings: object):
    settings.SAGA_POLICY_MODE = "opa"  # type: ignore[attr-defined]
    settings.SAGA_OPA_URL = "127.0.0.1:8181"  # type: ignore[attr-defined]
    assert "saga.E023" in check_ids()


@pytest.mark.parametrize(
    "url", ["https://saga.example.com", "http://127.0.0.1:8000", "https://example.com/saga"], ids=str
)
def test_public_urls_that_are_fine(settings: object, url: str):
    settings.SAGA_PUBLIC_URL = url  # type: ignore[attr-defined]
    assert "saga.E040" not in check_ids()


@pytest.mark.parametrize(
    "url", ["ftp://saga.example.com", "https://", "https://saga.example.com/?x=1", "https://u:p@saga.example.com"]
)
def test_public_urls_that_are_refused(settings: object, url: str):
    settings.SAGA_PUBLIC_URL = url  # type: ignore[attr-defined]
    assert "saga.E040" in check_ids()


# --- relative paths in .env resolve against the directory holding .env -------------------------------------------


def test_relative_paths_from_dotenv_are_made_absolute_against_its_directory(tmp_path: Path):
    values = {
        "SAGA_ACTIONS_FILE": "examples/action_registry.json",
        "SAGA_POLICY_FILE": "/etc/saga/policy.rego",
        "DATABASE_URL": "sqlite:///semantic-saga.db",
        "SAGA_AUTH_STATIC_TOKENS": "tokens.json",
        "SAGA_PUBLIC_URL": "http://127.0.0.1:8000",
    }
    from_dotenv = {"SAGA_ACTIONS_FILE", "SAGA_POLICY_FILE", "DATABASE_URL", "SAGA_PUBLIC_URL"}
    absolutize_paths(values, from_dotenv, base_dir=tmp_path)
    assert values == {
        "SAGA_ACTIONS_FILE": str(tmp_path / "examples" / "action_registry.json"),
        "SAGA_POLICY_FILE": "/etc/saga/policy.rego",  # already absolute
        "DATABASE_URL": f"sqlite:///{tmp_path / 'semantic-saga.db'}",
        "SAGA_AUTH_STATIC_TOKENS": "tokens.json",  # a real environment variable: relative to the current directory
        "SAGA_PUBLIC_URL": "http://127.0.0.1:8000",  # not a path
    }


@pytest.mark.parametrize(
    "url", ["postgresql://saga@db:5432/saga", "sqlite://", "sqlite:///:memory:", "sqlite:////var/saga.db"]
)
def test_database_urls_that_are_not_relative_files_stay_as_they_are(url: str, tmp_path: Path):
    values = {"DATABASE_URL": url}
    absolutize_paths(values, ["DATABASE_URL"], base_dir=tmp_path)
    assert values == {"DATABASE_URL": url}


def test_load_dotenv_lets_real_environment_variables_win_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("SAGA_ACTIONS_FILE", "SAGA_FILE_ROOT"):
        monkeypatch.setenv(name, "")  # recorded, so the variables the file sets are removed again afterwards
        monkeypatch.delenv(name)
    monkeypatch.setenv("SAGA_POLICY_FILE", "mine.rego")
    dotenv = tmp_path / ".env"
    dotenv.write_text("SAGA_ACTIONS_FILE=examples/a.json\nSAGA_FILE_ROOT='files'\nSAGA_POLICY_FILE=theirs.rego\n")
    assert load_dotenv(dotenv) == {"SAGA_ACTIONS_FILE", "SAGA_FILE_ROOT"}
    assert os.environ["SAGA_ACTIONS_FILE"] == str(tmp_path / "examples" / "a.json")
    assert os.environ["SAGA_FILE_ROOT"] == str(tmp_path / "files")
    assert os.environ["SAGA_POLICY_FILE"] == "mine.rego"


def test_load_dotenv_without_a_file_reads_nothing(tmp_path: Path):
    assert load_dotenv(tmp_path / ".env") == frozenset()


def project_copy(where: Path, dotenv: str) -> Path:
    """A project directory of its own with its own .env (the repository's .env is never written): a copy of
    saga_project, whose BASE_DIR is then this directory, beside links to the apps and files it needs."""
    project = where / "project"
    project.mkdir()
    shutil.copytree(ROOT / "saga_project", project / "saga_project", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("sagas", "registry", "governance", "audit", "examples"):
        (project / name).symlink_to(ROOT / name)
    (project / ".env").write_text(dotenv, encoding="utf-8")
    return project


@pytest.mark.parametrize("source", ["dotenv", "environment"])
def test_a_relative_actions_file_from_dotenv_is_found_from_any_directory(source: str, tmp_path: Path):
    """The `make run` then `claude mcp add ... semantic-saga mcp` case: started from elsewhere, the registry named
    in .env is still found; the same relative path as a real variable is relative to where the process starts."""
    relative = "SAGA_ACTIONS_FILE=examples/action_registry.json\n"
    project = project_copy(tmp_path, "SECRET_KEY=from-the-dotenv-file\n" + (relative if source == "dotenv" else ""))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = process_env(Misconfiguration({}, "", None), tmp_path)
    env["PYTHONPATH"] = str(project)
    if source == "environment":
        env["SAGA_ACTIONS_FILE"] = "examples/action_registry.json"
    done = run(semantic_saga("check"), env, cwd=elsewhere)
    if source == "dotenv":
        assert done.returncode == 0, done.stderr
        assert "no issues" in done.stdout
    else:
        assert done.returncode != 0 and "saga.E030" in done.stderr
        assert str(elsewhere / "examples" / "action_registry.json") in done.stderr


# --- the Celery worker --------------------------------------------------------------------------------------------


def test_a_celery_worker_with_a_bad_configuration_exits_before_consuming(tmp_path: Path):
    import redis
    from celery import Celery

    from tests.distributed.workers import RedisServer

    broker = RedisServer(tmp_path).start()
    try:
        probe = Celery("probe", broker=broker.url)
        probe.send_task("sagas.tasks.sagas_recover_task")  # waiting on the queue before the worker starts
        queued = redis.Redis.from_url(broker.url).llen("celery")
        case = CASES["short token"]
        env = {**process_env(case, tmp_path), "CELERY_BROKER_URL": broker.url}
        worker = [sys.executable, "-m", "celery", "-A", "saga_project", "worker", "--pool", "threads"]
        done = run([*worker, "--without-gossip", "--without-mingle", "--without-heartbeat"], env)
        assert_refused(done, case)
        assert "celery worker did not start" in done.stderr
        assert queued == 1 and redis.Redis.from_url(broker.url).llen("celery") == 1  # nothing was consumed
    finally:
        broker.stop()
