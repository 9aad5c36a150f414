"""Planning full-text queries on one field (`match`, `match_phrase`, `match_phrase_prefix`): the
query text analyzed into terms, each term scored with BM25 (or expanded by fuzziness), phrases
kept as terms at relative positions. On a non-text field they behave like `term`."""

from __future__ import annotations

from typing import Any

import numpy as np

from leafsearch.errors import QueryShardError
from leafsearch.index import analyzers
from leafsearch.index.columns import TextColumn
from leafsearch.request.query_dsl import Match, MatchPhrase, MatchPhrasePrefix, Scalar, scalar_text
from leafsearch.search.query.clauses import check_clauses
from leafsearch.search.query.context import QueryContext, failed
from leafsearch.search.query.fields import field_type, searchable
from leafsearch.search.query.fuzzy import fuzzy_edits, fuzzy_plan
from leafsearch.search.query.plans import AllDocs, BoolPlan, NoDocs, Phrase, ScoredTerm
from leafsearch.search.query.term_queries import term_plan
from leafsearch.search.query.term_selection import prefix_range
from leafsearch.search.query.values import min_should_match

_METADATA_TERMS = ("_id", "_index")  # searchable by value, not in the mapping


def search_analyzer(
    ctx: QueryContext, analyzer: str | None, field: str | None = None, quote: bool = False
) -> analyzers.Analyzer:
    """What analyses a query text: the query's `analyzer` (the index's or a built-in one), else the
    field's search analyzer (`search_quote_analyzer` for phrases), else the index's default."""
    mapping = ctx.mapping
    if analyzer is not None:
        found = mapping.analysis.analyzer(analyzer) if mapping is not None else analyzers.STANDARD
        if found is None:
            raise failed(ctx, "illegal_argument_exception", f"failed to find analyzer [{analyzer}]")
        return found
    ft = field_type(ctx, field) if field is not None else None
    if ft is not None and ft.kind == "text":
        return ft.search_quote_analyzer if quote else ft.search_analyzer
    return mapping.analysis.default_search if mapping is not None else analyzers.STANDARD


def analyze(ctx: QueryContext, analyzer: str | None, text: str, field: str | None = None) -> list[str]:
    return search_analyzer(ctx, analyzer, field).terms(text)


def _zero_terms(option: str, boost: float) -> Any:
    return AllDocs(boost) if option == "all" else NoDocs()


def _not_text_plan(ctx: QueryContext, q: Match | MatchPhrase | MatchPhrasePrefix, lenient: bool) -> Any:
    """The plan of a full-text query on a field that is not a text field, which then behaves like
    `term` (`lenient`: a value the field refuses matches nothing); None for a text field."""
    if q.field in _METADATA_TERMS:
        return term_plan(ctx, q.field, q.query, q.boost)
    ft = field_type(ctx, q.field)
    if ft is None:
        return NoDocs()
    if ft.kind != "text":
        return _lenient_term(ctx, q.field, q.query, q.boost, lenient)
    searchable(ctx, ft, q.field, needs_index=True)
    return None


def plan_match(q: Match, ctx: QueryContext) -> Any:
    plan = _not_text_plan(ctx, q, q.lenient)
    if plan is not None:
        return plan
    tokens, positions = search_analyzer(ctx, q.analyzer, q.field).positions([scalar_text(q.query)], 0)
    if not tokens:
        return _zero_terms(q.zero_terms_query, q.boost)
    if len(tokens) > 1:
        check_clauses(ctx, len(tokens))
    # Terms at one position (synonyms, stacked tokens) are alternatives: one clause between them.
    groups: list[list[Any]] = []
    for i, token in enumerate(tokens):
        plan = _match_token(ctx, q, token)
        if i and positions[i] == positions[i - 1]:
            groups[-1].append(plan)
        else:
            groups.append([plan])
    clauses = tuple(g[0] if len(g) == 1 else BoolPlan(should=tuple(g)) for g in groups)
    if len(clauses) == 1:
        return _boost_plan(clauses[0], q.boost)
    if q.operator == "and":
        return BoolPlan(must=clauses, boost=q.boost)
    min_should = 0
    if q.minimum_should_match is not None:
        min_should = min_should_match(len(clauses), q.minimum_should_match, ctx)
    return BoolPlan(should=clauses, min_should=min_should, boost=q.boost)


def _boost_plan(plan: Any, boost: float) -> Any:
    if boost == 1.0:
        return plan
    return BoolPlan(must=(plan,), boost=boost)


def _lenient_term(ctx: QueryContext, name: str, value: Scalar, boost: float, lenient: bool) -> Any:
    try:
        return term_plan(ctx, name, value, boost)
    except QueryShardError:
        if lenient:
            return NoDocs()
        raise


def _match_token(ctx: QueryContext, q: Match, token: str) -> Any:
    edits = fuzzy_edits(ctx, q.fuzziness, token)
    if edits == 0:
        return ScoredTerm(q.field, "text", token)
    limit = min(q.max_expansions, ctx.max_clause_count)  # Lucene's top-terms rewrite caps it so
    return fuzzy_plan(ctx, q.field, token, edits, q.prefix_length, limit)


def plan_match_phrase(q: MatchPhrase | MatchPhrasePrefix, ctx: QueryContext) -> Any:
    plan = _not_text_plan(ctx, q, lenient=False)
    if plan is not None:
        return plan
    tokens, at = search_analyzer(ctx, q.analyzer, q.field, quote=True).positions([scalar_text(q.query)], 0)
    if not tokens:
        return _zero_terms(q.zero_terms_query, q.boost)
    # Terms at one position (synonyms, stacked tokens) are alternatives of one slot.
    slots: list[tuple[str, ...]] = []
    positions: list[int] = []
    for token, position in zip(tokens, at, strict=True):
        if positions and positions[-1] == position:
            slots[-1] = (*slots[-1], token)
        else:
            slots.append((token,))
            positions.append(position)
    if isinstance(q, MatchPhrasePrefix):
        expansions = _prefix_expansions(ctx, q.field, tokens[-1], q.max_expansions)
        if not expansions:
            return NoDocs()
        slots[-1] = expansions
    if len(slots) == 1:
        terms = tuple(ScoredTerm(q.field, "text", t) for t in slots[0])
        return _boost_plan(terms[0], q.boost) if len(terms) == 1 else BoolPlan(should=terms, boost=q.boost)
    return Phrase(q.field, tuple(slots), tuple(p - positions[0] for p in positions), q.slop, q.boost)


def _prefix_expansions(ctx: QueryContext, name: str, prefix: str, limit: int) -> tuple[str, ...]:
    """The first `limit` terms of the shard starting with `prefix`, in term order."""
    key = prefix.encode()
    found: set[bytes] = set()
    for view in ctx.searcher.views:
        col = view.segment.column(name)
        if isinstance(col, TextColumn):
            lo, hi = prefix_range(col.terms, key)
            found.update(np.asarray(col.terms[lo : min(hi, lo + limit)]).tolist())
    return tuple(t.decode() for t in sorted(found)[:limit])
