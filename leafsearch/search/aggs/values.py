"""Field resolution, value formats and reading a segment's doc values for aggregations.

Aggregations see values in Elasticsearch's "aggregation units": `scaled_float` unscaled, `float`
and `half_float` at their stored precision, `date_nanos` in milliseconds (Elasticsearch aggregates
dates at millisecond resolution), booleans as 0/1. Keyword values stay per-segment ordinals until
a partial leaves the segment, so counting is a `bincount`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.index import unsigned_long
from leafsearch.index.columns import ordinal_column
from leafsearch.index.range_fields import RANGE_TYPES
from leafsearch.search.aggs import scripted
from leafsearch.search.aggs.base import SegmentContext, shard_failure
from leafsearch.search.fetch import fielddata_error
from leafsearch.unsupported import NotSupported

KEYWORD, NUMERIC, DATE, BOOLEAN, GEO = "keyword", "numeric", "date", "boolean", "geo"
ANY = frozenset({KEYWORD, NUMERIC, DATE, BOOLEAN})
NUMBERS = frozenset({NUMERIC, DATE, BOOLEAN})
_TEXT_TYPES = {"text", "match_only_text", "annotated_text", "search_as_you_type"}
#: `_index`: a metadata field every document has, a keyword whose one value is its index's name.
INDEX_FIELD = "_index"

# ---- value formats (Elasticsearch's DocValueFormat) ---------------------------------------------


def java_double(value: float) -> str:
    """`Double.toString`, which Elasticsearch uses for unformatted double keys ("10.0", "1.0E7")."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = exponent + len(digits) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


class ValueFormat:
    """How keys and values of one field are written as strings (`key_as_string`, `value_as_string`)."""

    raw = True

    def format(self, value: float | int) -> str:
        if isinstance(value, (int, np.integer)):
            return str(int(value))
        return java_double(float(value))

    def parse(self, value: Any, now_millis: int | None, round_up: bool = False) -> float:
        """A value given in the request (`missing`, bounds, `after`) in aggregation units."""
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, (int, float)):
            return value
        try:
            return float(value)
        except (TypeError, ValueError):
            raise IllegalArgument(f'For input string: "{value}"') from None

    def composite(self, value: Any) -> Any:
        """A composite key value: raw values stay JSON numbers."""
        return value


RAW = ValueFormat()


class BooleanFormat(ValueFormat):
    raw = False

    def format(self, value: float | int) -> str:
        return "true" if value else "false"

    def parse(self, value: Any, now_millis: int | None, round_up: bool = False) -> float:
        """A value given in the request (`missing`, bounds, `after`) in aggregation units."""
        if isinstance(value, bool):
            return float(value)
        if value in ("true", "false"):
            return float(value == "true")
        if value in (0, 1):
            return float(value)
        raise IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")

    def composite(self, value: Any) -> Any:
        return bool(value)


class DateFormat(ValueFormat):
    """Dates in a `DateFormatter`, optionally in a time zone (keys of `date_histogram`)."""

    raw = False

    def __init__(self, formatter: Any, zone: Any = None) -> None:
        self.formatter = formatter
        self.zone = zone

    def format(self, value: float | int) -> str:
        millis = int(math.floor(value))
        if self.zone is None or self.zone.is_utc:
            return self.formatter.format(millis)
        offset = int(self.zone.offsets(np.array([millis], dtype=np.int64))[0])
        text = self.formatter.format(millis + offset)
        if text.endswith("Z"):
            text = text[:-1] + _offset_text(offset)
        return text

    def parse(self, value: Any, now_millis: int | None, round_up: bool = False) -> int:
        if isinstance(value, bool):
            raise IllegalArgument(f"failed to parse date field [{value}]")
        if isinstance(value, (int, float)):
            return int(value)
        try:
            if now_millis is not None:
                from leafsearch.index.dates import parse_date_math

                zone = None if self.zone is None else self.zone.spec
                return int(parse_date_math(str(value), now_millis, self.formatter, round_up, time_zone=zone))
            return int(self.formatter.parse(str(value)))
        except ValueError as err:
            raise IllegalArgument(str(err)) from None

    def composite(self, value: Any) -> Any:
        return self.format(value)


class DecimalFormat(ValueFormat):
    """The common shapes of Java's DecimalFormat patterns ("0.00", "#,##0.0", "0")."""

    raw = False

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        number = pattern.split(";")[0]
        self.prefix = re.match(r"[^#0,.]*", number).group(0)
        self.suffix = re.search(r"[^#0,.]*$", number).group(0)
        body = number[len(self.prefix) : len(number) - len(self.suffix) or None]
        whole, _, fraction = body.partition(".")
        self.grouping = "," in whole
        self.min_fraction = fraction.count("0")
        self.max_fraction = len(fraction)

    def format(self, value: float | int) -> str:
        text = f"{float(value):{',' if self.grouping else ''}.{self.max_fraction}f}"
        if self.max_fraction > self.min_fraction and "." in text:
            keep = len(text) - (self.max_fraction - self.min_fraction)
            head, tail = text[:keep], text[keep:].rstrip("0")
            text = (head + tail).rstrip(".")
        return f"{self.prefix}{text}{self.suffix}"

    def composite(self, value: Any) -> Any:
        return self.format(value)


def _offset_text(offset_millis: int) -> str:
    sign = "+" if offset_millis >= 0 else "-"
    minutes = abs(offset_millis) // 60000
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


# ---- fields ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRef:
    """A field an aggregation reads, resolved against the mapping when the request is parsed; or
    a script's values (`script`, with `ftype` None), or a field's values through a value script
    (both: the script sees each as `_value`)."""

    path: str
    ftype: Any  # the mapping's FieldType, None when the field is unmapped
    family: str | None
    script: Any = None  # a ScriptSpec

    @property
    def mapped(self) -> bool:
        return self.ftype is not None or self.path == INDEX_FIELD or self.script is not None

    @property
    def type_name(self) -> str | None:
        return None if self.ftype is None else self.ftype.type

    def value_format(
        self, pattern: str | None = None, zone: Any = None, raw_dates: bool = False
    ) -> ValueFormat:
        if self.family == DATE:
            if pattern is None and raw_dates:
                return RAW
            if pattern is None and self.ftype is None:  # a script's dates
                pattern = "strict_date_optional_time"
            return DateFormat(_date_formatter(pattern) if pattern else self.ftype.formatter, zone)
        if pattern is not None and self.family in (NUMERIC, None):
            return DecimalFormat(pattern)
        if self.family == BOOLEAN:
            return BooleanFormat()
        return RAW

    def is_integral(self) -> bool:
        return (
            self.ftype is not None
            and getattr(self.ftype, "kind", None) == "long"
            and self.ftype.type not in ("scaled_float",)
        )

    def convert(self, values: np.ndarray) -> np.ndarray:
        """Stored values to aggregation units."""
        type_name = self.type_name
        if type_name == "scaled_float":
            return np.asarray(values, dtype=np.float64) / float(self.ftype.scaling_factor)
        if type_name == "date_nanos":
            return np.floor_divide(np.asarray(values, dtype=np.int64), 1_000_000)
        if type_name == "float":
            return np.asarray(values, dtype=np.float32).astype(np.float64)
        if type_name == "half_float":
            return np.asarray(values, dtype=np.float16).astype(np.float64)
        if type_name == "unsigned_long":
            return unsigned_long.unsigned_array(values)
        if np.asarray(values).dtype.kind in "iu":
            return np.asarray(values, dtype=np.int64)
        return np.asarray(values, dtype=np.float64)


def _date_formatter(pattern: str) -> Any:
    from leafsearch.index.dates import DateFormatter

    try:
        return DateFormatter(pattern)
    except ValueError as err:
        raise IllegalArgument(str(err)) from None


def family_of(ftype: Any) -> str | None:
    type_name = ftype.type
    if ftype.kind == "text" and getattr(ftype, "fielddata", False):
        return KEYWORD  # its terms, uninverted (`fielddata: true`)
    if type_name in _TEXT_TYPES or ftype.kind == "text":
        return "text"
    if type_name in ("date", "date_nanos"):
        return DATE
    if type_name == "boolean":
        return BOOLEAN
    if type_name == "geo_point":
        return GEO
    if ftype.kind == "keyword":
        return KEYWORD
    return NUMERIC


def resolve_field(
    agg_type: str, opts: Any, pctx: Any, families: frozenset[str], key: str = "field"
) -> FieldRef:
    """The field named by `opts[key]`, refused the way Elasticsearch refuses it; with a `script`
    (and `value_type`), the script's values (aggs/scripted.py)."""
    path = opts.get(key)
    script = opts.get("script")
    if script is not None:
        spec = scripted.spec(agg_type, script)
        if path is None:
            return FieldRef(
                "_script", None, scripted.family(agg_type, opts.get("value_type"), families), spec
            )
        return replace(_field(agg_type, opts, pctx, families, key), script=spec)  # a value script
    if path is None:
        raise IllegalArgument("Required one of fields [field, script], but none were specified. ")
    return _field(agg_type, opts, pctx, families, key)


def _field(agg_type: str, opts: Any, pctx: Any, families: frozenset[str], key: str) -> FieldRef:
    path = opts.get(key)
    if not isinstance(path, str):
        from leafsearch.search.aggs.base import field_failed

        raise field_failed(agg_type, key, IllegalArgument(f"[{key}] must be a string"))
    ftype = pctx.mapping.field(path) if pctx.mapping is not None else None
    if ftype is None and path == INDEX_FIELD and KEYWORD in families:
        return FieldRef(path, None, KEYWORD)
    if ftype is None:
        return FieldRef(path, None, None)
    unloadable = fielddata_error(path, ftype, pctx.index or "_na_")
    if unloadable is not None:
        raise shard_failure(unloadable)
    if ftype.type in RANGE_TYPES:
        raise shard_failure(NotSupported(f"[{agg_type}] aggregation on the range field [{path}]"))
    family = family_of(ftype)
    if family not in families:
        raise shard_failure(
            IllegalArgument(
                f"Field [{path}] of type [{ftype.type}] is not supported for aggregation [{agg_type}]"
            )
        )
    return FieldRef(path, ftype, family)


# ---- reading a segment ---------------------------------------------------------------------------


def gather(dv: Any, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """(index into `docs` of each value, the values, whether a document may hold several)."""
    values = dv.values
    if dv.offsets is None:
        idx = np.flatnonzero(dv.present[docs])
        return idx, np.asarray(values)[docs[idx]], False
    offsets = np.asarray(dv.offsets, dtype=np.int64)
    starts = offsets[docs]
    counts = offsets[docs + 1] - starts
    idx = np.repeat(np.arange(len(docs), dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    positions = np.arange(len(idx), dtype=np.int64) - np.repeat(first - starts, counts)
    return idx, np.asarray(values)[positions], True


def _with_missing(
    idx: np.ndarray, values: np.ndarray, n_docs: int, missing: Any
) -> tuple[np.ndarray, np.ndarray]:
    has = np.zeros(n_docs, dtype=bool)
    has[idx] = True
    lacking = np.flatnonzero(~has)
    if not len(lacking):
        return idx, values
    return (
        np.concatenate([idx, lacking]),
        np.concatenate([values, np.full(len(lacking), missing, dtype=values.dtype)]),
    )


def numeric_values(
    seg: SegmentContext, ref: FieldRef, docs: np.ndarray, missing: float | None = None
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(index into `docs`, value in aggregation units, multi-valued) of a numeric/date/boolean field."""
    col = seg.segment.column(ref.path) if ref.mapped and ref.ftype is not None else None
    dv = getattr(col, "doc_values", None)
    if ref.script is not None:
        field = numeric_values(seg, replace(ref, script=None), docs) if ref.ftype is not None else None
        idx, values, multi = scripted.numbers(seg, ref.script, docs, field)
    elif dv is None or (ref.family not in NUMBERS and ref.family != GEO):  # geo: packed points, to count
        idx, values, multi = np.empty(0, np.int64), np.empty(0, np.float64), False
    else:
        idx, raw, multi = gather(dv, docs)
        values = ref.convert(raw)
    if missing is not None:
        dtype = np.float64 if isinstance(missing, float) and not float(missing).is_integer() else values.dtype
        idx, values = _with_missing(idx, values.astype(dtype, copy=False), len(docs), missing)
    return idx, values, multi


def keyword_values(
    seg: SegmentContext, ref: FieldRef, docs: np.ndarray, missing: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(index into `docs`, ordinal, the terms the ordinals point into, multi-valued) of a keyword field."""
    col = ordinal_column(seg.segment.column(ref.path)) if ref.ftype is not None else None
    ords = getattr(col, "ords", None)
    if ref.script is not None:
        field = None
        if ref.ftype is not None:  # a value script: each of the field's values is its `_value`
            at, codes, terms, several = keyword_values(seg, replace(ref, script=None), docs)
            field = (at, [term.decode() for term in terms[codes].tolist()], several)
        idx, codes, terms, multi = scripted.strings(seg, ref.script, docs, field)
    elif ref.path == INDEX_FIELD and ref.ftype is None:
        # Every document holds one value, its index's name (Elasticsearch's ConstantIndexFieldData).
        idx, codes, multi = np.arange(len(docs), dtype=np.int64), np.zeros(len(docs), np.int64), False
        terms = np.array([seg.request.index_name.encode()])
    elif ords is None or ref.family != KEYWORD:
        idx, codes, terms, multi = np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, "S1"), False
    else:
        idx, codes, multi = gather(ords, docs)
        terms = np.asarray(col.terms)
    if missing is not None:
        key = str(missing).encode()
        pos = int(np.searchsorted(terms, key)) if len(terms) else 0
        if pos < len(terms) and terms[pos] == key:
            code = pos
        else:
            code = len(terms)
            terms = np.append(terms, np.array([key]))
        idx, codes = _with_missing(idx, np.asarray(codes, dtype=np.int64), len(docs), code)
    return idx, np.asarray(codes, dtype=np.int64), terms, multi
