"""End-to-end console tests: a real headless Chromium (Debian's `chromium`) driven by Playwright for Python,
against the console served by pytest-django's live server, with the embedded executor running the nodes.

`.ci/run` installs the browser; nothing here downloads one. Set SAGA_SCREENSHOTS_DIR to also write the console
screenshots used by docs/console.md (`make screenshots`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User

from governance.identity.oidc import VIEW_PERMISSION_APPS
from governance.models import OperatorProfile
from tests.proxy.harness import demo_http  # noqa: F401  (the demo world over HTTP, for the proxy session screens)

# Playwright's sync API keeps an event loop running in this thread; the test's own ORM calls are still plain
# synchronous code between browser steps, so Django's async-context guard is lifted for this process only.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("SAGA_CHROMIUM", "/usr/bin/chromium")
# The flags a sandboxed, offline CI machine needs: no setuid sandbox (root), no GPU, no background connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
PASSWORD = "console-e2e-password"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package (.ci/run does).")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def operator_user(transactional_db: None) -> User:
    """A console operator of tenant acme (the operator persona's tenant)."""
    user = User.objects.create_user("vera", password=PASSWORD, is_staff=True)
    OperatorProfile.objects.create(user=user, tenant_id="acme", role="operator")
    # What an SSO login grants (governance.identity.oidc): the view permissions on saga data; state changes go through
    # the coordinator with the profile's role, not through model permissions.
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=VIEW_PERMISSION_APPS, codename__startswith="view_")
    )
    return user


@pytest.fixture
def page(browser: object, live_server: object, operator_user: User) -> Iterator[object]:
    """A logged-in console page (1280x900, so screenshots are legible)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)  # type: ignore[attr-defined]
    context.set_default_timeout(15_000)
    tab = context.new_page()
    tab.goto("/admin/login/?next=/admin/")
    tab.fill("#id_username", operator_user.username)
    tab.fill("#id_password", PASSWORD)
    tab.click("input[type=submit]")
    tab.wait_for_url("**/admin/")
    try:
        yield tab
    finally:
        context.close()


@pytest.fixture
def shoot(tmp_path: Path) -> object:
    """Save a full-page screenshot (always into the test's tmp dir; also into SAGA_SCREENSHOTS_DIR when set)."""
    target = os.environ.get("SAGA_SCREENSHOTS_DIR")

    def save(tab: object, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        tab.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(target) / f"{name}.png")
        return path

    return save
