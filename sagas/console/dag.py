"""The workflow DAG as a server-rendered inline SVG: no JavaScript library and nothing fetched from the internet.

Layout is the classic layered drawing, kept small: each node's layer is the length of the longest dependency path
leading to it (so every edge points right), nodes inside a layer are ordered by the mean row of their
dependencies (one barycenter pass, which removes most crossings of typical fan-out/fan-in sagas), and edges are
cubic curves with an arrow head. All text is escaped here because the result is marked safe for the template.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from sagas.states import NodeStatus as N

# Geometry in SVG user units (pixels at 100% zoom). Boxes fit two lines of about 26 characters; the column gap
# leaves room for the arrow curves, the row gap keeps neighbouring boxes apart without wasting height.
BOX_WIDTH = 190
BOX_HEIGHT = 46
COLUMN_GAP = 56
ROW_GAP = 16
MARGIN = 10
MAX_LABEL_CHARS = 26
# Past this many nodes a picture stops being readable (and the page heavy): the tables below still list them all.
MAX_DRAWN_NODES = 400

# Fill and stroke per node status. Light fills with dark text stay legible in the admin's light and dark themes.
STATUS_COLOURS: dict[str, tuple[str, str]] = {
    N.WAITING_DEPENDENCY: ("#e5e7eb", "#6b7280"),
    N.WAITING_APPROVAL: ("#fde68a", "#b45309"),
    N.READY: ("#bfdbfe", "#1d4ed8"),
    N.EXECUTING: ("#c7d2fe", "#4338ca"),
    N.COMPLETED: ("#bbf7d0", "#15803d"),
    N.FAILED: ("#fecaca", "#b91c1c"),
    N.REJECTED: ("#fbcfe8", "#9d174d"),
    N.BLOCKED: ("#d1d5db", "#374151"),
    N.COMPENSATED: ("#99f6e4", "#0f766e"),
    N.COMPENSATION_FAILED: ("#fca5a5", "#7f1d1d"),
}
UNKNOWN_COLOURS = ("#ffffff", "#000000")


@dataclass(frozen=True)
class DagNode:
    id: str
    key: str | None
    action: str
    version: str
    status: str
    depends_on: tuple[str, ...] = ()


@dataclass
class Placed:
    node: DagNode
    layer: int
    row: int = 0
    x: float = 0.0
    y: float = 0.0


@dataclass
class Layout:
    placed: dict[str, Placed] = field(default_factory=dict)
    width: float = 0.0
    height: float = 0.0


def nodes_from_timeline(nodes: Iterable[dict[str, Any]]) -> list[DagNode]:
    """DagNodes from the payload-free node dicts of selectors.saga_timeline (planning order)."""
    return [
        DagNode(
            id=str(n["id"]),
            key=str(n["key"]) if n.get("key") else None,
            action=str(n["action"]),
            version=str(n["action_version"]),
            status=str(n["status"]),
            depends_on=tuple(str(d) for d in n.get("depends_on") or ()),
        )
        for n in nodes
    ]


def _layers(nodes: Sequence[DagNode]) -> dict[str, int]:
    """Longest-path layering. Dependencies are planned before their dependants, but this does not rely on it."""
    by_id = {n.id: n for n in nodes}
    layer: dict[str, int] = {}

    def visit(node_id: str, trail: frozenset[str]) -> int:
        if node_id in layer:
            return layer[node_id]
        deps = [d for d in by_id[node_id].depends_on if d in by_id and d not in trail]
        layer[node_id] = 1 + max((visit(d, trail | {node_id}) for d in deps), default=-1)
        return layer[node_id]

    for node in nodes:
        visit(node.id, frozenset())
    return layer


def layout(nodes: Sequence[DagNode]) -> Layout:
    """Place every node: column = layer, row = barycenter order within the layer."""
    result = Layout()
    if not nodes:
        return result
    layers = _layers(nodes)
    columns: dict[int, list[Placed]] = {}
    for node in nodes:  # planning order is the tie-breaker, so the picture is stable between page loads
        columns.setdefault(layers[node.id], []).append(Placed(node, layers[node.id]))
    for index in sorted(columns):
        column = columns[index]
        if index > 0:
            column.sort(key=lambda p: _barycenter(p, result.placed))
        for row, placed in enumerate(column):
            placed.row = row
            result.placed[placed.node.id] = placed
    tallest = max(len(c) for c in columns.values())
    for index, column in columns.items():
        offset = (tallest - len(column)) * (BOX_HEIGHT + ROW_GAP) / 2  # centre short columns vertically
        for placed in column:
            placed.x = MARGIN + index * (BOX_WIDTH + COLUMN_GAP)
            placed.y = MARGIN + offset + placed.row * (BOX_HEIGHT + ROW_GAP)
    result.width = 2 * MARGIN + len(columns) * (BOX_WIDTH + COLUMN_GAP) - COLUMN_GAP
    result.height = 2 * MARGIN + tallest * (BOX_HEIGHT + ROW_GAP) - ROW_GAP
    return result


def _barycenter(placed: Placed, done: dict[str, Placed]) -> float:
    rows = [done[d].row for d in placed.node.depends_on if d in done]
    return sum(rows) / len(rows) if rows else 0.0


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "\u2026"


def _edge(source: Placed, target: Placed) -> str:
    x1, y1 = source.x + BOX_WIDTH, source.y + BOX_HEIGHT / 2
    x2, y2 = target.x - 2, target.y + BOX_HEIGHT / 2  # stop short so the arrow head touches the box edge
    bend = COLUMN_GAP / 2
    return (
        f'<path class="dag-edge" data-from="{escape(source.node.id)}" data-to="{escape(target.node.id)}" '
        f'd="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" '
        'fill="none" stroke="#6b7280" stroke-width="1.4" marker-end="url(#dag-arrow)"/>'
    )


def _box(placed: Placed) -> str:
    node = placed.node
    fill, stroke = STATUS_COLOURS.get(node.status, UNKNOWN_COLOURS)
    title = f"{node.key or node.id}\n{node.action}@{node.version}\n{node.status}\nnode {node.id}"
    heading = node.key or f"node {node.id[:8]}"
    width = "2.5" if node.status in (N.FAILED, N.COMPENSATION_FAILED, N.WAITING_APPROVAL) else "1.5"
    return (
        f'<g class="dag-node" id="dag-node-{escape(node.id)}" data-status="{escape(node.status)}">'
        f"<title>{escape(title)}</title>"
        f'<rect x="{placed.x:.1f}" y="{placed.y:.1f}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="6" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="{width}"/>'
        f'<text x="{placed.x + 8:.1f}" y="{placed.y + 19:.1f}" font-weight="bold" fill="#111827">'
        f"{escape(_clip(heading))}</text>"
        f'<text x="{placed.x + 8:.1f}" y="{placed.y + 36:.1f}" fill="#374151">'
        f"{escape(_clip(f'{node.action}@{node.version}'))}</text>"
        "</g>"
    )


def render_svg(nodes: Sequence[DagNode], *, label: str = "Workflow DAG") -> SafeString:
    """The DAG as one <svg> element (empty string when there is nothing to draw)."""
    if not nodes or len(nodes) > MAX_DRAWN_NODES:
        return mark_safe("")
    drawn = layout(nodes)
    edges = [
        _edge(drawn.placed[dep], placed)
        for placed in drawn.placed.values()
        for dep in placed.node.depends_on
        if dep in drawn.placed
    ]
    boxes = [_box(placed) for placed in drawn.placed.values()]
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="saga-dag" role="img" aria-label="{escape(label)}" '
        f'width="{drawn.width:.0f}" height="{drawn.height:.0f}" viewBox="0 0 {drawn.width:.0f} {drawn.height:.0f}" '
        'font-family="sans-serif" font-size="12">'
        '<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/></marker></defs>'
        + "".join(edges)
        + "".join(boxes)
        + "</svg>"
    )
    return mark_safe(svg)  # every interpolated text above is escaped


def legend() -> list[dict[str, str]]:
    """Status, fill and stroke for the legend beside the picture, in lifecycle order."""
    return [{"status": status, "fill": fill, "stroke": stroke} for status, (fill, stroke) in STATUS_COLOURS.items()]
