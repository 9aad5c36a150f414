"""Collapse on shard actors (collapse_shards.py): walked with `search_after`, with and without a
point in time, a collapsed walk of a 3-shard Ray-backed index equals a brute-force grouping of the
same snapshot (its uncollapsed hits in sort order, each key's first), `inner_hits` included, while
a writer changes the index beside it.

Through the REST API of a coordinator (`serve --ray`) on a local 3-node Ray cluster, one for the
module. The posts are those of `kind: post`; without a PIT the writer adds, changes and deletes
documents of another kind only, with refreshes (new segments, merges): the matches stay the
ones grouped, the snapshots change under the walk. With a PIT it also rewrites posts, which the
PIT's snapshot does not see.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from elasticsearch import Elasticsearch

from tests import web
from tests.ray_cluster import ray_server

INDEX = "posts"
POSTS = 300
USERS = 40
QUERY = {"term": {"kind": "post"}}
MAPPINGS = {
    "properties": {
        "kind": {"type": "keyword"},
        "user": {"type": "keyword"},
        "grp": {"type": "long"},
        "n": {"type": "long"},
        "score": {"type": "double"},
    }
}
SORTS = [[{"score": "desc"}, {"n": "asc"}], [{"n": "desc"}], [{"user": "asc"}, {"n": "desc"}]]


def post(i: int) -> dict[str, Any]:
    rng = random.Random(i)
    doc: dict[str, Any] = {"kind": "post", "n": i, "score": rng.randint(0, 9), "grp": rng.randint(0, 24)}
    if i % 11:  # (some posts have no user: the group without a value)
        doc["user"] = f"u{rng.randint(0, USERS - 1):02}"
    return doc


@pytest.fixture(scope="module")
def server(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("ray-collapse") / "data"
    with (
        ray_server(ray_cluster.address, data) as coordinator,
        web.Client(base_url=coordinator.url, timeout=120) as http,
    ):
        settings = {"number_of_shards": 3}
        assert http.put(f"/{INDEX}", json={"settings": settings, "mappings": MAPPINGS}).status_code == 200
        lines = []
        for i in range(POSTS):
            lines += [orjson.dumps({"index": {"_index": INDEX, "_id": f"p{i}"}}), orjson.dumps(post(i))]
            if i % 100 == 99:  # (several segments per shard)
                _bulk(http, lines)
                lines = []
        yield coordinator.url


def _bulk(http: httpx.Client, lines: list[bytes]) -> None:
    response = http.post(
        "/_bulk?refresh=true",
        content=b"\n".join(lines) + b"\n",
        headers={"content-type": "application/x-ndjson"},
        timeout=120,
    )
    assert response.status_code == 200 and not response.json()["errors"], response.text[:500]


@pytest.fixture(scope="module")
def http(server: str) -> Iterator[httpx.Client]:
    with web.Client(base_url=server, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def es(server: str) -> Iterator[Elasticsearch]:
    client = Elasticsearch(server, request_timeout=120)
    yield client
    client.close()


class Writer:
    """Writes beside the walks until stopped: noise documents (and, with `posts`, posts too),
    refreshes; its errors fail the test."""

    def __init__(self, server: str, posts: bool) -> None:
        self.server, self.posts = server, posts
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.writes = 0
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        rng = random.Random(7)
        try:
            with web.Client(base_url=self.server, timeout=120) as http:
                while not self.stop.is_set():
                    i = rng.randint(0, 50)
                    noise = {"kind": "noise", "user": f"u{i % USERS:02}", "n": -i, "score": 99, "grp": i}
                    response = http.put(f"/{INDEX}/_doc/noise{i}", json=noise)
                    assert response.status_code in (200, 201), response.text
                    if self.posts:
                        changed = {**post(i), "user": "rewritten", "score": -1}
                        response = http.put(f"/{INDEX}/_doc/p{i}", json=changed)
                        assert response.status_code == 200, response.text
                        response = http.put(f"/{INDEX}/_doc/p{i}", json=post(i))  # (back before the end)
                        assert response.status_code == 200, response.text
                    if rng.random() < 0.3:
                        assert http.delete(f"/{INDEX}/_doc/noise{i}").status_code in (200, 404)
                    assert http.post(f"/{INDEX}/_refresh").status_code == 200
                    self.writes += 1
        except BaseException as exc:  # noqa: BLE001 (reported by `__exit__`)
            self.error = exc

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.writes, "the writer wrote nothing beside the walk"


def walk(http: httpx.Client, body: dict[str, Any], size: int, pit: str | None) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    for _ in range(POSTS + 2):
        request = {**body, "size": size, "query": QUERY}
        if pit is not None:
            request["pit"] = {"id": pit}
        if hits:
            request["search_after"] = hits[-1]["sort"]
        response = http.post("/_search" if pit is not None else f"/{INDEX}/_search", json=request)
        assert response.status_code == 200, response.text
        assert response.json()["_shards"]["failed"] == 0
        page = response.json()["hits"]["hits"]
        if not page:
            return hits
        hits += page
    raise AssertionError("the walk did not end")


def grouped(everything: list[dict[str, Any]], field: str) -> list[dict[str, Any]]:
    """The brute force: each key's first hit of the uncollapsed walk, in its order."""
    seen: set[Any] = set()
    out = []
    for hit in everything:
        key = hit["_source"].get(field)
        if key not in seen:
            seen.add(key)
            out.append(hit)
    return out


@pytest.mark.parametrize("pit", [False, True], ids=["current", "pit"])
@pytest.mark.parametrize("sort", SORTS, ids=["score-n", "n-desc", "user-n"])
def test_collapsed_walks_are_the_grouped_snapshot(
    http: httpx.Client, server: str, sort: list[Any], pit: bool
) -> None:
    pit_id = http.post(f"/{INDEX}/_pit", params={"keep_alive": "5m"}).json()["id"] if pit else None
    try:
        with Writer(server, posts=pit):
            everything = walk(http, {"sort": sort}, 97, pit_id)
            assert len(everything) == POSTS
            for field, size in (("user", 3), ("grp", 7), ("user", 16)):
                collapsed = walk(http, {"sort": sort, "collapse": {"field": field}}, size, pit_id)
                expected = grouped(everything, field)
                assert [h["_id"] for h in collapsed] == [h["_id"] for h in expected]
                assert [h["sort"] for h in collapsed] == [h["sort"] for h in expected]
                assert [h["fields"][field] for h in collapsed] == [
                    [h["_source"].get(field)] for h in expected
                ]
    finally:
        if pit_id is not None:
            http.request("DELETE", "/_pit", json={"id": pit_id})


def test_inner_hits_read_every_shard_of_the_pit(es: Elasticsearch, http: httpx.Client, server: str) -> None:
    pit = es.open_point_in_time(index=INDEX, keep_alive="5m")["id"]
    inner = [{"name": "latest", "size": 3, "sort": [{"n": "desc"}]}, {"name": "count", "size": 0}]
    try:
        with Writer(server, posts=True):
            everything = walk(http, {"sort": [{"n": "asc"}]}, 97, pit)
            hits: list[dict[str, Any]] = []
            while True:
                extra = {} if not hits else {"search_after": hits[-1]["sort"]}
                page = es.search(
                    pit={"id": pit},
                    size=6,
                    query=QUERY,
                    sort=[{"score": "asc"}, {"n": "asc"}],
                    collapse={"field": "user", "inner_hits": inner},
                    **extra,
                )["hits"]["hits"]
                if not page:
                    break
                hits += page
    finally:
        es.close_point_in_time(id=pit)
    assert sorted(h["fields"]["user"][0] or "" for h in hits) == sorted(
        {h["_source"].get("user") or "" for h in everything}
    )
    for hit in hits:
        key = hit["fields"]["user"][0]
        group = [h for h in everything if h["_source"].get("user") == key]
        latest = hit["inner_hits"]["latest"]["hits"]
        assert latest["total"] == {"value": len(group), "relation": "eq"}
        assert [h["_id"] for h in latest["hits"]] == [h["_id"] for h in group[::-1][:3]]
        assert hit["inner_hits"]["count"]["hits"]["total"]["value"] == len(group)
