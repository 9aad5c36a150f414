"""Range field types (`integer_range`, `long_range`, `float_range`, `double_range`, `date_range`,
`ip_range`): a value is an interval, `{"gte": 10, "lt": 20}`, and queries ask how documents'
intervals meet theirs (`relation`: `intersects`, `within`, `contains`).

**Storage.** Each interval is one keyword term: its two bounds, inclusive, each encoded as a
fixed-width hex string whose byte order is the numeric order (an integer shifted by 2^63, a
double's sortable bits as Lucene's `NumericUtils.sortableDoubleBits` makes them, an address's 16
bytes), lower bound first. So a segment's distinct intervals are its keyword column's terms, a
document's intervals its ordinals, and a query compares the terms' halves as byte strings, in
numpy, once per distinct interval (`matching_terms`), never per document.

**Values**, as Elasticsearch's RangeFieldMapper reads them: an object of `gt`/`gte`/`lt`/`lte`
(or `from`/`to` with `include_lower`/`include_upper`, both true by default); a missing bound is
the type's minimum or maximum; an exclusive bound moves to the next value inward (the next
integer, millisecond, float, double or address); `ip_range` also takes a CIDR block as a string;
`date_range` reads its bounds in the field's `format`.
"""

from __future__ import annotations

import ipaddress
import math
import struct
from typing import Any

import numpy as np

from leafsearch.index import ip

RANGE_TYPES = frozenset(
    {"integer_range", "long_range", "float_range", "double_range", "date_range", "ip_range"}
)
RELATIONS = ("intersects", "within", "contains")
_KEYS = frozenset({"gt", "gte", "lt", "lte", "from", "to", "include_lower", "include_upper"})
_INT_LIMITS = {"integer_range": (-(2**31), 2**31 - 1), "long_range": (-(2**63), 2**63 - 1)}
_DOUBLE = struct.Struct("<d")
_LONG = struct.Struct("<q")
_MAX_IP = (1 << 128) - 1


class RangeValueError(ValueError):
    """A malformed interval, with Elasticsearch's message."""


def encode_bound(type_: str, value: int | float) -> str:
    """One bound's hex (16 digits, or 32 for an address given as its 128-bit integer)."""
    if type_ == "ip_range":
        return f"{int(value):032x}"
    if type_ in ("float_range", "double_range"):
        bits = _LONG.unpack(_DOUBLE.pack(float(value)))[0]
        bits ^= (bits >> 63) & 0x7FFFFFFFFFFFFFFF  # sortable: negatives reversed
        return f"{bits + 2**63:016x}"
    return f"{int(value) + 2**63:016x}"


def decode_bound(type_: str, text: str) -> int | float | str:
    """`encode_bound` undone: a number, or an address's text."""
    if type_ == "ip_range":
        return ip.decode(text)
    value = int(text, 16) - 2**63
    if type_ in ("float_range", "double_range"):
        bits = value ^ ((value >> 63) & 0x7FFFFFFFFFFFFFFF)
        number = _DOUBLE.unpack(_LONG.pack(bits))[0]
        return float(str(np.float32(number))) if type_ == "float_range" else number
    return value


def half_width(type_: str) -> int:
    return 32 if type_ == "ip_range" else 16


def _ip_int(text: str) -> int:
    return int(ip.encode(text), 16)


def type_bounds(type_: str) -> tuple[int | float, int | float]:
    if type_ in _INT_LIMITS:
        return _INT_LIMITS[type_]
    if type_ in ("float_range", "double_range"):
        return -math.inf, math.inf
    if type_ == "ip_range":
        return 0, _MAX_IP
    return -(2**63), 2**63 - 1  # date_range: epoch millis


def step(type_: str, value: int | float, up: bool) -> int | float:
    """The next value inward of an exclusive bound."""
    if type_ == "float_range":
        f32 = np.float32(value)
        return float(np.nextafter(f32, np.float32(math.inf if up else -math.inf)))
    if type_ == "double_range":
        return math.nextafter(float(value), math.inf if up else -math.inf)
    return int(value) + (1 if up else -1)


def parse_bound(type_: str, value: Any, parse_date: Any, coerce: bool) -> int | float:
    """A bound of a document's or a query's interval in the type's units."""
    if type_ == "ip_range":
        if not isinstance(value, str):
            raise RangeValueError(f"[{value}] is not an IP string literal.")
        try:
            return _ip_int(value)
        except ValueError as exc:
            raise RangeValueError(str(exc)) from None
    if type_ == "date_range":
        if isinstance(value, bool):
            raise RangeValueError(f"failed to parse date field [{value}]")
        if isinstance(value, int | float):
            return int(value)
        return int(parse_date(str(value)))
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise RangeValueError(f'For input string: "{value}"')
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        raise RangeValueError(f'For input string: "{value}"') from None
    if type_ in _INT_LIMITS:
        if isinstance(number, float):
            if not math.isfinite(number) or (not coerce and not number.is_integer()):
                raise RangeValueError(f"Value [{value}] has a decimal part")
            number = int(number)
        lo, hi = _INT_LIMITS[type_]
        if not lo <= number <= hi:
            name = "integer" if type_ == "integer_range" else "long"
            raise RangeValueError(f"Value [{value}] is out of range for an {name}")
        return number
    if type_ == "float_range":
        return float(np.float32(number))
    return float(number)


def parse_interval(type_: str, value: Any, parse_date: Any, coerce: bool) -> tuple[Any, Any]:
    """A document's interval, inclusive at both ends; RangeValueError when malformed."""
    if type_ == "ip_range" and isinstance(value, str):
        try:
            network = ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise RangeValueError(f"Expected a CIDR block but got [{value}]") from None
        first, last = ip.cidr_bounds(str(network))
        return int(first, 16), int(last, 16)
    if not isinstance(value, dict):
        raise RangeValueError(f"error parsing range field, expected an object but got {type(value).__name__}")
    lo, hi = type_bounds(type_)
    include_lower = include_upper = True
    lower = upper = None
    for key, bound in value.items():
        if key not in _KEYS:
            raise RangeValueError(f"error parsing range field, with unknown parameter [{key}]")
        if key in ("include_lower", "include_upper"):
            if not isinstance(bound, bool):
                raise RangeValueError(
                    f"Failed to parse value [{bound}] as only [true] or [false] are allowed."
                )
            if key == "include_lower":
                include_lower = bound
            else:
                include_upper = bound
        elif bound is None:
            continue
        elif key in ("gt", "gte", "from"):
            lower = (parse_bound(type_, bound, parse_date, coerce), key)
        else:
            upper = (parse_bound(type_, bound, parse_date, coerce), key)
    if lower is not None:
        lo = lower[0]
        if lower[1] == "gt" or (lower[1] == "from" and not include_lower):
            lo = step(type_, lo, True)
    if upper is not None:
        hi = upper[0]
        if upper[1] == "lt" or (upper[1] == "to" and not include_upper):
            hi = step(type_, hi, False)
    if lo > hi:
        raise RangeValueError(f"min value ({lo}) is greater than max value ({hi})")
    return lo, hi


def encode_interval(type_: str, lo: Any, hi: Any) -> str:
    return encode_bound(type_, lo) + encode_bound(type_, hi)


def shown_interval(type_: str, term: str, format_date: Any) -> dict[str, Any]:
    """A stored interval as the synthetic source prints it: both ends, inclusive."""
    width = half_width(type_)
    lo, hi = (decode_bound(type_, half) for half in (term[:width], term[width:]))
    if type_ == "date_range":
        lo, hi = format_date(lo), format_date(hi)
    # An end at the type's limit was left open: null, as Elasticsearch prints it.
    low, high = (encode_bound(type_, limit) for limit in type_bounds(type_))
    return {"gte": None if term[:width] == low else lo, "lte": None if term[width:] == high else hi}


def matching_terms(terms: np.ndarray, type_: str, lo: Any, hi: Any, relation: str) -> np.ndarray:
    """One bool per distinct interval of a segment (its sorted keyword terms): whether it meets
    the query interval [lo, hi] as `relation` says. O(distinct intervals), in numpy."""
    if len(terms) == 0:
        return np.zeros(0, dtype=bool)
    width = half_width(type_)
    pairs = np.ascontiguousarray(terms, dtype=f"S{2 * width}").view(f"S{width}").reshape(-1, 2)
    doc_lo, doc_hi = pairs[:, 0], pairs[:, 1]
    q_lo, q_hi = encode_bound(type_, lo).encode(), encode_bound(type_, hi).encode()
    if relation == "within":
        return (doc_lo >= q_lo) & (doc_hi <= q_hi)
    if relation == "contains":
        return (doc_lo <= q_lo) & (doc_hi >= q_hi)
    return (doc_lo <= q_hi) & (doc_hi >= q_lo)
