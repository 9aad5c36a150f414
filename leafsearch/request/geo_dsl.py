"""The geo queries of the query DSL on `geo_point` fields: `geo_distance`, `geo_bounding_box`,
`geo_polygon` (deprecated in Elasticsearch 8, still accepted) and `geo_shape`, parsed as their
builders' `fromXContent` parse them. Points and shapes are read here (index/geo.py,
index/geo_shapes.py); ranges are checked per shard, where `validation_method` applies, as
Elasticsearch does in `doToQuery`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import IllegalArgument, ParsingError
from leafsearch.index import geo, geo_shapes
from leafsearch.index.geo_shapes import Shape
from leafsearch.request.query_dsl import Query, _bool, _float, _text
from leafsearch.request.search_types import SortSpec
from leafsearch.unsupported import NotSupported

VALIDATION_METHODS = ("STRICT", "IGNORE_MALFORMED", "COERCE")
RELATIONS = ("intersects", "disjoint", "within", "contains")


@dataclass(frozen=True, slots=True)
class GeoDistance(Query):
    field: str
    lat: float
    lon: float
    distance: float  # meters
    distance_type: str = "arc"
    validation_method: str = "STRICT"
    ignore_unmapped: bool = False
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class GeoArea(Query):
    """`geo_bounding_box`, `geo_polygon` and `geo_shape`: documents whose points meet `shape` as
    `relation` says. `corners`: the points `validation_method` checks (box corners, polygon
    vertices; none for `geo_shape`)."""

    name: str
    field: str
    shape: Shape
    corners: tuple[tuple[float, float], ...] = ()  # (lat, lon)
    relation: str = "intersects"
    validation_method: str = "STRICT"
    ignore_unmapped: bool = False
    boost: float = 1.0


def _point(name: str, field: str, value: Any) -> tuple[float, float]:
    try:
        return geo.parse_point(value)
    except geo.GeoError as e:
        raise ParsingError(f"[{name}] failed to parse point of field [{field}]: {e}") from None


def _validation(name: str, key: str, value: Any) -> str:
    text = _text(name, key, value).upper()
    if text not in VALIDATION_METHODS:
        raise IllegalArgument(f"No enum constant org.elasticsearch.index.query.GeoValidationMethod.{text}")
    return text


def _common(name: str, key: str, value: Any, opts: dict[str, Any]) -> bool:
    """The options every geo query takes; False when `key` is none of them."""
    if key == "boost":
        opts["boost"] = _float(name, key, value)
    elif key == "ignore_unmapped":
        opts["ignore_unmapped"] = _bool(name, key, value)
    elif key == "validation_method":
        opts["validation_method"] = _validation(name, key, value)
    elif key in ("coerce", "ignore_malformed") and name != "geo_shape":
        if _bool(name, key, value):
            opts.setdefault("validation_method", "COERCE" if key == "coerce" else "IGNORE_MALFORMED")
    elif key != "_name":
        return False
    return True


def _field_once(name: str, field: str | None, key: str) -> None:
    if field is not None:
        raise ParsingError(f"[{name}] query doesn't support multiple fields, found [{field}] and [{key}]")


def parse_geo_distance(body: dict, depth: int) -> Query:
    name = "geo_distance"
    opts: dict[str, Any] = {}
    field = None
    point = None
    distance = None
    for key, value in body.items():
        if key == "distance":
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise ParsingError(f"[{name}] unknown token [{token_name(value)}] after [{key}]")
            try:
                distance = geo.parse_distance(value)
            except geo.GeoError as e:
                raise IllegalArgument(str(e)) from None
        elif key == "distance_type":
            kind = _text(name, key, value).lower()
            if kind not in ("arc", "plane"):
                raise IllegalArgument(f"No geo distance for [{kind}]")
            opts["distance_type"] = kind
        elif key in ("unit", "optimize_bbox"):
            raise ParsingError(f"[{name}] query does not support [{key}]")
        elif not _common(name, key, value, opts):
            _field_once(name, field, key)
            field, point = key, _point(name, key, value)
    if point is None or field is None:
        raise IllegalArgument("fieldName must not be null or empty")
    if distance is None:
        raise ParsingError("geo_distance requires 'distance' to be specified")
    if not distance > 0:
        raise IllegalArgument("distance must be greater than zero")
    return GeoDistance(field, point[0], point[1], distance, **opts)


def parse_geo_bounding_box(body: dict, depth: int) -> Query:
    name = "geo_bounding_box"
    opts: dict[str, Any] = {}
    field = None
    corners = None
    for key, value in body.items():
        if key == "type":
            _text(name, key, value)  # `memory` / `indexed`: accepted, no effect (as in ES 8)
        elif not _common(name, key, value, opts):
            _field_once(name, field, key)
            field, corners = key, box_corners(name, key, value)
    if field is None or corners is None:
        raise IllegalArgument("Field name must not be empty.")
    top, left, bottom, right = corners
    if top < bottom and opts.get("validation_method", "STRICT") == "STRICT":
        raise IllegalArgument(f"top is below bottom corner: {top} vs. {bottom}")
    shape = geo_shapes.box(top, left, bottom, right)
    return GeoArea(name, field, shape, ((top, left), (bottom, right)), **opts)


def box_corners(name: str, field: str, spec: Any) -> tuple[float, float, float, float]:
    """(top, left, bottom, right) of every corner form (GeoBoundingBox.parseBoundingBox)."""
    if not isinstance(spec, dict):
        raise ParsingError(
            f"[{name}] failed to parse bounding box. Expected start object but found [{token_name(spec)}]"
        )
    edges: dict[str, float] = {}
    for key, value in spec.items():
        if key == "wkt":
            try:
                shape = geo_shapes.parse_wkt(_text(name, key, value))
            except geo_shapes.ShapeError as e:
                raise ParsingError(f"[{name}] failed to parse WKT bounding box: {e}") from None
            if len(shape.polygons) not in (1, 2) or shape.points or shape.circles:
                raise ParsingError("failed to parse WKT bounding box. expected [ENVELOPE]")
            first, last = shape.polygons[0][0], shape.polygons[-1][0]
            edges.update(left=first[0][0], right=last[1][0], top=first[2][1], bottom=first[0][1])
        elif key in ("top", "left", "bottom", "right"):
            edges[key] = _float(name, key, value)
        elif key in _CORNERS:
            upper, west = _CORNERS[key]
            lat, lon = _corner(name, key, value, upper, west)
            edges["top" if upper else "bottom"] = lat
            edges["left" if west else "right"] = lon
        else:
            raise ParsingError(f"failed to parse bounding box. unexpected field [{key}]")
    for edge in ("top", "left", "bottom", "right"):
        if edge not in edges:
            raise ParsingError(f"failed to parse bounding box. Missing [{edge}] value")
    return edges["top"], edges["left"], edges["bottom"], edges["right"]


#: corner name -> (upper, west)
_CORNERS = {
    **dict.fromkeys(("top_left", "topLeft"), (True, True)),
    **dict.fromkeys(("top_right", "topRight"), (True, False)),
    **dict.fromkeys(("bottom_left", "bottomLeft"), (False, True)),
    **dict.fromkeys(("bottom_right", "bottomRight"), (False, False)),
}


def _corner(name: str, key: str, value: Any, upper: bool, west: bool) -> tuple[float, float]:
    """A corner point; a geohash stands for its cell's corner on that side."""
    if isinstance(value, str) and "," not in value and "point" not in value.lower():
        try:
            lat_lo, lat_hi, lon_lo, lon_hi = geo.geohash_bounds(value)
        except geo.GeoError as e:
            raise ParsingError(f"[{name}] failed to parse [{key}]: {e}") from None
        return (lat_hi if upper else lat_lo), (lon_lo if west else lon_hi)
    return _point(name, key, value)


def parse_geo_polygon(body: dict, depth: int) -> Query:
    name = "geo_polygon"
    opts: dict[str, Any] = {}
    field = None
    points: list[tuple[float, float]] = []
    for key, value in body.items():
        if not _common(name, key, value, opts):
            _field_once(name, field, key)
            if not isinstance(value, dict):
                raise ParsingError(
                    f"[{name}] query does not support token type [{token_name(value)}] under [{key}]"
                )
            field = key
            for inner, shell in value.items():
                if inner != "points":
                    raise ParsingError(f"[{name}] query does not support [{inner}]")
                if not isinstance(shell, list):
                    raise ParsingError(
                        f"[{name}] query does not support token type [{token_name(shell)}] under [points]"
                    )
                points = [_point(name, key, p) for p in shell]
    if field is None:
        raise IllegalArgument("fieldName must not be null")
    if points and points[0] == points[-1]:
        points = points[:-1]
    if len(points) < 3:
        raise IllegalArgument("too few points defined for geo_polygon query")
    return GeoArea(name, field, geo_shapes.polygon(points), tuple(points), **opts)


def parse_geo_shape(body: dict, depth: int) -> Query:
    name = "geo_shape"
    opts: dict[str, Any] = {}
    field = None
    shape = None
    relation = "intersects"
    for key, value in body.items():
        if key == "validation_method":
            raise ParsingError(f"[{name}] query does not support [{key}]")
        if _common(name, key, value, opts):
            continue
        _field_once(name, field, key)
        if not isinstance(value, dict):
            raise ParsingError(f"[{name}] query does not support [{key}]")
        field = key
        for inner, spec in value.items():
            if inner == "shape":
                try:
                    shape = geo_shapes.parse_shape(spec)
                except geo_shapes.ShapeError as e:
                    raise ParsingError(f"[{name}] failed to parse field [shape]: {e}") from None
            elif inner == "relation":
                relation = _text(name, inner, spec).lower()
                if relation not in RELATIONS:
                    raise IllegalArgument(f"Unknown shape relation [{relation}]")
            elif inner == "indexed_shape":
                raise NotSupported("[geo_shape] query with an [indexed_shape]")
            elif inner != "strategy":
                raise ParsingError(f"[{name}] query does not support [{inner}]")
    if field is None:
        raise IllegalArgument("fieldName is required")
    if shape is None:
        raise IllegalArgument("either shape or indexedShapeId is required")
    return GeoArea(name, field, shape, relation=relation, **opts)


@dataclass(frozen=True, slots=True)
class GeoSort:
    """A `_geo_distance` sort: distances from `points` ((lat, lon) each) in `unit` meters."""

    points: tuple[tuple[float, float], ...]
    unit: float = 1.0
    distance_type: str = "arc"
    ignore_unmapped: bool = False


_SORT = "_geo_distance"


def parse_geo_sort(body: Any) -> SortSpec:
    """A `_geo_distance` sort (GeoDistanceSortBuilder.fromXContent): the field's origin points
    (one point in any form, or an array of them), `order`, `unit`, `mode`, `distance_type`,
    `ignore_unmapped`, `validation_method`."""
    if not isinstance(body, dict):
        raise ParsingError(f"[{_SORT}] sort expects an object but found [{token_name(body)}]")
    field = None
    points: list[tuple[float, float]] = []
    order, mode, unit, kind, ignore_unmapped, validation = "asc", None, 1.0, "arc", False, "STRICT"
    for key, value in body.items():
        if key == "order":
            order = _text(_SORT, key, value).lower()
            if order not in ("asc", "desc"):
                raise IllegalArgument(
                    f"No enum constant org.elasticsearch.search.sort.SortOrder.{order.upper()}"
                )
        elif key == "unit":
            try:
                unit = geo.unit_meters(_text(_SORT, key, value))
            except geo.GeoError as e:
                raise IllegalArgument(str(e)) from None
        elif key == "mode":
            mode = _text(_SORT, key, value).lower()
            if mode not in ("min", "max", "avg", "median"):
                if mode == "sum":
                    raise IllegalArgument("sort_mode [sum] isn't supported for sorting by geo distance")
                raise IllegalArgument(f"Unknown SortMode [{mode}]")
        elif key == "distance_type":
            kind = _text(_SORT, key, value).lower()
            if kind not in ("arc", "plane"):
                raise IllegalArgument(f"No geo distance for [{kind}]")
        elif key == "ignore_unmapped":
            ignore_unmapped = _bool(_SORT, key, value)
        elif key == "validation_method":
            validation = _validation(_SORT, key, value)
        elif key == "nested":
            raise NotSupported("[nested] sort", "it has no nested documents")
        else:
            if field is not None:
                raise ParsingError(
                    f"[{_SORT}] sort doesn't support multiple fields, found [{field}] and [{key}]"
                )
            field = key
            many = isinstance(value, list) and value and not isinstance(value[0], int | float)
            points = [_point(_SORT, key, p) for p in (value if many else [value])]
    if field is None or not points:
        raise IllegalArgument(f"[{_SORT}] requires a field and at least one point")
    if validation == "STRICT":
        for lat, lon in points:
            problem = geo.point_problem(lat, lon, "")
            if problem is not None:
                what = problem.split(" value ")[0]
                value = lat if "latitude" in what else lon
                raise ParsingError(f"{what} value [{value!r}] for [GeoDistanceSort] for field [{field}].")
    elif validation == "COERCE":
        points = [geo.normalize(lat, lon) for lat, lon in points]
    return SortSpec(field, order, mode=mode, geo=GeoSort(tuple(points), unit, kind, ignore_unmapped))


PARSERS: dict[str, Callable[[dict, int], Query]] = {
    "geo_distance": parse_geo_distance,
    "geo_bounding_box": parse_geo_bounding_box,
    "geo_polygon": parse_geo_polygon,
    "geo_shape": parse_geo_shape,
}
