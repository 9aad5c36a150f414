"""Many ISO 8601 timestamps parsed (or printed) at once: the `@timestamp` of a bulk request, or the
dates of a page of `docvalue_fields`, in a few numpy calls.

Log shippers send one shape, `2024-05-01T12:34:56.789Z`. Parsed one by one it costs a
`fromisoformat` and a subtraction per document; as one fixed-width byte matrix its digits become
epoch millis with array arithmetic. Only rows that are exactly that shape with a valid calendar
date and time are accepted; anything else answers None and the caller parses value by value, so the
result always equals `DateFormatter.parse` for the ISO formats.
"""

from __future__ import annotations

import numpy as np

_WIDTH = 24  # len("2024-05-01T12:34:56.789Z")
_DIGITS = np.array([0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22])
_PUNCTUATION = {4: b"-", 7: b"-", 10: b"T", 13: b":", 16: b":", 19: b".", 23: b"Z"}
_MONTH_DAYS = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
_DAY_MILLIS = 86_400_000
_FIRST_DAY, _LAST_DAY = -719_162, 2_932_896  # 0001-01-01 and 9999-12-31, in days since 1970


def _number(d: np.ndarray, first: int, size: int) -> np.ndarray:
    out = np.zeros(len(d), dtype=np.int64)
    for i in range(first, first + size):
        out = out * 10 + d[:, i]
    return out


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`)."""
    y = y - (m <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def iso_millis(values: list[str]) -> np.ndarray | None:
    """Epoch millis of every `YYYY-MM-DDTHH:MM:SS.mmmZ` value, or None if any value is another shape."""
    if not values or set(map(len, values)) != {_WIDTH}:
        return None
    try:
        raw = "".join(values).encode("ascii")
    except UnicodeEncodeError:
        return None
    chars = np.frombuffer(raw, dtype=np.uint8).reshape(len(values), _WIDTH)
    for column, char in _PUNCTUATION.items():
        if not (chars[:, column] == char[0]).all():
            return None
    digits = chars.astype(np.int64) - 48
    if not ((digits[:, _DIGITS] >= 0) & (digits[:, _DIGITS] <= 9)).all():
        return None
    year, month, day = _number(digits, 0, 4), _number(digits, 5, 2), _number(digits, 8, 2)
    hour, minute, second = _number(digits, 11, 2), _number(digits, 14, 2), _number(digits, 17, 2)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = _MONTH_DAYS[np.clip(month, 0, 12)] + (leap & (month == 2))
    valid = (
        (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= month_days)
        & (hour <= 23) & (minute <= 59) & (second <= 59)
    )  # fmt: skip
    if not valid.all():
        return None
    seconds = hour * 3600 + minute * 60 + second
    return _days_from_civil(year, month, day) * _DAY_MILLIS + seconds * 1000 + _number(digits, 20, 3)


def iso_strings(millis: np.ndarray) -> list[str] | None:
    """`YYYY-MM-DDTHH:MM:SS.mmmZ` of every epoch millis value (what `strict_date_optional_time`
    prints), or None if any falls outside years 1 to 9999, whose shape differs (a sign, more digits)."""
    millis = np.asarray(millis, dtype=np.int64)
    days = millis // _DAY_MILLIS
    if len(days) and not (days.min() >= _FIRST_DAY and days.max() <= _LAST_DAY):
        return None
    return np.datetime_as_string(millis.astype("datetime64[ms]"), unit="ms", timezone="UTC").tolist()
