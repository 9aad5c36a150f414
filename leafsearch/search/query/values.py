"""Query values parsed for their field's type as Elasticsearch parses them on the shard: numbers
as Java reads them (with Java's messages), integers within their type's range, booleans, dates
with date math, float bounds at the field's precision, and `minimum_should_match`."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from leafsearch.index.dates import DateFormatter, parse_date_math
from leafsearch.request.query_dsl import Scalar, scalar_text
from leafsearch.search.query.context import QueryContext, failed

_NUMERIC_LIMITS = {
    "long": (-(2**63), 2**63 - 1, "a long"),
    "integer": (-(2**31), 2**31 - 1, "an integer"),
    "short": (-(2**15), 2**15 - 1, "a short"),
    "byte": (-128, 127, "a byte"),
    "unsigned_long": (0, 2**64 - 1, "an unsigned_long"),
}
FLOAT_TYPES = {"double": None, "float": "float", "half_float": "half_float"}
DATE_TYPES = ("date", "date_nanos")

_JAVA_INT = re.compile(r"[+-]?\d+")
_JAVA_FLOAT = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?")


class _NumberFormat(ValueError):
    pass


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
            calc = np.float32(np.float32(optional * percent) * np.float32(1 / 100))
            result = optional + int(calc) if calc < 0 else int(calc)
        else:
            value = int(spec)
            result = optional + value if value < 0 else value
    except ValueError:
        if ctx is None:
            raise
        raise failed(ctx, "number_format_exception", f'For input string: "{spec}"') from None
    return max(result, 0)


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


def number(ctx: QueryContext, value: Scalar) -> int | float:
    try:
        return _java_number(value)
    except _NumberFormat as e:
        raise failed(ctx, "number_format_exception", str(e)) from None


def integer_term(ctx: QueryContext, type_name: str, value: Scalar) -> int | None:
    """An integer-typed term, or None when it has a decimal part (which matches nothing)."""
    parsed = number(ctx, value)
    lo, hi, name = _NUMERIC_LIMITS.get(type_name, _NUMERIC_LIMITS["long"])
    if isinstance(parsed, float):
        if math.isfinite(parsed) and not parsed.is_integer():
            return None
        if not math.isfinite(parsed) or not lo <= parsed <= hi:
            raise failed(ctx, "illegal_argument_exception", f"Value [{value}] is out of range for {name}")
        parsed = int(parsed)
    if not lo <= parsed <= hi:
        raise failed(ctx, "illegal_argument_exception", f"Value [{value}] is out of range for {name}")
    return parsed


def boolean(ctx: QueryContext, value: Scalar) -> int:
    if isinstance(value, bool):
        return int(value)
    text = str(value)
    if text in ("true", "false"):
        return int(text == "true")
    if text == "":
        return 0
    raise failed(
        ctx, "illegal_argument_exception", f"Can't parse boolean value [{text}], expected [true] or [false]"
    )


def keyword_text(ft: Any, value: Scalar) -> str:
    """A value as a keyword field indexes it (through its normalizer); text terms stay as given."""
    text = scalar_text(value)
    return ft.normalize(text) if ft.kind == "keyword" else text


def _formatter(ctx: QueryContext, ft: Any, fmt: str | None) -> DateFormatter:
    if fmt is None:
        return ft.formatter
    try:
        return DateFormatter(fmt)
    except ValueError as e:
        raise failed(ctx, "illegal_argument_exception", str(e)) from None


def date_bound(
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
        raise failed(ctx, "parse_exception", str(e), root=True) from None


def float_bounds(precision: str | None, lo: float | None, hi: float | None, incl_lo: bool, incl_hi: bool):
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
