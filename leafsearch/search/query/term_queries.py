"""Planning term-level queries (term, terms, ids, range, exists, prefix, wildcard, regexp) on every
field type: exact tokens of text fields, normalized keywords, parsed numbers, dates and booleans,
and the metadata fields `_id` and `_index`."""

from __future__ import annotations

import math
from typing import Any

from leafsearch.errors import ElasticError
from leafsearch.index import ip, unsigned_long
from leafsearch.index.range_fields import RANGE_TYPES, RangeValueError, parse_bound, step, type_bounds
from leafsearch.request import lucene_regexp
from leafsearch.request.query_dsl import (
    Exists,
    Ids,
    Prefix,
    Range,
    Regexp,
    Scalar,
    Term,
    Terms,
    Wildcard,
    scalar_text,
)
from leafsearch.search.query.context import QueryContext, check_ids_count, failed, shard_error
from leafsearch.search.query.fields import field_type, refuse_vector, searchable, type_of
from leafsearch.search.query.plans import (
    AllDocs,
    BoolPlan,
    ConstPlan,
    ExistsPlan,
    IdsPlan,
    NoDocs,
    NumRange,
    PatternPlan,
    RangeFieldPlan,
    ScoredTerm,
    TermRange,
    ValueSet,
)
from leafsearch.search.query.term_selection import TermPattern, term_pattern
from leafsearch.search.query.values import (
    DATE_TYPES,
    FLOAT_TYPES,
    boolean,
    date_bound,
    float_bounds,
    integer_term,
    keyword_text,
    number,
)

_LEAF_KINDS = ("text", "keyword", "long", "double", "vector")


def term_plan(
    ctx: QueryContext, name: str, value: Scalar, boost: float, case_insensitive: bool = False
) -> Any:
    """A single-value term on any field type: exact token, exact keyword, parsed number/date/bool."""
    if name == "_id":
        return IdsPlan((scalar_text(value),), boost)
    if name == "_index":
        return AllDocs(boost) if scalar_text(value) == ctx.index_name else NoDocs()
    ft = field_type(ctx, name)
    if ft is None:
        return NoDocs()
    refuse_vector(ctx, ft, name, "term")
    kind, type_name = ft.kind, type_of(ft)
    if type_name in RANGE_TYPES:  # a term on a range field: the intervals holding the value
        return _range_field_plan(Range(name, value, value, boost=boost), ctx, ft, type_name)
    indexed = getattr(ft, "index", True)
    if type_name == "ip":
        searchable(ctx, ft, name)
        return _ip_term(ctx, name, value, boost)
    if kind in ("text", "keyword"):
        searchable(ctx, ft, name, needs_index=kind == "text")
        text = keyword_text(ft, value)
        if case_insensitive or not indexed:
            return ValueSet(name, kind, (text,), boost, case_insensitive=case_insensitive)
        return ScoredTerm(name, kind, text, boost)
    searchable(ctx, ft, name)
    if type_name == "boolean":
        parsed = boolean(ctx, value)
        return (
            ScoredTerm(name, "boolean", parsed, boost)
            if indexed
            else ValueSet(name, "long", (parsed,), boost)
        )
    if type_name in DATE_TYPES:
        lo = date_bound(ctx, ft, value, round_up=False)
        hi = date_bound(ctx, ft, value, round_up=True)
        return NumRange(name, lo, hi, None, boost)
    return _numeric_values(ctx, ft, name, (value,), boost)


def _numeric_values(ctx: QueryContext, ft: Any, name: str, values: tuple, boost: float) -> Any:
    type_name = type_of(ft)
    parsed: list = []
    if type_name == "scaled_float":
        factor = float(getattr(ft, "scaling_factor", 1.0))
        parsed = [math.floor(float(number(ctx, v)) * factor + 0.5) for v in values]
        return ValueSet(name, "long", tuple(parsed), boost)
    if ft.kind == "double":
        precision = FLOAT_TYPES.get(type_name)
        parsed = [float(number(ctx, v)) for v in values]
        return ValueSet(name, "double", tuple(parsed), boost, precision=precision)
    if type_name == "unsigned_long":
        # Integers in [0, 2^64-1] match their stored (shifted) long; any other number matches nothing.
        numbers = [number(ctx, v) for v in values]
        parsed = [
            unsigned_long.to_stored(n) for n in numbers if type(n) is int and 0 <= n <= unsigned_long.MAX
        ]
        return ValueSet(name, "long", tuple(parsed), boost) if parsed else NoDocs()
    for v in values:
        value = integer_term(ctx, type_name, v)
        if value is not None:
            parsed.append(value)
    return ValueSet(name, "long", tuple(parsed), boost) if parsed else NoDocs()


def plan_term(q: Term, ctx: QueryContext) -> Any:
    return term_plan(ctx, q.field, q.value, q.boost, q.case_insensitive)


def plan_terms(q: Terms, ctx: QueryContext) -> Any:
    if len(q.values) > ctx.max_terms_count:
        raise failed(
            ctx,
            "illegal_argument_exception",
            f"The number of terms [{len(q.values)}] used in the Terms Query request has exceeded the "
            f"allowed maximum of [{ctx.max_terms_count}]. This maximum can be set by changing the "
            "[index.max_terms_count] index level setting.",
        )
    if not q.values:
        return NoDocs()
    if q.field == "_id":
        return IdsPlan(tuple(scalar_text(v) for v in q.values), q.boost)
    ft = field_type(ctx, q.field)
    if ft is None:
        return NoDocs()
    refuse_vector(ctx, ft, q.field, "term")
    if type_of(ft) == "ip":
        searchable(ctx, ft, q.field)
        return ConstPlan(BoolPlan(should=tuple(_ip_term(ctx, q.field, v, 1.0) for v in q.values)), q.boost)
    if ft.kind in ("text", "keyword"):
        searchable(ctx, ft, q.field, needs_index=ft.kind == "text")
        return ValueSet(q.field, ft.kind, tuple(keyword_text(ft, v) for v in q.values), q.boost)
    searchable(ctx, ft, q.field)
    type_name = type_of(ft)
    if type_name == "boolean":
        return ValueSet(q.field, "long", tuple({boolean(ctx, v) for v in q.values}), q.boost)
    if type_name in DATE_TYPES:
        inner = tuple(term_plan(ctx, q.field, v, 1.0) for v in q.values)
        return ConstPlan(BoolPlan(should=inner), q.boost)
    return _numeric_values(ctx, ft, q.field, q.values, q.boost)


def plan_ids(q: Ids, ctx: QueryContext) -> Any:
    check_ids_count(len(q.values), ctx.max_result_window, ctx.index_name, ctx.index_uuid)
    return IdsPlan(q.values, q.boost) if q.values else NoDocs()


def _range_field_plan(q: Range, ctx: QueryContext, ft: Any, type_name: str) -> Any:
    """A `range` query on a range field: the query's interval, its exclusive ends moved inward,
    and how documents' intervals must meet it (`relation`, `intersects` by default)."""
    lo, hi = type_bounds(type_name)
    try:
        if type_name == "date_range":
            if q.lower is not None:
                lo = date_bound(ctx, ft, q.lower, not q.include_lower, q.format, q.time_zone)
                lo += 0 if q.include_lower else 1
            if q.upper is not None:
                hi = date_bound(ctx, ft, q.upper, q.include_upper, q.format, q.time_zone)
                hi -= 0 if q.include_upper else 1
        else:
            if q.lower is not None:
                lo = parse_bound(type_name, q.lower, None, True)
                lo = lo if q.include_lower else step(type_name, lo, True)
            if q.upper is not None:
                hi = parse_bound(type_name, q.upper, None, True)
                hi = hi if q.include_upper else step(type_name, hi, False)
    except RangeValueError as exc:
        raise failed(ctx, "illegal_argument_exception", str(exc)) from None
    if lo > hi:
        return NoDocs()
    return RangeFieldPlan(q.field, type_name, lo, hi, q.relation or "intersects", q.boost)


def plan_range(q: Range, ctx: QueryContext) -> Any:
    ft = field_type(ctx, q.field)
    if ft is None:
        return NoDocs()
    refuse_vector(ctx, ft, q.field, "range")
    kind, type_name = ft.kind, type_of(ft)
    searchable(ctx, ft, q.field, needs_index=kind == "text")
    if type_name in RANGE_TYPES:
        return _range_field_plan(q, ctx, ft, type_name)
    if type_name == "ip":
        lo = None if q.lower is None else _ip_text(ctx, q.lower).encode()
        hi = None if q.upper is None else _ip_text(ctx, q.upper).encode()
        return TermRange(q.field, kind, lo, hi, q.include_lower, q.include_upper, q.boost)
    if kind in ("text", "keyword"):
        lo = None if q.lower is None else keyword_text(ft, q.lower).encode()
        hi = None if q.upper is None else keyword_text(ft, q.upper).encode()
        return TermRange(q.field, kind, lo, hi, q.include_lower, q.include_upper, q.boost)
    if type_name in DATE_TYPES:
        lo = hi = None
        if q.lower is not None:
            lo = date_bound(ctx, ft, q.lower, not q.include_lower, q.format, q.time_zone)
            lo += 0 if q.include_lower else 1
        if q.upper is not None:
            hi = date_bound(ctx, ft, q.upper, q.include_upper, q.format, q.time_zone)
            hi -= 0 if q.include_upper else 1
        return NumRange(q.field, lo, hi, None, q.boost)
    if type_name == "boolean":
        lo = None if q.lower is None else boolean(ctx, q.lower) + (0 if q.include_lower else 1)
        hi = None if q.upper is None else boolean(ctx, q.upper) - (0 if q.include_upper else 1)
        return NumRange(q.field, lo, hi, None, q.boost)
    lower = None if q.lower is None else number(ctx, q.lower)
    upper = None if q.upper is None else number(ctx, q.upper)
    if type_name == "scaled_float":
        factor = float(getattr(ft, "scaling_factor", 1.0))
        lo_f, hi_f = float_bounds(
            None,
            None if lower is None else float(lower) * factor,
            None if upper is None else float(upper) * factor,
            q.include_lower,
            q.include_upper,
        )
        lo = None if lo_f is None else math.ceil(lo_f)
        hi = None if hi_f is None else math.floor(hi_f)
        return NumRange(q.field, lo, hi, None, q.boost)
    if kind == "double":
        precision = FLOAT_TYPES.get(type_name)
        lo_f, hi_f = float_bounds(precision, lower, upper, q.include_lower, q.include_upper)
        return NumRange(q.field, lo_f, hi_f, precision, q.boost)
    if type_name == "unsigned_long":
        return _unsigned_range(q, lower, upper)
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
    return NumRange(q.field, lo_i, hi_i, None, q.boost)


def _ip_text(ctx: QueryContext, value: Any) -> str:
    """An address of a query as the `ip` field stores it; a malformed one fails the query."""
    try:
        return ip.encode(scalar_text(value))
    except ValueError as exc:
        raise failed(ctx, "illegal_argument_exception", str(exc)) from None


def _ip_term(ctx: QueryContext, name: str, value: Any, boost: float) -> Any:
    """A term on an `ip` field: one address, or every address of a CIDR block (`10.0.0.0/8`)."""
    text = scalar_text(value)
    if "/" not in text:
        return ValueSet(name, "keyword", (_ip_text(ctx, text),), boost)
    try:
        lo, hi = ip.cidr_bounds(text)
    except ValueError as exc:
        raise failed(ctx, "illegal_argument_exception", str(exc)) from None
    return TermRange(name, "keyword", lo.encode(), hi.encode(), True, True, boost)


def _unsigned_range(q: Range, lower: int | float | None, upper: int | float | None) -> Any:
    """A range on an `unsigned_long` field: bounds below 0 or above 2^64-1 are clamped to the
    type's range (UnsignedLongFieldType's range query), then shifted as the values are stored."""
    lo, hi = 0, unsigned_long.MAX
    if lower is not None:
        if isinstance(lower, float) and not math.isfinite(lower):
            lo = 0 if lower < 0 else unsigned_long.MAX + 1
        else:
            lo = math.ceil(lower) if q.include_lower else math.floor(lower) + 1
    if upper is not None:
        if isinstance(upper, float) and not math.isfinite(upper):
            hi = unsigned_long.MAX if upper > 0 else -1
        else:
            hi = math.floor(upper) if q.include_upper else math.ceil(upper) - 1
    lo, hi = max(lo, 0), min(hi, unsigned_long.MAX)
    if lo > hi:
        return NoDocs()
    return NumRange(q.field, unsigned_long.to_stored(lo), unsigned_long.to_stored(hi), None, q.boost)


def plan_exists(q: Exists, ctx: QueryContext) -> Any:
    if q.field in ("_id", "_index", "_source"):
        return AllDocs(q.boost)
    ft = field_type(ctx, q.field)
    if ft is not None and type_of(ft) == "rank_features":
        raise failed(
            ctx, "illegal_argument_exception", "[rank_features] fields do not support [exists] queries"
        )
    if ft is not None and ft.kind in _LEAF_KINDS:
        return ExistsPlan((q.field,), q.boost)
    if ctx.mapping is None:
        return NoDocs()
    children = tuple(ctx.mapping.resolve_fields(f"{q.field}.*"))
    return ExistsPlan(children, q.boost) if children else NoDocs()


def _pattern_plan(
    ctx: QueryContext,
    name: str,
    mode: str,
    value: str,
    case_insensitive: bool,
    boost: float,
    flags: int = lucene_regexp.ALL,
    max_states: int = lucene_regexp.DEFAULT_MAX_STATES,
) -> Any:
    if name == "_id":
        if mode != "prefix" or case_insensitive:
            _compiled(ctx, mode, value, case_insensitive, flags, max_states)
        return PatternPlan(name, "_id", mode, value, case_insensitive, boost, flags, max_states)
    if name == "_index":
        pattern = _compiled(ctx, mode, value, case_insensitive, flags, max_states)
        return AllDocs(boost) if pattern.matches(ctx.index_name or "") else NoDocs()
    ft = field_type(ctx, name)
    if ft is None:
        return NoDocs()
    if ft.kind not in ("text", "keyword") or type_of(ft) == "ip":
        query = {"prefix": "prefix", "wildcard": "wildcard", "regexp": "regexp"}[mode]
        raise shard_error(
            ctx,
            f"Can only use {query} queries on keyword, text and wildcard fields - not on [{name}] "
            f"which is of type [{type_of(ft)}]",
        )
    searchable(ctx, ft, name, needs_index=ft.kind == "text")
    if mode == "wildcard" and ft.kind == "text":
        value = value.lower()  # the search analyzer's normalizer
    elif mode != "regexp" and ft.kind == "keyword":
        value = ft.normalize(value)
    if mode != "prefix" or case_insensitive:  # a plain prefix is a range of the sorted terms
        _compiled(ctx, mode, value, case_insensitive, flags, max_states)
    return PatternPlan(name, ft.kind, mode, value, case_insensitive, boost, flags, max_states)


def _compiled(
    ctx: QueryContext, mode: str, value: str, case_insensitive: bool, flags: int, max_states: int
) -> TermPattern:
    """The compiled pattern: Lucene's parse errors and its determinize limit are the shard's
    "failed to create query" errors, raised before any term is scanned."""
    try:
        return term_pattern(mode, value, case_insensitive, flags, max_states)
    except ElasticError as e:
        raise failed(ctx, e.error_type, e.reason) from None


def plan_prefix(q: Prefix, ctx: QueryContext) -> Any:
    return _pattern_plan(ctx, q.field, "prefix", q.value, q.case_insensitive, q.boost)


def plan_wildcard(q: Wildcard, ctx: QueryContext) -> Any:
    return _pattern_plan(ctx, q.field, "wildcard", q.value, q.case_insensitive, q.boost)


def plan_regexp(q: Regexp, ctx: QueryContext) -> Any:
    length = len(q.value.encode("utf-16-le")) // 2  # Java's String.length()
    if length > ctx.max_regex_length:
        raise failed(
            ctx,
            "illegal_argument_exception",
            f"The length of regex [{length}] used in the Regexp Query request has exceeded the allowed "
            f"maximum of [{ctx.max_regex_length}]. This maximum can be set by changing the "
            "[index.max_regex_length] index level setting.",
        )
    return _pattern_plan(
        ctx, q.field, "regexp", q.value, q.case_insensitive, q.boost, q.flags, q.max_determinized_states
    )
