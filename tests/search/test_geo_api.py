"""`geo_point` through the index APIs (`_field_caps`, `_mapping`, dynamic templates), the `fields`
and `docvalue_fields` options, export/import with the CLI, and PIT walks that see every document
exactly once while writers add points beside them."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from conftest import REPO, server_env
from elasticsearch import BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk

from tests.server_zygote import SERVER_ZYGOTE

MAPPING = {"properties": {"loc": {"type": "geo_point"}, "n": {"type": "long"}}}


def test_field_caps_mapping_and_dynamic_templates(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(
        mappings={
            **MAPPING,
            "dynamic_templates": [
                {"points": {"match": "*_pt", "mapping": {"type": "geo_point"}}},
                {"strings": {"match_mapping_type": "string", "mapping": {"type": "keyword"}}},
            ],
        }
    )
    es.index(
        index=index,
        id="1",
        document={"home_pt": "41.12,-71.34", "plain": {"lat": 1.5, "lon": 2.5}},
        refresh=True,
    )
    properties = es.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    assert properties["home_pt"] == {"type": "geo_point"}  # a template mapping to geo_point
    # No value is a geo_point by itself: an object of numbers maps as an object.
    assert properties["plain"] == {"properties": {"lat": {"type": "float"}, "lon": {"type": "float"}}}
    caps = es.field_caps(index=index, fields="*")["fields"]
    for name in ("loc", "home_pt"):
        assert caps[name] == {
            "geo_point": {
                "type": "geo_point",
                "metadata_field": False,
                "searchable": True,
                "aggregatable": True,
            }
        }
    query = {"geo_distance": {"distance": "1km", "home_pt": [-71.34, 41.12]}}
    assert es.search(index=index, query=query)["hits"]["total"]["value"] == 1


def test_fields_and_docvalue_fields(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(
        mappings={
            "properties": {"loc": {"type": "geo_point"}, "o": {"properties": {"p": {"type": "geo_point"}}}}
        }
    )
    source = {
        "loc": [[-71.34, 41.12], "1,2", "bad,point"],
        "o": [{"p": {"lat": 1, "lon": 2}}, {"p": "POINT (3 4)"}],
    }
    with pytest.raises(BadRequestError):
        es.index(index=index, id="1", document=source)
    source["loc"].pop()
    es.index(index=index, id="1", document=source, refresh=True)
    hit = es.search(index=index, fields=["loc", "o.p"])["hits"]["hits"][0]
    assert hit["_source"] == source
    assert hit["fields"] == {
        "loc": [
            {"type": "Point", "coordinates": [-71.34, 41.12]},
            {"type": "Point", "coordinates": [2.0, 1.0]},
        ],
        "o.p": [{"type": "Point", "coordinates": [2.0, 1.0]}, {"type": "Point", "coordinates": [3.0, 4.0]}],
    }
    wkt = es.search(index=index, fields=[{"field": "loc", "format": "wkt"}])["hits"]["hits"][0]["fields"]
    assert wkt == {"loc": ["POINT (-71.34 41.12)", "POINT (2.0 1.0)"]}
    stored = es.search(index=index, docvalue_fields=["loc"])["hits"]["hits"][0]["fields"]["loc"]
    assert [(round(p["lat"], 6), round(p["lon"], 6)) for p in stored] == [(1.0, 2.0), (41.12, -71.34)]


def cli(*args: str) -> None:
    done = SERVER_ZYGOTE.run(
        [sys.executable, "-m", "leafsearch", *args],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr.decode()


def test_export_and_import_keep_points(
    es: Elasticsearch, server: str, new_index: Callable[..., str], tmp_path: Path
) -> None:
    index = new_index(mappings=MAPPING)
    forms = [{"lat": 10.5, "lon": 20.25}, [20.25, 10.5], "10.5,20.25", "POINT (20.25 10.5)"]
    bulk(
        es, ({"_index": index, "_id": str(i), "loc": forms[i % 4], "n": i} for i in range(200)), refresh=True
    )
    exported = tmp_path / "points.ndjson"
    cli("export", index, str(exported), "--url", server, "--slices", "2")
    mapping = tmp_path / "mapping.json"
    mapping.write_bytes(orjson.dumps(MAPPING))
    copy = f"{index}-copy"
    cli("import", str(exported), copy, "--url", server, "--mapping", str(mapping))
    try:
        es.indices.refresh(index=copy)
        query = {"geo_distance": {"distance": "1m", "loc": "10.5,20.25"}}
        assert es.count(index=copy, query=query)["count"] == 200
        got = {h["_id"]: h["_source"]["loc"] for h in es.search(index=copy, size=200)["hits"]["hits"]}
        assert got == {str(i): forms[i % 4] for i in range(200)}  # `_source` as sent
    finally:
        es.indices.delete(index=copy)


def test_pit_walk_sees_each_point_once_with_writers_beside(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings=MAPPING, settings={"number_of_shards": 2})
    bulk(
        es,
        ({"_index": index, "_id": str(i), "loc": [i % 90, i % 45], "n": i} for i in range(500)),
        refresh=True,
    )
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        i = 500
        try:
            while not stop.is_set():
                bulk(es, ({"_index": index, "_id": str(j), "loc": [1, 1], "n": j} for j in range(i, i + 20)))
                es.indices.refresh(index=index)
                i += 20
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    seen: list[str] = []
    try:
        after = None
        sort = [{"_geo_distance": {"loc": "0,0"}}, {"n": "asc"}]
        while True:
            box = {"geo_bounding_box": {"loc": {"top_left": [-1, 90], "bottom_right": [90, -1]}}}
            page = es.search(
                pit={"id": pit, "keep_alive": "1m"}, sort=sort, size=60, search_after=after, query=box
            )
            hits = page["hits"]["hits"]
            if not hits:
                break
            seen += [h["_id"] for h in hits]
            after = hits[-1]["sort"]
    finally:
        stop.set()
        writer.join()
        es.close_point_in_time(id=pit)
    assert not errors
    assert sorted(seen, key=int) == [str(i) for i in range(500)]


def test_counting_aggregations_and_index_sort(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"loc": ["1,1", "2,2"]})
    es.index(index=index, id="2", document={"loc": "1,1"}, refresh=True)
    aggs = {"n": {"value_count": {"field": "loc"}}, "d": {"cardinality": {"field": "loc"}}}
    found = es.search(index=index, size=0, aggs=aggs)["aggregations"]
    assert found == {"n": {"value": 3}, "d": {"value": 2}}
    with pytest.raises(BadRequestError) as info:
        es.indices.create(index=index + "-sorted", mappings=MAPPING, settings={"index.sort.field": "loc"})
    assert "invalid index sort field:[loc]" in str(info.value.body)


def test_synthetic_source_shows_stored_points(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"_source": {"mode": "synthetic"}, **MAPPING})
    es.index(index=index, id="1", document={"loc": [[2, 1], "0.5,0.5"], "n": 1}, refresh=True)
    loc = es.get(index=index, id="1")["_source"]["loc"]
    # Sorted by their encoded value, as stored (Lucene's quantization).
    assert [(round(p["lat"], 6), round(p["lon"], 6)) for p in loc] == [(0.5, 0.5), (1.0, 2.0)]
    assert (
        es.search(index=index, query={"geo_distance": {"distance": "1m", "loc": "1,2"}})["hits"]["total"][
            "value"
        ]
        == 1
    )
