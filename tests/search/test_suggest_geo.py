"""`geo` contexts of `completion` fields over HTTP with the official client: the points given with
an input in every form, or read from a geo_point field (`path`); the geo context query (a point,
`precision`, `boost`, `neighbours`) against a brute force over the geohash grid; bad input as
400s that index nothing; a writer beside; a restart."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leafsearch.testing import Server
from tests.concurrency import readers_beside_a_writer
from tests.server_zygote import SERVER_ZYGOTE

EXAMPLES = itertools.count()


def mapping(precision: Any = 4) -> dict[str, Any]:
    contexts = [
        {"name": "loc", "type": "geo", "precision": precision},
        {"name": "at", "type": "geo", "path": "pin"},
    ]
    return {"properties": {"s": {"type": "completion", "contexts": contexts}, "pin": {"type": "geo_point"}}}


def suggest(es: Elasticsearch, index: str, contexts: dict[str, Any], prefix: str = "caf") -> list[tuple]:
    body = {"x": {"prefix": prefix, "completion": {"field": "s", "size": 100, "contexts": contexts}}}
    found = es.search(index=index, suggest=body)["suggest"]["x"][0]["options"]
    return [(o["_id"], o["_score"], o.get("contexts")) for o in found]


def grid(lat: float, lon: float, length: int) -> tuple[int, int]:
    """A point's (column, row) in the geohash grid of cells `length` characters long."""
    bits = 5 * length
    lon_bits, lat_bits = (bits + 1) // 2, bits // 2
    x = min(int((lon + 180) / 360 * 2**lon_bits), 2**lon_bits - 1)
    y = min(int((lat + 90) / 180 * 2**lat_bits), 2**lat_bits - 1)
    return x, y


def near(a: tuple[float, float], b: tuple[float, float], length: int) -> bool:
    """Whether two points' cells are the same or neighbours (across the antimeridian too)."""
    (ax, ay), (bx, by) = grid(*a, length), grid(*b, length)
    columns = 2 ** ((5 * length + 1) // 2)
    return abs(ay - by) <= 1 and min(abs(ax - bx), columns - abs(ax - bx)) <= 1


def test_points_in_every_form_and_from_a_path(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=mapping("20km"))  # cells of 5 characters
    toronto, london = (43.662, -79.38), (51.5072, -0.1276)
    forms = {
        "object": {"lat": toronto[0], "lon": toronto[1]},
        "array": [toronto[1], toronto[0]],
        "text_in_array": [f"{toronto[0]},{toronto[1]}"],
        "geojson": {"type": "Point", "coordinates": [toronto[1], toronto[0]]},
        "wkt_in_array": [f"POINT ({toronto[1]} {toronto[0]})"],
        "geohash": "dpz83dffmxps",  # a string is a geohash, cut to the precision
    }
    for i, (name, value) in enumerate(forms.items()):
        source = {"s": {"input": f"cafe {name}", "weight": i + 1, "contexts": {"loc": value}}}
        es.index(index=index, id=name, document=source)
    es.index(
        index=index,
        id="london",
        document={"s": {"input": "cafe uk", "contexts": {"loc": [list(london[::-1])]}}},
    )
    es.index(
        index=index,
        id="pinned",
        document={"s": "cafe pinned", "pin": f"{london[0]},{london[1]}"},
        refresh=True,
    )

    found = suggest(es, index, {"loc": {"lat": toronto[0], "lon": toronto[1]}})
    assert {o[0] for o in found} == set(forms)
    assert {tuple(o[2]["loc"]) for o in found} == {("dpz83",)}  # the indexed cell
    assert [o[0] for o in suggest(es, index, {"loc": "gcpvj"})] == ["london"]
    assert [o[0] for o in suggest(es, index, {"at": {"lat": london[0], "lon": london[1]}})] == ["pinned"]
    boosted = suggest(
        es, index, {"loc": [{"context": {"lat": 51.5, "lon": -0.1}, "boost": 4, "precision": 2}]}
    )
    assert boosted == [("london", 4.0, {"loc": ["gcpvj"]})]
    # Without a context the suggester reads every input.
    assert len(suggest(es, index, {})) == len(forms) + 2


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"s": {"input": "a", "contexts": {"loc": {"lat": 91, "lon": 0}}}}, "latitude"),
        ({"s": {"input": "a", "contexts": {"loc": {"lat": 1}}}}, "field [lon] missing"),
        ({"s": {"input": "a", "contexts": {"loc": [True]}}}, "geo_point expected"),
    ],
)
def test_bad_points_are_400s_that_index_nothing(
    es: Elasticsearch, new_index: Callable[..., str], body: dict, message: str
) -> None:
    index = new_index(mappings=mapping())
    with pytest.raises(BadRequestError) as bad:
        es.index(index=index, id="1", document=body, refresh=True)
    assert message in str(bad.value.body)
    assert es.count(index=index)["count"] == 0


def test_bad_mappings_and_queries_are_400s(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=mapping())
    for precision in (0, 13, "far"):
        with pytest.raises(BadRequestError):
            es.indices.create(index=f"{index}-bad", mappings=mapping(precision))
    es.index(
        index=index, id="1", document={"s": {"input": "cafe", "contexts": {"loc": [1, 2]}}}, refresh=True
    )
    for contexts in (
        {"loc": {"context": {"lat": 100, "lon": 0}}},
        {"loc": {"context": {"lat": 1, "lon": 2}, "neighbours": [20]}},
        {"loc": {"context": {"lat": 1, "lon": 2}, "other": 1}},
        {"loc": "not a point!"},
    ):
        with pytest.raises(BadRequestError) as bad:
            suggest(es, index, contexts)
        assert bad.value.status_code == 400


def test_a_geo_context_path_must_name_a_geo_point_field(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings=mapping())
    for pin, found in (
        ({"type": "keyword"}, "must be mapped to geo_point, found [keyword]"),
        (None, "is not defined"),
    ):
        body = mapping()
        body["properties"].pop("pin")
        if pin is not None:
            body["properties"]["pin"] = pin
        with pytest.raises(BadRequestError) as bad:
            es.indices.create(index=f"{index}-bad", mappings=body)
        assert bad.value.error == "parse_exception" and found in str(bad.value.info)
        assert not es.indices.exists(index=f"{index}-bad")
        moved = {"s2": {"type": "completion", "contexts": [{"name": "at", "type": "geo", "path": "nowhere"}]}}
        with pytest.raises(BadRequestError) as bad:
            es.indices.put_mapping(index=index, properties=moved)
        assert bad.value.error == "parse_exception"
        assert "s2" not in es.indices.get_mapping(index=index)[index]["mappings"]["properties"]


points = st.tuples(st.floats(-89.9, 89.9), st.floats(-179.9, 179.9))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    found=st.lists(points, min_size=1, max_size=30),
    center=points,
    precision=st.integers(1, 4),
    asked=st.integers(1, 6),
    neighbours=st.lists(st.integers(1, 5), max_size=2),
    boost=st.sampled_from([1, 2.5]),
)
def test_geo_context_queries_match_a_brute_force(
    es: Elasticsearch,
    new_index: Callable[..., str],
    found: list[tuple[float, float]],
    center: tuple[float, float],
    precision: int,
    asked: int,
    neighbours: list[int],
    boost: float,
) -> None:
    index = new_index(
        settings={"number_of_shards": 2}, mappings=mapping(precision), suffix=f"-{next(EXAMPLES)}"
    )
    actions = (
        {"_index": index, "_id": str(i), "s": {"input": f"cafe {i}", "weight": i + 1, "contexts": {"loc": p}}}
        for i, p in enumerate({"lat": a, "lon": o} for a, o in found)
    )
    bulk(es, actions, refresh=True)
    query: dict[str, Any] = {
        "context": {"lat": center[0], "lon": center[1]},
        "precision": asked,
        "boost": boost,
    }
    if neighbours:
        query["neighbours"] = neighbours
    length = min(precision, asked)
    lengths = [length] if not neighbours and length == precision else [n for n in neighbours if n < length]

    def matches(p: tuple[float, float]) -> bool:
        same = grid(*p, length) == grid(*center, length)
        return same or any(near(p, center, n) for n in lengths)

    want = sorted(((str(i), (i + 1) * boost) for i, p in enumerate(found) if matches(p)), key=lambda o: -o[1])
    assert [(o[0], o[1]) for o in suggest(es, index, {"loc": query})] == want


def test_suggestions_with_a_writer_beside(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=mapping(3))
    center = (48.85, 2.35)

    def point(i: int) -> tuple[float, float]:
        return (i * 37 % 170) - 85 + 0.5, (i * 71 % 350) - 175 + 0.5

    first = [{"input": f"cafe {i}", "contexts": {"loc": point(i)[::-1]}} for i in range(100)]
    bulk(es, ({"_index": index, "_id": str(i), "s": s} for i, s in enumerate(first)), refresh=True)
    stop = threading.Event()
    failures: list[str] = []

    def write() -> None:
        for i in itertools.count(100):
            if stop.is_set():
                return
            source = {
                "s": {"input": f"cafe {i}", "contexts": {"loc": list(point(i)[::-1])}},
                "pin": list(center[::-1]),
            }
            es.index(index=index, id=str(i), document=source, refresh=i % 5 == 0)

    def read() -> None:
        for _ in range(10):
            for o in suggest(es, index, {"loc": {"lat": center[0], "lon": center[1]}}):
                if not near(point(int(o[0])), center, 3):
                    failures.append(f"{o} is not near")

    readers_beside_a_writer(write, [read, read], stop)
    assert not failures, failures[:3]
    es.indices.refresh(index=index)
    total = es.count(index=index)["count"]
    expected = {str(i) for i in range(total) if near(point(i), center, 3)}
    assert {o[0] for o in suggest(es, index, {"loc": {"lat": center[0], "lon": center[1]}})} == expected


def test_geo_contexts_after_a_restart(tmp_path: Path) -> None:
    with Server(tmp_path / "data", popen=SERVER_ZYGOTE.popen) as server:
        es = server.client()
        es.indices.create(index="places", mappings=mapping(5))
        es.index(
            index="places", id="1", document={"s": {"input": "cafe", "contexts": {"loc": [2.35, 48.85]}}}
        )
        es.index(index="places", id="2", document={"s": "cafe two", "pin": [2.35, 48.85]}, refresh=True)
    with Server(tmp_path / "data", popen=SERVER_ZYGOTE.popen) as server:
        es = server.client()
        assert suggest(es, "places", {"loc": {"lat": 48.85, "lon": 2.35}}) == [("1", 1.0, {"loc": ["u09tv"]})]
        assert [o[0] for o in suggest(es, "places", {"at": "u09tvk"})] == ["2"]
