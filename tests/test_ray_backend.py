"""An index's shards as Ray actors, through the REST API of a coordinator (`serve --ray`) on a
local 3-node Ray cluster: placement, writes, searches, point-in-time walks and slices."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.testing import Server
from tests.conftest import error_of
from tests.ray_cluster import LOOPBACK_ENV, where

SHARDS = 6


@pytest.fixture(scope="module")
def coordinator(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("ray-coordinator") / "data"
    with Server(data, args=["--ray", ray_cluster.address], env=LOOPBACK_ENV, startup_timeout=120) as server:
        yield server


@pytest.fixture
def http(coordinator: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=coordinator.url, timeout=120) as client:
        yield client


def create_index(http: httpx.Client, name: str, shards: int = SHARDS) -> str:
    """Create the index; its uuid."""
    body = {"settings": {"number_of_shards": shards}, "mappings": {"properties": {"n": {"type": "long"}}}}
    response = http.put(f"/{name}", json=body)
    assert response.status_code == 200, response.text
    return http.get(f"/{name}/_settings").json()[name]["settings"]["index"]["uuid"]


def bulk(http: httpx.Client, index: str, docs: dict[str, dict[str, Any]], refresh: bool = False) -> dict:
    lines = []
    for doc_id, source in docs.items():
        lines += [orjson.dumps({"index": {"_id": doc_id}}), orjson.dumps(source)]
    response = http.post(
        f"/{index}/_bulk" + ("?refresh=true" if refresh else ""),
        content=b"\n".join(lines) + b"\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text
    return response.json()


def source(n: int) -> dict[str, Any]:
    return {"n": n, "tag": f"t{n % 7}", "body": f"doc number {n} of the ray test"}


def walk(http: httpx.Client, pit: str, size: int, slice_: dict | None = None) -> tuple[list[str], int]:
    """Every id of a point-in-time walk (search_after on `n`), and the total its pages count."""
    ids: list[str] = []
    after = None
    totals = set()
    while True:
        body: dict[str, Any] = {"pit": {"id": pit, "keep_alive": "1m"}, "size": size, "sort": [{"n": "asc"}]}
        if after is not None:
            body["search_after"] = after
        if slice_ is not None:
            body["slice"] = slice_
        response = http.post("/_search", json=body)
        assert response.status_code == 200, response.text
        page = response.json()
        assert page["_shards"] == {"total": SHARDS, "successful": SHARDS, "skipped": 0, "failed": 0}
        totals.add(page["hits"]["total"]["value"])
        hits = page["hits"]["hits"]
        if not hits:
            break
        ids += [hit["_id"] for hit in hits]
        after = hits[-1]["sort"]
    assert len(totals) == 1  # every page counts the same snapshot
    return ids, totals.pop()


def test_shards_spread_over_the_nodes_and_serve_the_document_apis(
    http: httpx.Client, ray_cluster: Any
) -> None:
    uuid = create_index(http, "spread")
    nodes = Counter(where(uuid, shard)[0] for shard in range(SHARDS))
    assert sorted(nodes) == ray_cluster.node_ids and set(nodes.values()) == {2}

    # Three clients index at once; every item is acknowledged.
    def client(c: int) -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=120) as own:
            for batch in range(5):
                docs = {f"{c}-{batch}-{i}": source(c * 1000 + batch * 100 + i) for i in range(100)}
                assert bulk(own, "spread", docs)["errors"] is False

    threads = [threading.Thread(target=client, args=(c,)) for c in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert http.post("/spread/_refresh").status_code == 200
    count = http.get("/spread/_count").json()
    assert count == {
        "count": 1500,
        "_shards": {"total": SHARDS, "successful": SHARDS, "skipped": 0, "failed": 0},
    }

    page = http.post(
        "/spread/_search", json={"sort": [{"n": "desc"}], "size": 3, "query": {"match": {"body": "ray"}}}
    )
    assert [hit["_id"] for hit in page.json()["hits"]["hits"]] == ["2-4-99", "2-4-98", "2-4-97"]
    aggs = http.post("/spread/_search", json={"size": 0, "aggs": {"t": {"terms": {"field": "tag.keyword"}}}})
    assert sum(b["doc_count"] for b in aggs.json()["aggregations"]["t"]["buckets"]) == 1500

    got = http.get("/spread/_doc/1-2-3").json()
    assert got["found"] is True and got["_source"] == source(1203)
    assert http.put("/spread/_doc/1-2-3", json=source(7)).json()["result"] == "updated"
    conflict = http.put("/spread/_doc/1-2-3?if_seq_no=0&if_primary_term=1", json=source(8))
    assert conflict.status_code == 409 and error_of(conflict)["type"] == "version_conflict_engine_exception"
    assert http.get("/spread/_doc/1-2-3").json()["_source"] == source(7)  # realtime: not refreshed yet
    assert http.delete("/spread/_doc/1-2-3?refresh=true").json()["result"] == "deleted"
    assert http.get("/spread/_doc/1-2-3").status_code == 404
    assert http.get("/spread/_count").json()["count"] == 1499
    assert http.post("/spread/_create/new?refresh=true", json=source(5000)).status_code == 201
    assert http.get("/spread/_count", params={"q": "n:5000"}).json()["count"] == 1

    assert http.delete("/spread").status_code == 200
    assert http.get("/spread/_count").status_code == 404


def test_point_in_time_walks_read_every_document_once_under_writes(http: httpx.Client) -> None:
    create_index(http, "walk")
    docs = {f"d{n}": source(n) for n in range(2000)}
    assert bulk(http, "walk", docs, refresh=True)["errors"] is False

    stop = threading.Event()

    def writer() -> None:  # writes and deletes beside the walks: the PIT's snapshot does not move
        with httpx.Client(base_url=str(http.base_url), timeout=120) as own:
            n = 10_000
            while not stop.is_set():
                bulk(own, "walk", {f"new{n}": source(n)}, refresh=True)
                own.delete(f"/walk/_doc/d{n % 2000}?refresh=true")
                n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        pit = http.post("/walk/_pit?keep_alive=1m").json()["id"]
        whole, total = walk(http, pit, 137)
        slices: dict[int, list[str]] = {}

        def read_slice(i: int) -> None:
            with httpx.Client(base_url=str(http.base_url), timeout=120) as own:
                slices[i] = walk(own, pit, 100, {"id": i, "max": 3})[0]

        readers = [threading.Thread(target=read_slice, args=(i,)) for i in range(3)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        assert http.request("DELETE", "/_pit", json={"id": pit}).json()["succeeded"] is True
    finally:
        stop.set()
        thread.join()
    # The walk read the PIT's snapshot exactly once, whatever was written beside it...
    assert len(whole) == len(set(whole)) == total
    assert set(whole) <= set(docs) | {f"new{n}" for n in range(10_000, 20_000)}
    # ...and its slices, read at once, partition that same snapshot.
    joined = [doc_id for i in range(3) for doc_id in slices[i]]
    assert all(slices[i] for i in range(3))
    assert sorted(joined) == sorted(whole)
