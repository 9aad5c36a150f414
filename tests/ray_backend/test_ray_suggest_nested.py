"""`suggest` (completion, term) and `nested` queries' `inner_hits` (one inside another too) on
an index whose shards are in Ray actors: each actor computes its shard's part where its segments
are (the shard interface's `suggest` phase; inner hits in its fetch) and the coordinator merges
them.

Through the REST API of a coordinator (`serve --ray`) on a local 3-node Ray cluster, each answer
on the Ray-backed index `ray` is compared with the same request on `local`, an index of the same
documents and shard count written by a node started without Ray (the coordinator serves both),
while a writer adds documents to `ray` that no compared request matches."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.testing import Server
from tests import web
from tests.concurrency import readers_beside_a_writer
from tests.ray_cluster import ray_server, shard_actor
from tests.server_zygote import SERVER_ZYGOTE

SHARDS = 3
DOCS = 300
WORDS = ["nirvana", "nickelback", "nine", "nina", "metallica", "megadeth", "muse"]
MAPPING = {
    "properties": {
        "s": {"type": "completion"},
        "t": {"type": "text"},
        "n": {"type": "long"},
        "items": {
            "type": "nested",
            "properties": {
                "c": {"type": "keyword"},
                "q": {"type": "long"},
                "parts": {"type": "nested", "properties": {"z": {"type": "long"}}},
            },
        },
    }
}
_NDJSON = {"content-type": "application/x-ndjson"}


def source(n: int) -> dict[str, Any]:
    word = WORDS[n % len(WORDS)]
    return {
        "s": {"input": f"{word} {n}", "weight": n % 17 + 1},
        "t": f"{word} song {n % 5}",
        "n": n,
        "items": [
            {
                "c": ["red", "blue", "green"][(n + k) % 3],
                "q": (n * k) % 11,
                "parts": [{"z": (n + k + j) % 5} for j in range(k)],
            }
            for k in range(n % 4 + 1)
        ],
    }


def bulk(http: httpx.Client, index: str, docs: dict[str, dict[str, Any]], refresh: bool = True) -> None:
    lines = []
    for doc_id, body in docs.items():
        lines += [orjson.dumps({"index": {"_index": index, "_id": doc_id}}), orjson.dumps(body)]
    url = "/_bulk?refresh=true" if refresh else "/_bulk"
    response = http.post(url, content=b"\n".join(lines) + b"\n", headers=_NDJSON)
    assert response.status_code == 200 and response.json()["errors"] is False, response.text[:500]


def create(http: httpx.Client, index: str) -> None:
    body = {"settings": {"number_of_shards": SHARDS}, "mappings": MAPPING}
    response = http.put(f"/{index}", json=body)
    assert response.status_code == 200, response.text
    bulk(http, index, {f"d{n}": source(n) for n in range(DOCS)})


@pytest.fixture(scope="module")
def coordinator(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("ray-suggest") / "data"
    with (
        Server(data, popen=SERVER_ZYGOTE.popen) as plain,
        web.Client(base_url=plain.url, timeout=120) as http,
    ):
        create(http, "local")
    with ray_server(ray_cluster.address, data) as server:
        with web.Client(base_url=server.url, timeout=120) as http:
            create(http, "ray")
            uuid = http.get("/ray/_settings").json()["ray"]["settings"]["index"]["uuid"]
            shard_actor(uuid, 0)  # (raises when `ray` is not on the cluster)
        yield server


BODIES = {
    "completion": {
        "size": 0,
        "suggest": {
            "a": {"prefix": "ni", "completion": {"field": "s", "size": 12}},
            "b": {
                "prefix": "mgadeth",
                "completion": {"field": "s", "fuzzy": {"fuzziness": 1}, "skip_duplicates": True},
            },
        },
    },
    "term": {"size": 0, "suggest": {"t": {"text": "nirvanna metalica song", "term": {"field": "t"}}}},
    "nested": {
        "size": 20,
        "sort": [{"n": "asc"}],
        "query": {
            "nested": {
                "path": "items",
                "query": {"term": {"items.c": "red"}},
                "inner_hits": {"size": 2, "sort": [{"items.q": "desc"}]},
            }
        },
    },
    "nested_deeper": {
        "size": 15,
        "sort": [{"n": "desc"}],
        "query": {
            "nested": {
                "path": "items",
                "query": {
                    "nested": {
                        "path": "items.parts",
                        "query": {"term": {"items.parts.z": 3}},
                        "inner_hits": {},
                    }
                },
                "inner_hits": {"name": "with_three"},
            }
        },
    },
    "nested_scored": {
        "size": 10,
        "query": {
            "bool": {
                "must": [{"match": {"t": "nine"}}],
                "should": [
                    {
                        "nested": {
                            "path": "items",
                            "query": {"range": {"items.q": {"gte": 5}}},
                            "inner_hits": {"name": "big"},
                        }
                    }
                ],
            }
        },
    },
}


def unnamed(hits: list[dict[str, Any]]) -> None:
    """Hits and their inner hits, at every depth, without the index's name."""
    for hit in hits:
        hit["_index"] = "-"
        for inner in hit.get("inner_hits", {}).values():
            unnamed(inner["hits"]["hits"])


def answer(http: httpx.Client, index: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(f"/{index}/_search", json=body)
    assert response.status_code == 200, response.text[:500]
    found = response.json()
    for key in ("took", "_shards"):
        found.pop(key)
    unnamed(found["hits"]["hits"])
    for entries in found.get("suggest", {}).values():
        for entry in entries:
            for option in entry["options"]:
                option["_index"] = "-"
    return found


@pytest.mark.parametrize("name", list(BODIES))
def test_the_actors_answer_as_local_shards_do(coordinator: Server, name: str) -> None:
    with web.Client(base_url=coordinator.url, timeout=120) as http:
        local = answer(http, "local", BODIES[name])
        assert answer(http, "ray", BODIES[name]) == local
    if name == "completion":
        inputs = [(n % 17 + 1, source(n)["s"]["input"]) for n in range(DOCS)]
        best = sorted((-w, text) for w, text in inputs if text.startswith("ni"))[:12]
        assert [(o["_score"], o["text"]) for o in local["suggest"]["a"][0]["options"]] == [
            (-w, t) for w, t in best
        ]
    if name == "nested":
        first = local["hits"]["hits"][0]["inner_hits"]["items"]["hits"]
        assert first["hits"][0]["_nested"]["field"] == "items"
    if name == "nested_deeper":  # each item shown holds a part with z = 3, shown within it
        for hit in local["hits"]["hits"]:
            for item in hit["inner_hits"]["with_three"]["hits"]["hits"]:
                parts = item["inner_hits"]["items.parts"]["hits"]["hits"]
                assert parts and all(p["_source"] == {"z": 3} for p in parts)
                assert all(p["_nested"]["_nested"]["field"] == "parts" for p in parts)


def shown(found: dict[str, Any]) -> Any:
    """What the writer's documents leave unchanged: the suggestions, and the hits' ids with their
    inner hits' ids and nested offsets (not totals or scores: BM25 counts the new documents)."""
    hits = [
        (
            h["_id"],
            {k: [(i["_id"], i["_nested"]) for i in v["hits"]["hits"]] for k, v in h["inner_hits"].items()},
        )
        for h in found["hits"]["hits"]
        if "inner_hits" in h
    ]
    return found.get("suggest"), hits


def test_with_a_writer_beside(coordinator: Server) -> None:
    """Documents the compared requests do not match (input, text and nested values of their
    own) are written and refreshed while the answers are compared."""
    stop = threading.Event()
    with web.Client(base_url=coordinator.url, timeout=120) as http:
        expected = {name: shown(answer(http, "local", body)) for name, body in BODIES.items()}

        def write() -> None:
            n = 0
            while not stop.is_set():
                other = {"s": f"zzz {n}", "t": "zzz", "n": 10_000 + n, "items": [{"c": "black", "q": 0}]}
                bulk(http, "ray", {f"w{n}": other}, refresh=n % 3 == 0)
                n += 1

        def read() -> None:
            with web.Client(base_url=coordinator.url, timeout=120) as own:
                for _ in range(3):
                    for name, body in BODIES.items():
                        assert shown(answer(own, "ray", body)) == expected[name], name

        readers_beside_a_writer(write, [read, read], stop)
