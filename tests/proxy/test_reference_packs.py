"""builtin:memory against the real @modelcontextprotocol/server-memory (pinned in tests/proxy/reference_servers/): an
agent session through the journaled proxy (the official `mcp` client over Streamable HTTP, the server over stdio as a
client starts it), then `semantic-saga undo`, and the graph compared with what it was before the session; a graph
changed by someone else since is not undone over. tests/proxy/test_filesystem_pack.py and test_git_pack.py do the
same for the other reference servers."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from sagas.protocols.proxy.config import ProxyConfigError, load_proxy_config
from tests.proxy.demo_session import command
from tests.proxy.harness import config_file
from tests.proxy.reference import agent_session, call_directly, npm_server, refused_undo, succeeded

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


@pytest.fixture
def memory(tmp_path: Path) -> dict[str, Any]:
    """The memory server's configuration entry, its graph in a file of this test."""
    return {
        "command": str(npm_server("mcp-server-memory")),
        "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
    }


def _graph(server: dict[str, Any]) -> dict[str, Any]:
    """The graph as the server itself reads it (read_graph, called directly, not through the proxy)."""
    return dict(call_directly(server, "read_graph", {}).structured_content or {})


def _direct(server: dict[str, Any], tool: str, arguments: dict[str, Any]) -> None:
    assert not call_directly(server, tool, arguments).is_error


def _session(tmp_path: Path, server: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> None:
    succeeded(agent_session(tmp_path, "memory", server, "builtin:memory", calls))


def _person(name: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": list(observations)}


def test_a_memory_session_undone_leaves_the_graph_as_it_was(tmp_path: Path, memory: dict[str, Any]):
    # given a graph that already knows Grace
    _direct(memory, "create_entities", {"entities": [_person("Grace", "admiral")]})
    before = _graph(memory)
    # when the agent creates Ada and Lin (and names Grace again: the server leaves her out of its answer) and relates
    # them, then the session is undone
    _session(
        tmp_path,
        memory,
        [
            ("create_entities", {"entities": [_person("Ada", "math"), _person("Lin"), _person("Grace")]}),
            (
                "create_relations",
                {
                    "relations": [
                        {"from": "Ada", "to": "Lin", "relationType": "knows"},
                        {"from": "Grace", "to": "Ada", "relationType": "mentors"},
                    ]
                },
            ),
        ],
    )
    assert {e["name"] for e in _graph(memory)["entities"]} == {"Grace", "Ada", "Lin"}
    report = json.loads(command("undo", "--json"))
    # then both calls ran their exact inverse, and the graph is the one before the session, Grace untouched
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("create_relations", "undone"),
        ("create_entities", "undone"),
    ]
    assert report["items"][1]["inverse"] == {"tool": "delete_entities", "arguments": {"entityNames": ["Ada", "Lin"]}}
    assert _graph(memory) == before


def test_observations_added_in_a_session_are_taken_back_exactly(tmp_path: Path, memory: dict[str, Any]):
    # given a graph where Grace is known as an admiral
    _direct(memory, "create_entities", {"entities": [_person("Grace", "admiral")]})
    before = _graph(memory)
    # when the agent creates Ada, then tells the graph about Ada and Grace, repeating what it knew of both (the
    # server adds only what is new and its answer lists only that), and the session is undone
    _session(
        tmp_path,
        memory,
        [
            ("create_entities", {"entities": [_person("Ada", "math")]}),
            (
                "add_observations",
                {
                    "observations": [
                        {"entityName": "Ada", "contents": ["math", "wrote the notes"]},
                        {"entityName": "Grace", "contents": ["admiral", "navy"]},
                    ]
                },
            ),
        ],
    )
    ledger = [json.loads(line) for line in command("ledger", "--json").splitlines()]
    assert [(row["tool"], row["class"]) for row in ledger] == [("create_entities", "R"), ("add_observations", "R")]
    report = json.loads(command("undo", "--json"))
    # then add_observations ran its exact inverse, renamed per item from its answer: only what it added
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("add_observations", "undone"),
        ("create_entities", "undone"),
    ]
    assert report["items"][0]["inverse"] == {
        "tool": "delete_observations",
        "arguments": {
            "deletions": [
                {"entityName": "Ada", "observations": ["wrote the notes"]},
                {"entityName": "Grace", "observations": ["navy"]},
            ]
        },
    }
    # and the graph is exactly the one before: Grace still an admiral (the call did not add that), nothing of Ada
    assert _graph(memory) == before


def test_what_the_memory_pack_cannot_undo_is_classed_with_its_reason(tmp_path: Path, memory: dict[str, Any]):
    _direct(memory, "create_entities", {"entities": [_person("Grace", "admiral", "navy")]})
    _session(
        tmp_path, memory, [("delete_observations", {"deletions": [{"entityName": "Grace", "observations": ["navy"]}]})]
    )
    row = json.loads(command("ledger", "--json").splitlines()[0])
    assert (row["class"], row["class_source"]) == ("C", "pack")
    assert "add_observations appends" in row["class_reason"]
    report = json.loads(command("undo", "--dry-run", "--json"))
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [("delete_observations", "needs_decision")]


def test_a_pack_that_does_not_ship_is_refused_naming_the_ones_that_do(tmp_path: Path):
    config = config_file(tmp_path, {"memory": {"command": "true"}}, packs=["builtin:nope"])
    with pytest.raises(ProxyConfigError) as refused:
        load_proxy_config(config)
    assert "no pack 'builtin:nope' ships with Semantic Saga" in refused.value.message
    assert "builtin:memory" in refused.value.message


def test_a_draft_for_the_memory_server_proposes_the_inverses_its_pack_ships(tmp_path: Path, memory: dict[str, Any]):
    out, err = StringIO(), StringIO()
    config = config_file(tmp_path, {"memory": memory})
    call_command("packs", "draft", "memory", "--config", str(config), "--timeout", "30", stdout=out, stderr=err)
    drafted = {entry["tool"]: entry["inverse"] for entry in json.loads(out.getvalue())["entries"]}
    # the list projection from the answer's schema, and the relations the answer lists
    assert drafted["create_entities"] == {
        "tool": "delete_entities",
        "args": {"entityNames": "$.result.entities[*].name"},
    }
    assert drafted["create_relations"] == {"tool": "delete_relations", "args": {"relations": "$.result.relations"}}


def test_the_memory_draft_leaves_add_observations_unpaired(tmp_path: Path, memory: dict[str, Any]):
    out, err = StringIO(), StringIO()
    config = config_file(tmp_path, {"memory": memory})
    call_command("packs", "draft", "--config", str(config), "memory", stdout=out, stderr=err)
    assert "add_observations" not in {entry["tool"] for entry in json.loads(out.getvalue())["entries"]}
    assert "no pair for add_observations" in err.getvalue()


def test_an_entity_someone_else_added_to_since_is_not_deleted_by_the_undo(
    tmp_path: Path, memory: dict[str, Any]
) -> None:
    _session(tmp_path, memory, [("create_entities", {"entities": [_person("Ada", "math")]})])
    # a colleague adds what they know about Ada after the agent's session
    _direct(memory, "add_observations", {"observations": [{"entityName": "Ada", "contents": ["wrote the notes"]}]})
    item = refused_undo()[0]  # a refused inverse fails the undo (exit 1)
    assert item["verdict"] == "drifted" and "entities changed since the call (read with open_nodes)" in item["detail"]
    assert _graph(memory)["entities"] == [_person("Ada", "math", "wrote the notes")]


def test_entities_their_observations_and_a_relation_are_undone_as_one_session(tmp_path: Path, memory: dict[str, Any]):
    # given the session: entities, observations on one of them, a relation between them
    before = _graph(memory)
    _session(
        tmp_path,
        memory,
        [
            (
                "create_entities",
                {"entities": [_person("Alice"), {"name": "Acme", "entityType": "company", "observations": []}]},
            ),
            ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["likes tea"]}]}),
            ("create_relations", {"relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]}),
        ],
    )
    report = json.loads(command("undo", "--json"))
    # then every call ran its own exact inverse, newest first: the session's own observation is no drift
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("create_relations", "undone"),
        ("add_observations", "undone"),
        ("create_entities", "undone"),
    ]
    assert report["outcome"]["state"] == "undone" and report["status"] == "ROLLED_BACK"
    assert _graph(memory) == before
