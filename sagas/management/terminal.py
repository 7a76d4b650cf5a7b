"""Output of the operator's terminal commands (packs, ledger, status, undo): aligned tables and colour.

Colour is used only when the stream is a terminal and `NO_COLOR` is unset or empty (https://no-color.org), so a
pipe, a file or a test's buffer gets plain text; `FORCE_COLOR` (set, not 0) asks for colour anyway, unless `NO_COLOR`
says otherwise. Cells are padded before they are coloured: escape codes
never disturb the alignment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

_CODES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}
# How each effect class and step status is shown (only on a colour terminal).
CLASS_STYLES = {"read": "dim", "R": "green", "C": "yellow", "I": "red", "unknown": "magenta"}
STATUS_STYLES = {
    "COMPLETED": "green",
    "COMPENSATED": "cyan",
    "DRY": "magenta",
    "EXECUTING": "yellow",
    "COMPENSATING": "yellow",
    "FAILED": "red",
    "COMPENSATION_FAILED": "red",
    "BLOCKED": "red",
    "REFUSED": "red",
    "HELD": "yellow",
    "APPROVED": "yellow",
}


def colour_enabled(stream: Any) -> bool:
    """NO_COLOR (non-empty) wins; then FORCE_COLOR (non-empty, not 0), as Sagaz honours it; then a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Paint:
    """`paint(text, "red")` is the text in red on a colour terminal, the text itself everywhere else."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: Any) -> Paint:
        return cls(colour_enabled(stream))

    def __call__(self, text: str, style: str | None) -> str:
        if not self.enabled or not style or not text:
            return text
        codes = ";".join(_CODES[part] for part in style.split("+"))
        return f"\033[{codes}m{text}\033[0m"


Column = tuple[str, str]  # (header, "<" or ">" alignment)
Styler = Callable[[int, str], str | None]  # (column index, cell) -> style


def table(columns: Sequence[Column], rows: Sequence[Sequence[str]], paint: Paint, style: Styler | None = None) -> str:
    """Headers, a rule of `─` under each and the rows, columns two spaces apart; the last column is not padded."""
    widths = [max([len(header), *(len(row[index]) for row in rows)]) for index, (header, _) in enumerate(columns)]

    def line(cells: Sequence[str], styles: Sequence[str | None]) -> str:
        parts = []
        for index, (cell, (_, align), width) in enumerate(zip(cells, columns, widths, strict=True)):
            last = index == len(columns) - 1
            padded = cell if last and align == "<" else (cell.ljust(width) if align == "<" else cell.rjust(width))
            parts.append(paint(padded, styles[index]))
        return "  ".join(parts).rstrip()

    out = [line([header for header, _ in columns], ["bold"] * len(columns))]
    out.append(line(["─" * width for width in widths], ["dim"] * len(columns)))
    for row in rows:
        out.append(line(row, [style(index, cell) if style else None for index, cell in enumerate(row)]))
    return "\n".join(out)
