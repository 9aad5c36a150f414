"""Metric aggregations: min, max, sum, avg, value_count, stats, extended_stats, cardinality.

Partials are arrays over the parent buckets (count, sum, min, max, sum of squares), so one
`bincount` / `minimum.at` per segment serves every bucket of the parent at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
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
    invalid_order_path,
    remap,
)
from leafsearch.search.aggs.grouping import concat, unify
from leafsearch.search.aggs.values import (
    ANY,
    GEO,
    KEYWORD,
    NUMBERS,
    FieldRef,
    ValueFormat,
    keyword_values,
    numeric_values,
    resolve_field,
)

_NEEDS = {
    "min": {"min"},
    "max": {"max"},
    "sum": {"sum"},
    "avg": {"sum"},
    "value_count": set(),
    "stats": {"sum", "min", "max"},
    "extended_stats": {"sum", "min", "max", "sumsq"},
}
_STATS_FIELDS = ("count", "min", "max", "avg", "sum")
_EXTENDED_FIELDS = (
    "sum_of_squares",
    "variance",
    "variance_population",
    "variance_sampling",
    "std_deviation",
    "std_deviation_population",
    "std_deviation_sampling",
)


@dataclass
class Moments:
    """Per parent bucket: value count, sum, min, max and sum of squares (those the metric needs)."""

    count: np.ndarray
    sum: np.ndarray | None = None
    min: np.ndarray | None = None
    max: np.ndarray | None = None
    sumsq: np.ndarray | None = None


class StatsAgg(Agg):
    """The numeric metrics; which moments are kept depends on the metric."""

    def __init__(
        self, type_name: str, name: str, meta: dict | None, opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, [])
        self.type_name = type_name
        families = ANY | {GEO} if type_name == "value_count" else NUMBERS
        self.field: FieldRef = resolve_field(type_name, opts, pctx, families)
        self.format: ValueFormat = self.field.value_format(opts.get("format"))
        self.needs = _NEEDS[type_name]
        self.missing = opts.missing(self.format, pctx.now_millis, as_text=self.field.family == KEYWORD)
        self.sigma = opts.number("sigma", 2.0) if type_name == "extended_stats" else 2.0
        if self.sigma is not None and self.sigma < 0:
            raise field_failed(
                type_name,
                "sigma",
                IllegalArgument(
                    f"[sigma] must be greater than or equal to 0. Found [{self.sigma}] in [{name}]"
                ),
            )

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Moments:
        if self.field.family == KEYWORD:
            idx = keyword_values(seg, self.field, docs, self.missing)[0]
            values = np.empty(0)
        else:
            idx, values, _ = numeric_values(seg, self.field, docs, self.missing)
        g = groups[idx]
        out = Moments(np.bincount(g, minlength=n_groups).astype(np.int64))
        if "sum" in self.needs:
            out.sum = np.bincount(g, weights=values.astype(np.float64), minlength=n_groups)
        if "sumsq" in self.needs:
            out.sumsq = np.bincount(g, weights=np.square(values.astype(np.float64)), minlength=n_groups)
        if "min" in self.needs:
            out.min = np.full(n_groups, np.inf)
            np.minimum.at(out.min, g, values.astype(np.float64))
        if "max" in self.needs:
            out.max = np.full(n_groups, -np.inf)
            np.maximum.at(out.max, g, values.astype(np.float64))
        return out

    def merge(self, parts: list[Moments], maps: list[np.ndarray], n_out: int) -> Moments:
        groups, keeps = remap(maps, [np.arange(len(p.count)) for p in parts])

        def gathered(attr: str) -> np.ndarray:
            return (
                concat([getattr(p, attr)[k] for p, k in zip(parts, keeps, strict=True)])
                if parts
                else np.empty(0)
            )

        out = Moments(np.bincount(groups, weights=gathered("count"), minlength=n_out).astype(np.int64))
        for attr in ("sum", "sumsq"):
            if attr in self.needs:
                setattr(out, attr, np.bincount(groups, weights=gathered(attr), minlength=n_out))
        if "min" in self.needs:
            out.min = np.full(n_out, np.inf)
            np.minimum.at(out.min, groups, gathered("min"))
        if "max" in self.needs:
            out.max = np.full(n_out, -np.inf)
            np.maximum.at(out.max, groups, gathered("max"))
        return out

    def _stats(self, part: Moments, group: int | None) -> dict[str, Any]:
        count = 0 if group is None else int(part.count[group])
        stats: dict[str, Any] = {"count": count}
        if count:
            total = float(part.sum[group]) if part.sum is not None else 0.0
            stats.update(sum=total, avg=total / count)
            if part.min is not None:
                stats["min"] = float(part.min[group])
            if part.max is not None:
                stats["max"] = float(part.max[group])
            if part.sumsq is not None:
                sumsq = float(part.sumsq[group])
                spread = sumsq - total * total / count
                population = max(spread / count, 0.0)
                sampling = max(spread / (count - 1), 0.0) if count > 1 else math.nan
                stats.update(
                    sum_of_squares=sumsq,
                    variance=population,
                    variance_population=population,
                    variance_sampling=sampling,
                    std_deviation=math.sqrt(population),
                    std_deviation_population=math.sqrt(population),
                    std_deviation_sampling=math.sqrt(sampling),
                )
        return stats

    def render(self, part: Moments, group: int | None) -> dict:
        stats = self._stats(part, group)
        count = stats["count"]
        if self.type_name == "value_count":
            return {"value": count}
        if self.type_name in ("min", "max", "avg"):
            value = stats.get(self.type_name)
            return self._value(value)
        if self.type_name == "sum":
            return self._value(stats.get("sum", 0.0))
        out: dict[str, Any] = {"count": count}
        for key in _STATS_FIELDS[1:]:
            out[key] = stats.get(key, 0.0 if key == "sum" else None)
        if count and not self.format.raw:
            for key in _STATS_FIELDS[1:]:
                out[f"{key}_as_string"] = self.format.format(stats[key])
        if self.type_name == "extended_stats":
            self._extended(out, stats)
        return out

    def _extended(self, out: dict, stats: dict) -> None:
        for key in _EXTENDED_FIELDS:
            out[key] = _finite(stats.get(key))
        bounds: dict[str, Any] = {}
        for suffix, deviation in (
            ("", "std_deviation"),
            ("_population", "std_deviation_population"),
            ("_sampling", "std_deviation_sampling"),
        ):
            if stats["count"]:
                avg, dev = stats["avg"], stats[deviation]
                bounds[f"upper{suffix}"] = _finite(avg + self.sigma * dev)
                bounds[f"lower{suffix}"] = _finite(avg - self.sigma * dev)
            else:
                bounds[f"upper{suffix}"] = bounds[f"lower{suffix}"] = None
        out["std_deviation_bounds"] = bounds
        if stats["count"] and not self.format.raw:
            for key in _EXTENDED_FIELDS:
                if out[key] is not None:
                    out[f"{key}_as_string"] = self.format.format(out[key])
            out["std_deviation_bounds_as_string"] = {
                k: self.format.format(v) for k, v in bounds.items() if v is not None
            }

    def _value(self, value: float | None) -> dict:
        out: dict[str, Any] = {"value": value}
        if value is not None and not self.format.raw:
            out["value_as_string"] = self.format.format(value)
        return out

    def sort_values(self, part: Moments, path: list[str]) -> np.ndarray:
        n = len(part.count)
        if self.type_name in ("stats", "extended_stats"):
            if len(path) != 1:
                raise invalid_order_path(
                    [self.name, *path],
                    "When ordering on a multi-value metrics aggregation a metric name must be specified.",
                )
            metric = path[0]
        else:
            if path:
                raise invalid_order_path(
                    [self.name, *path],
                    f"Unknown metric name [{path[0]}] on single-value metrics aggregation [{self.name}]",
                )
            metric = self.type_name
        if metric == "value_count" or metric == "count":
            return part.count.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            if metric == "avg":
                return part.sum / part.count
            if metric == "sum":
                return part.sum
            if metric in ("min", "max"):
                return getattr(part, metric)
            stats = [self._stats(part, g) for g in range(n)]
        if stats and metric in stats[0] or metric in _EXTENDED_FIELDS:
            return np.array([s.get(metric, math.nan) for s in stats], dtype=np.float64)
        raise invalid_order_path(
            [self.name, *path],
            f"Unknown metric name [{metric}] on multi-value metrics aggregation [{self.name}]",
        )


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


@dataclass
class Distinct:
    """Distinct (parent bucket, value) pairs: cardinality is exact."""

    group: np.ndarray
    values: np.ndarray
    n_groups: int

    @cached_property
    def counts(self) -> np.ndarray:
        return np.bincount(self.group, minlength=self.n_groups)


class CardinalityAgg(Agg):
    type_name = "cardinality"

    def __init__(self, name: str, meta: dict | None, opts: Options, pctx: ParseContext) -> None:
        super().__init__(name, meta, [])
        self.field = resolve_field("cardinality", opts, pctx, ANY | {GEO})
        threshold = opts.get("precision_threshold")
        if threshold is not None and opts.integer("precision_threshold", 3000) < 0:
            raise field_failed(
                "cardinality",
                "precision_threshold",
                IllegalArgument(
                    "[precisionThreshold] must be greater than or equal to 0. "
                    f"Found [{threshold}] in [{name}]"
                ),
            )
        # An unmapped field counts its `missing` value as a keyword (Elasticsearch's default
        # values source for an unmapped field is bytes).
        self.as_terms = self.field.family == KEYWORD or (self.field.family is None and "missing" in opts.body)
        self.missing = opts.missing(self.field.value_format(), pctx.now_millis, as_text=self.as_terms)

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Distinct:
        if self.as_terms:
            idx, codes, terms, _ = keyword_values(seg, self.field, docs, self.missing)
            cells = np.unique(groups[idx] * max(len(terms), 1) + codes)
            n = max(len(terms), 1)
            return Distinct(cells // n, terms[cells % n], n_groups)
        idx, values, _ = numeric_values(seg, self.field, docs, self.missing)
        if not len(idx):
            return Distinct(np.empty(0, np.int64), values, n_groups)
        first, _ = unify([groups[idx], values])
        return Distinct(groups[idx][first], values[first], n_groups)

    def merge(self, parts: list[Distinct], maps: list[np.ndarray], n_out: int) -> Distinct:
        groups, keeps = remap(maps, [p.group for p in parts])
        values = concat([p.values[k] for p, k in zip(parts, keeps, strict=True)]) if parts else np.empty(0)
        if not len(groups):
            return Distinct(groups, values, n_out)
        first, _ = unify([groups, values])
        return Distinct(groups[first], values[first], n_out)

    def render(self, part: Distinct, group: int | None) -> dict:
        if group is None:
            return {"value": 0}
        return {"value": int(part.counts[group])}

    def sort_values(self, part: Distinct, path: list[str]) -> np.ndarray:
        if path:
            raise invalid_order_path(
                [self.name, *path],
                f"Unknown metric name [{path[0]}] on single-value metrics aggregation [{self.name}]",
            )
        return part.counts.astype(np.float64)


def parse_stats(type_name: str):
    allowed = COMMON_VALUE_OPTIONS | ({"sigma"} if type_name == "extended_stats" else set())

    def parse(name: str, body: Any, meta: dict | None, subs: list, pctx: ParseContext) -> Agg:
        return StatsAgg(type_name, name, meta, Options(type_name, name, body, allowed), pctx)

    return parse


def parse_cardinality(name: str, body: Any, meta: dict | None, subs: list, pctx: ParseContext) -> Agg:
    opts = Options(
        "cardinality", name, body, COMMON_VALUE_OPTIONS | {"precision_threshold", "execution_hint"}
    )
    return CardinalityAgg(name, meta, opts, pctx)
