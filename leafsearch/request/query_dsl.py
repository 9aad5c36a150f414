"""The query DSL: the JSON `query` object parsed into a tree of frozen dataclasses.

Parsing only checks the shape of the request, as Elasticsearch's query builders do on the
coordinating node; everything that depends on the mapping (field types, value parsing, analysis,
wildcard field names) happens per shard in `leafsearch.search.matching`. Refusals carry the type and
message Elasticsearch sends: hand-written builders (`match`, `term`, `range`, ...) raise
`parsing_exception` "[match] query does not support [x]", while the builders Elasticsearch declares
with an ObjectParser (`bool`, `ids`, `match_all`, `match_none`) raise `x_content_parse_exception`
"[bool] unknown field [x]" and wrap the errors of their inner queries in "[bool] failed to parse
field [must]", with the inner error as root cause. Positions (`[1:17]`, `line`/`col`) are not
reported: the body reaches this module already decoded.

The nodes are frozen and hashable; `query_key` gives a key that also tells `1` from `1.0` and `True`,
for the coordinator's per-snapshot result cache.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from dataclasses import replace as dataclass_replace
from functools import cache, partial
from operator import attrgetter
from typing import Any

import orjson

from leafsearch.common.json_tokens import not_numeric, token_name
from leafsearch.common.settings import node_setting
from leafsearch.common.suggestions import did_you_mean
from leafsearch.errors import (
    ElasticError,
    IllegalArgument,
    ParseException,
    ParsingError,
    XContentParseError,
)
from leafsearch.request import lucene_regexp
from leafsearch.scripts.service import check_size
from leafsearch.unsupported import NotSupported

Scalar = str | int | float | bool

MAX_NESTED_DEPTH: int = node_setting("indices.query.bool.max_nested_depth")


class Query:
    """Base of every query node."""

    __slots__ = ()


def replace_queries(query: Query, replace: Callable[[Query], Query | None]) -> Query:
    """`query` with each node `replace` answers a query for (not descended into) swapped in, and
    the nodes above rebuilt; `replace` answers None to keep a node. Recursive, bounded by the
    parser's nesting limit (`indices.query.bool.max_nested_depth`)."""
    swapped = replace(query)
    if swapped is not None:
        return swapped
    changes: dict[str, Any] = {}
    for f in fields(query):  # type: ignore[arg-type]
        value = getattr(query, f.name)
        if isinstance(value, Query):
            new = replace_queries(value, replace)
        elif isinstance(value, tuple) and any(isinstance(v, Query) for v in value):
            new = tuple(replace_queries(v, replace) if isinstance(v, Query) else v for v in value)
        else:
            continue
        if new != value:
            changes[f.name] = new
    return dataclass_replace(query, **changes) if changes else query  # type: ignore[type-var]


def queries_within(query: Query, stop_at: type | tuple[type, ...] = ()) -> list[Query]:
    """`query` and every query nested in it (bool clauses, wrapped queries, ...), iteratively,
    last clause first; a query of type `stop_at` is listed but not looked inside. O(nodes),
    bounded by the parser's nesting and clause limits."""
    found: list[Query] = []
    stack: list[Any] = [query]
    while stack:
        node = stack.pop()
        if isinstance(node, Query):
            found.append(node)
            if not isinstance(node, stop_at):
                stack.extend(_field_values(type(node))(node))
        elif isinstance(node, tuple | list):
            stack.extend(node)
    return found


@cache
def _field_values(kind: type) -> Callable[[Query], tuple[Any, ...]]:
    """A query class's field values as a tuple, by one C call (`dataclasses.fields` builds the
    class's list anew at each call: a walk of a W6 query took 6.8 µs of CPU, 12 walks a search)."""
    names = [f.name for f in fields(kind)]
    if len(names) > 1:
        return attrgetter(*names)
    return lambda node: tuple(getattr(node, name) for name in names)


def outermost(query: Query, kind: type | tuple[type, ...]) -> list[Any]:
    """The queries of type `kind` in `query`'s tree that are not inside another of that kind, in
    the order `queries_within` meets them."""
    return [q for q in queries_within(query, stop_at=kind) if isinstance(q, kind)]


@dataclass(frozen=True, slots=True)
class MatchAll(Query):
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class MatchNone(Query):
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Match(Query):
    field: str
    query: Scalar
    operator: str = "or"
    minimum_should_match: str | None = None
    zero_terms_query: str = "none"
    fuzziness: str | None = None
    prefix_length: int = 0
    max_expansions: int = 50
    lenient: bool = False
    analyzer: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class MatchPhrase(Query):
    field: str
    query: Scalar
    slop: int = 0
    zero_terms_query: str = "none"
    analyzer: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class MatchPhrasePrefix(Query):
    field: str
    query: Scalar
    slop: int = 0
    max_expansions: int = 50
    zero_terms_query: str = "none"
    analyzer: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class MultiMatch(Query):
    query: Scalar
    fields: tuple[str, ...] = ()
    type: str = "best_fields"
    operator: str = "or"
    minimum_should_match: str | None = None
    tie_breaker: float | None = None
    slop: int = 0
    max_expansions: int = 50
    fuzziness: str | None = None
    prefix_length: int = 0
    zero_terms_query: str = "none"
    lenient: bool | None = None
    analyzer: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Term(Query):
    field: str
    value: Scalar
    case_insensitive: bool = False
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Terms(Query):
    field: str
    values: tuple[Scalar, ...]
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class TermsLookup(Query):
    """`terms` whose values are the `path` values of document `id` of `index` (read with `routing`),
    fetched on the coordinator before the search runs (search/terms_lookup.py)."""

    field: str
    index: str
    id: str
    path: str
    routing: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Range(Query):
    """`lower`/`upper` None means unbounded; the `include_*` flags say gte/lte versus gt/lt."""

    field: str
    lower: Scalar | None = None
    upper: Scalar | None = None
    include_lower: bool = True
    include_upper: bool = True
    format: str | None = None
    time_zone: str | None = None
    relation: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Exists(Query):
    field: str
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Ids(Query):
    values: tuple[str, ...]
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Prefix(Query):
    field: str
    value: str
    case_insensitive: bool = False
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Wildcard(Query):
    field: str
    value: str
    case_insensitive: bool = False
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Regexp(Query):
    """A Lucene regular expression; `flags` are Lucene's syntax flags (`ALL` by default)."""

    field: str
    value: str
    case_insensitive: bool = False
    boost: float = 1.0
    flags: int = lucene_regexp.ALL
    max_determinized_states: int = 10_000


@dataclass(frozen=True, slots=True)
class Bool(Query):
    must: tuple[Query, ...] = ()
    should: tuple[Query, ...] = ()
    filter: tuple[Query, ...] = ()
    must_not: tuple[Query, ...] = ()
    minimum_should_match: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class ConstantScore(Query):
    filter: Query
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class ScriptSpec:
    """A script as a request carries it (hashable: its params as canonical JSON). A stored
    script's (`{"id": ...}`) has `stored_id` and no source until the coordinator reads the stored
    source in (search/stored_scripts.py): the request layer does not know the node's scripts."""

    source: str
    params_json: bytes = b"{}"
    stored_id: str | None = None


@dataclass(frozen=True, slots=True)
class ScriptQuery(Query):
    """`script` query: the documents for which the script returns true."""

    script: ScriptSpec
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class ScriptScore(Query):
    """`script_score` query: the inner query's matches, scored by the script (`_score` is theirs)."""

    query: Query
    script: ScriptSpec
    min_score: float | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class DisMax(Query):
    queries: tuple[Query, ...]
    tie_breaker: float = 0.0
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class QueryString(Query):
    """`query_string`: the syntax is parsed per shard (its errors are shard errors in Elasticsearch)."""

    query: str
    default_field: str | None = None
    fields: tuple[str, ...] = ()
    default_operator: str = "or"
    allow_leading_wildcard: bool = True
    analyze_wildcard: bool = False
    lenient: bool | None = None
    minimum_should_match: str | None = None
    phrase_slop: int = 0
    tie_breaker: float = 0.0
    type: str = "best_fields"
    time_zone: str | None = None
    analyzer: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Knn(Query):
    """kNN on a `dense_vector` field, exact (search/query/vector_queries.py): the `k` nearest
    vectors of each shard among the documents passing every `filter` (and `similarity`)."""

    field: str
    query_vector: tuple[float, ...]
    k: int
    num_candidates: int
    filter: tuple[Query, ...] = ()
    similarity: float | None = None
    boost: float = 1.0
    #: A search's top-level `knn`: its `k` nearest over every shard (search/knn_phase.py).
    top_level: bool = False


@dataclass(frozen=True, slots=True)
class KnnHits(Query):
    """A top-level `knn` resolved by the coordinator: its hits, (index, _id, score), scored so."""

    field: str
    hits: tuple[tuple[str, str, float], ...]
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class RankFeature(Query):
    """`rank_feature` on a `rank_feature` field or a feature of a `rank_features` field
    (search/query/feature_queries.py). `function`: saturation, log, sigmoid or linear; `pivot`
    None for saturation's default (the shard's geometric mean)."""

    field: str
    function: str = "saturation"
    pivot: float | None = None
    scaling_factor: float = 0.0
    exponent: float = 0.0
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Percolate(Query):
    """`percolate`: documents of a `percolator` field whose stored query matches one of the given
    `documents` (JSON; search/query/percolate_queries.py), or the document `index`/`id` names,
    which the coordinator reads first (search/terms_lookup.py)."""

    field: str
    documents: tuple[bytes, ...] = ()
    index: str | None = None
    id: str | None = None
    routing: str | None = None
    version: int | None = None
    name: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Nested(Query):
    """`nested`: `query` over each object of the `nested` field `path` alone, its parents matched
    and scored by `score_mode` (search/query/nested_queries.py). `inner_hits` is an
    `InnerHitsSpec`: each hit's matching objects (search/nested_hits.py)."""

    path: str
    query: Query
    score_mode: str = "avg"
    ignore_unmapped: bool = False
    inner_hits: Any = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class SimpleQueryString(Query):
    query: str
    fields: tuple[str, ...] = ()
    default_operator: str = "or"
    lenient: bool | None = None
    minimum_should_match: str | None = None
    analyze_wildcard: bool = False
    analyzer: str | None = None
    boost: float = 1.0


def query_is_match_all(query: Query) -> bool:
    """Whether a query matches every document with one constant score (the coordinator's fast path)."""
    if isinstance(query, MatchAll):
        return True
    if isinstance(query, Bool):
        return not (query.must or query.should or query.filter or query.must_not)
    return False


def query_key(query: Query) -> str:
    """A stable, hashable key of a query; the repr keeps `1`, `1.0` and `True` apart."""
    return repr(query)


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_query(body: Any) -> Query:
    """The query tree of a `query` object; None means match_all (a search without `query`)."""
    if body is None:
        return MatchAll()
    return _parse(body, 0)


def _parse(body: Any, depth: int) -> Query:
    if not isinstance(body, dict):
        raise ParsingError("[_na] query malformed, must start with start_object")
    if not body:
        raise IllegalArgument("query malformed, empty clause found")
    name, inner = next(iter(body.items()))
    if not isinstance(inner, dict):
        raise ParsingError(f"[{name}] query malformed, no start_object after query name")
    parser = _PARSERS.get(name)
    if parser is None:
        if name in _QUERY_NAMES:
            raise NotSupported(f"[{name}] query")
        raise ParsingError(f"unknown query [{name}]{did_you_mean(name, _QUERY_NAMES)}")
    if depth >= MAX_NESTED_DEPTH:
        raise IllegalArgument(
            "The nested depth of the query exceeds the maximum nested depth for queries set in "
            "[indices.query.bool.max_nested_depth]"
        )
    query = parser(inner, depth + 1)
    if len(body) > 1:
        raise ParsingError(f"[{name}] malformed query, expected [END_OBJECT] but found [FIELD_NAME]")
    return query


# -- value helpers ---------------------------------------------------------------------------


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _not_numeric(name: str, key: str, value: Any) -> ElasticError:
    """A query parser's refusal of a value where it reads a number (`parser.floatValue()`): an
    object or array is a token it does not expect, a boolean or null Jackson's own refusal."""
    if isinstance(value, dict | list):
        return ParsingError(f"[{name}] unknown token [{token_name(value)}] after [{key}]")
    return XContentParseError(not_numeric(value))


def _float(name: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _not_numeric(name, key, value)
    try:
        return float(value)
    except ValueError:
        raise ParsingError(f"[{name}] failed to parse [{key}] value [{value}]") from None


def _int(name: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _not_numeric(name, key, value)
    try:
        return int(value) if not isinstance(value, str) else int(value.strip())
    except ValueError:
        raise ParsingError(f"[{name}] failed to parse [{key}] value [{value}]") from None


def _bool(name: str, key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ParsingError(
        f"[{name}] failed to parse [{key}]: "
        f"Failed to parse value [{value}] as only [true] or [false] are allowed."
    )


def _text(name: str, key: str, value: Any) -> str:
    if not _is_scalar(value):
        raise ParsingError(f"[{name}] unknown token [{token_name(value)}] after [{key}]")
    return scalar_text(value)


def scalar_text(value: Any) -> str:
    """`parser.text()` / `toString()` of a decoded JSON scalar: what Java prints for it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _operator(value: Any) -> str:
    text = str(value).lower()
    if text not in ("or", "and"):
        raise IllegalArgument(f"operator needs to be either [OR, AND], but not [{value}]")
    return text


def _zero_terms(value: Any) -> str:
    text = str(value).lower()
    if text not in ("none", "all"):
        raise ParsingError(f"Unsupported zero_terms_query value [{value}]")
    return text


def _msm(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ParsingError(f"[minimum_should_match] unknown token [{token_name(value)}]")
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


_JAVA_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?")


def _edits(value: int) -> str:
    if value not in (0, 1, 2):
        raise IllegalArgument(f"Valid edit distances are [0, 1, 2] but was [{value}]")
    return str(value)


def parse_fuzziness(value: Any) -> str:
    """A `fuzziness` value as Elasticsearch's `Fuzziness.parse` reads it, normalized to `0`, `1`,
    `2`, `AUTO` or `AUTO:low,high`; anything else is refused with its message."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise IllegalArgument(f"Can't parse fuzziness on token: [{token_name(value)}]")
    if not isinstance(value, str):
        return _edits(_java_int(float(value)))
    if not value:
        raise IllegalArgument("fuzziness cannot be null or empty.")
    upper = value.upper()
    if upper == "AUTO":
        return "AUTO"
    if upper.startswith("AUTO:"):
        limits = upper[5:].split(",")
        if len(limits) != 2:
            raise ParseException("failed to find low and high distance values")
        try:
            low, high = (int(x) for x in limits)
        except ValueError:
            raise ParseException(f'failed to parse [{upper}] as a "auto:int,int"') from None
        if low < 0 or high < 0 or low > high:
            raise IllegalArgument(
                "fuzziness wrongly configured, must be: lowDistance > 0, highDistance > 0 and "
                "lowDistance <= highDistance "
            )
        return f"AUTO:{low},{high}"
    text = upper.strip()
    if not _JAVA_FLOAT.fullmatch(text):
        raise IllegalArgument(f"fuzziness cannot be [{value}].")
    number = float(text.rstrip("FD"))
    if math.isfinite(number) and math.fmod(number, 1) > 0:
        raise IllegalArgument(f"fuzziness needs to be one of 0.0, 1.0 or 2.0 but was {number}")
    return _edits(_java_int(number))


def _java_int(number: float) -> int:
    """Java's `(int)` cast of a float: truncation, saturating at the int range."""
    if math.isnan(number):
        return 0
    if not math.isfinite(number):
        return 2**31 - 1 if number > 0 else -(2**31)
    return max(-(2**31), min(2**31 - 1, int(number)))


def _fields(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ParsingError(f"[{name}] query does not support [fields]")


def _single_field(name: str, body: dict) -> tuple[str, Any]:
    """The one field of a field-keyed query (`{"term": {"user": ...}}`), refusing a second one."""
    field: str | None = None
    value: Any = None
    for key, val in body.items():
        if field is not None:
            raise ParsingError(f"[{name}] query doesn't support multiple fields, found [{field}] and [{key}]")
        field, value = key, val
    if field is None:
        raise IllegalArgument("field name is null or empty")
    return field, value


_IGNORED = ("_name",)


# -- leaf queries ----------------------------------------------------------------------------


def _match_all(body: dict, depth: int) -> Query:
    boost = 1.0
    for key, value in body.items():
        if key == "boost":
            boost = _float("match_all", key, value)
        elif key not in _IGNORED:
            raise XContentParseError(f"[match_all] unknown field [{key}]")
    return MatchAll(boost)


def _match_none(body: dict, depth: int) -> Query:
    for key, value in body.items():
        if key == "boost":
            _float("match_none", key, value)
        elif key not in _IGNORED:
            raise XContentParseError(f"[match_none] unknown field [{key}]")
    return MatchNone()


def _field_options(
    name: str, body: dict, value_key: str, handlers: dict[str, Callable[[Any], Any]]
) -> tuple[str, dict[str, Any]]:
    """Short (`{"f": value}`) and long (`{"f": {value_key: value, option: ...}}`) forms of a
    single-field query; returns the field and the parsed options (the value under `value_key`)."""
    field, spec = _single_field(name, body)
    if not isinstance(spec, dict):
        if not _is_scalar(spec):
            raise ParsingError(f"[{name}] unknown token [{token_name(spec)}] after [{field}]")
        return field, {value_key: spec}
    options: dict[str, Any] = {}
    for key, value in spec.items():
        handler = handlers.get(key)
        if handler is None:
            if key in _IGNORED:
                continue
            raise ParsingError(f"[{name}] query does not support [{key}]")
        if key not in ("query", "value") and not _is_scalar(value) and value is not None:
            raise ParsingError(f"[{name}] unknown token [{token_name(value)}] after [{key}]")
        options[key] = handler(value)
    return field, options


def _query_value(name: str) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        if value is not None and not _is_scalar(value):
            raise ParsingError(f"[{name}] unknown token [{token_name(value)}] after [query]")
        return value

    return parse


def _match(body: dict, depth: int) -> Query:
    name = "match"
    handlers: dict[str, Callable[[Any], Any]] = {
        "query": _query_value(name),
        "operator": _operator,
        "minimum_should_match": _msm,
        "zero_terms_query": _zero_terms,
        "fuzziness": parse_fuzziness,
        "prefix_length": lambda v: _int(name, "prefix_length", v),
        "max_expansions": lambda v: _int(name, "max_expansions", v),
        "lenient": lambda v: _bool(name, "lenient", v),
        "analyzer": lambda v: _text(name, "analyzer", v),
        "boost": lambda v: _float(name, "boost", v),
        "fuzzy_rewrite": lambda v: v,
        "fuzzy_transpositions": lambda v: _bool(name, "fuzzy_transpositions", v),
        "auto_generate_synonyms_phrase_query": lambda v: v,
    }
    field, opts = _field_options(name, body, "query", handlers)
    if opts.get("query") is None:
        raise ParsingError("No text specified for text query")
    opts.pop("fuzzy_rewrite", None)
    opts.pop("fuzzy_transpositions", None)
    opts.pop("auto_generate_synonyms_phrase_query", None)
    return Match(field=field, **opts)


def _match_phrase_like(name: str, with_expansions: bool) -> Callable[[dict, int], Query]:
    def parse(body: dict, depth: int) -> Query:
        handlers: dict[str, Callable[[Any], Any]] = {
            "query": _query_value(name),
            "slop": lambda v: _slop(name, v),
            "zero_terms_query": _zero_terms,
            "analyzer": lambda v: _text(name, "analyzer", v),
            "boost": lambda v: _float(name, "boost", v),
        }
        if with_expansions:
            handlers["max_expansions"] = lambda v: _int(name, "max_expansions", v)
        field, opts = _field_options(name, body, "query", handlers)
        if opts.get("query") is None:
            raise ParsingError("No text specified for text query")
        if with_expansions:
            return MatchPhrasePrefix(field=field, **opts)
        return MatchPhrase(field=field, **opts)

    return parse


def _slop(name: str, value: Any) -> int:
    slop = _int(name, "slop", value)
    if slop < 0:
        raise IllegalArgument("No negative slop allowed.")
    return slop


_MULTI_MATCH_TYPES = ("best_fields", "most_fields", "cross_fields", "phrase", "phrase_prefix", "bool_prefix")


def _multi_match(body: dict, depth: int) -> Query:
    name = "multi_match"
    opts: dict[str, Any] = {}
    for key, value in body.items():
        if key == "query":
            if not _is_scalar(value) and value is not None:
                raise ParsingError(f"[{name}] unknown token [{token_name(value)}] after [{key}]")
            opts["query"] = value
        elif key == "fields":
            opts["fields"] = _fields(name, value)
        elif key == "type":
            kind = str(value).lower()
            if kind not in _MULTI_MATCH_TYPES:
                raise ParseException(f"failed to parse [{name}] query type [{value}]. unknown type.")
            opts["type"] = kind
        elif key == "operator":
            opts["operator"] = _operator(value)
        elif key == "minimum_should_match":
            opts["minimum_should_match"] = _msm(value)
        elif key == "tie_breaker":
            opts["tie_breaker"] = _float(name, key, value)
        elif key == "slop":
            opts["slop"] = _slop(name, value)
        elif key in ("max_expansions", "prefix_length"):
            opts[key] = _int(name, key, value)
        elif key == "fuzziness":
            opts["fuzziness"] = parse_fuzziness(value)
        elif key == "zero_terms_query":
            opts["zero_terms_query"] = _zero_terms(value)
        elif key == "lenient":
            opts["lenient"] = _bool(name, key, value)
        elif key == "analyzer":
            opts["analyzer"] = _text(name, key, value)
        elif key == "boost":
            opts["boost"] = _float(name, key, value)
        elif key in ("fuzzy_rewrite", "fuzzy_transpositions", "auto_generate_synonyms_phrase_query", "_name"):
            continue
        else:
            raise ParsingError(f"[{name}] query does not support [{key}]")
    if opts.get("query") is None:
        raise ParsingError("No text specified for multi_match query")
    if opts.get("fuzziness") is not None and opts.get("type") in ("cross_fields", "phrase", "phrase_prefix"):
        raise ParsingError(f"Fuzziness not allowed for type [{opts['type']}]")
    return MultiMatch(**opts)


def _term(body: dict, depth: int) -> Query:
    name = "term"
    field, spec = _single_field(name, body)
    if isinstance(spec, list):
        raise ParsingError("[term] query does not support array of values")
    if not isinstance(spec, dict):
        if not _is_scalar(spec):
            raise IllegalArgument("value cannot be null")
        return Term(field, spec)
    value: Any = None
    boost, case_insensitive = 1.0, False
    for key, val in spec.items():
        if key in ("value", "term"):
            if isinstance(val, list):
                raise ParsingError(
                    "[term] query does not support arrays for value - use a bool query with multiple term "
                    "clauses in the should section or use a Terms query if scoring is not required"
                )
            value = val
        elif key == "boost":
            boost = _float(name, key, val)
        elif key == "case_insensitive":
            case_insensitive = _bool(name, key, val)
        elif key not in _IGNORED:
            raise ParsingError(f"[term] query does not support [{key}]")
    if value is None or not _is_scalar(value):
        raise IllegalArgument("value cannot be null")
    return Term(field, value, case_insensitive, boost)


def _terms(body: dict, depth: int) -> Query:
    name = "terms"
    field: str | None = None
    values: list | None = None
    lookup: dict[str, str] | None = None
    boost = 1.0
    for key, value in body.items():
        if isinstance(value, list | dict):
            if field is not None:
                raise ParsingError(
                    f"[{name}] query does not support multiple fields, found [{field}] and [{key}]"
                )
            if isinstance(value, dict):
                field, lookup = key, _terms_lookup(value)
                continue
            if not all(_is_scalar(v) for v in value):
                raise ParsingError(f"[{name}] query does not support [{key}] values that are not scalars")
            field, values = key, value
        elif key == "boost":
            boost = _float(name, key, value)
        elif key not in _IGNORED:
            raise ParsingError(f"[{name}] query does not support [{key}]")
    if field is not None and lookup is not None:
        return TermsLookup(field, lookup["index"], lookup["id"], lookup["path"], lookup.get("routing"), boost)
    if field is None or values is None:
        raise ParsingError(f"[{name}] query requires a field and a list of values")
    return Terms(field, tuple(values), boost)


_LOOKUP_KEYS = ("index", "id", "path", "routing")


def _terms_lookup(spec: dict) -> dict[str, str]:
    """TermsLookup's ConstructingObjectParser: `index`, `id` and `path` required, `routing`
    optional, each a JSON string."""
    out: dict[str, str] = {}
    for key, value in spec.items():
        if key not in _LOOKUP_KEYS:
            raise XContentParseError(f"[terms_lookup] unknown field [{key}]")
        if not isinstance(value, str):
            raise XContentParseError(
                f"[terms_lookup] {key} doesn't support values of type: {token_name(value)}"
            )
        out[key] = value
    missing = [key for key in _LOOKUP_KEYS[:3] if key not in out]
    if missing:
        raise IllegalArgument(f"Required [{', '.join(missing)}]")
    return out


_RELATIONS = ("intersects", "within", "contains")


def _range(body: dict, depth: int) -> Query:
    name = "range"
    field, spec = _single_field(name, body)
    if not isinstance(spec, dict):
        raise ParsingError(f"[{name}] query does not support [{field}]")
    opts: dict[str, Any] = {}
    for key, value in spec.items():
        if key in ("gt", "gte", "lt", "lte", "from", "to"):
            if value is not None and not _is_scalar(value):
                raise ParsingError(f"[{name}] unknown token [{token_name(value)}] after [{key}]")
            if key in ("gt", "gte", "from"):
                opts["lower"] = value
                if key != "from":
                    opts["include_lower"] = key == "gte"
            else:
                opts["upper"] = value
                if key != "to":
                    opts["include_upper"] = key == "lte"
        elif key in ("include_lower", "include_upper"):
            opts[key] = _bool(name, key, value)
        elif key in ("format", "time_zone"):
            opts[key] = _text(name, key, value)
        elif key == "relation":
            relation = _text(name, key, value).lower()
            if relation not in _RELATIONS:
                raise ParsingError(f"[{name}] query does not support relation [{value}]")
            opts["relation"] = relation
        elif key == "boost":
            opts["boost"] = _float(name, key, value)
        elif key not in _IGNORED:
            raise ParsingError(f"[{name}] query does not support [{key}]")
    return Range(field=field, **opts)


def _exists(body: dict, depth: int) -> Query:
    field: str | None = None
    boost = 1.0
    for key, value in body.items():
        if key == "field":
            field = _text("exists", key, value)
        elif key == "boost":
            boost = _float("exists", key, value)
        elif key not in _IGNORED:
            raise ParsingError(f"[exists] query does not support [{key}]")
    if not field:
        raise ParsingError("[exists] must be provided with a [field]")
    return Exists(field, boost)


def _ids(body: dict, depth: int) -> Query:
    values: tuple[str, ...] = ()
    boost = 1.0
    for key, value in body.items():
        if key == "values":
            if not isinstance(value, list) or not all(_is_scalar(v) for v in value):
                raise XContentParseError("[ids] failed to parse field [values]")
            values = tuple(scalar_text(v) for v in value)
        elif key == "boost":
            boost = _float("ids", key, value)
        elif key not in _IGNORED:
            raise XContentParseError(f"[ids] unknown field [{key}]")
    return Ids(values, boost)


def _pattern_query(name: str, value_keys: tuple[str, ...], cls: type) -> Callable[[dict, int], Query]:
    def parse(body: dict, depth: int) -> Query:
        field, spec = _single_field(name, body)
        if not isinstance(spec, dict):
            if not _is_scalar(spec):
                raise ParsingError(f"[{name}] unknown token [{token_name(spec)}] after [{field}]")
            return cls(field, scalar_text(spec))
        value: str | None = None
        boost, case_insensitive = 1.0, False
        extra: dict[str, int] = {}
        for key, val in spec.items():
            if key in value_keys:
                value = _text(name, key, val)
            elif key == "boost":
                boost = _float(name, key, val)
            elif key == "case_insensitive":
                case_insensitive = _bool(name, key, val)
            elif cls is Regexp and key == "flags":
                extra["flags"] = regexp_flags(_text(name, key, val))
            elif cls is Regexp and key == "flags_value":
                extra["flags"] = _int(name, key, val) & lucene_regexp.ALL
            elif cls is Regexp and key == "max_determinized_states":
                extra["max_determinized_states"] = _int(name, key, val)
            elif key not in ("rewrite", *_IGNORED):
                raise ParsingError(f"[{name}] query does not support [{key}]")
        if value is None:
            raise IllegalArgument(f"No value specified for {name} query")
        return cls(field, value, case_insensitive, boost, **extra)

    return parse


def regexp_flags(text: str) -> int:
    """Elasticsearch's `RegexpFlag.resolveValue`: `|`-separated flag names, empty meaning ALL."""
    if not text:
        return lucene_regexp.ALL
    value = 0
    for part in text.split("|"):
        if not part:
            continue
        name = part.upper()
        if name not in lucene_regexp.FLAG_NAMES:
            raise IllegalArgument(f"Unknown regexp flag [{part}]")
        value |= lucene_regexp.FLAG_NAMES[name]
    return value


# -- compound queries ------------------------------------------------------------------------


def _inner(container: str, key: str, body: Any, depth: int, wrap: bool) -> Query:
    """Parse a clause; ObjectParser containers report inner errors as "failed to parse field"."""
    try:
        return _parse(body, depth)
    except ElasticError as e:
        if not wrap:
            raise
        roots = e.roots() or [e.caused_by or e]
        raise XContentParseError(
            f"[{container}] failed to parse field [{key}]", caused_by=e, root_causes=roots
        ) from None


def _clauses(container: str, key: str, value: Any, depth: int, wrap: bool) -> tuple[Query, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    return tuple(_inner(container, key, item, depth, wrap) for item in items)


def _bool_query(body: dict, depth: int) -> Query:
    clauses: dict[str, tuple[Query, ...]] = {}
    msm: str | None = None
    boost = 1.0
    for key, value in body.items():
        if key in ("must", "should", "filter", "must_not"):
            clauses[key] = clauses.get(key, ()) + _clauses("bool", key, value, depth, wrap=True)
        elif key == "minimum_should_match":
            msm = _msm(value)
        elif key == "boost":
            boost = _float("bool", key, value)
        elif key in ("adjust_pure_negative", *_IGNORED):
            continue
        else:
            raise XContentParseError(f"[bool] unknown field [{key}]")
    return Bool(
        must=clauses.get("must", ()),
        should=clauses.get("should", ()),
        filter=clauses.get("filter", ()),
        must_not=clauses.get("must_not", ()),
        minimum_should_match=msm,
        boost=boost,
    )


def _constant_score(body: dict, depth: int) -> Query:
    inner: Query | None = None
    boost = 1.0
    for key, value in body.items():
        if key == "filter":
            if isinstance(value, list):
                raise ParsingError(f"unexpected token [{token_name(value)}]")
            if not isinstance(value, dict):  # a value where the query goes
                raise ParsingError("[constant_score] query does not support [filter]")
            inner = _parse(value, depth)
        elif key == "boost":
            boost = _float("constant_score", key, value)
        elif key not in _IGNORED:
            raise ParsingError(f"[constant_score] query does not support [{key}]")
    if inner is None:
        raise ParsingError("[constant_score] requires a 'filter' element")
    return ConstantScore(inner, boost)


_SCORE_MODES = ("avg", "max", "min", "sum", "none")


def _nested(body: dict, depth: int) -> Query:
    from leafsearch.request import collapse, search_request  # they import this module

    path = query = inner_hits = None
    score_mode, ignore_unmapped, boost = "avg", False, 1.0
    for key, value in body.items():
        if key == "path":
            path = _text("nested", key, value)
        elif key == "query":
            query = _inner("nested", key, value, depth, wrap=False)
        elif key == "score_mode":
            score_mode = _text("nested", key, value)
            if score_mode not in _SCORE_MODES:
                raise IllegalArgument(f"illegal score_mode [{score_mode}]")
        elif key == "ignore_unmapped":
            ignore_unmapped = _bool("nested", key, value)
        elif key == "inner_hits":
            inner_hits = collapse.parse_inner_hits(
                value,
                search_request.parse_fetch_source,
                search_request._int_value,
                search_request._bool_value,
            )
        elif key == "boost":
            boost = _float("nested", key, value)
        elif key not in _IGNORED:
            raise ParsingError(f"[nested] query does not support [{key}]")
    if query is None:
        raise ParsingError("[nested] requires 'query' field")
    if path is None:
        raise ParsingError("[nested] requires 'path' field")
    if inner_hits is not None and not inner_hits.name:
        inner_hits = dataclass_replace(inner_hits, name=path)
    return Nested(path, query, score_mode, ignore_unmapped, inner_hits, boost)


def script_spec(query: str, value: Any) -> ScriptSpec:
    """A request's `script`: inline (a string or `{"source", "params", "lang"}`) or stored
    (`{"id", "params"}`)."""
    if isinstance(value, str):
        value = {"source": value}
    if not isinstance(value, dict):
        raise ParsingError(f"[{query}] script must be a string or an object")
    unknown = next((k for k in value if k not in ("source", "id", "params", "lang", "options")), None)
    if unknown is not None:
        raise ParsingError(f"[script] unknown field [{unknown}]")
    source, stored_id, params = value.get("source"), value.get("id"), value.get("params", {})
    if (source is None) == (stored_id is None):
        raise IllegalArgument("must specify either [source] for an inline script or [id] for a stored script")
    if stored_id is not None and "lang" in value:
        raise IllegalArgument("illegally specified <lang> for a stored script")
    if value.get("lang", "painless") != "painless":
        raise IllegalArgument(f"script_lang not supported [{value['lang']}]")
    if not isinstance(params, dict):
        raise ParsingError(f"[{query}] script must have a [source] string and [params] object")
    params_json = orjson.dumps(params, option=orjson.OPT_SORT_KEYS)
    if stored_id is not None:
        if not isinstance(stored_id, str):
            raise ParsingError(f"[{query}] script [id] must be a string")
        return ScriptSpec("", params_json, stored_id)
    if not isinstance(source, str):
        raise ParsingError(f"[{query}] script must have a [source] string and [params] object")
    check_size(source, "inline", "<inline>")
    return ScriptSpec(source, params_json)


def _script_query(body: dict, depth: int) -> Query:
    script, boost = None, 1.0
    for key, value in body.items():
        if key == "script":
            script = script_spec("script", value)
        elif key == "boost":
            boost = _float("script", key, value)
        elif key not in _IGNORED:
            raise ParsingError(f"[script] query does not support [{key}]")
    if script is None:
        raise ParsingError("script must be provided with a [script] query")
    return ScriptQuery(script, boost)


def _script_score(body: dict, depth: int) -> Query:
    inner: Query | None = None
    script, min_score, boost = None, None, 1.0
    for key, value in body.items():
        if key == "query":
            inner = _parse(value, depth) if isinstance(value, dict) else None
            if inner is None:
                raise ParsingError("[script_score] query malformed, [query] must be an object")
        elif key == "script":
            script = script_spec("script_score", value)
        elif key == "min_score":
            min_score = _float("script_score", key, value)
        elif key == "boost":
            boost = _float("script_score", key, value)
        elif key not in _IGNORED:
            raise ParsingError(f"[script_score] query does not support [{key}]")
    if inner is None:
        raise ParsingError("[script_score] requires a 'query' element")
    if script is None:
        raise ParsingError("[script_score] requires a 'script' element")
    return ScriptScore(inner, script, min_score, boost)


def _dis_max(body: dict, depth: int) -> Query:
    queries: tuple[Query, ...] = ()
    tie_breaker, boost = 0.0, 1.0
    for key, value in body.items():
        if key == "queries":
            queries = _clauses("dis_max", key, value, depth, wrap=False)
        elif key == "tie_breaker":
            tie_breaker = _float("dis_max", key, value)
        elif key == "boost":
            boost = _float("dis_max", key, value)
        elif key not in _IGNORED:
            raise ParsingError(f"[dis_max] query does not support [{key}]")
    if not queries:
        raise ParsingError("[dis_max] requires 'queries' field with at least one clause")
    return DisMax(queries, tie_breaker, boost)


# -- query strings ---------------------------------------------------------------------------


def _query_string(body: dict, depth: int) -> Query:
    name = "query_string"
    opts: dict[str, Any] = {}
    for key, value in body.items():
        if key == "query":
            opts["query"] = _text(name, key, value)
        elif key == "default_field":
            opts["default_field"] = _text(name, key, value)
        elif key == "fields":
            opts["fields"] = _fields(name, value)
        elif key == "default_operator":
            opts["default_operator"] = _operator(value)
        elif key in ("allow_leading_wildcard", "analyze_wildcard", "lenient"):
            opts[key] = _bool(name, key, value)
        elif key == "minimum_should_match":
            opts["minimum_should_match"] = _msm(value)
        elif key == "phrase_slop":
            opts["phrase_slop"] = _slop(name, value)
        elif key == "tie_breaker":
            opts["tie_breaker"] = _float(name, key, value)
        elif key == "type":
            kind = str(value).lower()
            if kind not in _MULTI_MATCH_TYPES:
                raise ParseException(f"failed to parse [multi_match] query type [{value}]. unknown type.")
            opts["type"] = kind
        elif key in ("time_zone", "analyzer"):
            opts[key] = _text(name, key, value)
        elif key == "boost":
            opts["boost"] = _float(name, key, value)
        elif key in (
            "quote_analyzer",
            "quote_field_suffix",
            "enable_position_increments",
            "fuzziness",
            "fuzzy_max_expansions",
            "fuzzy_prefix_length",
            "fuzzy_transpositions",
            "fuzzy_rewrite",
            "rewrite",
            "auto_generate_synonyms_phrase_query",
            "max_determinized_states",
            "escape",
            *_IGNORED,
        ):
            continue
        else:
            raise ParsingError(f"[{name}] query does not support [{key}]")
    if "query" not in opts:
        raise ParsingError(f"[{name}] must be provided with a [query]")
    return QueryString(**opts)


def _simple_query_string(body: dict, depth: int) -> Query:
    name = "simple_query_string"
    opts: dict[str, Any] = {}
    for key, value in body.items():
        if key == "query":
            opts["query"] = _text(name, key, value)
        elif key == "fields":
            opts["fields"] = _fields(name, value)
        elif key == "default_operator":
            opts["default_operator"] = _operator(value)
        elif key in ("lenient", "analyze_wildcard"):
            opts[key] = _bool(name, key, value)
        elif key == "minimum_should_match":
            opts["minimum_should_match"] = _msm(value)
        elif key == "analyzer":
            opts["analyzer"] = _text(name, key, value)
        elif key == "boost":
            opts["boost"] = _float(name, key, value)
        elif key in (
            "flags",
            "quote_field_suffix",
            "auto_generate_synonyms_phrase_query",
            "fuzzy_prefix_length",
            "fuzzy_max_expansions",
            "fuzzy_transpositions",
            *_IGNORED,
        ):
            continue
        else:
            raise ParsingError(f"[{name}] unsupported field [{key}]")
    if "query" not in opts:
        raise ParsingError(f"[{name}] query text missing")
    return SimpleQueryString(**opts)


#: Elasticsearch's limit on `num_candidates` (KnnSearchBuilder.NUM_CANDS_LIMIT).
MAX_NUM_CANDIDATES = 10_000
#: The `k` of a `knn` query that names neither `k` nor `num_candidates`: the default `size`.
_DEFAULT_K = 10


def parse_knn(body: Any, depth: int = 0, *, default_k: int = _DEFAULT_K, top_level: bool = False) -> Knn:
    """A `knn` query, or one entry of a search's top-level `knn` (whose `k` defaults to `size`)."""
    if not isinstance(body, dict):
        raise ParsingError("[knn] query malformed, no start_object after query name")
    field: str | None = None
    vector: tuple[float, ...] | None = None
    k: int | None = None
    num_candidates: int | None = None
    filters: tuple[Query, ...] = ()
    similarity: float | None = None
    boost = 1.0
    for key, value in body.items():
        if key == "field":
            field = _text("knn", key, value)
        elif key == "query_vector":
            vector = _query_vector(value)
        elif key == "k":
            k = _int("knn", key, value)
        elif key == "num_candidates":
            num_candidates = _int("knn", key, value)
        elif key == "filter":
            filters = _clauses("knn", key, value, depth, True)
        elif key == "similarity":
            similarity = _float("knn", key, value)
        elif key == "boost":
            boost = _float("knn", key, value)
        elif key in ("query_vector_builder", "inner_hits", "rescore_vector"):
            raise NotSupported(f"[{key}] in [knn]")
        elif key not in _IGNORED:
            raise XContentParseError(f"[knn] unknown field [{key}]")
    if field is None:
        raise IllegalArgument("[knn] requires [field]")
    if vector is None:
        raise IllegalArgument("either [query_vector] or [query_vector_builder] must be provided")
    if k is not None and k < 1:
        raise IllegalArgument("[k] must be greater than 0")
    if k is not None and k > MAX_NUM_CANDIDATES:
        raise IllegalArgument(f"[k] cannot exceed [{MAX_NUM_CANDIDATES}]")
    if num_candidates is not None:
        if num_candidates > MAX_NUM_CANDIDATES:
            raise IllegalArgument(f"[num_candidates] cannot exceed [{MAX_NUM_CANDIDATES}]")
        if num_candidates < 1:
            raise IllegalArgument("[num_candidates] must be greater than 0")
        if k is not None and num_candidates < k:
            raise IllegalArgument("[num_candidates] cannot be less than [k]")
    if k is None:
        k = default_k if num_candidates is None else min(default_k, num_candidates)
    if num_candidates is None:
        num_candidates = min(max(k, round(1.5 * k)), MAX_NUM_CANDIDATES)
    return Knn(field, vector, k, num_candidates, filters, similarity, boost, top_level)


def _query_vector(value: Any) -> tuple[float, ...]:
    if isinstance(value, str):
        raise NotSupported("a [query_vector] given as a hex string")
    if not isinstance(value, list) or not all(type(v) is int or type(v) is float for v in value):
        raise ParsingError("[knn] failed to parse field [query_vector]")
    return tuple(float(v) for v in value)


_RANK_FEATURE_FUNCTIONS = {
    "saturation": ("pivot",),
    "log": ("scaling_factor",),
    "sigmoid": ("pivot", "exponent"),
}


def _rank_feature(body: dict, depth: int) -> RankFeature:
    opts: dict[str, Any] = {}
    functions = []
    for key, value in body.items():
        if key == "field":
            opts["field"] = _text("rank_feature", key, value)
        elif key == "boost":
            opts["boost"] = _float("rank_feature", key, value)
        elif key in (*_RANK_FEATURE_FUNCTIONS, "linear"):
            if not isinstance(value, dict):
                raise ParsingError(
                    f"[rank_feature] {key} doesn't support values of type: {token_name(value)}"
                )
            allowed = _RANK_FEATURE_FUNCTIONS.get(key, ())
            for param, number in value.items():
                if param not in allowed:
                    raise XContentParseError(f"[{key}] unknown field [{param}]")
                opts[param] = _float(key, param, number)
            missing = [p for p in allowed if p not in value and key != "saturation"]  # its pivot: optional
            if missing:
                raise IllegalArgument(f"Required [{', '.join(missing)}]")
            functions.append(key)
        elif key not in _IGNORED:
            raise XContentParseError(f"[feature] unknown field [{key}]")  # the parser's name
    if "field" not in opts:
        raise IllegalArgument("Required [field]")
    if len(functions) > 1:
        raise IllegalArgument("Can only specify one of [log], [saturation], [sigmoid] and [linear]")
    return RankFeature(function=functions[0] if functions else "saturation", **opts)


def _percolate(body: dict, depth: int) -> Percolate:
    opts: dict[str, Any] = {}
    given = []
    for key, value in body.items():
        if key in ("field", "index", "id", "routing", "preference", "name"):
            text = _text("percolate", key, value)
            if key != "preference":
                opts[key] = text
        elif key == "document":
            if not isinstance(value, dict):
                raise ParsingError(f"[percolate] {key} doesn't support values of type: {token_name(value)}")
            opts["documents"] = (orjson.dumps(value),)
        elif key == "documents":
            items = value if isinstance(value, list) else [value]
            if not all(isinstance(d, dict) for d in items):
                raise ParsingError("[percolate] documents must be objects")
            opts["documents"] = tuple(orjson.dumps(d) for d in items)
        elif key == "version":
            opts["version"] = _int("percolate", key, value)
        elif key == "boost":
            opts["boost"] = _float("percolate", key, value)
        elif key not in _IGNORED:
            raise XContentParseError(f"[percolate] unknown field [{key}]")
        if key in ("document", "documents", "id"):
            given.append(key)
    if "field" not in opts:
        raise IllegalArgument("Required [field]")
    if not given:
        raise IllegalArgument("Required one of fields [document, documents, id], but none were specified.")
    if len(given) > 1:
        raise IllegalArgument(f"The following fields are not allowed together: [{', '.join(given)}]")
    if "id" in opts and "index" not in opts:
        raise IllegalArgument("[index] is a required argument")
    return Percolate(**opts)


def _geo_query(name: str, body: dict, depth: int) -> Query:
    from leafsearch.request.geo_dsl import PARSERS  # it builds on this module

    return PARSERS[name](body, depth)


_PARSERS: dict[str, Callable[[dict, int], Query]] = {
    "match_all": _match_all,
    "match_none": _match_none,
    "match": _match,
    "match_phrase": _match_phrase_like("match_phrase", with_expansions=False),
    "match_phrase_prefix": _match_phrase_like("match_phrase_prefix", with_expansions=True),
    "multi_match": _multi_match,
    "term": _term,
    "terms": _terms,
    "range": _range,
    "exists": _exists,
    "ids": _ids,
    "prefix": _pattern_query("prefix", ("value", "prefix"), Prefix),
    "wildcard": _pattern_query("wildcard", ("value", "wildcard"), Wildcard),
    "regexp": _pattern_query("regexp", ("value",), Regexp),
    "bool": _bool_query,
    "constant_score": _constant_score,
    "dis_max": _dis_max,
    "script": _script_query,
    "script_score": _script_score,
    "query_string": _query_string,
    "simple_query_string": _simple_query_string,
    "knn": parse_knn,
    "rank_feature": _rank_feature,
    "percolate": _percolate,
    "nested": _nested,
    **{
        name: partial(_geo_query, name)
        for name in ("geo_distance", "geo_bounding_box", "geo_polygon", "geo_shape")
    },
}
from leafsearch.request import join_queries  # noqa: E402 (its queries build on this module's)

_PARSERS.update(join_queries.PARSERS)


#: Every query name Elasticsearch 8 registers, for the "did you mean" hint of an unknown one.
_QUERY_NAMES: tuple[str, ...] = tuple(
    sorted(
        set(_PARSERS)
        | {
            "bool",
            "boosting",
            "combined_fields",
            "distance_feature",
            "fuzzy",
            "function_score",
            "geo_bounding_box",
            "geo_distance",
            "geo_grid",
            "geo_polygon",
            "geo_shape",
            "has_child",
            "has_parent",
            "intervals",
            "match_bool_prefix",
            "more_like_this",
            "nested",
            "parent_id",
            "pinned",
            "regexp",
            "script",
            "script_score",
            "shape",
            "span_containing",
            "span_field_masking",
            "span_first",
            "span_multi",
            "span_near",
            "span_not",
            "span_or",
            "span_term",
            "span_within",
            "sparse_vector",
            "terms_set",
            "text_expansion",
            "weighted_tokens",
            "wrapper",
        }
    )
)
