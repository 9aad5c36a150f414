"""Queries that Elasticsearch rewrites into simpler ones before planning: `multi_match` (one query
per field, combined as its `type` says), `query_string` and `simple_query_string` (parsed, each
leaf becoming a query over its field or the default fields).

Approximations, knowingly: `multi_match` of type `cross_fields` scores each term as the best of its
fields without blending document frequencies; `bool_prefix` runs as `most_fields`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from leafsearch.common.memo import memo
from leafsearch.errors import ElasticError
from leafsearch.request import query_string as qs
from leafsearch.request.query_dsl import (
    Bool,
    DisMax,
    Exists,
    Match,
    MatchAll,
    MatchNone,
    MatchPhrase,
    MatchPhrasePrefix,
    MultiMatch,
    Prefix,
    Query,
    QueryString,
    Range,
    Regexp,
    SimpleQueryString,
    Term,
    Wildcard,
    scalar_text,
)
from leafsearch.search.query.context import QueryContext, failed, shard_error
from leafsearch.search.query.fields import all_fields, expand_fields, field_type
from leafsearch.search.query.text_queries import analyze


@dataclass(frozen=True, slots=True)
class Lenient(Query):
    """A query whose field-level errors mean "no match" (lenient query strings, all-field searches)."""

    inner: Query


def rewrite_multi_match(q: MultiMatch, ctx: QueryContext) -> Query:
    specs = q.fields or ctx.default_fields
    fields = expand_fields(ctx, specs)
    lenient = q.lenient if q.lenient is not None else all_fields(specs)
    if not fields:
        return MatchNone()
    if q.type == "cross_fields":
        return _cross_fields(q, ctx, fields, lenient)
    queries: list[Query] = []
    for name, field_boost in fields:
        if q.type in ("phrase", "phrase_prefix"):
            cls = MatchPhrase if q.type == "phrase" else MatchPhrasePrefix
            extra = {"max_expansions": q.max_expansions} if q.type == "phrase_prefix" else {}
            query: Query = cls(
                name,
                q.query,
                slop=q.slop,
                zero_terms_query=q.zero_terms_query,
                analyzer=q.analyzer,
                boost=field_boost,
                **extra,
            )
        else:
            query = Match(
                name,
                q.query,
                operator=q.operator,
                minimum_should_match=q.minimum_should_match,
                zero_terms_query=q.zero_terms_query,
                fuzziness=q.fuzziness,
                prefix_length=q.prefix_length,
                max_expansions=q.max_expansions,
                lenient=lenient,
                analyzer=q.analyzer,
                boost=field_boost,
            )
        queries.append(Lenient(query) if lenient else query)
    if q.type in ("most_fields", "bool_prefix"):
        return Bool(should=tuple(queries), boost=q.boost)
    tie = q.tie_breaker if q.tie_breaker is not None else 0.0
    return DisMax(tuple(queries), tie, q.boost)


def _cross_fields(q: MultiMatch, ctx: QueryContext, fields: list[tuple[str, float]], lenient: bool) -> Query:
    """Each analyzed term as the best of its fields, terms combined by the operator (approximate:
    Elasticsearch also blends the term statistics of the fields)."""
    tokens = analyze(ctx, q.analyzer, scalar_text(q.query))
    if not tokens:
        return MatchAll(boost=q.boost) if q.zero_terms_query == "all" else MatchNone()
    tie = q.tie_breaker if q.tie_breaker is not None else 0.0
    per_token = []
    for token in tokens:
        alternatives = tuple(
            Lenient(Match(name, token, lenient=lenient, boost=b)) if lenient else Match(name, token, boost=b)
            for name, b in fields
        )
        per_token.append(DisMax(alternatives, tie))
    if q.operator == "and":
        return Bool(must=tuple(per_token), boost=q.boost)
    return Bool(should=tuple(per_token), minimum_should_match=q.minimum_should_match, boost=q.boost)


@memo(256)
def _parse_classic(text: str, operator: str, allow_leading_wildcard: bool) -> qs.Node | None:
    return qs.parse_query_string(text, operator, allow_leading_wildcard)


def rewrite_query_string(q: QueryString, ctx: QueryContext) -> Query:
    try:
        tree = _parse_classic(q.query, q.default_operator, q.allow_leading_wildcard)
    except qs.QuerySyntaxError as e:
        cause = ElasticError(str(e), error_type="parse_exception", status=400)
        raise shard_error(ctx, f"Failed to parse query [{q.query}]", cause) from None
    if tree is None:
        return MatchNone()
    specs = q.fields or ((q.default_field,) if q.default_field else ctx.default_fields)
    # Unless the query says: lenient over all fields, else as `index.query_string.lenient` says.
    lenient = q.lenient if q.lenient is not None else all_fields(specs) or ctx.query_string_lenient
    defaults = expand_fields(ctx, specs)
    builder = _StringLeafBuilder(
        ctx,
        defaults,
        lenient,
        q.default_operator,
        q.minimum_should_match,
        q.tie_breaker,
        q.type,
        q.phrase_slop,
        q.time_zone,
        q.analyzer,
    )
    query = qs.to_query(tree, builder, q.default_operator)
    return _top_level(query, q.minimum_should_match, q.boost)


def rewrite_simple_query_string(q: SimpleQueryString, ctx: QueryContext) -> Query:
    tree = qs.parse_simple_query_string(q.query, q.default_operator)
    if tree is None:
        return MatchNone()
    specs = q.fields or ctx.default_fields
    lenient = q.lenient if q.lenient is not None else all_fields(specs)
    defaults = expand_fields(ctx, specs)
    builder = _StringLeafBuilder(
        ctx, defaults, lenient, q.default_operator, None, 1.0, "most_fields", 0, None, q.analyzer
    )
    query = qs.to_query(tree, builder, q.default_operator)
    return _top_level(query, q.minimum_should_match, q.boost)


def _top_level(query: Query, msm: str | None, boost: float) -> Query:
    if msm is not None and isinstance(query, Bool):
        query = replace(query, minimum_should_match=msm)
    if boost != 1.0:
        query = Bool(must=(query,), boost=boost)
    return query


@dataclass
class _StringLeafBuilder:
    """Builds the query DSL of one query-string leaf over its fields (the leaf's own field, or the
    default fields), combining fields as `multi_match` of the query's `type` does."""

    ctx: QueryContext
    defaults: list[tuple[str, float]]
    lenient: bool
    operator: str
    msm: str | None
    tie_breaker: float
    type: str
    phrase_slop: int
    time_zone: str | None
    analyzer: str | None

    def __call__(self, leaf: qs.Leaf) -> Query | list[Query] | None:
        if leaf.kind == "all":
            return MatchAll()
        if leaf.kind == "exists":
            return Exists(leaf.field or "*")
        if leaf.kind == "regexp":
            self._check_regex_length(leaf.text)
        fields = self.defaults if leaf.field is None else expand_fields(self.ctx, [leaf.field])
        if leaf.field is not None and not fields:
            return MatchNone()
        if leaf.kind == "text" and len(fields) == 1:
            flat = self._flat_terms(leaf, *fields[0])
            if flat is not None:
                return flat
        queries = [q for name, boost in fields if (q := self._field_query(leaf, name, boost)) is not None]
        if not queries:
            return None
        if len(queries) == 1:
            return queries[0]
        if self.type == "most_fields":
            return Bool(should=tuple(queries))
        return DisMax(tuple(queries), self.tie_breaker)

    def _check_regex_length(self, text: str) -> None:
        """QueryStringQueryParser checks a regex's length before it expands its fields, leniency
        aside."""
        length = len(text.encode("utf-16-le")) // 2  # Java's String.length()
        limit = self.ctx.max_regex_length
        if length > limit:
            raise failed(
                self.ctx,
                "illegal_argument_exception",
                f"The length of regex [{length}] used in the [query_string] has exceeded the allowed "
                f"maximum of [{limit}]. This maximum can be set by changing the [index.max_regex_length] "
                "index level setting.",
            )

    def _flat_terms(self, leaf: qs.Leaf, name: str, boost: float) -> list[Query] | None:
        """Lucene adds the words of one text field as separate term clauses."""
        ft = field_type(self.ctx, name)
        if ft is None or ft.kind != "text":
            return None
        tokens = analyze(self.ctx, self.analyzer, leaf.text)
        return [Term(name, t, boost=boost) for t in tokens]

    def _field_query(self, leaf: qs.Leaf, name: str, boost: float) -> Query | None:
        ft = field_type(self.ctx, name)
        text_field = ft is not None and ft.kind == "text"
        kind = leaf.kind
        if kind == "text":
            query: Query = Match(
                name,
                leaf.text,
                operator=self.operator,
                minimum_should_match=self.msm,
                lenient=self.lenient,
                analyzer=self.analyzer,
                boost=boost,
            )
        elif kind == "fuzzy":
            query = Match(name, leaf.text, fuzziness=leaf.fuzziness, lenient=self.lenient, boost=boost)
        elif kind == "phrase":
            slop = self.phrase_slop if leaf.slop is None else leaf.slop
            query = MatchPhrase(name, leaf.text, slop=slop, analyzer=self.analyzer, boost=boost)
        elif kind == "prefix":
            query = Prefix(name, leaf.text.lower() if text_field else leaf.text, boost=boost)
        elif kind == "wildcard":
            query = Wildcard(name, leaf.text, boost=boost)
        elif kind == "regexp":
            query = Regexp(name, leaf.text, boost=boost)
        else:
            query = Range(
                name,
                leaf.lower,
                leaf.upper,
                leaf.include_lower,
                leaf.include_upper,
                time_zone=self.time_zone,
                boost=boost,
            )
        return Lenient(query) if self.lenient else query
