"""Loading a proxy configuration file (a Sagaz `sagaz.config.json` loads unchanged) into a ProxyConfig.

Three passes over the document, every problem of all three reported at once with the JSON path of the offending
value (`servers.crm.command: ...`), and nothing partially accepted:
  1. the published JSON Schema (docs/proxy_config.schema.json, a copy of proxy_config.schema.json beside this
     module) for shape: unknown keys, types, class and gate names, positive timeouts and sizes;
  2. what a schema says badly: a server is a stdio `command` or a Streamable HTTP `url`, never both; a prefix must
     not contain the `__` separator; a rule's `server` must be one of `servers` (a typo would never match);
  3. the compensation packs it names (registry.packs), files resolved against the configuration's directory.

Sagaz keys: `servers` (`command`, `args`, `env`, `cwd`, `prefix`), `rules`, `policy.class`, `policy.tools`,
`policy.confirmTimeoutMs`, `preview`, `capture`, `packs`, `ledger.maxResultBytes`; `ledger.path` is accepted and
ignored with a note (the ledger is our database). Ours: a server's `url` and `headers` (and `type`, as MCP client
configurations write it), `{"secret_ref": "env://NAME"}` values in `env` and `headers`, a server's
`notificationsPerSecond`, `notificationBurst` and `elicitation`, the `hide` gate, and gate rules scoped by `class`,
`tenant` and `client`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from governance.errors import ServiceError
from governance.policy.gates import gate_policy
from registry import builtin_packs
from registry.packs import PackError, PackSet, load_packs
from registry.strict_json import StrictJsonError, read_strict_json
from registry.tool_classes import ClassRule
from sagas.protocols.proxy.floods import DEFAULT_PER_SECOND
from sagas.protocols.proxy.specs import ProxyConfig, ServerSpec

SCHEMA_PATH = Path(__file__).with_name("proxy_config.schema.json")
# Sagaz's default: 64 KiB of result per call is enough to read what a tool answered without bloating the journal.
DEFAULT_MAX_RESULT_BYTES = 65536
PREFIX_SEPARATOR = "__"
_STDIO_KEYS = ("command", "args", "env", "cwd")
_HTTP_KEYS = ("url", "headers")
_TYPES = {"stdio": "command", "http": "url", "streamable_http": "url"}
# Long instance reprs (a whole object in a type error) make messages unreadable; cut them.
_MESSAGE_LIMIT = 300


class ProxyConfigError(ServiceError):
    """A proxy configuration that cannot be used; `problems` lists every finding, each with its JSON path."""

    code = "INVALID_PROXY_CONFIG"

    def __init__(self, path: Path, problems: list[str]) -> None:
        listed = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(
            self.code,
            f"The proxy configuration {path} is invalid; the proxy did not start. Fix these problems:\n{listed}",
            problems=problems,
        )
        self.problems = problems


@cache
def proxy_config_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(proxy_config_schema())


def load_proxy_config(path: str | os.PathLike[str]) -> ProxyConfig:
    """The configuration in `path`, valid in every part, or ProxyConfigError naming every problem."""
    absolute = Path(path).resolve()
    try:
        document = read_strict_json(absolute, "proxy configuration")
    except StrictJsonError as exc:
        raise ProxyConfigError(absolute, [str(exc)]) from None
    return parse_proxy_config(document, absolute)


def parse_proxy_config(document: Any, path: Path) -> ProxyConfig:
    """A parsed document as ProxyConfig; `path` (absolute) is where relative paths in it start from."""
    problems = _schema_problems(_validator().iter_errors(document))
    packs = PackSet()
    pack_paths: tuple[Path, ...] = ()
    if isinstance(document, dict):
        problems += _server_problems(document.get("servers"))
        problems += _server_reference_problems(document)
        pack_paths, packs, pack_problems = _packs(document.get("packs"), path.parent)
        problems += pack_problems
    if problems:
        raise ProxyConfigError(path, problems)
    return _build(document, path, pack_paths, packs)


# --- pass 1: the schema -----------------------------------------------------------------------------------------


def _schema_problems(errors: Iterable[ValidationError]) -> list[str]:
    found = sorted(errors, key=lambda error: (_join_path(error.absolute_path), error.message))
    return [f"{_join_path(error.absolute_path) or '(top level)'}: {_describe(error)}" for error in found]


def _describe(error: ValidationError) -> str:
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = sorted(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
        unexpected = sorted(set(error.instance) - set(known))
        return _clip(f"unknown key {', '.join(map(repr, unexpected))} (a typo? the keys here are {', '.join(known)})")
    if error.validator == "anyOf" and error.context:
        return _describe(best_match(error.context))
    # A regex in a message helps nobody; the schema's description says what the value should look like.
    if error.validator == "pattern" and isinstance(error.schema, dict) and error.schema.get("description"):
        return _clip(f"{error.instance!r} is not {error.schema['description']}")
    return _clip(error.message)


def _join_path(parts: Iterable[Any]) -> str:
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def _clip(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


# --- pass 2: what the schema says badly -------------------------------------------------------------------------


def _server_problems(servers: Any) -> list[str]:
    if not isinstance(servers, dict):
        return []
    problems = []
    for name, server in servers.items():
        if isinstance(server, dict):
            problems += _one_server_problems(server, f"servers.{name}")
    return problems


def _one_server_problems(server: dict[str, Any], where: str) -> list[str]:
    if "command" in server and "url" in server:
        return [f"{where}: give either command (a stdio server) or url (a Streamable HTTP server), not both"]
    if "command" not in server and "url" not in server:
        return [f"{where}: give command (a stdio server to start) or url (a Streamable HTTP server to connect to)"]
    stdio = "command" in server
    wrong = [key for key in (_HTTP_KEYS if stdio else _STDIO_KEYS) if key in server]
    problems = [
        f"{where}.{key}: only a {'Streamable HTTP' if stdio else 'stdio'} server has {key}; this one is "
        f"{'stdio (it has command)' if stdio else 'Streamable HTTP (it has url)'}"
        for key in wrong
    ]
    declared = server.get("type")
    if declared in _TYPES and _TYPES[declared] not in server:
        problems.append(f"{where}.type: {declared!r} needs {_TYPES[declared]}; fix the type or the server")
    prefix = server.get("prefix")
    if isinstance(prefix, str) and PREFIX_SEPARATOR in prefix:
        problems.append(
            f"{where}.prefix: {prefix!r} contains {PREFIX_SEPARATOR!r}, the separator of prefix__tool; choose a "
            "prefix without it"
        )
    return problems


def _server_reference_problems(document: dict[str, Any]) -> list[str]:
    """A rule naming a server that is not configured would silently never match: a typo the operator must see."""
    servers = document.get("servers")
    if not isinstance(servers, dict):
        return []
    policy = document.get("policy")
    places = [
        ("rules", document.get("rules")),
        ("policy.tools", policy.get("tools") if isinstance(policy, dict) else None),
    ]
    problems = []
    for where, rules in places:
        for index, rule in enumerate(rules if isinstance(rules, list) else []):
            server = rule.get("server") if isinstance(rule, dict) else None
            if isinstance(server, str) and server not in servers:
                problems.append(
                    f"{where}[{index}].server: no server is named {server!r}; the servers are {', '.join(servers)}"
                )
    return problems


# --- pass 3: the packs ------------------------------------------------------------------------------------------


def _packs(entries: Any, base: Path) -> tuple[tuple[Path, ...], PackSet, list[str]]:
    """The pack files, the loaded packs and their problems. A pack file is named as the configuration writes it
    (`demo_pack.json: entries[1]...`), an inline pack by its place (`packs[2]: ...`). Entries of the wrong shape
    were already reported by the schema pass and are skipped here."""
    paths: list[Path] = []
    documents: list[tuple[str, Any]] = []
    problems: list[str] = []
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict):
            documents.append((f"packs[{index}]", entry))
            continue
        if not isinstance(entry, str) or not entry:
            continue
        if entry.startswith(builtin_packs.PREFIX):
            shipped = builtin_packs.builtin_pack(entry)
            if shipped is None:
                problems.append(
                    f"packs[{index}]: no pack {entry!r} ships with Semantic Saga; the shipped packs are "
                    f"{', '.join(builtin_packs.PREFIX + name for name in builtin_packs.names())}"
                )
                continue
            paths.append(shipped)
            documents.append((entry, read_strict_json(shipped, "compensation pack")))
            continue
        paths.append((base / entry).resolve())
        try:
            documents.append((entry, read_strict_json(paths[-1], "compensation pack")))
        except StrictJsonError as exc:
            problems.append(f"packs[{index}]: {exc}")
    try:
        packs = load_packs((), documents)
    except PackError as exc:
        return tuple(paths), PackSet(), problems + exc.problems
    return tuple(paths), packs, problems


# --- building the values ----------------------------------------------------------------------------------------


def _build(document: dict[str, Any], path: Path, pack_paths: tuple[Path, ...], packs: PackSet) -> ProxyConfig:
    ledger = document.get("ledger", {})
    notes: tuple[str, ...] = ()
    if "path" in ledger:
        notes = (
            f"ledger.path ({ledger['path']!r}) is ignored: every session is recorded in the Semantic Saga database "
            "as a saga with its audit chain. Remove the key to silence this note.",
        )
    notes += _self_declared_clients(document.get("policy", {}).get("tools", []))
    return ProxyConfig(
        path=path,
        servers=tuple(_server(name, raw, path.parent) for name, raw in document["servers"].items()),
        rules=tuple(_class_rule(raw) for raw in document.get("rules", [])),
        gates=gate_policy(document.get("policy", {})),
        preview=document.get("preview", False),
        capture=document.get("capture", True),
        pack_paths=pack_paths,
        packs=packs,
        max_result_bytes=ledger.get("maxResultBytes", DEFAULT_MAX_RESULT_BYTES),
        notes=notes,
    )


def _server(name: str, raw: Mapping[str, Any], base: Path) -> ServerSpec:
    call_timeout = raw["timeoutMs"] / 1000 if "timeoutMs" in raw else None
    connect_timeout = raw["connectTimeoutMs"] / 1000 if "connectTimeoutMs" in raw else None
    if "url" in raw:
        return ServerSpec(
            name=name,
            transport="streamable_http",
            url=raw["url"],
            headers=dict(raw.get("headers", {})),
            prefix=raw.get("prefix", ""),
            call_timeout_seconds=call_timeout,
            connect_timeout_seconds=connect_timeout,
            **_traffic(raw),
            trust=raw.get("trust", ""),
        )
    return ServerSpec(
        name=name,
        transport="stdio",
        command=raw["command"],
        args=tuple(raw.get("args", ())),
        env=dict(raw.get("env", {})),
        cwd=(base / raw["cwd"]).resolve() if "cwd" in raw else None,
        prefix=raw.get("prefix", ""),
        call_timeout_seconds=call_timeout,
        connect_timeout_seconds=connect_timeout,
        **_traffic(raw),
        trust=raw.get("trust", ""),
    )


def _traffic(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What a server may send the proxy on its own: its notification rate (a burst of twice the rate unless said)
    and whether its elicitation reaches the agent (sagas.protocols.proxy.floods and .inbound)."""
    per_second = raw.get("notificationsPerSecond", DEFAULT_PER_SECOND)
    return {
        "notifications_per_second": float(per_second),
        "notification_burst": int(raw.get("notificationBurst", 2 * per_second)),
        "elicitation": raw.get("elicitation", "relay"),
    }


def _self_declared_clients(rules: list[Mapping[str, Any]]) -> tuple[str, ...]:
    """A gate rule that loosens anything for a `client` trusts a name the client gives itself (MCP clientInfo):
    any client may claim it. Said once at start, so the operator can scope it otherwise."""
    notes = []
    for index, rule in enumerate(rules):
        approver = rule.get("approver", "operators") if isinstance(rule, Mapping) else "operators"
        if not isinstance(rule, Mapping) or not rule.get("client"):
            continue
        if rule.get("action") == "allow" or approver != "operators":
            notes.append(
                f"policy.tools[{index}] loosens the gate for client {rule['client']!r} (action {rule['action']}, "
                f"approver {approver}), but a client names itself: any client may claim that name. Use `client` only "
                "to tighten gates; to loosen one, scope the rule by tenant (or serve that client from its own proxy)."
            )
    return tuple(notes)


def _class_rule(raw: Mapping[str, Any]) -> ClassRule:
    return ClassRule(
        tool=raw["tool"], effect_class=raw["class"], server=raw.get("server", ""), reason=raw.get("reason", "")
    )
