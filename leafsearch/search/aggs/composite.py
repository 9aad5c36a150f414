"""`composite`: paging over every combination of source values, in a total order, with `after`.

The order is total and deterministic, so each segment keeps only its first `size` combinations
after `after`: a combination among the first `size` overall is among the first `size` of every
segment that holds it. Walking the pages with `after_key` therefore visits every bucket once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument, ParsingError
from leafsearch.search.aggs.base import (
    Agg,
    Options,
    ParseContext,
    SegmentContext,
    collect_subs,
    field_failed,
    render_subs,
    shard_failure,
)
from leafsearch.search.aggs.grouping import Buckets, densify, merge_buckets, unify
from leafsearch.search.aggs.limits import TooManyBuckets, consume_buckets
from leafsearch.search.aggs.rounding import DateRounding, Zone
from leafsearch.search.aggs.values import (
    ANY,
    KEYWORD,
    NUMBERS,
    FieldRef,
    ValueFormat,
    keyword_values,
    numeric_values,
    resolve_field,
)

_SOURCE_OPTIONS = {"field", "script", "missing_bucket", "missing_order", "order", "format", "value_type"}
_PARENT_FACTORIES = {
    "terms": "TermsAggregatorFactory",
    "histogram": "HistogramAggregatorFactory",
    "date_histogram": "DateHistogramAggregatorFactory",
    "range": "RangeAggregatorFactory",
    "date_range": "DateRangeAggregatorFactory",
    "filter": "FilterAggregatorFactory",
    "filters": "FiltersAggregatorFactory",
    "composite": "CompositeAggregationFactory",
}


@dataclass
class Source:
    """One source of the composite key: how its values are read, ordered and written."""

    name: str
    kind: str  # terms, histogram, date_histogram
    field: FieldRef
    format: ValueFormat
    asc: bool
    missing_bucket: bool
    missing_first: bool
    interval: float | None = None
    rounding: DateRounding | None = None

    def values(self, seg: SegmentContext, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index into docs, key value) of every value of the documents."""
        if self.field.family == KEYWORD or (self.kind == "terms" and not self.field.mapped):
            idx, codes, terms, _ = keyword_values(seg, self.field, docs)
            return idx, terms[codes]
        idx, values, _ = numeric_values(seg, self.field, docs)
        if self.kind == "histogram":
            values = np.floor(values.astype(np.float64) / self.interval) * self.interval
        elif self.kind == "date_histogram":
            values = self.rounding.round(np.floor(values).astype(np.int64))
        elif self.field.family != KEYWORD and not self.field.is_integral() and values.dtype.kind == "f":
            values = values.astype(np.float64)
        return idx, values

    def filler(self, column: np.ndarray) -> Any:
        return b"" if column.dtype.kind == "S" else 0

    def sort_codes(self, values: np.ndarray, missing: np.ndarray) -> list[np.ndarray]:
        """Lexsort keys (least significant first) putting this source's values in its order."""
        codes, _ = densify(values)
        codes = codes if self.asc else -codes
        flag = np.where(missing, 0 if self.missing_first else 1, 0 if not self.missing_first else 1)
        return [codes, flag]

    def compare(self, values: np.ndarray, missing: np.ndarray, after: Any) -> np.ndarray:
        """-1/0/1 per row: before, equal to, or after the `after` value in this source's order."""
        if after is None:
            here = np.where(missing, 0, 1 if self.missing_first else -1)
            return here.astype(np.int64)
        if values.dtype.kind == "S":
            key = str(after).encode()
        else:
            key = after
        greater = (values > key).astype(np.int64) - (values < key).astype(np.int64)
        if not self.asc:
            greater = -greater
        return np.where(missing, -1 if self.missing_first else 1, greater)

    def render(self, value: Any, missing: bool) -> Any:
        if missing:
            return None
        if isinstance(value, bytes):
            return value.decode()
        if self.kind == "histogram":
            return float(value)
        if isinstance(value, (np.integer, int)):
            value = int(value)
        else:
            value = float(value)
        return value if self.format.raw else self.format.composite(value)

    def parse_after(self, value: Any, pctx: ParseContext) -> Any:
        if value is None:
            if not self.missing_bucket:
                raise shard_failure(
                    IllegalArgument(
                        f"Cannot set missing_bucket = false on source [{self.name}] when after key is null"
                    )
                )
            return None
        if self.field.family == KEYWORD or not self.field.mapped:
            return str(value)
        try:
            return self.format.parse(value, pctx.now_millis)
        except IllegalArgument as err:
            raise field_failed("composite", "after", err) from None


class CompositeAgg(Agg):
    type_name = "composite"

    def __init__(
        self, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        if pctx.parent is not None:
            factory = _PARENT_FACTORIES.get(pctx.parent, pctx.parent)
            raise shard_failure(
                IllegalArgument(
                    f"[composite] aggregation cannot be used with a parent aggregation of type: [{factory}]"
                )
            )
        if "sources" not in opts:
            raise IllegalArgument("Required [sources]")
        specs = opts.get("sources")
        if not isinstance(specs, list) or not specs:
            raise IllegalArgument("Composite [sources] cannot be null or empty")
        self.sources = [_source(spec, pctx) for spec in specs]
        names = [s.name for s in self.sources]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise IllegalArgument(
                f"Composite source names must be unique, found duplicates: [{', '.join(duplicates)}]"
            )
        self.size = opts.positive("size", 10)
        if pctx.max_buckets is not None and self.size > pctx.max_buckets:
            raise shard_failure(TooManyBuckets(pctx.max_buckets, size=self.size))
        after = opts.get("after")
        self.after: list[Any] | None = None
        if after is not None:
            if not isinstance(after, dict) or len(after) != len(self.sources):
                count = len(after) if isinstance(after, dict) else 0
                raise shard_failure(
                    IllegalArgument(f"[after] has {count} value(s) but [sources] has {len(self.sources)}")
                )
            values = []
            for source in self.sources:
                if source.name not in after:
                    raise shard_failure(IllegalArgument(f"Missing value for [after.{source.name}]"))
                values.append(source.parse_after(after[source.name], pctx))
            self.after = values

    def _combinations(self, seg: SegmentContext, docs: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """(index into docs, key columns [value, missing, value, missing, ...]) of every combination."""
        idx = np.arange(len(docs), dtype=np.int64)
        columns: list[np.ndarray] = []
        for source in self.sources:
            src_idx, src_values = source.values(seg, docs)
            missing = np.zeros(len(src_idx), dtype=bool)
            if source.missing_bucket:
                lacking = np.setdiff1d(np.arange(len(docs)), src_idx)
                filler = source.filler(src_values)
                src_idx = np.concatenate([src_idx, lacking])
                src_values = np.concatenate(
                    [src_values, np.full(len(lacking), filler, dtype=src_values.dtype)]
                )
                missing = np.concatenate([missing, np.ones(len(lacking), dtype=bool)])
            order = np.argsort(src_idx, kind="stable")
            src_idx, src_values, missing = src_idx[order], src_values[order], missing[order]
            counts = np.bincount(src_idx, minlength=len(docs))
            starts = np.cumsum(counts) - counts
            reps = counts[idx]
            base = np.repeat(np.arange(len(idx)), reps)
            within = np.arange(len(base)) - np.repeat(np.cumsum(reps) - reps, reps)
            picked = np.repeat(starts[idx], reps) + within
            idx = idx[base]
            columns = [c[base] for c in columns] + [src_values[picked], missing[picked]]
        return idx, columns

    def _after_mask(self, columns: list[np.ndarray]) -> np.ndarray:
        n = len(columns[0]) if columns else 0
        if self.after is None:
            return np.ones(n, dtype=bool)
        decided = np.zeros(n, dtype=bool)
        later = np.zeros(n, dtype=bool)
        for i, source in enumerate(self.sources):
            cmp = source.compare(columns[2 * i], columns[2 * i + 1], self.after[i])
            later |= ~decided & (cmp > 0)
            decided |= cmp != 0
        return later

    def _ordered(self, columns: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
        keys: list[np.ndarray] = []
        for i in reversed(range(len(self.sources))):
            codes, flag = self.sources[i].sort_codes(columns[2 * i][rows], columns[2 * i + 1][rows])
            keys += [codes, flag]
        return rows[np.lexsort(keys)] if len(rows) > 1 else rows

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Buckets:
        idx, columns = self._combinations(seg, docs)
        if len(idx):
            first, inverse = unify(columns)
            row_columns = [c[first] for c in columns]
        else:
            inverse, row_columns = np.empty(0, np.int64), [c[:0] for c in columns]
        n_rows = len(row_columns[0]) if row_columns else 0
        rows = np.flatnonzero(self._after_mask(row_columns))
        chosen = self._ordered(row_columns, rows)[: self.size]
        new_row = np.full(n_rows, -1, dtype=np.int64)
        new_row[chosen] = np.arange(len(chosen))
        # A document counts once per combination it yields.
        pair_row = new_row[inverse]
        keep = pair_row >= 0
        cells = np.unique(idx[keep] * max(len(chosen), 1) + pair_row[keep])
        pair_docs, pair_rows = cells // max(len(chosen), 1), cells % max(len(chosen), 1)
        count = np.bincount(pair_rows, minlength=len(chosen)).astype(np.int64)
        subs = collect_subs(self.subs, seg, docs[pair_docs], pair_rows, len(chosen)) if self.subs else {}
        return Buckets(np.zeros(len(chosen), np.int64), [c[chosen] for c in row_columns], count, subs)

    @property
    def key_columns(self) -> int:  # type: ignore[override]
        return 2 * len(self.sources)  # (value, missing) per source

    def merge(self, parts: list[Buckets], maps: list[np.ndarray], n_out: int) -> Buckets:
        return merge_buckets(self, parts, maps, n_out)

    def render(self, part: Buckets, group: int | None) -> dict:
        rows = part.rows_of(group)
        chosen = self._ordered(part.keys, rows)[: self.size].tolist()
        consume_buckets(len(chosen))
        buckets = []
        for row in chosen:
            key = {
                s.name: s.render(part.keys[2 * i][row], bool(part.keys[2 * i + 1][row]))
                for i, s in enumerate(self.sources)
            }
            buckets.append(
                {"key": key, "doc_count": int(part.count[row]), **render_subs(self.subs, part.subs, row)}
            )
        if buckets:
            return {"after_key": dict(buckets[-1]["key"]), "buckets": buckets}
        return {"buckets": buckets}


def _source(spec: Any, pctx: ParseContext) -> Source:
    if not isinstance(spec, dict) or len(spec) != 1:
        raise ParsingError("Expected [START_OBJECT] with a single source name, got something else")
    ((name, definition),) = spec.items()
    if not isinstance(definition, dict) or len(definition) != 1:
        raise ParsingError(f"Expected a single source type under [{name}]")
    ((kind, body),) = definition.items()
    if kind not in ("terms", "histogram", "date_histogram"):
        raise ParsingError(f"Unknown source type [{kind}] for [{name}]")
    allowed = (
        _SOURCE_OPTIONS
        | {
            "histogram": {"interval"},
            "date_histogram": {"calendar_interval", "fixed_interval", "time_zone", "offset"},
            "terms": set(),
        }[kind]
    )
    opts = Options(kind, name, body, allowed)
    families = ANY if kind == "terms" else NUMBERS
    field = resolve_field(kind, opts, pctx, families)
    direction = opts.get("order", "asc")
    if direction not in ("asc", "desc"):
        raise field_failed(kind, "order", IllegalArgument(f"Unknown order direction [{direction}]"))
    asc = direction == "asc"
    missing_order = opts.get("missing_order", "default")
    if missing_order not in ("first", "last", "default"):
        raise field_failed(kind, "missing_order", IllegalArgument(f"Unknown MissingOrder [{missing_order}]"))
    missing_bucket = opts.boolean("missing_bucket", False)
    missing_first = asc if missing_order == "default" else missing_order == "first"
    pattern = opts.get("format")
    zone = None
    if kind == "date_histogram" and opts.get("time_zone") is not None:
        try:
            zone = Zone(str(opts.get("time_zone")))
        except IllegalArgument as err:
            raise field_failed(kind, "time_zone", err) from None
    fmt = field.value_format(pattern, zone, raw_dates=True)
    source = Source(name, kind, field, fmt, asc, missing_bucket, missing_first)
    if kind == "histogram":
        interval = opts.number("interval")
        if interval is None or interval <= 0:
            raise field_failed(
                kind,
                "interval",
                IllegalArgument(f"[interval] must be greater than 0 for [histogram] source [{name}]"),
            )
        source.interval = interval
    elif kind == "date_histogram":
        from leafsearch.search.aggs.histogram import _date_offset, _interval

        unit, fixed = _interval(opts)
        source.rounding = DateRounding(unit, fixed, zone, _date_offset(opts.get("offset", 0)))
    return source


def parse_composite(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
    return CompositeAgg(
        name, meta, subs, Options("composite", name, body, {"sources", "size", "after"}), pctx
    )
