"""Shapes a `geo_shape` query (and `geo_polygon`, `geo_bounding_box`) tests points against: GeoJSON
and WKT parsed into one hashable `Shape`, and the vectorized test of which points lie in it.

A shape is a set of points, or of polygons (rings of `(lon, lat)`, the outer ring first, holes
after), or of circles; an envelope is a polygon (two when it crosses the antimeridian). The point
test is even-odd ray casting, one numpy pass per ring edge over the points inside the polygon's
bounding box: O(edges x candidates), no Python loop per point.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.index import geo

Ring = tuple[tuple[float, float], ...]
Polygon = tuple[Ring, ...]


@dataclass(frozen=True, slots=True)
class Shape:
    points: tuple[tuple[float, float], ...] = ()  # (lon, lat)
    polygons: tuple[Polygon, ...] = ()
    circles: tuple[tuple[float, float, float], ...] = ()  # (lon, lat, radius in meters)


class ShapeError(ValueError):
    """A shape that cannot be read (the message is Elasticsearch's)."""


def box(top: float, left: float, bottom: float, right: float) -> Shape:
    """A bounding box; `left > right` crosses the antimeridian and makes two boxes."""
    if left > right:
        return Shape(
            polygons=(_box_polygon(top, left, bottom, 180.0), _box_polygon(top, -180.0, bottom, right))
        )
    return Shape(polygons=(_box_polygon(top, left, bottom, right),))


def _box_polygon(top: float, left: float, bottom: float, right: float) -> Polygon:
    return (((left, bottom), (right, bottom), (right, top), (left, top), (left, bottom)),)


def polygon(points: list[tuple[float, float]]) -> Shape:
    """A polygon of (lat, lon) points, closed if it is not."""
    ring = tuple((lon, lat) for lat, lon in points)
    if ring[0] != ring[-1]:
        ring = (*ring, ring[0])
    return Shape(polygons=((ring,),))


def latitudes(shape: Shape) -> tuple[float, float]:
    """The band of latitudes the shape covers (a circle's by its radius in degrees, with room)."""
    lats = [lat for _, lat in shape.points]
    lats += [lat for poly in shape.polygons for _, lat in poly[0]]
    for _, lat, radius in shape.circles:
        reach = math.degrees(radius / geo.EARTH_RADIUS) * 1.01 + 1e-9
        lats += [lat - reach, lat + reach]
    return (min(lats), max(lats)) if lats else (1.0, -1.0)


# -- the point test ----------------------------------------------------------------------------


def inside(shape: Shape, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Which points (one bool each) lie in the shape (its edges included for boxes)."""
    hit = np.zeros(len(lat), dtype=bool)
    for px, py in shape.points:
        q_lat, q_lon = geo.quantize(py, px)
        hit |= (lat == q_lat) & (lon == q_lon)
    for clon, clat, radius in shape.circles:
        hit |= geo.arc_distance(clat, clon, lat, lon) <= radius
    for poly in shape.polygons:
        outer = np.asarray(poly[0], dtype=np.float64)
        lo_x, lo_y = outer.min(axis=0)
        hi_x, hi_y = outer.max(axis=0)
        cand = np.flatnonzero((lon >= lo_x) & (lon <= hi_x) & (lat >= lo_y) & (lat <= hi_y) & ~hit)
        if not len(cand):
            continue
        if _is_box(poly):
            hit[cand] = True
            continue
        x, y = lon[cand], lat[cand]
        odd = np.zeros(len(cand), dtype=bool)
        for ring in poly:
            pts = np.asarray(ring, dtype=np.float64)
            for (x1, y1), (x2, y2) in zip(pts[:-1], pts[1:], strict=True):
                if y1 == y2:
                    continue
                crosses = (y1 > y) != (y2 > y)
                odd ^= crosses & (x < (x2 - x1) * (y - y1) / (y2 - y1) + x1)
        hit[cand[odd]] = True
    return hit


def _is_box(poly: Polygon) -> bool:
    if len(poly) != 1 or len(poly[0]) != 5:
        return False
    xs = {p[0] for p in poly[0]}
    ys = {p[1] for p in poly[0]}
    return len(xs) == 2 and len(ys) == 2


# -- GeoJSON -----------------------------------------------------------------------------------


def parse_shape(value: Any) -> Shape:
    """A GeoJSON object or a WKT string (GeometryParser)."""
    if type(value) is str:
        return parse_wkt(value)
    if type(value) is not dict:
        raise ShapeError("shape must be an object consisting of type and coordinates")
    kind = value.get("type")
    if type(kind) is not str:
        raise ShapeError("geometry type is required")
    kind = kind.lower()
    if kind == "geometrycollection":
        geometries = value.get("geometries")
        if type(geometries) is not list:
            raise ShapeError("geometries not included")
        return _union([parse_shape(g) for g in geometries])
    if "coordinates" not in value:
        raise ShapeError("coordinates not included")
    coords = value["coordinates"]
    try:
        if kind == "point":
            return Shape(points=(_position(coords),))
        if kind == "multipoint":
            return Shape(points=tuple(_position(c) for c in coords))
        if kind == "envelope":
            (left, top), (right, bottom) = (_position(c) for c in coords)
            return _envelope(left, right, top, bottom)
        if kind == "polygon":
            return Shape(polygons=(_polygon(coords),))
        if kind == "multipolygon":
            return Shape(polygons=tuple(_polygon(p) for p in coords))
        if kind == "circle":
            radius = value.get("radius")
            if radius is None:
                raise ShapeError("radius is not specified")
            lon, lat = _position(coords)
            return Shape(circles=((lon, lat, geo.parse_distance(radius)),))
    except (TypeError, ValueError) as e:
        if isinstance(e, ShapeError):
            raise
        raise ShapeError(f"failed to parse [{kind}] coordinates: {e}") from None
    if kind in ("linestring", "multilinestring"):
        raise ShapeError(f"Field of type [geo_point] does not support [{kind.upper()}] queries")
    raise ShapeError(f"unknown geometry type: {kind}")


def _position(c: Any) -> tuple[float, float]:
    if type(c) is not list or len(c) < 2 or not all(type(v) in (int, float) for v in c):
        raise ShapeError("geo coordinates must be numbers")
    return float(c[0]), float(c[1])


def _polygon(rings: Any) -> Polygon:
    if type(rings) is not list or not rings:
        raise ShapeError(
            "Invalid LinearRing found. Found a single coordinate when expecting a coordinate array"
        )
    out = []
    for ring in rings:
        pts = tuple(_position(c) for c in ring)
        if len(pts) < 4:
            raise ShapeError(f"at least 4 polygon points required, found {len(pts)}")
        if pts[0] != pts[-1]:
            raise ShapeError(
                "first and last points of the linear ring must be the same (it must close itself): "
                f"{pts[0]} {pts[-1]}"
            )
        out.append(pts)
    return tuple(out)


def _envelope(left: float, right: float, top: float, bottom: float) -> Shape:
    if top < bottom:
        raise ShapeError(f"top [{top}] must be greater than bottom [{bottom}]")
    return box(top, left, bottom, right)


def _union(shapes: list[Shape]) -> Shape:
    return Shape(
        tuple(p for s in shapes for p in s.points),
        tuple(p for s in shapes for p in s.polygons),
        tuple(c for s in shapes for c in s.circles),
    )


# -- WKT ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:([A-Za-z]+)|([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)|(\()|(\))|(,))")


def parse_wkt(text: str) -> Shape:
    """POINT, MULTIPOINT, POLYGON, MULTIPOLYGON, BBOX/ENVELOPE (minLon, maxLon, maxLat, minLat) and
    GEOMETRYCOLLECTION of these."""
    tokens = _tokens(text)
    shape, pos = _wkt_shape(tokens, 0)
    if pos != len(tokens):
        raise ShapeError(f"expected end of WKT string but found additional text: {tokens[pos][1]}")
    return shape


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ShapeError(
                f"unknown geometry type: {text[pos:].split()[0] if text[pos:].split() else text}"
            )
        word, number, lp, rp, comma = m.groups()
        kind = "word" if word else "number" if number else "(" if lp else ")" if rp else ","
        out.append((kind, m.group(m.lastindex or 0)))
        pos = m.end()
    return out


def _expect(tokens: list[tuple[str, str]], pos: int, kind: str) -> int:
    if pos >= len(tokens) or tokens[pos][0] != kind:
        found = tokens[pos][1] if pos < len(tokens) else "END-OF-STREAM"
        raise ShapeError(f"expected {kind} but found: {found}")
    return pos + 1


def _wkt_shape(tokens: list[tuple[str, str]], pos: int) -> tuple[Shape, int]:
    if pos >= len(tokens) or tokens[pos][0] != "word":
        raise ShapeError(
            "expected word but found: END-OF-STREAM"
            if pos >= len(tokens)
            else f"expected word but found: {tokens[pos][1]}"
        )
    kind = tokens[pos][1].upper()
    pos += 1
    if pos < len(tokens) and tokens[pos] == ("word", "EMPTY"):
        return Shape(), pos + 1
    if kind == "GEOMETRYCOLLECTION":
        pos = _expect(tokens, pos, "(")
        shapes = []
        while True:
            shape, pos = _wkt_shape(tokens, pos)
            shapes.append(shape)
            if pos < len(tokens) and tokens[pos][0] == ",":
                pos += 1
                continue
            return _union(shapes), _expect(tokens, pos, ")")
    if kind in ("BBOX", "ENVELOPE"):
        numbers, pos = _numbers(tokens, _expect(tokens, pos, "("), 4, ",")
        left, right, top, bottom = numbers
        return _envelope(left, right, top, bottom), _expect(tokens, pos, ")")
    if kind == "POINT":
        point, pos = _wkt_point(tokens, _expect(tokens, pos, "("))
        return Shape(points=(point,)), _expect(tokens, pos, ")")
    if kind == "MULTIPOINT":
        pts, pos = _point_list(tokens, pos, bare_ok=True)
        return Shape(points=pts), pos
    if kind == "POLYGON":
        poly, pos = _wkt_polygon(tokens, pos)
        return Shape(polygons=(poly,)), pos
    if kind == "MULTIPOLYGON":
        pos = _expect(tokens, pos, "(")
        polys = []
        while True:
            poly, pos = _wkt_polygon(tokens, pos)
            polys.append(poly)
            if pos < len(tokens) and tokens[pos][0] == ",":
                pos += 1
                continue
            return Shape(polygons=tuple(polys)), _expect(tokens, pos, ")")
    if kind in ("LINESTRING", "MULTILINESTRING"):
        raise ShapeError(f"Field of type [geo_point] does not support [{kind}] queries")
    raise ShapeError(f"Unknown geometry type: {kind.lower()}")


def _numbers(tokens: list[tuple[str, str]], pos: int, count: int, sep: str | None) -> tuple[list[float], int]:
    out = []
    for i in range(count):
        if i and sep:
            pos = _expect(tokens, pos, sep)
        if pos >= len(tokens) or tokens[pos][0] != "number":
            found = tokens[pos][1] if pos < len(tokens) else "END-OF-STREAM"
            raise ShapeError(f"expected number but found: {found}")
        out.append(float(tokens[pos][1]))
        pos += 1
    return out, pos


def _wkt_point(tokens: list[tuple[str, str]], pos: int) -> tuple[tuple[float, float], int]:
    (lon, lat), pos = _numbers(tokens, pos, 2, None)
    if pos < len(tokens) and tokens[pos][0] == "number":
        pos += 1  # a z value
    return (lon, lat), pos


def _point_list(tokens: list[tuple[str, str]], pos: int, bare_ok: bool = False) -> tuple[Ring, int]:
    pos = _expect(tokens, pos, "(")
    pts = []
    while True:
        wrapped = bare_ok and pos < len(tokens) and tokens[pos][0] == "("
        point, pos = _wkt_point(tokens, pos + 1 if wrapped else pos)
        if wrapped:
            pos = _expect(tokens, pos, ")")
        pts.append(point)
        if pos < len(tokens) and tokens[pos][0] == ",":
            pos += 1
            continue
        return tuple(pts), _expect(tokens, pos, ")")


def _wkt_polygon(tokens: list[tuple[str, str]], pos: int) -> tuple[Polygon, int]:
    pos = _expect(tokens, pos, "(")
    rings = []
    while True:
        ring, pos = _point_list(tokens, pos)
        rings.append([list(p) for p in ring])
        if pos < len(tokens) and tokens[pos][0] == ",":
            pos += 1
            continue
        return _polygon(rings), _expect(tokens, pos, ")")
