"""Query execution: a query tree becomes, per segment, a dense match mask and dense float32 scores.

Work happens in two steps. `prepare` turns the query DSL tree into a plan for one shard: field
types are looked up in the mapping, values parsed for their field (numbers, dates with date math,
booleans), text analyzed, wildcards in field names expanded, `multi_match` and the query-string
syntaxes rewritten into simpler queries, and every refusal raised, as Elasticsearch does when it
builds a Lucene query on each shard. The plan is cached on the context, so each segment of the
shard then only runs numpy over its columns: postings scatter into masks (`mask[docs] = True`),
BM25 scores are computed on the postings and scattered, doc values compare in one vectorized
expression, and boolean logic combines whole arrays. Nothing loops per document.

Scores follow Lucene's: BM25 for terms and phrases on text fields and for terms on keyword and
boolean fields, constant `boost` for ranges, term sets, prefixes, wildcards, exists, ids and numeric
or date terms, sums for `bool` (filter and must_not clauses do not score), max plus tie-breaker for
`dis_max`. Boosts are passed down to the leaves, as Lucene's weights do.

Approximations, knowingly: `multi_match` of type `cross_fields` scores each term as the best of its
fields without blending document frequencies; `bool_prefix` runs as `most_fields`; sloppy phrases
whose terms repeat are scored as if the repeats were different terms; fuzzy expansions keep the best
`max_expansions` terms by edit distance and score them with the largest document frequency among
them (Lucene's blended rewrite) and a boost of `1 - edits / length`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from leafsearch.errors import ElasticError, IllegalArgument, QueryShardError
from leafsearch.index import analysis
from leafsearch.index.columns import DocValues, KeywordColumn, NumericColumn, TextColumn
from leafsearch.index.dates import DateFormatter, parse_date_math
from leafsearch.index.searcher import Searcher, SegmentView
from leafsearch.request import query_string as qs
from leafsearch.request.query_dsl import (
    Bool,
    ConstantScore,
    DisMax,
    Exists,
    Ids,
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
    Scalar,
    SimpleQueryString,
    Term,
    Terms,
    Wildcard,
    query_key,
)
from leafsearch.search import bm25

_F32 = np.float32


@dataclass
class QueryContext:
    """What a query needs from its shard. One context serves all segments of one shard snapshot;
    it caches the prepared plan and term statistics for them."""

    mapping: Any
    searcher: Searcher
    now_millis: int = 0
    needs_scores: bool = True
    default_fields: tuple[str, ...] = ("*",)  # index.query.default_field
    index_name: str | None = None
    index_uuid: str = "_na_"
    _plans: dict[str, Any] = field(default_factory=dict, repr=False)
    _weights: dict[tuple, Any] = field(default_factory=dict, repr=False)


def prepare(query: Query, ctx: QueryContext) -> Any:
    """The shard's plan of a query (cached on the context); raises the query's shard errors."""
    key = query_key(query)
    plan = ctx._plans.get(key)
    if plan is None:
        plan = ctx._plans[key] = _plan(query, ctx)
    return plan


def execute(query: Query, view: SegmentView, ctx: QueryContext) -> tuple[np.ndarray, np.ndarray | None]:
    """(mask, scores) of a query over one segment: bool and float32 arrays of `view.max_doc`;
    scores are None when the context needs none. Deleted documents are left to the caller."""
    plan = prepare(query, ctx)
    mask, scores = _run(plan, view, ctx, ctx.needs_scores, 1.0)
    if ctx.needs_scores and scores is None:
        scores = np.zeros(view.max_doc, dtype=_F32)
    return mask, scores if ctx.needs_scores else None


# ---------------------------------------------------------------------------------------------
# Plans: queries resolved against one shard's mapping


@dataclass(frozen=True, slots=True)
class _All:
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _Nothing:
    pass


@dataclass(frozen=True, slots=True)
class _ScoredTerm:
    """One term scored with BM25. kind: text, keyword, boolean (term is then 0 or 1)."""

    field: str
    kind: str
    term: str | int
    boost: float = 1.0
    doc_freq: int | None = None  # blended document frequency of a fuzzy expansion


@dataclass(frozen=True, slots=True)
class _ValueSet:
    """Documents holding any of the values, constant score. kind: text, keyword, long, double."""

    field: str
    kind: str
    values: tuple
    boost: float = 1.0
    case_insensitive: bool = False
    precision: str | None = None  # float or half_float: compare at the field's precision


@dataclass(frozen=True, slots=True)
class _NumRange:
    """lo <= value <= hi on a numeric column (None: unbounded), constant score."""

    field: str
    lo: int | float | None
    hi: int | float | None
    precision: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _TermRange:
    """A lexicographic range over the terms of a text or keyword field, constant score."""

    field: str
    kind: str
    lo: bytes | None
    hi: bytes | None
    include_lo: bool
    include_hi: bool
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _Pattern:
    """Terms matching a prefix, wildcard or regular expression. kind: text, keyword, _id."""

    field: str
    kind: str
    mode: str
    pattern: str
    case_insensitive: bool = False
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _ExistsPlan:
    fields: tuple[str, ...]
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _IdsPlan:
    ids: tuple[str, ...]
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _Phrase:
    """Terms at relative positions (each slot: alternative terms, for phrase prefixes)."""

    field: str
    slots: tuple[tuple[str, ...], ...]
    positions: tuple[int, ...]
    slop: int = 0
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _BoolPlan:
    must: tuple = ()
    should: tuple = ()
    filter: tuple = ()
    must_not: tuple = ()
    min_should: int = 0
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _DisMaxPlan:
    queries: tuple
    tie_breaker: float = 0.0
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _ConstPlan:
    inner: Any
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class _Lenient(Query):
    """A query whose field-level errors mean "no match" (lenient query strings, all-field searches)."""

    inner: Query


# -- errors ----------------------------------------------------------------------------------


def _shard_error(ctx: QueryContext, reason: str, cause: ElasticError | None = None, *, root: bool = False):
    return QueryShardError(
        reason, index=ctx.index_name, index_uuid=ctx.index_uuid, caused_by=cause, cause_is_root=root
    )


def _failed(ctx: QueryContext, error_type: str, message: str, *, root: bool = False) -> QueryShardError:
    """Elasticsearch wraps an exception raised while building a query as "failed to create query"."""
    cause = ElasticError(message, error_type=error_type, status=400)
    return _shard_error(ctx, f"failed to create query: {message}", cause, root=root)


class _NumberFormat(ValueError):
    pass


# -- planning --------------------------------------------------------------------------------


def _plan(query: Query, ctx: QueryContext) -> Any:
    handler = _PLANNERS.get(type(query))
    if handler is None:
        raise IllegalArgument(f"query [{type(query).__name__}] cannot be executed")
    return handler(query, ctx)


def _plan_bool(q: Bool, ctx: QueryContext) -> Any:
    if not (q.must or q.should or q.filter or q.must_not):
        return _All(q.boost)
    should = tuple(_plan(c, ctx) for c in q.should)
    min_should = 0
    if q.minimum_should_match is not None:
        min_should = min_should_match(len(should), q.minimum_should_match, ctx)
    must_not = tuple(_plan(c, ctx) for c in q.must_not)
    filters = tuple(_plan(c, ctx) for c in q.filter)
    must = tuple(_plan(c, ctx) for c in q.must)
    if must_not and not (must or filters or should):
        filters = (_All(),)  # Elasticsearch's adjust_pure_negative
    return _BoolPlan(must, should, filters, must_not, min_should, q.boost)


def min_should_match(optional: int, spec: str, ctx: QueryContext | None = None) -> int:
    """Elasticsearch's minimum_should_match: "2", "-1", "75%", "-25%", "3<90%", "2<-25% 9<-3"."""
    spec = spec.strip()
    try:
        if "<" in spec:
            result = optional
            for part in re.sub(r"\s*<\s*", "<", spec).split():
                bound, value = part.split("<", 1)
                if optional <= int(bound):
                    return result
                result = min_should_match(optional, value, ctx)
            return result
        if spec.endswith("%"):
            percent = int(spec[:-1])
            calc = _F32(_F32(optional * percent) * _F32(1 / 100))
            result = optional + int(calc) if calc < 0 else int(calc)
        else:
            value = int(spec)
            result = optional + value if value < 0 else value
    except ValueError:
        if ctx is None:
            raise
        raise _failed(ctx, "number_format_exception", f'For input string: "{spec}"') from None
    return max(result, 0)


def _plan_const(q: ConstantScore, ctx: QueryContext) -> Any:
    return _ConstPlan(_plan(q.filter, ctx), q.boost)


def _plan_dis_max(q: DisMax, ctx: QueryContext) -> Any:
    return _DisMaxPlan(tuple(_plan(c, ctx) for c in q.queries), q.tie_breaker, q.boost)


def _plan_lenient(q: _Lenient, ctx: QueryContext) -> Any:
    try:
        return _plan(q.inner, ctx)
    except ElasticError:
        return _Nothing()


# -- fields ----------------------------------------------------------------------------------

_NUMERIC_LIMITS = {
    "long": (-(2**63), 2**63 - 1, "a long"),
    "integer": (-(2**31), 2**31 - 1, "an integer"),
    "short": (-(2**15), 2**15 - 1, "a short"),
    "byte": (-128, 127, "a byte"),
    "unsigned_long": (0, 2**64 - 1, "an unsigned_long"),
}
_FLOAT_TYPES = {"double": None, "float": "float", "half_float": "half_float"}
_DATE_TYPES = ("date", "date_nanos")
_LEAF_KINDS = ("text", "keyword", "long", "double")
_METADATA_TERMS = ("_id", "_index")  # searchable by value, not in the mapping


def _field_type(ctx: QueryContext, name: str) -> Any:
    return ctx.mapping.field(name) if ctx.mapping is not None else None


def _searchable(ctx: QueryContext, ft: Any, name: str, *, needs_index: bool = False) -> None:
    """Elasticsearch searches a field through its index, or through doc values when it has them;
    text fields have no doc values."""
    indexed = getattr(ft, "index", True)
    doc_values = getattr(ft, "doc_values", True) and ft.kind != "text"
    if not indexed and (needs_index or not doc_values):
        raise _failed(
            ctx,
            "illegal_argument_exception",
            f"Cannot search on field [{name}] since it is not indexed nor has doc values.",
        )


def _type_of(ft: Any) -> str:
    return getattr(ft, "type", ft.kind)


def _expand_fields(ctx: QueryContext, specs: tuple[str, ...] | list[str]) -> list[tuple[str, float]]:
    """`title^2`, `*.name` and `*` resolved to mapped fields with their boosts (boosts of a field
    named twice multiply, as Elasticsearch merges them)."""
    out: dict[str, float] = {}
    for spec in specs:
        name, _, boost_text = spec.partition("^")
        boost = float(boost_text) if boost_text else 1.0
        names = ctx.mapping.resolve_fields(name) if "*" in name and ctx.mapping is not None else [name]
        for resolved in names:
            out[resolved] = out[resolved] * boost if resolved in out else boost
    return list(out.items())


def _all_fields(specs: tuple[str, ...] | list[str]) -> bool:
    return any(s.partition("^")[0] == "*" for s in specs)


# -- values ----------------------------------------------------------------------------------

_JAVA_INT = re.compile(r"[+-]?\d+")
_JAVA_FLOAT = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?")


def _java_number(value: Scalar) -> int | float:
    """A number as Java's parsers read it; _NumberFormat carries Java's message."""
    if isinstance(value, bool):
        raise _NumberFormat(f'For input string: "{"true" if value else "false"}"')
    if isinstance(value, int | float):
        return value
    text = str(value).strip()
    if not text:
        raise _NumberFormat("empty String")
    if _JAVA_INT.fullmatch(text):
        return int(text)
    if _JAVA_FLOAT.fullmatch(text):
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    raise _NumberFormat(f'For input string: "{value}"')


def _number(ctx: QueryContext, value: Scalar) -> int | float:
    try:
        return _java_number(value)
    except _NumberFormat as e:
        raise _failed(ctx, "number_format_exception", str(e)) from None


def _integer_term(ctx: QueryContext, type_name: str, value: Scalar) -> int | None:
    """An integer-typed term, or None when it has a decimal part (which matches nothing)."""
    number = _number(ctx, value)
    lo, hi, name = _NUMERIC_LIMITS.get(type_name, _NUMERIC_LIMITS["long"])
    if isinstance(number, float):
        if math.isfinite(number) and not number.is_integer():
            return None
        if not math.isfinite(number) or not lo <= number <= hi:
            raise _failed(ctx, "illegal_argument_exception", f"Value [{value}] is out of range for {name}")
        number = int(number)
    if not lo <= number <= hi:
        raise _failed(ctx, "illegal_argument_exception", f"Value [{value}] is out of range for {name}")
    return number


def _boolean(ctx: QueryContext, value: Scalar) -> int:
    if isinstance(value, bool):
        return int(value)
    text = str(value)
    if text in ("true", "false"):
        return int(text == "true")
    if text == "":
        return 0
    raise _failed(
        ctx, "illegal_argument_exception", f"Can't parse boolean value [{text}], expected [true] or [false]"
    )


def _scalar_text(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _keyword_text(ft: Any, value: Scalar) -> str:
    """A value as a keyword field indexes it (through its normalizer); text terms stay as given."""
    text = _scalar_text(value)
    return ft.normalize(text) if ft.kind == "keyword" else text


def _formatter(ctx: QueryContext, ft: Any, fmt: str | None) -> DateFormatter:
    if fmt is None:
        return ft.formatter
    try:
        return DateFormatter(fmt)
    except ValueError as e:
        raise _failed(ctx, "illegal_argument_exception", str(e)) from None


def _date_bound(
    ctx: QueryContext, ft: Any, value: Scalar, round_up: bool, fmt: str | None = None, zone: str | None = None
) -> int:
    try:
        return parse_date_math(
            value,
            ctx.now_millis,
            _formatter(ctx, ft, fmt),
            round_up,
            nanos=bool(getattr(ft, "nanos", False)),
            time_zone=zone,
        )
    except ValueError as e:
        raise _failed(ctx, "parse_exception", str(e), root=True) from None


def _float_bounds(precision: str | None, lo: float | None, hi: float | None, incl_lo: bool, incl_hi: bool):
    """Inclusive float bounds at the field's precision: Elasticsearch rounds the bound to the
    field's float type and steps to the next representable value for gt/lt."""
    dtype = {None: np.float64, "float": np.float32, "half_float": np.float16}[precision]
    out = []
    for bound, incl, direction in ((lo, incl_lo, np.inf), (hi, incl_hi, -np.inf)):
        if bound is None:
            out.append(None)
            continue
        b = dtype(bound)
        if not incl:
            b = np.nextafter(b, dtype(direction))
        out.append(float(b))
    return out


# -- term-level queries ----------------------------------------------------------------------


def _term_plan(
    ctx: QueryContext, name: str, value: Scalar, boost: float, case_insensitive: bool = False
) -> Any:
    """A single-value term on any field type: exact token, exact keyword, parsed number/date/bool."""
    if name == "_id":
        return _IdsPlan((_scalar_text(value),), boost)
    if name == "_index":
        return _All(boost) if _scalar_text(value) == ctx.index_name else _Nothing()
    ft = _field_type(ctx, name)
    if ft is None:
        return _Nothing()
    kind, type_name = ft.kind, _type_of(ft)
    indexed = getattr(ft, "index", True)
    if kind in ("text", "keyword"):
        _searchable(ctx, ft, name, needs_index=kind == "text")
        text = _keyword_text(ft, value)
        if case_insensitive or not indexed:
            return _ValueSet(name, kind, (text,), boost, case_insensitive=case_insensitive)
        return _ScoredTerm(name, kind, text, boost)
    _searchable(ctx, ft, name)
    if type_name == "boolean":
        parsed = _boolean(ctx, value)
        return (
            _ScoredTerm(name, "boolean", parsed, boost)
            if indexed
            else _ValueSet(name, "long", (parsed,), boost)
        )
    if type_name in _DATE_TYPES:
        lo = _date_bound(ctx, ft, value, round_up=False)
        hi = _date_bound(ctx, ft, value, round_up=True)
        return _NumRange(name, lo, hi, None, boost)
    return _numeric_values(ctx, ft, name, (value,), boost)


def _numeric_values(ctx: QueryContext, ft: Any, name: str, values: tuple, boost: float) -> Any:
    type_name = _type_of(ft)
    parsed: list = []
    if type_name == "scaled_float":
        factor = float(getattr(ft, "scaling_factor", 1.0))
        parsed = [math.floor(float(_number(ctx, v)) * factor + 0.5) for v in values]
        return _ValueSet(name, "long", tuple(parsed), boost)
    if ft.kind == "double":
        precision = _FLOAT_TYPES.get(type_name)
        parsed = [float(_number(ctx, v)) for v in values]
        return _ValueSet(name, "double", tuple(parsed), boost, precision=precision)
    for v in values:
        number = _integer_term(ctx, type_name, v)
        if number is not None:
            parsed.append(number)
    return _ValueSet(name, "long", tuple(parsed), boost) if parsed else _Nothing()


def _plan_term(q: Term, ctx: QueryContext) -> Any:
    return _term_plan(ctx, q.field, q.value, q.boost, q.case_insensitive)


def _plan_terms(q: Terms, ctx: QueryContext) -> Any:
    if not q.values:
        return _Nothing()
    if q.field == "_id":
        return _IdsPlan(tuple(_scalar_text(v) for v in q.values), q.boost)
    ft = _field_type(ctx, q.field)
    if ft is None:
        return _Nothing()
    if ft.kind in ("text", "keyword"):
        _searchable(ctx, ft, q.field, needs_index=ft.kind == "text")
        return _ValueSet(q.field, ft.kind, tuple(_keyword_text(ft, v) for v in q.values), q.boost)
    _searchable(ctx, ft, q.field)
    type_name = _type_of(ft)
    if type_name == "boolean":
        return _ValueSet(q.field, "long", tuple({_boolean(ctx, v) for v in q.values}), q.boost)
    if type_name in _DATE_TYPES:
        inner = tuple(_term_plan(ctx, q.field, v, 1.0) for v in q.values)
        return _ConstPlan(_BoolPlan(should=inner), q.boost)
    return _numeric_values(ctx, ft, q.field, q.values, q.boost)


def _plan_ids(q: Ids, ctx: QueryContext) -> Any:
    return _IdsPlan(q.values, q.boost) if q.values else _Nothing()


def _plan_range(q: Range, ctx: QueryContext) -> Any:
    ft = _field_type(ctx, q.field)
    if ft is None:
        return _Nothing()
    kind, type_name = ft.kind, _type_of(ft)
    _searchable(ctx, ft, q.field, needs_index=kind == "text")
    if kind in ("text", "keyword"):
        lo = None if q.lower is None else _keyword_text(ft, q.lower).encode()
        hi = None if q.upper is None else _keyword_text(ft, q.upper).encode()
        return _TermRange(q.field, kind, lo, hi, q.include_lower, q.include_upper, q.boost)
    if type_name in _DATE_TYPES:
        lo = hi = None
        if q.lower is not None:
            lo = _date_bound(ctx, ft, q.lower, not q.include_lower, q.format, q.time_zone)
            lo += 0 if q.include_lower else 1
        if q.upper is not None:
            hi = _date_bound(ctx, ft, q.upper, q.include_upper, q.format, q.time_zone)
            hi -= 0 if q.include_upper else 1
        return _NumRange(q.field, lo, hi, None, q.boost)
    if type_name == "boolean":
        lo = None if q.lower is None else _boolean(ctx, q.lower) + (0 if q.include_lower else 1)
        hi = None if q.upper is None else _boolean(ctx, q.upper) - (0 if q.include_upper else 1)
        return _NumRange(q.field, lo, hi, None, q.boost)
    lower = None if q.lower is None else _number(ctx, q.lower)
    upper = None if q.upper is None else _number(ctx, q.upper)
    if type_name == "scaled_float":
        factor = float(getattr(ft, "scaling_factor", 1.0))
        lo_f, hi_f = _float_bounds(
            None,
            None if lower is None else float(lower) * factor,
            None if upper is None else float(upper) * factor,
            q.include_lower,
            q.include_upper,
        )
        lo = None if lo_f is None else math.ceil(lo_f)
        hi = None if hi_f is None else math.floor(hi_f)
        return _NumRange(q.field, lo, hi, None, q.boost)
    if kind == "double":
        precision = _FLOAT_TYPES.get(type_name)
        lo_f, hi_f = _float_bounds(precision, lower, upper, q.include_lower, q.include_upper)
        return _NumRange(q.field, lo_f, hi_f, precision, q.boost)
    lo_i = hi_i = None
    if lower is not None:
        if isinstance(lower, float) and not math.isfinite(lower):
            lo_i = None if lower < 0 else 2**63
        else:
            lo_i = math.ceil(lower) if q.include_lower else math.floor(lower) + 1
    if upper is not None:
        if isinstance(upper, float) and not math.isfinite(upper):
            hi_i = None if upper > 0 else -(2**63) - 1
        else:
            hi_i = math.floor(upper) if q.include_upper else math.ceil(upper) - 1
    return _NumRange(q.field, lo_i, hi_i, None, q.boost)


def _plan_exists(q: Exists, ctx: QueryContext) -> Any:
    if q.field in ("_id", "_index", "_source"):
        return _All(q.boost)
    ft = _field_type(ctx, q.field)
    if ft is not None and ft.kind in _LEAF_KINDS:
        return _ExistsPlan((q.field,), q.boost)
    if ctx.mapping is None:
        return _Nothing()
    children = tuple(ctx.mapping.resolve_fields(f"{q.field}.*"))
    return _ExistsPlan(children, q.boost) if children else _Nothing()


def _pattern_plan(ctx: QueryContext, name: str, mode: str, value: str, case_insensitive: bool, boost: float):
    if name == "_id":
        return _Pattern(name, "_id", mode, value, case_insensitive, boost)
    if name == "_index":
        return (
            _All(boost)
            if _pattern_matches(mode, value, case_insensitive, ctx.index_name or "")
            else _Nothing()
        )
    ft = _field_type(ctx, name)
    if ft is None:
        return _Nothing()
    if ft.kind not in ("text", "keyword"):
        query = {"prefix": "prefix", "wildcard": "wildcard", "regexp": "regexp"}[mode]
        raise _shard_error(
            ctx,
            f"Can only use {query} queries on keyword, text and wildcard fields - not on [{name}] "
            f"which is of type [{_type_of(ft)}]",
        )
    _searchable(ctx, ft, name, needs_index=ft.kind == "text")
    if mode == "wildcard" and ft.kind == "text":
        value = value.lower()  # the search analyzer's normalizer
    elif mode != "regexp" and ft.kind == "keyword":
        value = ft.normalize(value)
    return _Pattern(name, ft.kind, mode, value, case_insensitive, boost)


def _plan_prefix(q: Prefix, ctx: QueryContext) -> Any:
    return _pattern_plan(ctx, q.field, "prefix", q.value, q.case_insensitive, q.boost)


def _plan_wildcard(q: Wildcard, ctx: QueryContext) -> Any:
    return _pattern_plan(ctx, q.field, "wildcard", q.value, q.case_insensitive, q.boost)


def _plan_regexp(q: Regexp, ctx: QueryContext) -> Any:
    return _pattern_plan(ctx, q.field, "regexp", q.value, q.case_insensitive, q.boost)


# -- full-text queries -----------------------------------------------------------------------

_ANALYZERS = {
    "standard": analysis.analyze,
    "simple": lambda text: re.findall(r"[^\W\d_]+", text.lower()),
    "whitespace": str.split,
    "keyword": lambda text: [text],
}


def _analyze(ctx: QueryContext, analyzer: str | None, text: str) -> list[str]:
    if analyzer is None:
        return analysis.analyze(text)
    fn = _ANALYZERS.get(analyzer)
    if fn is None:
        raise _failed(ctx, "illegal_argument_exception", f"failed to find analyzer [{analyzer}]")
    return fn(text)


def _zero_terms(option: str, boost: float) -> Any:
    return _All(boost) if option == "all" else _Nothing()


def _text_field(ctx: QueryContext, name: str) -> Any:
    """The text field type, None for non-text fields (which then behave like `term`)."""
    ft = _field_type(ctx, name)
    if ft is None or ft.kind != "text":
        return ft
    _searchable(ctx, ft, name, needs_index=True)
    return ft


def _plan_match(q: Match, ctx: QueryContext) -> Any:
    if q.field in _METADATA_TERMS:
        return _term_plan(ctx, q.field, q.query, q.boost)
    ft = _text_field(ctx, q.field)
    if ft is None:
        return _Nothing()
    if ft.kind != "text":
        return _lenient_term(ctx, q.field, q.query, q.boost, q.lenient)
    tokens = _analyze(ctx, q.analyzer, _scalar_text(q.query))
    if not tokens:
        return _zero_terms(q.zero_terms_query, q.boost)
    clauses = tuple(_match_token(ctx, q, token) for token in tokens)
    if len(clauses) == 1:
        return _boost_plan(clauses[0], q.boost)
    if q.operator == "and":
        return _BoolPlan(must=clauses, boost=q.boost)
    min_should = 0
    if q.minimum_should_match is not None:
        min_should = min_should_match(len(clauses), q.minimum_should_match, ctx)
    return _BoolPlan(should=clauses, min_should=min_should, boost=q.boost)


def _boost_plan(plan: Any, boost: float) -> Any:
    if boost == 1.0:
        return plan
    return _BoolPlan(must=(plan,), boost=boost)


def _lenient_term(ctx: QueryContext, name: str, value: Scalar, boost: float, lenient: bool) -> Any:
    try:
        return _term_plan(ctx, name, value, boost)
    except QueryShardError:
        if lenient:
            return _Nothing()
        raise


def _match_token(ctx: QueryContext, q: Match, token: str) -> Any:
    edits = _fuzzy_edits(ctx, q.fuzziness, token)
    if edits == 0:
        return _ScoredTerm(q.field, "text", token)
    return _fuzzy_plan(ctx, q.field, token, edits, q.prefix_length, q.max_expansions)


def _plan_match_phrase(q: MatchPhrase | MatchPhrasePrefix, ctx: QueryContext) -> Any:
    if q.field in _METADATA_TERMS:
        return _term_plan(ctx, q.field, q.query, q.boost)
    ft = _text_field(ctx, q.field)
    if ft is None:
        return _Nothing()
    if ft.kind != "text":
        return _term_plan(ctx, q.field, q.query, q.boost)
    tokens = _analyze(ctx, q.analyzer, _scalar_text(q.query))
    if not tokens:
        return _zero_terms(q.zero_terms_query, q.boost)
    slots: list[tuple[str, ...]] = [(t,) for t in tokens]
    if isinstance(q, MatchPhrasePrefix):
        expansions = _prefix_expansions(ctx, q.field, tokens[-1], q.max_expansions)
        if not expansions:
            return _Nothing()
        slots[-1] = expansions
    if len(slots) == 1:
        terms = tuple(_ScoredTerm(q.field, "text", t) for t in slots[0])
        return _boost_plan(terms[0], q.boost) if len(terms) == 1 else _BoolPlan(should=terms, boost=q.boost)
    return _Phrase(q.field, tuple(slots), tuple(range(len(slots))), q.slop, q.boost)


def _prefix_expansions(ctx: QueryContext, name: str, prefix: str, limit: int) -> tuple[str, ...]:
    """The first `limit` terms of the shard starting with `prefix`, in term order."""
    key = prefix.encode()
    found: set[bytes] = set()
    for view in ctx.searcher.views:
        col = view.segment.column(name)
        if isinstance(col, TextColumn):
            lo, hi = _prefix_range(col.terms, key)
            found.update(np.asarray(col.terms[lo : min(hi, lo + limit)]).tolist())
    return tuple(t.decode() for t in sorted(found)[:limit])


def _plan_multi_match(q: MultiMatch, ctx: QueryContext) -> Any:
    specs = q.fields or ctx.default_fields
    fields = _expand_fields(ctx, specs)
    lenient = q.lenient if q.lenient is not None else _all_fields(specs)
    if not fields:
        return _Nothing()
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
        queries.append(_Lenient(query) if lenient else query)
    if q.type in ("most_fields", "bool_prefix"):
        return _plan(Bool(should=tuple(queries), boost=q.boost), ctx)
    tie = q.tie_breaker if q.tie_breaker is not None else 0.0
    return _plan(DisMax(tuple(queries), tie, q.boost), ctx)


def _cross_fields(q: MultiMatch, ctx: QueryContext, fields: list[tuple[str, float]], lenient: bool) -> Any:
    """Each analyzed term as the best of its fields, terms combined by the operator (approximate:
    Elasticsearch also blends the term statistics of the fields)."""
    tokens = _analyze(ctx, q.analyzer, _scalar_text(q.query))
    if not tokens:
        return _zero_terms(q.zero_terms_query, q.boost)
    tie = q.tie_breaker if q.tie_breaker is not None else 0.0
    per_token = []
    for token in tokens:
        alternatives = tuple(
            _Lenient(Match(name, token, lenient=lenient, boost=b)) if lenient else Match(name, token, boost=b)
            for name, b in fields
        )
        per_token.append(DisMax(alternatives, tie))
    if q.operator == "and":
        return _plan(Bool(must=tuple(per_token), boost=q.boost), ctx)
    return _plan(
        Bool(should=tuple(per_token), minimum_should_match=q.minimum_should_match, boost=q.boost), ctx
    )


# -- fuzziness -------------------------------------------------------------------------------


def _fuzzy_edits(ctx: QueryContext, fuzziness: str | None, token: str) -> int:
    """Edits allowed by a `fuzziness` value for a term: 0-2, or AUTO[:low,high] by length."""
    if fuzziness is None:
        return 0
    text = fuzziness.upper()
    if text.startswith("AUTO"):
        low, high = 3, 6
        if ":" in text:
            try:
                low, high = (int(x) for x in text[5:].split(","))
            except ValueError:
                raise _failed(
                    ctx, "illegal_argument_exception", f"failed to parse [{fuzziness}] as a fuzziness value"
                ) from None
        length = len(token)
        return 0 if length < low else 1 if length < high else 2
    try:
        value = float(text)
    except ValueError:
        raise _failed(
            ctx, "illegal_argument_exception", f"failed to parse [{fuzziness}] as a fuzziness value"
        ) from None
    return min(int(value), 2)


def _edit_distances(candidates: list[str], word: str) -> np.ndarray:
    """Damerau-Levenshtein (optimal string alignment) distance of each candidate to `word`,
    one numpy row per candidate so the dynamic program runs over all of them at once."""
    n, m = len(candidates), len(word)
    width = max((len(c) for c in candidates), default=0)
    grid = np.full((n, width), -1, dtype=np.int64)
    lengths = np.fromiter((len(c) for c in candidates), dtype=np.int64, count=n)
    for i, c in enumerate(candidates):
        grid[i, : len(c)] = [ord(ch) for ch in c]
    codes = [ord(ch) for ch in word]
    prev2 = None
    prev = np.broadcast_to(np.arange(width + 1, dtype=np.int64), (n, width + 1)).copy()
    for i in range(1, m + 1):
        cur = np.empty_like(prev)
        cur[:, 0] = i
        for j in range(1, width + 1):
            cost = (grid[:, j - 1] != codes[i - 1]).astype(np.int64)
            best = np.minimum(np.minimum(prev[:, j] + 1, cur[:, j - 1] + 1), prev[:, j - 1] + cost)
            if prev2 is not None and j > 1:
                swap = (grid[:, j - 1] == codes[i - 2]) & (grid[:, j - 2] == codes[i - 1])
                best = np.where(swap, np.minimum(best, prev2[:, j - 2] + 1), best)
            cur[:, j] = best
        prev2, prev = prev, cur
    return prev[np.arange(n), lengths]


def _fuzzy_plan(ctx: QueryContext, name: str, token: str, edits: int, prefix_length: int, limit: int) -> Any:
    """The terms of the shard within `edits` of `token`, each scored as a term (see module doc)."""
    prefix = token[:prefix_length]
    candidates: set[str] = set()
    for view in ctx.searcher.views:
        col = view.segment.column(name)
        if isinstance(col, TextColumn):
            lo, hi = _prefix_range(col.terms, prefix.encode())
            terms = [t.decode() for t in np.asarray(col.terms[lo:hi]).tolist()]
            candidates.update(t for t in terms if abs(len(t) - len(token)) <= edits)
    if not candidates:
        return _Nothing()
    ordered = sorted(candidates)
    distances = _edit_distances(ordered, token)
    scored = sorted(
        (1.0 - d / min(len(t), len(token)), t)
        for t, d in zip(ordered, distances.tolist(), strict=True)
        if d <= edits
    )
    best = sorted(scored, key=lambda s: (-s[0], s[1]))[:limit]
    if not best:
        return _Nothing()
    blended = max(bm25.text_doc_freq(ctx.searcher, name, t) for _, t in best)
    terms = tuple(_ScoredTerm(name, "text", t, max(sim, 0.0), blended) for sim, t in best)
    return terms[0] if len(terms) == 1 else _BoolPlan(should=terms)


# -- query strings ---------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _parse_classic(text: str, operator: str, allow_leading_wildcard: bool) -> qs.Node | None:
    return qs.parse_query_string(text, operator, allow_leading_wildcard)


def _plan_query_string(q: QueryString, ctx: QueryContext) -> Any:
    try:
        tree = _parse_classic(q.query, q.default_operator, q.allow_leading_wildcard)
    except qs.QuerySyntaxError as e:
        cause = ElasticError(str(e), error_type="parse_exception", status=400)
        raise _shard_error(ctx, f"Failed to parse query [{q.query}]", cause) from None
    if tree is None:
        return _Nothing()
    specs = q.fields or ((q.default_field,) if q.default_field else ctx.default_fields)
    lenient = q.lenient if q.lenient is not None else _all_fields(specs)
    defaults = _expand_fields(ctx, specs)
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
    return _plan(_top_level(query, q.minimum_should_match, q.boost), ctx)


def _plan_simple_query_string(q: SimpleQueryString, ctx: QueryContext) -> Any:
    tree = qs.parse_simple_query_string(q.query, q.default_operator)
    if tree is None:
        return _Nothing()
    specs = q.fields or ctx.default_fields
    lenient = q.lenient if q.lenient is not None else _all_fields(specs)
    defaults = _expand_fields(ctx, specs)
    builder = _StringLeafBuilder(
        ctx, defaults, lenient, q.default_operator, None, 1.0, "most_fields", 0, None, q.analyzer
    )
    query = qs.to_query(tree, builder, q.default_operator)
    return _plan(_top_level(query, q.minimum_should_match, q.boost), ctx)


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
        fields = self.defaults if leaf.field is None else _expand_fields(self.ctx, [leaf.field])
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

    def _flat_terms(self, leaf: qs.Leaf, name: str, boost: float) -> list[Query] | None:
        """Lucene adds the words of one text field as separate term clauses."""
        ft = _field_type(self.ctx, name)
        if ft is None or ft.kind != "text":
            return None
        tokens = _analyze(self.ctx, self.analyzer, leaf.text)
        return [Term(name, t, boost=boost) for t in tokens]

    def _field_query(self, leaf: qs.Leaf, name: str, boost: float) -> Query | None:
        ft = _field_type(self.ctx, name)
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
        return _Lenient(query) if self.lenient else query


_PLANNERS = {
    MatchAll: lambda q, ctx: _All(q.boost),
    MatchNone: lambda q, ctx: _Nothing(),
    Bool: _plan_bool,
    ConstantScore: _plan_const,
    DisMax: _plan_dis_max,
    _Lenient: _plan_lenient,
    Term: _plan_term,
    Terms: _plan_terms,
    Ids: _plan_ids,
    Range: _plan_range,
    Exists: _plan_exists,
    Prefix: _plan_prefix,
    Wildcard: _plan_wildcard,
    Regexp: _plan_regexp,
    Match: _plan_match,
    MatchPhrase: _plan_match_phrase,
    MatchPhrasePrefix: _plan_match_phrase,
    MultiMatch: _plan_multi_match,
    QueryString: _plan_query_string,
    SimpleQueryString: _plan_simple_query_string,
}


# ---------------------------------------------------------------------------------------------
# Execution over one segment

_Result = tuple[np.ndarray, np.ndarray | None]


def _run(plan: Any, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> _Result:
    return _EXECUTORS[type(plan)](plan, view, ctx, scoring, boost)


def _empty(view: SegmentView, scoring: bool) -> _Result:
    n = view.max_doc
    return np.zeros(n, dtype=bool), (np.zeros(n, dtype=_F32) if scoring else None)


def _constant(mask: np.ndarray, scoring: bool, boost: float) -> _Result:
    if not scoring:
        return mask, None
    return mask, mask.astype(_F32) * _F32(boost)


def _mask_of(docs: np.ndarray, n: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[docs] = True
    return mask


def _exec_all(plan: _All, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> _Result:
    n = view.max_doc
    return np.ones(n, dtype=bool), (np.full(n, _F32(boost * plan.boost), dtype=_F32) if scoring else None)


def _exec_nothing(
    plan: _Nothing, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> _Result:
    return _empty(view, scoring)


# -- doc values helpers ----------------------------------------------------------------------


def _dv_mask(dv: DocValues, test) -> np.ndarray:
    """Documents with at least one value passing a vectorized test."""
    if dv.is_single:
        return test(np.asarray(dv.values)) & dv.present
    docs, values = dv.flat
    return _mask_of(docs[test(np.asarray(values))], dv.max_doc)


def _ordinal_mask(col: KeywordColumn, selected: np.ndarray) -> np.ndarray:
    """Documents holding any selected ordinal (`selected`: one bool per term)."""
    hits = np.flatnonzero(selected)
    if len(hits) == 0:
        return np.zeros(col.ords.max_doc, dtype=bool)
    if len(hits) == 1:
        target = int(hits[0])
        return _dv_mask(col.ords, lambda v: v == target)
    lo, hi = int(hits[0]), int(hits[-1]) + 1
    if hi - lo == len(hits):
        return _dv_mask(col.ords, lambda v: (v >= lo) & (v < hi))
    return _dv_mask(col.ords, lambda v: selected[v])


def _postings_union(col: TextColumn, term_ids: np.ndarray, n: int) -> np.ndarray:
    """Documents holding any of the terms: one gather over the terms' posting slices."""
    mask = np.zeros(n, dtype=bool)
    if len(term_ids) == 0:
        return mask
    offsets = np.asarray(col.post_offsets, dtype=np.int64)
    starts, ends = offsets[term_ids], offsets[term_ids + 1]
    if len(term_ids) == int(term_ids[-1]) - int(term_ids[0]) + 1:
        mask[np.asarray(col.post_docs[int(starts[0]) : int(ends[-1])])] = True
        return mask
    mask[np.asarray(col.post_docs)[_ranges(starts, ends)]] = True
    return mask


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenated aranges [start, end) without a Python loop."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return offsets + np.arange(total, dtype=np.int64)


def _prefix_range(terms: np.ndarray, prefix: bytes) -> tuple[int, int]:
    """Ordinal range of the sorted terms starting with `prefix` (0xff never occurs in UTF-8)."""
    lo = int(np.searchsorted(terms, prefix, side="left"))
    hi = int(np.searchsorted(terms, prefix + b"\xff", side="left"))
    return lo, hi


# -- term execution --------------------------------------------------------------------------


def _term_weight(plan: _ScoredTerm, ctx: QueryContext, boost: float) -> tuple[np.float32, np.ndarray]:
    """(weight, norm table) of a scored term from shard statistics, cached per context."""
    key = (plan.field, plan.kind, plan.term, boost, plan.doc_freq)
    cached = ctx._weights.get(key)
    if cached is not None:
        return cached
    searcher = ctx.searcher
    if plan.kind == "text":
        doc_count, total = searcher.text_stats(plan.field)
        df = (
            plan.doc_freq
            if plan.doc_freq is not None
            else bm25.text_doc_freq(searcher, plan.field, plan.term)
        )
    elif plan.kind == "keyword":
        doc_count, total = bm25.keyword_field_stats(searcher, plan.field)
        df = bm25.keyword_doc_freq(searcher, plan.field, str(plan.term))
    else:
        doc_count, total, df = bm25.boolean_stats(searcher, plan.field, int(plan.term))
    table = _norm_table(ctx, plan.field, plan.kind, doc_count, total)
    result = (bm25.weight(boost, bm25.idf(df, doc_count)), table)
    ctx._weights[key] = result
    return result


def _norm_table(ctx: QueryContext, name: str, kind: str, doc_count: int, total: int) -> np.ndarray:
    key = ("norms", name, kind)
    table = ctx._weights.get(key)
    if table is None:
        table = ctx._weights[key] = bm25.norm_table(bm25.avg_field_length(total, doc_count))
    return table


def _term_postings(plan: _ScoredTerm, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    """(docs, scores or None) of a text term in one segment, straight from its postings."""
    col = view.segment.column(plan.field)
    if not isinstance(col, TextColumn):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=_F32)
    docs, freqs = col.postings(plan.term)
    if not scoring or len(docs) == 0:
        return docs, np.empty(0, dtype=_F32) if scoring else None
    w, table = _term_weight(plan, ctx, boost * plan.boost)
    return docs, bm25.score(freqs, np.asarray(col.norms)[docs], w, table)


def _exec_scored_term(plan: _ScoredTerm, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    n = view.max_doc
    if plan.kind == "text":
        docs, term_scores = _term_postings(plan, view, ctx, scoring, boost)
        mask = _mask_of(docs, n)
        if not scoring:
            return mask, None
        scores = np.zeros(n, dtype=_F32)
        scores[docs] = term_scores
        return mask, scores
    col = view.segment.column(plan.field)
    if plan.kind == "keyword":
        if not isinstance(col, KeywordColumn):
            return _empty(view, scoring)
        ordinal = col.lookup(str(plan.term))
        if ordinal < 0:
            return _empty(view, scoring)
        mask = _dv_mask(col.ords, lambda v: v == ordinal)
    else:
        if not isinstance(col, NumericColumn):
            return _empty(view, scoring)
        value = int(plan.term)
        mask = _dv_mask(col.doc_values, lambda v: v == value)
    if not scoring:
        return mask, None
    w, table = _term_weight(plan, ctx, boost * plan.boost)
    return mask, mask.astype(_F32) * bm25.constant_score(w, table)


def _terms_matching(terms: np.ndarray, values: tuple[str, ...], case_insensitive: bool) -> np.ndarray:
    """One bool per term of a sorted term array: whether it equals one of the values."""
    selected = np.zeros(len(terms), dtype=bool)
    if case_insensitive:
        wanted = {v.lower() for v in values}
        decoded = np.asarray(terms).tolist()
        selected[:] = [t.decode().lower() in wanted for t in decoded]
        return selected
    keys = np.array(sorted({v.encode() for v in values}), dtype=bytes)
    idx = np.searchsorted(terms, keys)
    ok = idx < len(terms)
    idx, keys = idx[ok], keys[ok]
    selected[idx[np.asarray(terms)[idx] == keys]] = True
    return selected


def _exec_value_set(plan: _ValueSet, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    col = view.segment.column(plan.field)
    n = view.max_doc
    if plan.kind == "text":
        if not isinstance(col, TextColumn):
            return _empty(view, scoring)
        selected = _terms_matching(col.terms, plan.values, plan.case_insensitive)
        mask = _postings_union(col, np.flatnonzero(selected), n)
    elif plan.kind == "keyword":
        if not isinstance(col, KeywordColumn):
            return _empty(view, scoring)
        mask = _ordinal_mask(col, _terms_matching(col.terms, plan.values, plan.case_insensitive))
    else:
        if not isinstance(col, NumericColumn) or not plan.values:
            return _empty(view, scoring)
        dtype = {None: None, "float": np.float32, "half_float": np.float16}[plan.precision]
        if dtype is not None:
            wanted = np.asarray(plan.values, dtype=dtype)
            mask = _dv_mask(col.doc_values, lambda v: np.isin(v.astype(dtype), wanted))
        elif len(plan.values) == 1:
            target = plan.values[0]
            mask = _dv_mask(col.doc_values, lambda v: v == target)
        else:
            wanted = np.asarray(plan.values)
            mask = _dv_mask(col.doc_values, lambda v: np.isin(v, wanted))
    return _constant(mask, scoring, boost * plan.boost)


def _exec_num_range(plan: _NumRange, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    col = view.segment.column(plan.field)
    if not isinstance(col, NumericColumn):
        return _empty(view, scoring)
    lo, hi = plan.lo, plan.hi
    dtype = {None: None, "float": np.float32, "half_float": np.float16}[plan.precision]
    if col.kind == "long":
        info = np.iinfo(np.int64)
        if (lo is not None and lo > info.max) or (hi is not None and hi < info.min):
            return _empty(view, scoring)
        lo = None if lo is None or lo <= info.min else lo
        hi = None if hi is None or hi >= info.max else hi

    def test(values: np.ndarray) -> np.ndarray:
        if dtype is not None:
            values = values.astype(dtype)
        if lo is not None and hi is not None:
            return (values >= lo) & (values <= hi)
        if lo is not None:
            return values >= lo
        if hi is not None:
            return values <= hi
        return np.ones(len(values), dtype=bool)

    return _constant(_dv_mask(col.doc_values, test), scoring, boost * plan.boost)


def _exec_term_range(plan: _TermRange, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    col = view.segment.column(plan.field)
    if not isinstance(col, TextColumn | KeywordColumn):
        return _empty(view, scoring)
    terms = col.terms
    lo = (
        0
        if plan.lo is None
        else int(np.searchsorted(terms, plan.lo, side="left" if plan.include_lo else "right"))
    )
    hi = (
        len(terms)
        if plan.hi is None
        else int(np.searchsorted(terms, plan.hi, side="right" if plan.include_hi else "left"))
    )
    if hi <= lo:
        return _empty(view, scoring)
    if isinstance(col, TextColumn):
        mask = _postings_union(col, np.arange(lo, hi), view.max_doc)
    else:
        mask = _dv_mask(col.ords, lambda v: (v >= lo) & (v < hi))
    return _constant(mask, scoring, boost * plan.boost)


# -- patterns --------------------------------------------------------------------------------


def _wildcard_regex(pattern: str) -> str:
    """Lucene wildcard syntax (`*`, `?`, backslash escapes) as a Python regular expression."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
        i += 1
    return "".join(out)


def _literal_prefix(mode: str, pattern: str) -> str:
    """The fixed start of a pattern, which narrows the sorted terms to scan."""
    if mode == "prefix":
        return pattern
    if mode == "wildcard":
        out: list[str] = []
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if c in "*?":
                break
            if c == "\\" and i + 1 < len(pattern):
                out.append(pattern[i + 1])
                i += 2
                continue
            out.append(c)
            i += 1
        return "".join(out)
    match = re.match(r"[\w ]*", pattern)
    literal = match.group(0) if match else ""
    if len(literal) < len(pattern) and pattern[len(literal)] in "?*{":
        literal = literal[:-1]
    return literal


def _pattern_matches(mode: str, pattern: str, case_insensitive: bool, text: str) -> bool:
    return bool(_pattern_regex(mode, pattern, case_insensitive).fullmatch(text))


@lru_cache(maxsize=256)
def _pattern_regex(mode: str, pattern: str, case_insensitive: bool) -> re.Pattern:
    flags = re.IGNORECASE | re.DOTALL if case_insensitive else re.DOTALL
    if mode == "prefix":
        return re.compile(re.escape(pattern) + ".*", flags)
    if mode == "wildcard":
        return re.compile(_wildcard_regex(pattern), flags)
    try:
        return re.compile(pattern, flags)
    except re.error:
        return re.compile(re.escape(pattern), flags)


def _select_terms(terms: np.ndarray, mode: str, pattern: str, case_insensitive: bool) -> np.ndarray:
    """One bool per sorted term: whether it matches the pattern. Only terms sharing the pattern's
    literal prefix are tested (all of them when case-insensitive)."""
    selected = np.zeros(len(terms), dtype=bool)
    literal = "" if case_insensitive else _literal_prefix(mode, pattern)
    lo, hi = _prefix_range(terms, literal.encode()) if literal else (0, len(terms))
    if mode == "prefix" and not case_insensitive:
        selected[lo:hi] = True
        return selected
    regex = _pattern_regex(mode, pattern, case_insensitive)
    candidates = np.asarray(terms[lo:hi]).tolist()
    selected[lo:hi] = [regex.fullmatch(t.decode()) is not None for t in candidates]
    return selected


def _exec_pattern(plan: _Pattern, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    n = view.max_doc
    if plan.kind == "_id":
        segment = view.segment
        selected = _select_terms(segment.id_terms, plan.mode, plan.pattern, plan.case_insensitive)
        mask = _mask_of(np.asarray(segment.id_docs)[selected], n)
        return _constant(mask, scoring, boost * plan.boost)
    col = view.segment.column(plan.field)
    if isinstance(col, TextColumn):
        selected = _select_terms(col.terms, plan.mode, plan.pattern, plan.case_insensitive)
        mask = _postings_union(col, np.flatnonzero(selected), n)
    elif isinstance(col, KeywordColumn):
        mask = _ordinal_mask(col, _select_terms(col.terms, plan.mode, plan.pattern, plan.case_insensitive))
    else:
        return _empty(view, scoring)
    return _constant(mask, scoring, boost * plan.boost)


def _exec_exists(plan: _ExistsPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    mask = np.zeros(view.max_doc, dtype=bool)
    for name in plan.fields:
        col = view.segment.column(name)
        if isinstance(col, TextColumn):
            mask |= col.present
        elif isinstance(col, KeywordColumn):
            mask |= col.ords.present
        elif isinstance(col, NumericColumn):
            mask |= col.doc_values.present
    return _constant(mask, scoring, boost * plan.boost)


def _exec_ids(plan: _IdsPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    segment = view.segment
    keys = np.array([i.encode() for i in plan.ids], dtype=bytes)
    lo, hi = segment.lookup_ids(keys)
    docs = np.asarray(segment.id_docs)[_ranges(lo.astype(np.int64), hi.astype(np.int64))]
    return _constant(_mask_of(docs, view.max_doc), scoring, boost * plan.boost)


# -- phrases ---------------------------------------------------------------------------------

_STRIDE = np.int64(1 << 32)


def _slot_occurrences(col: TextColumn, terms: tuple[str, ...], candidates: np.ndarray):
    """(doc, position) of every occurrence of a slot's terms in candidate documents."""
    docs_parts, pos_parts = [], []
    for term in terms:
        docs, positions = col.term_positions(term)
        keep = candidates[docs]
        docs_parts.append(np.asarray(docs, dtype=np.int64)[keep])
        pos_parts.append(np.asarray(positions, dtype=np.int64)[keep])
    return np.concatenate(docs_parts), np.concatenate(pos_parts)


def _exact_phrase(slots_occ: list, offsets: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(docs, phrase frequencies): starts where every slot holds its term at start + offset."""
    keys = None
    order = sorted(range(len(slots_occ)), key=lambda i: len(slots_occ[i][0]))
    for i in order:
        docs, positions = slots_occ[i]
        start = positions - offsets[i]
        ok = start >= 0
        slot_keys = np.unique(docs[ok] * _STRIDE + start[ok])
        keys = slot_keys if keys is None else keys[np.isin(keys, slot_keys, assume_unique=True)]
        if len(keys) == 0:
            break
    docs, freqs = np.unique(keys // _STRIDE, return_counts=True)
    return docs, freqs.astype(_F32)


def _sloppy_phrase(slots_occ: list, offsets: tuple[int, ...], slop: int) -> tuple[np.ndarray, np.ndarray]:
    """(docs, sloppy frequencies) as Lucene's SloppyPhraseMatcher counts them, vectorized.

    Occurrences are merged in (doc, position - offset) order. Lucene pops the smallest phrase
    position, advances that term while it stays the smallest, and scores the window from the last
    of those occurrences to the largest current position of the other terms: `1 / (1 + length)`
    when the length is within the slop. It stops after the run holding the first "last occurrence"
    of any term. Each run's window only needs the next occurrence of every other term after it.
    """
    k = len(slots_occ)
    d = np.concatenate([occ[0] for occ in slots_occ])
    p = np.concatenate([occ[1] - offsets[i] for i, occ in enumerate(slots_occ)])
    t = np.concatenate([np.full(len(occ[0]), i, dtype=np.int64) for i, occ in enumerate(slots_occ)])
    order = np.lexsort((t, p, d))
    d, p, t = d[order], p[order], t[order]
    n = len(d)
    idx = np.arange(n)
    # For each slot u: position of its first occurrence strictly after j in the same document.
    next_pos = np.full((k, n), np.iinfo(np.int64).max, dtype=np.int64)
    for u in range(k):
        nxt = np.minimum.accumulate(np.where(t == u, idx, n)[::-1])[::-1]
        after = np.append(nxt[1:], n)
        ok = after < n
        ok[ok] = d[after[ok]] == d[ok]
        next_pos[u, ok] = p[after[ok]]
    missing = np.iinfo(np.int64).max
    is_last = next_pos[t, idx] == missing
    run_end = np.ones(n, dtype=bool)
    run_end[:-1] = (t[1:] != t[:-1]) | (d[1:] != d[:-1])
    doc_starts = np.flatnonzero(np.concatenate(([True], d[1:] != d[:-1])))
    first_last = np.minimum.reduceat(np.where(is_last, idx, n), doc_starts)
    limit = np.repeat(first_last, np.diff(np.append(doc_starts, n)))
    counted = run_end & (idx <= limit)
    others = np.where(np.arange(k)[:, None] == t[None, :], np.iinfo(np.int64).min, next_pos)
    window_end = others.max(axis=0)
    length = window_end - p
    good = counted & (length <= slop) & (window_end != missing)
    weights = (_F32(1) / (_F32(1) + length[good].astype(_F32))).astype(np.float64)
    freqs = np.bincount(d[good], weights=weights)
    docs = np.flatnonzero(freqs)
    return docs, freqs[docs].astype(_F32)


def _exec_phrase(plan: _Phrase, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    n = view.max_doc
    col = view.segment.column(plan.field)
    if not isinstance(col, TextColumn):
        return _empty(view, scoring)
    candidates = np.ones(n, dtype=bool)
    for slot in plan.slots:
        ids = np.array([i for i in (col.lookup(t) for t in slot) if i >= 0], dtype=np.int64)
        candidates &= _postings_union(col, ids, n)
    if not candidates.any():
        return _empty(view, scoring)
    occurrences = [_slot_occurrences(col, slot, candidates) for slot in plan.slots]
    if plan.slop == 0:
        docs, freqs = _exact_phrase(occurrences, plan.positions)
    else:
        docs, freqs = _sloppy_phrase(occurrences, plan.positions, plan.slop)
    mask = _mask_of(docs, n)
    if not scoring:
        return mask, None
    scores = np.zeros(n, dtype=_F32)
    if len(docs):
        w, table = _phrase_weight(plan, ctx, boost * plan.boost)
        scores[docs] = bm25.score(freqs, np.asarray(col.norms)[docs], w, table)
    return mask, scores


def _phrase_weight(plan: _Phrase, ctx: QueryContext, boost: float) -> tuple[np.float32, np.ndarray]:
    key = ("phrase", plan.field, plan.slots, boost)
    cached = ctx._weights.get(key)
    if cached is None:
        doc_count, total = ctx.searcher.text_stats(plan.field)
        dfs = [bm25.text_doc_freq(ctx.searcher, plan.field, t) for slot in plan.slots for t in slot]
        table = _norm_table(ctx, plan.field, "text", doc_count, total)
        cached = ctx._weights[key] = (bm25.weight(boost, bm25.idf_sum(dfs, doc_count)), table)
    return cached


# -- compound queries ------------------------------------------------------------------------


def _exec_bool(plan: _BoolPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    n = view.max_doc
    inner = boost * plan.boost
    if len(plan.must) == 1 and not (plan.should or plan.filter or plan.must_not):
        return _run(plan.must[0], view, ctx, scoring, inner)
    required = plan.min_should if (plan.must or plan.filter or plan.min_should) else 1
    scored = _sparse_clauses(plan, view, ctx, scoring, inner, required)
    if scored is None:
        scored = _dense_clauses(plan, view, ctx, scoring, inner, required)
    mask, total = scored
    for clause in plan.filter:
        m, _ = _run(clause, view, ctx, False, 1.0)
        mask = m.copy() if mask is None else np.logical_and(mask, m, out=mask)
    if mask is None:
        mask = np.ones(n, dtype=bool)
    for clause in plan.must_not:
        m, _ = _run(clause, view, ctx, False, 1.0)
        mask &= ~m
    if not scoring:
        return mask, None
    if total is None:
        return mask, np.zeros(n, dtype=_F32)
    return mask, np.where(mask, total, 0).astype(_F32)


def _dense_clauses(
    plan: _BoolPlan, view: SegmentView, ctx: QueryContext, scoring: bool, inner: float, required: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(mask of the must and should clauses or None when there are none, summed scores)."""
    n = view.max_doc
    mask: np.ndarray | None = None
    parts: list[np.ndarray] = []
    for clause in plan.must:
        m, s = _run(clause, view, ctx, scoring, inner)
        mask = m.copy() if mask is None else np.logical_and(mask, m, out=mask)
        if scoring:
            parts.append(s)
    if plan.should:
        counts = np.zeros(n, dtype=np.int32) if required > 1 else None
        any_should = np.zeros(n, dtype=bool) if required == 1 else None
        for clause in plan.should:
            m, s = _run(clause, view, ctx, scoring, inner)
            if counts is not None:
                counts += m
            elif any_should is not None:
                any_should |= m
            if scoring:
                parts.append(s)
        should_mask = counts >= required if counts is not None else any_should
        if should_mask is not None:
            mask = should_mask if mask is None else np.logical_and(mask, should_mask, out=mask)
    if len(parts) <= 1:
        return mask, parts[0] if parts else None
    total = parts[0].astype(np.float64)
    for part in parts[1:]:
        total += part
    return mask, total


def _sparse_clauses(
    plan: _BoolPlan, view: SegmentView, ctx: QueryContext, scoring: bool, inner: float, required: int
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The common `match` shape (only must or only should clauses, all text terms) summed straight
    from the postings with two bincounts instead of one dense array per term."""
    clauses = plan.must or plan.should
    if (plan.must and plan.should) or len(clauses) < 2:
        return None
    if not all(isinstance(c, _ScoredTerm) and c.kind == "text" for c in clauses):
        return None
    results = [_term_postings(c, view, ctx, scoring, inner) for c in clauses]
    docs = np.concatenate([r[0] for r in results]).astype(np.intp, copy=False)
    counts = np.bincount(docs, minlength=view.max_doc)
    mask = counts >= (len(clauses) if plan.must else required)
    if not scoring:
        return mask, None
    weights = np.concatenate([r[1] for r in results]).astype(np.float64)
    return mask, np.bincount(docs, weights=weights, minlength=view.max_doc)


def _exec_dis_max(plan: _DisMaxPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    inner = boost * plan.boost
    mask = np.zeros(view.max_doc, dtype=bool)
    best = np.zeros(view.max_doc, dtype=_F32) if scoring else None
    total = np.zeros(view.max_doc, dtype=np.float64) if scoring else None
    for clause in plan.queries:
        m, s = _run(clause, view, ctx, scoring, inner)
        mask |= m
        if scoring:
            np.maximum(best, s, out=best)
            total += s
    if not scoring:
        return mask, None
    tie = np.float64(_F32(plan.tie_breaker))
    scores = (best.astype(np.float64) + (total - best) * tie).astype(_F32)
    return mask, np.where(mask, scores, _F32(0))


def _exec_const(plan: _ConstPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    mask, _ = _run(plan.inner, view, ctx, False, 1.0)
    return _constant(mask, scoring, boost * plan.boost)


_EXECUTORS = {
    _All: _exec_all,
    _Nothing: _exec_nothing,
    _ScoredTerm: _exec_scored_term,
    _ValueSet: _exec_value_set,
    _NumRange: _exec_num_range,
    _TermRange: _exec_term_range,
    _Pattern: _exec_pattern,
    _ExistsPlan: _exec_exists,
    _IdsPlan: _exec_ids,
    _Phrase: _exec_phrase,
    _BoolPlan: _exec_bool,
    _DisMaxPlan: _exec_dis_max,
    _ConstPlan: _exec_const,
}
