"""Scripts in aggregations: `script` in place of `field` (the script's values for each
document), or beside it (a value script: the field's values, each seen as `_value`), with
`value_type` saying what the values are, in terms, histograms, ranges and the metrics.

The script runs once per segment over the collected documents: over columns when it is a
doc-values expression (scripts/vector.py), per document otherwise. A document's value is what the
script returns: a number or string, a list of them (several values), or null (none). Without
`value_type`, a terms, cardinality or value_count script gives strings and the others numbers,
as Elasticsearch defaults them."""

from __future__ import annotations

from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.request.query_dsl import ScriptSpec, script_spec
from leafsearch.scripts.runtime import java_str
from leafsearch.search.aggs.base import SegmentContext, field_failed, shard_failure
from leafsearch.search.query import script_exec

KEYWORD, NUMERIC, DATE, BOOLEAN = "keyword", "numeric", "date", "boolean"
#: `value_type` names (Elasticsearch's ValueType) and the family of values they give.
_VALUE_TYPES = {
    "string": KEYWORD, "keyword": KEYWORD, "long": NUMERIC, "integer": NUMERIC, "short": NUMERIC,
    "byte": NUMERIC, "double": NUMERIC, "float": NUMERIC, "number": NUMERIC, "numeric": NUMERIC,
    "date": DATE, "boolean": BOOLEAN,
}  # fmt: skip
_DATES = ("date_histogram", "date_range")
#: What a field's values are: (index into the documents, the values, whether several per document).
FieldValues = tuple[np.ndarray, Any, bool]


def spec(agg_type: str, value: Any) -> ScriptSpec:
    try:
        return script_spec(agg_type, value)
    except IllegalArgument as exc:
        raise field_failed(agg_type, "script", exc) from None


def family(agg_type: str, value_type: Any, families: frozenset[str]) -> str:
    """The family of a script's values: `value_type`'s, else the aggregation's default."""
    if value_type is None:
        if agg_type in _DATES:
            return DATE
        return KEYWORD if KEYWORD in families else NUMERIC
    found = _VALUE_TYPES.get(value_type) if isinstance(value_type, str) else None
    if found is None:
        raise field_failed(agg_type, "value_type", IllegalArgument(f"Unknown value type [{value_type}]"))
    if found not in families:
        raise shard_failure(
            IllegalArgument(f"Value type [{value_type}] is not supported for aggregation [{agg_type}]")
        )
    return found


def numbers(
    seg: SegmentContext, script: ScriptSpec, docs: np.ndarray, field: FieldValues | None
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(index into `docs`, value, multi-valued) of a numeric script."""
    idx, found, multi = _run(seg, script, docs, field)
    if isinstance(found, np.ndarray) and found.dtype.kind in "biuf":
        return idx, found if found.dtype.kind != "b" else found.astype(np.int64), multi
    rows, values, multi = _flatten(idx, found, multi)
    for value in values:
        if type(value) not in (int, float, bool):
            raise shard_failure(
                IllegalArgument(f"the aggregation's script must return numbers, got [{java_str(value)}]")
            )
    kind = np.int64 if all(type(v) is not float for v in values) else np.float64
    return rows, np.asarray(values, dtype=kind), multi


def strings(
    seg: SegmentContext, script: ScriptSpec, docs: np.ndarray, field: FieldValues | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(index into `docs`, ordinal, the sorted terms the ordinals point into, multi-valued) of a
    script whose values are strings (other values as their `toString`)."""
    idx, found, multi = _run(seg, script, docs, field)
    listed = found.tolist() if isinstance(found, np.ndarray) else found
    rows, values, multi = _flatten(idx, listed, multi)
    encoded = np.array([(v if type(v) is str else java_str(v)).encode() for v in values], dtype=bytes)
    terms, codes = np.unique(encoded if len(encoded) else np.empty(0, "S1"), return_inverse=True)
    return rows, codes.astype(np.int64), terms, multi


def _run(
    seg: SegmentContext, script: ScriptSpec, docs: np.ndarray, field: FieldValues | None
) -> tuple[np.ndarray, Any, bool]:
    scores = None if seg.scores is None else np.asarray(seg.scores)[docs]
    if field is None:
        found = script_exec.evaluate(script.source, script.params_json, seg.view, seg.request, docs, scores)
        return np.arange(len(docs), dtype=np.int64), found, False
    idx, values, multi = field
    rows = docs[idx]
    found = script_exec.evaluate(
        script.source,
        script.params_json,
        seg.view,
        seg.request,
        rows,
        None if scores is None else scores[idx],
        values,
    )
    return idx, found, multi


def _flatten(idx: np.ndarray, found: list[Any], multi: bool) -> tuple[np.ndarray, list[Any], bool]:
    """Each returned value with its document: lists spread, nulls dropped."""
    if all(value is not None and type(value) not in (list, set) for value in found):
        return idx, found, multi
    rows: list[int] = []
    values: list[Any] = []
    for row, value in zip(idx.tolist(), found, strict=True):
        if value is None:
            continue
        if type(value) in (list, set):
            items = [item for item in value if item is not None]
            rows.extend([row] * len(items))
            values.extend(items)
            multi = True
        else:
            rows.append(row)
            values.append(value)
    return np.asarray(rows, dtype=np.int64), values, multi
