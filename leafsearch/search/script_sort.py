"""`_script` sorts: each matched document's sort value is its script's (ScriptSortBuilder).

A `number` script's values compare as doubles and render as them; a `string` script's as
strings, through ordinals over the terms these documents give (as a keyword sort over few
documents does), so pages, `search_after` cursors, shards' merges and PIT or scroll walks treat
them as they treat a field's. The script runs over columns where it can (scripts/vector.py), per
document otherwise; it never feeds the per-segment sort orders (segment_orders.py), which are
kept for fields. A value of the wrong kind is a 400 naming the script's type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.request.search_types import SortSpec
from leafsearch.search.query import script_exec
from leafsearch.search.sort_keys import SortColumn, missing_substitute


@dataclass(frozen=True)
class _On:
    """What the script reads of a target's index (script_exec.ScriptTarget)."""

    mapping: Any
    index_name: str | None


def script_sort_column(
    spec: SortSpec, targets: list, seg_docs: list[tuple[int, Any, np.ndarray]], score_arr: np.ndarray | None
) -> SortColumn:
    """The sort column of a `_script` sort (`spec.script`) over `seg_docs`, in gathering order;
    `score_arr` (the documents' scores in the same order, when the search computes them) is the
    script's `_score`."""
    assert spec.script is not None
    field_types = tuple(None for _ in targets)
    per_segment: list[Any] = []
    at = 0
    for ti, view, docs in seg_docs:
        target = targets[ti]
        scores = None if score_arr is None else score_arr[at : at + len(docs)]
        at += len(docs)
        on = _On(target.mapping, target.index.name)
        per_segment.append(
            script_exec.evaluate(spec.script.source, spec.script.params_json, view, on, docs, scores)
        )
    if spec.script_type == "number":
        values = np.concatenate([_numbers(found) for found in per_segment] or [np.empty(0)])
        return SortColumn(spec, "double", values, None, None, field_types, missing_substitute(spec, None))
    strings = [text for found in per_segment for text in _strings(found)]
    terms, ordinals = np.unique(
        np.array([t.encode() for t in strings], dtype=object).astype(bytes), return_inverse=True
    )
    return SortColumn(spec, "keyword", ordinals.astype(np.int64), None, terms, field_types)


def _numbers(found: np.ndarray | list[Any]) -> np.ndarray:
    if isinstance(found, np.ndarray) and found.dtype.kind in "iuf":
        return found.astype(np.float64)
    listed = found.tolist() if isinstance(found, np.ndarray) else found
    for value in listed:
        if type(value) not in (int, float):
            raise IllegalArgument(f"script sort of type [number] must return a number, got [{value!r}]")
    return np.asarray(listed, dtype=np.float64)


def _strings(found: np.ndarray | list[Any]) -> list[str]:
    listed = found.tolist() if isinstance(found, np.ndarray) else found
    for value in listed:
        if type(value) is not str:
            raise IllegalArgument(f"script sort of type [string] must return a string, got [{value!r}]")
    return listed
