"""Bucket partials: rows of (parent bucket, key columns, doc count, sub-aggregation partials).

Every bucket aggregation (terms, histograms, ranges, filters, composite) keeps its partial in this
one columnar shape, so collecting is counting codes and merging is one `np.unique` over the rows
of all partials; sub-aggregations follow the rows through the same re-numbering.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from leafsearch.search.aggs.base import Agg, SegmentContext, collect_subs, merge_subs, remap

# Above this many (parent bucket, code) cells, counting switches from bincount to a sort.
_DENSE_CELLS = 1 << 22


@dataclass
class Buckets:
    group: np.ndarray  # parent bucket of each row
    keys: list[np.ndarray]  # key columns, one value per row
    count: np.ndarray  # documents of each row
    subs: dict = field(default_factory=dict)

    @cached_property
    def _by_group(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.group, kind="stable")
        return order, self.group[order]

    def rows_of(self, group: int | None) -> np.ndarray:
        """Rows of one parent bucket, in row order."""
        if group is None or not len(self.group):
            return np.empty(0, np.int64)
        order, sorted_groups = self._by_group
        lo, hi = np.searchsorted(sorted_groups, [group, group + 1])
        return order[lo:hi]


def count_codes(
    groups: np.ndarray, codes: np.ndarray, n_codes: int, n_groups: int, inverse: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Distinct (group, code) cells with their counts: (cell group, cell code, count, cell of each pair)."""
    n_codes = max(int(n_codes), 1)
    cells = groups.astype(np.int64) * n_codes + codes
    if n_groups * n_codes <= _DENSE_CELLS:
        counts = np.bincount(cells, minlength=n_groups * n_codes)
        used = np.flatnonzero(counts)
        inv = None
        if inverse:
            table = np.empty(len(counts), dtype=np.int64)
            table[used] = np.arange(len(used))
            inv = table[cells]
        return used // n_codes, used % n_codes, counts[used].astype(np.int64), inv
    if inverse:
        used, inv, counts = np.unique(cells, return_inverse=True, return_counts=True)
    else:
        used, counts = np.unique(cells, return_counts=True)
        inv = None
    return used // n_codes, used % n_codes, counts.astype(np.int64), inv


def dedupe_pairs(idx: np.ndarray, codes: np.ndarray, n_codes: int) -> tuple[np.ndarray, np.ndarray]:
    """One (document, code) pair per document and bucket: a document counts once per bucket."""
    if not len(idx):
        return idx, codes
    cells = np.unique(idx.astype(np.int64) * max(int(n_codes), 1) + codes)
    return cells // max(int(n_codes), 1), cells % max(int(n_codes), 1)


def densify(column: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense integer codes that order like the column (strings by bytes, numbers by value)."""
    uniq, codes = np.unique(column, return_inverse=True)
    return codes.reshape(-1).astype(np.int64), len(uniq)


def unify(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows equal in every column get one id: (first row of each id, id of each row); ids in key order."""
    n = len(columns[0]) if columns else 0
    combined = np.zeros(n, dtype=np.int64)
    for column in columns:
        codes, size = densify(column)
        if size and int(combined.max(initial=0)) >= (1 << 62) // size:
            combined, _ = densify(combined)
        combined = combined * size + codes
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def concat(arrays: list[np.ndarray]) -> np.ndarray:
    """Concatenation that lets empty partials (of unknown key type) not decide the dtype."""
    filled = [a for a in arrays if len(a)]
    if not filled:
        return arrays[0] if arrays else np.empty(0, np.float64)
    return filled[0] if len(filled) == 1 else np.concatenate(filled)


def collect_buckets(
    agg: Agg,
    seg: SegmentContext,
    docs: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    idx: np.ndarray,
    codes: np.ndarray,
    n_codes: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Count (document, code) pairs into rows and collect the sub-aggregations of each row.

    `idx` points into `docs`/`groups`; pairs must already be one per document and code.
    Returns (row group, row code, row count, sub partials).
    """
    row_group, row_code, count, inv = count_codes(groups[idx], codes, n_codes, n_groups, bool(agg.subs))
    subs = {}
    if agg.subs:
        subs = collect_subs(agg.subs, seg, docs[idx], inv, len(row_group))
    return row_group, row_code, count, subs


def merge_buckets(agg: Agg, parts: list[Buckets], maps: list[np.ndarray], n_out: int) -> Buckets:
    """Rows of all partials re-numbered by `maps`; rows with equal group and keys become one."""
    groups, keeps = remap(maps, [p.group for p in parts])
    n_keys = len(parts[0].keys) if parts else agg.key_columns  # no partials: an index without documents
    keys = [concat([p.keys[j][k] for p, k in zip(parts, keeps, strict=True)]) for j in range(n_keys)]
    counts = (
        concat([p.count[k] for p, k in zip(parts, keeps, strict=True)]) if parts else np.empty(0, np.int64)
    )
    if not len(groups):
        empty = Buckets(np.empty(0, np.int64), [k[:0] for k in keys], np.empty(0, np.int64))
        empty.subs = merge_subs(
            agg.subs, [p.subs for p in parts], [np.full(len(p.group), -1) for p in parts], 0
        )
        return empty
    first, inverse = unify([groups, *keys])
    merged_count = np.bincount(inverse, weights=counts, minlength=len(first)).astype(np.int64)
    result = Buckets(groups[first], [k[first] for k in keys], merged_count)
    if agg.subs:
        sub_maps, pos = [], 0
        for p, keep in zip(parts, keeps, strict=True):
            m = np.full(len(p.group), -1, dtype=np.int64)
            kept = int(keep.sum())
            m[keep] = inverse[pos : pos + kept]
            pos += kept
            sub_maps.append(m)
        result.subs = merge_subs(agg.subs, [p.subs for p in parts], sub_maps, len(first))
    return result
