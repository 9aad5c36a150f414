"""An index's shards as Ray actors, through the REST API of a coordinator (`serve --ray`) on a
local 3-node Ray cluster: placement, writes, searches, point-in-time walks and slices."""

from __future__ import annotations

import base64
import os
import re
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.index.merge_policy import MERGE_FACTOR
from leafsearch.index.routing import default_routing_num_shards, shard_for
from leafsearch.search.shard_api import ShardContextId
from leafsearch.testing import Server
from tests import web
from tests.concurrency import readers_beside_a_writer, wait_for, writers_beside_refresher
from tests.conftest import error_of
from tests.ray_cluster import children, ended, machine_actor, machine_calls, ray_server, shard_actor, where
from tests.server_zygote import SERVER_ZYGOTE

SHARDS = 6


@pytest.fixture(scope="module")
def coordinator(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("ray-coordinator") / "data"
    with ray_server(ray_cluster.address, data) as server:
        yield server


@pytest.fixture
def http(coordinator: Server) -> Iterator[httpx.Client]:
    """A client of the module's coordinator. The indices a test leaves there are deleted after
    it: each holds up to `SHARDS` actor processes, which would otherwise pile up over the
    module (each polls for its refreshes and merges) and slow every test after them."""
    with web.Client(base_url=coordinator.url, timeout=120) as client:
        yield client
        left = client.get("/_cat/indices", params={"format": "json", "h": "index", "expand_wildcards": "all"})
        for row in left.json():
            client.delete(f"/{row['index']}")


def create_index(http: httpx.Client, name: str, shards: int = SHARDS) -> str:
    """Create the index; its uuid."""
    body = {
        "settings": {"number_of_shards": shards, "number_of_replicas": 0},
        "mappings": {"properties": {"n": {"type": "long"}}},
    }
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


def bulk_writer(
    http: httpx.Client,
    index: str,
    make: Callable[[int], dict[str, Any]],
    first: int,
    per_bulk: int,
    stop: threading.Event,
) -> Callable[[], None]:
    """A writer beside a test's readers: bulks of `per_bulk` new documents `w<n>` from `first`
    on, each refreshed, on a connection of its own, until `stop`."""

    def write() -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            n = first
            while not stop.is_set():
                assert bulk(own, index, {f"w{n + i}": make(n + i) for i in range(per_bulk)}, refresh=True)
                n += per_bulk

    return write


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
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
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

    # Statistics come from the shard actors (the search counters from the coordinator).
    primaries = http.get("/spread/_stats").json()["_all"]["primaries"]
    assert primaries["docs"]["count"] == 1500 and primaries["indexing"]["index_total"] == 1500
    assert primaries["search"]["query_total"] >= SHARDS
    (row,) = http.get("/_cat/indices/spread", params={"format": "json"}).json()
    assert row["docs.count"] == "1500"
    assert http.get("/_nodes/stats").status_code == 200
    (node_row,) = http.get("/_cat/nodes", params={"format": "json", "h": "docs.count,segments.count"}).json()
    assert int(node_row["docs.count"]) >= 1500 and int(node_row["segments.count"]) >= SHARDS
    # Per-shard listings come from the actors too (tests/ray_backend/test_ray_api.py checks their rows).
    for path, params in (
        ("/_cat/shards/spread", {}),
        ("/_cat/segments/spread", {}),
        ("/spread/_stats", {"level": "shards"}),
    ):
        assert http.get(path, params=params).status_code == 200

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

    docs = http.post("/spread/_mget", json={"ids": ["0-0-1", "1-2-3", "nope"]}).json()["docs"]
    assert [doc["found"] for doc in docs] == [True, False, False]
    assert http.get("/spread/_count").json()["count"] == 1500

    assert http.delete("/spread").status_code == 200
    assert http.get("/spread/_count").status_code == 404


def test_point_in_time_walks_read_every_document_once_under_writes(http: httpx.Client) -> None:
    create_index(http, "walk")
    docs = {f"d{n}": source(n) for n in range(2000)}
    assert bulk(http, "walk", docs, refresh=True)["errors"] is False

    stop = threading.Event()

    def writer() -> None:  # writes and deletes beside the walks: the PIT's snapshot does not move
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            n = 10_000
            while not stop.is_set():
                bulk(own, "walk", {f"new{n}": source(n)}, refresh=True)
                own.delete(f"/walk/_doc/d{n % 2000}?refresh=true")
                n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        pit = http.post("/walk/_pit?keep_alive=1m").json()["id"]
        rows = http.get("/_cat/search_contexts", params={"format": "json"}).json()
        row = next(row for row in rows if row["id"] == pit)
        # What the actors pinned: every document of the refreshed bulk at least, on every shard.
        assert int(row["docs"]) >= 2000 and int(row["segments"]) >= SHARDS, row
        whole, total = walk(http, pit, 137)
        slices: dict[int, list[str]] = {}

        def read_slice(i: int) -> None:
            with web.Client(base_url=str(http.base_url), timeout=120) as own:
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


def kill_shard(uuid: str, shard: int) -> int:
    """kill -9 a shard's actor process; its pid."""
    pid = where(uuid, shard)[1]
    os.kill(pid, signal.SIGKILL)
    return pid


def restarted(uuid: str, shard: int, old_pid: int) -> int:
    """The pid of the shard's actor once Ray restarted it (calls wait for the restart)."""
    for _ in range(100):  # a call caught by the restart fails; the next ones wait for it
        try:
            pid = where(uuid, shard)[1]
        except Exception:  # noqa: BLE001 - ActorUnavailableError while it restarts
            continue
        if pid != old_pid:
            return pid
    raise AssertionError(f"shard {shard} was not restarted")


def lose_context(uuid: str, shard: int, context_id: str) -> None:
    """Free a shard actor's part of a PIT or scroll behind the coordinator's back (as a disk
    that lost the pin would): that shard's part of the walk is gone."""
    import ray

    raw = base64.urlsafe_b64decode(context_id + "=" * (-len(context_id) % 4)).decode()
    key = raw.split(":")[3]  # leafsearch:<kind>:<node>:<key>:<seq>:<token>
    assert ray.get(shard_actor(uuid, shard).free_context.remote(ShardContextId("", 0, name=key)), timeout=60)


def open_contexts(uuid: str, shards: list[int]) -> list[int]:
    """The reader contexts each of those shard actors of an index holds open."""
    import ray

    stats = ray.get([shard_actor(uuid, s).stats.remote() for s in shards], timeout=60)
    return [s["open_contexts"] for s in stats]


def test_a_phase_and_a_bulk_are_one_call_per_machine(http: httpx.Client) -> None:
    """6 shards on 3 machines: a search is a query call and a fetch call per machine (12 calls
    with an actor per shard), a PIT's opening and closing a call per machine, a bulk over every
    shard one write call per machine; and each shard still answers its own part."""
    uuid = create_index(http, "permachine")
    bulk(http, "permachine", {f"d{n}": source(n) for n in range(300)}, refresh=True)  # (the mapping settles)
    machines = len({where(uuid, shard)[0] for shard in range(SHARDS)})
    assert machines == 3
    before = machine_calls()
    page = http.post("/permachine/_search", json={"size": 1000, "sort": [{"n": "desc"}]}).json()
    assert [hit["_source"]["n"] for hit in page["hits"]["hits"]] == list(range(299, -1, -1))
    assert page["_shards"] == {"total": SHARDS, "successful": SHARDS, "skipped": 0, "failed": 0}
    assert machine_calls() - before == Counter({"query": machines, "fetch": machines})
    before = machine_calls()
    pit = http.post("/permachine/_pit?keep_alive=1m").json()["id"]  # a context on each shard
    assert machine_calls() - before == Counter({"open_context": machines})
    before = machine_calls()
    assert http.request("DELETE", "/_pit", json={"id": pit}).json() == {"succeeded": True, "num_freed": 1}
    assert machine_calls() - before == Counter({"free_context": machines})
    before = machine_calls()
    items = bulk(http, "permachine", {f"e{n}": source(n) for n in range(300)})["items"]
    assert {item["index"]["status"] for item in items} == {201}
    assert machine_calls() - before == Counter({"write": machines})
    assert http.post("/permachine/_refresh").json()["_shards"]["successful"] == SHARDS
    assert http.post("/permachine/_count").json()["count"] == 600


def _comparable(items: list[dict]) -> list[dict]:
    """Bulk items less what differs between two nodes: shard counts, seq_nos, generated ids."""
    out = []
    for item in items:
        ((kind, result),) = item.items()
        result = {k: v for k, v in result.items() if k not in ("_shards", "_seq_no", "_primary_term")}
        if kind in ("create", "index") and result["_id"].startswith("auto"):
            result["_id"] = "generated"
        if "error" in result:
            result["error"] = {k: result["error"][k] for k in ("type", "reason")}
        out.append({kind: result})
    return out


def _bulk_body(lines: list[dict]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


@pytest.mark.parametrize("simple", [True, False], ids=["simple-lines", "general-lines"])
def test_a_bulk_sent_by_column_answers_every_item_as_a_single_node_does(
    http: httpx.Client, tmp_path: Path, simple: bool
) -> None:
    """A bulk on shard actors goes to each machine by column (no object per document); each
    item still succeeds or fails on its own as on one node (Elasticsearch's items): a create of
    an existing id (409), an id over 512 bytes and a value its field cannot hold (400), the
    same id twice in one request (applied in order: versions 1 and 2), generated ids; the
    others written once, each on its routed shard. `simple`: action lines the simple parser
    takes; else the same with a line parameter (`require_alias: false`) that sends them the
    general way."""
    from leafsearch import Client

    name = f"bycolumn-{simple}".lower()
    create_index(http, name)
    extra = {} if simple else {"require_alias": False}
    lines: list[dict] = []
    for n in range(40):
        lines += [{"index": {"_id": f"first{n}", **extra}}, source(n)]
    lines += [
        {"create": {"_id": "first3", **extra}},
        source(3),
        {"index": {"_id": "x" * 513, **extra}},
        source(1),
        {"index": {"_id": "bad", **extra}},
        {"n": "not a number"},
        {"index": {"_id": "twice", **extra}},
        source(1),
        {"index": {"_id": "twice", **extra}},
        source(2),
        {"index": {**extra}},
        source(5),
        {"create": {"_id": "first7", **extra}},
        source(7),
    ]
    for n in range(40, 100):
        lines += [{"create": {"_id": f"then{n}", **extra}}, source(n)]
    body = _bulk_body(lines)
    headers = {"content-type": "application/x-ndjson"}
    on_ray = http.post(f"/{name}/_bulk", content=body, headers=headers).json()
    with Client(tmp_path / "local") as local:
        local.indices.create(
            index=name,
            settings={"number_of_shards": SHARDS, "number_of_replicas": 0},
            mappings={"properties": {"n": {"type": "long"}}},
        )
        alone = local.bulk(body, index=name)
    for answer in (on_ray, alone):
        for item in answer["items"]:
            ((_, result),) = item.items()
            if result.get("status") == 201 and len(result["_id"]) == 20:
                result["_id"] = "auto" + result["_id"]
    assert on_ray["errors"] is True
    assert _comparable(on_ray["items"]) == _comparable(alone["items"])
    statuses = Counter(next(iter(item.values()))["status"] for item in on_ray["items"])
    assert statuses == Counter({201: 102, 200: 1, 409: 2, 400: 2})
    assert http.post(f"/{name}/_refresh").status_code == 200
    found = http.post(f"/{name}/_search", json={"size": 200, "version": True}).json()
    assert found["_shards"]["failed"] == 0
    versions = {hit["_id"]: (hit["_version"], hit["_source"]["n"]) for hit in found["hits"]["hits"]}
    assert len(versions) == 102 and versions["twice"] == (2, 2) and versions["first3"] == (1, 3)
    # Each document on the shard its id routes to: a PIT's slice per shard holds that shard's.
    pit = http.post(f"/{name}/_pit?keep_alive=1m").json()["id"]
    for shard in range(SHARDS):
        body = {"pit": {"id": pit}, "size": 200, "slice": {"id": shard, "max": SHARDS}, "_source": False}
        hits = http.post("/_search", json=body).json()["hits"]["hits"]
        routed = {shard_for(hit["_id"], SHARDS, default_routing_num_shards(SHARDS)) for hit in hits}
        assert hits and routed == {shard}
    http.request("DELETE", "/_pit", json={"id": pit})


def test_concurrent_bulks_by_column_with_refreshes_beside_keep_every_acknowledged_write(
    http: httpx.Client,
) -> None:
    """Three clients' bulks at once, simple lines and general ones (a `routing` per line: the
    general parser, then by column per shard), each overwriting some of another's ids, while
    refreshes run beside: every item acknowledged, each id found once, with as many versions as
    writes it got, on the shard its routing names."""
    create_index(http, "columnsbeside")
    clients = 3
    rounds = 6

    def writer(c: int) -> Callable[[], None]:
        def write() -> None:
            with web.Client(base_url=str(http.base_url), timeout=120) as own:
                for r in range(rounds):
                    lines: list[dict] = []
                    for i in range(150):
                        doc_id = f"shared{i}" if i < 30 else f"c{c}-r{r}-{i}"
                        meta = {"_id": doc_id} if c != 2 else {"_id": doc_id, "routing": f"k{i % 4}"}
                        if c == 2 and i < 30:
                            meta["_id"] = f"routed{i}"
                        lines += [{"index": meta}, source(i)]
                    response = own.post(
                        "/columnsbeside/_bulk",
                        content=_bulk_body(lines),
                        headers={"content-type": "application/x-ndjson"},
                    )
                    assert response.status_code == 200, response.text
                    assert response.json()["errors"] is False, response.text

        return write

    refreshed: list[int] = []
    with web.Client(base_url=str(http.base_url), timeout=120) as refresher:
        failures = writers_beside_refresher(
            [writer(c) for c in range(clients)],
            lambda: refreshed.append(refresher.post("/columnsbeside/_refresh").status_code),
        )
    assert failures == [] and refreshed and set(refreshed) == {200}
    http.post("/columnsbeside/_refresh").raise_for_status()
    found = http.post(
        "/columnsbeside/_search", json={"size": 10_000, "version": True, "_source": False}
    ).json()
    assert found["_shards"]["failed"] == 0
    versions = Counter()
    for hit in found["hits"]["hits"]:
        versions[hit["_id"]] += 1
        expected = (
            (2 * rounds if hit["_id"].startswith("shared") else rounds) if "-r" not in hit["_id"] else 1
        )
        assert hit["_version"] == expected, hit
    assert set(versions.values()) == {1}  # each id once
    assert len(versions) == 30 + 30 + clients * rounds * 120
    routed = http.post(
        "/columnsbeside/_search",
        params={"routing": "k1"},
        json={"size": 1000, "query": {"ids": {"values": [f"routed{i}" for i in range(30)]}}},
    ).json()["hits"]["hits"]

    def shard(key: str) -> int:
        return shard_for(key, SHARDS, default_routing_num_shards(SHARDS))

    # the routing's shard holds those ids whose routing goes there, and no other
    assert {hit["_id"] for hit in routed} == {
        f"routed{i}" for i in range(30) if shard(f"k{i % 4}") == shard("k1")
    }


def test_a_shard_killed_during_bulk_loses_no_acknowledged_write(http: httpx.Client) -> None:
    uuid = create_index(http, "killbulk")
    acknowledged: set[str] = set()
    refused: list[dict] = []
    lock = threading.Lock()
    started = threading.Barrier(3)

    def writer(w: int) -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            for batch in range(40):
                if batch == 5:
                    started.wait()
                docs = {f"{w}-{batch}-{i}": source(i) for i in range(60)}
                for item in bulk(own, "killbulk", docs)["items"]:
                    result = item["index"]
                    with lock:
                        if result["status"] == 201:
                            acknowledged.add(result["_id"])
                        else:
                            refused.append(result)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    for thread in writers:
        thread.start()
    started.wait()  # both writers are indexing
    node = where(uuid, 2)[0]
    down = {f"[killbulk][{s}]" for s in range(SHARDS) if where(uuid, s)[0] == node}  # its machine's
    old = kill_shard(uuid, 2)
    for thread in writers:
        thread.join()
    restarted(uuid, 2, old)
    # Writes refused while the shards were down failed cleanly, as Elasticsearch's do without a primary.
    for item in refused:
        assert item["status"] == 503, item
        assert item["error"]["type"] == "unavailable_shards_exception", item
        assert item["error"]["reason"].split(" ")[0] in down
    assert http.post("/killbulk/_refresh").status_code == 200
    found = http.post("/killbulk/_search", json={"size": 10_000, "_source": False, "sort": ["_doc"]}).json()
    ids = {hit["_id"] for hit in found["hits"]["hits"]}
    assert found["_shards"]["failed"] == 0
    assert acknowledged <= ids, f"{len(acknowledged - ids)} acknowledged writes lost"
    assert len(acknowledged) + len(refused) == 2 * 40 * 60
    # The restarted shard takes writes again.
    assert (
        bulk(http, "killbulk", {f"after-{i}": source(i) for i in range(30)}, refresh=True)["errors"] is False
    )


def test_a_machines_merges_run_in_a_process_without_ray(http: httpx.Client) -> None:
    """A machine actor's shards merge in its merge worker, whose processes start without Ray's
    worker script (ray_backend/merge_processes.py), which would import Ray in each: a merge
    process never maps Ray's library."""
    import ray

    uuid = create_index(http, "merged", shards=1)
    for n in range(MERGE_FACTOR):  # a segment each
        bulk(http, "merged", {f"d{n}": source(n)}, refresh=True)
    wait_for(lambda: ray.get(shard_actor(uuid, 0).stats.remote(), timeout=60)["segments"] < MERGE_FACTOR)
    spawned = [
        pid
        for pid in children(where(uuid, 0)[1])
        if b"multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert spawned
    for pid in spawned:
        assert "_raylet" not in Path(f"/proc/{pid}/maps").read_text()
    assert http.get("/merged/_count").json()["count"] == MERGE_FACTOR


def test_a_shard_that_lost_a_pit_context_fails_that_shard_alone(http: httpx.Client) -> None:
    uuid = create_index(http, "killpit")
    assert bulk(http, "killpit", {f"d{n}": source(n) for n in range(600)}, refresh=True)["errors"] is False
    pit = http.post("/killpit/_pit?keep_alive=1m").json()["id"]
    body: dict[str, Any] = {"pit": {"id": pit}, "size": 100, "sort": [{"n": "asc"}]}
    first = http.post("/_search", json=body).json()
    seen = [hit["_id"] for hit in first["hits"]["hits"]]
    # A restarted shard keeps the PIT's context (tests/ray_backend/test_ray_contexts_restart.py);
    # one that lost it fails its part: the walk goes on over the other shards, and each page
    # reports the shard's failure, as Elasticsearch does.
    restarted(uuid, 4, kill_shard(uuid, 4))
    lose_context(uuid, 4, pit)
    after = first["hits"]["hits"][-1]["sort"]
    while True:
        page = http.post("/_search", json={**body, "search_after": after}).json()
        shards = page["_shards"]
        assert shards["total"] == SHARDS and shards["successful"] == SHARDS - 1 and shards["failed"] == 1
        (failure,) = shards["failures"]
        assert failure["shard"] == 4 and failure["index"] == "killpit"
        assert failure["reason"]["type"] == "search_context_missing_exception"
        hits = page["hits"]["hits"]
        if not hits:
            break
        seen += [hit["_id"] for hit in hits]
        after = hits[-1]["sort"]
    assert len(seen) == len(set(seen))
    lost_shard = 600 - len(seen)
    assert 0 < lost_shard < 600
    # Refusing partial results makes the same page an error.
    strict = http.post("/_search?allow_partial_search_results=false", json=body)
    assert strict.status_code == 404
    error = strict.json()["error"]
    assert error["type"] == "search_phase_execution_exception" and error["reason"] == "Partial shards failure"
    assert error["root_cause"][0]["type"] == "search_context_missing_exception"
    assert [failed["shard"] for failed in error["failed_shards"]] == [4]
    # A new search reads every shard, the restarted one recovered from its folder.
    assert http.get("/killpit/_count").json() == {
        "count": 600,
        "_shards": {"total": SHARDS, "successful": SHARDS, "skipped": 0, "failed": 0},
    }


def test_a_restarted_coordinator_finds_its_shard_actors(ray_cluster: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with (
        ray_server(ray_cluster.address, data) as first,
        web.Client(base_url=first.url, timeout=120) as http,
    ):
        uuid = create_index(http, "restart", shards=3)
        assert bulk(http, "restart", {f"d{n}": source(n) for n in range(300)})["errors"] is False
        pids = [where(uuid, shard)[1] for shard in range(3)]
        assert http.post("/restart/_refresh").status_code == 200
        pit = http.post("/restart/_pit?keep_alive=5m").json()["id"]
    with (
        ray_server(ray_cluster.address, data) as second,
        web.Client(base_url=second.url, timeout=120) as http,
    ):
        # The same actors (found by name, not re-created), with every acknowledged write.
        assert [where(uuid, shard)[1] for shard in range(3)] == pids
        assert http.post("/restart/_refresh").status_code == 200
        assert http.get("/restart/_count").json()["count"] == 300
        assert http.get("/restart/_doc/d7").json()["_source"] == source(7)
        # A PIT of the coordinator before goes on (its record and the actors' pins are kept).
        kept = http.post("/_search", json={"pit": {"id": pit}, "size": 0}).json()
        assert kept["hits"]["total"]["value"] == 300 and kept["_shards"]["failed"] == 0
        assert http.request("DELETE", "/_pit", json={"id": pit}).json()["num_freed"] == 1
        assert bulk(http, "restart", {"new": source(1)}, refresh=True)["errors"] is False
        assert http.get("/restart/_count").json()["count"] == 301
        assert http.delete("/restart").status_code == 200


def scroll_all(http: httpx.Client, index: str, body: dict[str, Any]) -> tuple[list[str], set[int], set[int]]:
    """Every id of a scroll, the totals its batches reported, and the shards its hits came from
    (by the routing of their ids: the index is `create_index`'s, of SHARDS shards)."""
    page = http.post(f"/{index}/_search?scroll=1m", json=body)
    assert page.status_code == 200, page.text
    ids: list[str] = []
    totals = set()
    shards: set[int] = set()
    while True:
        data = page.json()
        assert data["_shards"]["failed"] == 0
        totals.add(data["hits"]["total"]["value"])
        hits = data["hits"]["hits"]
        if not hits:
            break
        ids += [hit["_id"] for hit in hits]
        shards |= {shard_for(hit["_id"], SHARDS, default_routing_num_shards(SHARDS)) for hit in hits}
        page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": data["_scroll_id"]})
        assert page.status_code == 200, page.text
    cleared = http.request("DELETE", "/_search/scroll", json={"scroll_id": data["_scroll_id"]})
    assert cleared.json()["num_freed"] == 1
    return ids, totals, shards


def test_scrolls_and_sliced_scrolls_read_every_document_once(http: httpx.Client) -> None:
    create_index(http, "scrolled")
    docs = {f"d{n}": source(n) for n in range(1000)}
    assert bulk(http, "scrolled", docs, refresh=True)["errors"] is False
    stop = threading.Event()

    def writer() -> None:  # the scroll reads the snapshot it opened on
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            n = 100_000  # outside the range query below
            while not stop.is_set():
                bulk(own, "scrolled", {f"new{n}": source(n)}, refresh=True)
                n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        ids, totals, _ = scroll_all(http, "scrolled", {"size": 97, "sort": ["_doc"]})
        by_n, _, _ = scroll_all(
            http, "scrolled", {"size": 50, "sort": [{"n": "desc"}], "query": {"range": {"n": {"lt": 500}}}}
        )
    finally:
        stop.set()
        thread.join()
    assert len(ids) == len(set(ids)) and totals == {len(ids)}
    assert set(docs) <= set(ids)
    assert by_n == [f"d{n}" for n in range(499, -1, -1)]

    total = http.get("/scrolled/_count").json()["count"]
    slices: dict[int, list[str]] = {}
    slice_shards: dict[int, set[int]] = {}

    def read_slice(i: int) -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            body = {"size": 100, "sort": ["_doc"], "slice": {"id": i, "max": 4}}
            slices[i], _, slice_shards[i] = scroll_all(own, "scrolled", body)

    readers = [threading.Thread(target=read_slice, args=(i,)) for i in range(4)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    joined = [doc_id for i in range(4) for doc_id in slices[i]]
    assert all(slices[i] for i in range(4))
    assert len(joined) == len(set(joined)) == total
    # Slices go to shards first (SPEC 4.2): with 6 shards and 4 slices, slice i reads the
    # shards whose number modulo 4 is i.
    assert slice_shards == {i: {s for s in range(SHARDS) if s % 4 == i} for i in range(4)}


def test_updates_read_and_write_a_shard_actor_without_losing_any(http: httpx.Client) -> None:
    create_index(http, "updated")
    assert http.put("/updated/_doc/a", json={"n": 1, "keep": "x"}).status_code == 201
    done = http.post("/updated/_update/a", json={"doc": {"n": 2}}).json()
    assert done["result"] == "updated" and done["_version"] == 2
    assert http.get("/updated/_doc/a").json()["_source"] == {"n": 2, "keep": "x"}
    assert http.post("/updated/_update/a", json={"doc": {"n": 2}}).json()["result"] == "noop"
    missing = http.post("/updated/_update/b", json={"doc": {"n": 1}})
    assert missing.status_code == 404 and error_of(missing)["type"] == "document_missing_exception"
    upsert = http.post("/updated/_update/b", json={"doc": {"n": 5}, "doc_as_upsert": True})
    assert upsert.status_code == 201 and upsert.json()["result"] == "created"

    # Concurrent partial updates of one document: each reads, merges and writes only if the
    # document is still what it read (else reads again), so no update is lost.
    def updater(t: int) -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            for i in range(8):
                answer = own.post("/updated/_update/a?retry_on_conflict=50", json={"doc": {f"f{t}_{i}": t}})
                assert answer.status_code == 200, answer.text

    threads = [threading.Thread(target=updater, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = http.get("/updated/_doc/a").json()
    assert final["_source"] == {"n": 2, "keep": "x", **{f"f{t}_{i}": t for t in range(4) for i in range(8)}}
    assert final["_version"] == 2 + 32

    # In a bulk request an update sees the operations before it on its shard.
    lines = [
        {"index": {"_id": "c"}},
        {"n": 1},
        {"update": {"_id": "c"}},
        {"doc": {"m": 2}},
        {"update": {"_id": "nothing"}},
        {"doc": {"m": 2}},
        {"delete": {"_id": "b"}},
    ]
    answer = http.post(
        "/updated/_bulk?refresh=true",
        content=b"\n".join(orjson.dumps(line) for line in lines) + b"\n",
        headers={"content-type": "application/x-ndjson"},
    ).json()
    statuses = [next(iter(item.values()))["status"] for item in answer["items"]]
    assert statuses == [201, 200, 404, 200]
    assert http.get("/updated/_doc/c").json()["_source"] == {"n": 1, "m": 2}
    assert http.post("/updated/_refresh").status_code == 200  # "a" is on a shard the bulk left
    assert http.get("/updated/_count").json()["count"] == 2


def test_a_shard_that_stays_down_fails_its_writes_and_its_part_of_searches(http: httpx.Client) -> None:
    import ray

    shards = 3  # one per node: the machine actor ended holds shard 1 alone of this index
    uuid = create_index(http, "deadshard", shards=shards)
    assert bulk(http, "deadshard", {f"d{n}": source(n) for n in range(300)}, refresh=True)["errors"] is False
    before = http.get("/deadshard/_count").json()["count"]
    actor = machine_actor(uuid, 1)
    _, pid = ray.get(actor.where.remote(), timeout=60)
    ray.kill(actor, no_restart=True)  # Ray will not restart it: the shard stays down
    with pytest.raises(ray.exceptions.RayActorError):  # (once the kill lands: it is asynchronous)
        for _ in range(1000):
            ray.get(actor.where.remote(), timeout=60)
    # Ray calls the actor dead before its process has ended, which may still answer on its
    # channel (and write, durably) meanwhile: the shard is down once the process is gone.
    wait_for(lambda: ended(pid))

    items = bulk(http, "deadshard", {f"e{n}": source(n) for n in range(300)})["items"]
    failed = [item["index"] for item in items if item["index"]["status"] != 201]
    assert failed and len(failed) < 300
    for item in failed:
        assert item["status"] == 503 and item["error"]["type"] == "unavailable_shards_exception"
        assert item["error"]["reason"].startswith("[deadshard][1] primary shard is not active")

    page = http.post("/deadshard/_search", json={"size": 0}).json()
    assert page["_shards"]["failed"] == 1 and page["_shards"]["successful"] == shards - 1
    (failure,) = page["_shards"]["failures"]
    assert failure["shard"] == 1 and failure["reason"]["type"] == "no_shard_available_action_exception"
    assert 0 < page["hits"]["total"]["value"] < before + 300 - len(failed)
    # A page's fetch frees the snapshot of each live shard as it answers, the dead one failed.
    page = http.post("/deadshard/_search", json={"size": 1000, "sort": [{"n": "asc"}]}).json()
    assert page["_shards"]["failed"] == 1 and page["_shards"]["failures"][0]["shard"] == 1
    assert len(page["hits"]["hits"]) == page["hits"]["total"]["value"] > 0
    alive = [s for s in range(shards) if s != 1]
    assert open_contexts(uuid, alive) == [0] * len(alive)
    # A point in time or a scroll pins every shard: refused, and the pins the live shards took
    # for it go back at once (no keep-alive would ever free them).
    for opening in (
        http.post("/deadshard/_pit?keep_alive=10m"),
        http.post("/deadshard/_search?scroll=10m", json={"size": 5}),
    ):
        assert opening.status_code == 503, opening.text
        assert opening.json()["error"]["root_cause"][0]["reason"].startswith("[deadshard][1] is unavailable")
    assert open_contexts(uuid, alive) == [0] * len(alive)
    contexts = http.get("/_cat/search_contexts?format=json").json()
    assert [row for row in contexts if row["indices"] == "deadshard"] == []
    strict = http.post("/deadshard/_search?allow_partial_search_results=false", json={"size": 0})
    assert strict.status_code == 503
    assert strict.json()["error"]["type"] == "search_phase_execution_exception"
    assert http.delete("/deadshard").status_code == 200


def test_one_shot_searches_leave_no_snapshot_pinned(http: httpx.Client) -> None:
    """A search pins a snapshot on each shard actor for its query and fetch; the fetch frees it as
    it answers and a shard whose query found no hit frees it at once (no release message), also
    on a one-shard index and with clients and a writer busy at the same time."""
    uuid = create_index(http, "oneshot")
    one = create_index(http, "oneshard", shards=1)
    for index in ("oneshot", "oneshard"):
        assert bulk(http, index, {f"d{n}": source(n) for n in range(300)}, refresh=True)["errors"] is False
    below = {"range": {"n": {"lt": 10_000}}}  # the writer's documents are above
    tagged = {"bool": {"filter": [below, {"term": {"tag": "t3"}}]}}
    t3 = [f"d{n}" for n in range(300) if n % 7 == 3]
    searches: list[tuple[str, dict[str, Any], list[str] | None, int]] = [
        ("oneshot", {"size": 1000, "query": tagged, "sort": [{"n": "asc"}]}, t3, len(t3)),
        ("oneshot", {"size": 0, "query": below}, [], 300),
        ("oneshot", {"size": 10, "query": {"term": {"tag": "nothing"}}}, [], 0),
        ("oneshard", {"size": 1000, "query": tagged, "sort": [{"n": "asc"}]}, t3, len(t3)),
        ("oneshard", {"size": 0, "query": below}, [], 300),
    ]
    stop = threading.Event()

    def writer() -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            n = 10_000
            while not stop.is_set():
                for index in ("oneshot", "oneshard"):
                    docs = {f"w{n + i}": source(n + i) for i in range(20)}
                    assert bulk(own, index, docs, refresh=True)["errors"] is False
                n += 20

    def reader() -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            for _ in range(8):
                for index, body, ids, total in searches:
                    page = own.post(f"/{index}/_search", json=body).json()
                    n = 1 if index == "oneshard" else SHARDS
                    assert page["_shards"] == {"total": n, "successful": n, "skipped": 0, "failed": 0}
                    assert page["hits"]["total"] == {"value": total, "relation": "eq"}
                    assert [hit["_id"] for hit in page["hits"]["hits"]] == ids

    readers_beside_a_writer(writer, [reader] * 3, stop)
    # Every shard held page hits or none: nothing was left to a release message, and the
    # answers came after the frees.
    assert open_contexts(uuid, list(range(SHARDS))) == [0] * SHARDS
    assert open_contexts(one, [0]) == [0]


def test_a_slice_of_a_point_in_time_is_read_from_its_own_shards_only(http: httpx.Client) -> None:
    """Slices go to shards first (3 slices of 6 shards: slice i reads shards i and i + 3), and
    a page of a slice asks those shards only: a shard that lost the PIT's context fails the
    pages of its own slice, not the others'."""
    uuid = create_index(http, "sliceskip")
    assert bulk(http, "sliceskip", {f"d{n}": source(n) for n in range(600)}, refresh=True)["errors"] is False
    pit = http.post("/sliceskip/_pit?keep_alive=1m").json()["id"]
    lose_context(uuid, 5, pit)
    # (`walk` asserts that every page of the slice has all shards successful)
    kept = {i: walk(http, pit, 50, {"id": i, "max": 3})[0] for i in (0, 1)}
    page = http.post("/_search", json={"pit": {"id": pit}, "size": 50, "slice": {"id": 2, "max": 3}}).json()
    (failure,) = page["_shards"]["failures"]
    assert failure["shard"] == 5 and failure["reason"]["type"] == "search_context_missing_exception"
    # The same slices of a new PIT (the restarted shard recovered, nothing was written since)
    # hold the same documents: each once.
    fresh = http.post("/sliceskip/_pit?keep_alive=1m").json()["id"]
    for i in (0, 1):
        again = walk(http, fresh, 50, {"id": i, "max": 3})[0]
        assert len(kept[i]) == len(set(kept[i])) and sorted(again) == sorted(kept[i]) and kept[i]
    assert not set(kept[0]) & set(kept[1])
    for closing in (pit, fresh):
        assert http.request("DELETE", "/_pit", json={"id": closing}).status_code == 200


def test_a_shard_doc_walk_asks_the_shards_from_its_cursor_on(http: httpx.Client) -> None:
    """A PIT walk in `_shard_doc` order that counts nothing asks only the shards at or after its
    cursor (Elasticsearch's can-match skips shards whose sort values all lie before it): once the
    walk has left its first shard, that shard losing the PIT's context fails no page; every
    document comes once, in both directions."""
    uuid = create_index(http, "cursorskip")
    assert bulk(http, "cursorskip", {f"d{n}": source(n) for n in range(600)}, refresh=True)["errors"] is False
    for order, first in (("asc", 0), ("desc", SHARDS - 1)):
        pit = http.post("/cursorskip/_pit?keep_alive=1m").json()["id"]
        body: dict[str, Any] = {"pit": {"id": pit}, "size": 70, "sort": [{"_shard_doc": order}]}
        body["track_total_hits"] = False
        ids: list[str] = []
        shards: list[int] = []
        killed = False
        while True:
            page = http.post("/_search", json=body).json()
            assert page["_shards"] == {"total": SHARDS, "successful": SHARDS, "skipped": 0, "failed": 0}
            hits = page["hits"]["hits"]
            if not hits:
                break
            ids += [hit["_id"] for hit in hits]
            shards += [hit["sort"][0] >> 32 for hit in hits]
            body["search_after"] = hits[-1]["sort"]
            if not killed and shards[-1] != first:  # the walk has left its first shard
                restarted(uuid, first, kill_shard(uuid, first))
                killed = True
        assert killed and shards[0] == first
        assert sorted(ids) == sorted(f"d{n}" for n in range(600))
        assert shards == sorted(shards, reverse=order == "desc")
        assert http.request("DELETE", "/_pit", json={"id": pit}).status_code == 200


def test_a_shard_doc_walk_asks_one_shard_at_a_time(http: httpx.Client) -> None:
    """A PIT walk in `_shard_doc` order that counts nothing asks its cursor's shard alone, which
    answers with the page fetched (one call) when it fills the page; the next shards only for a
    page that crosses into them. Both directions, whole and sliced (3 slices: shards i, i + 3),
    every document once, while a writer indexes and refreshes beside. (Calls are counted per
    walk.)"""
    uuid = create_index(http, "onebyone")
    assert bulk(http, "onebyone", {f"d{n}": source(n) for n in range(600)}, refresh=True)["errors"] is False
    stop = threading.Event()

    def writer() -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            n = 10_000
            while not stop.is_set():
                bulk(own, "onebyone", {f"w{n + i}": source(n + i) for i in range(10)}, refresh=True)
                n += 10

    writing = threading.Thread(target=writer)
    writing.start()
    try:
        for order, slices in (("asc", None), ("desc", None), ("asc", 3)):
            pit = http.post("/onebyone/_pit?keep_alive=1m").json()["id"]
            ids: list[str] = []
            one_shard_pages = crossing_pages = 0
            before = search_machine_calls()
            for slice_id in range(slices or 1):
                body: dict[str, Any] = {"pit": {"id": pit}, "size": 40, "sort": [{"_shard_doc": order}]}
                body["track_total_hits"] = False
                if slices:
                    body["slice"] = {"id": slice_id, "max": slices}
                while True:
                    page = http.post("/_search", json=body).json()
                    assert page["_shards"]["failed"] == 0, page
                    hits = page["hits"]["hits"]
                    if not hits:
                        break
                    ids += [hit["_id"] for hit in hits]
                    body["search_after"] = hits[-1]["sort"]
                    if len({hit["sort"][0] >> 32 for hit in hits}) == 1 and len(hits) == 40:
                        one_shard_pages += 1
                    else:
                        crossing_pages += 1
            calls = search_machine_calls() - before
            assert len(ids) == len(set(ids)) and {f"d{n}" for n in range(600)} <= set(ids), (order, slices)
            # A page within one shard is one call, its hits relayed (search/page_relay.py; asked of
            # every shard from the cursor's on, it was a query call per machine and a fetch: about
            # 3.4 calls a page); a page crossing shards is asked again the general way.
            assert calls["relay"] >= one_shard_pages >= 6, (order, slices, calls)
            assert sum(calls.values()) <= one_shard_pages + 7 * (crossing_pages + 1), (order, slices, calls)
            assert http.request("DELETE", "/_pit", json={"id": pit}).status_code == 200
    finally:
        stop.set()
        writing.join()
    assert open_contexts(uuid, list(range(SHARDS))) == [0] * SHARDS


def search_calls(uuid: str, shards: list[int]) -> Counter[str]:
    """The search calls those shard actors of an index served so far, by method."""
    import ray

    calls: Counter[str] = Counter()
    for stats in ray.get([shard_actor(uuid, s).stats.remote() for s in shards], timeout=60):
        calls.update(stats["search_calls"])
    return calls


def _answer(response: httpx.Response, *, shards: bool = True) -> tuple[int, bytes]:
    """A search's status and body bytes, but its `took` (and its `_shards` unless `shards`)."""
    body = re.sub(rb'"took":\d+', b'"took":0', response.content)
    if not shards:
        body = re.sub(rb'"_shards":\{[^{}]*\}', b'"_shards":{}', body)
    return response.status_code, body


#: Documents of the query-and-fetch tests: sort keys with ties and gaps, text to score, a keyword
#: to aggregate, a date; all match `BELOW` (the concurrent writer's do not).
QF_MAPPING = {
    "properties": {
        "n": {"type": "long"},
        "tag": {"type": "keyword"},
        "body": {"type": "text"},
        "ts": {"type": "date"},
    }
}
BELOW = {"range": {"n": {"lt": 10_000}}}


def qf_source(n: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"n": n // 2, "body": f"doc {n} of the ray test {'ray ' * (n % 4)}"}
    if n % 5:
        doc["tag"] = f"t{n % 7}"
    doc["ts"] = f"2026-11-{1 + n % 28:02d}T{n % 24:02d}:00:00Z"
    return doc


def qf_requests() -> list[tuple[str, dict[str, Any]]]:
    """A spread of searches (query string, body): sorts, `search_after`, `from`, fetch options,
    aggregations, highlight, no hits, errors of the query and of the fetch phase."""
    scored = {"bool": {"must": {"match": {"body": "ray 1 2 3 5 8 13 21 34 55"}}, "filter": BELOW}}
    return [
        ("", {"query": BELOW, "size": 7}),
        ("", {"query": scored, "size": 9, "from": 3}),
        ("", {"query": scored, "size": 10, "sort": ["_score", {"n": "desc"}], "track_scores": True}),
        ("", {"query": BELOW, "size": 25, "sort": [{"n": "asc"}, {"ts": "desc"}]}),
        ("", {"query": BELOW, "size": 10, "sort": [{"n": "asc"}, {"ts": "desc"}], "search_after": [40, 0]}),
        ("", {"query": BELOW, "size": 12, "sort": [{"tag": {"order": "desc", "missing": "_first"}}, "n"]}),
        ("", {"query": BELOW, "size": 8, "sort": [{"ts": {"order": "asc", "format": "yyyy-MM-dd"}}, "n"]}),
        (
            "",
            {
                "query": BELOW,
                "size": 5,
                "sort": ["n"],
                "_source": {"includes": ["n", "tag"]},
                "version": True,
            },
        ),
        ("", {"query": BELOW, "size": 5, "sort": ["n"], "_source": False, "fields": ["tag", "ts"]}),
        (
            "",
            {
                "query": BELOW,
                "size": 5,
                "sort": ["n"],
                "docvalue_fields": ["n", "tag"],
                "seq_no_primary_term": True,
            },
        ),
        ("", {"query": BELOW, "size": 4, "sort": ["n"], "stored_fields": "_none_"}),
        ("", {"query": scored, "size": 3, "explain": True}),
        ("", {"query": scored, "size": 3, "highlight": {"fields": {"body": {}}}}),
        (
            "",
            {
                "query": BELOW,
                "size": 3,
                "aggs": {"t": {"terms": {"field": "tag"}}, "a": {"avg": {"field": "n"}}},
            },
        ),
        ("", {"query": BELOW, "size": 0, "aggs": {"t": {"terms": {"field": "tag", "size": 3}}}}),
        ("", {"query": {"term": {"tag": "none"}}, "size": 10, "sort": ["n"]}),
        ("", {"query": BELOW, "size": 10, "track_total_hits": False, "sort": [{"n": "desc"}]}),
        ("search_type=dfs_query_then_fetch&", {"query": scored, "size": 6}),
        ("", {"query": BELOW, "size": 5, "sort": ["n"], "search_after": [1, 2]}),  # query phase: refused
        ("", {"query": BELOW, "size": 5, "sort": ["n"], "docvalue_fields": ["body"]}),  # fetch phase
    ]


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A single-process server: what a Ray-backed index must answer alike."""
    with Server(
        tmp_path_factory.mktemp("local") / "data", args=["--search-workers", "0"], popen=SERVER_ZYGOTE.popen
    ) as server:
        yield server


def test_a_search_of_one_shard_queries_and_fetches_in_one_call(
    http: httpx.Client, local_server: Server
) -> None:
    """A search that asks one shard actor (a one-shard index, a routed search) gets its page
    from the query call itself: one call per search, no fetch, no release, no pin left. Its
    answers are those of the two-call path (the same index searched without routing: every
    shard asked, the page fetched apart) and of a single-process server, byte for byte but
    `took`, request after request, while a writer indexes and refreshes beside."""
    routed = "routing=r&"
    docs = {f"d{n}": qf_source(n) for n in range(240)}
    with web.Client(base_url=local_server.url, timeout=120) as local:
        uuids = {}
        for client in (http, local):
            for name, shards in (("qf1", 1), ("qf6", SHARDS)):
                settings = {"number_of_shards": shards, "number_of_replicas": 0}  # (calls counted on it)
                created = client.put(f"/{name}", json={"settings": settings, "mappings": QF_MAPPING})
                assert created.status_code == 200, created.text
                if client is http:
                    uuids[name] = client.get(f"/{name}/_settings").json()[name]["settings"]["index"]["uuid"]
            assert bulk(client, "qf1", docs, refresh=True)["errors"] is False
            lines = []
            for doc_id, doc in docs.items():
                lines += [orjson.dumps({"index": {"_id": doc_id, "routing": "r"}}), orjson.dumps(doc)]
            body = b"\n".join(lines) + b"\n"
            response = client.post(
                "/qf6/_bulk?refresh=true", content=body, headers={"content-type": "application/x-ndjson"}
            )
            assert response.status_code == 200 and response.json()["errors"] is False
        stop = threading.Event()

        def writer() -> None:
            """Documents no request matches (and without the scored text: scores stay), with
            refreshes, on every shard of both indices."""
            with web.Client(base_url=str(http.base_url), timeout=120) as own:
                n = 10_000
                while not stop.is_set():
                    for index in ("qf1", "qf6"):
                        batch = {f"w{n + i}": {"n": n + i, "tag": "w"} for i in range(10)}
                        assert bulk(own, index, batch, refresh=True)["errors"] is False
                    n += 10

        requests = qf_requests()

        def compare() -> None:
            for query, body in requests:
                one_shard = http.post(f"/qf1/_search?{query}", json=body)
                assert _answer(one_shard) == _answer(local.post(f"/qf1/_search?{query}", json=body)), body
                one_call = http.post(f"/qf6/_search?{routed}{query}", json=body)
                assert _answer(one_call) == _answer(local.post(f"/qf6/_search?{routed}{query}", json=body)), (
                    body
                )
                two_calls = http.post(f"/qf6/_search?{query}", json=body)
                assert _answer(one_call, shards=False) == _answer(two_calls, shards=False), body
                assert one_shard.status_code in (200, 400), one_shard.text

        # (the writer's bulks and refreshes are no search calls)
        before = {
            name: search_calls(uuid, list(range(1 if name == "qf1" else SHARDS)))
            for name, uuid in uuids.items()
        }
        readers_beside_a_writer(writer, [compare], stop)
    calls = search_calls(uuids["qf1"], [0]) - before["qf1"]
    # Every search was one call; none of them left a pin or asked for a release.
    assert calls == Counter({"query_fetch": len(requests)})
    assert open_contexts(uuids["qf1"], [0]) == [0]
    assert open_contexts(uuids["qf6"], list(range(SHARDS))) == [0] * SHARDS
    six = search_calls(uuids["qf6"], list(range(SHARDS))) - before["qf6"]
    # The routed ones, and the unrouted small pages (every shard renders its candidates).
    assert six["query_fetch"] >= len(requests)


#: The machine calls a search makes (the writes and refreshes beside are not counted).
SEARCH_METHODS = ("dfs", "query", "query_fetch", "relay", "fetch", "free_context")


def search_machine_calls() -> Counter[str]:
    return Counter({m: n for m, n in machine_calls().items() if m in SEARCH_METHODS})


def test_a_small_page_of_several_machines_is_one_call_per_machine(
    http: httpx.Client, local_server: Server
) -> None:
    """A one-shot page of at most 100 hits over shards on 3 machines: each machine's shards
    render their candidates (their own top hits) with their query, and the coordinator keeps the
    page's: a call per machine, no fetch, no release, no pin left. The answers are a single-process
    server's byte for byte but `took`, request after request (sorts with ties across shards,
    `from`, scores, fetch options, a fetch-phase error, no hits), while a writer indexes and
    refreshes beside; pages it does not serve this way (cursors, source filtering, larger pages)
    still fetch apart."""
    docs = {f"d{n}": qf_source(n) for n in range(240)}
    with web.Client(base_url=local_server.url, timeout=120) as local:
        for client in (http, local):
            settings = {"number_of_shards": SHARDS, "number_of_replicas": 0}
            created = client.put("/cand", json={"settings": settings, "mappings": QF_MAPPING})
            assert created.status_code == 200, created.text
            assert bulk(client, "cand", docs, refresh=True)["errors"] is False
        uuid = http.get("/cand/_settings").json()["cand"]["settings"]["index"]["uuid"]
        machines = len({where(uuid, shard)[0] for shard in range(SHARDS)})
        assert machines == 3
        stop = threading.Event()

        def writer() -> None:
            """Documents no request matches, without the scored text, with refreshes."""
            with web.Client(base_url=str(http.base_url), timeout=120) as own:
                n = 10_000
                while not stop.is_set():
                    batch = {f"w{n + i}": {"n": n + i, "tag": "w"} for i in range(10)}
                    assert bulk(own, "cand", batch, refresh=True)["errors"] is False
                    n += 10

        def compare() -> None:
            requests = [*qf_requests(), ("", {"query": BELOW, "size": 40, "from": 60, "sort": ["tag", "n"]})]
            for query, body in requests:
                before = search_machine_calls()
                answer = http.post(f"/cand/_search?{query}", json=body)
                calls = search_machine_calls() - before
                assert _answer(answer) == _answer(local.post(f"/cand/_search?{query}", json=body)), body
                cursor = "search_after" in body or "fields" in body or "explain" in body
                if body["size"] > 0 and not cursor and "_source" not in body:
                    dfs = Counter({"dfs": machines} if query else {})
                    assert calls == Counter({"query_fetch": machines}) + dfs, body
                elif not cursor and answer.status_code == 200 and answer.json()["hits"]["hits"]:
                    assert calls["fetch"] >= 1 and not calls["query_fetch"], body

        readers_beside_a_writer(writer, [compare], stop)
        big = {"query": BELOW, "size": 101, "sort": ["n"]}
        before = search_machine_calls()
        assert _answer(http.post("/cand/_search", json=big)) == _answer(local.post("/cand/_search", json=big))
        assert search_machine_calls() - before == Counter({"query": machines, "fetch": machines})
    assert open_contexts(uuid, list(range(SHARDS))) == [0] * SHARDS


def test_a_pit_sliced_one_slice_per_shard_reads_each_page_in_one_call(http: httpx.Client) -> None:
    """A PIT read in as many slices as shards (slices go to shards first: each slice is one
    shard) costs one call per page: the page comes with the query. Every document comes once
    while a writer indexes and refreshes; a shard restarted during the walk (its context lost)
    goes on; one that lost its context fails its own slice's pages, and no other slice's."""
    uuid = create_index(http, "qfslices")
    assert bulk(http, "qfslices", {f"d{n}": source(n) for n in range(600)}, refresh=True)["errors"] is False
    pit = http.post("/qfslices/_pit?keep_alive=1m").json()["id"]
    stop = threading.Event()

    writing = threading.Thread(target=bulk_writer(http, "qfslices", source, 1000, 20, stop))
    before = search_calls(uuid, list(range(SHARDS)))
    writing.start()
    try:
        slices = {i: walk(http, pit, 40, {"id": i, "max": SHARDS}) for i in range(SHARDS)}
    finally:
        stop.set()
        writing.join()
    calls = search_calls(uuid, list(range(SHARDS))) - before
    ids = [doc_id for found, _ in slices.values() for doc_id in found]
    assert sorted(ids) == sorted(f"d{n}" for n in range(600))
    assert sum(total for _, total in slices.values()) == 600
    pages = sum(-(-len(found) // 40) + 1 for found, _ in slices.values())  # (and the empty one)
    assert calls == Counter({"query_fetch": pages})
    # A shard restarted mid-walk goes on; one that lost its context fails its slice's next page.
    body: dict[str, Any] = {
        "pit": {"id": pit},
        "size": 40,
        "sort": [{"n": "asc"}],
        "slice": {"id": 2, "max": SHARDS},
    }
    first = http.post("/_search", json=body).json()
    assert first["_shards"]["failed"] == 0 and first["hits"]["hits"]
    restarted(uuid, 2, kill_shard(uuid, 2))
    after = {**body, "search_after": first["hits"]["hits"][0]["sort"]}
    again = http.post("/_search", json=after).json()
    assert again["_shards"]["failed"] == 0 and again["hits"]["hits"][:-1] == first["hits"]["hits"][1:]
    lose_context(uuid, 2, pit)
    page = http.post("/_search", json={**body, "search_after": first["hits"]["hits"][-1]["sort"]}).json()
    assert page["_shards"]["successful"] == SHARDS - 1 and page["hits"]["hits"] == []
    (failure,) = page["_shards"]["failures"]
    assert failure["shard"] == 2 and failure["reason"]["type"] == "search_context_missing_exception"
    strict = http.post("/_search?allow_partial_search_results=false", json=body)
    assert strict.status_code == 404 and strict.json()["error"]["reason"] == "Partial shards failure"
    assert strict.json()["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
    other = http.post("/_search", json={**body, "slice": {"id": 3, "max": SHARDS}}).json()
    assert other["_shards"]["failed"] == 0 and other["hits"]["hits"]
    assert http.request("DELETE", "/_pit", json={"id": pit}).status_code == 200
    assert open_contexts(uuid, [s for s in range(SHARDS) if s != 2]) == [0] * (SHARDS - 1)


def test_a_scroll_of_one_shard_reads_each_batch_in_one_call(http: httpx.Client, local_server: Server) -> None:
    """A scroll over a one-shard index (a `search_after` walk on its context) gets each batch
    with its query, in one call: its batches are a single-process server's, byte for byte but
    `took` and the scroll id, sorted by `_doc` or by a field with ties, with fetch options."""
    docs = {f"d{n}": qf_source(n) for n in range(130)}
    with web.Client(base_url=local_server.url, timeout=120) as local:
        for client in (http, local):
            created = client.put(
                "/qfscroll", json={"settings": {"number_of_shards": 1}, "mappings": QF_MAPPING}
            )
            assert created.status_code == 200, created.text
            assert bulk(client, "qfscroll", docs, refresh=True)["errors"] is False
        uuid = http.get("/qfscroll/_settings").json()["qfscroll"]["settings"]["index"]["uuid"]
        bodies: list[dict[str, Any]] = [
            {"size": 40, "query": BELOW},
            {"size": 25, "sort": [{"n": "desc"}], "_source": {"includes": ["n"]}, "version": True},
            {
                "size": 50,
                "sort": ["_doc"],
                "docvalue_fields": ["tag"],
                "aggs": {"t": {"terms": {"field": "tag"}}},
            },
        ]
        before = search_calls(uuid, [0])
        batches = 0
        for body in bodies:
            answers = []
            for client in (http, local):
                first = client.post("/qfscroll/_search?scroll=1m", json=body)
                pages, scroll_id = [first], first.json()["_scroll_id"]
                while pages[-1].json()["hits"]["hits"]:
                    pages.append(
                        client.post("/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id})
                    )
                    scroll_id = pages[-1].json()["_scroll_id"]
                client.request("DELETE", "/_search/scroll", json={"scroll_id": scroll_id})
                answers.append(
                    [re.sub(rb'"_scroll_id":"[^"]*"', b'"_scroll_id":""', _answer(page)[1]) for page in pages]
                )
            ray_pages, local_pages = answers
            assert ray_pages == local_pages, body
            assert sum(len(orjson.loads(page)["hits"]["hits"]) for page in ray_pages) == len(docs)
            batches += len(ray_pages)
    assert search_calls(uuid, [0]) - before == Counter(
        {"open_context": len(bodies), "query_fetch": batches, "free_context": len(bodies)}
    )
    assert open_contexts(uuid, [0]) == [0]


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def pages_read_ahead(uuid: str, shards: list[int]) -> list[int]:
    """The pages each of those shard actors holds read ahead for the walks it relays."""
    import ray

    stats = ray.get([shard_actor(uuid, s).stats.remote() for s in shards], timeout=60)
    return [s["pages_read_ahead"] for s in stats]


def test_a_shard_doc_pit_page_is_relayed_as_the_general_path_renders_it(http: httpx.Client) -> None:
    """A `_shard_doc` PIT page that counts nothing and one shard fills is that shard's bytes,
    relayed (search/page_relay.py): the same response, byte for byte but `took`, as the general
    path's for the same page (asked with a `timeout`, which that path alone serves), whole and
    sliced, both directions, with fetch options, while a writer indexes and refreshes beside and
    the slices are read at once; every document once; the machines prepared pages ahead."""
    settings = {"number_of_shards": SHARDS, "number_of_replicas": 0}
    assert http.put("/relayed", json={"settings": settings, "mappings": QF_MAPPING}).status_code == 200
    uuid = http.get("/relayed/_settings").json()["relayed"]["settings"]["index"]["uuid"]
    assert bulk(http, "relayed", {f"d{n}": qf_source(n) for n in range(600)}, refresh=True)["errors"] is False
    pit = http.post("/relayed/_pit?keep_alive=5m").json()["id"]
    plain = {"pit": {"id": pit}, "size": 30, "sort": ["_shard_doc"], "track_total_hits": False}
    bodies: list[dict[str, Any]] = [
        plain,
        {**plain, "sort": [{"_shard_doc": "desc"}], "_source": False, "fields": ["tag", "ts"]},
        {**plain, "docvalue_fields": ["n", "tag"], "seq_no_primary_term": True, "version": True},
        *({**plain, "slice": {"id": i, "max": 3}} for i in range(3)),
    ]
    walked: dict[int, list[str]] = {}
    stop = threading.Event()

    def reader(i: int) -> Callable[[], None]:
        def read() -> None:
            body, ids = dict(bodies[i]), walked.setdefault(i, [])
            with web.Client(base_url=str(http.base_url), timeout=120) as own:
                while True:
                    page = own.post("/_search", json=body)
                    general = own.post("/_search", json={**body, "timeout": "5m"})
                    assert _answer(page) == _answer(general), body
                    assert page.status_code == 200, page.text
                    hits = page.json()["hits"]["hits"]
                    if not hits:
                        return
                    ids += [hit["_id"] for hit in hits]
                    body["search_after"] = hits[-1]["sort"]

        return read

    before, ahead = search_machine_calls(), search_calls(uuid, list(range(SHARDS)))
    writer = bulk_writer(http, "relayed", qf_source, 10_000, 10, stop)
    readers_beside_a_writer(writer, [reader(i) for i in range(len(bodies))], stop)
    calls = search_machine_calls() - before
    ahead = search_calls(uuid, list(range(SHARDS))) - ahead
    every = sorted(f"d{n}" for n in range(600))
    for i in range(3):
        assert sorted(walked[i]) == every, bodies[i]
    assert sorted(walked[3] + walked[4] + walked[5]) == every
    pages = sum(-(-len(ids) // 30) + 1 for ids in walked.values())
    # Each page was relayed (one call) but the few that cross into the next shard; the general
    # path's twins are query calls.
    assert pages - 30 <= calls["relay"] <= pages + 30, calls
    # (a walk's first pages, a page after one of the general path, and a page asked before its
    # preparation started are not read ahead)
    assert ahead["relay_read_ahead"] > 0, ahead
    assert http.request("DELETE", "/_pit", json={"id": pit}).status_code == 200
    assert pages_read_ahead(uuid, list(range(SHARDS))) == [0] * SHARDS
    assert open_contexts(uuid, list(range(SHARDS))) == [0] * SHARDS


def test_a_page_the_machine_does_not_relay_is_answered_by_the_general_path(http: httpx.Client) -> None:
    """What the shard cannot answer plainly is not relayed but answered as the general path
    answers it: a fetch-phase error (400), a shard that lost the PIT's context (a 200 with that
    shard failed, or a 404 refusing partial results), a PIT closed (404); the walk's other pages
    go on being relayed."""
    uuid = create_index(http, "unrelayed")
    docs = {f"d{n}": qf_source(n) for n in range(300)}
    assert bulk(http, "unrelayed", docs, refresh=True)["errors"] is False
    pit = http.post("/unrelayed/_pit?keep_alive=5m").json()["id"]
    body: dict[str, Any] = {"pit": {"id": pit}, "size": 20, "sort": ["_shard_doc"]}
    body["track_total_hits"] = False
    first = http.post("/_search", json=body)
    assert first.status_code == 200 and first.json()["_shards"]["failed"] == 0

    def both(asked: dict[str, Any], query: str = "") -> tuple[int, bytes]:
        page = http.post(f"/_search{query}", json=asked)
        assert _answer(page) == _answer(http.post(f"/_search{query}", json={**asked, "timeout": "5m"})), asked
        return _answer(page)

    status, error = both({**body, "docvalue_fields": ["body"]})  # (a text field: refused by the fetch)
    assert status == 400 and b"illegal_argument_exception" in error
    # The shard of the first page loses its part of the PIT behind the coordinator's back.
    after = first.json()["hits"]["hits"][-1]["sort"]
    shard = after[0] >> 32
    lose_context(uuid, shard, pit)
    before = search_machine_calls()
    status, page = both({**body, "search_after": after})
    assert status == 200
    shards = orjson.loads(page)["_shards"]
    assert shards["failed"] == 1 and shards["failures"][0]["shard"] == shard
    assert shards["failures"][0]["reason"]["type"] == "search_context_missing_exception"
    status, _ = both({**body, "search_after": after}, "?allow_partial_search_results=false")
    assert status == 404
    calls = search_machine_calls() - before
    assert calls["relay"] == 2, calls  # (asked, not relayed)
    # Another shard's pages are still relayed.
    other = {**body, "search_after": [((shard + 1) % SHARDS) << 32]}
    before = search_machine_calls()
    status, page = both(other)
    assert status == 200 and orjson.loads(page)["_shards"]["failed"] == 0
    assert (search_machine_calls() - before)["relay"] == 1
    assert http.request("DELETE", "/_pit", json={"id": pit}).status_code == 200
    status, missing = both(body)
    assert status == 404 and b"search_context_missing_exception" in missing


def test_relayed_pages_leave_nothing_behind(http: httpx.Client, coordinator: Server) -> None:
    """Hundreds of relayed pages of ~50 KB: the coordinator holds none of them (its resident
    memory grows by far less than they would take), and a shard holds at most a few pages read
    ahead, none once the PIT is closed."""
    uuid = create_index(http, "relaymem", shards=1)
    text = "relayed " * 12
    docs = {f"d{n}": {"n": n, "body": f"{text}{n}"} for n in range(3000)}
    assert bulk(http, "relaymem", docs, refresh=True)["errors"] is False
    pit = http.post("/relaymem/_pit?keep_alive=5m").json()["id"]
    body: dict[str, Any] = {"pit": {"id": pit}, "size": 300, "sort": ["_shard_doc"]}
    body["track_total_hits"] = False
    assert process_pid(coordinator)

    def walk_all() -> int:
        asked, pages = dict(body), 0
        while True:
            response = http.post("/_search", json=asked)
            hits = response.json()["hits"]["hits"]
            pages += 1
            if not hits:
                return pages
            asked["search_after"] = hits[-1]["sort"]

    for _ in range(5):
        walk_all()
    size = len(http.post("/_search", json=body).content)
    before, ahead = search_machine_calls(), search_calls(uuid, [0])["relay_read_ahead"]
    rss = _rss_kib(process_pid(coordinator))
    pages = sum(walk_all() for _ in range(40))
    grown = _rss_kib(process_pid(coordinator)) - rss
    assert (search_machine_calls() - before)["relay"] == pages
    # (of the pages after a walk's second, those whose preparation started before they were asked)
    assert search_calls(uuid, [0])["relay_read_ahead"] - ahead > 0
    assert pages * size > 18_000 * 1024 and grown < 8 * 1024, (pages, size, grown)
    assert pages_read_ahead(uuid, [0])[0] <= 2
    assert http.request("DELETE", "/_pit", json={"id": pit}).status_code == 200
    assert pages_read_ahead(uuid, [0]) == [0] and open_contexts(uuid, [0]) == [0]


def process_pid(server: Server) -> int:
    assert server.process is not None
    return server.process.pid


def test_the_official_client_reads_relayed_pages(http: httpx.Client, coordinator: Server) -> None:
    """The official Python client walks a PIT in slices over relayed pages (written to its
    socket by the coordinator's request thread: the product header, the length, keep-alive),
    every document once, and closes it."""
    from elasticsearch import Elasticsearch

    create_index(http, "relayclient")
    docs = {f"d{n}": source(n) for n in range(400)}
    assert bulk(http, "relayclient", docs, refresh=True)["errors"] is False
    client = Elasticsearch(coordinator.url, request_timeout=120)
    pit = client.open_point_in_time(index="relayclient", keep_alive="1m")["id"]
    before, ids = search_machine_calls(), []
    for i in range(2):
        after = None
        while True:
            page = client.search(
                pit={"id": pit, "keep_alive": "1m"},
                size=50,
                sort=["_shard_doc"],
                track_total_hits=False,
                slice={"id": i, "max": 2},
                search_after=after,
            )
            assert page["_shards"]["failed"] == 0 and page["pit_id"] == pit
            hits = page["hits"]["hits"]
            if not hits:
                break
            ids += [hit["_id"] for hit in hits]
            after = hits[-1]["sort"]
    assert sorted(ids) == sorted(f"d{n}" for n in range(400))
    assert (search_machine_calls() - before)["relay"] >= 8
    assert client.close_point_in_time(id=pit)["succeeded"] is True
    client.close()
