"""Planning: a query tree resolved against one shard's mapping into plan nodes, as Elasticsearch
builds a Lucene query on each shard (field types looked up, values parsed, text analyzed, and
every refusal raised). Compound queries are planned here; leaves by the term-level and full-text
planners; `multi_match` and the query strings are first rewritten into simpler queries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leafsearch.errors import ElasticError, IllegalArgument
from leafsearch.request import geo_dsl
from leafsearch.request import join_queries as join_dsl
from leafsearch.request import query_dsl as dsl
from leafsearch.search.query import (
    feature_queries,
    geo_queries,
    join_queries,
    nested_queries,
    percolate_queries,
    rewrites,
    term_queries,
    text_queries,
    vector_queries,
)
from leafsearch.search.query.clauses import check_clauses
from leafsearch.search.query.context import QueryContext
from leafsearch.search.query.plans import AllDocs, BoolPlan, ConstPlan, DisMaxPlan, NoDocs, ScriptPlan
from leafsearch.search.query.values import min_should_match
from leafsearch.unsupported import NotSupported


def plan(query: dsl.Query, ctx: QueryContext) -> Any:
    """The plan of a query on the context's shard; raises the query's shard errors."""
    handler = _PLANNERS.get(type(query))
    if handler is None:
        raise IllegalArgument(f"query [{type(query).__name__}] cannot be executed")
    return handler(query, ctx)


def _plan_bool(q: dsl.Bool, ctx: QueryContext) -> Any:
    if not (q.must or q.should or q.filter or q.must_not):
        return AllDocs(q.boost)
    check_clauses(ctx, len(q.must) + len(q.should) + len(q.filter) + len(q.must_not))
    should = tuple(plan(c, ctx) for c in q.should)
    min_should = 0
    if q.minimum_should_match is not None:
        min_should = min_should_match(len(should), q.minimum_should_match, ctx)
    must_not = tuple(plan(c, ctx) for c in q.must_not)
    filters = tuple(plan(c, ctx) for c in q.filter)
    must = tuple(plan(c, ctx) for c in q.must)
    if must_not and not (must or filters or should):
        filters = (AllDocs(),)  # Elasticsearch's adjust_pure_negative
    return BoolPlan(must, should, filters, must_not, min_should, q.boost)


def _plan_const(q: dsl.ConstantScore, ctx: QueryContext) -> Any:
    return ConstPlan(plan(q.filter, ctx), q.boost)


def _plan_dis_max(q: dsl.DisMax, ctx: QueryContext) -> Any:
    return DisMaxPlan(tuple(plan(c, ctx) for c in q.queries), q.tie_breaker, q.boost)


def _plan_lenient(q: rewrites.Lenient, ctx: QueryContext) -> Any:
    try:
        return plan(q.inner, ctx)
    except ElasticError:
        return NoDocs()


def _rewritten(rewrite: Callable[[Any, QueryContext], dsl.Query]) -> Callable[[Any, QueryContext], Any]:
    """The planner of a query that is rewritten into simpler queries first."""
    return lambda q, ctx: plan(rewrite(q, ctx), ctx)


def _unresolved_lookup(q: dsl.TermsLookup, ctx: QueryContext) -> Any:
    """Lookups are read by the coordinator in a search's `query` and `post_filter` only
    (search/terms_lookup.py)."""
    raise NotSupported("[terms] lookup in an aggregation's query")


_PLANNERS: dict[type, Callable[[Any, QueryContext], Any]] = {
    dsl.MatchAll: lambda q, ctx: AllDocs(q.boost),
    dsl.MatchNone: lambda q, ctx: NoDocs(),
    dsl.Bool: _plan_bool,
    dsl.ConstantScore: _plan_const,
    dsl.ScriptQuery: lambda q, ctx: ScriptPlan(None, q.script.source, q.script.params_json, None, q.boost),
    dsl.ScriptScore: lambda q, ctx: ScriptPlan(
        plan(q.query, ctx), q.script.source, q.script.params_json, q.min_score, q.boost
    ),
    dsl.DisMax: _plan_dis_max,
    rewrites.Lenient: _plan_lenient,
    dsl.Term: term_queries.plan_term,
    dsl.Terms: term_queries.plan_terms,
    dsl.TermsLookup: _unresolved_lookup,
    dsl.Ids: term_queries.plan_ids,
    dsl.Range: term_queries.plan_range,
    dsl.Exists: term_queries.plan_exists,
    dsl.Prefix: term_queries.plan_prefix,
    dsl.Wildcard: term_queries.plan_wildcard,
    dsl.Regexp: term_queries.plan_regexp,
    dsl.Match: text_queries.plan_match,
    dsl.MatchPhrase: text_queries.plan_match_phrase,
    dsl.MatchPhrasePrefix: text_queries.plan_match_phrase,
    dsl.MultiMatch: _rewritten(rewrites.rewrite_multi_match),
    dsl.QueryString: _rewritten(rewrites.rewrite_query_string),
    dsl.SimpleQueryString: _rewritten(rewrites.rewrite_simple_query_string),
    dsl.Knn: vector_queries.plan_knn,
    dsl.KnnHits: vector_queries.plan_knn_hits,
    join_dsl.HasChild: join_queries.plan_has_child,
    join_dsl.HasParent: join_queries.plan_has_parent,
    join_dsl.ParentId: join_queries.plan_parent_id,
    dsl.RankFeature: feature_queries.plan_rank_feature,
    dsl.Percolate: percolate_queries.plan_percolate,
    dsl.Nested: nested_queries.plan_nested,
    geo_dsl.GeoDistance: geo_queries.plan_geo,
    geo_dsl.GeoArea: geo_queries.plan_geo,
}
