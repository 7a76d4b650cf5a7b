"""Cross-language: a peer written with the official JavaScript SDK (@a2a-js/sdk, A2A 1.0) discovers Semantic Saga
from its card and runs `begin` and `get` against the live server (tests/protocols/js/a2a_peer.mjs)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sagas.models import A2ATask, Saga
from tests.protocols.conftest import ALICE, RunningServer

JS = Path(__file__).resolve().parent / "js"
NPM_CI_TIMEOUT_SECONDS = 600  # a cold npm cache on a slow registry; a warm one takes about 2 s


@pytest.fixture(scope="module")
def node() -> str:
    executable = shutil.which("node")
    if executable is None:
        pytest.fail("node (>= 20) is required for the @a2a-js/sdk interop test: install Node.js")
    if not (JS / "node_modules" / "@a2a-js" / "sdk").is_dir():
        # `make test` installs it first; a bare `pytest` on a fresh clone installs it here, from the lockfile.
        npm = shutil.which("npm")
        assert npm, "npm is required to install tests/protocols/js (npm ci)"
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=JS,
            check=True,
            timeout=NPM_CI_TIMEOUT_SECONDS,
        )
    return executable


def test_js_sdk_peer_discovers_the_card_and_runs_begin_and_get(server: RunningServer, node: str):
    done = subprocess.run(
        [node, "a2a_peer.mjs", server.base, ALICE], cwd=JS, capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stderr + server.log.read_text()[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["protocolVersion"] == "1.0"
    assert seen["interfaces"] == [{"url": f"{server.base}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
    begin, get = seen["begin"], seen["get"]
    assert begin["state"] == get["state"] == seen["reread"]["state"] == "TASK_STATE_COMPLETED"
    assert get["artifact"] == "semantic-saga-result" and get["result"]["id"] == begin["result"]["id"]
    assert seen["reread"]["id"] == begin["id"]
    metadata = Saga.objects.get(pk=begin["result"]["id"]).metadata
    assert metadata["peer"] == "a2a-js" and metadata["attempt"] == 1
    assert metadata["_interop"] == {
        "protocol": "a2a",
        "version": "1.0",
        "context_id": begin["contextId"],
        "task_id": begin["id"],
    }
    assert A2ATask.objects.filter(tenant_id="acme").count() == 2
