"""`geo_point` fields over HTTP with the official client: every input form, the geo queries
against a brute-force haversine over the sources, bad inputs as 400s that change nothing,
multi-valued documents, merges and concurrent writers."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from conftest import running_server
from elasticsearch import BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import leafsearch
from leafsearch.index import geo
from leafsearch.indices import admin

N = 400
R = 6_371_008.7714


def points(n: int = N, seed: int = 3) -> np.ndarray:
    """(lat, lon) rows, denser around Europe so distances select a few percent."""
    rng = np.random.default_rng(seed)
    lat = np.concatenate([rng.uniform(-89, 89, n // 2), rng.uniform(40, 55, n - n // 2)])
    lon = np.concatenate([rng.uniform(-179, 179, n // 2), rng.uniform(-5, 15, n - n // 2)])
    return np.stack([lat, lon], axis=1)


def stored(pts: np.ndarray) -> np.ndarray:
    """The points as an index holds them (Lucene's quantization)."""
    return np.array([geo.quantize(lat, lon) for lat, lon in pts])


def haversine(lat1: float, lon1: float, lat2: np.ndarray, lon2: np.ndarray) -> np.ndarray:
    p1, p2 = math.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(lon2) - math.radians(lon1)
    a = np.sin(dp / 2) ** 2 + math.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * R * np.arcsin(np.sqrt(np.minimum(1, a)))


def ids(response: Any) -> set[str]:
    return {h["_id"] for h in response["hits"]["hits"]}


@pytest.fixture
def geo_index(es: Elasticsearch, new_index: Callable[..., str]) -> tuple[str, np.ndarray]:
    index = new_index(mappings={"properties": {"loc": {"type": "geo_point"}, "n": {"type": "long"}}})
    pts = points()
    bulk(
        es,
        (
            {"_index": index, "_id": str(i), "loc": {"lat": lat, "lon": lon}, "n": i}
            for i, (lat, lon) in enumerate(pts)
        ),
        refresh=True,
    )
    return index, stored(pts)


def search_ids(es: Elasticsearch, index: str, query: dict) -> set[str]:
    return ids(es.search(index=index, query=query, size=N))


def expected(mask: np.ndarray) -> set[str]:
    return {str(i) for i in np.flatnonzero(mask)}


# -- input forms -------------------------------------------------------------------------------

FORMS = [
    {"lat": 41.12, "lon": -71.34},
    {"lat": "41.12", "lon": "-71.34"},
    [-71.34, 41.12],
    [-71.34, 41.12, 10.0],
    "41.12,-71.34",
    "POINT (-71.34 41.12)",
    {"type": "Point", "coordinates": [-71.34, 41.12]},
]


def test_every_input_form_is_the_same_point(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"loc": {"type": "geo_point"}}})
    for i, form in enumerate([*FORMS, "drm3btev3e86"]):
        es.index(index=index, id=str(i), document={"loc": form})
    es.indices.refresh(index=index)
    query = {"geo_distance": {"distance": "10m", "loc": {"lat": 41.12, "lon": -71.34}}}
    found = es.search(index=index, query=query, size=20)
    assert ids(found) == {str(i) for i in range(len(FORMS) + 1)}
    assert [h["_source"]["loc"] for h in sorted(found["hits"]["hits"], key=lambda h: int(h["_id"]))] == [
        *FORMS,
        "drm3btev3e86",
    ]  # `_source` as sent


def test_arrays_of_points_are_multi_valued(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"loc": {"type": "geo_point"}}})
    es.index(
        index=index, id="1", document={"loc": [[2.35, 48.85], "51.5,-0.12", {"lat": 40.7, "lon": -74.0}]}
    )
    es.index(index=index, id="2", document={"loc": [[13.4, 52.5]]})
    es.indices.refresh(index=index)
    near = lambda lat, lon: {"geo_distance": {"distance": "50km", "loc": [lon, lat]}}  # noqa: E731
    assert search_ids(es, index, near(51.5, -0.12)) == {"1"}
    assert search_ids(es, index, near(40.7, -74.0)) == {"1"}
    assert search_ids(es, index, near(52.5, 13.4)) == {"2"}


BAD = [
    ({"lat": 91, "lon": 0}, "illegal latitude value [91.0] for loc"),
    ({"lat": 0, "lon": -181}, "illegal longitude value [-181.0] for loc"),
    ({"lat": 1}, "field [lon] missing"),
    ({"lat": "x", "lon": 1}, "latitude must be a number"),
    ("abc", "unsupported symbol [a] in geohash [abc]"),
    ([1, 2, 3, 4], "[geo_point] field type does not accept more than 3 values"),
    (5, "geo_point expected"),
    ({"type": "LineString", "coordinates": [[1, 2], [3, 4]]}, "[type] for geo_point can only be 'Point'"),
]


@pytest.mark.parametrize(("value", "cause"), BAD)
def test_bad_points_are_400s_that_change_nothing(
    es: Elasticsearch, new_index: Callable[..., str], value: Any, cause: str
) -> None:
    index = new_index(mappings={"properties": {"loc": {"type": "geo_point"}}})
    with pytest.raises(BadRequestError) as info:
        es.index(index=index, id="1", document={"loc": value}, refresh=True)
    error = info.value.body["error"]
    assert error["type"] == "document_parsing_exception"
    assert "failed to parse field [loc] of type [geo_point]" in error["reason"]
    assert error["caused_by"]["reason"].startswith(cause)
    assert es.count(index=index)["count"] == 0


def test_mapping_parameters(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(
        mappings={
            "properties": {
                "loose": {"type": "geo_point", "ignore_malformed": True, "null_value": "1,2"},
                "flat": {"type": "geo_point", "ignore_z_value": False},
            }
        }
    )
    es.index(index=index, id="1", document={"loose": {"lat": 95, "lon": 0}}, refresh=True)
    es.index(index=index, id="2", document={"loose": None}, refresh=True)
    box = {"geo_bounding_box": {"loose": {"top_left": "2,1", "bottom_right": "0,3"}}}
    assert search_ids(es, index, box) == {"2"}  # null_value indexed, the malformed point ignored
    with pytest.raises(BadRequestError) as info:
        es.index(index=index, id="3", document={"flat": [1, 2, 3]})
    assert "found Z value [3.0] but [ignore_z_value] parameter is [false]" in str(info.value.body)
    mapping = es.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    assert mapping["flat"] == {"type": "geo_point", "ignore_z_value": False}
    with pytest.raises(BadRequestError) as info:
        es.indices.create(index=index + "-x", mappings={"properties": {"g": {"type": "geo_point", "foo": 1}}})
    assert "unknown parameter [foo] on mapper [g] of type [geo_point]" in str(info.value.body)


# -- queries against brute force ---------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lat=st.floats(-80, 80),
    lon=st.floats(-179, 179),
    km=st.floats(1, 20_000),
    plane=st.booleans(),
)
def test_geo_distance_equals_haversine(
    es: Elasticsearch, geo_index: tuple[str, np.ndarray], lat: float, lon: float, km: float, plane: bool
) -> None:
    index, pts = geo_index
    query = {"geo_distance": {"distance": f"{km}km", "loc": {"lat": lat, "lon": lon}}}
    if plane:
        query["geo_distance"]["distance_type"] = "plane"
        d = geo.plane_distance(lat, lon, pts[:, 0], pts[:, 1])
    else:
        d = haversine(lat, lon, pts[:, 0], pts[:, 1])
    meters = km * 1000
    got = search_ids(es, index, query)
    sure = expected(d < meters * (1 - 1e-9))
    maybe = expected(d <= meters * (1 + 1e-9))
    assert sure <= got <= maybe


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    top=st.floats(-60, 89),
    height=st.floats(0.5, 60),
    left=st.floats(-180, 180),
    width=st.floats(0.5, 120),
    form=st.sampled_from(["corners", "edges", "wkt", "tr_bl"]),
)
def test_bounding_box_equals_brute_force(
    es: Elasticsearch,
    geo_index: tuple[str, np.ndarray],
    top: float,
    height: float,
    left: float,
    width: float,
    form: str,
) -> None:
    index, pts = geo_index
    bottom = max(-90.0, top - height)
    right = left + width
    if right > 180:
        right -= 360  # crosses the antimeridian
    box: dict[str, Any] = {
        "corners": {"top_left": {"lat": top, "lon": left}, "bottom_right": [right, bottom]},
        "edges": {"top": top, "left": left, "bottom": bottom, "right": right},
        "wkt": {"wkt": f"BBOX ({left}, {right}, {top}, {bottom})"},
        "tr_bl": {"top_right": f"{top},{right}", "bottom_left": f"POINT ({left} {bottom})"},
    }[form]
    lat, lon = pts[:, 0], pts[:, 1]
    in_lon = (lon >= left) & (lon <= right) if left <= right else (lon >= left) | (lon <= right)
    want = expected((lat >= bottom) & (lat <= top) & in_lon)
    assert search_ids(es, index, {"geo_bounding_box": {"loc": box}}) == want


def _in_polygon(poly: list[tuple[float, float]], lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Even-odd rule, one point at a time (the brute force)."""
    out = np.zeros(len(lat), dtype=bool)
    for i, (y, x) in enumerate(zip(lat, lon, strict=True)):
        inside = False
        for (y1, x1), (y2, x2) in zip(poly, poly[1:] + poly[:1], strict=True):
            if (y1 > y) != (y2 > y) and x < (x2 - x1) * (y - y1) / (y2 - y1) + x1:
                inside = not inside
        out[i] = inside
    return out


POLY = [(40.0, -5.0), (55.0, 0.0), (50.0, 15.0), (42.0, 10.0), (46.0, 4.0)]  # (lat, lon), concave


def test_geo_polygon_and_geo_shape_polygon_equal_brute_force(
    es: Elasticsearch, geo_index: tuple[str, np.ndarray]
) -> None:
    index, pts = geo_index
    want_mask = _in_polygon(POLY, pts[:, 0], pts[:, 1])
    assert want_mask.sum() > 10
    want = expected(want_mask)
    polygon = {"geo_polygon": {"loc": {"points": [{"lat": a, "lon": o} for a, o in POLY]}}}
    assert search_ids(es, index, polygon) == want
    ring = [[o, a] for a, o in [*POLY, POLY[0]]]
    geojson = {"type": "Polygon", "coordinates": [ring]}
    wkt = "POLYGON ((" + ", ".join(f"{o} {a}" for o, a in ring) + "))"
    for shape in (geojson, wkt):
        for relation, mask in (("intersects", want_mask), ("within", want_mask), ("disjoint", ~want_mask)):
            query = {"geo_shape": {"loc": {"shape": shape, "relation": relation}}}
            assert search_ids(es, index, query) == expected(mask), (shape, relation)


def test_geo_shape_forms(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, pts = geo_index
    lat, lon = pts[:, 0], pts[:, 1]
    envelope = {"type": "envelope", "coordinates": [[0, 50], [10, 45]]}
    box_mask = (lat >= 45) & (lat <= 50) & (lon >= 0) & (lon <= 10)
    assert search_ids(es, index, {"geo_shape": {"loc": {"shape": envelope}}}) == expected(box_mask)
    multi = "MULTIPOLYGON (((0 45, 10 45, 10 50, 0 50, 0 45)), ((-5 40, -1 40, -1 44, -5 44, -5 40)))"
    multi_mask = box_mask | ((lat >= 40) & (lat <= 44) & (lon >= -5) & (lon <= -1))
    assert search_ids(es, index, {"geo_shape": {"loc": {"shape": multi}}}) == expected(multi_mask)
    point = {"type": "point", "coordinates": [float(pts[7, 1]), float(pts[7, 0])]}
    assert search_ids(es, index, {"geo_shape": {"loc": {"shape": point}}}) == {"7"}


def test_within_and_disjoint_on_multi_valued_documents(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings={"properties": {"loc": {"type": "geo_point"}}})
    es.index(index=index, id="both-in", document={"loc": [[1, 1], [2, 2]]})
    es.index(index=index, id="one-in", document={"loc": [[1, 1], [50, 50]]})
    es.index(index=index, id="out", document={"loc": [50, 50]})
    es.index(index=index, id="none", document={"other": 1})
    es.indices.refresh(index=index)
    shape = "BBOX (0, 5, 5, 0)"
    found = {
        r: search_ids(es, index, {"geo_shape": {"loc": {"shape": shape, "relation": r}}}) for r in RELATIONS
    }
    assert found == {"intersects": {"both-in", "one-in"}, "within": {"both-in"}, "disjoint": {"out"}}


RELATIONS = ("intersects", "within", "disjoint")


@pytest.mark.parametrize(
    ("query", "error_type", "reason"),
    [
        (
            {"geo_distance": {"loc": [0, 0]}},
            "parsing_exception",
            "geo_distance requires 'distance' to be specified",
        ),
        (
            {"geo_distance": {"distance": "1km", "loc": [0, 0], "x": [1, 1]}},
            "parsing_exception",
            "doesn't support multiple fields",
        ),
        ({"geo_distance": {"distance": "1lightyear", "loc": [0, 0]}}, "illegal_argument_exception", None),
        ({"geo_bounding_box": {"loc": {"top_left": [0, 10]}}}, "parsing_exception", "Missing [bottom] value"),
        (
            {"geo_bounding_box": {"loc": {"top": 1, "bottom": 5, "left": 0, "right": 1}}},
            "illegal_argument_exception",
            "top is below bottom corner",
        ),
        (
            {"geo_polygon": {"loc": {"points": [[0, 0], [1, 1]]}}},
            "illegal_argument_exception",
            "too few points",
        ),
        (
            {"geo_shape": {"loc": {"shape": "POLYGON ((0 0, 1 1))"}}},
            "parsing_exception",
            "at least 4 polygon points",
        ),
        (
            {
                "geo_shape": {
                    "loc": {
                        "shape": {"type": "envelope", "coordinates": [[0, 1], [1, 0]]},
                        "relation": "near",
                    }
                }
            },
            "illegal_argument_exception",
            "Unknown shape relation [near]",
        ),
    ],
)
def test_bad_queries_are_400s(
    es: Elasticsearch, geo_index: tuple[str, np.ndarray], query: dict, error_type: str, reason: str | None
) -> None:
    index, _ = geo_index
    with pytest.raises(BadRequestError) as info:
        es.search(index=index, query=query)
    error = info.value.body["error"]
    assert error["root_cause"][0]["type"] == error_type
    if reason is not None:
        assert reason in error["root_cause"][0]["reason"]


def test_unmapped_and_wrong_fields(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, _ = geo_index
    query = {"geo_distance": {"distance": "1km", "nope": [0, 0]}}
    with pytest.raises(BadRequestError) as info:
        es.search(index=index, query=query)
    assert "failed to find geo field [nope]" in str(info.value.body)
    query["geo_distance"]["ignore_unmapped"] = True
    assert es.search(index=index, query=query)["hits"]["total"]["value"] == 0
    with pytest.raises(BadRequestError) as info:
        es.search(index=index, query={"geo_distance": {"distance": "1km", "n": [0, 0]}})
    assert "Field [n] is of unsupported type [long] for [geo_distance] query" in str(info.value.body)
    strict = {"geo_distance": {"distance": "1km", "loc": {"lat": 100, "lon": 0}}}
    with pytest.raises(BadRequestError) as info:
        es.search(index=index, query=strict)
    assert "illegal latitude value [100.0] for [geo_distance]" in str(info.value.body)
    strict["geo_distance"]["validation_method"] = "IGNORE_MALFORMED"
    es.search(index=index, query=strict)


def test_queries_through_merges_and_concurrent_writers(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(
        mappings={"properties": {"loc": {"type": "geo_point"}}}, settings={"number_of_shards": 2}
    )
    pts = points(600, seed=11)
    errors: list[BaseException] = []

    def write(part: int) -> None:
        try:
            for start in range(part * 150, part * 150 + 150, 25):
                bulk(
                    es,
                    (
                        {"_index": index, "_id": str(i), "loc": f"{pts[i, 0]},{pts[i, 1]}"}
                        for i in range(start, start + 25)
                    ),
                )
                es.indices.refresh(index=index)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    query = {"geo_bounding_box": {"loc": {"top_left": [-10, 60], "bottom_right": [20, 35]}}}
    threads = [threading.Thread(target=write, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        es.search(index=index, query=query, size=0)  # readers beside the writers
    for t in threads:
        t.join()
    assert not errors
    q = stored(pts)
    want = expected((q[:, 0] >= 35) & (q[:, 0] <= 60) & (q[:, 1] >= -10) & (q[:, 1] <= 20))
    assert ids(es.search(index=index, query=query, size=700)) == want


def test_points_survive_merges_deletes_and_a_restart(tmp_path: Path) -> None:
    """Twelve small segments merged by the merge policy (in process, where the test drives the
    merges), a delete among them; then a server on the same data answers the same."""
    pts = points(240, seed=5)
    data = tmp_path / "data"
    node = leafsearch.Node(data, background=False)
    admin.create_index(node, "geo", {"mappings": {"properties": {"loc": {"type": "geo_point"}}}})
    for part in range(12):
        rows = range(part * 20, part * 20 + 20)
        lines = [
            orjson.dumps(x)
            for i in rows
            for x in (
                {"index": {"_id": str(i)}},
                {"loc": [pts[i, ::-1].tolist(), [0.5, 0.5]] if i % 7 == 0 else pts[i, ::-1].tolist()},
            )
        ]
        node.bulk(b"\n".join(lines) + b"\n", index="geo", refresh="true")
    node.delete_doc("geo", "5")
    node.indices["geo"].refresh()
    shard = node.indices["geo"].shards[0]
    merged = False
    while shard.maybe_merge():
        merged = True
    assert merged, "the merge policy did not merge"
    node.indices["geo"].refresh()
    node.close()
    q = stored(pts)
    d = haversine(48.0, 5.0, q[:, 0], q[:, 1])
    want = expected(d <= 800_000) - {"5"}
    near_origin = {str(i) for i in range(0, 240, 7)}
    with running_server(data) as (url, _):
        es = Elasticsearch(url)
        query = {"geo_distance": {"distance": "800km", "loc": "48,5"}}
        assert ids(es.search(index="geo", query=query, size=300)) == want
        origin = {"geo_distance": {"distance": "1km", "loc": "0.5,0.5"}}
        assert ids(es.search(index="geo", query=origin, size=300)) == near_origin


# -- aggregations against brute force ----------------------------------------------------------


def _geohash(lat: float, lon: float, precision: int) -> str:
    """Bit by bit, as the geohash definition reads (the brute force)."""
    alphabet = "0123456789bcdefghjkmnpqrstuvwxyz"
    lat_r, lon_r = [-90.0, 90.0], [-180.0, 180.0]
    bits, even, out = 0, True, ""
    for i in range(precision * 5):
        r, v = (lon_r, lon) if even else (lat_r, lat)
        mid = (r[0] + r[1]) / 2
        bits = bits * 2 + (v >= mid)
        r[0 if v >= mid else 1] = mid
        even = not even
        if i % 5 == 4:
            out, bits = out + alphabet[bits], 0
    return out


def _tile(lat: float, lon: float, z: int) -> str:
    n = 2**z
    x = int((lon + 180) / 360 * n)
    rad = math.radians(lat)
    y = int((1 - math.log(math.tan(rad) + 1 / math.cos(rad)) / math.pi) / 2 * n)
    return f"{z}/{min(x, n - 1)}/{min(y, n - 1)}"


def test_geo_bounds_and_centroid(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, pts = geo_index
    aggs = {"b": {"geo_bounds": {"field": "loc"}}, "c": {"geo_centroid": {"field": "loc"}}}
    found = es.search(index=index, size=0, aggs=aggs)["aggregations"]
    lat, lon = pts[:, 0], pts[:, 1]
    bounds = found["b"]["bounds"]
    assert bounds["top_left"]["lat"] == lat.max() and bounds["bottom_right"]["lat"] == lat.min()
    assert bounds["top_left"]["lon"] == lon.min() and bounds["bottom_right"]["lon"] == lon.max()
    assert found["c"]["count"] == N
    assert found["c"]["location"]["lat"] == pytest.approx(lat.mean(), abs=1e-9)
    assert found["c"]["location"]["lon"] == pytest.approx(lon.mean(), abs=1e-9)


def test_geo_bounds_wraps_the_antimeridian(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"loc": {"type": "geo_point"}, "g": {"type": "keyword"}}})
    for i, (lon, g) in enumerate([(170.0, "a"), (-170.0, "a"), (10.0, "b"), (20.0, "b")]):
        es.index(index=index, id=str(i), document={"loc": [lon, 0], "g": g})
    es.indices.refresh(index=index)
    aggs = {
        "g": {"terms": {"field": "g"}, "aggs": {"b": {"geo_bounds": {"field": "loc"}}}},
        "flat": {"geo_bounds": {"field": "loc", "wrap_longitude": False}},
        "none": {"filter": {"term": {"g": "zzz"}}, "aggs": {"b": {"geo_bounds": {"field": "loc"}}}},
    }
    found = es.search(index=index, size=0, aggs=aggs)["aggregations"]
    by_key = {b["key"]: b["b"]["bounds"] for b in found["g"]["buckets"]}
    assert round(by_key["a"]["top_left"]["lon"]) == 170 and round(by_key["a"]["bottom_right"]["lon"]) == -170
    assert round(by_key["b"]["top_left"]["lon"]) == 10 and round(by_key["b"]["bottom_right"]["lon"]) == 20
    assert round(found["flat"]["bounds"]["top_left"]["lon"]) == -170
    assert found["none"]["b"] == {}


def test_geo_distance_aggregation(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, pts = geo_index
    ranges = [{"to": 500}, {"from": 500, "to": 1500}, {"from": 1500}]
    aggs = {
        "rings": {
            "geo_distance": {"field": "loc", "origin": "48.85,2.35", "unit": "km", "ranges": ranges},
            "aggs": {"c": {"geo_centroid": {"field": "loc"}}},
        }
    }
    buckets = es.search(index=index, size=0, aggs=aggs)["aggregations"]["rings"]["buckets"]
    d = haversine(48.85, 2.35, pts[:, 0], pts[:, 1]) / 1000
    assert [b["key"] for b in buckets] == ["*-500.0", "500.0-1500.0", "1500.0-*"]
    want = [(d < 500).sum(), ((d >= 500) & (d < 1500)).sum(), (d >= 1500).sum()]
    assert [b["doc_count"] for b in buckets] == want
    assert buckets[0]["to"] == 500 and buckets[1]["from"] == 500
    assert buckets[0]["c"]["count"] == want[0]


@pytest.mark.parametrize("kind", ["geohash_grid", "geotile_grid"])
def test_grids_equal_brute_force(es: Elasticsearch, geo_index: tuple[str, np.ndarray], kind: str) -> None:
    index, pts = geo_index
    precision = 3 if kind == "geohash_grid" else 5
    cell = _geohash if kind == "geohash_grid" else _tile
    keys = [cell(lat, lon, precision) for lat, lon in pts]
    counts: dict[str, int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    # Ties in Elasticsearch's hash order: a geohash's text, a tile's x then y.
    tie = (lambda k: k) if kind == "geohash_grid" else (lambda k: tuple(map(int, k.split("/"))))
    want = sorted(counts.items(), key=lambda kv: (-kv[1], tie(kv[0])))[:20]
    aggs = {
        "grid": {
            kind: {"field": "loc", "precision": precision, "size": 20},
            "aggs": {"n": {"max": {"field": "n"}}},
        }
    }
    buckets = es.search(index=index, size=0, aggs=aggs)["aggregations"]["grid"]["buckets"]
    assert [(b["key"], b["doc_count"]) for b in buckets] == want
    top_key = want[0][0]
    assert buckets[0]["n"]["value"] == max(i for i, k in enumerate(keys) if k == top_key)
    bounded = {
        "grid": {
            kind: {
                "field": "loc",
                "precision": precision,
                "bounds": {"top_left": "56,-6", "bottom_right": "39,16"},
            }
        }
    }
    inside = (pts[:, 0] <= 56) & (pts[:, 0] >= 39) & (pts[:, 1] >= -6) & (pts[:, 1] <= 16)
    got = es.search(index=index, size=0, aggs=bounded)["aggregations"]["grid"]["buckets"]
    assert sum(b["doc_count"] for b in got) == inside.sum()


@pytest.mark.parametrize(
    ("aggs", "reason"),
    [
        (
            {"g": {"geohash_grid": {"field": "loc", "precision": 13}}},
            "Invalid geohash aggregation precision of 13",
        ),
        ({"g": {"geotile_grid": {"field": "loc", "precision": 30}}}, "Invalid geotile_grid precision of 30"),
        (
            {"g": {"geo_bounds": {"field": "n"}}},
            "Field [n] of type [long] is not supported for aggregation [geo_bounds]",
        ),
        (
            {"g": {"avg": {"field": "loc"}}},
            "Field [loc] of type [geo_point] is not supported for aggregation [avg]",
        ),
        ({"g": {"geo_distance": {"field": "loc", "ranges": [{"to": 1}]}}}, "Missing [origin]"),
    ],
)
def test_bad_aggregations_are_400s(
    es: Elasticsearch, geo_index: tuple[str, np.ndarray], aggs: dict, reason: str
) -> None:
    index, _ = geo_index
    with pytest.raises(BadRequestError) as info:
        es.search(index=index, size=0, aggs=aggs)
    assert reason in str(info.value.body)


# -- _geo_distance sort ------------------------------------------------------------------------


def test_geo_distance_sort_equals_haversine(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, pts = geo_index
    d = haversine(48.85, 2.35, pts[:, 0], pts[:, 1]) / 1000
    for order in ("asc", "desc"):
        sort = [{"_geo_distance": {"loc": {"lat": 48.85, "lon": 2.35}, "order": order, "unit": "km"}}]
        found = es.search(index=index, sort=sort, size=25)["hits"]["hits"]
        want = np.argsort(d if order == "asc" else -d, kind="stable")[:25]
        assert [h["_id"] for h in found] == [str(i) for i in want]
        assert [h["sort"][0] for h in found] == pytest.approx(d[want].tolist(), rel=1e-9)


def test_geo_distance_sort_modes_several_points_and_missing(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings={"properties": {"loc": {"type": "geo_point"}}})
    es.index(index=index, id="near-far", document={"loc": [[0, 0.1], [0, 10]]})
    es.index(index=index, id="mid", document={"loc": [0, 2]})
    es.index(index=index, id="none", document={"other": 1})
    es.indices.refresh(index=index)

    def order(**options: Any) -> list[tuple[str, Any]]:
        sort = [{"_geo_distance": {"loc": options.pop("points", [0, 0]), **options}}]
        return [(h["_id"], h["sort"][0]) for h in es.search(index=index, sort=sort)["hits"]["hits"]]

    assert [i for i, _ in order()] == ["near-far", "mid", "none"]
    assert order()[-1][1] == "Infinity" or order()[-1][1] == float("inf")
    assert [i for i, _ in order(mode="max")] == ["mid", "near-far", "none"]
    assert [i for i, _ in order(order="desc")] == ["near-far", "mid", "none"]
    # Two origins: the nearest of all distances counts.
    assert [i for i, _ in order(points=[[0, 2], [50, 50]])] == ["mid", "near-far", "none"]
    got = order(points="0,0", unit="mi", distance_type="plane")
    assert got[1][1] == pytest.approx(
        geo.plane_distance(0, 0, np.array([geo.quantize(2, 0)[0]]), np.array([0.0]))[0] / 1609.344
    )


def test_geo_distance_sort_pages_with_search_after_and_pit(
    es: Elasticsearch, geo_index: tuple[str, np.ndarray]
) -> None:
    index, pts = geo_index
    d = haversine(10.0, 20.0, pts[:, 0], pts[:, 1])
    want = [str(i) for i in np.argsort(d, kind="stable")]
    sort = [{"_geo_distance": {"loc": "10,20"}}, {"n": "asc"}]
    seen: list[str] = []
    after = None
    while True:
        page = es.search(index=index, sort=sort, size=37, search_after=after)["hits"]["hits"]
        if not page:
            break
        seen += [h["_id"] for h in page]
        after = page[-1]["sort"]
    assert seen == want
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    try:
        seen, after = [], None
        while True:
            page = es.search(
                pit={"id": pit, "keep_alive": "1m"},
                sort=[{"_geo_distance": {"loc": "10,20"}}],
                size=50,
                search_after=after,
            )["hits"]["hits"]
            if not page:
                break
            seen += [h["_id"] for h in page]
            after = page[-1]["sort"]
        assert seen == want
    finally:
        es.close_point_in_time(id=pit)
    scroll = es.search(index=index, sort=[{"_geo_distance": {"loc": "10,20"}}], size=60, scroll="1m")
    seen = [h["_id"] for h in scroll["hits"]["hits"]]
    while True:
        scroll = es.scroll(scroll_id=scroll["_scroll_id"], scroll="1m")
        if not scroll["hits"]["hits"]:
            break
        seen += [h["_id"] for h in scroll["hits"]["hits"]]
    es.clear_scroll(scroll_id=scroll["_scroll_id"])
    assert seen == want


@pytest.mark.parametrize(
    ("sort", "reason"),
    [
        ([{"loc": "asc"}], "can't sort on geo_point field without using specific sorting feature"),
        (
            [{"_geo_distance": {"nope": [0, 0]}}],
            "failed to find mapper for [nope] for geo distance based sort",
        ),
        ([{"_geo_distance": {"n": [0, 0]}}], "unable to apply geo distance sort to field [n] of type [long]"),
        ([{"_geo_distance": {"loc": [0, 0], "mode": "sum"}}], "sort_mode [sum] isn't supported"),
        ([{"_geo_distance": {"loc": [0, 0], "unit": "parsecs"}}], "No distance unit match [parsecs]"),
        (
            [{"_geo_distance": {"loc": {"lat": 100, "lon": 0}}}],
            "illegal latitude value [100.0] for [GeoDistanceSort]",
        ),
    ],
)
def test_bad_geo_sorts_are_400s(
    es: Elasticsearch, geo_index: tuple[str, np.ndarray], sort: list, reason: str
) -> None:
    index, _ = geo_index
    with pytest.raises(BadRequestError) as info:
        es.search(index=index, sort=sort)
    assert reason in str(info.value.body)


def test_geo_distance_sort_ignore_unmapped(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, _ = geo_index
    sort = [{"_geo_distance": {"nope": [0, 0], "ignore_unmapped": True}}]
    hits = es.search(index=index, sort=sort, size=3)["hits"]["hits"]
    assert [h["sort"] for h in hits] == [["Infinity"]] * 3 or [h["sort"] for h in hits] == [
        [float("inf")]
    ] * 3


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    center=st.tuples(st.floats(40, 55), st.floats(-5, 15)),
    radii=st.lists(st.floats(0.5, 12), min_size=3, max_size=12),
    as_wkt=st.booleans(),
)
def test_any_star_polygon_equals_brute_force(
    es: Elasticsearch,
    geo_index: tuple[str, np.ndarray],
    center: tuple[float, float],
    radii: list[float],
    as_wkt: bool,
) -> None:
    index, pts = geo_index
    angles = np.linspace(0, 2 * math.pi, len(radii), endpoint=False)
    poly = [
        (center[0] + r * math.sin(a) * 0.6, center[1] + r * math.cos(a))
        for r, a in zip(radii, angles, strict=True)
    ]
    want = expected(_in_polygon(poly, pts[:, 0], pts[:, 1]))
    ring = [[o, a] for a, o in [*poly, poly[0]]]
    shape: Any = (
        "POLYGON ((" + ", ".join(f"{o!r} {a!r}" for o, a in ring) + "))"
        if as_wkt
        else {"type": "polygon", "coordinates": [ring]}
    )
    assert search_ids(es, index, {"geo_shape": {"loc": {"shape": shape}}}) == want


def test_circle_shape_and_coerced_center(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, pts = geo_index
    d = haversine(48.0, 5.0, pts[:, 0], pts[:, 1])
    circle = {"type": "circle", "coordinates": [5.0, 48.0], "radius": "400km"}
    assert search_ids(es, index, {"geo_shape": {"loc": {"shape": circle}}}) == expected(d <= 400_000)
    # 408 degrees of latitude wrap to 48 (over the pole: longitude + 180); COERCE reads it so.
    wrapped = haversine(48.0, -175.0, pts[:, 0], pts[:, 1])
    query = {
        "geo_distance": {
            "distance": "2000km",
            "loc": {"lat": 132.0, "lon": 5.0},
            "validation_method": "COERCE",
        }
    }
    assert search_ids(es, index, query) == expected(wrapped <= 2_000_000)


def test_points_without_doc_values_or_index(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(
        mappings={
            "properties": {
                "no_dv": {"type": "geo_point", "doc_values": False},
                "no_index": {"type": "geo_point", "index": False},
                "neither": {"type": "geo_point", "index": False, "doc_values": False},
            }
        }
    )
    es.index(
        index=index, id="1", document={"no_dv": "1,1", "no_index": "1,1", "neither": "1,1"}, refresh=True
    )
    for field in ("no_dv", "no_index"):  # searched through the index or through doc values
        query = {"geo_distance": {"distance": "1km", field: "1,1"}}
        assert search_ids(es, index, query) == {"1"}
    with pytest.raises(BadRequestError) as info:
        es.search(index=index, query={"geo_distance": {"distance": "1km", "neither": "1,1"}})
    assert "Cannot search on field [neither] since it is not indexed nor has doc values." in str(
        info.value.body
    )
    for request in (
        {"sort": [{"_geo_distance": {"no_dv": "1,1"}}]},
        {"aggs": {"b": {"geo_bounds": {"field": "no_dv"}}}},
    ):
        with pytest.raises(BadRequestError) as info:
            es.search(index=index, **request)
        assert "Can't load fielddata on [no_dv]" in str(info.value.body)


def test_geohash_precision_as_a_distance(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, _ = geo_index

    def cells(precision: Any) -> list:
        aggs = {"g": {"geohash_grid": {"field": "loc", "precision": precision, "size": 50}}}
        return es.search(index=index, size=0, aggs=aggs)["aggregations"]["g"]["buckets"]

    assert cells("100km") == cells(4) and len(cells(4)[0]["key"]) == 4
    assert cells("5000km") == cells(2)
    assert cells("3") == cells(3)


def test_geo_distance_sort_avg_and_median(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"loc": {"type": "geo_point"}}})
    es.index(
        index=index, id="spread", document={"loc": [[0, 0.1], [0, 0.2], [0, 10]]}
    )  # avg 3.43, median 0.2
    es.index(index=index, id="mid", document={"loc": [0, 2]})
    es.indices.refresh(index=index)
    for mode, first in (("avg", "mid"), ("median", "spread")):
        sort = [{"_geo_distance": {"loc": [0, 0], "mode": mode, "unit": "km"}}]
        hits = es.search(index=index, sort=sort)["hits"]["hits"]
        assert hits[0]["_id"] == first, mode
    median = es.search(index=index, sort=[{"_geo_distance": {"loc": [0, 0], "mode": "median"}}])["hits"][
        "hits"
    ]
    assert median[0]["sort"][0] == pytest.approx(
        haversine(0, 0, np.array([0.2]), np.array([0.0]))[0], rel=1e-6
    )


def test_bounding_box_with_geohash_corners(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    """A geohash corner stands for its cell's corner: `u` spans 45..90 N, 0..45 E and `s`
    0..45 N, 0..45 E, so `u` top-left to `s` bottom-right is 0..90 N, 0..45 E."""
    index, pts = geo_index
    lat, lon = pts[:, 0], pts[:, 1]
    want = expected((lat >= 0) & (lat <= 90) & (lon >= 0) & (lon <= 45))
    box = {"geo_bounding_box": {"loc": {"top_left": "u", "bottom_right": "s"}}}
    assert search_ids(es, index, box) == want
    fine = {
        "geo_bounding_box": {"loc": {"top_left": "u0", "bottom_right": "u0"}}
    }  # one cell: 45..50.625 N, 0..11.25 E
    assert search_ids(es, index, fine) == expected(
        (lat >= 45) & (lat <= 50.625) & (lon >= 0) & (lon <= 11.25)
    )


def test_top_hits_sorted_by_distance(es: Elasticsearch, geo_index: tuple[str, np.ndarray]) -> None:
    index, pts = geo_index
    d = haversine(48.0, 5.0, pts[:, 0], pts[:, 1]) / 1000
    even = np.arange(N) % 2 == 0
    aggs = {
        "parity": {
            "range": {"field": "n", "ranges": [{"to": N}]},
            "aggs": {
                "near": {"top_hits": {"size": 4, "sort": [{"_geo_distance": {"loc": "48,5", "unit": "km"}}]}}
            },
        },
        "even": {
            "filter": {"terms": {"n": np.flatnonzero(even).tolist()}},
            "aggs": {
                "far": {
                    "top_hits": {"size": 3, "sort": [{"_geo_distance": {"loc": "48,5", "order": "desc"}}]}
                }
            },
        },
    }
    found = es.search(index=index, size=0, aggs=aggs)["aggregations"]
    near = found["parity"]["buckets"][0]["near"]["hits"]["hits"]
    assert [h["_id"] for h in near] == [str(i) for i in np.argsort(d, kind="stable")[:4]]
    assert [h["sort"][0] for h in near] == pytest.approx(np.sort(d)[:4].tolist(), rel=1e-9)
    far = found["even"]["far"]["hits"]["hits"]
    evens = np.flatnonzero(even)
    assert [h["_id"] for h in far] == [str(i) for i in evens[np.argsort(-d[evens], kind="stable")[:3]]]
