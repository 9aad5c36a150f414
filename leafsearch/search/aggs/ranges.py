"""`range` and `date_range`: a bucket per `[from, to)` range, in (from, to) order as Elasticsearch
sorts them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument
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
from leafsearch.search.aggs.limits import consume_buckets
from leafsearch.search.aggs.values import NUMBERS, numeric_values, resolve_field

_OPTIONS = COMMON_VALUE_OPTIONS | {"ranges", "keyed"}
_RANGE_KEYS = {"from", "to", "key"}


class RangeAgg(Agg):
    def __init__(
        self, type_name: str, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        self.type_name = type_name
        self.field = resolve_field(type_name, opts, pctx, NUMBERS)
        self.format = self.field.value_format(opts.get("format"))
        if type_name == "date_range" and self.format.raw:
            from leafsearch.search.aggs.values import DateFormat, _date_formatter

            self.format = DateFormat(
                _date_formatter(opts.get("format") or "strict_date_optional_time||epoch_millis")
            )
        self.keyed = opts.boolean("keyed", False)
        self.missing = opts.missing(self.format, pctx.now_millis)
        specs = opts.get("ranges")
        if not specs:
            raise shard_failure(IllegalArgument(f"No [ranges] specified for the [{name}] aggregation"))
        if not isinstance(specs, list):
            raise field_failed(type_name, "ranges", IllegalArgument("[ranges] must be an array"))
        parsed = [self._range(spec, pctx) for spec in specs]
        parsed.sort(key=lambda r: (r[0], r[1]))
        self.ranges = parsed

    def _range(self, spec: Any, pctx: ParseContext) -> tuple[float, float, str | None, float, float]:
        """(from, to, key, from shown, to shown): the bounds documents are matched against, and the
        request's bounds that the buckets print (on a `float` field 10.6 matches as 10.6f, whose
        double is 10.600000381469727, and is printed 10.6, as Elasticsearch prints it)."""
        if not isinstance(spec, dict):
            raise field_failed(self.type_name, "ranges", IllegalArgument("[ranges] entries must be objects"))
        for key in spec:
            if key not in _RANGE_KEYS:
                raise unknown_field("range", key)
        try:
            shown_lo = -math.inf if spec.get("from") is None else self._bound(spec["from"], pctx)
            shown_hi = math.inf if spec.get("to") is None else self._bound(spec["to"], pctx)
        except IllegalArgument as err:
            raise field_failed(self.type_name, "ranges", err) from None
        key = spec.get("key")
        lo, hi = self._precision(shown_lo), self._precision(shown_hi)
        return lo, hi, None if key is None else str(key), shown_lo, shown_hi

    def _bound(self, value: Any, pctx: ParseContext) -> float:
        """A bound in aggregation units. As in Elasticsearch, `date_range` reads a number as the
        text of its whole part in the field's format (1000 on an `epoch_second` field is 1000 s)."""
        if self.type_name == "date_range" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(int(value))
        return float(self.format.parse(value, pctx.now_millis))

    def _precision(self, bound: float) -> float:
        """Bounds on `float`/`half_float` fields are matched at the field's precision, so a stored
        0.04f equals the bound 0.04."""
        type_name = self.field.type_name
        if type_name == "float":
            return float(np.float32(bound))
        if type_name == "half_float":
            return float(np.float16(bound))
        return bound

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Buckets:
        idx, values, multi = numeric_values(seg, self.field, docs, self.missing)
        values = values.astype(np.float64)
        pair_idx, codes = [], []
        for i, (lo, hi, *_) in enumerate(self.ranges):
            inside = np.flatnonzero((values >= lo) & (values < hi))
            pair_idx.append(idx[inside])
            codes.append(np.full(len(inside), i, dtype=np.int64))
        idx, code = np.concatenate(pair_idx), np.concatenate(codes)
        if multi:
            idx, code = dedupe_pairs(idx, code, len(self.ranges))
        row_group, row_code, count, subs = collect_buckets(
            self, seg, docs, groups, n_groups, idx, code, len(self.ranges)
        )
        return Buckets(row_group, [row_code], count, subs)

    def merge(self, parts: list[Buckets], maps: list[np.ndarray], n_out: int) -> Buckets:
        return merge_buckets(self, parts, maps, n_out)

    def _bound_text(self, bound: float) -> str:
        return "*" if math.isinf(bound) else self.format.format(bound)

    def render(self, part: Buckets, group: int | None) -> dict:
        rows = part.rows_of(group)
        row_of = dict(zip(part.keys[0][rows].tolist(), rows.tolist(), strict=True))
        consume_buckets(len(self.ranges))
        buckets = []
        for i, (_, _, key, lo, hi) in enumerate(self.ranges):
            row = row_of.get(i)
            if key is None:
                key = f"{self._bound_text(lo)}-{self._bound_text(hi)}"
            bucket: dict[str, Any] = {"key": key}
            for name, bound in (("from", lo), ("to", hi)):
                if not math.isinf(bound):
                    bucket[name] = bound
                    if not self.format.raw:
                        bucket[f"{name}_as_string"] = self.format.format(bound)
            bucket["doc_count"] = int(part.count[row]) if row is not None else 0
            bucket.update(render_subs(self.subs, part.subs, row))
            buckets.append(bucket)
        if self.keyed:
            return {"buckets": {b.pop("key"): b for b in buckets}}
        return {"buckets": buckets}


def parse_range(type_name: str):
    def parse(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
        return RangeAgg(type_name, name, meta, subs, Options(type_name, name, body, _OPTIONS), pctx)

    return parse
