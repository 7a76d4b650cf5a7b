"""Loaded with `-p tests.pytest_env` before pytest-django reads settings: test-only environment defaults."""

from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")
os.environ.setdefault("DEBUG", "false")
# Short leases keep lease-expiry tests quick; heartbeats still renew well inside them.
os.environ.setdefault("SAGA_LEASE_SECONDS", "10")
