"""System check for SAGA_PROXY_CONFIG: the proxy configuration `serve` loads to serve /proxy/mcp is valid.

Registered in SagasConfig.ready; `semantic-saga check` reports it and `serve` refuses to start on it (its start-up
checks). The file is read exactly as the proxy reads it; what only a connection can tell (a downstream that is
down, two servers exposing the same tool) is found when the proxy starts.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

# `semantic-saga check --tag saga` runs only Semantic Saga's own checks.
TAG = "saga"


@register(TAG)
def proxy_config_check(**kwargs: Any) -> list[CheckMessage]:
    path = settings.SAGA_PROXY_CONFIG
    if not path:
        return []
    # Imported here: every management command runs the checks, and only this one needs the proxy (and its SDK).
    from sagas.protocols.proxy.config import ProxyConfigError, load_proxy_config

    try:
        load_proxy_config(path)
    except ProxyConfigError as problem:
        return [
            Error(
                f"SAGA_PROXY_CONFIG: {problem.message}",
                hint="Correct the file (each problem names its JSON path), point SAGA_PROXY_CONFIG at another file, or "
                "unset it to serve without the proxy.",
                id="saga.E050",
            )
        ]
    return []
