"""A segment's sort order kept as a file beside it (see derived_files.py for why and how).

Name: `sort-<digest>.order`, the digest (SHA-256) of what determines the order's content: the
format, and per sort spec the field's *number* in the segment (never its name: nothing a client
sends becomes a file name), order, `missing`, `mode`, `numeric_type`, the kind it compares in and
the field type's parameters. Two requests that sort alike share the file whatever they call the
field. The file holds the order, its inverse and the sorted key columns, and per sort column
whether documents without a value are flagged and, for a keyword column whose `missing` added a
term the segment lacks, its own term list; the rest of a column is rebuilt from the segment.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from leafsearch.index import derived_files

FORMAT = 1
PREFIX = "sort-"
SUFFIX = ".order"


@dataclass
class StoredOrder:
    """What an order file holds: the order, its inverse, the sorted key columns, and per sort
    column whether documents without a value are flagged and its own term list (None: the
    segment's terms)."""

    order: np.ndarray
    rank: np.ndarray
    keys: list[np.ndarray]
    flagged: list[bool]
    terms: list[np.ndarray | None]


def file_name(description: Any) -> str:
    """The file name of an order described by `description` (JSON-able, field numbers only)."""
    digest = hashlib.sha256(orjson.dumps([FORMAT, description], option=orjson.OPT_SORT_KEYS)).hexdigest()
    return f"{PREFIX}{digest[:40]}{SUFFIX}"


def write(path: Path, stored: StoredOrder) -> None:
    """Write `stored` at `path` (derived_files.write: raises one of `UNWRITTEN` when it cannot)."""
    arrays = {"order": stored.order, "rank": stored.rank}
    arrays.update({f"key{i}": k for i, k in enumerate(stored.keys)})
    columns = []
    for i, (flagged, terms) in enumerate(zip(stored.flagged, stored.terms, strict=True)):
        if terms is not None:
            arrays[f"terms{i}"] = terms
        columns.append({"flagged": flagged, "terms": None if terms is None else f"terms{i}"})
    derived_files.write(path, arrays, {"order_format": FORMAT, "keys": len(stored.keys), "columns": columns})


def read(path: Path) -> StoredOrder | None:
    """The order stored at `path`, mapped; None when there is no whole order file there."""
    found = derived_files.read(path)
    if found is None or found.meta.get("order_format") != FORMAT:
        return None
    arrays, meta = found.arrays, found.meta
    try:
        keys = [arrays[f"key{i}"] for i in range(int(meta["keys"]))]
        order, rank = arrays["order"], arrays["rank"]
        columns = meta["columns"]
        terms = [None if c["terms"] is None else arrays[c["terms"]] for c in columns]
        flagged = [bool(c["flagged"]) for c in columns]
    except (KeyError, TypeError, ValueError):
        return None
    if len(rank) != len(order) or any(len(k) != len(order) for k in keys):
        return None
    return StoredOrder(order, rank, keys, flagged, terms)
