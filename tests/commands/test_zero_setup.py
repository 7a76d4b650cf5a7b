"""Zero set-up: with no DATABASE_URL the console script keeps its SQLite database and a generated secret key in the
per-user home (saga_project.home), created and migrated on first use, found from any directory; two commands
started at once set it up once. A configured DATABASE_URL keeps today's behaviour and never touches the home."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.apps import apps

from saga_project import home

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 180


def bare_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The test runner's environment less every setting of ours (no DATABASE_URL, no SECRET_KEY), HOME in tmp_path."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SAGA_", "DJANGO_", "OTEL_")) and k not in ("DATABASE_URL", "SECRET_KEY", "DEBUG")
    }
    return {**kept, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "xdg"), **extra}


def semantic_saga(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "saga_project.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )


def test_a_first_command_sets_up_the_home_and_every_directory_finds_it(tmp_path: Path):
    # given: no configuration at all, and two unrelated working directories
    env = bare_env(tmp_path)
    first, second = tmp_path / "project", tmp_path / "elsewhere"
    first.mkdir()
    second.mkdir()
    # when
    started = semantic_saga("status", env=env, cwd=first)
    again = semantic_saga("status", env=env, cwd=second)
    # then: the platform's per-user data directory holds the database and the key; no working directory got a file
    where = tmp_path / "xdg" / "semantic-saga"
    assert started.returncode == 0, started.stderr
    assert f"setting up the database {where / home.DATABASE_FILE}" in started.stderr
    assert again.returncode == 0 and "setting up" not in again.stderr, again.stderr
    assert (where / home.SECRET_KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert not home.unapplied_migrations(where / home.DATABASE_FILE)
    assert list(first.iterdir()) == [] and list(second.iterdir()) == []


def test_saga_home_moves_it(tmp_path: Path):
    env = bare_env(tmp_path, SAGA_HOME=str(tmp_path / "mine"))

    done = semantic_saga("pending", env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mine" / home.DATABASE_FILE).is_file()
    assert not (tmp_path / "xdg").exists()


def test_two_commands_started_at_once_set_the_home_up_once(tmp_path: Path):
    # given
    env = bare_env(tmp_path, SAGA_HOME=str(tmp_path / "home"))
    # when: two first uses race (a client starting two proxies, a person typing pending meanwhile)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda verb: semantic_saga(verb, env=env, cwd=tmp_path), ["pending", "ledger"]))
    # then: both ran on one migrated database and one key; only the first to take the lock migrated
    assert runs[0].returncode == 0, runs[0].stderr
    assert "NO_PROXY_SESSION" in runs[1].stderr, runs[1].stderr  # ledger's own answer on an empty database
    assert sum("setting up the database" in run.stderr for run in runs) == 1
    assert not home.unapplied_migrations(tmp_path / "home" / home.DATABASE_FILE)
    assert len(list((tmp_path / "home").glob("*secret_key*"))) == 1


def test_the_secret_key_is_generated_once_whoever_asks_first(tmp_path: Path):
    code = (
        "import sys; from pathlib import Path; from saga_project.home import secret_key; "
        "print(secret_key(Path(sys.argv[1])))"
    )
    with ThreadPoolExecutor(4) as pool:
        keys = set(
            pool.map(
                lambda _: subprocess.run(
                    [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True, cwd=ROOT
                ).stdout.strip(),
                range(4),
            )
        )
    assert len(keys) == 1 and len(keys.pop()) >= 50


def test_a_configured_database_url_keeps_todays_rules_and_leaves_the_home_alone(tmp_path: Path):
    env = bare_env(tmp_path, SAGA_HOME=str(tmp_path / "home"), DATABASE_URL=f"sqlite:///{tmp_path / 'mine.db'}")

    done = semantic_saga("pending", env=env, cwd=tmp_path)

    assert done.returncode == 1 and "SECRET_KEY is not set" in done.stderr, done.stderr
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("command", ["migrate", "makemigrations", "check"])
def test_commands_about_migrations_never_migrate_first(command: str, tmp_path: Path):
    env = bare_env(tmp_path, SAGA_HOME=str(tmp_path / "home"))

    done = semantic_saga(command, "--help", env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "setting up" not in done.stderr and not (tmp_path / "home" / home.DATABASE_FILE).exists()


def test_the_migration_check_knows_every_app_that_has_migrations():
    """saga_project.home reads migrations before Django is set up, from its own list of apps: it must be this one."""
    with_migrations = {
        config.label: config.name
        for config in apps.get_app_configs()
        if config.path and (Path(config.path) / "migrations" / "__init__.py").is_file()
    }
    assert with_migrations == home.MIGRATED_APPS
