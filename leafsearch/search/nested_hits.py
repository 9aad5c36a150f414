"""`inner_hits` of `nested` queries: each hit's nested objects its `nested` query matched.

Added to a page's hits by each shard's fetch (fetch_phase.py), on the snapshot the page was found
on, as Elasticsearch's inner hits fetch sub-phase adds them: so a shard in a Ray actor adds its
own. Per nested query and segment of the page, the inner query runs once over that segment's
child documents; each hit's matching children are the run of them
its parent owns (children of a parent are consecutive), scored, sorted and paged by the
`inner_hits` options. Each inner hit shows its parent's `_index` and `_id`, `_nested` (the path and
the object's position in the parent's array, as Elasticsearch gives it) and the object's source.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson

from leafsearch.common.rawjson import RawJSON
from leafsearch.request.query_dsl import Nested, outermost
from leafsearch.request.search_types import SCORE, InnerHitsSpec, SearchRequest, SortSpec
from leafsearch.search import fetch
from leafsearch.search.collapse import check_inner_window
from leafsearch.search.hitlist import shard_query_context
from leafsearch.search.query import executor, planner
from leafsearch.search.query.nested_queries import nested_level
from leafsearch.search.targets import Target
from leafsearch.unsupported import NotSupported


def wanted(request: SearchRequest) -> list[Nested]:
    """The request's `nested` queries asking for inner hits, outside any other `nested` query."""
    return _outermost(request.query)


def _outermost(query: Any) -> list[Nested]:
    """The `nested` queries of a query tree asking for inner hits, not inside another `nested`
    query: one inside another's query shows within the other's inner hits; one inside a `nested`
    query without inner hits shows nowhere (as in Elasticsearch)."""
    return [q for q in outermost(query, Nested) if q.inner_hits is not None][::-1]


def check(request: SearchRequest, targets: list[Target]) -> None:
    """What each shard checks of a nested query's inner hits before it runs: their window (of
    those within other nested queries' inner hits too)."""
    queries = wanted(request)
    while queries:
        for query in queries:
            for target in {id(t.index): t for t in targets}.values():
                check_inner_window(target, query.inner_hits)
        queries = [q for query in queries for q in _outermost(query.query)]


def hits_of(
    target: Target, view: Any, doc: int, queries: list[Nested], hit: dict, runs: dict
) -> dict[str, Any]:
    """One hit's `inner_hits` of `queries` (`wanted`): its document `doc` of `view`'s segment;
    `runs` keeps each query's run over a segment's children for the page's other hits."""
    ctx = runs.get(id(target))
    if ctx is None:
        ctx = runs[id(target)] = shard_query_context(target, int(time.time() * 1000), True)
    return {q.inner_hits.name: _hits_of(ctx, view, doc, q, hit, runs, None) for q in queries}


def _hits_of(
    ctx: Any, view: Any, doc: int, q: Nested, hit: dict, runs: dict, above: dict | None
) -> dict[str, Any]:
    """The inner hits of `q` of document `doc` (at the level of `ctx`, in `view`'s segment);
    `above`: the `_nested` identity of that document when it is itself a nested object."""
    spec: InnerHitsSpec = q.inner_hits
    key = (id(ctx), id(view.segment), q)
    if key not in runs:
        level = nested_level(ctx, q.path)
        found = level.children.get(view.segment)
        if found is None:
            runs[key] = None
        else:
            children, parents = found
            mask, scores = executor.run(planner.plan(q.query, level.ctx), children, level.ctx, True, 1.0)
            runs[key] = (level.ctx, children, parents, mask, scores)
    run = runs[key]
    matched = np.empty(0, dtype=np.int64)
    lo = 0
    if run is not None:
        child_ctx, children, parents, mask, scores = run
        lo, hi = np.searchsorted(parents, [doc, doc + 1])
        matched = lo + np.flatnonzero(mask[lo:hi])
    total = {"value": len(matched), "relation": "eq"}
    if not len(matched):
        return {"hits": {"total": total, "max_score": None, "hits": []}}
    child_scores = scores[matched]
    order, sort_values = _order(spec.sort, children.segment, matched, child_scores)
    page = order[spec.from_ : spec.from_ + spec.size]
    sources = children.segment.sources(matched[page])
    rendered = []
    by_field = bool(spec.sort) and spec.sort[0].field != SCORE
    deeper = _outermost(q.query)
    # Below another nested object, the identity names the path from it (Elasticsearch's).
    name = q.path if ctx.nested_path is None else q.path[len(ctx.nested_path) + 1 :]
    for position, source in zip(page.tolist(), sources, strict=True):
        inner: dict[str, Any] = {"_index": hit["_index"], "_id": hit["_id"]}
        inner["_nested"] = _identity(above, name, int(matched[position] - lo))
        inner["_score"] = None if by_field and not spec.track_scores else float(child_scores[position])
        shown = _source(source, q.path, spec)
        if shown is not None:
            inner["_source"] = shown
        if sort_values is not None:
            inner["sort"] = [values[position] for values in sort_values]
        if deeper:
            child = int(matched[position])
            inner["inner_hits"] = {
                d.inner_hits.name: _hits_of(child_ctx, children, child, d, hit, runs, inner["_nested"])
                for d in deeper
            }
        rendered.append(inner)
    max_score = None if by_field and not spec.track_scores else float(child_scores.max())
    return {"hits": {"total": total, "max_score": max_score, "hits": rendered}}


def _identity(above: dict | None, field: str, offset: int) -> dict[str, Any]:
    """A nested object's `_nested`: the field and offset, within its parent object's identity."""
    own: dict[str, Any] = {"field": field, "offset": offset}
    if above is None:
        return own
    copy = dict(above)
    copy["_nested"] = _identity(above.get("_nested"), field, offset) if "_nested" in above else own
    return copy


def _order(
    sort: tuple[SortSpec, ...], segment: Any, matched: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray, list[list] | None]:
    """The matched children's order (best first; ties in document order) and, when sorted by
    fields, each child's sort values."""
    if not sort or (len(sort) == 1 and sort[0].field == SCORE and sort[0].descending):
        return np.lexsort((matched, -scores)), None
    keys, values = [], []
    for spec in sort:
        if spec.field == SCORE:
            column = scores.astype(np.float64)
            present = np.ones(len(matched), dtype=bool)
        else:
            column, present = _child_values(segment, spec, matched)
        shown = [v.item() if p else None for v, p in zip(column, present, strict=True)]
        values.append(shown)
        rank = np.unique(column, return_inverse=True)[1].reshape(-1).astype(np.int64)
        if spec.descending:
            rank = -rank
        missing_first = spec.missing == "_first"
        big = len(matched) + 1
        keys.append(np.where(present, rank, -big if missing_first else big))
    order = np.lexsort((matched, *reversed(keys)))
    return order, values


def _child_values(segment: Any, spec: SortSpec, matched: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    column = segment.column(spec.field)
    mode = spec.mode or ("max" if spec.descending else "min")
    if column is None:
        return np.zeros(len(matched)), np.zeros(len(matched), dtype=bool)
    if hasattr(column, "ords"):
        ords, present = column.ords.per_doc(mode)
        terms = np.asarray(column.terms)[np.asarray(ords)[matched]]
        return np.array([t.decode() for t in terms], dtype=object), present[matched]
    if hasattr(column, "doc_values"):
        values, present = column.doc_values.per_doc(mode)
        return np.asarray(values)[matched], present[matched]
    raise NotSupported(f"[inner_hits] sorted by the text field [{spec.field}]")


def _source(raw: bytes, path: str, spec: InnerHitsSpec) -> RawJSON | None:
    """The object's source, filtered by the options' `_source` as Elasticsearch filters it: its
    patterns name full paths, so the object is filtered where it sits and then taken out."""
    if not spec.source.fetch:
        return None
    if not spec.source.filtering:
        return RawJSON(raw)
    wrapped = orjson.loads(raw)
    for name in reversed(path.split(".")):
        wrapped = {name: wrapped}
    filtered = fetch.filter_source(orjson.dumps(wrapped), spec.source)
    node: Any = orjson.loads(filtered) if filtered is not None else {}
    for name in path.split("."):
        node = node.get(name, {}) if isinstance(node, dict) else {}
    return RawJSON(orjson.dumps(node))
