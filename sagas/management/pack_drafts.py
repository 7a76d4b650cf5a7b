"""`semantic-saga packs draft --config FILE SERVER [--out FILE]`: a draft compensation pack for one server's tools
(registry.pack_draft), printed as JSON (or written to --out) for an operator to finish, and on stderr the tools it
could not pair with the class the proxy gives them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import anyio
from django.core.management.base import BaseCommand, CommandError

from registry.pack_draft import draft_pack
from sagas.management.server_tools import list_server_tools
from sagas.protocols.proxy.downstream import Timing
from sagas.protocols.proxy.specs import ProxyConfig


def write_draft(command: BaseCommand, config: ProxyConfig, server: str | None, out: str | None, timing: Timing) -> None:
    names = [spec.name for spec in config.servers]
    spec = next((spec for spec in config.servers if spec.name == server), None)
    if spec is None:
        raise CommandError(
            f"Name the server to draft for: `packs draft --config FILE SERVER`, SERVER one of {', '.join(names)}."
            if not server
            else f"{config.path} has no server {server!r}; its servers are {', '.join(names)}."
        )
    listed = anyio.run(list_server_tools, dataclasses.replace(config, servers=(spec,)), timing)[0]
    if listed.tools is None:
        problem = listed.status.problem or "it did not answer"
        raise CommandError(f"Server {spec.name!r} could not be listed ({problem}); start it, then draft again.")
    tools = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed.tools]
    draft = draft_pack(spec.name, tools)
    text = json.dumps(draft.pack, indent=2, ensure_ascii=False) + "\n"
    if out:
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as error:
            raise CommandError(
                f"Cannot write {out} ({error.strerror}): name a file in a directory that exists."
            ) from None
        command.stderr.write(f"wrote {out}: {len(draft.pack['entries'])} drafted entr(y/ies)")
    else:
        command.stdout.write(text, ending="")
    for tool, effect_class, why in draft.unpaired:
        command.stderr.write(f"no pair for {tool} ({effect_class}: {why}): add an inverse, or a class and reason")
