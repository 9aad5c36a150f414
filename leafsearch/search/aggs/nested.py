"""`nested` and `reverse_nested`: aggregating the objects of a `nested` field, and back.

`nested` moves each bucket's documents to their objects under its path (the children of a
parent are consecutive in the segment of the path's child documents, `Segment.nested`): its
sub-aggregations collect over those child documents, in a segment context that remembers the
way back. `reverse_nested` takes that way back (to the root, or to an enclosing nested path):
each bucket's objects become their distinct parents, so a parent counts once per bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.errors import AggregationExecution, IllegalArgument, ParsingError
from leafsearch.search.aggs.base import Agg, ParseContext, SegmentContext, collect_subs
from leafsearch.search.aggs.filters import FilterAgg, SingleBucket
from leafsearch.search.query.nested_queries import is_object, nested_level


@dataclass
class NestedSegmentContext(SegmentContext):
    """The child documents of a nested path: `outer` is the context they came from and
    `parents` the doc of `outer`'s segment each child belongs to."""

    outer: SegmentContext | None = None
    parents: np.ndarray | None = None
    path: str = ""


class NestedAgg(FilterAgg):
    type_name = "nested"

    def __init__(self, name: str, meta: dict | None, subs: list[Agg], path: str) -> None:
        Agg.__init__(self, name, meta, subs)
        self.path = path

    def collect(
        self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int
    ) -> SingleBucket:
        level = nested_level(seg.request, self.path)
        found = level.children.get(seg.view.segment)
        if found is None or not len(docs):
            empty = np.empty(0, np.int64)
            inner = NestedSegmentContext(seg.view, level.ctx, None, seg, empty, self.path)
            return SingleBucket(
                np.zeros(n_groups, np.int64), collect_subs(self.subs, inner, empty, empty, n_groups)
            )
        children, parents = found
        lo = np.searchsorted(parents, docs, side="left")
        hi = np.searchsorted(parents, docs, side="right")
        counts = hi - lo
        child_docs = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        child_groups = np.repeat(groups, counts)
        if children.live is not None:
            alive = children.live[child_docs]
            child_docs, child_groups = child_docs[alive], child_groups[alive]
        inner = NestedSegmentContext(children, level.ctx, None, seg, parents, self.path)
        count = np.bincount(child_groups, minlength=n_groups).astype(np.int64)
        return SingleBucket(count, collect_subs(self.subs, inner, child_docs, child_groups, n_groups))


class ReverseNestedAgg(FilterAgg):
    type_name = "reverse_nested"

    def __init__(self, name: str, meta: dict | None, subs: list[Agg], path: str | None) -> None:
        Agg.__init__(self, name, meta, subs)
        self.path = path

    def collect(
        self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int
    ) -> SingleBucket:
        if not isinstance(seg, NestedSegmentContext):
            raise IllegalArgument(
                f"Reverse nested aggregation [{self.name}] can only be used inside a [nested] aggregation"
            )
        outer: SegmentContext = seg
        while isinstance(outer, NestedSegmentContext) and outer.path != self.path:
            assert outer.outer is not None and outer.parents is not None
            docs = outer.parents[docs] if len(docs) else docs
            outer = outer.outer
        if self.path is not None and not (
            isinstance(outer, NestedSegmentContext) and outer.path == self.path
        ):
            raise AggregationExecution(
                f"[reverse_nested] nested path [{self.path}] is not a parent of [{seg.path}]"
            )
        # Each parent once per bucket (the pairs, by bucket then document).
        pairs = np.unique(groups.astype(np.int64) * (outer.view.max_doc + 1) + docs) if len(docs) else docs
        groups, docs = pairs // (outer.view.max_doc + 1), pairs % (outer.view.max_doc + 1)
        count = np.bincount(groups, minlength=n_groups).astype(np.int64)
        return SingleBucket(count, collect_subs(self.subs, outer, docs, groups, n_groups))


def parse_nested(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
    path = _path(name, body, "nested")
    if path is None:
        raise ParsingError(f"Missing [path] field for nested aggregation [{name}]")
    _check_path(pctx, path, "nested")
    return NestedAgg(name, meta, subs, path)


def parse_reverse_nested(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
    path = _path(name, body, "reverse_nested")
    if path is not None:
        _check_path(pctx, path, "reverse_nested")
    return ReverseNestedAgg(name, meta, subs, path)


def _path(name: str, body: Any, kind: str) -> str | None:
    path = None
    for key, value in body.items():
        if key != "path":
            raise ParsingError(f"[{kind}] unknown field [{key}]")
        if not isinstance(value, str):
            raise ParsingError(f"[{kind}] path doesn't support values of type: {type(value).__name__}")
        path = value
    return path


def _check_path(pctx: ParseContext, path: str, kind: str) -> None:
    """An object that is not `nested` is refused; an unmapped path aggregates nothing."""
    if path not in pctx.mapping.nested_paths and is_object(pctx.mapping, path):
        raise AggregationExecution(f"[{kind}] nested path [{path}] is not nested")
