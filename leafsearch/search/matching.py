"""Query execution: a query tree becomes, per segment, a dense match mask and dense float32 scores.

Work happens in two steps. `prepare` turns the query DSL tree into a plan for one shard
(`search.query.planner`): field types are looked up in the mapping, values parsed for their field
(numbers, dates with date math, booleans), text analyzed, wildcards in field names expanded,
`multi_match` and the query-string syntaxes rewritten into simpler queries, and every refusal
raised, as Elasticsearch does when it builds a Lucene query on each shard. The plan is cached on
the context, so each segment of the shard then only runs numpy over its columns
(`search.query.executor`): postings scatter into masks (`mask[docs] = True`), BM25 scores are
computed on the postings and scattered, doc values compare in one vectorized expression, and
boolean logic combines whole arrays. Nothing loops per document.

Scores follow Lucene's: BM25 for terms and phrases on text fields and for terms on keyword and
boolean fields, constant `boost` for ranges, term sets, prefixes, wildcards, exists, ids and numeric
or date terms, sums for `bool` (filter and must_not clauses do not score), max plus tie-breaker for
`dis_max`. Boosts are passed down to the leaves, as Lucene's weights do. The modules of
`search.query` name the approximations they make.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leafsearch.index.searcher import SegmentView
from leafsearch.request.query_dsl import Query, query_key
from leafsearch.search.query.clauses import check_nested_clauses
from leafsearch.search.query.context import QueryContext
from leafsearch.search.query.executor import matching_docs, run
from leafsearch.search.query.planner import plan
from leafsearch.search.query.values import min_should_match

__all__ = ["QueryContext", "execute", "execute_docs", "min_should_match", "prepare", "query_key"]


def prepare(query: Query, ctx: QueryContext) -> Any:
    """The shard's plan of a query (cached on the context); raises the query's shard errors."""
    key = query_key(query)
    cached = ctx._plans.get(key)
    if cached is None:
        planned = plan(query, ctx)
        check_nested_clauses(planned, ctx)
        cached = ctx._plans[key] = planned
    return cached


def execute(planned: Any, view: SegmentView, ctx: QueryContext) -> tuple[np.ndarray, np.ndarray | None]:
    """(mask, scores) of a query's plan (`prepare`) over one segment: bool and float32 arrays of
    `view.max_doc`; scores are None when the context needs none. Deleted documents are left to
    the caller. The plan, not the query: callers prepare once per shard and run it on each of
    its segments (looking a plan up by its query's key costs a repr of the whole tree)."""
    mask, scores = run(planned, view, ctx, ctx.needs_scores, 1.0)
    if ctx.needs_scores and scores is None:
        scores = np.zeros(view.max_doc, dtype=np.float32)
    return mask, scores if ctx.needs_scores else None


def execute_docs(planned: Any, view: SegmentView, ctx: QueryContext) -> np.ndarray | None:
    """The documents (ascending) a plan matches in one segment when they come without a mask
    (a filtered conjunction led by a selective term: `executor.matching_docs`), else None (then
    `execute`). Deleted documents are left to the caller, as by `execute`."""
    return matching_docs(planned, view, ctx)
