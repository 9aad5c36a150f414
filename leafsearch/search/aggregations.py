"""Aggregations: parse the request's `aggs`, collect per segment, reduce over segments and shards.

The coordinator parses once per index (`parse_aggs` resolves fields against that index's
mapping), calls `collect` for every segment of every shard's Searcher with the segment's matched
live documents, and `reduce`s all the partials into the response's `aggregations` object. The
work is in `leafsearch.search.aggs`; see `aggs/base.py` for how nesting stays vectorized.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import ParsingError
from leafsearch.search.aggs.base import Agg, AggTree, ParseContext, SegmentContext
from leafsearch.search.aggs.limits import MAX_BUCKETS, counting_buckets
from leafsearch.search.aggs.parse import MAX_AGGREGATIONS, MAX_NESTED_DEPTH, check_aggregations, parse_level

__all__ = [
    "MAX_AGGREGATIONS",
    "MAX_BUCKETS",
    "MAX_NESTED_DEPTH",
    "AggTree",
    "check_aggregations",
    "collect",
    "parse_aggs",
    "reduce",
    "typed_keys",
]


def parse_aggs(
    body: Any,
    mapping: Any,
    *,
    index: str | None = None,
    now_millis: int | None = None,
    max_depth: int | None = None,
    max_buckets: int | None = None,
    max_inner_result_window: int = 100,
) -> AggTree:
    """The aggregation tree of an `aggs`/`aggregations` object, resolved against `mapping`.

    `index` names the index in messages that quote it; `now_millis` resolves date math in
    `extended_bounds`, ranges and `after` keys; `max_depth` (`search.aggs.max_nested_depth`)
    refuses deeper nesting before it is walked further; `max_buckets` (`search.max_buckets`)
    refuses a composite `size` above it; `max_inner_result_window` (the index's) bounds `top_hits`.
    """
    if not isinstance(body, dict):
        raise ParsingError(f"Unknown key for a {token_name(body)} in [aggregations].")
    pctx = ParseContext(
        mapping,
        index,
        now_millis,
        max_depth=max_depth,
        max_buckets=max_buckets,
        max_inner_result_window=max_inner_result_window,
    )
    return parse_level(body, pctx)


def collect(tree: AggTree, view: Any, docs: np.ndarray, ctx: Any, scores: np.ndarray | None = None) -> dict:
    """Partial results of one segment: `docs` are its matched live documents, ascending.

    `ctx` carries `mapping`, `now_millis` and `searcher` (filter aggregations execute queries with it);
    `scores`, when the search scores, the segment's scores by document (`top_hits` reads them).
    """
    docs = np.asarray(docs, dtype=np.int64)
    seg = SegmentContext(view, ctx, scores)
    groups = np.zeros(len(docs), dtype=np.int64)
    profile = getattr(ctx, "profile", None)
    if profile is None:
        return {agg.name: agg.collect(seg, docs, groups, 1) for agg in tree}
    return {
        agg.name: profile.time_aggregation(agg, lambda a=agg: a.collect(seg, docs, groups, 1)) for agg in tree
    }


def reduce(tree: AggTree, partials: list[dict], *, max_buckets: int | None = None) -> dict:
    """The `aggregations` response object from the partials of every segment of every shard.

    `max_buckets` (`search.max_buckets`) bounds the buckets of the whole response: more fail the
    reduce with `too_many_buckets_exception` before the excess is built.
    """
    maps = [np.zeros(1, dtype=np.int64)] * len(partials)
    with counting_buckets(max_buckets):
        return {agg.name: agg.output(agg.merge([p[agg.name] for p in partials], maps, 1), 0) for agg in tree}


def typed_keys(aggregations: dict, tree: list[Agg]) -> dict:
    """The response with `?typed_keys` names ("sterms#by_tag"), at every level of nesting."""
    out = {}
    for agg in tree:
        body = aggregations[agg.name]
        if agg.subs:
            body = dict(body)
            buckets = body.get("buckets")
            if buckets is None:  # a single-bucket aggregation holds its sub-aggregations itself
                body = _typed_bucket(body, agg.subs)
            elif isinstance(buckets, dict):
                body["buckets"] = {k: _typed_bucket(b, agg.subs) for k, b in buckets.items()}
            else:
                body["buckets"] = [_typed_bucket(b, agg.subs) for b in buckets]
        out[f"{agg.typed_name()}#{agg.name}"] = body
    return out


def _typed_bucket(bucket: dict, subs: list[Agg]) -> dict:
    names = {s.name for s in subs}
    typed = typed_keys({k: v for k, v in bucket.items() if k in names}, subs)
    return {**{k: v for k, v in bucket.items() if k not in names}, **typed}
