"""The per-user home of a local install: where the embedded database and a generated secret key live when nothing
is configured (docs/configuration.md, "Zero set-up").

A person who installs the package (`pip install semantic-saga`, no clone, no `.env`) runs `semantic-saga proxy` from
their project directory (Claude Code starts it there) and `semantic-saga pending` from any other terminal: both must
find one database without being told where. When DATABASE_URL is set (in the environment or the project's `.env`)
none of this applies; when it is not, the database is `<home>/semantic-saga.db` and, if SECRET_KEY is not set either,
the key is `<home>/secret_key`, generated once. The home is SAGA_HOME when set, else the platform's per-user data
directory (platformdirs: `$XDG_DATA_HOME/semantic-saga`, by default `~/.local/share/semantic-saga`, on Linux).

The home's database is created and migrated on first use by the console script (saga_project.cli), under a lock
file, so two commands started at once (a client starting two proxies) migrate it once. This module imports nothing
of Django's beyond its exception: settings.py reads it before any app is loaded.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

APP_NAME = "semantic-saga"
HOME_VARIABLE = "SAGA_HOME"
DATABASE_FILE = "semantic-saga.db"
SECRET_KEY_FILE = "secret_key"
LOCK_FILE = "set-up.lock"
FILE_ROOT = "saga-files"
# Directories Python installs packages into: a BASE_DIR below one is an installed copy, never a place to write.
_INSTALL_DIRECTORIES = frozenset({"site-packages", "dist-packages"})
# 50 URL-safe characters, as `make run` writes into .env (Django wants 50 or more, of 5 or more distinct ones).
SECRET_KEY_BYTES = 38
# The apps whose migrations make the schema: Django's own that we install, then ours (settings.INSTALLED_APPS).
MIGRATED_APPS = {
    "admin": "django.contrib.admin",
    "auth": "django.contrib.auth",
    "contenttypes": "django.contrib.contenttypes",
    "sessions": "django.contrib.sessions",
    "audit": "audit",
    "registry": "registry",
    "governance": "governance",
    "sagas": "sagas",
}


def home_directory() -> Path:
    """SAGA_HOME if set (relative to the current directory), else the platform's per-user data directory."""
    chosen = os.environ.get(HOME_VARIABLE, "")
    if chosen:
        return Path(chosen).expanduser().absolute()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def default_file_root(base_dir: Path, home: Path, *, uses_home: bool) -> Path:
    """Where create_text_file writes when SAGA_FILE_ROOT is unset: BASE_DIR/saga-files in a source checkout with a
    database configured (beside its .env, as `make run` sets it up); otherwise, an installed package or no
    DATABASE_URL, the per-user home's saga-files, never a directory inside the installed package."""
    if not uses_home and is_source_checkout(base_dir):
        return base_dir / FILE_ROOT
    return home / FILE_ROOT


def is_source_checkout(base_dir: Path) -> bool:
    """Whether `base_dir` (the directory above saga_project) is a project checkout, not site-packages."""
    return (base_dir / "pyproject.toml").is_file() and not _INSTALL_DIRECTORIES & set(base_dir.parts)


def secret_key(home: Path) -> str:
    """The key kept in `home`, generated (readable by its owner only) the first time. Two processes starting at
    once agree on one key: each writes its own candidate aside, and only the first link to the real name wins."""
    path = home / SECRET_KEY_FILE
    with contextlib.suppress(FileNotFoundError):
        return _read_key(path)
    _make_home(home)
    candidate = home / f".{SECRET_KEY_FILE}.{os.getpid()}"
    descriptor = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as out:
        out.write(secrets.token_urlsafe(SECRET_KEY_BYTES) + "\n")
    try:
        os.link(candidate, path)
    except FileExistsError:
        pass  # another process got there first: its key is the key
    except OSError:  # a file system without hard links: first rename wins too, near enough, and it is ours
        if not path.exists():
            os.replace(candidate, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()
    return _read_key(path)


def _read_key(path: Path) -> str:
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 50:
        raise ImproperlyConfigured(
            f"{path} holds no usable secret key (fewer than 50 characters). Delete it and a new one is made on the "
            "next start (sessions signed with the old one end), or set SECRET_KEY."
        )
    return key


def _make_home(home: Path) -> None:
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"Cannot create the Semantic Saga home {home} ({exc.strerror}). Set {HOME_VARIABLE} to a directory you "
            "can write, or set DATABASE_URL and SECRET_KEY (docs/configuration.md, 'Zero set-up')."
        ) from None


def unapplied_migrations(database: Path) -> bool:
    """Whether the home's database lacks a migration the installed code has (or does not exist yet): the
    migration files on disk against the rows of django_migrations, read with sqlite3 before Django is set up, so
    a command whose database is current pays a few file listings and one query, not Django's migration loader."""
    if not database.exists():
        return True
    import sqlite3  # only with the home's database: a configured PostgreSQL has no use for it

    try:
        read_only = f"{database.absolute().as_uri()}?mode=ro"  # as_uri: a space or '#' in the path stays a path
        with contextlib.closing(sqlite3.connect(read_only, uri=True, timeout=30)) as connection:
            applied = set(connection.execute("SELECT app, name FROM django_migrations"))
    except sqlite3.Error:
        return True  # no django_migrations table yet: `migrate` makes it
    return not _migrations_on_disk() <= applied


def _migrations_on_disk() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for label, package in MIGRATED_APPS.items():
        for directory in _package_directories(package):
            for entry in (directory / "migrations").glob("[0-9]*.py"):
                found.add((label, entry.stem))
    return found


def _package_directories(package: str) -> list[Path]:
    # find_spec of a package imports its parent only (django.contrib, cheap), never the package's own __init__.
    spec = find_spec(package)
    return [Path(location) for location in (spec.submodule_search_locations or [])] if spec else []


@contextlib.contextmanager
def set_up_lock(home: Path) -> Iterator[None]:
    """Held while the home's database is created and migrated: a second command waits, then finds it done."""
    _make_home(home)
    with open(home / LOCK_FILE, "a+b") as lock:
        if sys.platform == "win32":  # pragma: no cover  (msvcrt exists on Windows only)
            import msvcrt

            lock.seek(0)
            msvcrt.locking(lock.fileno(), msvcrt.LK_LOCK, 1)
        else:
            import fcntl

            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock, also when the process dies holding it
