"""The `percolate` query: the documents of a `percolator` field whose stored query matches one of
the given documents.

As Elasticsearch runs each candidate query on a Lucene MemoryIndex of the given documents, the
documents are indexed here into a memory segment by the index's own mapping (a copy of it: their
new fields do not join the index's mapping) and every stored query is planned and run on it by
the engine's executor. Each segment keeps its distinct queries once (index/percolator.py), so a
query is parsed, planned and run once per shard however many documents hold it. A match scores as
its stored query scores on the given documents (the best of them), as Elasticsearch scores it.

Planning does it all, once per shard snapshot (like kNN): the plan holds each segment's matching
documents, their scores and the slots (positions of the given documents) each one matched, which
the fetch shows as `_percolator_document_slot`.
Cost: O(distinct stored queries) query executions on a segment of len(documents) documents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from leafsearch.index.columns import KeywordColumn
from leafsearch.index.memory_segment import memory_searcher
from leafsearch.index.percolator import PercolatorField
from leafsearch.index.searcher import SegmentView
from leafsearch.request.highlight import HighlightSpec
from leafsearch.request.query_dsl import Percolate, Query, parse_query, queries_within
from leafsearch.search.query.context import QueryContext, failed
from leafsearch.search.query.fields import field_type, type_of
from leafsearch.search.query.masks import Result, empty, mask_of

#: segment name -> (docs ascending, scores float32, the slots each doc matched)
Hits = dict[str, tuple[np.ndarray, np.ndarray, list[tuple[int, ...]]]]


@dataclass(frozen=True, slots=True, eq=False)
class PercolatePlan:
    """The shard's documents whose stored query matched, by segment."""

    field: str
    name: str  # the key of `_percolator_document_slot` (the query's `name`, else its field)
    hits: Hits
    boost: float = 1.0


class _Documents:
    """The given documents in a memory segment, and what each stored query does on them."""

    def __init__(
        self, q: Percolate, mapping: Any, now_millis: int, index_name: str | None, index_uuid: str
    ) -> None:
        own = type(mapping).from_body(mapping.to_body(), mapping.analysis)  # their new fields stay here
        searcher = memory_searcher(own, list(q.documents))
        self.view = searcher.views[0]
        self.ctx = QueryContext(
            own, searcher, now_millis=now_millis, index_name=index_name, index_uuid=index_uuid
        )
        self.outcome: dict[bytes, tuple[float, tuple[int, ...]] | None] = {}

    def run(self, stored: bytes) -> tuple[float, tuple[int, ...]] | None:
        """(best score, matched slots) of a stored query's JSON, None when it matches none."""
        from leafsearch.search.query import executor, planner  # they import this module

        if stored not in self.outcome:
            plan = planner.plan(parse_query(orjson.loads(stored)), self.ctx)
            mask, scores = executor.run(plan, self.view, self.ctx, True, 1.0)
            slots = np.flatnonzero(mask)
            best = float(scores[slots].max()) if len(slots) and scores is not None else 0.0
            self.outcome[stored] = (best, tuple(slots.tolist())) if len(slots) else None
        return self.outcome[stored]


def plan_percolate(q: Percolate, ctx: QueryContext) -> PercolatePlan:
    if not q.documents:
        raise failed(ctx, "illegal_state_exception", "query builder must be rewritten first")
    ft = field_type(ctx, q.field)
    if ft is None:
        raise failed(ctx, "query_shard_exception", f"field [{q.field}] does not exist")
    if not isinstance(ft, PercolatorField):
        raise failed(
            ctx,
            "query_shard_exception",
            f"expected field [{q.field}] to be of type [percolator], but is of type [{type_of(ft)}]",
        )
    run = _Documents(q, ctx.mapping, ctx.now_millis, ctx.index_name, ctx.index_uuid).run
    hits: Hits = {}
    for view in ctx.searcher.views:
        col = view.segment.column(q.field)
        if not isinstance(col, KeywordColumn) or not len(col.terms):
            continue
        docs, ords = col.ords.flat
        if view.live is not None:
            alive = view.live[docs]
            docs, ords = docs[alive], ords[alive]
        used = np.unique(ords)
        found = {int(o): run(bytes(col.terms[o])) for o in used.tolist()}
        matched = np.array([found[o] is not None for o in used.tolist()], dtype=bool)
        keep = matched[np.searchsorted(used, ords)]
        docs, ords = docs[keep].astype(np.int64), ords[keep]
        if len(docs):
            results = [found[o] for o in ords.tolist()]
            scores = np.array([r[0] for r in results], dtype=np.float32)  # type: ignore[index]
            hits[view.segment.name] = (docs, scores, [r[1] for r in results])  # type: ignore[index]
    return PercolatePlan(q.field, q.name or q.field, hits, q.boost)


def exec_percolate(
    plan: PercolatePlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    found = plan.hits.get(view.segment.name)
    if found is None:
        return empty(view, scoring)
    docs, scores, _ = found
    mask = mask_of(docs, view.max_doc)
    if not scoring:
        return mask, None
    out = np.zeros(view.max_doc, dtype=np.float32)
    out[docs] = scores * np.float32(boost * plan.boost)
    return mask, out


#: What a hit shows of the given documents it matched (Elasticsearch's matched-slot fetch phase).
SLOT_FIELD = "_percolator_document_slot"


def document_slots(
    query: Query, mapping: Any, index_name: str | None
) -> Callable[[SegmentView, int], dict[str, list[int]]] | None:
    """For a search holding `percolate` queries: a function giving a hit (its segment view and
    doc) its `_percolator_document_slot` fields, the positions of the given documents its stored
    query matches (one field per query, suffixed by its name when there are several); None for
    any other search. Each stored query runs once per fetch on the memory segment."""
    nodes = [q for q in queries_within(query) if isinstance(q, Percolate) and q.documents]
    if not nodes:
        return None
    prepared = [
        (
            SLOT_FIELD if len(nodes) == 1 else f"{SLOT_FIELD}_{q.name or q.field}",
            q.field,
            _Documents(q, mapping, 0, index_name, "_na_"),
        )
        for q in nodes
    ]

    def slots(view: SegmentView, doc: int) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for key, field, documents in prepared:
            stored = _stored_query(view, doc, field)
            found = documents.run(stored) if stored is not None else None
            if found is not None:
                out[key] = list(found[1])
        return out

    return slots


def _stored_query(view: SegmentView, doc: int, field: str) -> bytes | None:
    col = view.segment.column(field)
    if not isinstance(col, KeywordColumn):
        return None
    ords = col.ords.doc_values(doc)
    return bytes(col.terms[int(ords[0])]) if len(ords) else None


def document_highlights(
    query: Query, spec: HighlightSpec, mapping: Any, index_name: str | None, settings: dict
) -> Callable[[SegmentView, int], dict[str, list[str]]] | None:
    """For a search holding `percolate` queries: a function giving a hit its highlights of the
    given documents its stored query matched (Elasticsearch's percolator highlighting), keyed by
    field, prefixed by the slot when several documents were given and by the query's name when
    several percolate queries were; None for any other search."""
    from leafsearch.search.highlight import Highlighter  # it plans queries through this package

    nodes = [q for q in queries_within(query) if isinstance(q, Percolate) and q.documents]
    if not nodes:
        return None
    prepared = [
        ("" if len(nodes) == 1 else f"{q.name or q.field}_", q, _Documents(q, mapping, 0, index_name, "_na_"))
        for q in nodes
    ]

    def highlights(view: SegmentView, doc: int) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for prefix, q, documents in prepared:
            stored = _stored_query(view, doc, q.field)
            found = documents.run(stored) if stored is not None else None
            if stored is None or found is None:
                continue
            highlighter = Highlighter.prepare(
                spec, parse_query(orjson.loads(stored)), documents.ctx, settings
            )
            for slot in found[1]:
                for key, fragments in (highlighter.render(q.documents[slot], slot) or {}).items():
                    out[prefix + ("" if len(q.documents) == 1 else f"{slot}_") + key] = fragments
        return out

    return highlights
