"""What the proxy's terminal commands (ledger, status, checkpoint, undo, verify, preview-report) share: who is
asking (the local operator of SAGA_DEFAULT_TENANT, as `semantic-saga proxy` itself acts), which session a SESSION
argument names (an id, a short id or `last`: sagas.selectors.proxy_sessions.proxy_session), the common `--session` and
`--json` options, and a refusal shown as one line instead of a traceback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.conf import settings
from django.core.management.base import CommandError

from governance.errors import ServiceError
from governance.identity.principal import Principal, local_principal
from sagas.models import Saga
from sagas.selectors.proxy_sessions import LAST, proxy_session

SESSION_HELP = (
    "The proxy session: its saga id, a unique prefix or last characters of it (8 are shown), or `last` (the "
    "newest; the default)."
)


def operator() -> Principal:
    return local_principal(protocol="cli", tenant_id=settings.SAGA_DEFAULT_TENANT)


def session(actor: Principal, ref: str | None) -> Saga:
    with refusals():
        return proxy_session(actor=actor, ref=ref or LAST)


@contextlib.contextmanager
def refusals() -> Iterator[None]:
    """A refusal of the coordinator or a read (not found, wrong state) ends the command with its message."""
    try:
        yield
    except ServiceError as refused:
        raise CommandError(f"{refused.code}: {refused.message}") from None
