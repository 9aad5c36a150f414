"""`inner_hits` of a `nested` query inside another `nested` query's, through the official client:
each outer inner hit carries its own objects' inner hits, with the `_nested` identity of both
levels, as Elasticsearch nests them; equal to a brute force over random documents, while a
writer adds documents beside."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from elasticsearch import Elasticsearch
from elasticsearch.helpers import bulk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.concurrency import readers_beside_a_writer

MAPPING = {
    "properties": {
        "n": {"type": "long"},
        "a": {
            "type": "nested",
            "properties": {
                "x": {"type": "keyword"},
                "b": {"type": "nested", "properties": {"y": {"type": "long"}}},
            },
        },
    }
}
EXAMPLES = itertools.count()


def query(x: str, low: int) -> dict[str, Any]:
    inner = {
        "nested": {"path": "a.b", "query": {"range": {"a.b.y": {"gte": low}}}, "inner_hits": {"size": 100}}
    }
    both = {"bool": {"must": [{"term": {"a.x": x}}, inner]}}
    return {"nested": {"path": "a", "query": both, "inner_hits": {"size": 100, "name": "outer"}}}


def expected(doc: dict[str, Any], x: str, low: int) -> list[tuple[int, list[int]]]:
    """(offset of each matching `a` object, offsets of its matching `b` objects)."""
    out = []
    for i, a in enumerate(doc["a"]):
        ys = [j for j, b in enumerate(a["b"]) if b["y"] >= low]
        if a["x"] == x and ys:
            out.append((i, ys))
    return out


def shown(hit: dict[str, Any]) -> list[tuple[int, list[int]]]:
    out = []
    for outer in hit["inner_hits"]["outer"]["hits"]["hits"]:
        assert outer["_nested"]["field"] == "a" and outer["_id"] == hit["_id"]
        inner = outer["inner_hits"]["a.b"]["hits"]["hits"]
        for i in inner:
            assert i["_nested"]["offset"] == outer["_nested"]["offset"]
            assert i["_nested"]["_nested"]["field"] == "b"
        out.append((outer["_nested"]["offset"], sorted(i["_nested"]["_nested"]["offset"] for i in inner)))
    return sorted(out)


objects = st.lists(
    st.fixed_dictionaries(
        {
            "x": st.sampled_from("pq"),
            "b": st.lists(st.fixed_dictionaries({"y": st.integers(0, 9)}), max_size=4),
        }
    ),
    max_size=4,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(objects, min_size=1, max_size=12), x=st.sampled_from("pq"), low=st.integers(0, 9))
def test_nested_inner_hits_equal_a_brute_force(
    es: Elasticsearch, new_index: Callable[..., str], docs: list[list[dict]], x: str, low: int
) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPING, suffix=f"-{next(EXAMPLES)}")
    sources = {str(i): {"n": i, "a": a} for i, a in enumerate(docs)}
    bulk(es, ({"_index": index, "_id": k, **v} for k, v in sources.items()), refresh=True)
    hits = es.search(index=index, query=query(x, low), size=100)["hits"]["hits"]
    want = {k: expected(v, x, low) for k, v in sources.items()}
    assert {h["_id"] for h in hits} == {k for k, v in want.items() if v}
    for hit in hits:
        assert shown(hit) == want[hit["_id"]]
        for outer in hit["inner_hits"]["outer"]["hits"]["hits"]:
            assert outer["_source"]["x"] == x


def test_nested_inner_hits_with_a_writer_beside(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPING)

    def source(i: int) -> dict[str, Any]:
        return {
            "n": i,
            "a": [
                {"x": "pq"[(i + k) % 2], "b": [{"y": (i * k + j) % 10} for j in range(k + 1)]}
                for k in range(3)
            ],
        }

    bulk(es, ({"_index": index, "_id": str(i), **source(i)} for i in range(60)), refresh=True)
    stop = threading.Event()

    def write() -> None:
        i = 60
        while not stop.is_set():
            es.index(index=index, id=str(i), document=source(i), refresh=i % 4 == 0)
            i += 1

    def read() -> None:
        for _ in range(6):
            hits = es.search(index=index, query=query("p", 5), size=50, sort=[{"n": "asc"}])["hits"]["hits"]
            assert hits
            for hit in hits:
                assert shown(hit) == expected(source(int(hit["_id"])), "p", 5)

    readers_beside_a_writer(write, [read, read], stop)
