"""What the proxy believes about a downstream tool: its class and gate, decided so that neither the agent nor the
server can lower them.

The class comes from the cascade of registry.tool_classes (rules, a declared inverse, annotations that never beat
the name, the name). The definition is checked against its pin (registry.tool_pins: each server's first listing
trusted by its trust mode, `first-use` or `review`, and nothing listed later trusted before an operator accepts
it): the proxy records what each server lists whenever its tool list is read (at start, on list_changed, on
reconnect, and before a non-read call when the listing is older than SAGA_PROXY_RELIST_SECONDS), and keeps each
tool's state.

A tool whose listed definition is not the pinned one (changed), or that nothing is pinned for (pending), never
gets a lower class or gate than its pin would: its class is the more guarded of the two definitions', and its gate
is at least `confirm`, with the changes written for the person who decides. Only an operator's accept re-pins it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

import anyio
import mcp.types as types
from django.conf import settings

from governance.policy.gates import GateDecision, GatePolicy, gate_for
from registry.packs import PackCall, PackEntry, PackSet
from registry.tool_classes import Classification, ClassRule, EffectClass, classify
from registry.tool_pins import PinState, observe, recheck, tool_definition
from sagas.protocols.proxy.catalog import Catalog, definition_hash
from sagas.protocols.proxy.journal import Journal
from sagas.protocols.proxy.specs import ProxyConfig

logger = logging.getLogger("sagas.protocols.proxy")

# From least to most guarded: a definition change may raise a class along this order, never lower it.
GUARD_ORDER = ("read", "R", "C", "unknown", "I")
UNTRUSTED = PinState("pending", "", None, ("the proxy has not yet recorded this tool's definition",))
UNCHECKED = "the server lists a definition the proxy has not checked against the pin yet"


def trust_modes(config: ProxyConfig) -> dict[str, str]:
    """How each server's first listing is trusted (ProxyConfig.trust_for, with the deployment's SAGA_PROXY_TRUST)."""
    return {spec.name: config.trust_for(spec, settings.SAGA_PROXY_TRUST) for spec in config.servers}


class ToolTrust:
    def __init__(
        self,
        journal: Journal,
        rules: tuple[ClassRule, ...],
        packs: PackSet,
        gates: GatePolicy,
        trust: Mapping[str, str] | None = None,
    ) -> None:
        self.journal = journal
        self.trust = dict(trust or {})  # server -> its trust mode; a server not named is trusted on first use
        self.rules = rules
        self.packs = packs
        self.gates = gates
        # (server, tool) -> (the definition hash the state was decided for, the state)
        self.states: dict[tuple[str, str], tuple[str, PinState]] = {}
        # server -> the tools it lists now: a pack entry whose inverse or capture tool is not among them is unusable
        self.offered: dict[str, frozenset[str]] = {}
        self._warned: set[str] = set()
        self._observing = anyio.Lock()

    async def observe(self, catalog: Catalog) -> None:
        """Record the definitions every connected server lists now and keep each tool's pin state. One at a time, in
        the order asked (the journal has several threads): a server's first listing is recorded before the next."""
        async with self._observing:
            await self._observe(catalog)

    async def _observe(self, catalog: Catalog) -> None:
        # Every server listed, those that list nothing included: a first listing is the first use even when empty.
        by_server: dict[str, dict[str, dict[str, Any]]] = {listing.spec.name: {} for listing in catalog.listings}
        hashes: dict[tuple[str, str], str] = {}
        for exposed in catalog.tools.values():
            dumped = exposed.tool.model_dump(by_alias=True, exclude_none=True, mode="json")
            by_server.setdefault(exposed.server, {})[exposed.tool.name] = tool_definition(dumped)
            hashes[(exposed.server, exposed.tool.name)] = exposed.definition_hash
        for server, listed in by_server.items():
            others = frozenset(name for other, tools in by_server.items() if other != server for name in tools)
            mode = self.trust.get(server, "first-use")
            states = await self.journal.run(functools.partial(observe, server, listed, trust=mode, other_tools=others))
            self.states.update({(server, name): (hashes[(server, name)], state) for name, state in states.items()})
        self.offered = {listing.spec.name: frozenset(t.name for t in listing.tools) for listing in catalog.listings}
        self._warn_unusable_packs()

    def _warn_unusable_packs(self) -> None:
        """Say once per process each pack entry the servers listed now cannot use (registry.packs PackSet.unusable)."""
        for warning in self.packs.unusable(self.offered):
            if warning not in self._warned:
                self._warned.add(warning)
                logger.warning("compensation pack: %s", warning)

    def pack_entry(self, server: str, tool: str) -> PackEntry | None:
        """The pack entry that undoes `tool` on `server`, if the server offers the tools it calls."""
        return self.packs.usable_for(server, tool, self.offered.get(server))

    async def recheck(self, server: str, tool: types.Tool) -> None:
        """Read an untrusted tool's pin again (an operator may have accepted its definition since, in any process,
        or the state kept was decided for another definition); a trusted one costs nothing."""
        if self.state(server, tool).trusted:
            return
        listed = tool_definition(tool.model_dump(by_alias=True, exclude_none=True, mode="json"))
        state = await self.journal.run(functools.partial(recheck, server, tool.name, listed))
        if state is not None:
            self.states[(server, tool.name)] = (definition_hash(tool), state)

    def state(self, server: str, tool: types.Tool) -> PinState:
        """The pin state of `tool` as listed now. One not recorded yet, or recorded for another definition (the
        catalog changed before its definitions were recorded), is not trusted."""
        kept = self.states.get((server, tool.name))
        if kept is None:
            return UNTRUSTED
        listed_hash, state = kept
        if listed_hash == definition_hash(tool):
            return state
        return PinState("changed", state.pinned_hash, state.pinned_definition, (UNCHECKED,))

    def classify(self, server: str, tool: types.Tool) -> Classification:
        """The class of a call of `tool`: the cascade on its listed definition, raised to its pinned definition's
        class when the two differ."""
        found = self._cascade(server, tool.name, tool.annotations)
        state = self.state(server, tool)
        if state.pinned_definition is None or state.trusted:
            return found
        before = types.Tool.model_validate(state.pinned_definition)
        other = self._cascade(server, before.name, before.annotations)
        if GUARD_ORDER.index(other.effect_class) > GUARD_ORDER.index(found.effect_class):
            return Classification(
                other.effect_class,
                other.source,
                f"{other.reason} (the pinned definition; the server now lists another, which may not lower the class)",
            )
        return found

    def gate(self, server: str, tool: types.Tool, effect_class: str, tenant: str, client: str) -> GateDecision:
        """The gate for the call: the configured one, and at least `confirm` for a tool whose definition is not its
        pin (a block or hide stays)."""
        gate = gate_for(effect_class, tool.name, server, tenant, client, self.gates)
        state = self.state(server, tool)
        if state.trusted or gate.action in ("block", "hide", "confirm"):
            return gate
        if state.status == "changed":
            why = "its definition is not the one this deployment pinned"
        else:
            why = f"nothing is pinned for it yet ({state.changes[0] if state.changes else 'a new tool'})"
        reason = (
            f"{why}: a person confirms each call until an operator accepts the definition (semantic-saga pins "
            f"accept {server}/{tool.name}); without the change its gate would be {gate.action}"
        )
        return GateDecision("confirm", "definition_changed", reason, gate.approver)

    def inverse_gates(
        self, server: str, entry: PackEntry | None, tenant: str, client: str, listed: Mapping[str, types.Tool]
    ) -> dict[str, dict[str, str]]:
        """The gate each tool `entry` may send as an inverse would get as a call of its own (its class and pin as
        listed now, this tenant and client): an undo is governed like the calls it sends. A tool the server does
        not list is left out (the entry is then unusable anyway)."""
        if entry is None:
            return {}
        tools = [entry.inverse.tool, *(b.tool for b in entry.branches.values() if isinstance(b, PackCall))]
        gates = {}
        for name in dict.fromkeys(tools):
            if (tool := listed.get(name)) is None:
                continue
            effect_class = self.classify(server, tool).effect_class
            decided = self.gate(server, tool, effect_class, tenant, client)
            gates[name] = {"gate": decided.action, "reason": decided.reason, "class": effect_class}
        return gates

    def inverse_source(self, server: str, tool: str) -> str:
        entry = self.pack_entry(server, tool)
        return f'pack "{entry.pack}" ({entry.source})' if entry else ""

    def _cascade(self, server: str, name: str, annotations: types.ToolAnnotations | None) -> Classification:
        hints = annotations.model_dump(by_alias=True, exclude_none=True) if annotations else None
        entry = self.pack_entry(server, name)
        declared_class: tuple[EffectClass, str] | None = None
        if entry is not None and (guarded := entry.guarded_class()) is not None:
            # Some capture outcome has no inverse, and the gate decides before the capture runs.
            declared_class = (cast(EffectClass, guarded[0]), f'pack "{entry.pack}": {guarded[1]}')
        elif entry is None and (declared := self.packs.declared_for(server, name)) is not None:
            declared_class = (
                cast(EffectClass, declared.effect_class),
                f'pack "{declared.pack}": no inverse: {declared.reason}',
            )
        return classify(
            name,
            server,
            hints,
            self.rules,
            entry is not None,
            inverse_source=self.inverse_source(server, name),
            declared_class=declared_class,
        )


def listening(
    trust: ToolTrust, catalog: Callable[[], Catalog], first: Callable[[], Catalog | None] | None = None
) -> Callable[[frozenset[str]], Any]:
    """The DownstreamManager listener that records what is listed whenever the tools change. The first time, the
    servers' first listings (`first`) are recorded before the catalog as it is now: a server listed again before the
    proxy started (it said list_changed at once) has its first listing, not its second, as its first use."""
    pending_first = [first] if first is not None else []

    async def heard(kinds: frozenset[str]) -> None:
        if "tools" not in kinds:
            return
        if pending_first and (firsts := pending_first.pop()()) is not None:
            await trust.observe(firsts)
        await trust.observe(catalog())

    return heard
