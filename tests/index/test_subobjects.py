"""`subobjects: false`: an object (or the root) whose fields are leaves named with their dots,
through the HTTP API and the official client: mappings, documents (alone and in bulk, with
objects flattened), searches and aggregations on the dotted names, updates and refusals."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch, helpers


@pytest.fixture
def metrics(es: Elasticsearch, index_name: str) -> Iterator[str]:
    es.indices.create(
        index=index_name,
        mappings={
            "properties": {
                "metrics": {
                    "type": "object",
                    "subobjects": False,
                    "properties": {"time": {"type": "long"}, "time.max": {"type": "long"}},
                }
            }
        },
    )
    yield index_name
    es.indices.delete(index=index_name)


def test_dotted_leaves_are_mapped_searched_and_aggregated(es: Elasticsearch, metrics: str) -> None:
    es.index(index=metrics, id="1", document={"metrics": {"time": 10, "time.max": 100}})
    # An object under `subobjects: false` is flattened: `host.name` becomes the leaf `host.name`.
    es.index(index=metrics, id="2", document={"metrics": {"time": 20, "host": {"name": "a"}}})
    es.index(index=metrics, id="3", document={"metrics.time.max": 300, "metrics": {"cpu.pct": 0.5}})
    es.indices.refresh(index=metrics)
    properties = es.indices.get_mapping(index=metrics)[metrics]["mappings"]["properties"]["metrics"]
    assert properties["subobjects"] is False
    assert sorted(properties["properties"]) == ["cpu.pct", "host.name", "time", "time.max"]
    assert properties["properties"]["host.name"]["type"] == "text"
    found = es.search(index=metrics, query={"range": {"metrics.time.max": {"gte": 100}}}, sort=["_doc"])
    assert sorted(h["_id"] for h in found["hits"]["hits"]) == ["1", "3"]
    assert es.count(index=metrics, query={"match": {"metrics.host.name": "a"}})["count"] == 1
    stats = es.search(index=metrics, size=0, aggs={"m": {"max": {"field": "metrics.time.max"}}})
    assert stats["aggregations"]["m"]["value"] == 300
    # The source comes back as sent.
    assert es.get(index=metrics, id="3")["_source"] == {"metrics.time.max": 300, "metrics": {"cpu.pct": 0.5}}


def test_root_without_subobjects_in_bulk_beside_writers(es: Elasticsearch, index_name: str) -> None:
    """The root's fields are leaves; bulk requests from several clients at once (the batch parser
    and the per-document one) map the same dotted leaves."""
    es.indices.create(index=index_name, mappings={"subobjects": False})
    try:

        def write(w: int) -> None:
            actions = (
                {"_index": index_name, "_id": f"{w}-{i}", "_source": {"a.b": i, "a": {"c": w}, "x.y.z": "t"}}
                for i in range(50)
            )
            helpers.bulk(es, actions)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        es.indices.refresh(index=index_name)
        mapping = es.indices.get_mapping(index=index_name)[index_name]["mappings"]
        assert mapping["subobjects"] is False
        assert sorted(mapping["properties"]) == ["a.b", "a.c", "x.y.z"]
        assert es.count(index=index_name, query={"term": {"a.c": 2}})["count"] == 50
        assert es.count(index=index_name, query={"range": {"a.b": {"gte": 40}}})["count"] == 30
    finally:
        es.indices.delete(index=index_name)


def test_refusals(http: httpx.Client, es: Elasticsearch, metrics: str, index_name: str) -> None:
    changed = http.put(
        f"/{metrics}/_mapping", json={"properties": {"metrics": {"type": "object", "subobjects": True}}}
    )
    assert changed.status_code == 400
    assert error_of(changed)["reason"] == (
        "the [subobjects] parameter can't be updated for the object mapping [metrics]"
    )
    # A mapping update under the object names its leaves with their dots, as the object does.
    http.put(
        f"/{metrics}/_mapping",
        json={"properties": {"metrics": {"properties": {"mem.used": {"type": "long"}}}}},
    )
    props = es.indices.get_mapping(index=metrics)[metrics]["mappings"]["properties"]["metrics"]["properties"]
    assert "mem.used" in props
    nested = http.put(
        f"/{index_name}-n",
        json={
            "mappings": {
                "properties": {
                    "m": {"type": "object", "subobjects": False, "properties": {"x": {"type": "nested"}}}
                }
            }
        },
    )
    assert nested.status_code == 400
    assert (
        "Tried to add nested object [x] to object [m] which does not support subobjects"
        in error_of(nested)["reason"]
    )
    bad = http.put(f"/{index_name}-b", json={"mappings": {"subobjects": "sometimes"}})
    assert bad.status_code == 400
    assert error_of(bad)["type"] == "mapper_parsing_exception"
    assert (
        http.head(f"/{index_name}-n").status_code == 404 and http.head(f"/{index_name}-b").status_code == 404
    )


def test_subobjects_auto_is_refused_as_not_supported(http: httpx.Client, index_name: str) -> None:
    for mappings in ({"subobjects": "auto"}, {"properties": {"m": {"type": "object", "subobjects": "auto"}}}):
        response = http.put(f"/{index_name}", json={"mappings": mappings})
        assert response.status_code == 400
        assert "is not supported by leafsearch" in error_of(response)["reason"]
        assert http.head(f"/{index_name}").status_code == 404
