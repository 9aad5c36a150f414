"""Planning and running the parent-join queries (`has_child`, `has_parent`, `parent_id`).

Children are routed to their parent's shard, so a join runs within one shard snapshot, as
Elasticsearch's does. The linking ids (`<join>#<parent>` keywords, index/join.py) are numbered
once per snapshot over all its segments (global ordinals, Elasticsearch's `eager_global_ordinals`
built on first use), so a join compares integers: planning runs the inner query over every
segment, takes the global ordinals of its matches' linking ids, counts and combines their scores
per ordinal (`bincount`, `maximum.at`), then finds the other side's documents whose
ordinal is among them by one gather per segment: no loop over documents, no string compared.
The plan holds the matches by
segment, so every page of a PIT walk sees one join of one snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leafsearch.index.columns import KeywordColumn
from leafsearch.index.searcher import SegmentView
from leafsearch.request import query_dsl as dsl
from leafsearch.request.join_queries import HasChild, HasParent, ParentId
from leafsearch.search.query.context import QueryContext, shard_error
from leafsearch.search.query.masks import Result, found_docs
from leafsearch.search.query.plans import NoDocs
from leafsearch.search.sort_keys import global_ordinals

#: segment name -> (docs ascending, their scores float32 or None for a constant score)
Matches = dict[str, tuple[np.ndarray, np.ndarray | None]]


@dataclass(frozen=True, slots=True, eq=False)
class JoinPlan:
    """The documents a join matched in the shard's snapshot, by segment."""

    matches: Matches
    boost: float = 1.0


def _join_field(name: str, ctx: QueryContext, ignore_unmapped: bool):
    join = ctx.mapping.join if ctx.mapping is not None else None
    if join is None and not ignore_unmapped:
        raise shard_error(ctx, f"[{name}] no join field has been configured")
    return join


def plan_has_child(q: HasChild, ctx: QueryContext) -> JoinPlan | NoDocs:
    join = _join_field("has_child", ctx, q.ignore_unmapped)
    if join is None:
        return NoDocs()
    parent = join.relations.parent_of.get(q.type)
    if parent is None:
        if q.ignore_unmapped:
            return NoDocs()
        raise shard_error(ctx, f"[has_child] join field [{join.path}] doesn't hold [{q.type}] as a child")
    link = join.id_field(parent)
    scoring = q.score_mode != "none"
    ids, scores = _linking_ids(q.query, ctx, join.path, (q.type,), link, scoring)
    counts, combined = _per_ordinal(ids, len(link_ordinals(ctx, link)[0]), scores, q.score_mode)
    keys = np.flatnonzero((counts >= max(q.min_children, 1)) & (counts <= q.max_children))
    key_scores = combined[keys] if combined is not None else None
    return JoinPlan(_linked_docs(ctx, join.path, (parent,), link, keys, key_scores), q.boost)


def plan_has_parent(q: HasParent, ctx: QueryContext) -> JoinPlan | NoDocs:
    join = _join_field("has_parent", ctx, q.ignore_unmapped)
    if join is None:
        return NoDocs()
    children = join.relations.children_of.get(q.parent_type)
    if children is None:
        if q.ignore_unmapped:
            return NoDocs()
        raise shard_error(
            ctx, f"[has_parent] join field [{join.path}] doesn't hold [{q.parent_type}] as a parent"
        )
    link = join.id_field(q.parent_type)
    ids, scores = _linking_ids(q.query, ctx, join.path, (q.parent_type,), link, q.score)
    counts, combined = _per_ordinal(ids, len(link_ordinals(ctx, link)[0]), scores, "max")
    keys = np.flatnonzero(counts)
    key_scores = combined[keys] if combined is not None else None
    return JoinPlan(_linked_docs(ctx, join.path, children, link, keys, key_scores), q.boost)


def plan_parent_id(q: ParentId, ctx: QueryContext) -> object:
    from leafsearch.search.query import planner  # it imports this module

    join = ctx.mapping.join if ctx.mapping is not None else None
    if join is None:
        if q.ignore_unmapped:
            return NoDocs()
        raise shard_error(ctx, f"[parent_id] no join field found for index [{ctx.index_name}]")
    parent = join.relations.parent_of.get(q.type)
    if parent is None:
        if q.ignore_unmapped:
            return NoDocs()
        raise shard_error(ctx, f"[parent_id] no relation found for child [{q.type}]")
    query = dsl.Bool(
        must=(dsl.Term(join.id_field(parent), q.id),), filter=(dsl.Term(join.path, q.type),), boost=q.boost
    )
    return planner.plan(query, ctx)


def relation_docs(view: SegmentView, join_path: str, relations: tuple[str, ...]) -> np.ndarray:
    """The live documents of a segment holding one of these relation names, ascending."""
    col = view.segment.column(join_path)
    if not isinstance(col, KeywordColumn):
        return np.zeros(0, dtype=np.int64)
    postings, starts = col.postings
    parts = [np.asarray(postings[starts[o] : starts[o + 1]]) for o in map(col.lookup, relations) if o >= 0]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    docs = np.sort(np.concatenate(parts)).astype(np.int64) if len(parts) > 1 else parts[0].astype(np.int64)
    return docs if view.live is None else docs[view.live[docs]]


def link_ordinals(ctx: QueryContext, link: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """(every linking id of the snapshot, sorted; per segment, the position there of each of its
    ids): global ordinals, built once per snapshot, so that joins compare integers."""
    segments = [view.segment for view in ctx.searcher.views]
    cached = getattr(ctx.searcher, "cached", None)
    if cached is None:  # a statistics view (DFS) over several shards' segments
        return global_ordinals(link, segments)
    return cached(("join ordinals", link), lambda: global_ordinals(link, segments))


def linked_ordinals(view_index: int, view: SegmentView, docs: np.ndarray, link: str, maps: list) -> tuple:
    """(each of `docs` once per linking id it holds, the global ordinal of that id)."""
    col = view.segment.column(link)
    if not isinstance(col, KeywordColumn) or not len(docs):
        return docs[:0], np.zeros(0, dtype=np.int64)
    counts, ords = col.ords.values_of(docs)
    return np.repeat(docs, counts), maps[view_index][ords]


def _linking_ids(
    query: dsl.Query,
    ctx: QueryContext,
    join_path: str,
    relations: tuple[str, ...],
    link: str,
    scoring: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The global ordinal of the linking id of every live document of these relations the query
    matches, over the snapshot, with its score when `scoring`."""
    from leafsearch.search.query import executor, planner  # they import this module

    inner = planner.plan(query, ctx)
    _, maps = link_ordinals(ctx, link)
    ids: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    for i, view in enumerate(ctx.searcher.views):
        docs = relation_docs(view, join_path, relations)
        if not len(docs):
            continue
        mask, doc_scores = executor.run(inner, view, ctx, scoring, 1.0)
        docs, ords = linked_ordinals(i, view, docs[mask[docs]], link, maps)
        ids.append(ords)
        if scoring:
            scores.append(doc_scores[docs])  # type: ignore[index]
    if not ids:
        return np.zeros(0, dtype=np.int64), (np.zeros(0, dtype=np.float32) if scoring else None)
    return np.concatenate(ids), (np.concatenate(scores) if scoring else None)


def _per_ordinal(
    ids: np.ndarray, n_terms: int, scores: np.ndarray | None, mode: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """How many of `ids` (global ordinals) each ordinal has, and its score combined from theirs
    by `mode` (None for `none`): O(ids + ordinals), no sort."""
    counts = np.bincount(ids, minlength=n_terms)
    if scores is None or mode == "none":
        return counts, None
    if mode in ("sum", "avg"):
        total = np.bincount(ids, weights=scores.astype(np.float64), minlength=n_terms)
        return counts, (total / np.maximum(counts, 1) if mode == "avg" else total).astype(np.float32)
    combined = np.full(n_terms, -np.inf if mode == "max" else np.inf, dtype=np.float32)
    (np.maximum if mode == "max" else np.minimum).at(combined, ids, scores)
    return counts, combined


def _linked_docs(
    ctx: QueryContext,
    join_path: str,
    relations: tuple[str, ...],
    link: str,
    keys: np.ndarray,
    key_scores: np.ndarray | None,
) -> Matches:
    """The live documents of these relations whose linking id is one of `keys` (global
    ordinals), by segment, scored by their key's score."""
    out: Matches = {}
    if not len(keys):
        return out
    terms, maps = link_ordinals(ctx, link)
    position = np.full(len(terms), -1, dtype=np.int64)
    position[keys] = np.arange(len(keys))
    for i, view in enumerate(ctx.searcher.views):
        if not len(maps[i]) or not (position[maps[i]] >= 0).any():
            continue
        docs, ords = linked_ordinals(i, view, relation_docs(view, join_path, relations), link, maps)
        at = position[ords]
        hit = at >= 0
        if hit.any():
            out[view.segment.name] = (docs[hit], key_scores[at[hit]] if key_scores is not None else None)
    return out


def exec_join(plan: JoinPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    """The plan's documents of this segment, with their join scores (a constant without any)."""
    return found_docs(plan.matches.get(view.segment.name), view, scoring, boost * plan.boost)
