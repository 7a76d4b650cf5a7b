"""The fields a semantic-saga-mcp client reads that an audit of the same call sequence on both servers found missing
or typed differently here, read from our MCP server under the seed's names with the seed's types:

- get_action of an HTTP action: `forward` and `compensation` at the top level (its registry.get_definition);
- get_policy_status: `risk_weights`, risk level -> units (its policy.JsonPolicyEngine.status);
- sagas with a workflow: `metadata._engine` {version, nodes by id, checkpoints} (its engine.engine_state);
- a step's `action_definition`: `implementation`, `implementation_hash`, `semantic.effects`,
  `output_schema.additionalProperties` (its server's create_text_file registration);
- a failed saga's `error`: the failure's text (ours, the object, is `error_detail`);
- the default create_text_file: the seed's contract, as a new version that leaves steps of the earlier one
  compensable under the contract they pinned (registry.defaults).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit.canonical import sha256_hex
from governance.identity.principal import Principal
from governance.policy.facts import DEFAULT_RISK_WEIGHTS
from registry.contracts import definition_hash
from registry.defaults import PREVIOUS_DEFAULTS, default_contracts, register_defaults
from registry.models import ActionDefinition
from registry.services import action_register
from sagas import selectors
from sagas.models import Saga
from tests.protocols.conftest import ALICE
from tests.protocols.mcp_client import call, connect
from tests.seed_parity.answers_server import AnswersServer, answers_server

SHA256_HEX = 64
RISK_LEVELS = {"unknown", "low", "medium", "high", "critical"}
# The environment value behind the HTTP contract's secret reference: no answer may contain it.
SECRET_VALUE = "answers-secret-value-0123456789"
LITERAL_KEY = "literal-api-key-0123456789"
# Presentation keys a builtin step's snapshot carries beside the pinned contract (docs/mcp.md).
IMPLEMENTATION_KEYS = ("implementation", "implementation_hash")

# create_text_file@1.0.0 as register_defaults registered it before the seed's contract (registry.defaults
# PREVIOUS_DEFAULTS): what an existing deployment holds, with steps pinned to it.
PREVIOUS_CREATE_TEXT_FILE: dict[str, Any] = {
    "id": "create_text_file",
    "version": "1.0.0",
    "kind": "builtin",
    "description": "Create a new UTF-8 .txt file below SAGA_FILE_ROOT. Never overwrites; compensation deletes only "
    "the file this step created, and only if it is unchanged. simulate_error: true fails the step on purpose before "
    "anything is written (semantic-saga-mcp's demo uses it to show a rollback).",
    "semantic": {
        "domain": "filesystem",
        "operation": "create",
        "resource": "file",
        "risk": "low",
        "reversibility": "compensable",
    },
    "input_schema": {
        "type": "object",
        "required": ["path", "content"],
        "additionalProperties": False,
        "properties": {
            "path": {
                "type": "string",
                "minLength": 5,
                "maxLength": 1024,
                "pattern": "\\.txt$",
                "description": "relative path ending in .txt, no '..' and no hidden components",
            },
            "content": {"type": "string", "maxLength": 1048576},
            "simulate_error": {
                "type": "boolean",
                "description": "true: fail this step on purpose (nothing is written), as semantic-saga-mcp's "
                "builtin does",
            },
        },
    },
    "output_schema": {
        "type": "object",
        "required": ["path", "bytes", "sha256"],
        "properties": {
            "path": {"type": "string"},
            "bytes": {"type": "integer", "minimum": 0},
            "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
    },
    "execution_policy": {"forward": {"max_attempts": 2}, "failure_mode": "rollback", "idempotent": True},
    "forward": {"builtin": "create_text_file"},
    "compensation": {"builtin": "create_text_file.undo"},
}

HTTP_CONTRACT: dict[str, Any] = {
    "id": "answers_create_service",
    "version": "1.0.0",
    "kind": "http",
    "semantic": {
        "domain": "platform",
        "operation": "create",
        "resource": "service",
        "risk": "medium",
        "reversibility": "compensable",
    },
    "input_schema": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
    "output_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
    "forward": {
        "url": "http://127.0.0.1:9/services",
        "method": "POST",
        "headers": {
            "Authorization": {"secret_ref": "env://ANSWERS_PLATFORM_TOKEN", "prefix": "Bearer "},
            "X-Api-Key": LITERAL_KEY,
            "X-Purpose": "answers",
        },
        "body": {"name": "${input.name}"},
    },
    "compensation": {
        "url": "http://127.0.0.1:9/services/${result.id}",
        "method": "DELETE",
        "headers": {"Authorization": {"secret_ref": "env://ANSWERS_PLATFORM_TOKEN", "prefix": "Bearer "}},
    },
}


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None, request: pytest.FixtureRequest) -> None:
    """The server is another process: rows must be committed. The registry is as at every start, or, for a test
    that asks for `deployment_before_the_upgrade`, as a deployment had it before create_text_file@1.1.0."""
    if "deployment_before_the_upgrade" in request.fixturenames:
        # what the server's own start registered on this database (before any test flushed it) goes first
        ActionDefinition.objects.filter(action_id="create_text_file").delete()
        action_register(PREVIOUS_CREATE_TEXT_FILE)
        return
    register_defaults()


@pytest.fixture
def deployment_before_the_upgrade() -> None:
    """create_text_file@1.0.0 (the previous default) is the registry's only version (see _committed_db)."""


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AnswersServer]:
    with answers_server(tmp_path_factory.mktemp("fields"), ANSWERS_PLATFORM_TOKEN=SECRET_VALUE) as running:
        yield running


def _run(server: AnswersServer, scenario: Any) -> Any:
    async def session() -> Any:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            return await scenario(client)

    return asyncio.run(session())


def _file(name: str) -> dict[str, str]:
    return {"path": f"{name}.txt", "content": f"{name}\n"}


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and len(value) == SHA256_HEX and all(c in "0123456789abcdef" for c in value)


# --- 1. get_action: forward and compensation at the top level ---------------------------------------------------


def test_get_action_of_an_http_action_has_its_requests_at_the_top_level_without_secret_values(
    server: AnswersServer,
):
    # given an HTTP contract whose requests carry a secret reference and a literal credential header
    action_register(HTTP_CONTRACT)

    async def scenario(client: Client) -> dict[str, Any]:
        return await call(client, "get_action", {"action": HTTP_CONTRACT["id"]})

    action = _run(server, scenario)
    # then forward and compensation are objects at the top level, as the seed's get_action has them
    assert isinstance(action["forward"], dict) and isinstance(action["compensation"], dict)
    assert action["forward"]["url"] == HTTP_CONTRACT["forward"]["url"] and action["forward"]["method"] == "POST"
    assert action["forward"]["body"] == HTTP_CONTRACT["forward"]["body"]
    assert action["compensation"]["method"] == "DELETE"
    # and a secret is shown as its reference (where it lives, never its value), a literal credential as REDACTED
    headers = action["forward"]["headers"]
    assert headers["Authorization"] == {"secret_ref": "env://ANSWERS_PLATFORM_TOKEN", "prefix": "Bearer "}
    assert headers["X-Api-Key"] == "[REDACTED]" and headers["X-Purpose"] == "answers"
    assert SECRET_VALUE not in json.dumps(action)
    assert LITERAL_KEY not in json.dumps({part: action[part] for part in ("forward", "compensation")})
    # and the hashed contract is still under `definition`, as registered
    assert action["definition_hash"] == definition_hash(action["definition"])


# --- 2. get_policy_status: risk_weights -----------------------------------------------------------------------------


def test_policy_status_has_the_seeds_risk_weights(server: AnswersServer):
    async def scenario(client: Client) -> dict[str, Any]:
        return await call(client, "get_policy_status", {})

    status = _run(server, scenario)
    weights = status["risk_weights"]
    # the seed's shape: every risk level -> an integer number of units; without a policy, our defaults
    assert set(weights) == RISK_LEVELS and all(type(units) is int for units in weights.values())
    assert weights == DEFAULT_RISK_WEIGHTS


def test_policy_status_risk_weights_are_those_a_json_policy_counts(operator: Principal, settings: Any, tmp_path: Path):
    # given a JSON policy that weighs high risk 7 (keys are read case-insensitively) and names a key no risk has
    policy = tmp_path / "policy.json"
    document = {"schema_version": 1, "risk_weights": {"HIGH": 7, "extreme": 100}, "tenants": {}}
    policy.write_text(json.dumps(document))
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(policy)
    # when the status is read
    weights = selectors.policy_status(actor=operator)["risk_weights"]
    # then it says what the risk-unit budget counts: the policy's weights over the defaults, levels only
    assert weights == {**DEFAULT_RISK_WEIGHTS, "high": 7}


# --- 3. metadata._engine --------------------------------------------------------------------------------------------


def test_saga_answers_after_plan_run_and_commit_carry_metadata_engine(server: AnswersServer):
    async def scenario(client: Client) -> tuple[dict[str, Any], ...]:
        sid = (await call(client, "begin_saga", {"metadata": {"case": "engine"}}))["id"]
        a = await call(client, "plan_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("e1")})
        await call(
            client,
            "plan_saga_step",
            {"saga_id": sid, "action": "create_text_file", "input": _file("e2"), "depends_on": [a["id"]]},
        )
        await call(client, "checkpoint_saga", {"saga_id": sid, "name": "planned", "data": {"n": 2}})
        planned = await call(client, "get_saga", {"saga_id": sid})
        ran = await call(client, "run_ready_steps", {"saga_id": sid})
        committed = await call(client, "commit_saga", {"saga_id": sid})
        return planned, ran, committed

    planned, ran, committed = _run(server, scenario)
    for answer in (planned, ran, committed):
        engine = answer["metadata"]["_engine"]
        # the seed's shape: version 1, nodes keyed by node id (each with its pinned contract), checkpoints
        assert engine["version"] == 1
        assert isinstance(engine["nodes"], dict) and isinstance(engine["checkpoints"], list)
        assert set(engine["nodes"]) == {node["id"] for node in answer["workflow"]["nodes"]}
        for node_id, node in engine["nodes"].items():
            assert node["id"] == node_id and node["action"] == "create_text_file"
            assert isinstance(node["depends_on"], list) and isinstance(node["status"], str)
            assert node["action_definition"]["version"] == node["action_version"]
        [checkpoint] = engine["checkpoints"]
        assert checkpoint["name"] == "planned" and checkpoint["data"] == {"n": 2}
        assert answer["metadata"]["case"] == "engine"
    assert {node["status"] for node in committed["metadata"]["_engine"]["nodes"].values()} == {"COMPLETED"}
    # and nothing was stored under _engine: the answer derives it from the workflow's tables
    stored = Saga.objects.get(id=committed["id"]).metadata
    assert "_engine" not in stored and stored["case"] == "engine"


def test_a_saga_without_a_workflow_has_no_engine_state(server: AnswersServer):
    async def scenario(client: Client) -> dict[str, Any]:
        sid = (await call(client, "begin_saga", {}))["id"]
        await call(client, "execute_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("x")})
        return await call(client, "get_saga", {"saga_id": sid})

    saga = _run(server, scenario)
    # as in the seed, whose _engine appears with the first planned node or checkpoint
    assert "_engine" not in saga["metadata"] and "workflow" not in saga


# --- 4. a step's action_definition -----------------------------------------------------------------------------------


def test_a_steps_action_definition_has_the_seeds_keys_and_its_hash_recomputes(server: AnswersServer):
    async def scenario(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        sid = (await call(client, "begin_saga", {}))["id"]
        step = await call(
            client, "execute_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("snap")}
        )
        return step, await call(client, "get_saga", {"saga_id": sid})

    step, saga = _run(server, scenario)
    for answer in (step, saga["steps"][0]):
        snapshot = answer["action_definition"]
        assert snapshot["implementation"] == "registry.actions.builtin.create_text_file"
        assert _is_sha256(snapshot["implementation_hash"])
        assert snapshot["semantic"]["effects"] == {"creates": ["filesystem.text_file"]}
        assert snapshot["output_schema"]["additionalProperties"] is False
        # the pinned hash is over the contract snapshot: the presentation keys dropped, it recomputes
        pinned = {key: value for key, value in snapshot.items() if key not in IMPLEMENTATION_KEYS}
        assert sha256_hex(pinned) == answer["action_definition_hash"]


# --- 5. a failed saga's error ---------------------------------------------------------------------------------------


def test_a_failed_sagas_error_is_the_failures_text_and_the_object_is_error_detail(server: AnswersServer):
    async def scenario(client: Client) -> dict[str, Any]:
        sid = (await call(client, "begin_saga", {}))["id"]
        await call(client, "execute_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("f1")})
        failed = await client.call_tool(
            "execute_saga_step",
            {"saga_id": sid, "action": "create_text_file", "input": {**_file("f2"), "simulate_error": True}},
        )
        assert failed.is_error
        return await call(client, "get_saga", {"saga_id": sid})

    saga = _run(server, scenario)
    assert saga["status"] == "ROLLED_BACK"
    # the seed's error is a string: the failure's message; ours, the whole object, is error_detail
    assert isinstance(saga["error"], str) and "simulated file transaction failure" in saga["error"]
    detail = saga["error_detail"]
    assert isinstance(detail, dict) and detail["message"] == saga["error"] and isinstance(detail["code"], str)


# --- 6. the default create_text_file --------------------------------------------------------------------------------


def test_the_default_create_text_file_is_the_seeds_contract(server: AnswersServer):
    async def scenario(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        sid = (await call(client, "begin_saga", {}))["id"]
        step = await call(
            client, "execute_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("s")}
        )
        return await call(client, "get_action", {"action": "create_text_file"}), step

    action, step = _run(server, scenario)
    # the seed's version too: a new database has nothing else under 1.0.0 (an upgraded one gets 1.1.0, below)
    assert action["version"] == "1.0.0" and action["kind"] == "runtime" and action["contract_kind"] == "builtin"
    semantic = action["semantic"]
    assert semantic["resource"] == "text_file" and semantic["reversibility"] == "full" and semantic["risk"] == "low"
    assert semantic["effects"] == {"creates": ["filesystem.text_file"]}
    assert action["input_schema"]["properties"]["path"]["minLength"] == 1
    policy = action["resolved_execution_policy"]
    assert policy["forward"]["max_attempts"] == 1 and policy["compensation"]["max_attempts"] == 3
    # a path of one character before .txt passes the schema, as in the seed (ours refused paths under 5 characters)
    assert step["status"] == "COMPLETED" and step["action_version"] == "1.0.0"
    # the step's snapshot keeps the kind that runs it (docs/mcp.md: get_action says runtime, the snapshot builtin)
    assert step["action_definition"]["kind"] == "builtin"


def test_a_step_pinned_before_the_upgrade_still_compensates_under_its_contract(
    server: AnswersServer, deployment_before_the_upgrade: None
):
    [old] = PREVIOUS_DEFAULTS["create_text_file"]
    assert (PREVIOUS_CREATE_TEXT_FILE["version"], definition_hash(PREVIOUS_CREATE_TEXT_FILE)) == old

    async def before(client: Client) -> str:
        # given a saga whose planned node ran on create_text_file@1.0.0, the previous default
        sid = (await call(client, "begin_saga", {}))["id"]
        await call(client, "plan_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("old")})
        await call(client, "run_ready_steps", {"saga_id": sid})
        return str(sid)

    sid = _run(server, before)
    assert (server.files / "old.txt").exists()
    # when the server starts again: the seed's contract becomes the active version, the old one stays registered
    assert register_defaults() == ["create_text_file@1.1.0"]
    versions = dict(ActionDefinition.objects.filter(action_id="create_text_file").values_list("version", "active"))
    assert versions == {"1.0.0": False, "1.1.0": True}
    assert register_defaults() == []  # once

    async def after(client: Client) -> dict[str, Any]:
        # and a new step pins the new version, then the saga rolls back
        new = await call(
            client, "execute_saga_step", {"saga_id": sid, "action": "create_text_file", "input": _file("new")}
        )
        assert new["action_version"] == "1.1.0"
        return await call(client, "rollback_saga", {"saga_id": sid})

    rolled_back = _run(server, after)
    # then both steps were compensated, each under the contract it pinned
    assert rolled_back["status"] == "ROLLED_BACK"
    steps = {step["action_version"]: step for step in rolled_back["steps"]}
    assert {version: step["status"] for version, step in steps.items()} == {
        "1.0.0": "COMPENSATED",
        "1.1.0": "COMPENSATED",
    }
    assert steps["1.0.0"]["action_definition_hash"] == old[1]
    assert steps["1.0.0"]["action_definition"]["semantic"]["resource"] == "file"
    upgraded = {**default_contracts()[0], "version": "1.1.0"}  # the seed's contract, under the upgrade's version
    assert steps["1.1.0"]["action_definition_hash"] == definition_hash(upgraded)
    assert not (server.files / "old.txt").exists() and not (server.files / "new.txt").exists()
