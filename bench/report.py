"""The one table a run prints, and its JSON form."""

from __future__ import annotations

from bench.harness import Row

HEADER = ("", "measure", "value", "repeated", "unit", "goal", "met", "SQLite", "/ SQLite", "note")


def _number(value: float | None) -> str:
    if value is None:
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _cells(row: Row) -> tuple[str, ...]:
    goal = "" if row.goal is None else f"{row.goal[0]} {_number(row.goal[1])}"
    met = {None: "", True: "yes", False: "NO"}[row.met]
    ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
    baseline = _number(row.baseline)
    repeated = _number(row.repeated)
    return (
        row.workload,
        row.name,
        _number(row.value),
        repeated,
        row.unit,
        goal,
        met,
        baseline,
        ratio,
        row.note or "",
    )


def table(rows: list[Row]) -> str:
    """Aligned plain text; a row without a figure shows its reason in place of the figures."""
    cells = [HEADER] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADER))]
    right = {2, 3, 7, 8}  # numbers
    lines = []
    for row, line in zip([None, *rows], cells, strict=True):
        if row is not None and row.error is not None:
            lines.append(f"{line[0]:<{widths[0]}}  {line[1]:<{widths[1]}}  {row.error}")
            continue
        lines.append(
            "  ".join(
                f"{cell:>{width}}" if i in right else f"{cell:<{width}}"
                for i, (cell, width) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
        )
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
