"""`import_mcp_tools`: draft contracts from a real server's tools/list, over Streamable HTTP and stdio."""

from __future__ import annotations

import copy
import json
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from registry.actions import invoke_forward
from registry.contracts import validate_contract
from registry.models import ActionDefinition
from registry.services import registry_load_file
from tests.distributed.workers import free_port
from tests.mcp_actions.conftest import DEMO_PATH, DemoWorld, context

# tool -> (proposed reversibility, execution_policy.idempotent), from the demo server's honest annotations
EXPECTED = {
    "get_contact": ("read_only", True),
    "list_contacts": ("read_only", True),
    "create_contact": ("unknown", False),
    "update_contact": ("unknown", True),
    "delete_contact": ("unknown", True),
    "send_email": ("unknown", False),
    "post_tweet": ("unknown", False),
    "list_timeline": ("read_only", True),
    "transfer_funds": ("unknown", False),
    "get_call_log": ("read_only", True),
}


def _import(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_mcp_tools", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _by_tool(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {contract["forward"]["tool"]: contract for contract in document["actions"]}


def _proposals(document: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    return {
        tool: (contract["semantic"]["reversibility"], contract["execution_policy"]["idempotent"])
        for tool, contract in _by_tool(document).items()
    }


def test_import_over_http_proposes_classes_from_annotations(crm: DemoWorld, tmp_path: Path):
    # given the demo server over Streamable HTTP, reached with a bearer token
    output = tmp_path / "drafts.json"
    # when its tools are imported
    stdout, stderr = _import(crm.url, "--header", "Authorization: Bearer s3cret-token", "--output", str(output))
    # then every tool has a draft with the proposal its annotations support
    document = json.loads(output.read_text(encoding="utf-8"))
    assert stdout == "" and _proposals(document) == EXPECTED
    drafts = _by_tool(document)
    assert all(c["active"] is False and c["review"]["draft"] is True for c in drafts.values())
    assert drafts["create_contact"]["id"] == "demo-world.create_contact"
    # and each proposal is explained; an additive tool is told how to become reversible
    create_note = drafts["create_contact"]["review"]["notes"][0]
    assert create_note.startswith("unknown: destructiveHint is false") and "then mark it 'reversible'" in create_note
    assert drafts["delete_contact"]["review"]["notes"][0].startswith("unknown: destructiveHint is true")
    assert drafts["get_contact"]["review"]["notes"][0].startswith("read_only: readOnlyHint is true")
    assert "idempotentHint" in drafts["update_contact"]["review"]["notes"][1]
    # and the input schema is copied, arguments pass the input through
    assert drafts["create_contact"]["input_schema"]["required"] == ["name", "email"]
    assert drafts["create_contact"]["forward"] == {"tool": "create_contact", "arguments": "${input}"}
    # and the token was used to connect but is only referenced from the environment in the drafts
    assert drafts["send_email"]["server"] == {
        "transport": "streamable_http",
        "url": crm.url,
        "headers": {"Authorization": {"secret_ref": "env://MCP_AUTHORIZATION", "prefix": "Bearer "}},
    }
    assert "s3cret-token" not in output.read_text(encoding="utf-8")
    # and progress went to stderr
    assert f"Connecting to {crm.url}" in stderr and "demo-world 1.0.0" in stderr
    assert f"{len(EXPECTED)} tool(s)" in stderr
    assert "demo-world.get_contact: read_only, idempotent (readOnlyHint)" in stderr
    assert f"Wrote {len(EXPECTED)} draft contract(s) to {output}" in stderr


def test_import_over_stdio_proposes_the_same_classes():
    # given the demo server as a stdio command line
    command = f"{sys.executable} {DEMO_PATH}"
    # when imported to stdout
    stdout, stderr = _import(command)
    # then the drafts are on stdout and propose the same classes
    document = json.loads(stdout)
    assert _proposals(document) == EXPECTED
    assert _by_tool(document)["get_contact"]["server"] == {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(DEMO_PATH)],
    }
    assert f"Wrote {len(EXPECTED)} draft contract(s) to stdout" in stderr


@pytest.mark.django_db
def test_drafts_load_as_inactive_contracts(crm: DemoWorld, tmp_path: Path):
    # given an import written to a file
    output = tmp_path / "drafts.json"
    _import(crm.url, "-o", str(output))
    # when load_actions reads it
    report = registry_load_file(output)
    # then every draft is registered but none can run before review
    assert len(report.created) == len(EXPECTED)
    assert not ActionDefinition.objects.filter(active=True).exists()


def test_a_reviewed_draft_validates_and_runs(crm: DemoWorld):
    # given the create_contact draft, reviewed: a compensation added, then marked reversible and activated
    document = json.loads(_import(crm.url)[0])
    contract = copy.deepcopy(_by_tool(document)["create_contact"])
    contract["compensation"] = {"tool": "delete_contact", "arguments": {"id": "${result.id}"}}
    contract["semantic"]["reversibility"] = "reversible"
    del contract["review"]["draft"]
    contract["active"] = True
    # when validated and run
    validate_contract(contract)
    receipt = invoke_forward(contract, context("step-r", name="Ada", email="a@x"))
    # then it created the contact
    assert receipt["result"]["id"] == "c-1" and crm.keys("create_contact") == ["step-r"]


def test_unreachable_server_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(CommandError) as caught:
        _import(url)
    message = str(caught.value)
    assert message.startswith(f"Could not list the tools of {url}. Connecting to {url} failed (ConnectError")
    assert "Is the server running" in message


def test_failing_command_is_a_clear_error():
    with pytest.raises(CommandError) as missing:
        _import("/nonexistent/crm-mcp --verbose")
    assert "Could not start the stdio server `/nonexistent/crm-mcp --verbose`" in str(missing.value)
    with pytest.raises(CommandError) as dying:
        _import("--", sys.executable, "-c", "import sys; sys.stderr.write('no such config'); sys.exit(2)")
    assert "the server's stderr ends with: no such config" in str(dying.value)
