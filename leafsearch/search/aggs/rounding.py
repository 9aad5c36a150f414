"""Date rounding for `date_histogram`: calendar and fixed intervals, offsets and time zones.

Rounding happens in local time, as in Elasticsearch: a value is moved to the zone's wall clock,
floored to the interval, and the wall-clock key moved back to UTC. Zone offsets are vectorized by
finding the zone's transitions over the range of the data once (a few Python calls per day of
range at most) and then looking every value up with `searchsorted`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from leafsearch.errors import IllegalArgument

DAY = 86_400_000
CALENDAR_UNITS = {
    "minute": "minute",
    "1m": "minute",
    "hour": "hour",
    "1h": "hour",
    "day": "day",
    "1d": "day",
    "week": "week",
    "1w": "week",
    "month": "month",
    "1M": "month",
    "quarter": "quarter",
    "1q": "quarter",
    "year": "year",
    "1y": "year",
    "second": "second",
    "1s": "second",
}
_UNIT_MILLIS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": DAY, "week": 7 * DAY}
_MONTHS = {"month": 1, "quarter": 3, "year": 12}
_FIRST_INSTANT = -62104060800000  # 0002-01-01T00:00:00Z
_LAST_INSTANT = 253370764800000  # 9999-01-01T00:00:00Z
_OFFSET = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")


class Zone:
    """A time zone: a fixed offset ("+01:00", "Z") or a region id ("Europe/Paris")."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.fixed: int | None = None
        self.info = None
        text = spec.strip()
        upper = text.upper()
        if upper in ("Z", "UTC", "GMT", "UT", "ETC/UTC", "ETC/GMT"):
            self.fixed = 0
            return
        for prefix in ("UTC", "GMT", "UT", ""):
            rest = text[len(prefix) :] if upper.startswith(prefix) else None
            if rest is not None and (match := _OFFSET.fullmatch(rest)):
                sign = -1 if match.group(1) == "-" else 1
                hours, minutes, seconds = (int(match.group(i) or 0) for i in (2, 3, 4))
                if hours > 18 or minutes > 59 or seconds > 59:
                    break
                self.fixed = sign * ((hours * 60 + minutes) * 60 + seconds) * 1000
                return
        try:
            self.info = ZoneInfo(text)
        except (ZoneInfoNotFoundError, ValueError):
            raise IllegalArgument(f"Unknown time-zone ID: {spec}") from None

    @property
    def is_utc(self) -> bool:
        return self.fixed == 0

    def _offset_at(self, millis: int) -> int:
        """The zone's offset at an instant; before year 2 or after 9998 (beyond Python's datetime),
        the offset at that edge."""
        millis = min(max(millis, _FIRST_INSTANT), _LAST_INSTANT)
        instant = datetime.fromtimestamp(millis / 1000, tz=UTC)
        return int(instant.astimezone(self.info).utcoffset() // timedelta(milliseconds=1))

    def _transitions(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(instants where the offset changes, offset from each instant on); first instant is -inf."""
        days = np.arange(lo // DAY - 1, hi // DAY + 2, dtype=np.int64) * DAY
        offsets = np.array([self._offset_at(int(d)) for d in days], dtype=np.int64)
        starts, values = [np.iinfo(np.int64).min], [int(offsets[0])]
        for i in np.flatnonzero(offsets[1:] != offsets[:-1]).tolist():
            a, b = int(days[i]), int(days[i + 1])  # offset(a) != offset(b): bisect to the second
            while b - a > 1000:
                mid = (a + b) // 2 // 1000 * 1000
                if mid <= a:
                    break
                if self._offset_at(mid) == offsets[i]:
                    a = mid
                else:
                    b = mid
            starts.append(b)
            values.append(int(offsets[i + 1]))
        return np.array(starts, dtype=np.int64), np.array(values, dtype=np.int64)

    def offsets(self, utc: np.ndarray) -> np.ndarray:
        """Offset in milliseconds of the zone at each UTC instant."""
        utc = np.asarray(utc, dtype=np.int64)
        if self.fixed is not None or not len(utc):
            return np.full(len(utc), self.fixed or 0, dtype=np.int64)
        lo, hi = int(utc.min()), int(utc.max())
        distinct, inverse = np.unique(utc, return_inverse=True)
        if len(distinct) < (hi - lo) // DAY + 3:  # fewer values than days: ask the zone for each one
            each = np.array([self._offset_at(int(v)) for v in distinct.tolist()], dtype=np.int64)
            return each[inverse.reshape(-1)]
        starts, values = self._transitions(lo, hi)
        return values[np.searchsorted(starts, utc, side="right") - 1]

    def to_utc(self, local: np.ndarray) -> np.ndarray:
        """UTC instant of each wall-clock time (the earlier one when the clock goes back)."""
        local = np.asarray(local, dtype=np.int64)
        if self.fixed is not None:
            return local - (self.fixed or 0)
        guess = local - self.offsets(local)
        return local - self.offsets(guess)


class DateRounding:
    """`calendar_interval` (a unit) or `fixed_interval` (milliseconds), in a zone, shifted by `offset`."""

    def __init__(self, unit: str | None, fixed_millis: int | None, zone: Zone | None, offset: int) -> None:
        self.unit = unit
        self.fixed = fixed_millis
        self.zone = zone if zone is not None and not zone.is_utc else None
        self.offset = offset

    def _floor_local(self, local: np.ndarray) -> np.ndarray:
        if self.fixed is not None:
            return np.floor_divide(local, self.fixed) * self.fixed
        if self.unit == "week":
            days = np.floor_divide(local, DAY)
            return (days - np.mod(days + 3, 7)) * DAY  # 1970-01-01 was a Thursday; weeks start on Monday
        if self.unit in _UNIT_MILLIS:
            step = _UNIT_MILLIS[self.unit]
            return np.floor_divide(local, step) * step
        months = local.astype("datetime64[ms]").astype("datetime64[M]").astype(np.int64)
        months -= np.mod(months, _MONTHS[self.unit])
        return months.astype("datetime64[M]").astype("datetime64[ms]").astype(np.int64)

    def round(self, utc: np.ndarray) -> np.ndarray:
        shifted = np.asarray(utc, dtype=np.int64) - self.offset
        if self.zone is None:
            return self._floor_local(shifted) + self.offset
        local = shifted + self.zone.offsets(shifted)
        return self.zone.to_utc(self._floor_local(local)) + self.offset

    def _local_span(self, first: int, last: int) -> tuple[int, int, int]:
        """(start, stop, step) of the wall-clock grid from key `first` to key `last`: milliseconds
        for fixed lengths, months since 1970 for months, quarters and years."""
        lo, hi = first - self.offset, last - self.offset
        if self.zone is not None:
            lo += int(self.zone.offsets(np.array([lo]))[0])
            hi += int(self.zone.offsets(np.array([hi]))[0])
        if self.fixed is not None or self.unit in _UNIT_MILLIS:
            return lo, hi, self.fixed if self.fixed is not None else _UNIT_MILLIS[self.unit]
        m0, m1 = np.array([lo, hi], dtype="datetime64[ms]").astype("datetime64[M]").astype(np.int64)
        return int(m0), int(m1), _MONTHS[self.unit]

    def count_between(self, first: int, last: int) -> int:
        """How many keys `keys_between` builds at most (a time zone's shifts may merge a few)."""
        start, stop, step = self._local_span(first, last)
        return (stop - start) // step + 1 if stop >= start else 0

    def keys_between(self, first: int, last: int) -> np.ndarray:
        """Every bucket key from `first` to `last` (both keys of this rounding), for empty buckets."""
        start, stop, step = self._local_span(first, last)
        local = np.arange(start, stop + 1, step, dtype=np.int64)
        if self.fixed is None and self.unit not in _UNIT_MILLIS:
            local = local.astype("datetime64[M]").astype("datetime64[ms]").astype(np.int64)
        keys = (self.zone.to_utc(local) if self.zone is not None else local) + self.offset
        return np.unique(self.round(keys))
