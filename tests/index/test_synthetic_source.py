"""Synthetic `_source` through the HTTP API and the official client: the shape Elasticsearch
rebuilds (objects from the mapping, sorted keys, sorted and deduplicated values, values at their
field's precision and format), in gets, searches, mgets and `_source` filtering, with writers
updating the documents while readers read them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch

PROPERTIES = {
    "k": {"type": "keyword", "ignore_above": 5},
    "n": {"type": "long"},
    "f": {"type": "float"},
    "d": {"type": "date"},
    "t": {"type": "text"},
    "ip": {"type": "ip"},
    "b": {"type": "boolean"},
    "s": {"type": "scaled_float", "scaling_factor": 100},
    "o": {"properties": {"x": {"type": "long"}}},
    "m": {"type": "object", "subobjects": False, "properties": {"a.b": {"type": "long"}}},
}
SENT = {
    "t": "Hello there",
    "k": ["zz", "aa", "zz", "toolongvalue"],
    "n": [3, 1, 3],
    "f": 1.1,
    "d": "2020-01-01",
    "ip": "::ffff:1.2.3.4",
    "b": [True, False],
    "s": 1.234,
    "o": [{"x": 3}, {"x": 1}],
    "o.x": 2,
    "m": {"a.b": 5},
    "gone": None,
}
SYNTHETIC = {
    "b": [False, True],
    "d": "2020-01-01T00:00:00.000Z",
    "f": 1.1,
    "ip": "1.2.3.4",
    "k": ["aa", "zz", "toolongvalue"],
    "m": {"a.b": 5},
    "n": [1, 3, 3],
    "o": {"x": [1, 2, 3]},
    "s": 1.23,
    "t": "Hello there",
}


@pytest.fixture(params=["mapping", "setting"])
def synthetic(request: pytest.FixtureRequest, es: Elasticsearch, index_name: str) -> Iterator[str]:
    """An index answering synthetic sources, by `_source.mode` or `index.mapping.source.mode`."""
    if request.param == "mapping":
        es.indices.create(
            index=index_name, mappings={"_source": {"mode": "synthetic"}, "properties": PROPERTIES}
        )
    else:
        es.indices.create(
            index=index_name,
            settings={"index.mapping.source.mode": "synthetic"},
            mappings={"properties": PROPERTIES},
        )
    yield index_name
    es.indices.delete(index=index_name)


def test_gets_and_searches_answer_the_synthetic_shape(es: Elasticsearch, synthetic: str) -> None:
    es.index(index=synthetic, id="1", document=SENT, refresh=True)
    assert es.get(index=synthetic, id="1")["_source"] == SYNTHETIC
    assert es.get_source(index=synthetic, id="1").body == SYNTHETIC
    hit = es.search(index=synthetic, query={"term": {"k": "aa"}})["hits"]["hits"][0]
    assert hit["_source"] == SYNTHETIC
    assert list(hit["_source"]) == sorted(SYNTHETIC)  # keys in order
    filtered = es.search(index=synthetic, source_includes=["o.*", "k"])["hits"]["hits"][0]["_source"]
    assert filtered == {"k": SYNTHETIC["k"], "o": SYNTHETIC["o"]}
    assert es.mget(index=synthetic, ids=["1"])["docs"][0]["_source"] == SYNTHETIC
    # An update merges into the document as sent, and answers the synthetic result.
    es.update(index=synthetic, id="1", doc={"n": 7}, refresh=True)
    assert es.get(index=synthetic, id="1")["_source"] == {**SYNTHETIC, "n": 7}


def test_readers_beside_writers(es: Elasticsearch, synthetic: str) -> None:
    """Writers rewrite documents while readers search: every source read is the synthetic form of
    one version written (values sorted), never a mix."""
    for i in range(5):
        es.index(index=synthetic, id=str(i), document={"n": [2, 1], "k": "a"})
    es.indices.refresh(index=synthetic)
    stop = threading.Event()
    bad: list[object] = []

    def writer(w: int) -> None:
        version = 0
        while not stop.is_set():
            version += 1
            es.index(index=synthetic, id=str(version % 5), document={"n": [version, -version], "k": f"w{w}"})
            if version % 7 == 0:
                es.indices.refresh(index=synthetic)

    def reader() -> None:
        for _ in range(30):
            for hit in es.search(index=synthetic, size=5)["hits"]["hits"]:
                source = hit["_source"]
                n = source["n"]
                if list(source) != ["k", "n"] or n != sorted(n) or n[0] != -n[1] and n != [1, 2]:
                    bad.append(source)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in writers + readers:
        thread.start()
    for thread in readers:
        thread.join()
    stop.set()
    for thread in writers:
        thread.join()
    assert not bad


def test_a_bad_mode_is_refused(http: httpx.Client, index_name: str) -> None:
    response = http.put(f"/{index_name}", json={"settings": {"index.mapping.source.mode": "sometimes"}})
    assert response.status_code == 400
    assert error_of(response)["reason"] == (
        "unknown value for [index.mapping.source.mode] must be one of [stored, synthetic] but was: sometimes"
    )
    assert http.head(f"/{index_name}").status_code == 404
