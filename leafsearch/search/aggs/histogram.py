"""`histogram` and `date_histogram`: keys by floor division (numbers) or by date rounding.

Keys are computed for all values of a segment at once; the bucket of a value is its key's offset
from the smallest key, so counting is a `bincount`. Empty buckets (`min_doc_count: 0`, the
default) and `extended_bounds` are filled in only when the merged result is rendered.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.index.range_fields import RANGE_TYPES
from leafsearch.request.timevalue import parse_time_value
from leafsearch.search.aggs.base import (
    COMMON_VALUE_OPTIONS,
    Agg,
    Options,
    ParseContext,
    SegmentContext,
    field_failed,
    render_subs,
    shard_failure,
    unknown_field,
)
from leafsearch.search.aggs.grouping import Buckets, collect_buckets, dedupe_pairs, merge_buckets
from leafsearch.search.aggs.limits import consume_buckets, reserve_estimate
from leafsearch.search.aggs.order import OrderKey, parse_order, path_values
from leafsearch.search.aggs.range_histogram import range_field, range_keys
from leafsearch.search.aggs.rounding import CALENDAR_UNITS, DateRounding, Zone
from leafsearch.search.aggs.values import DATE, NUMBERS, ValueFormat, numeric_values, resolve_field

_OPTIONS = COMMON_VALUE_OPTIONS | {
    "interval",
    "offset",
    "min_doc_count",
    "extended_bounds",
    "hard_bounds",
    "order",
    "keyed",
}
_DATE_OPTIONS = (_OPTIONS - {"interval"}) | {"calendar_interval", "fixed_interval", "time_zone"}
_KEY_ASC = [OrderKey("_key", True)]
_DENSE_KEYS = 1 << 22  # above this many key slots, distinct keys are found by sorting
_UNBOUNDED = 1 << 62  # the key count of a range an interval divides into more steps than a float holds


class HistogramBase(Agg):
    """What both histograms share: bucketing by key, empty-bucket filling, ordering and rendering."""

    format: ValueFormat
    keyed: bool
    min_doc_count: int
    order: list[OrderKey]
    extended: tuple[float, float] | None
    hard: tuple[float | None, float | None] | None

    def keys_of(self, values: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def keys_between(self, first: float, last: float) -> np.ndarray:
        raise NotImplementedError

    def key_value(self, key: Any) -> Any:
        raise NotImplementedError

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Buckets:
        if self.field.type_name in RANGE_TYPES:  # every bucket each interval overlaps, clipped
            (idx, keys), multi = range_keys(self, seg, docs, self.max_buckets), True
        else:
            idx, values, multi = numeric_values(seg, self.field, docs, self.missing)
            keys = self.keys_of(values)
        if self.hard is not None and self.field.type_name not in RANGE_TYPES:
            lo, hi = self.hard
            keep = np.ones(len(keys), dtype=bool)
            if lo is not None:
                keep &= keys >= lo
            if hi is not None:
                keep &= keys <= hi
            idx, keys = idx[keep], keys[keep]
        if not len(keys):
            return Buckets(
                np.empty(0, np.int64),
                [keys],
                np.empty(0, np.int64),
                {s.name: s.collect(seg, docs[:0], groups[:0], 0) for s in self.subs},
            )
        uniq, codes = self._codes(keys)
        if multi:
            idx, codes = dedupe_pairs(idx, codes, len(uniq))
        row_group, row_code, count, subs = collect_buckets(
            self, seg, docs, groups, n_groups, idx, codes, len(uniq)
        )
        return Buckets(row_group, [uniq[row_code]], count, subs)

    def step_of(self, keys: np.ndarray) -> float:
        """A step every key is a multiple of, counted from the smallest key."""
        raise NotImplementedError

    def _codes(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(distinct keys, code of each key): keys are a grid, so codes are a division, not a sort."""
        low = keys.min()
        step = self.step_of(keys - low)
        if step > 0 and float(keys.max() - low) / step < _DENSE_KEYS:  # a float, so never overflows
            codes = np.rint((keys - low) / step).astype(np.int64)
            size = int(codes.max()) + 1
            if size <= _DENSE_KEYS:
                table = np.zeros(size, dtype=keys.dtype)
                table[codes] = keys
                used = np.flatnonzero(np.bincount(codes, minlength=size))
                remap = np.zeros(size, dtype=np.int64)
                remap[used] = np.arange(len(used))
                return table[used], remap[codes]
        uniq, codes = np.unique(keys, return_inverse=True)
        return uniq, codes.reshape(-1)

    def merge(self, parts: list[Buckets], maps: list[np.ndarray], n_out: int) -> Buckets:
        return merge_buckets(self, parts, maps, n_out)

    def count_between(self, first: float, last: float) -> int:
        """How many keys `keys_between(first, last)` would build, without building them."""
        raise NotImplementedError

    def _entries(self, part: Buckets, group: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(keys ascending, row of each key or -1 for an empty bucket) of one parent bucket.

        Empty buckets are counted against `search.max_buckets` before their keys are built."""
        rows = part.rows_of(group)
        keys = part.keys[0][rows]
        if self.min_doc_count > 0:
            keep = part.count[rows] >= self.min_doc_count
            rows, keys = rows[keep], keys[keep]
            consume_buckets(len(keys))
            order = np.argsort(keys, kind="stable")
            return keys[order], rows[order]
        bounds = [float(k) for k in (keys.min(), keys.max())] if len(keys) else []
        dtype = keys.dtype if len(keys) else np.float64
        if self.extended is not None:
            bounds += [float(k) for k in self.keys_of(np.asarray(self.extended, dtype=dtype))]
        if not bounds:
            return keys, rows
        first, last = min(bounds), max(bounds)
        if self.hard is not None:  # keys outside the hard bounds are never built
            lo, hi = self.hard
            if lo is not None:
                first = max(first, float(self.keys_of(np.asarray([lo], dtype=dtype))[0]))
            if hi is not None:
                last = min(last, float(self.keys_of(np.asarray([hi], dtype=dtype))[0]))
        if first > last:
            every = keys[:0]
        else:
            reserve_estimate(self.count_between(first, last))
            every = self.keys_between(first, last)
        if self.hard is not None:
            lo, hi = self.hard
            if lo is not None:
                every = every[every >= lo]
            if hi is not None:
                every = every[every <= hi]
        every = np.union1d(every, keys)
        consume_buckets(len(every))
        entry_rows = np.full(len(every), -1, dtype=np.int64)
        entry_rows[np.searchsorted(every, keys)] = rows
        return every, entry_rows

    def render(self, part: Buckets, group: int | None) -> dict:
        keys, rows = self._entries(part, group)
        order = self._order(part, keys, rows)
        buckets = [self._bucket(part, keys[i], int(rows[i])) for i in order.tolist()]
        if self.keyed:
            return {"buckets": {self.format.format(self.key_value(b["key"])): b for b in buckets}}
        return {"buckets": buckets}

    def _order(self, part: Buckets, keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
        positions = np.arange(len(keys))
        if self.order == _KEY_ASC or len(keys) < 2:
            return positions
        present = rows >= 0
        sort_keys = []
        for key in reversed(self.order):
            if key.kind == "_key":
                values = positions.astype(np.float64)
            elif key.kind == "_count":
                values = np.where(present, part.count[np.maximum(rows, 0)], 0).astype(np.float64)
            else:
                sub = path_values(self.subs, part.subs, key.path) if len(part.count) else np.empty(0)
                values = np.where(present, sub[np.maximum(rows, 0)] if len(sub) else np.nan, np.nan)
            sort_keys.append(values if key.asc else -values)
        return np.lexsort(sort_keys)

    def _bucket(self, part: Buckets, key: Any, row: int) -> dict:
        bucket: dict[str, Any] = {}
        value = self.key_value(key)
        if not self.format.raw:
            bucket["key_as_string"] = self.format.format(value)
        bucket["key"] = value
        bucket["doc_count"] = int(part.count[row]) if row >= 0 else 0
        bucket.update(render_subs(self.subs, part.subs, row if row >= 0 else None))
        return bucket


class HistogramAgg(HistogramBase):
    type_name = "histogram"

    def __init__(
        self, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        self.field = range_field("histogram", opts, pctx) or resolve_field("histogram", opts, pctx, NUMBERS)
        self.max_buckets = pctx.max_buckets
        interval = opts.number("interval")
        if interval is None or interval <= 0:
            raise field_failed(
                "histogram",
                "interval",
                IllegalArgument(f"[interval] must be >0 for histogram aggregation [{name}]"),
            )
        self.interval = interval
        self.offset = opts.number("offset", 0.0)
        self.min_doc_count = opts.min_doc_count(0)
        self.keyed = opts.boolean("keyed", False)
        self.order = parse_order(opts.get("order"), subs, _KEY_ASC, tiebreak=True)
        self.format = self.field.value_format(opts.get("format"))
        self.missing = opts.missing(self.format, pctx.now_millis)
        self.extended = _bounds(opts, "extended_bounds", self.format, "histogram", pctx)
        self.hard = _bounds(opts, "hard_bounds", self.format, "histogram", pctx, partial=True)

    def keys_of(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        return np.floor((values - self.offset) / self.interval) * self.interval + self.offset

    def count_between(self, first: float, last: float) -> int:
        steps = (last - first) / self.interval
        return int(round(steps)) + 1 if math.isfinite(steps) else _UNBOUNDED

    def keys_between(self, first: float, last: float) -> np.ndarray:
        count = self.count_between(first, last)
        return self.keys_of(first + np.arange(count) * self.interval + self.interval / 2)

    def key_value(self, key: Any) -> float:
        return float(key)

    def step_of(self, keys: np.ndarray) -> float:
        return self.interval


class DateHistogramAgg(HistogramBase):
    type_name = "date_histogram"

    def __init__(
        self, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        if "interval" in opts.body:
            raise unknown_field("date_histogram", "interval")
        self.field = range_field("date_histogram", opts, pctx) or resolve_field(
            "date_histogram", opts, pctx, NUMBERS
        )
        self.max_buckets = pctx.max_buckets
        zone = None
        if opts.get("time_zone") is not None:
            try:
                zone = Zone(str(opts.get("time_zone")))
            except IllegalArgument as err:
                raise field_failed("date_histogram", "time_zone", err) from None
        unit, fixed = _interval(opts)
        offset = _date_offset(opts.get("offset", 0))
        self.rounding = DateRounding(unit, fixed, zone, offset)
        self.min_doc_count = opts.min_doc_count(0)
        self.keyed = opts.boolean("keyed", False)
        self.order = parse_order(opts.get("order"), subs, _KEY_ASC, tiebreak=True)
        if self.field.family == DATE:
            self.format = self.field.value_format(opts.get("format"), zone)
        else:
            from leafsearch.search.aggs.values import DateFormat, _date_formatter

            self.format = DateFormat(
                _date_formatter(opts.get("format") or "strict_date_optional_time||epoch_millis"), zone
            )
        self.missing = opts.missing(self.format, pctx.now_millis)
        self.extended = _bounds(opts, "extended_bounds", self.format, "date_histogram", pctx)
        self.hard = _bounds(opts, "hard_bounds", self.format, "date_histogram", pctx, partial=True)

    def keys_of(self, values: np.ndarray) -> np.ndarray:
        return self.rounding.round(np.floor(np.asarray(values)).astype(np.int64))

    def count_between(self, first: float, last: float) -> int:
        return self.rounding.count_between(int(first), int(last))

    def keys_between(self, first: float, last: float) -> np.ndarray:
        return self.rounding.keys_between(int(first), int(last))

    def key_value(self, key: Any) -> int:
        return int(key)

    def step_of(self, keys: np.ndarray) -> float:
        return int(np.gcd.reduce(keys)) if len(keys) else 0


def _interval(opts: Options) -> tuple[str | None, int | None]:
    calendar, fixed = opts.get("calendar_interval"), opts.get("fixed_interval")
    if calendar is not None and fixed is not None:
        raise field_failed(
            "date_histogram",
            "fixed_interval",
            IllegalArgument("Cannot use [fixed_interval] with [calendar_interval] configuration option."),
        )
    if calendar is not None:
        unit = CALENDAR_UNITS.get(str(calendar))
        if unit is None:
            raise field_failed(
                "date_histogram",
                "calendar_interval",
                IllegalArgument(
                    f"The supplied interval [{calendar}] could not be parsed as a calendar interval."
                ),
            )
        return unit, None
    if fixed is not None:
        try:
            seconds = parse_time_value(str(fixed), "date_histogram.fixedInterval")
        except IllegalArgument as err:
            raise field_failed("date_histogram", "fixed_interval", err) from None
        millis = int(round(seconds * 1000))
        if millis <= 0:
            raise shard_failure(IllegalArgument("Zero or negative time interval not supported"))
        return None, millis
    raise shard_failure(IllegalArgument("Invalid interval specified, must be non-null and non-empty"))


def _date_offset(value: Any) -> int:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    text = str(value).strip()
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-")
    try:
        return sign * int(round(parse_time_value(text, "date_histogram.offset") * 1000))
    except IllegalArgument as err:
        raise field_failed("date_histogram", "offset", err) from None


def _bounds(
    opts: Options, key: str, fmt: ValueFormat, agg_type: str, pctx: ParseContext, partial: bool = False
) -> tuple[Any, Any] | None:
    spec = opts.get(key)
    if spec is None:
        return None
    if not isinstance(spec, dict) or any(k not in ("min", "max") for k in spec):
        raise field_failed(agg_type, key, IllegalArgument(f"[{key}] must be an object with [min] and [max]"))
    try:
        lo = None if spec.get("min") is None else fmt.parse(spec["min"], pctx.now_millis)
        hi = None if spec.get("max") is None else fmt.parse(spec["max"], pctx.now_millis, round_up=True)
    except IllegalArgument as err:
        raise field_failed(agg_type, key, err) from None
    if lo is not None and hi is not None and lo > hi:
        raise field_failed(
            agg_type,
            key,
            IllegalArgument(
                f"[{key}.min][{_plain(lo)}] cannot be greater than [{key}.max][{_plain(hi)}] for histogram "
                f"aggregation [{opts.name}]"
            ),
        )
    if not partial:
        bounds = [b for b in (lo, hi) if b is not None]
        if not bounds:
            return None
        return (bounds[0], bounds[-1])
    return lo, hi


def _plain(value: Any) -> Any:
    return int(value) if isinstance(value, float) and math.isfinite(value) and value.is_integer() else value


def parse_histogram(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
    return HistogramAgg(name, meta, subs, Options("histogram", name, body, _OPTIONS), pctx)


def parse_date_histogram(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
    return DateHistogramAgg(name, meta, subs, Options("date_histogram", name, body, _DATE_OPTIONS), pctx)
