"""`semantic-saga packs --config FILE`: the compensation packs a proxy configuration loads, per downstream server
the tools no pack covers (each with the class the proxy gives it, so the ones worth a pack stand out), and a warning
per pack entry the servers cannot use (no tool it matches, or no capture or inverse tool to call), as the proxy
says at start.

The servers are connected as the proxy would connect them (one DownstreamManager each, so a name collision
between two servers does not hide either's tools); a server that does not answer is reported as such, and the
command then exits with status 1, because which of its tools lack a pack is not known.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, cast

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry.packs import PackCall, PackEntry, PackNoInverse
from registry.tool_classes import EffectClass, classify
from sagas.management.pack_drafts import write_draft
from sagas.management.server_tools import ServerTools, list_server_tools
from sagas.management.terminal import CLASS_STYLES, Paint, table
from sagas.protocols.proxy.config import ProxyConfigError, load_proxy_config
from sagas.protocols.proxy.downstream import Timing
from sagas.protocols.proxy.specs import ProxyConfig


class Command(BaseCommand):
    help = (
        "List the compensation packs a proxy configuration loads and, per downstream server, the tools no pack "
        "covers. Exits with status 1 when a server could not be listed."
    )
    requires_system_checks: list[str] = []  # reads a file and the downstreams; no database

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # `packs draft --config FILE SERVER`: positionals on both sides of an option, which plain parse_args refuses
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.parse_args = parser.parse_intermixed_args  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action",
            nargs="?",
            choices=["draft"],
            help="draft: print a draft pack for SERVER's tools, to finish by hand.",
        )
        parser.add_argument("server", nargs="?", help="With draft: the server of the configuration to draft for.")
        parser.add_argument("--out", help="With draft: write the draft to this file instead of printing it.")
        parser.add_argument("--config", required=True, help="The proxy configuration file (a sagaz.config.json works).")
        parser.add_argument(
            "--timeout", type=float, default=20.0, help="Seconds to wait for each server to connect and list (20)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = load_proxy_config(options["config"])
        except ProxyConfigError as problem:
            raise CommandError(problem.message) from None
        timeout = options["timeout"]
        timing = Timing(connect_timeout=timeout, list_timeout=timeout)
        if options["action"] == "draft":
            write_draft(self, config, options["server"], options["out"], timing)
            return
        # The proxy logs each connection at INFO; here only a problem is news (the report says the rest).
        logging.getLogger("sagas.protocols.proxy").setLevel(logging.WARNING)
        servers = anyio.run(list_server_tools, config, timing)
        paint = Paint.for_stream(self.stdout)
        self.stdout.write(self._packs(config, paint))
        for server in servers:
            self.stdout.write("")
            self.stdout.write(self._uncovered(config, server, paint))
        offered = {s.spec.name: [tool.name for tool in s.tools] for s in servers if s.tools is not None}
        if warnings := config.packs.unusable(offered):
            self.stdout.write("")
            self.stdout.write(
                paint(f"{len(warnings)} pack entr{'y' if len(warnings) == 1 else 'ies'} unusable", "yellow")
            )
            self.stdout.write("\n".join(f"  warning: {warning}" for warning in warnings))
        if any(server.tools is None for server in servers):
            sys.exit(1)

    def _packs(self, config: ProxyConfig, paint: Paint) -> str:
        packs = config.packs.packs
        heading = paint(f"{len(packs)} compensation pack(s)", "bold") + f" loaded by {config.path}"
        if not packs:
            return f"{heading}\nNo pack declares an inverse: no proxied tool is R, and undo has nothing to run."
        rows = [
            [entry.pack, entry.tool, entry.server or "any", *_calls(entry, config.capture)]
            for entry in config.packs.entries
        ]
        rows += [  # the tools a pack says have no inverse, with the class it gives them
            [declared.pack, declared.tool, declared.server or "any", "-", f"none: {declared.effect_class}"]
            for declared in config.packs.declarations
        ]
        columns = [("pack", "<"), ("tool", "<"), ("server", "<"), ("capture", "<"), ("inverse", "<")]
        return f"{heading}\n{table(columns, rows, paint)}"

    def _uncovered(self, config: ProxyConfig, server: ServerTools, paint: Paint) -> str:
        name = paint(server.spec.name, "bold")
        if server.tools is None:
            problem = server.status.problem or "it did not answer"
            return (
                f"{name}: {paint('DOWN', 'red')} ({problem}); its tools could not be listed, so which of them no pack "
                "covers is not known. Start the server (or fix its entry) and run this again."
            )
        names = [tool.name for tool in server.tools]
        uncovered = config.packs.uncovered(server.spec.name, names)
        summary = f"{name}: {len(names)} tool(s), {len(names) - len(uncovered)} covered by a pack"
        if not uncovered:
            return f"{summary}; every tool has an inverse."
        by_name = {tool.name: tool for tool in server.tools}
        rows = []
        for tool in uncovered:
            annotations = by_name[tool].annotations
            hints = annotations.model_dump(by_alias=True, exclude_none=True) if annotations else None
            declared = config.packs.declared_for(server.spec.name, tool)
            as_declared = (cast(EffectClass, declared.effect_class), declared.reason) if declared else None
            found = classify(tool, server.spec.name, hints, config.rules, False, declared_class=as_declared)
            rows.append([tool, found.effect_class, found.reason])
        columns = [("no pack covers", "<"), ("class", "<"), ("why", "<")]
        style = _class_style
        return f"{summary}:\n{table(columns, rows, paint, style)}"


def _calls(entry: PackEntry, capture_enabled: bool) -> list[str]:
    """The capture and inverse columns; with `"capture": false` an entry that needs a capture is off (as in
    PackSet.in_force)."""
    capture = entry.capture.tool if entry.capture else "-"
    in_force = capture_enabled or entry.capture is None
    if not in_force:
        return [capture, f"{entry.inverse.tool} (off: needs a capture, and capture is false)"]
    branches = [f"{BRANCH_WORDS[key]}: {_branch(branch)}" for key, branch in entry.branches.items()]
    return [capture, "; ".join([entry.inverse.tool, *branches])]


# How the inverse column names an entry's branches (registry.capture_outcomes).
BRANCH_WORDS = {"ifNotFound": "not found", "ifNoMatch": "no match", "ifCaptureFailed": "capture failed"}


def _branch(branch: PackCall | PackNoInverse) -> str:
    return branch.tool if isinstance(branch, PackCall) else f"none: {branch.effect_class}"


def _class_style(column: int, cell: str) -> str | None:
    return CLASS_STYLES.get(cell) if column == 1 else None
