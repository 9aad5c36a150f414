"""Elasticsearch time values ("30s", "5m", "1h", "-1").

Clients send keep-alives and intervals in Elasticsearch's grammar and read its error messages, so the
parser follows `TimeValue.parseTimeValue` exactly: the unit suffixes, the unit-less `-1` and `0`, the
refusal of fractions and of negatives other than `-1`, and the same reason strings.
"""

from __future__ import annotations

import re

from leafsearch.errors import IllegalArgument

# Checked in this order, as Elasticsearch does: "ms" must win over "s", "nanos" over "s".
_UNITS: tuple[tuple[str, float], ...] = (
    ("nanos", 1e-9),
    ("micros", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3600.0),
    ("d", 86400.0),
)
_LONG = re.compile(r"[+-]?\d+")
_DOUBLE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?")
_MINUS_ONE = re.compile(r"-0*1")
_ZERO = re.compile(r"0+")


def parse_time_value(value: str, setting_name: str) -> float:
    """Seconds for `value`; -1.0 for the "disabled" value `-1`."""
    normalized = value.lower().strip()
    for suffix, scale in _UNITS:
        # Elasticsearch tests the minutes suffix on the raw value, so "1M" is not a time value.
        candidate = value if suffix == "m" else normalized
        if candidate.endswith(suffix):
            return _number(value, normalized[: -len(suffix)].strip(), setting_name) * scale
    if _MINUS_ONE.fullmatch(normalized):
        return -1.0
    if _ZERO.fullmatch(normalized):
        return 0.0
    raise IllegalArgument(
        f"failed to parse setting [{setting_name}] with value [{value}] as a time value: "
        "unit is missing or unrecognized"
    )


def _number(raw: str, digits: str, setting_name: str) -> int:
    if not _LONG.fullmatch(digits):
        if _DOUBLE.fullmatch(digits):
            raise IllegalArgument(f"failed to parse [{raw}], fractional time values are not supported")
        raise IllegalArgument(f"failed to parse [{raw}]")
    number = int(digits)
    if number < -1:
        raise IllegalArgument(
            f"failed to parse setting [{setting_name}] with value [{raw}] as a time value: "
            "negative durations are not supported"
        )
    return number
