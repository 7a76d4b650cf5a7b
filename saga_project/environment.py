"""Reading settings from the environment: the project's `.env` file, and values that name their variable when they
do not parse.

Relative paths in `.env` are resolved against the file's directory.

`make run` writes `.env` at the project root with `SAGA_ACTIONS_FILE=examples/action_registry.json`. A client that
starts `semantic-saga mcp` from another directory (Claude Desktop, `claude mcp add`) must still find that file, so
a relative path that came from `.env` means "relative to the directory holding `.env`". A real environment variable
keeps the usual meaning (relative to the current directory): whoever set it chose where the process starts.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

# Settings whose value is a file or directory path (docs/configuration.md, "Paths in .env").
PATH_SETTINGS = frozenset(
    {"SAGA_ACTIONS_FILE", "SAGA_AUTH_STATIC_TOKENS", "SAGA_POLICY_FILE", "SAGA_FILE_ROOT", "STATIC_ROOT"}
)
# DATABASE_URL is a path too when it names a SQLite file: sqlite:///relative.db is relative, sqlite:////abs.db not.
SQLITE_URL_PREFIX = "sqlite:///"
SQLITE_MEMORY = ":memory:"


class SettingsEnv(environ.Env):  # type: ignore[misc]  # django-environ ships no type hints
    """django-environ's reader, except that a value which does not parse (SAGA_LEASE_SECONDS=abc) raises
    ImproperlyConfigured naming the variable, instead of a bare ValueError from int() that names nothing."""

    def get_value(
        self, var: str, cast: Any = None, default: Any = environ.Env.NOTSET, parse_default: bool = False
    ) -> Any:
        try:
            return super().get_value(var, cast=cast, default=default, parse_default=parse_default)
        except ValueError:
            kind = getattr(cast, "__name__", "value")
            raise ImproperlyConfigured(
                f"{var} is {self.ENVIRON.get(var, '')!r}, which is not a valid {kind}. Fix or unset it "
                "(docs/configuration.md lists every variable)."
            ) from None


def load_dotenv(path: Path) -> frozenset[str]:
    """Copy the variables of `path` that the environment does not already set into os.environ, with relative
    paths made absolute against `path`'s directory. Returns the names taken from the file (none if it is absent)."""
    if not path.is_file():
        return frozenset()
    before = set(os.environ)
    environ.Env.read_env(path, overwrite=False)  # real environment variables win over the file
    taken = frozenset(set(os.environ) - before)
    absolutize_paths(os.environ, taken, base_dir=path.parent)
    return taken


def absolutize_paths(values: MutableMapping[str, str], names: Iterable[str], *, base_dir: Path) -> None:
    """Rewrite the path-valued settings among `names` in `values` so that a relative path is relative to
    `base_dir`; absolute paths, empty values and other settings are left alone."""
    for name in names:
        value = values.get(name, "")
        if name in PATH_SETTINGS:
            values[name] = _absolute_path(value, base_dir)
        elif name == "DATABASE_URL":
            values[name] = _absolute_sqlite_url(value, base_dir)


def _absolute_path(value: str, base_dir: Path) -> str:
    if not value or Path(value).is_absolute():
        return value
    return str(base_dir / value)


def _absolute_sqlite_url(url: str, base_dir: Path) -> str:
    if not url.startswith(SQLITE_URL_PREFIX):
        return url  # PostgreSQL, or sqlite:// (in memory)
    file = url.removeprefix(SQLITE_URL_PREFIX)
    if not file or file == SQLITE_MEMORY or file.startswith("/"):
        return url
    return SQLITE_URL_PREFIX + str(base_dir / file)
