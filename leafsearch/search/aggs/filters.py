"""`filter` and `filters`: buckets defined by queries, executed per segment by the query engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.search.aggs.base import (
    Agg,
    Options,
    ParseContext,
    SegmentContext,
    collect_subs,
    merge_subs,
    remap,
    render_subs,
)
from leafsearch.search.aggs.grouping import Buckets, collect_buckets, merge_buckets
from leafsearch.search.aggs.limits import consume_buckets
from leafsearch.search.aggs.order import path_values


def _parse_query(body: Any) -> Any:
    from leafsearch.request.query_dsl import parse_query

    return parse_query(body)


def _matches(query: Any, seg: SegmentContext, docs: np.ndarray) -> np.ndarray:
    """Whether each of `docs` matches the query (one execution per segment, not per bucket)."""
    from leafsearch.search.matching import execute, prepare

    mask, _ = execute(prepare(query, seg.filter_context), seg.view, seg.filter_context)
    return np.asarray(mask, dtype=bool)[docs]


@dataclass
class SingleBucket:
    count: np.ndarray  # documents in the bucket, per parent bucket
    subs: dict = field(default_factory=dict)


class FilterAgg(Agg):
    type_name = "filter"

    def __init__(self, name: str, meta: dict | None, subs: list[Agg], body: Any) -> None:
        super().__init__(name, meta, subs)
        self.query = _parse_query(body)

    def collect(
        self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int
    ) -> SingleBucket:
        inside = np.flatnonzero(_matches(self.query, seg, docs)) if len(docs) else np.empty(0, np.int64)
        count = np.bincount(groups[inside], minlength=n_groups).astype(np.int64)
        return SingleBucket(count, collect_subs(self.subs, seg, docs[inside], groups[inside], n_groups))

    def merge(self, parts: list[SingleBucket], maps: list[np.ndarray], n_out: int) -> SingleBucket:
        groups, keeps = remap(maps, [np.arange(len(p.count)) for p in parts])
        counts = (
            np.concatenate([p.count[k] for p, k in zip(parts, keeps, strict=True)]) if parts else np.empty(0)
        )
        count = np.bincount(groups, weights=counts, minlength=n_out).astype(np.int64)
        return SingleBucket(count, merge_subs(self.subs, [p.subs for p in parts], maps, n_out))

    def render(self, part: SingleBucket, group: int | None) -> dict:
        return {
            "doc_count": 0 if group is None else int(part.count[group]),
            **render_subs(self.subs, part.subs, group),
        }

    def sort_values(self, part: SingleBucket, path: list[str]) -> np.ndarray:
        if not path or path == ["_count"] or path == ["doc_count"]:
            return part.count.astype(np.float64)
        return path_values(self.subs, part.subs, tuple(path))


class FiltersAgg(Agg):
    type_name = "filters"

    def __init__(self, name: str, meta: dict | None, subs: list[Agg], opts: Options) -> None:
        super().__init__(name, meta, subs)
        filters = opts.get("filters")
        if not filters:
            raise IllegalArgument("[filters] cannot be empty.")
        if isinstance(filters, dict):
            self.names: list[str] | None = sorted(filters)
            self.queries = [_parse_query(filters[k]) for k in self.names]
        elif isinstance(filters, list):
            self.names = None
            self.queries = [_parse_query(q) for q in filters]
        else:
            raise IllegalArgument("[filters] cannot be empty.")
        self.other_key = opts.get("other_bucket_key")
        self.other = opts.boolean("other_bucket", self.other_key is not None)
        if self.other_key is None:
            self.other_key = "_other_"
        self.keyed = opts.boolean("keyed", True) and self.names is not None

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Buckets:
        n = len(self.queries)
        idx_parts, code_parts = [], []
        matched_any = np.zeros(len(docs), dtype=bool)
        for i, query in enumerate(self.queries):
            inside = _matches(query, seg, docs) if len(docs) else np.zeros(0, dtype=bool)
            matched_any |= inside
            hits = np.flatnonzero(inside)
            idx_parts.append(hits)
            code_parts.append(np.full(len(hits), i, dtype=np.int64))
        if self.other:
            rest = np.flatnonzero(~matched_any)
            idx_parts.append(rest)
            code_parts.append(np.full(len(rest), n, dtype=np.int64))
        idx, codes = np.concatenate(idx_parts), np.concatenate(code_parts)
        row_group, row_code, count, subs = collect_buckets(
            self, seg, docs, groups, n_groups, idx, codes, n + 1
        )
        return Buckets(row_group, [row_code], count, subs)

    def merge(self, parts: list[Buckets], maps: list[np.ndarray], n_out: int) -> Buckets:
        return merge_buckets(self, parts, maps, n_out)

    def render(self, part: Buckets, group: int | None) -> dict:
        rows = part.rows_of(group)
        row_of = dict(zip(part.keys[0][rows].tolist(), rows.tolist(), strict=True))
        labels: list[str | None] = list(self.names) if self.names is not None else [None] * len(self.queries)
        if self.other:
            labels.append(self.other_key)
        consume_buckets(len(labels))
        buckets = []
        for code, label in enumerate(labels):
            row = row_of.get(code)
            bucket: dict[str, Any] = {}
            if label is not None and not self.keyed and (self.names is not None):
                bucket["key"] = label
            bucket["doc_count"] = int(part.count[row]) if row is not None else 0
            bucket.update(render_subs(self.subs, part.subs, row))
            buckets.append((label, bucket))
        if self.keyed:
            return {"buckets": {label: bucket for label, bucket in buckets}}
        return {"buckets": [bucket for _, bucket in buckets]}


def parse_filter(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
    return FilterAgg(name, meta, subs, body)


def parse_filters(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
    opts = Options("filters", name, body, {"filters", "other_bucket", "other_bucket_key", "keyed"})
    return FiltersAgg(name, meta, subs, opts)
