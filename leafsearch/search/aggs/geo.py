"""Aggregations over `geo_point` fields: `geo_bounds`, `geo_centroid`, `geo_distance` (ranges of
distance from an origin), `geohash_grid` and `geotile_grid`.

Each collects from the segment's packed points of the documents it is given (index/geo.py),
decoded in one pass: the metrics keep per-parent-bucket extremes and sums (`np.minimum.at` and
`np.bincount`, no loop per document), the bucket aggregations count cell or range codes into the
shared bucket rows (grouping.py), so they nest under other aggregations and take sub-aggregations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.errors import ElasticError, IllegalArgument
from leafsearch.index import geo
from leafsearch.index.columns import NumericColumn
from leafsearch.request.geo_dsl import box_corners
from leafsearch.search.aggs.base import (
    Agg,
    Options,
    ParseContext,
    SegmentContext,
    field_failed,
    remap,
    render_subs,
    shard_failure,
    unknown_field,
)
from leafsearch.search.aggs.grouping import Buckets, collect_buckets, dedupe_pairs, merge_buckets
from leafsearch.search.aggs.limits import consume_buckets
from leafsearch.search.aggs.values import GEO, resolve_field

_GEO = frozenset({GEO})


def _points(seg: SegmentContext, field: Any, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(index into `docs` of each point, latitudes, longitudes) of the documents' points."""
    col = seg.segment.column(field.path) if field.ftype is not None else None
    if not isinstance(col, NumericColumn):
        empty = np.empty(0, np.float64)
        return np.empty(0, np.int64), empty, empty
    counts, packed = col.doc_values.values_of(docs)
    idx = np.repeat(np.arange(len(docs), dtype=np.int64), counts)
    return (idx, *geo.decode(packed))


# -- geo_bounds ----------------------------------------------------------------------------------


@dataclass
class _Bounds:
    """Per parent bucket: top, bottom, and the extremes of positive and negative longitudes."""

    top: np.ndarray
    bottom: np.ndarray
    pos_left: np.ndarray
    pos_right: np.ndarray
    neg_left: np.ndarray
    neg_right: np.ndarray


_BOUND_INIT = (-math.inf, math.inf, math.inf, -math.inf, math.inf, -math.inf)
_BOUND_UFUNCS = (np.maximum, np.minimum, np.minimum, np.maximum, np.minimum, np.maximum)


class GeoBoundsAgg(Agg):
    type_name = "geo_bounds"

    def __init__(
        self, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        self.field = resolve_field(self.type_name, opts, pctx, _GEO)
        self.wrap = opts.boolean("wrap_longitude", True)

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> _Bounds:
        idx, lat, lon = _points(seg, self.field, docs)
        g = groups[idx]
        arrays = [np.full(n_groups, init) for init in _BOUND_INIT]
        pos = lon >= 0
        sources = (lat, lat, np.where(pos, lon, math.inf), np.where(pos, lon, -math.inf))
        sources += (np.where(pos, math.inf, lon), np.where(pos, -math.inf, lon))
        for arr, ufunc, values in zip(arrays, _BOUND_UFUNCS, sources, strict=True):
            ufunc.at(arr, g, values)
        return _Bounds(*arrays)

    def merge(self, parts: list[_Bounds], maps: list[np.ndarray], n_out: int) -> _Bounds:
        arrays = [np.full(n_out, init) for init in _BOUND_INIT]
        for part, m in zip(parts, maps, strict=True):
            groups, (keep,) = remap([m], [np.arange(len(part.top))])
            for i, ufunc in enumerate(_BOUND_UFUNCS):
                ufunc.at(arrays[i], groups, getattr(part, _BOUND_FIELDS[i])[keep])
        return _Bounds(*arrays)

    def render(self, part: _Bounds, group: int | None) -> dict:
        if group is None or math.isinf(part.top[group]):
            return {}
        top, bottom = part.top[group], part.bottom[group]
        pos_left, pos_right = part.pos_left[group], part.pos_right[group]
        neg_left, neg_right = part.neg_left[group], part.neg_right[group]
        if math.isinf(pos_left):
            left, right = neg_left, neg_right
        elif math.isinf(neg_left):
            left, right = pos_left, pos_right
        elif self.wrap and (180 - pos_left) - (-180 - neg_right) < pos_right - neg_left:
            left, right = pos_left, neg_right  # across the antimeridian, narrower
        else:
            left, right = neg_left, pos_right
        return {
            "bounds": {
                "top_left": {"lat": float(top), "lon": float(left)},
                "bottom_right": {"lat": float(bottom), "lon": float(right)},
            }
        }


_BOUND_FIELDS = ("top", "bottom", "pos_left", "pos_right", "neg_left", "neg_right")


# -- geo_centroid --------------------------------------------------------------------------------


@dataclass
class _Sums:
    lat: np.ndarray
    lon: np.ndarray
    count: np.ndarray


class GeoCentroidAgg(Agg):
    type_name = "geo_centroid"

    def __init__(
        self, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        self.field = resolve_field(self.type_name, opts, pctx, _GEO)

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> _Sums:
        idx, lat, lon = _points(seg, self.field, docs)
        g = groups[idx]
        return _Sums(
            np.bincount(g, weights=lat, minlength=n_groups),
            np.bincount(g, weights=lon, minlength=n_groups),
            np.bincount(g, minlength=n_groups).astype(np.int64),
        )

    def merge(self, parts: list[_Sums], maps: list[np.ndarray], n_out: int) -> _Sums:
        out = _Sums(np.zeros(n_out), np.zeros(n_out), np.zeros(n_out, np.int64))
        for part, m in zip(parts, maps, strict=True):
            groups, (keep,) = remap([m], [np.arange(len(part.count))])
            np.add.at(out.lat, groups, part.lat[keep])
            np.add.at(out.lon, groups, part.lon[keep])
            np.add.at(out.count, groups, part.count[keep])
        return out

    def render(self, part: _Sums, group: int | None) -> dict:
        count = 0 if group is None else int(part.count[group])
        if not count:
            return {"count": 0}
        location = {"lat": float(part.lat[group] / count), "lon": float(part.lon[group] / count)}
        return {"location": location, "count": count}


# -- geo_distance --------------------------------------------------------------------------------

_DISTANCE_OPTIONS = {"field", "origin", "point", "center", "unit", "distance_type", "ranges", "keyed"}


def _bound_text(v: float) -> str:
    """A range bound in a bucket key, as Java prints a double (`*` unbounded)."""
    return "*" if math.isinf(v) else repr(float(v))


class GeoDistanceAgg(Agg):
    type_name = "geo_distance"

    def __init__(
        self, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        self.field = resolve_field(self.type_name, opts, pctx, _GEO)
        origin = next((opts.get(k) for k in ("origin", "point", "center") if k in opts), None)
        if origin is None:
            raise IllegalArgument(f"Missing [origin] in geo_distance aggregator [{name}]")
        try:
            self.lat, self.lon = geo.parse_point(origin)
            self.unit = geo.unit_meters(str(opts.get("unit", "m")))
        except geo.GeoError as e:
            raise field_failed(self.type_name, "origin", IllegalArgument(str(e))) from None
        self.distance_type = str(opts.get("distance_type", "arc")).lower()
        if self.distance_type not in ("arc", "plane"):
            raise IllegalArgument(f"No geo distance for [{self.distance_type}]")
        self.keyed = opts.boolean("keyed", False)
        specs = opts.get("ranges")
        if not specs:
            raise shard_failure(IllegalArgument(f"No [ranges] specified for the [{name}] aggregation"))
        if not isinstance(specs, list):
            raise field_failed(self.type_name, "ranges", IllegalArgument("[ranges] must be an array"))
        self.ranges = sorted((self._range(spec) for spec in specs), key=lambda r: (r[0], r[1]))

    def _range(self, spec: Any) -> tuple[float, float, str | None]:
        if not isinstance(spec, dict):
            raise field_failed(self.type_name, "ranges", IllegalArgument("[ranges] entries must be objects"))
        bounds = []
        for key in spec:
            if key not in ("from", "to", "key"):
                raise unknown_field("range", key)
        for key, default in (("from", -math.inf), ("to", math.inf)):
            value = spec.get(key)
            if value is None:
                bounds.append(default)
                continue
            try:
                bounds.append(float(value))
            except (TypeError, ValueError):
                raise field_failed(
                    self.type_name, "ranges", IllegalArgument(f"[{key}] must be a number")
                ) from None
        key = spec.get("key")
        return bounds[0], bounds[1], None if key is None else str(key)

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Buckets:
        idx, lat, lon = _points(seg, self.field, docs)
        values = geo.distance(self.distance_type, self.lat, self.lon, lat, lon) / self.unit
        pair_idx, codes = [], []
        for i, (lo, hi, _) in enumerate(self.ranges):
            inside = np.flatnonzero((values >= lo) & (values < hi))
            pair_idx.append(idx[inside])
            codes.append(np.full(len(inside), i, dtype=np.int64))
        idx, code = dedupe_pairs(np.concatenate(pair_idx), np.concatenate(codes), len(self.ranges))
        row_group, row_code, count, subs = collect_buckets(
            self, seg, docs, groups, n_groups, idx, code, len(self.ranges)
        )
        return Buckets(row_group, [row_code], count, subs)

    def merge(self, parts: list[Buckets], maps: list[np.ndarray], n_out: int) -> Buckets:
        return merge_buckets(self, parts, maps, n_out)

    def render(self, part: Buckets, group: int | None) -> dict:
        rows = part.rows_of(group)
        row_of = dict(zip(part.keys[0][rows].tolist(), rows.tolist(), strict=True))
        consume_buckets(len(self.ranges))
        buckets = []
        for i, (lo, hi, key) in enumerate(self.ranges):
            row = row_of.get(i)
            if key is None:
                key = f"{_bound_text(lo)}-{_bound_text(hi)}"
            bucket: dict[str, Any] = {"key": key}
            if not math.isinf(lo):
                bucket["from"] = lo
            if not math.isinf(hi):
                bucket["to"] = hi
            bucket["doc_count"] = int(part.count[row]) if row is not None else 0
            bucket.update(render_subs(self.subs, part.subs, row))
            buckets.append(bucket)
        if self.keyed:
            return {"buckets": {b.pop("key"): b for b in buckets}}
        return {"buckets": buckets}


# -- geohash_grid and geotile_grid ---------------------------------------------------------------

_GRID_OPTIONS = {"field", "precision", "size", "shard_size", "bounds"}


class GeoGridAgg(Agg):
    """Buckets of grid cells, most documents first (ties by key), at most `size` of them."""

    def __init__(
        self, type_name: str, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        self.type_name = type_name
        self.field = resolve_field(type_name, opts, pctx, _GEO)
        hash_grid = type_name == "geohash_grid"
        lo, hi = (1, geo.MAX_GEOHASH_PRECISION) if hash_grid else (0, geo.MAX_GEOTILE_PRECISION)
        self.precision = self._precision(opts, hash_grid)
        if not lo <= self.precision <= hi:
            what = "geohash aggregation precision" if hash_grid else "geotile_grid precision"
            message = f"Invalid {what} of {self.precision}. Must be between {lo} and {hi}."
            raise field_failed(type_name, "precision", IllegalArgument(message))
        self.size = opts.positive("size", 10_000)
        opts.positive("shard_size", max(self.size, 1))  # checked; every shard counts every cell
        self.bounds = None
        if "bounds" in opts:
            try:
                self.bounds = box_corners(type_name, "bounds", opts.get("bounds"))
            except ElasticError as e:
                raise field_failed(type_name, "bounds", e) from None

    def _precision(self, opts: Options, hash_grid: bool) -> int:
        """A number, or for a geohash grid a distance its cells may not exceed (`"10km"`)."""
        value = opts.get("precision")
        if hash_grid and isinstance(value, str) and not value.strip().lstrip("+-").isdigit():
            try:
                return geo.geohash_levels(geo.parse_distance(value))
            except geo.GeoError as e:
                raise field_failed(self.type_name, "precision", IllegalArgument(str(e))) from None
        return opts.integer("precision", 5 if hash_grid else 7)

    def _cells(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        if self.type_name == "geohash_grid":
            return geo.geohash_cells(lat, lon, self.precision)
        x, y = geo.geotile_cells(lat, lon, self.precision)
        return (x << 32) | y

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Buckets:
        idx, lat, lon = _points(seg, self.field, docs)
        if self.bounds is not None:
            top, left, bottom, right = self.bounds
            in_lon = (lon >= left) & (lon <= right) if left <= right else (lon >= left) | (lon <= right)
            keep = np.flatnonzero((lat >= bottom) & (lat <= top) & in_lon)
            idx, lat, lon = idx[keep], lat[keep], lon[keep]
        cells = self._cells(lat, lon)
        uniq, code = np.unique(cells, return_inverse=True)
        idx, code = dedupe_pairs(idx, code.reshape(-1).astype(np.int64), len(uniq))
        row_group, row_code, count, subs = collect_buckets(
            self, seg, docs, groups, n_groups, idx, code, len(uniq)
        )
        return Buckets(row_group, [uniq[row_code] if len(uniq) else row_code], count, subs)

    def merge(self, parts: list[Buckets], maps: list[np.ndarray], n_out: int) -> Buckets:
        return merge_buckets(self, parts, maps, n_out)

    def _key(self, cell: int) -> str:
        if self.type_name == "geohash_grid":
            return geo.geohash_text(cell, self.precision)
        return f"{self.precision}/{cell >> 32}/{cell & 0xFFFFFFFF}"

    def render(self, part: Buckets, group: int | None) -> dict:
        """Most documents first, ties by cell (Elasticsearch's hash order: a geohash's as its
        text, a tile's by x then y); keys spelled only for the `size` kept. O(cells log cells)."""
        rows = part.rows_of(group)
        counts = part.count[rows]
        kept = rows[np.lexsort((part.keys[0][rows], -counts))[: self.size]]
        consume_buckets(len(kept))
        buckets = []
        for row in kept.tolist():
            bucket: dict[str, Any] = {
                "key": self._key(int(part.keys[0][row])),
                "doc_count": int(part.count[row]),
            }
            bucket.update(render_subs(self.subs, part.subs, row))
            buckets.append(bucket)
        return {"buckets": buckets}


def _parser(cls: type, allowed: set[str]):
    def parse(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
        return cls(name, meta, subs, Options(cls.type_name, name, body, allowed), pctx)

    return parse


def _grid_parser(type_name: str):
    def parse(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
        return GeoGridAgg(type_name, name, meta, subs, Options(type_name, name, body, _GRID_OPTIONS), pctx)

    return parse


PARSERS = {
    "geo_bounds": _parser(GeoBoundsAgg, {"field", "wrap_longitude"}),
    "geo_centroid": _parser(GeoCentroidAgg, {"field"}),
    "geo_distance": _parser(GeoDistanceAgg, _DISTANCE_OPTIONS),
    "geohash_grid": _grid_parser("geohash_grid"),
    "geotile_grid": _grid_parser("geotile_grid"),
}
#: Metrics: they take no sub-aggregations.
LEAVES = ("geo_bounds", "geo_centroid")
