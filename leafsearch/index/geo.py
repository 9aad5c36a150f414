"""`geo_point` values: every input form Elasticsearch reads, Lucene's encoding, distances, units
and the geohash and map-tile grids.

A point is stored as Lucene stores its doc values (`LatLonDocValuesField`): latitude and longitude
each quantized to 32 bits (`GeoEncodingUtils`), packed into one long, latitude high. Why: the
field is then a plain `long` column (buffer, segments, merges, the wire and multi-valued
documents need nothing of their own), 8 bytes per value instead of 16, and every value a query,
sort or aggregation reads is the quantized point Elasticsearch reads (its sort values and
`geo_bounds` print the same digits). Decoded once per segment (`points`), kept for its life.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

#: Lucene's quantization steps (GeoEncodingUtils): 2^32 steps over each coordinate's range.
LAT_DECODE = 180.0 / 2**32
LON_DECODE = 360.0 / 2**32
#: The earth's mean radius in meters, as Lucene's SloppyMath and Elasticsearch's GeoUtils use it.
EARTH_RADIUS = 6_371_008.7714

_GEOHASH_ALPHABET = "0123456789bcdefghjkmnpqrstuvwxyz"
_GEOHASH_INDEX = {c: i for i, c in enumerate(_GEOHASH_ALPHABET)}
MAX_GEOHASH_PRECISION = 12
MAX_GEOTILE_PRECISION = 29


class GeoError(ValueError):
    """A value that is no point (the message is Elasticsearch's)."""


# -- encoding --------------------------------------------------------------------------------


def encode(lat: float, lon: float) -> int:
    """The packed long of a point: Lucene's 32-bit latitude (high) and longitude (low)."""
    lat_enc = math.floor(math.nextafter(90.0, 0) / LAT_DECODE if lat == 90.0 else lat / LAT_DECODE)
    lon_enc = math.floor(math.nextafter(180.0, 0) / LON_DECODE if lon == 180.0 else lon / LON_DECODE)
    return (lat_enc << 32) | (lon_enc & 0xFFFFFFFF)


def decode(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(latitudes, longitudes) of packed points, as Lucene decodes them. O(n), 16 bytes a value."""
    packed = np.asarray(packed, dtype=np.int64)
    lat = (packed >> 32).astype(np.float64) * LAT_DECODE
    lon = packed.astype(np.int32).astype(np.float64) * LON_DECODE
    return lat, lon


def points(dv: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(doc of each value, latitudes, longitudes) of a geo_point column's doc values, documents
    ascending; decoded once per segment and kept with its column (the segment never changes)."""
    cached = dv.__dict__.get("_geo_points")
    if cached is None:
        docs, packed = dv.flat
        cached = dv.__dict__["_geo_points"] = (docs, *decode(packed))
    return cached


def latitude_band(dv: Any, lo: float, hi: float) -> np.ndarray:
    """The values (indices into `points(dv)`) whose latitude lies in [lo, hi], from the column's
    values sorted by latitude (built once per segment, O(n log n); 12 bytes a value): a query
    reads O(log n + band) instead of every latitude, as Lucene's points index prunes by cell."""
    cached = dv.__dict__.get("_geo_by_lat")
    if cached is None:
        lat = points(dv)[1]
        order = np.argsort(lat, kind="stable").astype(np.int32)
        cached = dv.__dict__["_geo_by_lat"] = (lat[order], order)
    sorted_lat, order = cached
    start = int(np.searchsorted(sorted_lat, lo, side="left"))
    end = int(np.searchsorted(sorted_lat, hi, side="right"))
    return order[start:end]


def quantize(lat: float, lon: float) -> tuple[float, float]:
    """A point as it is stored (what a document holding it reads back)."""
    lat_arr, lon_arr = decode(np.array([encode(lat, lon)], dtype=np.int64))
    return float(lat_arr[0]), float(lon_arr[0])


# -- parsing the forms of a point ------------------------------------------------------------


def parse_point(value: Any, ignore_z_value: bool = True) -> tuple[float, float]:
    """(lat, lon) of one point in any form Elasticsearch reads (GeoUtils.parseGeoPoint): an object
    `{"lat", "lon"}` (numbers or numeric strings), GeoJSON `{"type": "Point", "coordinates"}`,
    an array `[lon, lat(, z)]`, a string `"lat,lon(,z)"`, a geohash, or WKT `POINT (lon lat)`.
    Ranges are not checked here (`check_point`)."""
    if type(value) is dict:
        return _parse_object(value, ignore_z_value)
    if type(value) is list:
        return _parse_coordinates(value, ignore_z_value)
    if type(value) is str:
        return parse_point_text(value, ignore_z_value)
    raise GeoError("geo_point expected")


def _parse_object(value: dict, ignore_z_value: bool) -> tuple[float, float]:
    if "type" in value or "coordinates" in value:
        return _parse_geojson_point(value, ignore_z_value)
    lat = lon = None
    geohash = None
    for key, v in value.items():
        if key == "lat":
            lat = _coordinate(v, "latitude")
        elif key == "lon":
            lon = _coordinate(v, "longitude")
        elif key == "z":
            if v is not None and not ignore_z_value:
                _z_refused(v)
        elif key == "geohash":
            if type(v) is not str:
                raise GeoError("geohash must be a string")
            geohash = v
        else:
            raise GeoError("field must be either [lat], [lon], [z], [type], [coordinates], or [geohash]")
    if geohash is not None:
        if lat is not None or lon is not None:
            raise GeoError("field must be either lat/lon or geohash")
        return geohash_center(geohash)
    if lat is None:
        raise GeoError("field [lat] missing")
    if lon is None:
        raise GeoError("field [lon] missing")
    return lat, lon


def _parse_geojson_point(value: dict, ignore_z_value: bool) -> tuple[float, float]:
    kind = value.get("type")
    if kind is None:
        raise GeoError("field [type] missing")
    if "coordinates" not in value:
        raise GeoError("field [coordinates] missing")
    if set(value) - {"type", "coordinates"}:
        raise GeoError("field must be either [lat], [lon], [z], [type], [coordinates], or [geohash]")
    if type(kind) is not str or kind.lower() != "point":
        raise GeoError(f"[type] for geo_point can only be 'Point' but found: {kind}")
    coordinates = value["coordinates"]
    if type(coordinates) is not list:
        raise GeoError("[coordinates] must be an array")
    return _parse_coordinates(coordinates, ignore_z_value)


def _coordinate(v: Any, name: str) -> float:
    if type(v) in (int, float):
        return float(v)
    if type(v) is str:
        try:
            return float(v.strip())
        except ValueError:
            pass
    raise GeoError(f"{name} must be a number")


def _z_refused(z: Any) -> None:
    raise GeoError(
        f"Exception parsing coordinates: found Z value [{z}] but [ignore_z_value] parameter is [false]"
    )


def _parse_coordinates(values: list, ignore_z_value: bool) -> tuple[float, float]:
    """`[lon, lat]` or `[lon, lat, z]`."""
    if not all(type(v) in (int, float) for v in values):
        raise GeoError("numeric value expected")
    if len(values) < 2:
        raise GeoError("Invalid number of values: expecting [lon, lat] but found only one")
    if len(values) > 3:
        raise GeoError("[geo_point] field type does not accept more than 3 values")
    if len(values) == 3 and not ignore_z_value:
        _z_refused(float(values[2]))
    return float(values[1]), float(values[0])


_WKT_POINT = re.compile(r"\s*POINT\s*\(\s*(\S+)\s+(\S+)(?:\s+(\S+))?\s*\)\s*", re.IGNORECASE)


def parse_point_text(text: str, ignore_z_value: bool = True) -> tuple[float, float]:
    """A point written as text: WKT, `lat,lon(,z)` or a geohash (GeoPoint.resetFromString)."""
    if "point" in text.lower():
        found = _WKT_POINT.fullmatch(text)
        if found is None:
            raise GeoError(f"Invalid WKT format: {text}")
        lon, lat, z = found.groups()
        if z is not None and not ignore_z_value:
            _z_refused(z)
        return _coordinate(lat, "latitude"), _coordinate(lon, "longitude")
    if "," in text:
        parts = text.split(",")
        if len(parts) > 3:
            raise GeoError(f"failed to parse [{text}], expected 2 or 3 coordinates but found: [{len(parts)}]")
        if len(parts) == 3 and not ignore_z_value:
            _z_refused(parts[2].strip())
        return _coordinate(parts[0], "latitude"), _coordinate(parts[1], "longitude")
    return geohash_center(text)


def point_problem(lat: float, lon: float, field: str) -> str | None:
    """Why a mapper refuses a point out of range (GeoPointFieldMapper), or None."""
    if not (-90.0 <= lat <= 90.0):
        return f"illegal latitude value [{_java_double(lat)}] for {field}"
    if not (-180.0 <= lon <= 180.0):
        return f"illegal longitude value [{_java_double(lon)}] for {field}"
    return None


def _java_double(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(float(v))


def normalize(lat: float, lon: float) -> tuple[float, float]:
    """A point out of range wrapped onto the globe (GeoUtils.normalizePoint), as `coerce` and
    `ignore_malformed` read one."""
    lat = (lat + 180.0) % 360.0 - 180.0
    if lat > 90.0:
        lat, lon = 180.0 - lat, lon + 180.0
    elif lat < -90.0:
        lat, lon = -180.0 - lat, lon + 180.0
    if not -180.0 <= lon <= 180.0:
        lon = (lon + 180.0) % 360.0 - 180.0
    return lat, lon


def source_points(values: list[Any], null_value: Any = None) -> list[tuple[float, float]]:
    """The valid points of a field's `_source` values (each one point or an array of them), as
    the mapper read them: malformed ones left out (they were refused or ignored)."""
    out = []
    for value in values:
        single = type(value) is not list or bool(value and type(value[0]) in (int, float))
        for v in (value,) if single else value:
            if v is None:
                v = null_value
            try:
                lat, lon = parse_point(v)
            except GeoError:
                continue
            if point_problem(lat, lon, "") is None:
                out.append((lat, lon))
    return out


def render_points(found: list[tuple[float, float]], fmt: str | None) -> list[Any]:
    """Points as the `fields` option shows them: GeoJSON (the default) or WKT."""
    if fmt in (None, "geojson"):
        return [{"type": "Point", "coordinates": [lon, lat]} for lat, lon in found]
    if fmt == "wkt":
        return [f"POINT ({_java_double(lon)} {_java_double(lat)})" for lat, lon in found]
    raise GeoError(f"Unrecognized geometry format [{fmt}].")


# -- geohash ---------------------------------------------------------------------------------


def geohash_bounds(geohash: str) -> tuple[float, float, float, float]:
    """(min_lat, max_lat, min_lon, max_lon) of a geohash cell."""
    if not geohash:
        raise GeoError("empty geohash")
    if len(geohash) > MAX_GEOHASH_PRECISION:
        raise GeoError(f"geohash [{geohash}] is too long (max {MAX_GEOHASH_PRECISION})")
    lat_lo, lat_hi, lon_lo, lon_hi = -90.0, 90.0, -180.0, 180.0
    even = True
    for ch in geohash:
        code = _GEOHASH_INDEX.get(ch)
        if code is None:
            raise GeoError(f"unsupported symbol [{ch}] in geohash [{geohash}]")
        for bit in (16, 8, 4, 2, 1):
            if even:
                mid = (lon_lo + lon_hi) / 2
                lon_lo, lon_hi = (mid, lon_hi) if code & bit else (lon_lo, mid)
            else:
                mid = (lat_lo + lat_hi) / 2
                lat_lo, lat_hi = (mid, lat_hi) if code & bit else (lat_lo, mid)
            even = not even
    return lat_lo, lat_hi, lon_lo, lon_hi


def geohash_center(geohash: str) -> tuple[float, float]:
    lat_lo, lat_hi, lon_lo, lon_hi = geohash_bounds(geohash)
    return (lat_lo + lat_hi) / 2, (lon_lo + lon_hi) / 2


def geohash_cells(lat: np.ndarray, lon: np.ndarray, precision: int) -> np.ndarray:
    """The geohash cell of each point as an int64 (5 bits a character, interleaved longitude
    first), vectorized; `geohash_text` spells one."""
    bits = 5 * precision
    lon_bits = (bits + 1) // 2
    lat_bits = bits // 2
    x = np.minimum(((lon + 180.0) / 360.0 * (1 << lon_bits)).astype(np.int64), (1 << lon_bits) - 1)
    y = np.minimum(((lat + 90.0) / 180.0 * (1 << lat_bits)).astype(np.int64), (1 << lat_bits) - 1)
    out = np.zeros(len(lat), dtype=np.int64)
    for i in range(bits):  # most significant first: even bits are longitude
        if i % 2 == 0:
            bit = (x >> (lon_bits - 1 - i // 2)) & 1
        else:
            bit = (y >> (lat_bits - 1 - i // 2)) & 1
        out = (out << 1) | bit
    return out


#: The equator's length and the pole-to-pole distance, in meters (WGS 84 axes).
_EQUATOR = 2 * math.pi * 6_378_137.0
_POLAR_DISTANCE = math.pi * 6_356_752.314245


def geohash_levels(meters: float) -> int:
    """The geohash precision whose cells are no larger than a distance (GeoUtils'
    geoHashLevelsForPrecision): a `geohash_grid` precision given as `"1km"`."""
    if meters <= 0:
        return MAX_GEOHASH_PRECISION
    width = meters / (1 + _POLAR_DISTANCE / _EQUATOR)
    part = math.ceil(_EQUATOR / width)
    if part == 1:
        return 1
    bits = math.ceil(math.log(part) / math.log(2))
    full, left = divmod(bits, 5)
    return (full + (left > 0)) + (full + (left > 3))


def geohash_precision(value: Any) -> int:
    """A geohash length given as a number (1 to 12) or a distance (`"5km"`: the length of the
    largest cells no wider), as a completion geo context takes its `precision`."""
    whole = type(value) is int or (type(value) is float and value.is_integer())
    if whole or (type(value) is str and value.strip().lstrip("-").isdigit()):
        level = int(value)
    elif type(value) is str:
        level = geohash_levels(parse_distance(value))
    else:
        raise GeoError(f"precision must be a number or a distance, not [{value}]")
    if not 1 <= level <= MAX_GEOHASH_PRECISION:
        raise GeoError(f"precision must be between 1 and {MAX_GEOHASH_PRECISION}, got [{level}]")
    return level


def geohash_text(cell: int, precision: int) -> str:
    return "".join(_GEOHASH_ALPHABET[(cell >> (5 * (precision - 1 - i))) & 31] for i in range(precision))


# -- map tiles -------------------------------------------------------------------------------

#: Web Mercator's latitude limit: tiles cover [-85.0511..., 85.0511...].
_MAX_TILE_LAT = 85.05112877980659


def geotile_cells(lat: np.ndarray, lon: np.ndarray, precision: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of each point's map tile at zoom `precision` (GeoTileUtils), vectorized."""
    tiles = 1 << precision
    x = np.floor((lon + 180.0) / 360.0 * tiles)
    rad = np.radians(np.clip(lat, -_MAX_TILE_LAT, _MAX_TILE_LAT))
    y = np.floor((1.0 - np.log(np.tan(rad) + 1.0 / np.cos(rad)) / math.pi) / 2.0 * tiles)
    return np.clip(x, 0, tiles - 1).astype(np.int64), np.clip(y, 0, tiles - 1).astype(np.int64)


def geotile_bounds(precision: int, x: int, y: int) -> tuple[float, float, float, float]:
    """(min_lat, max_lat, min_lon, max_lon) of a map tile."""
    tiles = 1 << precision

    def lat_of(row: int) -> float:
        return math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * row / tiles))))

    return lat_of(y + 1), lat_of(y), x / tiles * 360.0 - 180.0, (x + 1) / tiles * 360.0 - 180.0


# -- distances -------------------------------------------------------------------------------

#: Meters per unit, by every name Elasticsearch's DistanceUnit reads.
_UNITS: dict[str, float] = {
    **dict.fromkeys(("in", "inch"), 0.0254),
    **dict.fromkeys(("yd", "yards"), 0.9144),
    **dict.fromkeys(("ft", "feet"), 0.3048),
    **dict.fromkeys(("km", "kilometers"), 1000.0),
    **dict.fromkeys(("NM", "nmi", "nauticalmiles"), 1852.0),
    **dict.fromkeys(("mm", "millimeters"), 0.001),
    **dict.fromkeys(("cm", "centimeters"), 0.01),
    **dict.fromkeys(("mi", "miles"), 1609.344),
    **dict.fromkeys(("m", "meters"), 1.0),
}
#: Longest names first, so `km` is not read as `m`.
_UNIT_NAMES = sorted(_UNITS, key=len, reverse=True)


def unit_meters(name: str) -> float:
    """Meters in one unit (DistanceUnit.fromString)."""
    meters = _UNITS.get(name)
    if meters is None:
        raise GeoError(f"No distance unit match [{name}]")
    return meters


def parse_distance(value: Any, default_unit: str = "m") -> float:
    """A distance (`12km`, `"3.5mi"`, a number in `default_unit`) in meters."""
    if type(value) in (int, float):
        return float(value) * unit_meters(default_unit)
    if type(value) is not str:
        raise GeoError(f"failed to parse distance [{value}]")
    text = value.strip()
    for name in _UNIT_NAMES:
        if text.endswith(name):
            number, meters = text[: -len(name)], _UNITS[name]
            break
    else:
        number, meters = text, unit_meters(default_unit)
    try:
        return float(number) * meters
    except ValueError:
        raise GeoError(f'For input string: "{number}"') from None


def arc_distance(lat1: float, lon1: float, lat2: np.ndarray, lon2: np.ndarray) -> np.ndarray:
    """Haversine distance in meters from one point to many (Lucene's SloppyMath.haversinMeters,
    computed exactly), vectorized: O(n)."""
    x1, x2 = math.radians(lat1), np.radians(lat2)
    h1 = 1.0 - np.cos(x1 - x2)
    h2 = 1.0 - np.cos(math.radians(lon1) - np.radians(lon2))
    h = h1 + math.cos(x1) * np.cos(x2) * h2  # twice the haversine of the angle: in [0, 2]
    return EARTH_RADIUS * 2.0 * np.arcsin(np.minimum(1.0, np.sqrt(h * 0.5)))


def plane_distance(lat1: float, lon1: float, lat2: np.ndarray, lon2: np.ndarray) -> np.ndarray:
    """GeoUtils.planeDistance: an equirectangular approximation in meters, vectorized."""
    x = np.radians(lon2 - lon1) * np.cos(np.radians((lat2 + lat1) / 2.0))
    y = np.radians(lat2 - lat1)
    return np.sqrt(x * x + y * y) * EARTH_RADIUS


def distance(kind: str, lat1: float, lon1: float, lat2: np.ndarray, lon2: np.ndarray) -> np.ndarray:
    """`distance_type` `arc` or `plane`, in meters."""
    return (plane_distance if kind == "plane" else arc_distance)(lat1, lon1, lat2, lon2)
