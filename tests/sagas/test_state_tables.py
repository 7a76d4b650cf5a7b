"""The transition tables in sagas/states.py are the state machines docs/architecture.md section 3 documents.

The expected transitions are read from the page (one markdown table per machine, plus its "Starts in" and
"Terminal" line), so the page and the code cannot drift apart: a transition added to a table without its row
on the page, or documented without being allowed, fails here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import models

from sagas.states import (
    APPROVAL_TRANSITIONS,
    NODE_TRANSITIONS,
    SAGA_TRANSITIONS,
    STEP_TRANSITIONS,
    TERMINAL_APPROVAL,
    TERMINAL_NODE,
    TERMINAL_SAGA,
    TERMINAL_STEP,
    ApprovalStatus,
    NodeStatus,
    SagaStatus,
    StepStatus,
)

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
STATUS = re.compile(r"`([A-Z_]+)`")


@dataclass(frozen=True)
class DocumentedMachine:
    starts: frozenset[str]
    terminal: frozenset[str]
    transitions: frozenset[tuple[str, str]]


def _section_3() -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = text.index("## 3. State machines")
    return text[start : text.index("\n## 4.", start)]


def documented(machine: str) -> DocumentedMachine:
    """One machine's subsection: its "Starts in: ... Terminal: ..." line and its from | to | when rows."""
    parts = re.split(r"^### ", _section_3(), flags=re.MULTILINE)
    body = next(part for part in parts if part.startswith(machine + "\n"))
    line = re.search(r"^Starts in: (.+?)\. Terminal: (.+?)\.$", body, flags=re.MULTILINE)
    assert line is not None, f"docs/architecture.md section 3, {machine}: no 'Starts in: ... Terminal: ...' line"
    transitions = set()
    for row in re.findall(r"^\| (`.+?) \| (`.+?) \| .+ \|$", body, flags=re.MULTILINE):
        sources, targets = (STATUS.findall(cell) for cell in row)
        transitions |= {(source, target) for source in sources for target in targets}
    assert transitions, f"docs/architecture.md section 3, {machine}: no transition rows found"
    return DocumentedMachine(
        frozenset(STATUS.findall(line.group(1))), frozenset(STATUS.findall(line.group(2))), frozenset(transitions)
    )


@dataclass(frozen=True)
class Machine:
    name: str
    statuses: type[models.TextChoices]
    table: dict[str, frozenset[str]]
    terminal: frozenset[str]

    def pairs(self) -> set[tuple[str, str]]:
        return {(source, target) for source, targets in self.table.items() for target in targets}


MACHINES = [
    Machine("Saga", SagaStatus, SAGA_TRANSITIONS, TERMINAL_SAGA),
    Machine("Node", NodeStatus, NODE_TRANSITIONS, TERMINAL_NODE),
    Machine("Step", StepStatus, STEP_TRANSITIONS, TERMINAL_STEP),
    Machine("Approval", ApprovalStatus, APPROVAL_TRANSITIONS, TERMINAL_APPROVAL),
]


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_the_table_allows_exactly_the_documented_transitions(machine: Machine) -> None:
    doc = documented(machine.name)

    undocumented = machine.pairs() - doc.transitions
    not_allowed = doc.transitions - machine.pairs()

    assert not undocumented, f"allowed in sagas/states.py but not in docs/architecture.md: {sorted(undocumented)}"
    assert not not_allowed, f"documented in docs/architecture.md but not allowed by the table: {sorted(not_allowed)}"


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_the_table_has_a_row_for_every_status_and_names_no_other(machine: Machine) -> None:
    assert set(machine.table) == set(machine.statuses.values)
    named = {status for pair in documented(machine.name).transitions for status in pair}
    assert named <= set(machine.statuses.values), sorted(named - set(machine.statuses.values))


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_terminal_states_are_the_documented_ones_and_are_never_left(machine: Machine) -> None:
    assert machine.terminal == documented(machine.name).terminal
    for state in machine.terminal:
        assert machine.table[state] == frozenset(), f"{machine.name} {state} is terminal but can be left"


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_only_terminal_states_have_no_way_out(machine: Machine) -> None:
    dead_ends = {state for state, targets in machine.table.items() if not targets}

    assert dead_ends == set(machine.terminal)


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.name)
def test_every_status_is_reachable_from_a_documented_start(machine: Machine) -> None:
    # given the statuses a row is created in
    starts = documented(machine.name).starts
    assert starts <= set(machine.statuses.values)

    # when every allowed transition is followed from them
    reached, frontier = set(starts), list(starts)
    while frontier:
        for target in machine.table[frontier.pop()]:
            if target not in reached:
                reached.add(target)
                frontier.append(target)

    # then no status is unreachable
    assert reached == set(machine.statuses.values), sorted(set(machine.statuses.values) - reached)
