"""Index mappings: field types, dynamic mapping and document parsing, with Elasticsearch's rules.

A `Mapping` is a tree of `ObjectMapper`s whose leaves are `FieldType`s. Parsing a document walks
the decoded JSON along that tree: every leaf has a `parse` method chosen once for its type, so the
per-value work is a type check and a list append into `ParsedDoc`. Fields met for the first time
are mapped dynamically into a pending set (found by parent and name in constant time, counted
against `index.mapping.total_fields.limit` as each is added) that is attached to the tree only
when the whole document parsed, so a refused document leaves the mapping unchanged.

Each object under a `nested` mapper is parsed as a hidden child document of its own
(`ParsedDoc.nested`), so a `nested` query matches it alone (`Segment.nested`); `include_in_parent`
and `include_in_root` also index its values into the parent or root document.
"""

from __future__ import annotations

import copy
import math
import re
import struct
from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import orjson
import re2

from leafsearch.common.json_tokens import not_boolean, not_numeric, token_name
from leafsearch.common.memo import memo
from leafsearch.common.settings import MAX_MAPPING_DEPTH
from leafsearch.errors import (
    DocumentParsing,
    ElasticError,
    IllegalArgument,
    MapperParsing,
    ParseException,
    StrictDynamicMapping,
)
from leafsearch.index import geo, ip, unsigned_long, vector_graph, vectors
from leafsearch.index.analyzers import DEFAULT_ANALYSIS, STANDARD, Analyzer, IndexAnalysis
from leafsearch.index.dates import (
    DEFAULT_DATE_FORMAT,
    DEFAULT_DATE_NANOS_FORMAT,
    MAX_NANOS,
    DateFormatter,
    instant_string,
)
from leafsearch.index.parsed import POSITION_INCREMENT_GAP, ParsedDoc
from leafsearch.index.range_fields import RANGE_TYPES, RangeValueError, encode_interval, parse_interval
from leafsearch.unsupported import FIELD_TYPES, reason

# fmt: off
METADATA_FIELDS = frozenset({
    "_id", "_index", "_routing", "_source", "_seq_no", "_primary_term", "_version", "_field_names",
    "_ignored", "_ignored_source", "_nested_path", "_data_stream_timestamp", "_tier", "_tsid",
})
# fmt: on
DEFAULT_DYNAMIC_DATE_FORMATS = ["strict_date_optional_time", "yyyy/MM/dd HH:mm:ss||yyyy/MM/dd"]
# What Elasticsearch's code (not its docs) uses: each dynamic format also accepts epoch millis,
# so a detected ISO date gets exactly the `date` default format and `GET _mapping` shows no format.
_DYNAMIC_DATE_FORMATTERS = [DateFormatter(f + "||epoch_millis") for f in DEFAULT_DYNAMIC_DATE_FORMATS]

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
#: Digits beyond any integer type's range (an unsigned long has 20): such text is refused unread.
_MAX_INTEGER_DIGITS = 40
#: How deep a mapping body may nest (objects and arrays): room for the deepest object mapping
#: `index.mapping.depth.limit` allows (two levels an object), below the 254 levels orjson writes,
#: with what wraps a mapping in the index's metadata file and in `GET _mapping`.
MAX_NESTING = 2 * MAX_MAPPING_DEPTH + 40
_INTEGER_TYPES = {
    "long": (_LONG_MIN, _LONG_MAX, "a long"),
    "integer": (-(2**31), 2**31 - 1, "an integer"),
    "short": (-(2**15), 2**15 - 1, "a short"),
    "byte": (-(2**7), 2**7 - 1, "a byte"),
}
_FLOAT_TYPES = ("double", "float", "half_float")
KINDS = {
    "text": "text",
    "keyword": "keyword",
    **dict.fromkeys(_INTEGER_TYPES, "long"),
    "unsigned_long": "long",  # shifted by 2^63, see index/unsigned_long.py
    "ip": "keyword",  # 16-byte addresses as hex terms, see index/ip.py
    **dict.fromkeys(_FLOAT_TYPES, "double"),
    "scaled_float": "long",
    "boolean": "long",
    "date": "long",
    "date_nanos": "long",
    # an interval is one keyword term of its two bounds (index/range_fields.py)
    **dict.fromkeys(RANGE_TYPES, "keyword"),
    "dense_vector": "vector",  # one (dims,) row per document, see index/vectors.py
    "join": "keyword",  # the relation name; `parent`: the ids linking relations (index/join.py)
    "parent": "keyword",
    **dict.fromkeys(("rank_feature", "rank_features"), "double"),  # see index/feature_fields.py
    "binary": "keyword",  # kept in `_source` only
    "completion": "keyword",  # one term per input, see index/completion.py
    "percolator": "keyword",  # the query's JSON, see index/percolator.py
    "geo_point": "long",  # Lucene's packed 32-bit latitude and longitude, see index/geo.py
}
_F32 = struct.Struct("<f")
_F16 = struct.Struct("<e")

# ---------------------------------------------------------------------------------------------
# Mapping parameters: which types take them, how values are normalised, what is updatable


class _MappingError(Exception):
    """A mapping refused while parsing; `java_cause` when Elasticsearch's cause is not its own type."""

    def __init__(self, message: str, java_cause: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.java_cause = java_cause


def _bool_param(value: Any, name: str, param: str) -> bool:
    if value is True or value is False:
        return value
    if value in ("true", "false"):
        return value == "true"
    raise _MappingError(
        f"Failed to parse value [{_java_text(value)}] as only [true] or [false] are allowed.", True
    )


def _int_param(value: Any, name: str, param: str) -> int:
    if type(value) is int or type(value) is str and re.fullmatch(r"[+-]?0*\d{1,10}", value):
        result = int(value)
        if not _INT_MIN <= result <= _INT_MAX:
            raise _MappingError(
                f"Failed to parse [{param}] on field [{name}]: [{_java_text(value)}] is not an integer", True
            )
        if param in ("ignore_above", "position_increment_gap") and result < 0:
            raise _MappingError(f"[{param}] must be positive, got [{result}]", True)
        return result
    raise _MappingError(
        f"Failed to parse [{param}] on field [{name}]: [{_java_text(value)}] is not an integer", True
    )


def _number_param(value: Any, name: str, param: str) -> float:
    try:
        result = float(value) if type(value) in (int, float, str) else math.nan
    except ValueError:
        result = math.nan
    if param == "scaling_factor" and not (math.isfinite(result) and result > 0):
        raise _MappingError(f"[scaling_factor] must be a positive number, got [{_java_text(value)}]", True)
    if math.isnan(result):
        raise _MappingError(f"Failed to parse [{param}] on field [{name}]: [{_java_text(value)}]", True)
    return value if type(value) in (int, float) else result


def _str_param(value: Any, name: str, param: str) -> str:
    if type(value) is str:
        return value
    if type(value) in (int, float, bool):
        return _java_text(value)
    raise _MappingError(f"Failed to parse [{param}] on field [{name}]: expected a string", True)


def _map_param(value: Any, name: str, param: str) -> dict:
    if type(value) is dict:
        return value
    raise _MappingError(f"[{param}] on mapper [{name}] should be of type map", True)


def _meta_param(value: Any, name: str, param: str) -> dict:
    """`meta`: at most 5 entries of strings, keys up to 20 characters, values up to 50."""
    if type(value) is not dict:
        got = f"{_java_simple_class(value)}[{_java_text(value)}]"
        raise _MappingError(f"[meta] must be an object, got {got} for field [{name}]")
    if len(value) > 5:
        raise _MappingError(f"[meta] can't have more than 5 entries, but got {len(value)} on field [{name}]")
    for key in value:
        if len(key) > 20:
            raise _MappingError(
                f"[meta] keys can't be longer than 20 chars, but got [{key}] for field [{name}]"
            )
    for entry in value.values():
        if entry is None:
            raise _MappingError(f"[meta] values can't be null (field [{name}])")
        if type(entry) is not str:
            got = f"{_java_simple_class(entry)}[{_java_text(entry)}]"
            raise _MappingError(f"[meta] values can only be strings, but got {got} for field [{name}]")
        if len(entry) > 50:
            raise _MappingError(
                f"[meta] values can't be longer than 50 chars, but got [{entry}] for field [{name}]"
            )
    return value


def _copy_to_param(value: Any, name: str, param: str) -> list[str] | str:
    if type(value) is str or type(value) is list and all(type(v) is str for v in value):
        return value
    raise _MappingError(
        f"Failed to parse [copy_to] on field [{name}]: expected a string or a list of strings"
    )


def _format_param(value: Any, name: str, param: str) -> str:
    if type(value) is not str:
        raise _MappingError(f"Failed to parse [format] on field [{name}]: expected a string", True)
    try:
        DateFormatter(value)
    except ValueError as e:
        raise _MappingError(f"Error parsing [format] on field [{name}]: {e}", True) from None
    return value


def _any_param(value: Any, name: str, param: str) -> Any:
    return value


# fmt: off
_BOOL_PARAMS = (
    "index", "doc_values", "store", "coerce", "ignore_malformed", "norms", "eager_global_ordinals",
    "index_phrases", "fielddata", "split_queries_on_whitespace", "time_series_dimension",
    "positive_score_impact", "preserve_separators", "preserve_position_increments", "ignore_z_value",
)
_STR_PARAMS = (
    "analyzer", "search_analyzer", "search_quote_analyzer", "index_options", "similarity", "term_vector",
    "normalizer", "locale", "time_series_metric",
)
_NORMALIZERS: dict[str, Callable[[Any, str, str], Any]] = {
    **dict.fromkeys(_BOOL_PARAMS, _bool_param),
    **dict.fromkeys(_STR_PARAMS, _str_param),
    **dict.fromkeys(("ignore_above", "position_increment_gap", "max_input_length"), _int_param),
    **dict.fromkeys(("boost", "scaling_factor"), _number_param),
    **dict.fromkeys(("index_prefixes", "fielddata_frequency_filter"), _map_param),
    "meta": _meta_param,
    "copy_to": _copy_to_param,
    "format": _format_param,
    "null_value": _any_param,
    "contexts": _any_param,
}

_COMMON = frozenset({"index", "doc_values", "store", "meta", "boost", "copy_to"})
_NUMERIC = _COMMON | {
    "null_value", "ignore_malformed", "coerce", "time_series_dimension", "time_series_metric",
}
_DATE = _COMMON | {"format", "locale", "null_value", "ignore_malformed"}
_PARAMS: dict[str, frozenset[str]] = {
    "text": (_COMMON - {"doc_values"}) | {
        "analyzer", "search_analyzer", "search_quote_analyzer", "index_options", "index_phrases",
        "index_prefixes", "norms", "position_increment_gap", "similarity", "term_vector", "fielddata",
        "fielddata_frequency_filter", "eager_global_ordinals",
    },
    "keyword": _COMMON | {
        "ignore_above", "null_value", "normalizer", "eager_global_ordinals", "index_options", "norms",
        "similarity", "split_queries_on_whitespace", "time_series_dimension",
    },
    **dict.fromkeys((*_INTEGER_TYPES, *_FLOAT_TYPES), _NUMERIC),
    "scaled_float": _NUMERIC | {"scaling_factor"},
    "unsigned_long": _NUMERIC - {"coerce"},
    "ip": _COMMON | {"null_value", "ignore_malformed", "time_series_dimension"},
    "boolean": _COMMON | {"null_value", "ignore_malformed"},
    "date": _DATE,
    "date_nanos": _DATE,
    **dict.fromkeys(RANGE_TYPES - {"date_range"}, _COMMON | {"coerce"}),
    "date_range": _COMMON | {"coerce", "format", "locale"},
    "dense_vector": frozenset({"dims", "element_type", "similarity", "index", "index_options", "meta"}),
    "join": frozenset({"relations", "eager_global_ordinals", "meta"}),
    **dict.fromkeys(("rank_feature", "rank_features"), frozenset({"positive_score_impact", "meta"})),
    "binary": frozenset({"doc_values", "store", "meta"}),
    "completion": frozenset({
        "analyzer", "search_analyzer", "preserve_separators", "preserve_position_increments",
        "max_input_length", "contexts", "meta",
    }),
    "percolator": frozenset(),
    "geo_point": _COMMON - {"boost"} | {"ignore_malformed", "ignore_z_value", "null_value"},
}
# Parameters a put-mapping may change; any other must keep its value (or its default).
_UPDATABLE = frozenset({
    "meta", "copy_to", "ignore_above", "ignore_malformed", "coerce", "boost", "search_analyzer",
    "search_quote_analyzer", "eager_global_ordinals", "fielddata", "fielddata_frequency_filter",
    "split_queries_on_whitespace", "relations",
})
_DEFAULTS: dict[str, Any] = {
    **dict.fromkeys(_BOOL_PARAMS, False),
    "index": True, "doc_values": True, "coerce": True, "analyzer": "default", "similarity": "BM25",
    "position_increment_gap": POSITION_INCREMENT_GAP, "term_vector": "no", "locale": "",
}
# fmt: on
_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    "text": {"norms": True, "index_options": "positions"},
    "keyword": {"norms": False, "index_options": "docs"},
    "date": {"format": DEFAULT_DATE_FORMAT},
    "date_nanos": {"format": DEFAULT_DATE_NANOS_FORMAT},
    "date_range": {"format": DEFAULT_DATE_FORMAT},
    **dict.fromkeys(("rank_feature", "rank_features"), {"positive_score_impact": True}),
    "binary": {"doc_values": False},
    "geo_point": {"ignore_z_value": True},
}


def _default(type_: str, param: str) -> Any:
    return _TYPE_DEFAULTS.get(type_, {}).get(param, _DEFAULTS.get(param))


class _Piece(str):
    """Literal text of `_java_text`'s output, told apart from the JSON strings it renders."""


def _java_text(value: Any) -> str:
    """A JSON value as Java's `toString` shows it in Elasticsearch's messages. Objects and arrays
    are rendered with a stack, since a document's values may nest as deep as JSON allows."""
    if type(value) is not dict and type(value) is not list:
        return _java_scalar(value)
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Piece:
            out.append(item)
        elif type(item) is dict:
            pieces: list[Any] = [_Piece("{")]
            for i, (key, child) in enumerate(item.items()):
                pieces += [_Piece(f"{', ' if i else ''}{key}="), child]
            pieces.append(_Piece("}"))
            stack.extend(reversed(pieces))
        elif type(item) is list:
            pieces = [_Piece("[")]
            for i, child in enumerate(item):
                pieces += [_Piece(", "), child] if i else [child]
            pieces.append(_Piece("]"))
            stack.extend(reversed(pieces))
        else:
            out.append(_java_scalar(item))
    return "".join(out)


def _java_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is float:
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if math.isnan(value):
            return "NaN"
        if value == 0 or 1e-3 <= abs(value) < 1e7:
            return repr(value)
        sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
        digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
        power = len(digit_tuple) + exponent - 1
        return f"{'-' if sign else ''}{digits[0]}.{digits[1:] or '0'}E{power}"
    return str(value)


# ---------------------------------------------------------------------------------------------
# Document-parsing errors (turned into Elasticsearch errors, with a source location, at the top)


class _Malformed(Exception):
    """A value its field cannot take; `cause_type` is Elasticsearch's name for the cause."""

    def __init__(self, message: str, cause_type: str = "illegal_argument_exception") -> None:
        super().__init__(message)
        self.message = message
        self.cause_type = cause_type


class _FieldError(Exception):
    def __init__(self, field: FieldType, value: Any, cause: _Malformed) -> None:
        super().__init__(cause.message)
        self.field, self.value, self.cause = field, value, cause


class _DocError(Exception):
    """Any other refusal: `key` is the document key used to locate it in the source; `build`
    makes the error from that location (`"[1:9] "`) and the document's id."""

    def __init__(self, key: str, build: Callable[[str, str | None], ElasticError]) -> None:
        super().__init__(key)
        self.key, self.build = key, build


def _with_java_cause(error: ElasticError, cause_type: str, reason: str) -> ElasticError:
    """Attach a cause that is not an Elasticsearch exception: the error stays its own root cause."""
    error.caused_by = ElasticError(reason, error_type=cause_type)
    error.root_is_self = True
    return error


def _scalar(v: Any) -> Any:
    """The value itself, unless it is an object or array where a leaf value is expected."""
    if type(v) is dict or type(v) is list:
        raise _Malformed(f"Can't get text on a {token_name(v)}")
    return v


def _flat(values: list) -> list:
    """Nested JSON arrays flatten into one list of values, as Elasticsearch reads them (with a
    stack, not recursion: arrays may nest as deep as the JSON parser allows)."""
    if not any(type(v) is list for v in values):
        return values
    out: list = []
    stack = [iter(values)]
    while stack:
        for v in stack[-1]:
            if type(v) is list:
                stack.append(iter(v))
                break
            out.append(v)
        else:
            stack.pop()
    return out


# ---------------------------------------------------------------------------------------------
# Field types


class FieldType:
    """A leaf field: its mapping parameters and how its values are indexed.

    `kind` is the storage kind (`text`, `keyword`, `long`, `double`); `params` are the
    parameters as given (echoed by `to_body`); `fields` the multi-fields by simple name.
    """

    leaf = True
    # fmt: off
    __slots__ = (
        "path", "name", "type", "kind", "params", "fields", "subfields", "index", "doc_values", "store",
        "norms", "formatter", "nanos", "scaling_factor", "ignore_above", "null_value", "coerce",
        "ignore_malformed", "position_increment_gap", "copy_to", "normalizer", "source_key", "parse",
        "convert", "_lo", "_hi", "_range_name", "_round", "analyzer", "search_analyzer",
        "search_quote_analyzer", "fielddata", "normalizer_chain",
    )
    # fmt: on

    def __init__(
        self,
        path: str,
        name: str,
        type_: str,
        params: dict[str, Any],
        fields: dict[str, FieldType],
        source_key: str | None = None,
    ) -> None:
        self.path, self.name, self.type, self.kind = path, name, type_, KINDS[type_]
        self.params, self.fields = params, fields
        self.subfields = tuple(fields.values())
        self.source_key = source_key or name
        get = params.get
        self.index = get("index", True)
        self.doc_values = type_ != "text" and get("doc_values", True)
        self.store = get("store", False)
        self.norms = get("norms", type_ == "text")
        self.null_value = get("null_value")
        self.coerce = get("coerce", True)
        self.ignore_malformed = get("ignore_malformed", False)
        self.position_increment_gap = get("position_increment_gap", POSITION_INCREMENT_GAP)
        self.fielddata = type_ == "text" and get("fielddata", False)
        copy_to = get("copy_to", ())
        self.copy_to = (copy_to,) if type(copy_to) is str else tuple(copy_to)
        self.normalizer = get("normalizer")
        self.ignore_above = get("ignore_above", 2**31 - 1)
        self.scaling_factor = get("scaling_factor")
        self.nanos = type_ == "date_nanos"
        self.formatter = None
        #: A text field's analyzers, bound by the mapping from its index's analysis (`Mapping._bind`).
        self.analyzer = self.search_analyzer = self.search_quote_analyzer = STANDARD
        #: A keyword's custom normalizer (`Mapping._bind`); None for none or `lowercase`.
        self.normalizer_chain: Analyzer | None = None
        self._lo, self._hi, self._range_name = _INTEGER_TYPES.get(type_, (_LONG_MIN, _LONG_MAX, "a long"))
        self._round = {"float": _F32, "half_float": _F16}.get(type_)
        if type_ in ("date", "date_nanos", "date_range"):
            self.formatter = DateFormatter(get("format", _default(type_, "format")))
        if type_ == "scaled_float" and self.scaling_factor is None:
            raise _MappingError("Field [scaling_factor] is required", True)
        # Chosen once: the per-value work is then one call without any dispatch on the type.
        self.parse, self.convert = {
            "text": (self._parse_text, self._convert_string),
            "keyword": (self._parse_keyword, self._convert_string),
            "date": (self._parse_date, self._convert_date),
            "date_nanos": (self._parse_date, self._convert_date),
            "boolean": (self._parse_values, self._convert_boolean),
            "scaled_float": (self._parse_values, self._convert_scaled),
            "unsigned_long": (self._parse_values, self._convert_unsigned),
            "ip": (self._parse_values, self._convert_ip),
            **dict.fromkeys(RANGE_TYPES, (self._parse_values, self._convert_range)),
            **dict.fromkeys(_FLOAT_TYPES, (self._parse_double, self._convert_float)),
        }.get(type_, (self._parse_long, self._convert_integer))
        if self.null_value is not None:
            self._check_null_value()

    def __repr__(self) -> str:
        return f"FieldType({self.path!r}, {self.type!r})"

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, **self.params}
        if self.fields:
            body["fields"] = {name: sub.to_body() for name, sub in sorted(self.fields.items())}
        return body

    def normalize(self, value: str) -> str:
        """A keyword as indexed (queries use it too): `lowercase` is built in, another normalizer
        the index's analysis defines."""
        if self.normalizer == "lowercase":
            return value.lower()
        if self.normalizer_chain is not None:
            terms = self.normalizer_chain.terms(value)
            return terms[0] if terms else ""
        return value

    def _check_null_value(self) -> None:
        try:
            self.convert(self.null_value)
        except _Malformed as e:
            raise _MappingError(
                f"Error parsing [null_value] on field [{self.name}]: {e.message}", True
            ) from None

    # -- parsing: a fast path for the common single value, then the general one --------------

    def _parse_keyword(self, value: Any, doc: ParsedDoc) -> None:
        if type(value) is str and self.normalizer is None:
            if len(value) <= self.ignore_above:
                if len(value) > MAX_TERM_CHARS_ALWAYS_SHORT:
                    try:
                        _check_term_length(self, value)
                    except _Malformed as e:
                        raise _FieldError(self, value, e) from None
                values = doc.keyword.get(self.path)
                if values is None:
                    doc.keyword[self.path] = [value]
                else:
                    values.append(value)
            for sub in self.subfields:
                sub.parse(value, doc)
        else:
            self._parse_values(value, doc)

    def _parse_long(self, value: Any, doc: ParsedDoc) -> None:
        if type(value) is int and self._lo <= value <= self._hi:
            values = doc.long.get(self.path)
            if values is None:
                doc.long[self.path] = [value]
            else:
                values.append(value)
            for sub in self.subfields:
                sub.parse(value, doc)
        else:
            self._parse_values(value, doc)

    def _parse_double(self, value: Any, doc: ParsedDoc) -> None:
        if type(value) is float and self._round is None and math.isfinite(value):
            values = doc.double.get(self.path)
            if values is None:
                doc.double[self.path] = [value]
            else:
                values.append(value)
            for sub in self.subfields:
                sub.parse(value, doc)
        else:
            self._parse_values(value, doc)

    def _parse_date(self, value: Any, doc: ParsedDoc) -> None:
        if type(value) is str:
            try:
                result = self.formatter.parse(value, self.nanos)
            except ValueError:
                result = None
            if result is not None and 0 <= result <= MAX_NANOS:  # others: the general path checks ranges
                values = doc.long.get(self.path)
                if values is None:
                    doc.long[self.path] = [result]
                else:
                    values.append(result)
                for sub in self.subfields:
                    sub.parse(value, doc)
                return
        self._parse_values(value, doc)

    def _parse_values(self, value: Any, doc: ParsedDoc) -> None:
        """Any value: arrays, nulls (`null_value`), coercion, `ignore_malformed`."""
        store = getattr(doc, self.kind)
        for v in _flat(value) if type(value) is list else (value,):
            if v is None:
                v = self.null_value
                if v is None:
                    continue
            try:
                converted = self.convert(v)
            except _Malformed as e:
                if self.ignore_malformed and type(v) is not dict:
                    continue
                raise _FieldError(self, v, e) from None
            if converted is not None:
                values = store.get(self.path)
                if values is None:
                    store[self.path] = [converted]
                else:
                    values.append(converted)
        for sub in self.subfields:
            sub.parse(value, doc)

    def _parse_text(self, value: Any, doc: ParsedDoc) -> None:
        if type(value) is str and self.analyzer.standard:
            tokens = self.analyzer.terms(value)
            positions = range(len(tokens))  # a range: cheap, and the buffer extends from it directly
        else:
            texts = []
            for v in _flat(value) if type(value) is list else (value,):
                if v is not None:
                    try:
                        texts.append(self.convert(v))
                    except _Malformed as e:
                        raise _FieldError(self, v, e) from None
            if not texts:
                for sub in self.subfields:
                    sub.parse(value, doc)
                return
            tokens, positions = self.analyzer.positions(texts, self.position_increment_gap)
        existing = doc.text.get(self.path)
        if existing is None:
            doc.text[self.path] = (tokens, positions)
        else:  # the path seen again (an array of objects): continue after a position gap
            old_tokens, old_positions = existing
            start = (old_positions[-1] if old_positions else -1) + self.position_increment_gap + 1
            old_tokens.extend(tokens)
            doc.text[self.path] = (old_tokens, [*old_positions, *(p + start for p in positions)])
        for sub in self.subfields:
            sub.parse(value, doc)

    # -- converting one JSON value (None: not indexed, as `ignore_above` says; `_Malformed`: refused)

    def _convert_string(self, v: Any) -> str | None:
        text = v if type(v) is str else _java_text(_scalar(v))
        if self.kind == "text":
            return text
        if len(text) > self.ignore_above:
            return None
        term = self.normalize(text)
        if len(term) > MAX_TERM_CHARS_ALWAYS_SHORT:
            _check_term_length(self, term)
        return term

    def _convert_boolean(self, v: Any) -> int:
        t = type(_scalar(v))
        if t is bool:
            return int(v)
        if t is str:
            if v in ("true", "false", ""):
                return int(v == "true")
            raise _Malformed(f"Failed to parse value [{v}] as only [true] or [false] are allowed.")
        raise _Malformed(not_boolean(v), "x_content_parse_exception")

    def _convert_float(self, v: Any) -> float:
        number = _to_double(self._numeric(v))
        if self._round is not None and math.isfinite(number):
            try:
                number = self._round.unpack(self._round.pack(number))[0]
            except OverflowError:
                number = math.inf
        if not math.isfinite(number):
            raise _Malformed(f"[{self.type}] supports only finite values, but got [{_java_text(v)}]")
        return number

    def _convert_scaled(self, v: Any) -> int:
        scaled = _to_double(self._numeric(v)) * self.scaling_factor
        if not math.isfinite(scaled):
            raise _Malformed(f"[double] supports only finite values, but got [{_java_text(v)}]")
        return self._check_range(math.floor(scaled + 0.5), v)  # Java's Math.round

    def _convert_range(self, v: Any) -> str:
        """An interval (an object of bounds, or a CIDR block) as its stored term."""
        try:
            lo, hi = parse_interval(
                self.type, v, self.formatter.parse if self.formatter else None, self.coerce
            )
        except (RangeValueError, ValueError) as e:
            raise _Malformed(str(e)) from None
        return encode_interval(self.type, lo, hi)

    def _convert_ip(self, v: Any) -> str:
        text = v if type(v) is str else _java_text(_scalar(v))
        try:
            return ip.encode(text)
        except ValueError as e:
            raise _Malformed(str(e)) from None

    def _convert_unsigned(self, v: Any) -> int:
        number = self._numeric(v)
        if type(number) is float:
            raise _Malformed(f"For input string: [{_java_text(number)}].")
        try:
            return unsigned_long.to_stored(unsigned_long.parse_value(number))
        except ValueError as e:
            raise _Malformed(str(e)) from None

    def _convert_integer(self, v: Any) -> int:
        return self._check_range(self._to_integer(self._numeric(v)), v)

    def _numeric(self, v: Any) -> int | float | str:
        t = type(_scalar(v))
        if t is bool or (t is str and not self.coerce):
            raise _Malformed(not_numeric(v), "x_content_parse_exception")
        return v

    def _to_integer(self, v: int | float | str) -> int:
        if type(v) is int:
            return v
        if type(v) is float:
            if not math.isfinite(v):
                raise _Malformed(f"Value [{_java_text(v)}] is out of range for {self._range_name}")
            if not self.coerce and not v.is_integer():
                raise _Malformed(f"Value [{_java_text(v)}] has a decimal part")
            return int(v)
        if re.fullmatch(r"[+-]?\d+", v):
            if len(v) > _MAX_INTEGER_DIGITS:  # past every range: never converted (digits cost time)
                raise _Malformed(f"Value [{v}] is out of range for {self._range_name}")
            return int(v)
        try:
            number = Decimal(v)
        except InvalidOperation:
            raise _Malformed(f'For input string: "{v}"') from None
        if not number.is_finite() or "_" in v or v != v.strip():
            raise _Malformed(f'For input string: "{v}"')
        if number.adjusted() >= _MAX_INTEGER_DIGITS:  # `1e999999999`: not a billion digits
            raise _Malformed(f"Value [{v}] is out of range for {self._range_name}")
        return int(number)

    def _check_range(self, number: int, original: Any) -> int:
        if not self._lo <= number <= self._hi:
            raise _Malformed(f"Value [{_java_text(original)}] is out of range for {self._range_name}")
        return number

    def _convert_date(self, v: Any) -> int:
        if type(_scalar(v)) is bool:
            raise _Malformed(
                f"failed to parse date field [{_java_text(v)}] with format [{self.formatter.pattern}]"
            )
        try:
            result = self.formatter.parse(v, self.nanos)
        except ValueError as e:
            raise _Malformed(str(e)) from None
        if self.nanos:
            if result < 0:
                raise _Malformed(
                    f"date[{instant_string(result)}] is before the epoch in 1970 and cannot be stored in "
                    "nanosecond resolution"
                )
            if result > MAX_NANOS:
                raise _Malformed(
                    f"date[{instant_string(result)}] is after 2262-04-11T23:47:16.854775807 and cannot be "
                    "stored in nanosecond resolution"
                )
        elif not _LONG_MIN <= result <= _LONG_MAX:
            raise _Malformed(f"date[{_java_text(v)}] is out of range for a long")
        return result


#: Lucene's limit on the UTF-8 bytes of one indexed term (`IndexWriter.MAX_TERM_LENGTH`).
MAX_TERM_BYTES = 32766
#: Strings of at most this many characters are within it whatever they hold (4 bytes a character).
MAX_TERM_CHARS_ALWAYS_SHORT = MAX_TERM_BYTES // 4


_VECTOR_NUMBERS = frozenset({int, float})


class VectorField(FieldType):
    """A `dense_vector` field: one vector of `dims` numbers per document (index/vectors.py)."""

    __slots__ = ("dims", "element_type", "graphs", "similarity")

    def __init__(
        self,
        path: str,
        name: str,
        type_: str,
        params: dict[str, Any],
        fields: dict[str, FieldType],
        source_key: str | None = None,
    ) -> None:
        super().__init__(path, name, type_, params, fields, source_key)
        self.doc_values = False
        self.dims: int = params["dims"]
        self.element_type: str = params.get("element_type", "float")
        self.similarity: str | None = params.get("similarity")
        #: {path: how its segment graph is built} for an indexed field with one (vector_graph.py)
        self.graphs: dict[str, vector_graph.GraphSpec] | None = None
        if self.index and self.similarity is not None:
            spec = vector_graph.spec_of(self.similarity, self.element_type, params.get("index_options"))
            self.graphs = None if spec is None else {path: spec}
        self.parse = self._parse_vector

    def _parse_vector(self, value: Any, doc: ParsedDoc) -> None:
        if value is None:
            return
        if type(value) is not list:
            raise _FieldError(self, value, _expected_token("START_ARRAY", value))
        if len(value) != self.dims:
            raise _DocError(self.source_key, self._dims_error(len(value)))
        if not set(map(type, value)) <= _VECTOR_NUMBERS:
            bad = next(v for v in value if type(v) not in _VECTOR_NUMBERS)
            raise _FieldError(self, value, _expected_token("VALUE_NUMBER", bad))
        array = np.asarray(value, dtype=np.float32) if self.element_type == "float" else None
        problem = vectors.vector_problem(value, self.element_type, self.similarity, array)
        if problem is None and self.path in doc.vector:
            problem = (
                f"Field [{self.path}] of type [dense_vector] doesn't support indexing multiple values "
                "for the same field in the same document"
            )
        if problem is not None:
            raise _DocError(self.source_key, lambda location, _id: _parse_failure(location, problem))
        doc.vector[self.path] = array if array is not None else np.asarray(value, dtype=np.int8)
        if self.graphs is not None:
            doc.graphs = self.graphs if doc.graphs is None else {**doc.graphs, **self.graphs}

    def _dims_error(self, found: int) -> Callable[[str, str | None], ElasticError]:
        def build(location: str, doc_id: str | None) -> ElasticError:
            message = (
                f"The [dense_vector] field [{self.path}] in doc [document with id '{doc_id}'] has a "
                f"different number of dimensions [{found}] than defined in the mapping [{self.dims}]"
            )
            return _parse_failure(location, message)

        return build


class GeoPointField(FieldType):
    """A `geo_point` field: each point a packed long of Lucene's quantized latitude and longitude
    (index/geo.py); a document may hold several."""

    __slots__ = ("ignore_z_value",)

    def __init__(
        self,
        path: str,
        name: str,
        type_: str,
        params: dict[str, Any],
        fields: dict[str, FieldType],
        source_key: str | None = None,
    ) -> None:
        self.ignore_z_value = params.get("ignore_z_value", True)
        super().__init__(path, name, type_, params, fields, source_key)
        self.parse, self.convert = self._parse_points, self._convert_point

    def _check_null_value(self) -> None:
        self.convert = self._convert_point  # called by FieldType's constructor, before it is set
        super()._check_null_value()

    def _parse_points(self, value: Any, doc: ParsedDoc) -> None:
        """One point in any form, or an array of them (an array of numbers is one `[lon, lat]`)."""
        single = type(value) is not list or (value and type(value[0]) in (int, float))
        for v in (value,) if single else value:
            if v is None:
                v = self.null_value
                if v is None:
                    continue
            try:
                packed = self._convert_point(v)
            except _Malformed as e:
                if self.ignore_malformed:
                    continue
                raise _FieldError(self, v, e) from None
            values = doc.long.get(self.path)
            if values is None:
                doc.long[self.path] = [packed]
            else:
                values.append(packed)
        for sub in self.subfields:
            sub.parse(value, doc)

    def _convert_point(self, v: Any) -> int:
        try:
            lat, lon = geo.parse_point(v, self.ignore_z_value)
        except geo.GeoError as e:
            raise _Malformed(str(e), "parse_exception") from None
        problem = geo.point_problem(lat, lon, self.path)
        if problem is not None:
            raise _Malformed(problem)
        return geo.encode(lat, lon)


def _expected_token(expected: str, found: Any) -> _Malformed:
    message = f"Failed to parse object: expecting token of type [{expected}] but found [{token_name(found)}]"
    return _Malformed(message, "parsing_exception")


def _parse_failure(location: str, message: str) -> ElasticError:
    """Elasticsearch's "failed to parse" of a document, its cause an illegal argument."""
    error = DocumentParsing(f"{location}failed to parse: {message}")
    return _with_java_cause(error, "illegal_argument_exception", message)


def _known_params(node: dict, allowed: frozenset[str], where: str) -> Iterator[tuple[str, Any]]:
    """A mapper's parameters but `type`, each refused as Elasticsearch refuses an unknown one or a
    null, in that order (`where`: "mapper [x] of type [t]", "runtime field [x] of type [t]")."""
    for key, value in node.items():
        if key == "type":
            continue
        if key not in allowed:
            raise _MappingError(f"unknown parameter [{key}] on {where}")
        if value is None:
            raise _MappingError(f"[{key}] on {where} must not have a [null] value")
        yield key, value


def _build_vector(
    path: str, name: str, node: dict, allowed: frozenset[str], source_key: str | None
) -> VectorField:
    """A `dense_vector` mapping, checked as Elasticsearch's DenseVectorFieldMapper checks it. The
    defaults Elasticsearch 8 shows (`index: true`, `similarity: cosine`) are kept in `params`."""
    params: dict[str, Any] = {}
    for key, value in _known_params(node, allowed, f"mapper [{name}] of type [dense_vector]"):
        if key == "dims":
            dims = _int_param(value, name, key)
            if not 1 <= dims <= vectors.MAX_DIMS:
                raise _MappingError(
                    f"The number of dimensions for field [{name}] should be in the range "
                    f"[1, {vectors.MAX_DIMS}] but was [{dims}]"
                )
            params[key] = dims
        elif key in ("element_type", "similarity"):
            choices = vectors.ELEMENT_TYPES if key == "element_type" else vectors.SIMILARITIES
            text = _str_param(value, name, key)
            if text not in choices:
                raise _MappingError(
                    f"Unknown value [{text}] for field [{key}] - accepted values are [{', '.join(choices)}]"
                )
            params[key] = text
        elif key == "index":
            params[key] = _bool_param(value, name, key)
        elif key == "index_options":
            params[key] = _map_param(value, name, key)
        else:
            params[key] = _NORMALIZERS[key](value, name, key)
    if "dims" not in params:
        raise _MappingError(reason(f"a [dense_vector] field without [dims] ([{name}])"))
    if params.setdefault("index", True):
        params.setdefault("similarity", "cosine")
    else:
        for key in ("similarity", "index_options"):
            if key in params:
                where = "for a field of type [dense_vector] when it is indexed"
                raise _MappingError(f"Field [{key}] can only be specified {where}")
    if "index_options" in params:
        element_type = params.get("element_type", "float")
        problem = vector_graph.options_problem(params["index_options"], name, params["dims"], element_type)
        if problem is not None:
            raise _MappingError(problem)
    if params["index"]:
        shown = vector_graph.shown_options(params.get("index_options"), params.get("element_type", "float"))
        if shown is not None:
            params["index_options"] = shown
    return VectorField(path, name, "dense_vector", params, {}, source_key)


def _check_term_length(field: FieldType, term: str) -> None:
    """Elasticsearch refuses a keyword longer than Lucene can index, before indexing anything
    (`ignore_above` is how a mapping skips such values instead)."""
    encoded = term.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_TERM_BYTES or not (field.index or field.doc_values or field.store):
        return
    prefix = ", ".join(str(b - 256 if b > 127 else b) for b in encoded[:30])  # Java's signed bytes
    raise _Malformed(
        f'Document contains at least one immense term in field="{field.path}" (whose UTF8 encoding is '
        f"longer than the max length {MAX_TERM_BYTES}), all of which were skipped. Please correct the "
        f"analyzer to not produce such terms. The prefix of the first immense term is: '[{prefix}]...'"
    )


_DOUBLE_TEXT = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[dDfF]?\s*")


def _to_double(v: int | float | str) -> float:
    if type(v) is str:
        if not _DOUBLE_TEXT.fullmatch(v):
            raise _Malformed(f'For input string: "{v}"', "number_format_exception")
        return float(v.strip().rstrip("dDfF"))
    return float(v)


def _is_number_text(text: str) -> bool:
    """Long.parseLong or Double.parseDouble would take it: such strings are never dates."""
    return bool(_DOUBLE_TEXT.fullmatch(text)) or text.strip() in ("NaN", "Infinity", "-Infinity", "+Infinity")


# ---------------------------------------------------------------------------------------------
# Objects


class ObjectMapper:
    """An object (or `nested`) field: its children by simple name."""

    leaf = False
    __slots__ = ("path", "name", "type", "children", "params", "enabled", "effective_dynamic", "attached")

    def __init__(self, path: str, name: str, type_: str = "object", params: dict | None = None) -> None:
        self.path, self.name, self.type = path, name, type_
        self.children: dict[str, FieldType | ObjectMapper] = {}
        self.params: dict[str, Any] = params or {}
        self.enabled = self.params.get("enabled", True)
        self.effective_dynamic = "true"
        #: False while created dynamically by a document still being parsed (not in the tree yet).
        self.attached = False

    def __repr__(self) -> str:
        return f"ObjectMapper({self.path!r})"

    def child_path(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.type != "object" or not self.children:
            body["type"] = self.type
        body.update(self.params)
        if self.children:
            body["properties"] = _properties_body(self.children)
        return body


def _properties_body(children: dict[str, FieldType | ObjectMapper]) -> dict[str, Any]:
    return {name: child.to_body() for name, child in sorted(children.items())}


def _dynamic_param(value: Any, name: str) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    text = str(value).lower() if type(value) is str else None
    if text in ("true", "false", "strict", "runtime"):
        return text
    raise _MappingError(f"Could not convert [{name}.dynamic] to boolean", True)


def _unsupported(node: dict) -> str:
    return " ".join(f"[{k} : {_java_text(v)}]" for k, v in node.items())


def _subobjects_param(value: Any, name: str) -> bool:
    if value == "auto":
        raise _MappingError(reason(f"[subobjects] auto on [{name}]"))
    return _bool_param(value, name, "subobjects")


def _no_subobjects(mapper: ObjectMapper) -> bool:
    """`subobjects: false`: the object holds leaves only, named with their dots (`time.max`)."""
    return mapper.params.get("subobjects") is False


def _flattened_properties(parent: ObjectMapper, name: str, node: dict) -> dict[str, Any]:
    """Under `subobjects: false`, an object's leaves named from the object (`a` holding `b` is
    `a.b`), as Elasticsearch flattens them; a `nested` one is refused."""
    if node.get("type") == "nested":
        raise _MappingError(
            f"Tried to add nested object [{name}] to object [{parent.name or '_doc'}] which does not "
            "support subobjects",
            True,
        )
    props = node.get("properties", {})
    if type(props) is not dict:
        raise _MappingError("properties must be a map type")
    return {f"{name}.{child}": sub for child, sub in props.items()}


def _inherit_subobjects(node: dict, mapper: ObjectMapper) -> dict:
    """A mapping update's object `node` for the existing `mapper`: an object without subobjects
    reads the update's properties without splitting their dots, as the object it was created as
    (an explicit `subobjects` is kept, to be refused when it differs)."""
    node = dict(node)
    if _no_subobjects(mapper):
        node.setdefault("subobjects", False)
        return node
    props = node.get("properties")
    if type(props) is dict:
        node["properties"] = {
            name: _inherit_subobjects(child_node, child)
            if type(child_node) is dict and isinstance(child := mapper.children.get(name), ObjectMapper)
            else child_node
            for name, child_node in props.items()
        }
    return node


def _build_properties(parent: ObjectMapper, props: Any) -> None:
    """Parse a `properties` object into `parent`; dotted names (`a.b`) become objects, unless the
    parent has `subobjects: false` (then `a.b` is a leaf's name, and objects are flattened)."""
    if props == []:
        return
    if type(props) is not dict:
        raise _MappingError("properties must be a map type")
    for name, node in props.items():
        if node == []:
            continue
        if name == "":
            raise _MappingError("field name cannot be an empty string", True)
        if name.isspace():
            raise _MappingError("field name cannot contain only whitespaces", True)
        if type(node) is not dict:
            raise _MappingError(
                f"Expected map for property [fields] on field [{name}] but got a class java.lang.String"
            )
        parts = name.split(".")
        if not all(parts):
            ambiguous = (
                f"object field starting or ending with a [.] makes object resolution ambiguous: [{name}]"
            )
            raise _MappingError("field name cannot contain only dots" if not any(parts) else ambiguous, True)
        if _no_subobjects(parent):
            if node.get("type", "object" if "properties" in node else None) in ("object", "nested"):
                _build_properties(parent, _flattened_properties(parent, name, node))
                continue
            parts = [name]
        target = parent
        for part in parts[:-1]:
            child = target.children.get(part)
            if child is None:
                child = target.children[part] = ObjectMapper(target.child_path(part), part)
            elif child.leaf:
                raise _MappingError(
                    f"can't merge a non object mapping [{child.path}] with an object mapping", True
                )
            target = child
        leaf_name = parts[-1]
        mapper = _build_mapper(target.child_path(leaf_name), leaf_name, node)
        existing = target.children.get(leaf_name)
        try:
            target.children[leaf_name] = mapper if existing is None else _merge_mappers(existing, mapper)
        except IllegalArgument as e:
            raise _MappingError(e.reason, True) from None


def _mapper_type(name: str, node: dict) -> str:
    type_ = node.get("type")
    if type_ is not None:
        return _java_text(type_)
    if node.get("properties") is not None or len(node) == 1 and "enabled" in node:
        return "object"
    raise _MappingError(f"No type specified for field [{name}]")


def _no_such_type(type_: Any, declared_on: str) -> str:
    return (
        f"The mapper type [{type_}] declared on {declared_on} does not exist. It might have been created "
        "within a future version or requires a plugin to be installed. Check the documentation."
    )


#: The parameters of each `runtime` field type in Elasticsearch 8 (besides `type`).
_RUNTIME_SCRIPTED = frozenset({"script", "on_script_error", "meta"})
_RUNTIME_PARAMS: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        ("boolean", "double", "geo_point", "geo_shape", "ip", "keyword", "long"), _RUNTIME_SCRIPTED
    ),
    "date": _RUNTIME_SCRIPTED | {"format", "locale"},
    "composite": _RUNTIME_SCRIPTED | {"fields"},
    "lookup": frozenset({"target_index", "input_field", "target_field", "fetch_fields", "meta"}),
}


def _runtime_param(value: Any) -> dict:
    """The root `runtime` section, checked as Elasticsearch's RuntimeField parsers check it (the
    fields are kept, not evaluated: leafsearch runs no scripts)."""
    fields = _map_param(value, "_doc", "runtime")
    for name, definition in fields.items():
        _runtime_field(name, definition, composite=None)
    return fields


def _runtime_field(name: str, definition: Any, *, composite: str | None) -> None:
    if type(definition) is not dict:
        raise _MappingError(
            f"Expected map for runtime field [{name}] definition but got a {_java_type(definition)}"
        )
    if definition.get("type") is None:
        raise _MappingError(f"No type specified for runtime field [{name}]")
    type_ = _java_text(definition["type"])
    allowed = _RUNTIME_PARAMS.get(type_)
    if allowed is None or composite is not None and type_ in ("composite", "lookup"):
        raise _MappingError(_no_such_type(type_, f"runtime field [{name}]"))
    for key, param in _known_params(definition, allowed, f"runtime field [{name}] of type [{type_}]"):
        if key == "script":
            if composite is not None:
                raise _MappingError(
                    f"Cannot use [script] parameter on sub-field [{name}] of composite field [{composite}]",
                    True,
                )
            if type(param) is not str and type(param) is not dict:
                raise _MappingError("Script value should be a String or a Map", True)
        elif key == "on_script_error" and _java_text(param) not in ("fail", "continue"):
            unknown = f"Unknown value [{_java_text(param)}] for field [{key}]"
            raise _MappingError(f"{unknown} - accepted values are [fail, continue]", True)
        elif key == "meta":
            _meta_param(param, name, key)
        elif key == "format":
            _format_param(param, name, key)
        elif key in ("locale", "target_index", "input_field", "target_field"):
            _str_param(param, name, key)
        elif key == "fetch_fields" and type(param) is not list:
            raise _MappingError(
                f"[{key}] on runtime field [{name}] must be a list, got [{_java_text(param)}]"
            )
        elif key == "fields":
            for sub_name, sub in _map_param(param, name, key).items():
                _runtime_field(sub_name, sub, composite=name)


def _java_type(value: Any) -> str:
    """The Java class a JSON value is parsed into (`java.lang.Integer`, `java.util.ArrayList`...)."""
    if type(value) is int:
        return "java.lang.Integer" if _INT_MIN <= value <= _INT_MAX else "java.lang.Long"
    return {
        str: "java.lang.String",
        bool: "java.lang.Boolean",
        float: "java.lang.Double",
        list: "java.util.ArrayList",
        dict: "java.util.LinkedHashMap",
    }.get(type(value), "java.lang.Object")


def _java_simple_class(value: Any) -> str:
    return _java_type(value).rpartition(".")[2]


def _build_mapper(
    path: str, name: str, node: dict, source_key: str | None = None
) -> FieldType | ObjectMapper:
    type_ = _mapper_type(name, node)
    if type_ in ("object", "nested"):
        return _build_object(path, name, type_, node)
    allowed = _PARAMS.get(type_)
    if allowed is None:
        if type_ in FIELD_TYPES:
            raise _MappingError(reason(f"the field type [{type_}] of field [{name}]"))
        raise _MappingError(_no_such_type(type_, f"field [{name}]"))
    if type_ == "dense_vector":
        return _build_vector(path, name, node, allowed, source_key)
    if type_ == "join":
        from leafsearch.index import join  # it builds on this module

        return join.build_join(path, name, node, allowed, source_key)
    params: dict[str, Any] = {}
    fields: dict[str, FieldType] = {}
    for key, value in node.items():
        if key == "type":
            continue
        if value is None and key != "null_value":
            raise _MappingError(f"[{key}] on mapper [{name}] of type [{type_}] must not have a [null] value")
        if key == "fields":
            if value == []:
                continue
            if type(value) is not dict:
                on = f"on field [{_java_text(value)}] or [fields]"
                got = f"class {_java_type(value)}"
                raise _MappingError(f"expected map for property [fields] {on} but got a {got}")
            for sub_name, sub_node in value.items():
                if type(sub_node) is not dict:
                    raise _MappingError(f"Expected map for property [fields] on field [{sub_name}]")
                if "." in sub_name:
                    raise _MappingError(
                        f"Field name [{sub_name}] which is a multi field of [{path}] cannot contain '.'", True
                    )
                sub = _build_mapper(f"{path}.{sub_name}", sub_name, sub_node, source_key or name)
                if not sub.leaf:
                    raise _MappingError(f"Type [{sub.type}] cannot be used in multi field")
                if sub.copy_to:
                    raise _MappingError(f"[copy_to] may not be used to copy from a multi-field: [{sub.path}]")
                fields[sub_name] = sub
        elif key not in allowed:
            raise _MappingError(f"unknown parameter [{key}] on mapper [{name}] of type [{type_}]")
        else:
            params[key] = _NORMALIZERS[key](value, name, key)
    from leafsearch.index.field_classes import CLASSES  # they subclass FieldType

    field_class = GeoPointField if type_ == "geo_point" else CLASSES.get(type_, FieldType)
    return field_class(path, name, type_, params, fields, source_key)


def _build_object(path: str, name: str, type_: str, node: dict) -> ObjectMapper:
    params: dict[str, Any] = {}
    unknown = {}
    for key, value in node.items():
        if key in ("type", "properties"):
            continue
        if key == "dynamic":
            params[key] = _dynamic_param(value, name)
        elif key == "enabled" or key in ("include_in_parent", "include_in_root") and type_ == "nested":
            params[key] = _bool_param(value, name, key)
        elif key == "subobjects":
            subobjects = _subobjects_param(value, name)
            if not subobjects and type_ == "nested":
                raise _MappingError(
                    f"Mapping definition for [{name}] has unsupported parameters:  [subobjects : false]"
                )
            params[key] = subobjects
        else:
            unknown[key] = value
    if unknown:
        raise _MappingError(
            f"Mapping definition for [{name}] has unsupported parameters:  {_unsupported(unknown)}"
        )
    mapper = ObjectMapper(path, name, type_, params)
    _build_properties(mapper, node.get("properties", {}))
    return mapper


# ---------------------------------------------------------------------------------------------
# Merging (put mapping, and repeated definitions of one object in a body)


def _merge_mappers(old: FieldType | ObjectMapper, new: FieldType | ObjectMapper) -> FieldType | ObjectMapper:
    """The mapper `old` becomes with the update `new`; IllegalArgument on a conflict.

    An object is updated in place (callers merge into a copy); a leaf is rebuilt.
    """
    if old.leaf != new.leaf:
        raise IllegalArgument(f"can't merge a non object mapping [{new.path}] with an object mapping")
    if not old.leaf:
        _merge_objects(old, new)
        return old
    return _merge_leaves(old, new)


def _merge_objects(old: ObjectMapper, new: ObjectMapper) -> None:
    if old.type != new.type:
        change = "non-nested to nested" if new.type == "nested" else "nested to non-nested"
        raise IllegalArgument(f"object mapping [{old.path}] can't be changed from {change}")
    if "enabled" in new.params and new.enabled != old.enabled:
        raise IllegalArgument(f"the [enabled] parameter can't be updated for the object mapping [{old.path}]")
    if new.params.get("subobjects", True) != old.params.get("subobjects", True):
        raise IllegalArgument(
            f"the [subobjects] parameter can't be updated for the object mapping [{old.path}]"
        )
    old.params.update(new.params)
    for name, child in new.children.items():
        existing = old.children.get(name)
        old.children[name] = child if existing is None else _merge_mappers(existing, child)


def _merge_leaves(old: FieldType, new: FieldType) -> FieldType:
    if old.type != new.type:
        raise IllegalArgument(f"mapper [{old.path}] cannot be changed from type [{old.type}] to [{new.type}]")
    conflicts = []
    for param in dict.fromkeys([*old.params, *new.params]):
        if param in _UPDATABLE:
            continue
        before = old.params.get(param, _default(old.type, param))
        after = new.params.get(param, _default(new.type, param))
        if before != after:
            conflicts.append(
                f"Cannot update parameter [{param}] from [{_java_text(before)}] to [{_java_text(after)}]"
            )
    if old.type == "join":
        from leafsearch.index import join  # it builds on this module

        conflicts += join.check_merge(old, new)  # type: ignore[arg-type]
    if conflicts:
        raise IllegalArgument(
            f"Mapper for [{old.path}] conflicts with existing mapper:\n\t" + "\n\t".join(conflicts)
        )
    fields = dict(old.fields)
    for name, sub in new.fields.items():
        fields[name] = sub if name not in fields else _merge_leaves(fields[name], sub)
    return type(old)(old.path, old.name, new.type, new.params, fields, old.source_key)


# ---------------------------------------------------------------------------------------------
# Dynamic templates


@memo(1024)
def _wildcard(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(p) for p in pattern.split("*")), re.DOTALL)


@memo(256)
def _template_regex(pattern: str) -> Any:
    """A `match_pattern: regex` pattern, compiled by RE2 (linear time, whatever the pattern);
    re2.error for one Java would refuse, or that RE2 cannot run (backreferences, lookaround)."""
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    return re2.compile(pattern, options)


# fmt: off
_TEMPLATE_KEYS = frozenset({
    "match", "unmatch", "path_match", "path_unmatch", "match_mapping_type", "unmatch_mapping_type",
    "match_pattern", "mapping", "runtime",
})
_MAPPING_TYPES = ("object", "string", "long", "double", "boolean", "date", "binary")
# The type a dynamic template's mapping gets when it names none, and what `{dynamic_type}` becomes.
_DEFAULT_DYNAMIC_TYPE = {
    "string": "text", "long": "long", "double": "float", "boolean": "boolean", "date": "date",
    "object": "object",
}
# fmt: on


class _Template:
    __slots__ = ("name", "conditions", "mapping", "regex", "types", "untypes")

    def __init__(self, name: str, body: Any) -> None:
        if type(body) is not dict:
            raise _MappingError(f"dynamic template [{name}] must be an object")
        for key in body:
            if key not in _TEMPLATE_KEYS:
                raise _MappingError(f"Illegal dynamic template parameter: [{key}]")
        self.name = name
        match_pattern = _java_text(body.get("match_pattern", "default"))
        if match_pattern not in ("default", "simple", "regex"):
            raise _MappingError(f"No matching pattern matched on [{match_pattern}]", True)
        self.regex = match_pattern == "regex"
        self.conditions = {
            key: _template_patterns(key, body[key])
            for key in ("match", "unmatch", "path_match", "path_unmatch")
            if key in body
        }
        if self.regex:
            for pattern in (p for patterns in self.conditions.values() for p in patterns):
                try:
                    _template_regex(pattern)
                except re2.error:
                    invalid = f"Pattern [{pattern}] of type [regex] is invalid."
                    raise _MappingError(f"{invalid} Cannot create dynamic template [{name}].") from None
        self.types = self._types(body, "match_mapping_type")
        self.untypes = self._types(body, "unmatch_mapping_type")
        self.mapping = body.get("mapping")
        if self.mapping is None and "runtime" not in body:
            raise _MappingError(f"template [{name}] must have either mapping or runtime set")
        if self.mapping is not None and type(self.mapping) is not dict:
            raise _MappingError(f"dynamic template [{name}] has an invalid [mapping]")
        if "runtime" in body and type(body["runtime"]) is not dict:
            raise _MappingError(f"dynamic template [{name}] has an invalid [runtime]")

    @staticmethod
    def _types(body: dict, key: str) -> list[str]:
        types = _template_patterns(key, body[key]) if key in body else []
        for t in types:
            if t != "*" and t not in _MAPPING_TYPES:
                raise _MappingError(
                    f"No field type matched on [{t}], possible values are [{', '.join(_MAPPING_TYPES)}]", True
                )
        return types

    def _any(self, patterns: list[str], text: str) -> bool:
        if self.regex:
            return any(_template_regex(p).fullmatch(text) for p in patterns)
        return any(_wildcard(p).fullmatch(text) for p in patterns)

    def matches(self, path: str, name: str, dynamic_type: str) -> bool:
        if self.mapping is None:  # runtime templates: runtime fields are not supported
            return False
        c = self.conditions
        if "path_match" in c and not self._any(c["path_match"], path):
            return False
        if "match" in c and not self._any(c["match"], name):
            return False
        if "path_unmatch" in c and self._any(c["path_unmatch"], path):
            return False
        if "unmatch" in c and self._any(c["unmatch"], name):
            return False
        if self.types and "*" not in self.types and dynamic_type not in self.types:
            return False
        if dynamic_type in self.untypes:
            return False
        # A template giving a leaf type captures an object when it names objects itself, or when
        # the type's values are objects (a point `{"lat", "lon"}`, a completion's inputs...), as
        # Elasticsearch's templates capture objects; other leaf types leave objects mapped as such.
        return (
            dynamic_type != "object"
            or "object" in self.types
            or self.mapping.get("type") in (None, "object", "nested", "{dynamic_type}", *_OBJECT_VALUED)
        )

    def render(self, name: str, dynamic_type: str) -> dict:
        default = _DEFAULT_DYNAMIC_TYPE[dynamic_type]

        def fill(value: Any) -> Any:
            if type(value) is str:
                return value.replace("{name}", name).replace("{dynamic_type}", default)
            if type(value) is dict:
                return {fill(k): fill(v) for k, v in value.items()}
            if type(value) is list:
                return [fill(v) for v in value]
            return value

        mapping = fill(self.mapping)
        mapping.setdefault("type", default)
        return mapping


#: Leaf types whose values may be JSON objects, which a dynamic template maps an object to.
_OBJECT_VALUED = ("geo_point", "completion", "percolator", "rank_features")


def _template_patterns(key: str, value: Any) -> list[str]:
    """A template condition as Elasticsearch reads it: a list of strings, or one value taken as
    its text (null, which Elasticsearch fails on, is refused as a list holding a non-string)."""
    if type(value) is list and all(type(v) is str for v in value):
        return value
    if type(value) is list or value is None:
        problem = f"[{key}] values must either be a string or list of strings, but was [{_java_text(value)}]"
        raise _MappingError(problem)
    return [_java_text(value)]


# ---------------------------------------------------------------------------------------------
# The mapping

_ROOT_KEYS = frozenset(
    ("properties", "dynamic", "date_detection", "dynamic_date_formats", "numeric_detection", "subobjects")
    + ("dynamic_templates", "_meta", "_source", "_routing", "enabled", "runtime")
)
_SOURCE_KEYS = frozenset({"enabled", "includes", "excludes", "mode"})


class Mapping:
    """One index's mapping. The caller holds the index's lock around `parse_document` and `merge`."""

    def __init__(self, analysis: IndexAnalysis = DEFAULT_ANALYSIS) -> None:
        self.version = 0
        #: The index's analyzers, which text fields name (`index.analysis.*`).
        self.analysis = analysis
        #: `index.mapping.total_fields.limit`, `index.mapping.depth.limit` and
        #: `index.mapping.field_name_length.limit`, checked whenever fields are added.
        self.total_fields_limit = 1000
        self.depth_limit = 20
        self.field_name_length_limit = 2**63 - 1
        #: `index.mapping.nested_fields.limit` and `index.mapping.nested_objects.limit`.
        self.nested_fields_limit = 50
        self.nested_objects_limit = 10_000
        #: Every `nested` object mapper, by path.
        self.nested_paths: dict[str, ObjectMapper] = {}
        #: Set for an index with `index.sort.*`: its segments keep no nested documents.
        self.index_sorted = False
        self.routing_required = False
        #: The index's `join` field (index/join.py), if it maps one.
        self.join: Any = None
        self._root = ObjectMapper("", "")
        self._root_params: dict[str, Any] = {}
        self._date_detection = True
        self._numeric_detection = False
        self._date_formatters = _DYNAMIC_DATE_FORMATTERS
        self._templates: list[_Template] = []
        self._fields: dict[str, FieldType] = {}
        self._total_fields = 0  # as `index.mapping.total_fields.limit` counts them
        #: `mapping_batch`'s decoder of documents typed by this mapping (made there, per version).
        self.batch_decoder: Any = None

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_body(cls, body: dict | None, analysis: IndexAnalysis = DEFAULT_ANALYSIS) -> Mapping:
        """A mapping from the `mappings` object of create-index, its text fields analysed by
        `analysis`; 400 `mapper_parsing_exception` if bad."""
        mapping = cls(analysis)
        try:
            mapping._parse_root(_unwrap_type(body))
            mapping._refresh()
        except _MappingError as e:
            raise _mapping_error(e) from None
        mapping._check_references()
        return mapping

    def set_analysis(self, analysis: IndexAnalysis) -> None:
        """The index's analysis changed (settings of a closed index): fields bind to the new one;
        400 if a field names an analyzer it lacks, and then nothing changes."""
        if analysis is self.analysis:
            return
        previous = self.analysis
        self.analysis = analysis
        try:
            self._refresh()
        except _MappingError as e:
            self.analysis = previous
            self._refresh()
            raise _mapping_error(e) from None

    def _bind(self, field: FieldType) -> None:
        """A text field's analyzers from its `analyzer`, `search_analyzer`, `search_quote_analyzer`;
        a keyword's normalizer."""
        if hasattr(field, "bind"):  # a type of its own module (index/field_classes.py)
            field.bind(self, self._analyzer)
            return
        if field.kind == "keyword":
            name = field.normalizer
            if name is not None and name != "lowercase":
                field.normalizer_chain = self.analysis.normalizer(name)
                if field.normalizer_chain is None:
                    raise _MappingError(f"normalizer [{name}] not found for field [{field.name}]")
            return
        if field.kind != "text":
            return
        params = field.params
        index_name = params.get("analyzer")
        if "search_quote_analyzer" in params and ("search_analyzer" not in params or index_name is None):
            raise _MappingError(
                f"analyzer and search_analyzer on field [{field.name}] must be set when "
                "search_quote_analyzer is set"
            )
        if "search_analyzer" in params and index_name is None:
            raise _MappingError(f"analyzer on field [{field.name}] must be set when search_analyzer is set")
        index = self.analysis.default if index_name is None else self._analyzer(index_name)
        search_name = params.get("search_analyzer")
        if search_name is not None:
            search = self._analyzer(search_name)
        elif index_name is None:
            search = self.analysis.default_search
        else:
            search = index
        quote_name = params.get("search_quote_analyzer")
        field.analyzer, field.search_analyzer = index, search
        if "position_increment_gap" not in params:  # the analyzer's gap, as Elasticsearch takes it
            field.position_increment_gap = index.position_gap
        field.search_quote_analyzer = search if quote_name is None else self._analyzer(quote_name)

    def _analyzer(self, name: str) -> Analyzer:
        found = self.analysis.analyzer(name)
        if found is None:
            raise _MappingError(f"analyzer [{name}] has not been configured in mappings", True)
        return found

    def _parse_root(self, body: dict) -> None:
        unknown = {k: v for k, v in body.items() if k not in _ROOT_KEYS}
        if unknown:
            raise _MappingError(
                f"Root mapping definition has unsupported parameters:  {_unsupported(unknown)}"
            )
        params = self._root_params
        if "subobjects" in body:  # the root's properties are read with it
            self._root.params["subobjects"] = _subobjects_param(body["subobjects"], "_doc")
        for key, value in body.items():
            if key == "properties":
                continue
            if key == "dynamic":
                params[key] = _dynamic_param(value, "_doc")
            elif key == "subobjects":
                params[key] = self._root.params["subobjects"]
            elif key in ("date_detection", "numeric_detection", "enabled"):
                params[key] = _bool_param(value, "_doc", key)
            elif key == "dynamic_date_formats":
                formats = [value] if type(value) is str else value
                if type(formats) is not list or not all(type(f) is str for f in formats):
                    raise _MappingError("[dynamic_date_formats] must be a string or a list of strings")
                for f in formats:
                    _format_param(f, "_doc", key)
                params[key] = formats
            elif key == "dynamic_templates":
                params[key] = _templates_param(value)
            elif key == "_source":
                source = _map_param(value, "_source", key)
                bad = {k: v for k, v in source.items() if k not in _SOURCE_KEYS}
                if bad:
                    raise _MappingError(f"unknown parameter [{next(iter(bad))}] on metadata field [_source]")
                if "enabled" in source:
                    source = {**source, "enabled": _bool_param(source["enabled"], "_source", "enabled")}
                params[key] = source
            elif key == "runtime":
                params[key] = _runtime_param(value)
            elif key == "_routing":
                routing = _map_param(value, "_routing", key)
                bad = {k: v for k, v in routing.items() if k != "required"}
                if bad:
                    raise _MappingError(f"unknown parameter [{next(iter(bad))}] on metadata field [_routing]")
                params[key] = {k: _bool_param(v, "_routing", k) for k, v in routing.items()}
            else:
                params[key] = _map_param(value, "_doc", key)
        _build_properties(self._root, body.get("properties", {}))

    def _refresh(self) -> None:
        """Recompute what is derived from the tree and root parameters (after any change)."""
        params = self._root_params
        self._root.params = {k: params[k] for k in ("dynamic", "subobjects") if k in params}
        self._root.enabled = params.get("enabled", True)
        self._date_detection = params.get("date_detection", True)
        self._numeric_detection = params.get("numeric_detection", False)
        formats = params.get("dynamic_date_formats")
        self._date_formatters = (
            _DYNAMIC_DATE_FORMATTERS if formats is None else [DateFormatter(f) for f in formats]
        )
        self._templates = [
            _Template(name, body) for t in params.get("dynamic_templates", []) for name, body in t.items()
        ]
        self.routing_required = params.get("_routing", {}).get("required", False)
        self._fields = {}
        self.nested_paths = {}
        _inherit_dynamic(self._root, "true")
        self._index(self._root)
        self._total_fields = _count_fields(self._root)
        from leafsearch.index import join  # it builds on this module

        self.join = join.only_one([f for f in self._fields.values() if isinstance(f, join.JoinField)])

    def _index(self, mapper: ObjectMapper) -> None:
        mapper.attached = True
        for child in mapper.children.values():
            if child.leaf:
                self._fields[child.path] = child
                self._bind(child)
                for sub in child.subfields:
                    self._fields[sub.path] = sub
                    self._bind(sub)
            else:
                if child.type == "nested":
                    self.nested_paths[child.path] = child
                self._index(child)

    # -- reading -------------------------------------------------------------------------------

    def to_body(self) -> dict[str, Any]:
        """The `mappings` object as `GET /<index>/_mapping` shows it; `from_body` reads it back."""
        body = copy.deepcopy(self._root_params)
        if self._root.children:
            body["properties"] = _properties_body(self._root.children)
        return body

    @property
    def root(self) -> ObjectMapper:
        """The object mapper of the document itself (read by `mapping_batch`)."""
        return self._root

    def field(self, path: str) -> FieldType | None:
        """The leaf field (or multi-field) at a full dotted path."""
        return self._fields.get(path)

    def fields(self) -> dict[str, FieldType]:
        """Every leaf path, multi-fields included, sorted."""
        return dict(sorted(self._fields.items()))

    def resolve_fields(self, pattern: str) -> list[str]:
        """Leaf paths matching a field name that may hold `*` wildcards, sorted."""
        if "*" not in pattern:
            return [pattern] if pattern in self._fields else []
        regex = _wildcard(pattern)
        return sorted(p for p in self._fields if regex.fullmatch(p))

    @property
    def source(self) -> dict[str, Any]:
        """The `_source` mapping parameters (`enabled`, `includes`, `excludes`) as given."""
        return self._root_params.get("_source", {})

    @property
    def source_enabled(self) -> bool:
        """False with `_source: {enabled: false}`: gets, searches and updates then see no source
        (it is still written to the translog, which replays documents from it)."""
        return self.source.get("enabled", True) is not False

    # -- put mapping ---------------------------------------------------------------------------

    def merge(self, body: dict) -> None:
        """Apply a put-mapping body: new fields are added, allowed parameter updates applied.

        Nothing changes on error: 400 `mapper_parsing_exception` for a bad body,
        `illegal_argument_exception` for a conflict with the current mapping.
        """
        unwrapped = _unwrap_type(body) if isinstance(body, dict) else body
        if isinstance(unwrapped, dict):  # an update is read as the objects it adds to read it
            unwrapped = _inherit_subobjects(unwrapped, self._root)
        incoming = Mapping.from_body(unwrapped, self.analysis)
        if incoming._root_params.get("subobjects", True) != self._root_params.get("subobjects", True):
            raise IllegalArgument("the [subobjects] parameter can't be updated for the object mapping [_doc]")
        merged = Mapping.from_body(self.to_body(), self.analysis)
        merged.set_limits(
            self.total_fields_limit,
            self.depth_limit,
            self.field_name_length_limit,
            self.nested_fields_limit,
            self.nested_objects_limit,
        )
        for key, value in incoming._root_params.items():
            if key == "dynamic_templates":
                by_name = {name: t for t in merged._root_params.get(key, []) for name in t}
                by_name.update({name: t for t in value for name in t})
                value = list(by_name.values())
            elif key in ("_source", "_routing"):
                _check_metadata_update(key, merged._root_params.get(key, {}), value)
            merged._root_params[key] = value
        for name, child in incoming._root.children.items():
            existing = merged._root.children.get(name)
            merged._root.children[name] = child if existing is None else _merge_mappers(existing, child)
        merged._refresh()
        merged._check_references()
        _check_field_limit(self.total_fields_limit, self._total_fields, merged._total_fields)
        _check_nested_limit(merged.nested_fields_limit, len(self.nested_paths), len(merged.nested_paths))
        if self.index_sorted and merged.nested_paths:
            raise IllegalArgument("cannot have nested fields when index sort is activated")
        merged._check_shape(merged._root)
        if merged.to_body() != self.to_body():
            self._adopt(merged)
            self.version += 1

    def set_limits(
        self, total_fields: int, depth: int, field_name_length: int, nested_fields: int, nested_objects: int
    ) -> None:
        """The index's mapping limits (its settings), checked against every later addition."""
        self.total_fields_limit = total_fields
        self.depth_limit = depth
        self.field_name_length_limit = field_name_length
        self.nested_fields_limit = nested_fields
        self.nested_objects_limit = nested_objects

    def _check_references(self) -> None:
        """400 `parse_exception` if a completion field's geo context reads its points from a
        `path` that is not a `geo_point` field, as Elasticsearch checks a mapping when it is put."""
        from leafsearch.index.completion import CompletionField  # it builds on this module

        for field in self._fields.values():
            if not isinstance(field, CompletionField):
                continue
            for name, spec in field.contexts.items():
                if spec.kind != "geo" or spec.path is None:
                    continue
                found = self._fields.get(spec.path)
                if found is None:
                    raise ParseException(
                        f"field [{spec.path}] referenced in context [{name}] is not defined in the mapping"
                    )
                if found.type != "geo_point":
                    raise ParseException(
                        f"field [{spec.path}] referenced in context [{name}] must be mapped to geo_point, "
                        f"found [{found.type}]"
                    )

    def check_limits(self) -> None:
        """400 `illegal_argument_exception` if the mapping as it stands exceeds its limits (a new
        index's mapping, checked against the index's settings)."""
        _check_field_limit(self.total_fields_limit, 0, self._total_fields)
        _check_nested_limit(self.nested_fields_limit, 0, len(self.nested_paths))
        self._check_shape(self._root)

    def _check_shape(self, mapper: ObjectMapper) -> None:
        """Depth and field-name length of every mapper below `mapper`, as Elasticsearch checks them."""
        for child in mapper.children.values():
            self._check_shape_of(child)

    def _check_shape_of(self, mapper: FieldType | ObjectMapper) -> None:
        self._check_name(mapper.name)
        if mapper.leaf:
            for sub in mapper.subfields:
                self._check_name(sub.name)
        else:
            self._check_depth(mapper.path)
            self._check_shape(mapper)

    def _check_depth(self, object_path: str) -> None:
        if object_path.count(".") + 2 > self.depth_limit:
            raise IllegalArgument(
                f"Limit of mapping depth [{self.depth_limit}] has been exceeded due to object field "
                f"[{object_path}]"
            )

    def _check_name(self, name: str) -> None:
        length = len(name) if name.isascii() else len(name.encode("utf-16-le")) // 2  # Java chars
        if length > self.field_name_length_limit:
            raise IllegalArgument(
                f"Field name [{name}] is longer than the limit of [{self.field_name_length_limit}] characters"
            )

    def _adopt(self, other: Mapping) -> None:
        self._root, self._root_params = other._root, other._root_params
        self._refresh()

    # -- documents -----------------------------------------------------------------------------

    def parse_document(self, source: bytes, doc_id: str | None = None, *, routed: bool = True) -> ParsedDoc:
        """The indexable values of one document; 400 `document_parsing_exception` (or
        `strict_dynamic_mapping_exception`) if it does not fit, and then the mapping is unchanged.
        New fields are mapped dynamically, bumping `version`. `routed`: False when a write gave
        no routing (a `join` child needs one; replaying the translog does not check it)."""
        try:
            obj = orjson.loads(source)
        except orjson.JSONDecodeError as e:
            if not source or not bytes(source).strip():
                raise DocumentParsing("[0:0] failed to parse, document is empty") from None
            err = DocumentParsing(f"[{e.lineno}:{e.colno}] failed to parse: {e.msg}")
            raise _with_java_cause(err, "json_parse_exception", e.msg) from None
        if type(obj) is not dict:
            raise DocumentParsing("Malformed content, must start with an object")
        doc = ParsedDoc(bytes(source) if type(source) is not bytes else source)
        pending = _Pending(doc)
        try:
            if self._root.enabled:
                self._walk(self._root, obj, doc, pending)
            join = self.join or next((m for _, _, m in pending.added.values() if m.type == "join"), None)
            if join is not None:  # (a dynamic template may add it)
                join.finish(doc, doc_id, routed)
        except _FieldError as e:
            raise _field_error(e, source, doc_id) from None
        except _DocError as e:
            raise e.build(_location(source, e.key), doc_id) from None
        if pending.added:
            self._commit(pending)
        return doc

    def _walk(self, mapper: ObjectMapper, obj: dict, doc: ParsedDoc, pending: _Pending) -> None:
        children = mapper.children
        for key, value in obj.items():
            child = children.get(key)
            if child is None:
                self._unmapped(mapper, key, value, doc, pending)
            elif child.leaf:
                child.parse(value, doc)
                if child.copy_to:
                    self._copy(child, value, doc, pending)
            else:
                self._object(child, key, value, doc, pending)

    def _dispatch(
        self, child: FieldType | ObjectMapper, key: str, value: Any, doc: ParsedDoc, pending: _Pending
    ) -> None:
        """One value to its mapper (`_walk` inlines this for speed)."""
        if child.leaf:
            child.parse(value, doc)
            if child.copy_to:
                self._copy(child, value, doc, pending)
        else:
            self._object(child, key, value, doc, pending)

    def _object(self, mapper: ObjectMapper, key: str, value: Any, doc: ParsedDoc, pending: _Pending) -> None:
        if not mapper.enabled or value is None:
            return
        if mapper.type == "nested":
            if not pending.flattening:  # (a nested object's own include flags copy it up)
                self._nested(mapper, key, value, doc, pending)
            return
        if type(value) is dict:
            self._walk(mapper, value, doc, pending)
            return
        for item in _flat(value) if type(value) is list else (value,):
            if type(item) is dict:
                self._walk(mapper, item, doc, pending)
            elif item is not None:
                message = (
                    f"object mapping for [{mapper.path}] tried to parse field [{key}] as object, "
                    "but found a concrete value"
                )
                raise _DocError(key, lambda loc, _id, m=message: DocumentParsing(f"{loc}{m}"))

    def _nested(self, mapper: ObjectMapper, key: str, value: Any, doc: ParsedDoc, pending: _Pending) -> None:
        """Each object of a `nested` field as a child document of `doc`, and again into the parent
        (`include_in_parent`) or the root document (`include_in_root`) when the mapping says so."""
        children = doc.nested.setdefault(mapper.path, [])
        for item in _flat(value) if type(value) is list else (value,):
            if item is None:
                continue
            if type(item) is not dict:
                message = (
                    f"object mapping for [{mapper.path}] tried to parse field [{key}] as object, "
                    "but found a concrete value"
                )
                raise _DocError(key, lambda loc, _id, m=message: DocumentParsing(f"{loc}{m}"))
            pending.nested_objects += 1
            if pending.nested_objects > self.nested_objects_limit:
                limit = self.nested_objects_limit
                message = (
                    f"The number of nested documents has exceeded the allowed limit of [{limit}]. This "
                    "limit can be set by changing the [index.mapping.nested_objects.limit] index level "
                    "setting."
                )
                raise _DocError(key, lambda loc, _id, m=message: DocumentParsing(m))
            child = ParsedDoc(orjson.dumps(item))
            self._walk(mapper, item, child, pending)
            children.append(child)
            targets = [doc] if mapper.params.get("include_in_parent") else []
            if mapper.params.get("include_in_root") and doc is not pending.root:
                targets.append(pending.root)
            pending.flattening = True
            try:
                for target in targets:
                    self._walk(mapper, item, target, pending)
            finally:
                pending.flattening = False

    def _copy(self, field: FieldType, value: Any, doc: ParsedDoc, pending: _Pending) -> None:
        """`copy_to`: the value is indexed again into each target field (mapped dynamically if new)."""
        for target in field.copy_to:
            mapped = self._fields.get(target)
            if mapped is not None:
                mapped.parse(value, doc)
            else:
                self._walk(self._root, {target: value}, doc, pending)

    def _unmapped(
        self, mapper: ObjectMapper, key: str, value: Any, doc: ParsedDoc, pending: _Pending
    ) -> None:
        added = pending.get(mapper, key)
        if added is not None:
            self._dispatch(added, key, value, doc, pending)
            return
        if not key:
            reason = "Field name cannot be an empty string"
            raise _DocError(
                key,
                lambda loc, _id: _with_java_cause(
                    DocumentParsing(f"{loc}failed to parse: {reason}"), "illegal_argument_exception", reason
                ),
            )
        if key.isspace():
            reason = f"Field name cannot contain only whitespace: [{mapper.child_path(key)}]"
            raise _DocError(key, lambda loc, _id: DocumentParsing(f"{loc}{reason}"))
        if _no_subobjects(mapper):
            if type(value) is dict or (type(value) is list and any(type(v) is dict for v in _flat(value))):
                self._flatten(mapper, key, value, doc, pending)
                return
        elif "." in key:
            self._dotted(mapper, key, value, doc, pending)
            return
        if mapper is self._root and key in METADATA_FIELDS:
            raise _DocError(key, lambda loc, doc_id: _metadata_error(loc, doc_id, key, value))
        dynamic = mapper.effective_dynamic
        if dynamic == "false" or value is None:
            return
        if dynamic == "strict":
            reason = (
                f"mapping set to strict, dynamic introduction of [{key}] within [{mapper.path or '_doc'}] "
                "is not allowed"
            )
            raise _DocError(key, lambda loc, _id: StrictDynamicMapping(f"{loc}{reason}"))
        child = self._dynamic_mapper(mapper, key, value)
        if child is None:
            return
        pending.fields += 1 + (len(child.subfields) if child.leaf else _count_fields(child))
        if self._total_fields + pending.fields > self.total_fields_limit:
            reason = (
                f"Limit of total fields [{self.total_fields_limit}] has been exceeded while adding new "
                f"fields [{pending.fields}]"
            )
            raise _DocError(
                key,
                lambda loc, _id: _with_java_cause(
                    DocumentParsing(f"{loc}failed to parse: {reason}"), "illegal_argument_exception", reason
                ),
            )
        if mapper.attached:
            pending.add(mapper, key, child)
        else:
            mapper.children[key] = child  # a parent created by this document: not yet in the tree
        self._dispatch(child, key, value, doc, pending)

    def _flatten(self, mapper: ObjectMapper, key: str, value: Any, doc: ParsedDoc, pending: _Pending) -> None:
        """An object under `subobjects: false`: its fields are the parent's, named `key.field`."""
        for item in _flat(value) if type(value) is list else (value,):
            if type(item) is dict:
                self._walk(mapper, {f"{key}.{k}": v for k, v in item.items()}, doc, pending)
            elif item is not None:
                self._walk(mapper, {key: item}, doc, pending)

    def _dotted(self, mapper: ObjectMapper, key: str, value: Any, doc: ParsedDoc, pending: _Pending) -> None:
        """`{"a.b": 1}` is `{"a": {"b": 1}}`, as Elasticsearch expands dots in field names."""
        parts = key.split(".")
        if not all(parts):
            reason = (
                "field name cannot contain only dots"
                if not any(parts)
                else f"object field starting or ending with a [.] makes object resolution ambiguous: [{key}]"
            )
            raise _DocError(
                key,
                lambda loc, _id: _with_java_cause(
                    DocumentParsing(f"{loc}failed to parse: {reason}"), "illegal_argument_exception", reason
                ),
            )
        head = mapper.children.get(parts[0]) or pending.get(mapper, parts[0])
        if head is not None and head.leaf:
            reason = (
                f"Could not dynamically add mapping for field [{mapper.child_path(key)}]. Existing mapping "
                f"for [{head.path}] must be of type object but found [{head.type}]."
            )
            raise _DocError(key, lambda loc, _id: DocumentParsing(f"{loc}{reason}"))
        # The dots split into objects down to an object without subobjects, which takes the rest
        # of the name as one leaf's (`metrics.time.max` under `metrics` is its leaf `time.max`).
        split, node = len(parts), mapper
        for i, part in enumerate(parts[:-1]):
            child = node.children.get(part) or pending.get(node, part)
            if child is None or child.leaf:
                break
            if _no_subobjects(child):
                split = i + 1
                break
            node = child
        nested: Any = value if split == len(parts) else {".".join(parts[split:]): value}
        for part in reversed(parts[1:split]):
            nested = {part: nested}
        self._walk(mapper, {parts[0]: nested}, doc, pending)

    def _dynamic_mapper(self, mapper: ObjectMapper, key: str, value: Any) -> FieldType | ObjectMapper | None:
        """The mapper Elasticsearch's dynamic mapping creates for a new field, or None (null, [])."""
        sample = value
        if type(value) is list:
            sample = next((v for v in _flat(value) if v is not None), None)
            if sample is None:
                return None
        path = mapper.child_path(key)
        dynamic_type, node = self._detect(sample)
        for template in self._templates:
            if template.matches(path, key, dynamic_type):
                node = template.render(key, dynamic_type)
                break
        try:
            child = _build_mapper(path, key, node)
            self._check_shape_of(child)  # before walking into it: recursion stays bounded
            if child.leaf:
                for field in (child, *child.subfields):
                    self._bind(field)
        except _MappingError as e:
            message = e.message
            raise _DocError(
                key,
                lambda loc, _id: _with_java_cause(
                    DocumentParsing(f"{loc}failed to parse: {message}"), "mapper_parsing_exception", message
                ),
            ) from None
        if not child.leaf:
            _inherit_dynamic(child, mapper.effective_dynamic)
        return child

    def _detect(self, sample: Any) -> tuple[str, dict[str, Any]]:
        """(match_mapping_type name, default mapping) of a JSON value."""
        t = type(sample)
        if t is dict:
            return "object", {"type": "object"}
        if t is bool:
            return "boolean", {"type": "boolean"}
        if t is int:
            return "long", {"type": "long"}
        if t is float:
            return "double", {"type": "float"}
        if self._numeric_detection and _is_number_text(sample):
            if re.fullmatch(r"[+-]?\d+", sample.strip()):
                return "long", {"type": "long"}
            return "double", {"type": "float"}
        if self._date_detection and not _is_number_text(sample):
            for formatter in self._date_formatters:
                try:
                    formatter.parse(sample)
                except ValueError:
                    continue
                if formatter.pattern == DEFAULT_DATE_FORMAT:
                    return "date", {"type": "date"}
                return "date", {"type": "date", "format": formatter.pattern}
        return "string", {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}

    def _commit(self, pending: _Pending) -> None:
        """Attach what a document added (counted against the limit as it was added)."""
        for parent, name, child in pending.added.values():
            parent.children[name] = child
        self._refresh()
        self.version += 1


class _Pending:
    """The mappers one document adds below objects already in the tree, by parent and name, and
    how many fields everything it adds counts (objects it creates and what they hold included);
    also the document's root and how many nested objects it holds so far."""

    __slots__ = ("added", "fields", "root", "nested_objects", "flattening")

    def __init__(self, root: ParsedDoc) -> None:
        self.added: dict[tuple[int, str], tuple[ObjectMapper, str, FieldType | ObjectMapper]] = {}
        self.fields = 0
        self.root = root
        self.nested_objects = 0
        #: True while a nested object's values are copied into its parent or the root document.
        self.flattening = False

    def get(self, parent: ObjectMapper, name: str) -> FieldType | ObjectMapper | None:
        entry = self.added.get((id(parent), name))
        return None if entry is None else entry[2]

    def add(self, parent: ObjectMapper, name: str, mapper: FieldType | ObjectMapper) -> None:
        self.added[(id(parent), name)] = (parent, name, mapper)


def _inherit_dynamic(mapper: ObjectMapper, inherited: str) -> None:
    """An object's `dynamic` applies to the objects below it that do not set their own."""
    mapper.effective_dynamic = mapper.params.get("dynamic", inherited)
    for child in mapper.children.values():
        if not child.leaf:
            _inherit_dynamic(child, mapper.effective_dynamic)


def _field_error(e: _FieldError, source: bytes, doc_id: str | None) -> ElasticError:
    field = e.field
    reason = (
        f"{_location(source, field.source_key)}failed to parse field [{field.path}] of type "
        f"[{field.type}] in document with id '{doc_id}'. Preview of field's value: '{_java_text(e.value)}'"
    )
    return _with_java_cause(DocumentParsing(reason), e.cause.cause_type, e.cause.message)


def _count_fields(mapper: ObjectMapper) -> int:
    """Fields below an object as `index.mapping.total_fields.limit` counts them (objects included)."""
    return sum(1 + (_count_fields(c) if not c.leaf else len(c.subfields)) for c in mapper.children.values())


def _check_nested_limit(limit: int, before: int, after: int) -> None:
    if after > limit and after > before:
        raise IllegalArgument(f"Limit of nested fields [{limit}] has been exceeded")


def _check_field_limit(limit: int, before: int, after: int) -> None:
    if after > before and after > limit:
        raise IllegalArgument(
            f"Limit of total fields [{limit}] has been exceeded while adding new fields [{after - before}]"
        )


def _metadata_error(location: str, doc_id: str | None, key: str, value: Any) -> ElasticError:
    """Elasticsearch's metadata field mappers refuse values from the document body."""
    cause = MapperParsing(
        f"Field [{key}] is a metadata field and cannot be added inside a document. "
        "Use the index API request parameters."
    )
    return DocumentParsing(
        f"{location}failed to parse field [{key}] of type [{key}] in document with id '{doc_id}'. "
        f"Preview of field's value: '{_java_text(value)}'",
        caused_by=cause,
    )


def _check_metadata_update(name: str, before: dict, after: dict) -> None:
    defaults = {"enabled": True, "required": False, "mode": None}
    for param in ("enabled", "required", "mode"):
        old, new = before.get(param, defaults[param]), after.get(param, defaults[param])
        if old != new:
            raise IllegalArgument(
                f"Mapper for [{name}] conflicts with existing mapper:\n\t"
                f"Cannot update parameter [{param}] from [{_java_text(old)}] to [{_java_text(new)}]"
            )


def _templates_param(value: Any) -> list[dict]:
    if type(value) is not list:
        raise _MappingError("Dynamic template syntax error. An array of named objects is expected.")
    for entry in value:
        if type(entry) is not dict or len(entry) != 1:
            raise _MappingError("Dynamic template syntax error. An array of named objects is expected.")
        for name, body in entry.items():
            _Template(name, body)
    return value


def _unwrap_type(body: dict | None) -> dict:
    """A `mappings` object, accepting the legacy `{"_doc": {...}}` wrapper as Elasticsearch 8 does."""
    if body is None:
        return {}
    if type(body) is not dict:
        raise _mapping_error(_MappingError("Expected map for mappings"))
    _check_nesting(body)
    if len(body) == 1 and "_doc" in body and type(body["_doc"]) is dict:
        return body["_doc"]
    return body


def _check_nesting(body: dict) -> None:
    """Refuse a mapping nested deeper than `MAX_NESTING` (a leafsearch limit, docs/differences.md):
    what a mapping holds as given (`_meta`, a dynamic template's `mapping`, runtime fields) is
    written to the index's metadata and rendered by `GET _mapping`, which cannot nest without end.
    Iterative, O(the body)."""
    level: list[Any] = [body]
    depth = 0
    while level:
        depth += 1
        if depth > MAX_NESTING:
            raise _mapping_error(
                _MappingError(f"the mapping is nested deeper than the maximum allowed [{MAX_NESTING}]")
            )
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if type(child) is dict or type(child) is list
        ]


def _mapping_error(e: _MappingError) -> ElasticError:
    outer = MapperParsing(f"Failed to parse mapping: {e.message}")
    if e.java_cause:
        return _with_java_cause(outer, "illegal_argument_exception", e.message)
    outer.caused_by = MapperParsing(e.message)
    return outer


def _location(source: bytes, key: str) -> str:
    """`[line:column] ` of the value of `key` in the source (its first occurrence): the position
    Elasticsearch's parser reports, found again from the raw bytes since orjson keeps none."""
    text = bytes(source)
    match = re.search(b'"' + re.escape(key.encode()) + rb'"\s*:\s*', text)
    if match is None:
        return "[1:1] "
    offset = match.end()
    line = text.count(b"\n", 0, offset) + 1
    column = offset - (text.rfind(b"\n", 0, offset) + 1) + 1
    return f"[{line}:{column}] "
