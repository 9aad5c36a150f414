"""`inner_hits` of a join query inside another join query's, through the official client: each
level's hits carry the next level's inner hits, as Elasticsearch nests them, equal to a brute
force over three generations (grand, parent, child) on several shards, while a writer adds
families beside."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from elasticsearch import Elasticsearch
from elasticsearch.helpers import bulk

from tests.concurrency import readers_beside_a_writer

MAPPING = {
    "properties": {
        "rel": {"type": "join", "relations": {"grand": "parent", "parent": "child"}},
        "n": {"type": "long"},
    }
}
UP = {
    "has_parent": {
        "parent_type": "parent",
        "inner_hits": {},
        "query": {
            "has_parent": {"parent_type": "grand", "inner_hits": {"name": "top"}, "query": {"match_all": {}}}
        },
    }
}
DOWN = {
    "has_child": {
        "type": "parent",
        "inner_hits": {"name": "kids", "size": 100},
        "query": {
            "has_child": {"type": "child", "inner_hits": {"size": 100}, "query": {"range": {"n": {"gte": 2}}}}
        },
    }
}


def family(g: int) -> list[dict[str, Any]]:
    """Grand `g`, its parents `g-p` (the odd ones without children) and their children `g-p-c`."""
    docs = [{"_id": f"{g}", "_routing": f"{g}", "rel": "grand", "n": g}]
    for p in range(g % 3 + 1):
        docs.append(
            {"_id": f"{g}-{p}", "_routing": f"{g}", "rel": {"name": "parent", "parent": f"{g}"}, "n": p}
        )
        if p % 2 == 0:
            docs += [
                {
                    "_id": f"{g}-{p}-{c}",
                    "_routing": f"{g}",
                    "rel": {"name": "child", "parent": f"{g}-{p}"},
                    "n": c,
                }
                for c in range(p + 3)
            ]
    return docs


def ids(inner: dict[str, Any]) -> list[str]:
    return sorted(h["_id"] for h in inner["hits"]["hits"])


def check_up(hits: list[dict[str, Any]]) -> None:
    """Each child's parent, and within it the parent's grand."""
    for hit in hits:
        g, p, _ = hit["_id"].split("-")
        (parent,) = hit["inner_hits"]["parent"]["hits"]["hits"]
        assert parent["_id"] == f"{g}-{p}"
        assert ids(parent["inner_hits"]["top"]) == [g]


def check_down(hits: list[dict[str, Any]]) -> None:
    """Each grand's parents that have a child with n >= 2, each with those children."""
    for hit in hits:
        g = int(hit["_id"])
        parents = [p for p in range(g % 3 + 1) if p % 2 == 0]
        kids = hit["inner_hits"]["kids"]
        assert ids(kids) == sorted(f"{g}-{p}" for p in parents)
        for parent in kids["hits"]["hits"]:
            p = int(parent["_id"].split("-")[1])
            assert ids(parent["inner_hits"]["child"]) == sorted(f"{g}-{p}-{c}" for c in range(2, p + 3))


def test_nested_join_inner_hits_equal_a_brute_force(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"number_of_shards": 3}, mappings=MAPPING)
    bulk(es, ({"_index": index, **doc} for g in range(12) for doc in family(g)), refresh=True)
    up = es.search(index=index, query=UP, size=200)["hits"]
    children = [d["_id"] for g in range(12) for d in family(g) if d["_id"].count("-") == 2]
    assert sorted(h["_id"] for h in up["hits"]) == sorted(children)
    check_up(up["hits"])
    down = es.search(index=index, query=DOWN, size=200)["hits"]["hits"]
    assert sorted(h["_id"] for h in down) == sorted(str(g) for g in range(12))  # every grand has parent 0
    check_down(down)
    # A join query's inner hits inside a join query without any show nowhere, as in Elasticsearch.
    quiet = {"has_child": {**DOWN["has_child"], "inner_hits": None}}
    del quiet["has_child"]["inner_hits"]
    assert all("inner_hits" not in h for h in es.search(index=index, query=quiet)["hits"]["hits"])


def test_nested_join_inner_hits_with_a_writer_beside(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    # Only the writer's refreshes, each after whole families, change what searches see.
    index = new_index(settings={"number_of_shards": 2, "refresh_interval": -1}, mappings=MAPPING)
    bulk(es, ({"_index": index, **doc} for g in range(6) for doc in family(g)), refresh=True)
    stop = threading.Event()

    def write() -> None:
        g = 6
        while not stop.is_set():
            bulk(es, ({"_index": index, **doc} for doc in family(g)), refresh=g % 2 == 0)
            g += 1

    def read() -> None:
        for _ in range(5):
            check_up(es.search(index=index, query=UP, size=50)["hits"]["hits"])
            check_down(es.search(index=index, query=DOWN, size=50)["hits"]["hits"])

    readers_beside_a_writer(write, [read, read], stop)
