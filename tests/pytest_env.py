"""Loaded with `-p tests.pytest_env` before pytest-django reads settings: test-only environment defaults."""

from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")
os.environ.setdefault("DEBUG", "false")
# Short leases keep lease-expiry tests quick; heartbeats still renew well inside them.
os.environ.setdefault("SAGA_LEASE_SECONDS", "10")
# Most proxy tests drive an HTTP-served proxy as the local operator's own agent; the review-first default of an HTTP
# proxy (SAGA_PROXY_TRUST unset) has tests of its own (tests/proxy/test_guardian_trust.py), which clear this.
os.environ.setdefault("SAGA_PROXY_TRUST", "first-use")
