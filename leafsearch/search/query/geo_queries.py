"""Planning and running the geo queries on `geo_point` fields (request/geo_dsl.py).

A segment's points are decoded once (`geo.points`: the doc of each value, its latitude and
longitude) and ordered by latitude once (`geo.latitude_band`); a query reads the values in the
band of latitudes it can reach (a binary search) and tests only those, vectorized: a distance
from the center, or the shape test of index/geo_shapes.py.
Multi-valued documents match when any point does (`within`: when all do; `disjoint`: when none
does), as Lucene's point queries match. Constant score, as in Elasticsearch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from leafsearch.index import geo, geo_shapes
from leafsearch.index.columns import NumericColumn
from leafsearch.index.searcher import SegmentView
from leafsearch.request.geo_dsl import GeoArea, GeoDistance
from leafsearch.search.query.context import QueryContext, shard_error
from leafsearch.search.query.fields import field_type, searchable
from leafsearch.search.query.masks import Result, constant, empty, mask_of
from leafsearch.search.query.plans import NoDocs


@dataclass(frozen=True, slots=True)
class GeoPlan:
    """A geo query checked against the shard's mapping, its points coerced if it asked."""

    query: GeoDistance | GeoArea
    boost: float = 1.0


def plan_geo(q: GeoDistance | GeoArea, ctx: QueryContext) -> GeoPlan | NoDocs:
    name = q.name if isinstance(q, GeoArea) else "geo_distance"
    ft = field_type(ctx, q.field)
    if ft is None:
        if q.ignore_unmapped:
            return NoDocs()
        what = "type for field" if name == "geo_shape" else "geo field"
        raise shard_error(ctx, f"failed to find {what} [{q.field}]")
    if ft.type != "geo_point":
        raise shard_error(ctx, f"Field [{q.field}] is of unsupported type [{ft.type}] for [{name}] query")
    searchable(ctx, ft, q.field)
    corners = ((q.lat, q.lon),) if isinstance(q, GeoDistance) else q.corners
    if q.validation_method == "STRICT":
        for lat, lon in corners:
            if not -90.0 <= lat <= 90.0:
                raise shard_error(ctx, f"illegal latitude value [{lat!r}] for [{name}]")
            if not -180.0 <= lon <= 180.0:
                raise shard_error(ctx, f"illegal longitude value [{lon!r}] for [{name}]")
    elif isinstance(q, GeoDistance):
        lat, lon = geo.normalize(q.lat, q.lon)
        q = GeoDistance(q.field, lat, lon, q.distance, q.distance_type, q.validation_method, False, q.boost)
    return GeoPlan(q, q.boost)


def exec_geo(plan: GeoPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    q = plan.query
    col = view.segment.column(q.field)
    if not isinstance(col, NumericColumn):
        return empty(view, scoring)
    dv = col.doc_values
    docs, lat, lon = geo.points(dv)
    n = view.max_doc
    if isinstance(q, GeoDistance):
        reach = math.degrees(q.distance / geo.EARTH_RADIUS) * 1.01 + 1e-9
        cand = geo.latitude_band(dv, q.lat - reach, q.lat + reach)
        hit = geo.distance(q.distance_type, q.lat, q.lon, lat[cand], lon[cand]) <= q.distance
        return constant(mask_of(docs[cand[hit]], n), scoring, boost * plan.boost)
    if q.relation == "contains":
        mask = _contains(q, docs, lat, lon, n)
    else:
        cand = geo.latitude_band(dv, *geo_shapes.latitudes(q.shape))
        inside = cand[geo_shapes.inside(q.shape, lat[cand], lon[cand])]
        mask = mask_of(docs[inside], n)
        if q.relation == "within":
            outside = np.ones(len(docs), dtype=bool)
            outside[inside] = False
            mask &= ~mask_of(docs[outside], n)
        elif q.relation == "disjoint":
            mask = dv.present & ~mask
    return constant(mask, scoring, boost * plan.boost)


def _contains(q: GeoArea, docs: np.ndarray, lat: np.ndarray, lon: np.ndarray, n: int) -> np.ndarray:
    """Points contain a shape made of points they all hold; never an area."""
    if q.shape.polygons or q.shape.circles or not q.shape.points:
        return np.zeros(n, dtype=bool)
    mask = np.ones(n, dtype=bool)
    for lon_p, lat_p in q.shape.points:
        mask &= mask_of(docs[geo_shapes.inside(geo_shapes.Shape(points=((lon_p, lat_p),)), lat, lon)], n)
    return mask
