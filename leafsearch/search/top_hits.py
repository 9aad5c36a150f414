"""The query phase of one page: the best `from + size` hits, never a sort of every match.

A search that is not a walk over a point in time or a scroll (those page through one snapshot and
keep a full `HitList`, see hitlist.py) needs only its top `k = from + size` hits. Per segment:

- sorted by fields: the segment's sort order (segment_orders.py, computed once per segment) is
  walked under the match mask until `k` hits are found; `search_after` starts the walk at a
  binary search of the segment's sorted keys, so a deep cursor costs what the first page costs;
- sorted by `_score`: `argpartition` selects the `k` best scores, ties broken exactly (by doc when
  nothing follows `_score` in the sort, else every tie is kept for the final sort);
- `size: 0`: nothing is selected, only counted.

The candidates of all segments (at most `k` each) are then sorted together, ties by shard then
doc, and cut to `k`: O(k * segments * log) instead of O(matches * log matches). Totals, max score
and aggregations still see every match.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.request.search_types import SCORE, SearchRequest, SortSpec
from leafsearch.search import fetch
from leafsearch.search.hitlist import (
    HitList,
    effective_sort,
    needs_scores,
    segment_matches,
    sort_column,
    sorted_hitlist,
)
from leafsearch.search.segment_orders import SegmentOrder, SegmentOrders, build_order, first_matches
from leafsearch.search.sort_keys import resolve_field_kind, special_kind
from leafsearch.search.targets import Target

if TYPE_CHECKING:
    from leafsearch.index.searcher import SegmentView
    from leafsearch.search.guard import SearchGuard

#: Pages deeper than this are served from a full, cached HitList (Elasticsearch's default
#: `index.max_result_window`): past it, the top-k candidates of every segment cost as much.
MAX_TOP_K = 10_000


def serves(request: SearchRequest) -> bool:
    """Whether a request's page is computed here rather than from a full HitList."""
    specs = effective_sort(request)
    return (
        request.pit is None
        and request.scroll is None
        and not request.rescore
        and request.terminate_after is None
        and request.from_ + request.size <= MAX_TOP_K
        and (request.search_after is None or all(s.field != SCORE for s in specs))
    )


def top_hits(
    targets: list[Target],
    request: SearchRequest,
    orders: SegmentOrders,
    *,
    now_millis: int,
    with_aggs,
    guard: SearchGuard,
) -> HitList:
    """The HitList of the request's top `from + size` hits (in sort order) and its totals."""
    try:
        return _top_hits(targets, request, orders, now_millis, with_aggs, guard)
    finally:
        guard.release_all()


def _top_hits(
    targets: list[Target], request: SearchRequest, orders: SegmentOrders, now_millis: int, with_aggs, guard
) -> HitList:
    k = request.from_ + request.size
    specs = effective_sort(request)
    scoring = needs_scores(request)
    by_fields = all(s.field != SCORE for s in specs)
    kinds = _kinds(specs, targets) if by_fields and k else None
    partials: list = []
    collect = None if with_aggs is None else lambda *args: partials.append(with_aggs(*args))
    total = 0
    max_score: float | None = None
    seg_docs: list[tuple[int, SegmentView, np.ndarray]] = []
    scores: list[np.ndarray] = []
    for m in segment_matches(
        targets, request, now_millis=now_millis, needs_scores=scoring, with_aggs=collect, guard=guard
    ):
        count = int(np.count_nonzero(m.mask))
        total += count
        if count and m.scores is not None:
            best = float(np.max(m.scores, where=m.mask, initial=-np.inf))
            max_score = best if max_score is None else max(max_score, best)
        if not count or not k:
            continue
        order = _order(orders, targets, m.target, m.view, specs, kinds) if kinds is not None else None
        if order is not None:
            start = 0
            if request.search_after is not None:
                after = _after_values(request, targets[m.target], specs)
                start = order.start_after(after, m.target, m.view.doc_base)
            docs = np.sort(first_matches(order.order, m.mask, start, k))
        elif by_fields:
            docs = np.flatnonzero(m.mask)  # no order fits the cache: every match is sorted below
        else:
            docs = _best_scores(m.scores, np.flatnonzero(m.mask), k, specs)
        seg_docs.append((m.target, m.view, docs))
        if m.scores is not None:
            scores.append(m.scores[docs])
    target_arr = np.concatenate(
        [np.full(len(d), t, dtype=np.int32) for t, _, d in seg_docs] or [np.empty(0, np.int32)]
    )
    doc_arr = np.concatenate([d + v.doc_base for _, v, d in seg_docs] or [np.empty(0, np.int64)])
    score_arr = (np.concatenate(scores) if scores else np.empty(0, np.float32)) if scoring else None
    hits = sorted_hitlist(
        targets, request, seg_docs, target_arr, doc_arr, score_arr, total, partials, max_score, few=True
    )
    hits.timed_out = guard.expired
    if len(hits) > k and request.search_after is None:
        # (With a cursor, a segment without an order gave every match: the page starts after it.)
        hits = _first(hits, k)
    return hits


def _kinds(specs: list[SortSpec], targets: list[Target]) -> tuple[str, ...] | None:
    """The kind each sort compares in across the request's targets (None for a field sort that
    an order per segment cannot serve: its kind differs between indices)."""
    kinds = []
    for spec in specs:
        special = special_kind(spec)
        if special is not None:
            kinds.append(special)
            continue
        field_types = [t.mapping.field(spec.field) for t in targets]
        kind = resolve_field_kind(spec, field_types, [t.index.name for t in targets])
        per_index = {
            resolve_field_kind(spec, [ft], [t.index.name]) for ft, t in zip(field_types, targets, strict=True)
        }
        if per_index != {kind}:
            return None
        kinds.append(kind)
    return tuple(kinds)


def _order(
    orders: SegmentOrders,
    targets: list[Target],
    ti: int,
    view: SegmentView,
    specs: list[SortSpec],
    kinds: tuple[str, ...],
) -> SegmentOrder | None:
    """The segment's order for this sort, computed from every one of its documents if needed."""
    target = targets[ti]
    field_types = tuple(None if special_kind(s) else target.mapping.field(s.field) for s in specs)
    signature = (tuple(specs), kinds, tuple(_type_signature(ft) for ft in field_types))

    def build() -> SegmentOrder:
        docs = np.arange(view.max_doc, dtype=np.int64)
        zeros = np.zeros(view.max_doc, dtype=np.int32)
        seg_docs = [(0, view, docs)]
        columns = [sort_column(spec, [target], seg_docs, zeros, docs, None) for spec in specs]
        index_sort = target.index.sort
        return build_order(
            columns, presorted=index_sort is not None and index_sort.covers(specs, field_types)
        )

    return orders.order(view.segment, signature, build)


def _type_signature(field_type: Any) -> Any:
    """What of a field's mapping a sort's keys depend on (its type and parameters: format,
    scaling factor, ...)."""
    if field_type is None:
        return None
    return field_type.type, repr(sorted(field_type.params.items()))


def _after_values(request: SearchRequest, target: Target, specs: list[SortSpec]) -> list[Any]:
    """The `search_after` values in each sort's domain, for one target's field types."""
    assert request.search_after is not None
    if len(request.search_after) != len(specs):
        raise IllegalArgument(
            f"search_after has {len(request.search_after)} value(s) but sort has {len(specs)}."
        )
    return [
        fetch.parse_search_after_value(
            raw, None if special_kind(spec) else target.mapping.field(spec.field), spec
        )
        for raw, spec in zip(request.search_after, specs, strict=True)
    ]


def _best_scores(scores: np.ndarray, docs: np.ndarray, k: int, specs: list[SortSpec]) -> np.ndarray:
    """The docs (ascending) among `docs` with the `k` best scores for a sort led by `_score`.

    When nothing but `_score` orders the hits, ties at the cut go to the lowest docs, as the full
    sort would order them; when more sorts follow, every tie is kept for them to decide."""
    if len(docs) <= k:
        return docs
    key = scores[docs]
    if specs[0].descending:
        key = -key
    cut = np.partition(key, k - 1)[k - 1]
    better = key < cut
    ties = np.flatnonzero(key == cut)
    if len(specs) == 1:
        ties = ties[: k - int(np.count_nonzero(better))]
    better[ties] = True
    return docs[better]


def _first(hits: HitList, k: int) -> HitList:
    """The first `k` hits of a sorted HitList."""
    hits.target, hits.doc = hits.target[:k], hits.doc[:k]
    hits.score = hits.score[:k] if hits.score is not None else None
    hits.columns = [c.take(slice(0, k)) for c in hits.columns]
    hits.keys = [key[:k] for key in hits.keys]
    return hits
