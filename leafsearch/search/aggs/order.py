"""Bucket order (`order` of terms and histograms): by count, by key, or by a sub-aggregation path.

Sorting is one `np.lexsort` over the rows of a parent bucket; sub-aggregation values come from
`Agg.sort_values`, so a path such as `filtered>stats.avg` is resolved by the aggregations on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from leafsearch.errors import AggregationExecution, ParsingError
from leafsearch.search.aggs.base import Agg, shard_failure
from leafsearch.search.aggs.grouping import Buckets, densify


@dataclass(frozen=True)
class OrderKey:
    kind: str  # "_count", "_key" or "path"
    asc: bool
    path: tuple[str, ...] = ()


_PATH_ELEMENT = re.compile(r"([^.\[\]]+)(?:\[([^\]]+)\]|\.(.+))?$")


def split_path(path: str) -> list[str]:
    """`a>b.avg` -> ["a", "b", "avg"]; `a>b[avg]` likewise."""
    out: list[str] = []
    for element in path.split(">"):
        match = _PATH_ELEMENT.match(element)
        if not match:
            raise shard_failure(AggregationExecution(f"Invalid path element [{element}] in path [{path}]"))
        out.append(match.group(1))
        key = match.group(2) or match.group(3)
        if key:
            out.append(key)
    return out


def parse_order(value: object, subs: list[Agg], default: list[OrderKey], tiebreak: bool) -> list[OrderKey]:
    """The `order` option; a key-ascending tie-breaker is added unless the order is already by key."""
    if value is None:
        return default
    items = value if isinstance(value, list) else [value]
    keys: list[OrderKey] = []
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            raise ParsingError("Unknown order specification [order]")
        ((name, direction),) = item.items()
        if direction not in ("asc", "desc"):
            raise ParsingError(f"Unknown order direction [{direction}]")
        asc = direction == "asc"
        if name in ("_count",):
            keys.append(OrderKey("_count", asc))
        elif name in ("_key", "_term", "_time"):
            keys.append(OrderKey("_key", asc))
        else:
            elements = split_path(name)
            if not any(s.name == elements[0] for s in subs):
                raise shard_failure(
                    AggregationExecution(
                        f"Invalid aggregator order path [{name}]. The provided aggregation [{elements[0]}] "
                        "either does not exist, or is a pipeline aggregation and cannot be used to sort the "
                        "buckets."
                    )
                )
            keys.append(OrderKey("path", asc, tuple(elements)))
    if tiebreak and keys[-1].kind != "_key":
        keys.append(OrderKey("_key", True))
    return keys


def path_values(subs: list[Agg], parts: dict, path: tuple[str, ...]) -> np.ndarray:
    head, *rest = path
    agg = next(s for s in subs if s.name == head)
    return np.asarray(agg.sort_values(parts[head], list(rest)), dtype=np.float64)


def sort_rows(
    part: Buckets,
    rows: np.ndarray,
    order: list[OrderKey],
    subs: list[Agg],
) -> np.ndarray:
    """`rows` in the requested order (the last key of `order` is the least significant)."""
    if len(rows) < 2:
        return rows
    sort_keys = []
    for key in reversed(order):
        if key.kind == "_count":
            values = part.count[rows].astype(np.float64)
        elif key.kind == "_key":
            for column in reversed(part.keys):
                codes, _ = densify(column[rows])
                sort_keys.append(codes if key.asc else -codes)
            continue
        else:
            values = path_values(subs, part.subs, key.path)[rows]
        sort_keys.append(values if key.asc else -values)
    return rows[np.lexsort(sort_keys)]
