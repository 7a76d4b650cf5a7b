"""Loading proxy configurations: Sagaz's files and documented shapes load unchanged; a bad file is refused whole,
every problem named with its JSON path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from governance.errors import ServiceError
from governance.policy.gates import GateRule
from registry.tool_classes import ClassRule
from sagas.protocols.proxy.config import SCHEMA_PATH, ProxyConfigError, load_proxy_config
from tests.proxy.conftest import EXAMPLES, ROOT, SAGAZ

TOYBOX = {"command": "node", "args": ["packages/toybox/dist/index.js"], "env": {"TOYBOX_DB": "./toybox.db"}}


def _problems(path: Path) -> list[str]:
    with pytest.raises(ProxyConfigError) as caught:
        load_proxy_config(path)
    return caught.value.problems


def test_sagaz_repository_config_loads_unchanged():
    # given Sagaz's own sagaz.config.json shape: a stdio toybox, its pack by relative path, one class rule
    path = SAGAZ / "sagaz.config.json"
    # when it is loaded
    config = load_proxy_config(path)
    # then every part is there, with Sagaz's defaults for what it leaves out
    (server,) = config.servers
    assert (server.name, server.transport, server.command) == ("toybox", "stdio", "node")
    assert server.args == ("packages/toybox/dist/index.js",) and server.env == {"TOYBOX_DB": "./toybox.db"}
    assert config.rules[0] == ClassRule(
        tool="delete_tweet", effect_class="C", server="toybox", reason=config.rules[0].reason
    )
    assert config.pack_paths == ((SAGAZ / "packages/toybox/sagaz-pack.json").resolve(),)
    assert [entry.tool for entry in config.packs.entries] == ["create_contact", "delete_contact", "update_contact"]
    assert config.gates.by_class == {} and config.gates.tools == ()
    assert config.gates.confirm_timeout_seconds == 120.0
    assert (config.preview, config.capture, config.max_result_bytes, config.notes) == (False, True, 65536, ())


def test_sagaz_documented_keys_load_unchanged():
    # given a file using every key Sagaz documents (cwd, prefix, rules, policy, preview, capture, ledger)
    path = SAGAZ / "sagaz.guardian.config.json"
    # when it is loaded
    config = load_proxy_config(path)
    # then cwd is resolved against the file's directory and command/args stay as written
    crm, bank = config.servers
    assert crm.cwd == (SAGAZ / "servers" / "crm").resolve() and crm.args == ("crm.js",)
    assert crm.prefix == "crm" and crm.exposed_name("list_contacts") == "crm__list_contacts"
    assert bank.cwd is None and bank.exposed_name("transfer_funds") == "transfer_funds"
    # and rules, gates and switches mean what Sagaz says they mean
    assert [(r.tool, r.server, r.effect_class) for r in config.rules] == [
        ("delete_contact", "crm", "R"),
        ("*_draft", "", "R"),
        ("transfer_funds", "bank", "I"),
    ]
    assert config.gates.by_class == {"I": "block", "unknown": "confirm"}
    assert config.gates.tools == (
        GateRule(action="confirm", tool="transfer_funds", server="bank", reason="payroll runs need a human"),
        GateRule(action="confirm", tool="send_*"),
    )
    assert (config.preview, config.capture, config.max_result_bytes) == (True, False, 65536)
    # and ledger.path is accepted but said to be ignored
    (note,) = config.notes
    assert "ledger.path" in note and "ignored" in note


@pytest.mark.parametrize(
    "document",
    [
        {"servers": {"toybox": TOYBOX}},
        {"servers": {"toybox": {**TOYBOX, "prefix": "tb"}}},
        {"servers": {"toybox": TOYBOX}, "ledger": {"path": "./.sagaz/ledger.db", "maxResultBytes": 1024}},
        {
            "servers": {"crm": {"command": "crm"}, "bank": {"command": "bank"}},
            "policy": {
                "class": {"unknown": "confirm"},
                "tools": [{"tool": "transfer_*", "server": "bank", "action": "block"}],
            },
        },
        {
            "servers": {"crm": {"command": "crm"}},
            "rules": [{"tool": "delete_contact", "server": "crm", "class": "R", "reason": "soft delete"}],
        },
        {"servers": {"toybox": TOYBOX}, "preview": True},
    ],
    ids=["minimal", "prefix", "ledger", "policy", "rule", "preview"],
)
def test_sagaz_readme_snippets_load_unchanged(write_config, document: dict[str, Any]):
    # given a configuration as Sagaz's README writes it
    # when it is loaded
    config = load_proxy_config(write_config(document))
    # then it is accepted with its servers in file order
    assert [server.name for server in config.servers] == list(document["servers"])


def test_streamable_http_server_keeps_secret_references_unresolved(write_config):
    # given an HTTP downstream whose token is a secret reference, and a stdio one with a secret in its env
    document = {
        "servers": {
            "mail": {
                "url": "https://mail.example.com/mcp",
                "headers": {"Authorization": {"secret_ref": "env://MAIL_TOKEN", "prefix": "Bearer "}},
            },
            "bank": {"type": "stdio", "command": "bank", "env": {"BANK_KEY": {"secret_ref": "env://BANK_KEY"}}},
        }
    }
    # when it is loaded
    mail, bank = load_proxy_config(write_config(document)).servers
    # then the transports follow command/url and the references are kept as written (resolved only when connecting)
    assert (mail.transport, mail.url) == ("streamable_http", "https://mail.example.com/mcp")
    assert mail.headers == {"Authorization": {"secret_ref": "env://MAIL_TOKEN", "prefix": "Bearer "}}
    assert bank.transport == "stdio" and bank.env == {"BANK_KEY": {"secret_ref": "env://BANK_KEY"}}


def test_our_gate_extensions_load(write_config):
    # given hide, and gate rules scoped by class, tenant and client
    document = {
        "servers": {"crm": {"command": "crm"}},
        "policy": {
            "class": {"C": "hide"},
            "tools": [
                {"class": "I", "tenant": "acme", "action": "block"},
                {"tool": "delete_*", "client": "claude-code", "action": "confirm", "reason": "ask first"},
            ],
            "confirmTimeoutMs": 1500,
        },
    }
    # when it is loaded
    gates = load_proxy_config(write_config(document)).gates
    # then
    assert gates.by_class == {"C": "hide"}
    assert gates.tools == (
        GateRule(action="block", effect_class="I", tenant="acme"),
        GateRule(action="confirm", tool="delete_*", client="claude-code", reason="ask first"),
    )
    assert gates.confirm_timeout_seconds == 1.5


BAD_CONFIGS = [
    ({"servers": {}}, "servers: {} should be non-empty"),
    ({"servers": {"crm": {"args": ["x"]}}}, "servers.crm: give command (a stdio server to start) or url"),
    ({"servers": {"crm": {"command": "crm", "url": "http://x/mcp"}}}, "servers.crm: give either command"),
    ({"servers": {"crm": {"comand": "crm"}}}, "servers.crm: unknown key 'comand'"),
    ({"servers": {"crm": {"command": "crm", "headers": {"A": "b"}}}}, "servers.crm.headers: only a Streamable HTTP"),
    ({"servers": {"crm": {"url": "http://x/mcp", "cwd": "."}}}, "servers.crm.cwd: only a stdio server has cwd"),
    ({"servers": {"crm": {"command": ""}}}, "servers.crm.command: '' should be non-empty"),
    ({"servers": {"crm": {"url": "ftp://x"}}}, "servers.crm.url: 'ftp://x' is not the absolute http:// or https://"),
    ({"servers": {"crm": {"type": "http", "command": "crm"}}}, "servers.crm.type: 'http' needs url"),
    ({"servers": {"crm": {"command": "crm", "prefix": "my crm"}}}, "servers.crm.prefix: 'my crm' is not a name"),
    ({"servers": {"crm": {"command": "crm", "prefix": "a__b"}}}, "servers.crm.prefix: 'a__b' contains '__'"),
    ({"servers": {"my crm": {"command": "crm"}}}, "servers: 'my crm' is not a name of letters"),
    (
        {"servers": {"crm": {"command": "crm", "env": {"TOKEN": {"secret_ref": "vault://x"}}}}},
        "servers.crm.env.TOKEN.secret_ref: 'vault://x' is not a secret reference env://NAME",
    ),
    (
        {"servers": {"crm": {"url": "http://x/mcp", "headers": {"A": "one\ntwo"}}}},
        "servers.crm.headers.A: 'one\\ntwo' is not a literal header value on one line",
    ),
    ({"servers": {"crm": {"command": "crm"}}, "rulez": []}, "(top level): unknown key 'rulez'"),
    (
        {"servers": {"crm": {"command": "crm"}}, "rules": [{"tool": "x", "class": "X"}]},
        "rules[0].class: 'X' is not one of",
    ),
    ({"servers": {"crm": {"command": "crm"}}, "rules": [{"class": "R"}]}, "rules[0]: 'tool' is a required property"),
    (
        {"servers": {"crm": {"command": "crm"}}, "rules": [{"tool": "x", "server": "bnak", "class": "I"}]},
        "rules[0].server: no server is named 'bnak'; the servers are crm",
    ),
    (
        {"servers": {"crm": {"command": "crm"}}, "policy": {"class": {"maybe": "allow"}}},
        "policy.class: 'maybe' is not one of",
    ),
    (
        {"servers": {"crm": {"command": "crm"}}, "policy": {"tools": [{"tool": "x", "action": "blok"}]}},
        "policy.tools[0].action: 'blok' is not one of",
    ),
    (
        {
            "servers": {"crm": {"command": "crm"}},
            "policy": {"tools": [{"tool": "x", "server": "b", "action": "block"}]},
        },
        "policy.tools[0].server: no server is named 'b'",
    ),
    (
        {"servers": {"crm": {"command": "crm"}}, "policy": {"confirmTimeoutMs": 0}},
        "policy.confirmTimeoutMs: 0 is less than or equal to the minimum of 0",
    ),
    (
        {"servers": {"crm": {"command": "crm"}}, "policy": {"confirmTimeoutMs": 1.5}},
        "policy.confirmTimeoutMs: 1.5 is not of type 'integer'",
    ),
    (
        {"servers": {"crm": {"command": "crm"}}, "ledger": {"maxResultBytes": -1}},
        "ledger.maxResultBytes: -1 is less than or equal to the minimum of 0",
    ),
    ({"servers": {"crm": {"command": "crm"}}, "preview": "yes"}, "preview: 'yes' is not of type 'boolean'"),
    ({"servers": {"crm": {"command": "crm"}}, "packs": [""]}, "packs[0]: '' should be non-empty"),
]


@pytest.mark.parametrize(("document", "expected"), BAD_CONFIGS, ids=[expected for _, expected in BAD_CONFIGS])
def test_bad_config_is_refused_naming_the_path(write_config, document: dict[str, Any], expected: str):
    # given a configuration with one problem
    # when it is loaded
    problems = _problems(write_config(document))
    # then the problem is named with its JSON path
    assert any(problem.startswith(expected) for problem in problems), problems


def test_every_problem_is_reported_at_once(write_config):
    # given three problems in different parts of the file, one of them in a pack
    document = {
        "servers": {"crm": {"command": "crm", "url": "http://x/mcp"}},
        "policy": {"confirmTimeoutMs": -1},
        "packs": [{"name": "p", "description": "d", "entries": [{"tool": "x"}]}],
    }
    # when it is loaded
    with pytest.raises(ProxyConfigError) as caught:
        load_proxy_config(write_config(document))
    # then all three are listed, and the error is a ServiceError with a stable code
    problems = caught.value.problems
    assert [problem.split(":")[0] for problem in problems] == [
        "policy.confirmTimeoutMs",
        "servers.crm",
        "packs[0]",
    ]
    assert isinstance(caught.value, ServiceError) and caught.value.code == "INVALID_PROXY_CONFIG"
    assert "the proxy did not start" in caught.value.message


def test_pack_files_resolve_against_the_config_and_their_problems_name_the_file(write_config, tmp_path: Path):
    # given one missing pack file and one whose inverse reads a pre-state it never captures
    (tmp_path / "packs").mkdir()
    broken = {
        "name": "broken",
        "description": "an inverse without its capture",
        "entries": [{"tool": "delete_contact", "inverse": {"tool": "create_contact", "args": {"n": "$.pre_state.n"}}}],
    }
    (tmp_path / "packs" / "broken.json").write_text(json.dumps(broken), encoding="utf-8")
    document = {"servers": {"crm": {"command": "crm"}}, "packs": ["missing.json", "packs/broken.json"]}
    # when it is loaded
    problems = _problems(write_config(document))
    # then the missing file is named by its place and absolute path, the bad entry by the file as written
    assert problems[0] == f"packs[0]: The compensation pack {tmp_path / 'missing.json'} does not exist; check the path."
    assert problems[1].startswith("packs/broken.json: entries[0].inverse.args.n: reads $.pre_state but the entry")


def test_file_that_is_not_strict_json_is_refused(write_config, tmp_path: Path):
    # given a duplicated key (json would silently keep the last one)
    path = tmp_path / "dup.json"
    path.write_text('{"servers": {"crm": {"command": "a", "command": "b"}}}', encoding="utf-8")
    # when / then
    assert _problems(path) == [
        f"The proxy configuration {path} is not valid JSON: the key 'command' appears twice in one object."
    ]
    assert "does not exist" in _problems(tmp_path / "nowhere.json")[0]


def test_example_proxy_config_routes_the_demo_world():
    # given the shipped example
    config = load_proxy_config(EXAMPLES / "proxy.json")
    # then it routes the demo world over stdio with its pack, one class rule and one tool gate
    (server,) = config.servers
    assert server.transport == "stdio" and "examples/demo_mcp_server.py" in server.args
    assert config.pack_paths == ((EXAMPLES / "demo_pack.json").resolve(),)
    assert len(config.rules) == 1 and len(config.gates.tools) == 1


def test_published_schema_is_the_packaged_copy():
    # the loader validates with the package's copy; operators read docs/: they must be the same file
    assert (ROOT / "docs" / "proxy_config.schema.json").read_bytes() == SCHEMA_PATH.read_bytes()
