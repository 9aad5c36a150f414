"""`histogram` and `date_histogram` over range fields: a document is counted in every bucket its
interval overlaps, as Elasticsearch's range histograms count it.

A segment's distinct intervals are its range column's terms (index/range_fields.py), so each is
decoded and turned into its run of bucket keys once per segment (clipped to `hard_bounds` first);
documents take their intervals' runs through their ordinals. An interval spanning more buckets than
`search.max_buckets` allows is refused before its keys are built.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.index.columns import KeywordColumn
from leafsearch.index.range_fields import RANGE_TYPES, decode_bound, half_width
from leafsearch.search.aggs.base import ParseContext, SegmentContext, shard_failure
from leafsearch.search.aggs.limits import TooManyBuckets
from leafsearch.search.aggs.values import DATE, NUMERIC, FieldRef, gather

#: `search.max_buckets`' default, when the request's is not known.
_DEFAULT_MAX_BUCKETS = 65_536


def range_field(agg_type: str, opts: Any, pctx: ParseContext) -> FieldRef | None:
    """The range field the histogram names, or None when it names no range field."""
    path = opts.get("field")
    ftype = pctx.mapping.field(path) if isinstance(path, str) and pctx.mapping is not None else None
    if ftype is None or ftype.type not in RANGE_TYPES:
        return None
    if ftype.type == "ip_range":
        reason = f"Field [{path}] of type [{ftype.type}] is not supported for aggregation [{agg_type}]"
        raise shard_failure(IllegalArgument(reason))
    return FieldRef(path, ftype, DATE if ftype.type == "date_range" else NUMERIC)


def range_keys(
    agg: Any, seg: SegmentContext, docs: np.ndarray, limit: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """(index into `docs`, bucket key) for every bucket each document's intervals overlap."""
    col = seg.segment.column(agg.field.path)
    dtype = agg.keys_of(np.zeros(1)).dtype  # milliseconds for dates, floats for numbers
    if not isinstance(col, KeywordColumn) or not len(docs):
        return np.empty(0, np.int64), np.empty(0, dtype)
    idx, ords, _ = gather(col.ords, docs)
    used, codes = np.unique(np.asarray(ords, dtype=np.int64), return_inverse=True)
    runs = [_run(agg, bytes(term).decode(), limit or _DEFAULT_MAX_BUCKETS, dtype) for term in col.terms[used]]
    lengths = np.array([len(r) for r in runs], dtype=np.int64)
    flat = np.concatenate(runs) if runs else np.empty(0, dtype)
    starts = np.cumsum(lengths) - lengths
    counts = lengths[codes.reshape(-1)]
    firsts = np.repeat(starts[codes.reshape(-1)] - (np.cumsum(counts) - counts), counts)
    return np.repeat(idx, counts), flat[firsts + np.arange(int(counts.sum()))]


def _run(agg: Any, term: str, limit: int, dtype: np.dtype) -> np.ndarray:
    """The keys of the buckets one interval overlaps, inside the hard bounds."""
    type_ = agg.field.ftype.type
    width = half_width(type_)
    lo, hi = float(decode_bound(type_, term[:width])), float(decode_bound(type_, term[width:]))
    if agg.hard is not None:
        hard_lo, hard_hi = agg.hard
        lo = lo if hard_lo is None else max(lo, float(hard_lo))
        hi = hi if hard_hi is None else min(hi, float(hard_hi))
    if lo > hi:
        return np.empty(0, dtype)
    first, last = agg.keys_of(np.array([lo]))[0], agg.keys_of(np.array([hi]))[0]
    if agg.count_between(first, last) > limit:
        raise TooManyBuckets(limit)
    return np.asarray(agg.keys_between(first, last), dtype=dtype)
