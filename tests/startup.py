"""Start-up checks seen from outside: Django set up in a fresh process with one setting changed."""

from __future__ import annotations

import os
import subprocess
import sys


def refused_at_start_up(variable: str, value: str) -> str:
    """Set up Django with `variable=value`; assert that start-up stopped on ImproperlyConfigured naming the variable,
    and return what it printed."""
    environment = {**os.environ, variable: value, "DJANGO_SETTINGS_MODULE": "saga_project.settings"}
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], env=environment, capture_output=True, text=True
    )
    assert started.returncode != 0, f"start-up accepted {variable}={value!r}"
    assert "ImproperlyConfigured" in started.stderr and variable in started.stderr, started.stderr
    return started.stderr
