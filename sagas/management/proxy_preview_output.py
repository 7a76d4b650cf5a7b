"""`semantic-saga preview_report` for a proxy session run dry: the Sagaz classes with the gates the calls would have
met, the dry calls one a line, and what an undo would have done (sagas.selectors.proxy_preview_reports)."""

from __future__ import annotations

from typing import Any

from sagas.management.terminal import CLASS_STYLES, Paint, table

GATE_STYLES = {"allow": "green", "confirm": "yellow", "block": "red"}
GROUP_COLUMNS = [("class", "<"), ("calls", ">"), ("allow", ">"), ("confirm", ">"), ("block", ">"), ("tools", "<")]
ITEM_COLUMNS = [
    ("seq", ">"),
    ("tool", "<"),
    ("server", "<"),
    ("class", "<"),
    ("gate", "<"),
    ("outside preview", "<"),
    ("why", "<"),
]
PLAN_COLUMNS = [("seq", ">"), ("tool", "<"), ("server", "<"), ("class", "<"), ("undo", "<"), ("what", "<")]
UNDO_STYLES = {"inverse": "green", "decision": "yellow", "no way back": "red"}


def proxy_report_lines(report: dict[str, Any], paint: Paint) -> list[str]:
    lines = [
        paint(f"preview report: session {report['saga_id']}", "bold") + f"  ({report['status']}, proxy preview)",
        report["summary"],
        "",
        paint("what would have happened", "bold"),
        table(GROUP_COLUMNS, [_group_cells(g) for g in report["classes"]], paint, _group_style),
    ]
    if report["items"]:
        lines += ["", table(ITEM_COLUMNS, [_item_cells(i) for i in report["items"]], paint, _item_style)]
    if report["refused"]:
        lines += ["", paint("refused (nothing was sent)", "bold")]
        lines += [f"  {r['sequence']:>3}  {r['tool']}  {r['code']}: {r['why']}" for r in report["refused"]]
    lines += ["", paint("compensation plan (newest first, had the dry calls run and been undone)", "bold")]
    plan = report["compensation_plan"]
    lines.append(table(PLAN_COLUMNS, [_plan_cells(e) for e in plan], paint, _plan_style) if plan else "  nothing")
    budget, audit = report["budget_impact"], report["audit"]
    lines += [
        "",
        f"budget impact: {budget['steps']} call(s), {budget['risk_units']} risk unit(s)",
        f"audit chain: {'valid' if audit['valid'] else 'BROKEN'} ({audit['events_checked']} events)",
    ]
    return lines


def _group_cells(group: dict[str, Any]) -> list[str]:
    tools = ", ".join(f"{tool} x{n}" if n > 1 else tool for tool, n in group["calls_by_tool"].items())
    gates = group["gates"]
    executed = " (executed)" if group["executed"] else ""
    return [group["class"], str(group["count"]), *(str(gates[g]) for g in GATE_STYLES), tools + executed]


def _group_style(column: int, cell: str) -> str | None:
    if column == 0:
        return CLASS_STYLES.get(cell.strip())
    if 2 <= column <= 4 and cell.strip() != "0":
        return list(GATE_STYLES.values())[column - 2]
    return None


def _item_cells(item: dict[str, Any]) -> list[str]:
    return [
        str(item["sequence"]),
        item["tool"],
        item["server"],
        item["effect_class"],
        item["would_gate"],
        item["outside_preview"],
        item["why"] or "-",
    ]


def _item_style(column: int, cell: str) -> str | None:
    if column == 3:
        return CLASS_STYLES.get(cell.strip())
    if column == 4:
        return GATE_STYLES.get(cell.strip())
    return None


def _plan_cells(entry: dict[str, Any]) -> list[str]:
    cells = [str(entry["sequence"]), entry["tool"], entry["server"], entry["effect_class"], entry["undo"]]
    return [*cells, entry["compensation"]]


def _plan_style(column: int, cell: str) -> str | None:
    if column == 3:
        return CLASS_STYLES.get(cell.strip())
    return UNDO_STYLES.get(cell.strip()) if column == 4 else None
