"""Planning and running kNN on `dense_vector` fields.

Elasticsearch's kNN finds each shard's `k` nearest vectors among the documents its filter keeps,
then scores them by their similarity (index/vectors.py). Planning runs the filter, then per
segment of the shard's snapshot takes the `num_candidates` nearest allowed rows from the
segment's HNSW graph (index/vector_graph.py), or every allowed row where an exact pass costs less
(small segments, selective filters, `flat` fields), scores them exactly, keeps the shard's `k`
best, and the plan holds them by segment; the executor only scatters them into the segment's
mask and scores. So the hits are the same on every segment a query runs over (a PIT walks one
snapshot, whose plan is the same on every page).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leafsearch.index import vector_graph, vectors
from leafsearch.index.columns import VectorColumn
from leafsearch.index.mapping import VectorField
from leafsearch.index.searcher import SegmentView
from leafsearch.request.query_dsl import Knn, KnnHits
from leafsearch.search.query.context import QueryContext, failed
from leafsearch.search.query.fields import field_type
from leafsearch.search.query.masks import Result, found_docs, ranges
from leafsearch.search.query.plans import NoDocs

#: segment name -> (docs ascending, scores float32)
Hits = dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True, slots=True, eq=False)
class KnnPlan:
    """The shard's nearest documents, by segment."""

    field: str
    hits: Hits
    boost: float = 1.0


def plan_knn(q: Knn, ctx: QueryContext) -> KnnPlan | NoDocs:
    from leafsearch.search.query import executor, planner  # they import this module

    ft = field_type(ctx, q.field)
    if ft is None:
        return NoDocs()
    if not isinstance(ft, VectorField):
        raise failed(
            ctx, "illegal_argument_exception", "[knn] queries are only supported on [dense_vector] fields"
        )
    if not ft.index:
        raise failed(
            ctx,
            "illegal_argument_exception",
            f"to perform knn search on field [{q.field}], its mapping must have [index] set to [true]",
        )
    query = _query_vector(q, ft, ctx)
    filters = [planner.plan(f, ctx) for f in q.filter]
    parts: list[tuple[str, np.ndarray, np.ndarray]] = []
    for view in ctx.searcher.views:
        col = view.segment.column(q.field)
        if not isinstance(col, VectorColumn) or not len(col.docs):
            continue
        keep = col.present if view.live is None else col.present & view.live
        for f in filters:
            keep = keep & executor.run(f, view, ctx, False, 1.0)[0]
        allowed = keep[col.docs]
        rows = _candidates(col, query, q.num_candidates, allowed)
        if not len(rows):
            continue
        raw = vectors.similarities(col.vectors, rows, query, ft.similarity)
        if q.similarity is not None:
            chosen = vectors.passes(raw, ft.similarity, q.similarity)
            rows, raw = rows[chosen], raw[chosen]
        scores = vectors.to_score(raw, ft.similarity, ft.element_type, ft.dims).astype(np.float32)
        best = _best(scores, q.k)
        parts.append((view.segment.name, col.docs[rows[best]], scores[best]))
    return KnnPlan(q.field, _shard_top(parts, q.k), q.boost)


def _candidates(col: VectorColumn, query: np.ndarray, num_candidates: int, allowed: np.ndarray) -> np.ndarray:
    """The rows a segment scores: its graph's `num_candidates` nearest among the `allowed` rows
    (filter, deletes), or every allowed row where an exact pass costs less (vector_graph.py)."""
    if col.graph is not None:
        n_allowed = int(np.count_nonzero(allowed))
        found = vector_graph.candidate_rows(col.graph, query, num_candidates, allowed, n_allowed)
        if found is not None:
            return np.sort(found)
    return np.flatnonzero(allowed)


def _query_vector(q: Knn, ft: VectorField, ctx: QueryContext) -> np.ndarray:
    dims = ft.dims
    if len(q.query_vector) != dims:
        raise failed(
            ctx,
            "illegal_argument_exception",
            f"The query vector has a different number of dimensions [{len(q.query_vector)}] "
            f"than the document vectors [{dims}].",
        )
    zero_refused = "cosine" if ft.similarity == "cosine" else None
    problem = vectors.vector_problem(list(q.query_vector), ft.element_type, zero_refused)
    if problem is not None:
        raise failed(ctx, "illegal_argument_exception", problem)
    return np.asarray(q.query_vector, dtype=np.float32)


def _best(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the `k` highest scores (any order)."""
    if len(scores) <= k:
        return np.arange(len(scores))
    return np.argpartition(-scores, k - 1)[:k]


def _shard_top(
    parts: list[tuple[str, np.ndarray, np.ndarray]], k: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The shard's `k` best of every segment's `k` best, by segment; ties to the earlier document."""
    if not parts:
        return {}
    scores = np.concatenate([s for _, _, s in parts])
    segment_of = np.repeat(np.arange(len(parts)), [len(d) for _, d, _ in parts])
    docs = np.concatenate([d for _, d, _ in parts])
    order = np.lexsort((docs, segment_of, -scores))[:k]
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for i, (name, _, _) in enumerate(parts):
        mine = order[segment_of[order] == i]
        if len(mine):
            by_doc = np.argsort(docs[mine], kind="stable")
            out[name] = (docs[mine][by_doc], scores[mine][by_doc])
    return out


def plan_knn_hits(q: KnnHits, ctx: QueryContext) -> KnnPlan | NoDocs:
    """The documents of a top-level `knn`'s hits in this shard's snapshot, by segment: each id's
    live document (an id's deleted copies in older segments are left out)."""
    mine = [(doc_id.encode(), score) for index, doc_id, score in q.hits if index == ctx.index_name]
    if not mine:
        return NoDocs()
    keys = np.array([k for k, _ in mine], dtype=bytes)
    scores = np.array([s for _, s in mine], dtype=np.float32)
    lengths = np.array([len(k) for k, _ in mine])
    hits: Hits = {}
    for view in ctx.searcher.views:
        segment = view.segment
        fits = lengths <= segment.id_terms.dtype.itemsize  # a longer id is in no segment
        lo, hi = segment.lookup_ids(keys[fits])
        docs = np.asarray(segment.id_docs)[ranges(lo.astype(np.int64), hi.astype(np.int64))].astype(np.int64)
        doc_scores = np.repeat(scores[fits], hi - lo)
        if view.live is not None:
            alive = view.live[docs]
            docs, doc_scores = docs[alive], doc_scores[alive]
        if len(docs):
            by_doc = np.argsort(docs, kind="stable")
            hits[segment.name] = (docs[by_doc], doc_scores[by_doc])
    return KnnPlan(q.field, hits, q.boost)


def exec_knn(plan: KnnPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    """The plan's documents of this segment, scored by their similarity."""
    return found_docs(plan.hits.get(view.segment.name), view, scoring, boost * plan.boost)
