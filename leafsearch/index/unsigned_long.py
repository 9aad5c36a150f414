"""`unsigned_long` values (0 to 2^64-1) stored as signed 64-bit longs shifted by 2^63.

Why shifted int64 and not a uint64 column: every numeric column, sort order, search_after cursor,
range query and index sort of the engine works on int64 "long" columns; shifting by 2^63 (the
sign bit flipped) keeps the order of the unsigned values, so an `unsigned_long` field is a `long`
column to all of them and only the edges convert: parsing a document or a query value
(`to_stored`), and rendering a sort value, a doc value or an aggregation key (`to_unsigned`).
It is what Elasticsearch stores too (its sortable signed long), so `missing` sorts at the stored
long's extremes and render as 0 and 18446744073709551615, as there.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import numpy as np

SHIFT = 2**63
MAX = 2**64 - 1


def to_stored(value: int) -> int:
    """The stored long of an unsigned value in [0, 2^64-1]."""
    return value - SHIFT


def to_unsigned(stored: int) -> int:
    """The unsigned value of a stored long."""
    return int(stored) + SHIFT


def unsigned_array(stored: np.ndarray) -> np.ndarray:
    """Stored longs as exact uint64 values (flipping the sign bit is the shift)."""
    return np.asarray(stored, dtype=np.int64).view(np.uint64) ^ np.uint64(SHIFT)


def parse_value(value: object) -> int:
    """A JSON integer or a string as Elasticsearch's UnsignedLongFieldMapper parses it (the caller
    refuses JSON decimals); ValueError with its message when refused. Strings may hold any number
    without a fractional part."""
    if isinstance(value, int):
        if value < 0 and value >= -(2**63):
            raise ValueError(f"Value [{value}] is out of range for unsigned long.")
        return _in_range(value)
    text = str(value)
    if (
        text[:1] in "+0123456789"
        and text[1:].isdigit()
        and text != "+"
        and len(text) <= 21
        and int(text) <= MAX
    ):
        return int(text)
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(f'For input string: "{text}"') from None
    if not number.is_finite() or "_" in text or text != text.strip():
        raise ValueError(f'For input string: "{text}"')
    if number != number.to_integral_value():
        raise ValueError(f'Value "{text}" has a decimal part')
    if number.adjusted() > 20:  # past the range: never expanded into its digits
        raise ValueError(f"Value [{text}] is out of range for unsigned long")
    return _in_range(int(number))


def _in_range(value: int) -> int:
    if not 0 <= value <= MAX:
        raise ValueError(f"Value [{value}] is out of range for unsigned long")
    return value
