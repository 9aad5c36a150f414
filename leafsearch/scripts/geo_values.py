"""`doc['field']` of a `geo_point` field in a script, as Elasticsearch's Painless has it
(`ScriptDocValues.GeoPoints`): the points (`GeoPoint`s with `lat`/`lon`), `lat`/`lon`/`lats`/`lons`,
the distances in meters from the first point (`arcDistance`, `planeDistance`, `geohashDistance`,
each with a `...WithDefault` form for a document without a point), and the document's centroid,
bounding box and label position."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leafsearch.index import geo
from leafsearch.scripts.runtime import MISSING, DocValues, ScriptError, ScriptObject, java_str


def _fail(source: str, offset: int, cause: str, reason: str) -> ScriptError:
    return ScriptError("runtime error", source, offset, cause, reason)


@dataclass(frozen=True, slots=True)
class GeoPoint(ScriptObject):
    """`org.elasticsearch.common.geo.GeoPoint` (JSON: `{"lat": .., "lon": ..}`, as Elasticsearch
    renders one)."""

    java_class: ClassVar[str] = "org.elasticsearch.common.geo.GeoPoint"
    lat: float
    lon: float

    def __str__(self) -> str:  # Java's GeoPoint.toString
        return f"{java_str(self.lat)}, {java_str(self.lon)}"

    def member(self, name: str, source: str, offset: int) -> Any:
        return {"lat": self.lat, "lon": self.lon}.get(name, MISSING)

    def method(self, name: str, arguments: list[Any], source: str, offset: int) -> Any:
        if arguments:
            return MISSING
        return {"getLat": self.lat, "getLon": self.lon}.get(name, MISSING)


@dataclass(frozen=True, slots=True)
class GeoBoundingBox(ScriptObject):
    """`org.elasticsearch.common.geo.GeoBoundingBox`: `topLeft()` and `bottomRight()`."""

    java_class: ClassVar[str] = "org.elasticsearch.common.geo.GeoBoundingBox"
    top_left: GeoPoint
    bottom_right: GeoPoint

    def method(self, name: str, arguments: list[Any], source: str, offset: int) -> Any:
        if arguments:
            return MISSING
        return {"topLeft": self.top_left, "bottomRight": self.bottom_right}.get(name, MISSING)


class GeoPoints(DocValues, ScriptObject):
    """A document's points of one field, sorted as their doc values are (by Lucene's packed
    long), as `ScriptDocValues.GeoPoints`."""

    __slots__ = ()
    java_class: ClassVar[str] = "org.elasticsearch.index.fielddata.ScriptDocValues$GeoPoints"

    _GETTERS: ClassVar[dict[str, str]] = {
        "lat": "getLat", "lon": "getLon", "lats": "getLats", "lons": "getLons", "centroid": "getCentroid",
        "boundingBox": "getBoundingBox", "labelPosition": "getLabelPosition",
        "dimensionalType": "getDimensionalType", "mercatorWidth": "getMercatorWidth",
        "mercatorHeight": "getMercatorHeight",
    }  # fmt: skip

    def member(self, name: str, source: str, offset: int) -> Any:
        getter = self._GETTERS.get(name)
        return MISSING if getter is None else self.method(getter, [], source, offset)

    def method(self, name: str, arguments: list[Any], source: str, offset: int) -> Any:
        points: list[GeoPoint] = self.values
        if not arguments:
            if name in ("getLat", "getLon"):
                point = self.first(source, offset)
                return point.lat if name == "getLat" else point.lon
            if name in ("getLats", "getLons"):
                return [p.lat if name == "getLats" else p.lon for p in points]
            if name == "getDimensionalType":
                return 0 if points else -1
            if name in ("getMercatorWidth", "getMercatorHeight"):
                return 0.0
            if name in ("getCentroid", "getBoundingBox", "getLabelPosition"):
                return _shape(points, name) if points else None
            return MISSING
        if name in ("arcDistance", "planeDistance") and len(arguments) == 2:
            return self._distance(name, arguments[0], arguments[1], source, offset)
        if name in ("arcDistanceWithDefault", "planeDistanceWithDefault") and len(arguments) == 3:
            if not points:
                return _double(arguments[2], source, offset)
            kind = name.removesuffix("WithDefault")
            return self._distance(kind, arguments[0], arguments[1], source, offset)
        if name == "geohashDistance" and len(arguments) == 1:
            return self._geohash_distance(arguments[0], source, offset)
        if name == "geohashDistanceWithDefault" and len(arguments) == 2:
            if not points:
                return _double(arguments[1], source, offset)
            return self._geohash_distance(arguments[0], source, offset)
        return MISSING

    def _distance(self, kind: str, lat: Any, lon: Any, source: str, offset: int) -> float:
        lat, lon = _double(lat, source, offset), _double(lon, source, offset)
        point = self.first(source, offset)
        found = geo.distance("plane" if kind == "planeDistance" else "arc", lat, lon,
                             np.array([point.lat]), np.array([point.lon]))  # fmt: skip
        return float(found[0])

    def _geohash_distance(self, geohash: Any, source: str, offset: int) -> float:
        if type(geohash) is not str:
            raise _fail(source, offset, "class_cast_exception", "Cannot cast to java.lang.String")
        point = self.first(source, offset)
        try:
            # the cell's lower left corner, where Elasticsearch's Geohash decodes it
            lat, _, lon, _ = geo.geohash_bounds(geohash)
        except geo.GeoError as e:
            raise _fail(source, offset, "illegal_argument_exception", str(e)) from None
        return float(geo.arc_distance(lat, lon, np.array([point.lat]), np.array([point.lon]))[0])


def new_point(arguments: list[Any], source: str, offset: int) -> GeoPoint:
    """`new GeoPoint()` (0, 0) or `new GeoPoint(lat, lon)`."""
    if not arguments:
        return GeoPoint(0.0, 0.0)
    return GeoPoint(_double(arguments[0], source, offset), _double(arguments[1], source, offset))


def _double(value: Any, source: str, offset: int) -> float:
    if type(value) not in (int, float):
        name = "null" if value is None else type(value).__name__
        raise _fail(source, offset, "class_cast_exception", f"Cannot cast {name} to double")
    return float(value)


def _shape(points: list[GeoPoint], name: str) -> Any:
    """The centroid, bounding box or label position of a document's points (PointDocValuesField):
    the mean point, the box of their extremes, and the point nearest the center of the box of
    the points before it, kept as each point is added."""
    if len(points) == 1:
        only = points[0]
        return GeoBoundingBox(only, only) if name == "getBoundingBox" else only
    if name == "getCentroid":
        return GeoPoint(sum(p.lat for p in points) / len(points), sum(p.lon for p in points) / len(points))
    lats, lons = [p.lat for p in points], [p.lon for p in points]
    if name == "getBoundingBox":
        return GeoBoundingBox(GeoPoint(max(lats), min(lons)), GeoPoint(min(lats), max(lons)))
    label = 0
    for i in range(1, len(points)):
        center_lat = (min(lats[: i + 1]) + max(lats[: i + 1])) / 2
        center_lon = (min(lons[: i + 1]) + max(lons[: i + 1])) / 2
        near = geo.plane_distance(center_lat, center_lon, np.array([lats[label], lats[i]]),
                                  np.array([lons[label], lons[i]]))  # fmt: skip
        label = label if near[0] < near[1] else i
    return points[label]


def doc_values(field: str, packed: np.ndarray, counts: np.ndarray) -> list[DocValues]:
    """Each document's `doc[field]` of a geo_point column's packed values (`counts` per document)."""
    lats, lons = (c.tolist() for c in geo.decode(packed))
    flat = [GeoPoint(a, o) for a, o in zip(lats, lons, strict=True)]
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends[:-1]] if ends else []
    return [GeoPoints(field, flat[a:b]) for a, b in zip(starts, ends, strict=True)]
