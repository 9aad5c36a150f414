"""`geo_point` doc values in Painless scripts (`ScriptDocValues.GeoPoints`), through the official
client: `doc['loc'].lat`/`.lon`/`.value`, the distances in meters (`arcDistance`, `planeDistance`,
`geohashDistance` and their `...WithDefault`), the centroid and bounding box, in `script_fields`,
`_script` sorts, `script_score`, `script` queries and script aggregations; the column run and the
per-document run give the same values as a brute force over the quantized points, while a writer
adds points beside, and after a restart."""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from elasticsearch import BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from leafsearch.testing import Server
from tests.concurrency import readers_beside_a_writer
from tests.server_zygote import SERVER_ZYGOTE

MAPPING = {"properties": {"loc": {"type": "geo_point"}, "n": {"type": "long"}}}
RADIUS = 6_371_008.7714  # Elasticsearch's mean earth radius, in meters

# Column expressions (scripts/vector.py) and the same computations as per-document scripts.
COLUMN_ARC = "doc['loc'].arcDistanceWithDefault(params.lat, params.lon, -1)"
DOCUMENT_ARC = "def p = doc['loc']; return p.arcDistanceWithDefault(params.lat, params.lon, -1);"
COLUMN_PLANE = "1000000.0 / (1 + doc['loc'].planeDistance(params.lat, params.lon))"
DOCUMENT_PLANE = "def p = doc['loc']; return 1000000.0 / (1 + p.planeDistance(params.lat, params.lon));"


def quantized(lat: float, lon: float) -> tuple[float, float]:
    """A point as Lucene's 32-bit encoding keeps it (what doc values hold): latitude 90 and
    longitude 180 are kept as the largest encoded values, one step below them."""
    lat_step, lon_step = 180.0 / 2**32, 360.0 / 2**32
    top = 2**31 - 1
    return min(math.floor(lat / lat_step), top) * lat_step, min(math.floor(lon / lon_step), top) * lon_step


def arc(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Lucene's `SloppyMath.haversinMeters` as Elasticsearch computes `arcDistance` (with `1 - cos`,
    which rounds distances under a few millimeters to 0), exactly."""
    h1 = 1 - math.cos(math.radians(lat1) - math.radians(lat2))
    h2 = 1 - math.cos(math.radians(lon1) - math.radians(lon2))
    h = h1 + math.cos(math.radians(lat1)) * math.cos(math.radians(lat2)) * h2
    return 2 * RADIUS * math.asin(min(1.0, math.sqrt(h * 0.5)))


def plane(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    x = math.radians(lon2 - lon1) * math.cos(math.radians((lat2 + lat1) / 2))
    return math.hypot(x, math.radians(lat2 - lat1)) * RADIUS


def script_sort(source: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"_script": {"type": "number", "script": {"source": source, "params": params}, "order": "asc"}},
        {"n": "asc"},
    ]


def test_script_fields_read_points_distances_and_shapes(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="one", document={"loc": "40.5,-73.25", "n": 1})
    es.index(index=index, id="two", document={"loc": [[10, 20], {"lat": 30, "lon": 0}], "n": 2})
    es.index(index=index, id="none", document={"n": 3}, refresh=True)
    lat, lon = quantized(40.5, -73.25)
    scripts = {
        "lat": "doc['loc'].lat",
        "lon": "doc['loc'].getLon()",
        "point": "doc['loc'].value",
        "first_lat": "doc['loc'][0].lat + 0",
        "lats": "doc['loc'].lats",
        "arc": "doc['loc'].arcDistance(params.lat, params.lon)",
        "plane": "doc['loc'].planeDistance(40, -73)",
        "geohash": "doc['loc'].geohashDistance('dr5r')",
        "centroid": "doc['loc'].centroid",
        "top_left": "doc['loc'].boundingBox.topLeft()",
        "label": "doc['loc'].getLabelPosition()",
        "text": "'at ' + doc['loc'].value",
        "type": "doc['loc'].dimensionalType",
    }
    script_fields = {
        name: {"script": {"source": source, "params": {"lat": 41, "lon": -74}}}
        for name, source in scripts.items()
    }
    hit = es.search(index=index, query={"ids": {"values": ["one"]}}, script_fields=script_fields)["hits"][
        "hits"
    ][0]
    fields = hit["fields"]
    assert fields["lat"] == [pytest.approx(lat, abs=0)] and fields["lon"] == [lon]
    assert fields["point"] == [{"lat": lat, "lon": lon}]
    assert fields["first_lat"] == [lat] and fields["lats"] == [lat]
    assert fields["arc"] == [pytest.approx(arc(lat, lon, 41, -74), rel=1e-9)]
    assert fields["plane"] == [pytest.approx(plane(lat, lon, 40, -73), rel=1e-9)]
    # A geohash is decoded to its cell's lower left corner, as Elasticsearch decodes it.
    assert fields["geohash"] == [pytest.approx(arc(lat, lon, 40.60546875, -74.1796875), rel=1e-9)]
    assert fields["centroid"] == fields["top_left"] == fields["label"] == [{"lat": lat, "lon": lon}]
    assert fields["text"] == [f"at {lat!r}, {lon!r}"]
    assert fields["type"] == [0]

    # Two points: sorted as doc values are, their mean, the box of their extremes.
    two = es.search(index=index, query={"ids": {"values": ["two"]}}, script_fields=script_fields)["hits"][
        "hits"
    ]
    fields = two[0]["fields"]
    (a_lat, a_lon), (b_lat, b_lon) = quantized(20, 10), quantized(30, 0)
    assert fields["lats"] == [a_lat, b_lat] or fields["lats"] == [b_lat, a_lat]
    assert fields["centroid"] == [{"lat": (a_lat + b_lat) / 2, "lon": (a_lon + b_lon) / 2}]
    assert fields["top_left"] == [{"lat": b_lat, "lon": b_lon}]

    # Without a point: the defaults, or Elasticsearch's error for a missing value.
    defaults = {
        "arc": {"script": {"source": "doc['loc'].arcDistanceWithDefault(1, 2, 42)"}},
        "hash": {"script": {"source": "doc['loc'].geohashDistanceWithDefault('u0', 7.5)"}},
        "empty": {"script": {"source": "doc['loc'].empty && doc['loc'].centroid == null"}},
    }
    none = es.search(index=index, query={"ids": {"values": ["none"]}}, script_fields=defaults)["hits"]["hits"]
    assert none[0]["fields"] == {"arc": [42.0], "hash": [7.5], "empty": [True]}
    with pytest.raises(BadRequestError) as missing:
        es.search(index=index, query={"ids": {"values": ["none"]}}, script_fields={"x": script_fields["lat"]})
    assert "Use doc[<field>].size()==0" in str(missing.value.body)


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        ("doc['loc'].arcDistance('a', 1)", "class_cast_exception"),
        ("doc['loc'].geohashDistance('a!')", "illegal_argument_exception"),
        ("doc['loc'].arcDistance(1)", "illegal_argument_exception"),
        ("doc['n'].lat", "illegal_argument_exception"),
    ],
)
def test_bad_geo_calls_are_script_errors(
    es: Elasticsearch, new_index: Callable[..., str], source: str, cause: str
) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"loc": [1, 2], "n": 1}, refresh=True)
    with pytest.raises(BadRequestError) as bad:
        es.search(index=index, sort=script_sort(source, {}))
    assert bad.value.status_code == 400
    assert bad.value.body["error"]["root_cause"][0]["type"] == "script_exception"
    assert cause in str(bad.value.body)


EXAMPLES = itertools.count()
points = st.lists(
    st.one_of(st.none(), st.tuples(st.floats(-90, 90), st.floats(-180, 180))), min_size=1, max_size=40
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(found=points, center=st.tuples(st.floats(-90, 90), st.floats(-180, 180)))
@example(found=[(90.0, 180.0), (-90.0, -180.0)], center=(49.0, 0.0))  # (the encoding's edges)
def test_script_distances_match_a_brute_force(
    es: Elasticsearch,
    new_index: Callable[..., str],
    found: list[tuple[float, float] | None],
    center: tuple[float, float],
) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPING, suffix=f"-{next(EXAMPLES)}")
    docs = [
        {"n": i} if p is None else {"n": i, "loc": {"lat": p[0], "lon": p[1]}} for i, p in enumerate(found)
    ]
    bulk(es, ({"_index": index, "_id": str(d["n"]), "_source": d} for d in docs), refresh=True)
    params = {"lat": center[0], "lon": center[1]}
    expected = {i: -1.0 if p is None else arc(*quantized(*p), *center) for i, p in enumerate(found)}
    order = sorted(expected, key=lambda i: (expected[i], i))
    for source in (COLUMN_ARC, DOCUMENT_ARC):
        hits = es.search(index=index, size=len(found), sort=script_sort(source, params))["hits"]["hits"]
        assert [h["sort"][0] for h in hits] == [pytest.approx(expected[i], rel=1e-9, abs=1e-3) for i in order]
    # A script query and a script aggregation over the same distances.
    limit = 5_000_000.0
    query = {"script": {"script": {"source": f"{COLUMN_ARC} < params.r", "params": {**params, "r": limit}}}}
    aggs = {
        "far": {"max": {"script": {"source": COLUMN_ARC, "params": params}}},
        "far_doc": {"max": {"script": {"source": DOCUMENT_ARC, "params": params}}},
    }
    answer = es.search(index=index, size=len(found), query=query, aggs=aggs)
    near = [d for d in expected.values() if d < limit]
    assert sorted(int(h["_id"]) for h in answer["hits"]["hits"]) == [
        i for i, d in expected.items() if d < limit
    ]
    assert answer["aggregations"]["far"]["value"] == (
        pytest.approx(max(near), rel=1e-9, abs=1e-3) if near else None
    )
    assert answer["aggregations"]["far_doc"]["value"] == answer["aggregations"]["far"]["value"]


def test_script_score_and_plane_distance_with_a_writer_beside(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPING)
    center = (45.0, 7.0)

    def point(i: int) -> tuple[float, float]:
        return (i * 7 % 170) - 85.0 + 0.25, (i * 13 % 350) - 175.0 + 0.5

    bulk(
        es,
        ({"_index": index, "_id": str(i), "n": i, "loc": list(point(i))[::-1]} for i in range(200)),
        refresh=True,
    )
    stop = threading.Event()
    failures: list[str] = []

    def write() -> None:
        i = 200
        while not stop.is_set():
            es.index(
                index=index, id=str(i), document={"n": i, "loc": {"lat": point(i)[0], "lon": point(i)[1]}}
            )
            if i % 10 == 0:
                es.indices.refresh(index=index)
            i += 1

    def read(source: str) -> None:
        for _ in range(6):
            query = {
                "script_score": {
                    "query": {"match_all": {}},
                    "script": {
                        "source": source,
                        "params": {"lat": center[0], "lon": center[1]},
                    },
                }
            }
            hits = es.search(index=index, size=50, query=query)["hits"]["hits"]
            for h in hits:
                want = 1e6 / (1 + plane(*quantized(*point(int(h["_id"]))), *center))
                if h["_score"] != pytest.approx(want, rel=1e-6):
                    failures.append(f"{h['_id']}: {h['_score']} != {want}")
            scores = [h["_score"] for h in hits]
            if scores != sorted(scores, reverse=True):
                failures.append(f"out of order {scores}")

    readers_beside_a_writer(write, [partial(read, COLUMN_PLANE), partial(read, DOCUMENT_PLANE)], stop)
    assert not failures, failures[:3]


def test_geo_scripts_after_a_restart(tmp_path: Any) -> None:
    sort = script_sort(COLUMN_ARC, {"lat": 0, "lon": 0})
    with Server(tmp_path / "data", popen=SERVER_ZYGOTE.popen) as server:
        es = server.client()
        es.indices.create(index="places", mappings=MAPPING)
        es.index(index="places", id="far", document={"n": 1, "loc": [90, 40]})
        es.index(index="places", id="near", document={"n": 2, "loc": "1,1"}, refresh=True)
        before = es.search(index="places", sort=sort)["hits"]["hits"]
    with Server(tmp_path / "data", popen=SERVER_ZYGOTE.popen) as server:
        after = server.client().search(index="places", sort=sort)["hits"]["hits"]
    assert [h["_id"] for h in after] == ["near", "far"]
    assert [h["sort"] for h in after] == [h["sort"] for h in before]
    assert after[0]["sort"][0] == pytest.approx(arc(*quantized(1, 1), 0, 0), rel=1e-9)
