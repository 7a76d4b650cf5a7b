"""The one ASGI app: a Starlette router outside (it owns the lifespan), Django mounted last.

MCP (/mcp) and A2A (/a2a, agent card) join this router in their issues; see ../shared/PROTOCOLS.md section 2 for
why Django cannot be the outermost app (it refuses lifespan scopes).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")

from django.core.asgi import get_asgi_application

django_app = get_asgi_application()  # runs django.setup(); import our modules only after this

from asgiref.sync import sync_to_async  # noqa: E402
from django.conf import settings  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.middleware.trustedhost import TrustedHostMiddleware  # noqa: E402
from starlette.routing import Mount  # noqa: E402
from starlette.staticfiles import StaticFiles  # noqa: E402

logger = logging.getLogger("saga_project.asgi")


def _load_actions_file() -> None:
    from registry.services import registry_load_file

    if settings.SAGA_ACTIONS_FILE:
        report = registry_load_file(settings.SAGA_ACTIONS_FILE)
        logger.info("action registry loaded file=%s %s", settings.SAGA_ACTIONS_FILE, report.summary())


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    from sagas.dispatch import uses_celery
    from sagas.sweeper import EmbeddedSweeper

    await sync_to_async(_load_actions_file, thread_sensitive=False)()
    # Without a broker this process is also the worker, so it also sweeps (Celery beat does it otherwise).
    sweeper = None if uses_celery() else EmbeddedSweeper().start()
    try:
        yield
    finally:
        if sweeper is not None:
            sweeper.stop()


def _static_mount() -> list[Mount]:
    # Admin CSS/JS under uvicorn without an extra dependency; `collectstatic` fills STATIC_ROOT.
    root = str(settings.STATIC_ROOT)
    if not os.path.isdir(root):
        return []
    return [Mount("/" + settings.STATIC_URL.strip("/"), app=StaticFiles(directory=root), name="static")]


application = Starlette(
    # Django is typed with its own ASGI protocol; at runtime it is a plain ASGI callable.
    routes=[*_static_mount(), Mount("/", app=django_app)],  # type: ignore[arg-type]
    middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=settings.ALLOWED_HOSTS)],
    lifespan=lifespan,
)
