"""Query rescoring: each shard's top hits scored again with a second query, as Elasticsearch's
QueryRescorer does.

Each shard keeps its top `max(from + size, window_size)` hits of the first pass. For every
rescorer in turn, the shard's top `window_size` hits that the rescore query matches get
`score_mode(score * query_weight, rescore_score * rescore_query_weight)`, every other kept hit
`score * query_weight`, and the shard's hits are sorted again (score descending, then doc). The
shards' hits are then merged by score, ties in shard order. Scores are float32 throughout, as in
Lucene; the rescore query runs once per segment that holds a window hit, vectorized.
"""

from __future__ import annotations

import numpy as np

from leafsearch.request.rescore import Rescorer
from leafsearch.request.search_types import SCORE, SearchRequest, SortSpec
from leafsearch.search.hitlist import HitList, all_shards_stats, score_column, shard_query_context
from leafsearch.search.matching import execute, prepare
from leafsearch.search.targets import Target

_COMBINE = {
    "total": np.add,
    "multiply": np.multiply,
    "avg": lambda a, b: (a + b) / np.float32(2),
    "max": np.maximum,
    "min": np.minimum,
}


def rescore(hitlist: HitList, request: SearchRequest, now_millis: int) -> HitList:
    """The hit list of a score-sorted search after its rescorers (a new list; `hitlist` may be cached)."""
    assert hitlist.score is not None
    stats = all_shards_stats(hitlist.targets) if request.dfs else None
    target, doc, score = rescore_hits(
        request, hitlist.targets, hitlist.target, hitlist.doc, hitlist.score, now_millis, stats
    )
    order = np.lexsort((doc, target, -score))  # the coordinator's merge: score, then shard order
    target, doc, score = target[order], doc[order], score[order]
    column = score_column(SortSpec(SCORE, "desc"), score)
    return HitList(
        hitlist.targets,
        target,
        doc,
        score,
        [column],
        column.key_columns(),
        hitlist.total,
        float(score.max()) if len(score) else None,
        hitlist.agg_partials,
        hitlist.terminated_early,
    )


def kept_hits(request: SearchRequest) -> int:
    """How many hits of its first pass a shard keeps when the request rescores:
    `max(from + size, window_size)` (Elasticsearch's query phase collects that many)."""
    return max(request.from_ + request.size, max(r.window_size for r in request.rescore))


def rescore_hits(
    request: SearchRequest,
    targets: list[Target],
    target: np.ndarray,
    doc: np.ndarray,
    score: np.ndarray,
    now_millis: int,
    stats: object,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each shard's top `kept_hits` of the first pass, rescored by every rescorer in turn:
    (target, doc, score) in (shard, score descending, doc) order.

    The hits come in score order within each shard (ties by doc); `target` indexes `targets`.
    The coordinator of local shards calls this with every shard's hits at once; a shard of the
    shard interface (top_hits.LocalShard) with its own, one target, before it answers (`stats`:
    DFS statistics, or None for the shards' own). O(kept * log kept) plus the rescore queries
    on the segments that hold a window hit."""
    kept = kept_hits(request)
    score = score.astype(np.float32)
    rank = _shard_ranks(target, len(targets))
    keep = rank < kept
    target, doc, score, rank = target[keep], doc[keep], score[keep], rank[keep]
    for rescorer in request.rescore:
        window = np.flatnonzero(rank < rescorer.window_size)
        matched, second = _rescore_scores(rescorer, targets, target[window], doc[window], now_millis, stats)
        first = score * np.float32(rescorer.query_weight)
        hits = window[matched]
        weighted = second[matched] * np.float32(rescorer.rescore_query_weight)
        first[hits] = _COMBINE[rescorer.score_mode](first[hits], weighted).astype(np.float32)
        score = first
        order = np.lexsort((doc, -score, target))  # each shard sorts its hits again
        target, doc, score = target[order], doc[order], score[order]
        rank = _shard_ranks(target, len(targets))
    return target, doc, score


def _shard_ranks(target: np.ndarray, n_targets: int) -> np.ndarray:
    """Position of each hit among the hits of its shard, in list order."""
    order = np.argsort(target, kind="stable")
    counts = np.bincount(target, minlength=n_targets)
    starts = np.cumsum(counts) - counts
    rank = np.empty(len(target), dtype=np.int64)
    rank[order] = np.arange(len(target)) - np.repeat(starts, counts)
    return rank


def _rescore_scores(
    rescorer: Rescorer,
    targets: list[Target],
    target: np.ndarray,
    doc: np.ndarray,
    now_millis: int,
    stats: object,
) -> tuple[np.ndarray, np.ndarray]:
    """(whether the rescore query matches, its score) for each (shard, shard-level doc)."""
    matched = np.zeros(len(doc), dtype=bool)
    second = np.zeros(len(doc), dtype=np.float32)
    for ti in np.unique(target).tolist():
        shard = targets[ti]
        ctx = shard_query_context(shard, now_millis, True, stats)
        planned = prepare(rescorer.query, ctx)
        rows = np.flatnonzero(target == ti)
        views = shard.searcher.views
        bases = np.array([v.doc_base for v in views], dtype=np.int64)
        segment = np.searchsorted(bases, doc[rows], side="right") - 1
        for si in np.unique(segment).tolist():
            view = views[si]
            at = rows[segment == si]
            local = doc[at] - view.doc_base
            mask, scores = execute(planned, view, ctx)
            matched[at] = mask[local]
            second[at] = scores[local] if scores is not None else np.float32(1)
    return matched, second
