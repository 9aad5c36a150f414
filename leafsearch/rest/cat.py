"""`_cat` tables: aligned text for people (`v`, `h`, `s`, `bytes`, `help`) or rows for programs
(`format=json`, or `format=yaml`, which the dispatcher writes as YAML).

Rendering follows Elasticsearch's RestTable: columns separated by one space, numeric columns
right-aligned (their headers too), the last column not padded, sizes in the human form `4.5kb`
truncated to one decimal unless `bytes` names a unit.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

from leafsearch.common.settings import human_size
from leafsearch.errors import IllegalArgument
from leafsearch.rest.exchange import RestRequest, RestResponse

_BYTES_PARAM = {"b": 1, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40, "pb": 1 << 50}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    description: str
    aliases: tuple[str, ...] = ()
    right: bool = False
    size: bool = False
    default: bool = True


def _cell(value: Any, column: Column, bytes_unit: str | None) -> str:
    if value is None:
        return ""
    if column.size:
        return str(value // _BYTES_PARAM[bytes_unit]) if bytes_unit else human_size(int(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _select(columns: list[Column], h: str | None) -> list[Column]:
    if not h:
        return [c for c in columns if c.default]
    chosen: list[Column] = []
    for wanted in h.split(","):
        wanted = wanted.strip()
        for column in columns:
            names = (column.name, *column.aliases)
            if any(fnmatch.fnmatchcase(n, wanted) for n in names) and column not in chosen:
                chosen.append(column)
    return chosen


def _sort(rows: list[dict[str, Any]], columns: list[Column], s: str | None) -> list[dict[str, Any]]:
    if not s:
        return rows
    for spec in reversed(s.split(",")):
        name, _, order = spec.strip().partition(":")
        column = next((c for c in columns if name == c.name or name in c.aliases), None)
        if column is None:
            raise IllegalArgument(f"Unable to sort by unknown sort key `{name}`")
        rows = sorted(
            rows, key=lambda r, k=column.name: (r.get(k) is None, r.get(k)), reverse=order == "desc"
        )
    return rows


def render_table(req: RestRequest, columns: list[Column], rows: list[dict[str, Any]]) -> RestResponse:
    bytes_unit = req.param("bytes")
    if bytes_unit is not None and bytes_unit not in _BYTES_PARAM:
        raise IllegalArgument(f"Unknown value for bytes: [{bytes_unit}]")
    if req.flag("help"):
        width = max(len(c.name) for c in columns)
        return RestResponse(
            text="".join(f"{c.name:<{width}} | {','.join(c.aliases):<8} | {c.description}\n" for c in columns)
        )
    selected = _select(columns, req.param("h"))
    rows = _sort(rows, columns, req.param("s"))
    cells = [[_cell(row.get(c.name), c, bytes_unit) for c in selected] for row in rows]
    if req.param("format") in ("json", "yaml"):  # the dispatcher writes the rows as YAML
        return RestResponse([dict(zip((c.name for c in selected), line, strict=True)) for line in cells])
    table = ([[c.name for c in selected]] if req.flag("v") else []) + cells
    if not selected:
        return RestResponse(text="\n" * len(table))
    widths = [max(len(line[i]) for line in table) for i in range(len(selected))] if table else []
    out = []
    for line in table:
        parts = []
        for i, (value, column) in enumerate(zip(line, selected, strict=True)):
            last = i == len(selected) - 1
            if column.right:
                parts.append(value.rjust(widths[i]))
            else:
                parts.append(value if last else value.ljust(widths[i]))
        out.append(" ".join(parts) + "\n")
    return RestResponse(text="".join(out))
