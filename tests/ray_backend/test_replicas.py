"""Replicas on Ray (ray_backend/replication.py): copies placed on other machines, every
acknowledged write on every in-sync copy, a failing replica dropped from the in-sync set before
the write is acknowledged; through the REST API of a coordinator on a local 3-node cluster."""

from __future__ import annotations

import os
import pickle
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.testing import Server
from tests import web
from tests.concurrency import stop_process, wait_for, writers_beside_refresher
from tests.ray_cluster import copy_nodes, machine_of, node_of, ray_server, shard_map, where

_NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def coordinator(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with ray_server(ray_cluster.address, tmp_path_factory.mktemp("replicas") / "data") as server:
        yield server


@pytest.fixture
def http(coordinator: Server) -> Iterator[httpx.Client]:
    with web.Client(base_url=coordinator.url, timeout=120) as client:
        yield client


def create(http: httpx.Client, index: str, shards: int, replicas: int) -> str:
    body = {"settings": {"number_of_shards": shards, "number_of_replicas": replicas}}
    response = http.put(f"/{index}", json=body)
    assert response.status_code == 200, response.text
    return http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]


def bulk(http: httpx.Client, index: str, ids: list[str], refresh: bool = False) -> set[str]:
    """Index `ids`; the ids acknowledged."""
    lines = []
    for doc_id in ids:
        lines += [orjson.dumps({"index": {"_index": index, "_id": doc_id}}), orjson.dumps({"n": doc_id})]
    url = "/_bulk" + ("?refresh=true" if refresh else "")
    response = http.post(url, content=b"\n".join(lines) + b"\n", headers=_NDJSON)
    assert response.status_code == 200, response.text
    return {item["index"]["_id"] for item in response.json()["items"] if item["index"]["status"] < 300}


def read_copy(node: str, uuid: str, shard_id: int, ids: list[str]) -> dict[str, tuple[int, int]]:
    """The documents of `ids` one copy of a shard holds (realtime): id -> (version, seq_no). One
    call to its machine."""
    import ray

    calls = [((uuid, shard_id), "get", (doc_id, True)) for doc_id in ids]
    answers = pickle.loads(ray.get(machine_of(node).batch.remote(pickle.dumps(calls)), timeout=60))
    return {d: (a.version, a.seq_no) for d, a in zip(ids, answers, strict=True) if a is not None}


def test_each_replica_is_placed_on_another_machine_than_its_shards_other_copies(http: httpx.Client) -> None:
    uuid = create(http, "placed", shards=3, replicas=1)
    for entry in shard_map(uuid):
        nodes = [c["node"] for c in entry["copies"]]
        assert len(nodes) == 2 and len(set(nodes)) == 2
        assert entry["term"] == 1 and sorted(entry["in_sync"]) == sorted(c["id"] for c in entry["copies"])
    # More replicas than other machines: the extra copies are not placed (unassigned).
    uuid = create(http, "crowded", shards=1, replicas=4)
    (entry,) = shard_map(uuid)
    assert len({c["node"] for c in entry["copies"]}) == len(entry["copies"]) == 3
    uuid = create(http, "alone", shards=2, replicas=0)
    assert [len(entry["copies"]) for entry in shard_map(uuid)] == [1, 1]


def test_every_acknowledged_write_is_on_both_copies_with_concurrent_bulks_and_refreshes(
    coordinator: Server,
) -> None:
    with web.Client(base_url=coordinator.url, timeout=120) as http:
        uuid = create(http, "copies", shards=2, replicas=1)
    acknowledged: set[str] = set()

    def writer(n: int) -> None:
        with web.Client(base_url=coordinator.url, timeout=120) as client:
            for batch in range(8):
                # (ids overlap across clients: the same documents overwritten concurrently)
                ids = [f"d{(n * 37 + batch * 11 + i) % 150}" for i in range(25)]
                acknowledged.update(bulk(client, "copies", ids))

    with web.Client(base_url=coordinator.url, timeout=120) as refreshing:
        writers_beside_refresher(
            [partial(writer, n) for n in range(3)], lambda: refreshing.post("/copies/_refresh")
        )
    assert acknowledged
    ids = sorted(acknowledged)
    held: set[str] = set()
    for shard_id in range(2):
        primary, (replica,) = copy_nodes(uuid, shard_id)
        on_primary = read_copy(primary, uuid, shard_id, ids)
        assert read_copy(replica, uuid, shard_id, ids) == on_primary  # same versions and seq_nos
        held |= set(on_primary)
    assert held == acknowledged
    assert all(len(entry["in_sync"]) == 2 for entry in shard_map(uuid))


def test_replicas_zero_keeps_one_copy_and_writes_answer_as_before(http: httpx.Client) -> None:
    uuid = create(http, "single", shards=1, replicas=0)
    assert bulk(http, "single", ["a", "b"], refresh=True) == {"a", "b"}
    (entry,) = shard_map(uuid)
    assert len(entry["copies"]) == 1
    assert http.get("/single/_count").json()["count"] == 2


def health(http: httpx.Client, index: str) -> dict[str, Any]:
    return http.get(f"/_cluster/health/{index}", params={"level": "shards"}).json()


def cat_shards(http: httpx.Client, index: str) -> list[dict[str, Any]]:
    return http.get(
        f"/_cat/shards/{index}",
        params={"format": "json", "h": "shard,prirep,state,node,docs,unassigned.reason"},
    ).json()


def test_cat_shards_and_health_show_every_copy(http: httpx.Client) -> None:
    uuid = create(http, "shown", shards=2, replicas=1)
    bulk(http, "shown", [f"d{i}" for i in range(20)], refresh=True)
    rows = cat_shards(http, "shown")
    assert [(r["shard"], r["prirep"], r["state"]) for r in rows] == [
        ("0", "p", "STARTED"),
        ("0", "r", "STARTED"),
        ("1", "p", "STARTED"),
        ("1", "r", "STARTED"),
    ]
    for shard_id in range(2):
        primary, (replica,) = copy_nodes(uuid, shard_id)
        by_role = {r["prirep"]: r for r in rows if r["shard"] == str(shard_id)}
        assert (by_role["p"]["node"], by_role["r"]["node"]) == (node_of(primary), node_of(replica))
        assert by_role["p"]["docs"] == by_role["r"]["docs"]
    assert sum(int(r["docs"]) for r in rows if r["prirep"] == "p") == 20
    body = health(http, "shown")
    assert body["status"] == "green" and body["active_shards"] == 4 and body["active_primary_shards"] == 2
    assert body["indices"]["shown"]["shards"]["0"] == {
        "status": "green",
        "primary_active": True,
        "active_shards": 2,
        "relocating_shards": 0,
        "initializing_shards": 0,
        "unassigned_shards": 0,
        "unassigned_primary_shards": 0,
    }
    # Replicas no machine can take are unassigned: yellow.
    create(http, "short", shards=1, replicas=3)
    rows = cat_shards(http, "short")
    assert [(r["prirep"], r["state"]) for r in rows] == [
        ("p", "STARTED"),
        ("r", "STARTED"),
        ("r", "STARTED"),
        ("r", "UNASSIGNED"),
    ]
    assert rows[-1]["unassigned.reason"] == "INDEX_CREATED"
    body = health(http, "short")
    assert body["status"] == "yellow" and body["unassigned_shards"] == 1


def test_a_replica_whose_machine_fails_leaves_the_in_sync_set_and_writes_go_on(http: httpx.Client) -> None:
    import ray

    uuid = create(http, "failing", shards=1, replicas=1)
    primary, (replica,) = copy_nodes(uuid, 0)
    acknowledged = bulk(http, "failing", [f"a{i}" for i in range(10)])
    assert len(acknowledged) == 10
    ray.kill(machine_of(replica), no_restart=False)  # Ray restarts it: writes meanwhile fail on it
    rounds = 0
    while len(shard_map(uuid)[0]["in_sync"]) == 2:
        assert rounds < 500, "the replica never left the in-sync set"
        acknowledged |= bulk(http, "failing", [f"b{rounds}"])
        rounds += 1
    acknowledged |= bulk(http, "failing", [f"c{i}" for i in range(10)], refresh=True)
    assert len(acknowledged) == 20 + rounds  # every write acknowledged, none lost
    assert http.get("/failing/_count").json()["count"] == len(acknowledged)
    assert set(read_copy(primary, uuid, 0, sorted(acknowledged))) == acknowledged
    (entry,) = shard_map(uuid)
    assert entry["in_sync"] == [entry["primary"]] and entry["term"] == 1
    # It catches up from its primary (files, then the writes sent meanwhile): green again.
    waited = http.get("/_cluster/health/failing", params={"wait_for_status": "green", "timeout": "90s"})
    assert waited.status_code == 200 and waited.json()["status"] == "green", waited.text
    (entry,) = shard_map(uuid)
    assert sorted(entry["in_sync"]) == sorted(c["id"] for c in entry["copies"])
    acknowledged |= bulk(http, "failing", [f"d{i}" for i in range(10)])
    ids = sorted(acknowledged)
    assert read_copy(replica, uuid, 0, ids) == read_copy(primary, uuid, 0, ids)
    assert len(read_copy(replica, uuid, 0, ids)) == len(acknowledged)
    rows = http.get("/_cat/recovery/failing", params={"format": "json"}).json()
    peer = [r for r in rows if r["type"] == "peer"]
    assert peer and peer[-1]["stage"] == "done" and int(peer[-1]["files"]) > 0
    assert (peer[-1]["source_node"], peer[-1]["target_node"]) == (primary, replica)
    assert {r["type"] for r in rows} == {"existing_store", "peer"}


def test_a_primary_whose_machine_dies_is_replaced_by_its_replica_and_no_acknowledged_write_is_lost(
    coordinator: Server,
) -> None:
    import ray

    with web.Client(base_url=coordinator.url, timeout=120) as http:
        uuid = create(http, "promoted", shards=1, replicas=1)
        acknowledged = bulk(http, "promoted", [f"a{i}" for i in range(20)])
    primary, (replica,) = copy_nodes(uuid, 0)
    killed = threading.Event()
    errors: list[BaseException] = []
    failed: list[int] = []

    def writer(n: int) -> None:
        try:
            with web.Client(base_url=coordinator.url, timeout=120) as client:
                for i in range(60):
                    if i == 10 and n == 0:
                        ray.kill(machine_of(primary), no_restart=False)
                        killed.set()
                    ids = [f"w{n}-{i}-{k}" for k in range(5)]
                    got = bulk(client, "promoted", ids)
                    acknowledged.update(got)
                    failed.append(len(ids) - len(got))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and killed.is_set()
    (entry,) = shard_map(uuid)
    copies = {c["id"]: c["node"] for c in entry["copies"]}
    assert copies[entry["primary"]] == replica and entry["term"] == 2  # promoted
    with web.Client(base_url=coordinator.url, timeout=120) as http:
        http.post("/promoted/_refresh")
        assert set(read_copy(replica, uuid, 0, sorted(acknowledged))) == acknowledged  # none lost
        count = http.get("/promoted/_count").json()
        assert count["_shards"]["failed"] == 0 and count["count"] >= len(acknowledged)
        assert bulk(http, "promoted", ["after"]) == {"after"}  # writes go on
        acknowledged.add("after")
        # The former primary, back, discards what it had and recovers from the new one.
        waited = http.get("/_cluster/health/promoted", params={"wait_for_status": "green", "timeout": "90s"})
        assert waited.status_code == 200, waited.text
        ids = sorted(acknowledged)
        assert read_copy(primary, uuid, 0, ids) == read_copy(replica, uuid, 0, ids)
        rows = cat_shards(http, "promoted")
        assert [(r["prirep"], r["node"]) for r in rows] == [("p", node_of(replica)), ("r", node_of(primary))]


def test_number_of_replicas_changed_on_a_live_index_adds_and_removes_copies(http: httpx.Client) -> None:
    uuid = create(http, "resized", shards=1, replicas=0)
    acknowledged = bulk(http, "resized", [f"r{i}" for i in range(30)], refresh=True)
    assert http.put("/resized/_settings", json={"index": {"number_of_replicas": 2}}).status_code == 200
    waited = http.get("/_cluster/health/resized", params={"wait_for_status": "green", "timeout": "90s"})
    assert waited.status_code == 200 and waited.json()["active_shards"] == 3, waited.text
    primary, replicas = copy_nodes(uuid, 0)
    assert len(replicas) == 2
    ids = sorted(acknowledged)
    for node in replicas:  # recovered from the primary's files
        assert read_copy(node, uuid, 0, ids) == read_copy(primary, uuid, 0, ids)
    assert http.put("/resized/_settings", json={"index": {"number_of_replicas": 0}}).status_code == 200
    waited = http.get("/_cluster/health/resized", params={"wait_for_status": "green", "timeout": "30s"})
    assert waited.json()["active_shards"] == 1
    assert len(shard_map(uuid)[0]["copies"]) == 1
    assert http.get("/resized/_count").json()["count"] == 30


def queries_served(node: str) -> int:
    import ray

    calls = ray.get(machine_of(node).stats.remote(), timeout=60)["calls"]
    return calls.get("query", 0) + calls.get("query_fetch", 0)


def test_searches_read_every_started_copy_and_a_pit_stays_on_the_primaries(http: httpx.Client) -> None:
    uuid = create(http, "spread", shards=1, replicas=1)
    ids = {f"s{i}" for i in range(60)}
    assert bulk(http, "spread", sorted(ids), refresh=True) == ids
    primary, (replica,) = copy_nodes(uuid, 0)
    before = {node: queries_served(node) for node in (primary, replica)}
    for _ in range(8):
        page = http.post("/spread/_search", json={"size": 100}).json()
        assert page["_shards"]["failed"] == 0 and {hit["_id"] for hit in page["hits"]["hits"]} == ids
    assert all(queries_served(node) > before[node] for node in (primary, replica))  # both read
    pit = http.post("/spread/_pit", params={"keep_alive": "1m"}).json()["id"]
    seen = walk(http, pit)
    assert sorted(seen) == sorted(ids)  # every document once, from the context on the primary
    http.request("DELETE", "/_pit", json={"id": pit})


def walk(http: httpx.Client, pit: str, after: list[Any] | None = None) -> list[str]:
    """A PIT's documents from `after` to its end (every page whole)."""
    seen: list[str] = []
    while True:
        body: dict[str, Any] = {"size": 10, "pit": {"id": pit}, "sort": [{"_shard_doc": "asc"}]}
        if after is not None:
            body["search_after"] = after
        page = http.post("/_search", json=body).json()
        assert page["_shards"]["failed"] == 0, page
        hits = page["hits"]["hits"]
        if not hits:
            return seen
        seen += [hit["_id"] for hit in hits]
        after = hits[-1]["sort"]


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process `pid` (a machine actor's) stopped (SIGSTOP) for the block: alive, silent."""
    stop_process(pid)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@contextmanager
def follower_checks(http: httpx.Client, timeout: str) -> Iterator[dict[str, Any]]:
    """The coordinator checks each machine every 500 ms, failing it after two checks unanswered
    within `timeout`, for the block (the settings given, then reset)."""
    checks = {
        "cluster.fault_detection.follower_check.interval": "500ms",
        "cluster.fault_detection.follower_check.timeout": timeout,
        "cluster.fault_detection.follower_check.retry_count": 2,
    }
    assert http.put("/_cluster/settings", json={"transient": checks}).status_code == 200
    try:
        yield checks
    finally:
        reset = dict.fromkeys(checks)
        assert http.put("/_cluster/settings", json={"transient": reset}).status_code == 200


def test_a_primary_silent_longer_than_the_health_timeout_is_not_replaced_and_loses_nothing(
    coordinator: Server, http: httpx.Client
) -> None:
    uuid = create(http, "slow", shards=1, replicas=1)
    ids = {f"s{i}" for i in range(30)}
    assert bulk(http, "slow", sorted(ids), refresh=True) == ids
    (before,) = shard_map(uuid)
    pit = http.post("/slow/_pit", params={"keep_alive": "5m"}).json()["id"]
    late = [f"late{i}" for i in range(5)]
    written: list[set[str]] = []

    def writer() -> None:
        with web.Client(base_url=coordinator.url, timeout=120) as client:
            written.append(bulk(client, "slow", late))

    with stopped(where(uuid, 0)[1]):  # the primary's machine actor
        thread = threading.Thread(target=writer)
        thread.start()
        for _ in range(2):  # each waits out the health timeout on the silent primary
            body = health(http, "slow")
            assert body["status"] == "green", body
        assert shard_map(uuid) == [before]  # not replaced
    thread.join()
    assert written == [set(late)]  # the write waited, and was acknowledged
    (after,) = shard_map(uuid)
    assert (after["primary"], after["term"]) == (before["primary"], 1)
    assert sorted(walk(http, pit)) == sorted(ids)  # its context was kept
    http.request("DELETE", "/_pit", json={"id": pit})


def test_a_primary_silent_past_its_follower_checks_is_replaced_and_catches_up_once_it_answers(
    http: httpx.Client,
) -> None:
    with follower_checks(http, "1s"):
        uuid = create(http, "stalled", shards=1, replicas=1)
        acknowledged = bulk(http, "stalled", [f"t{i}" for i in range(20)], refresh=True)
        primary, (replica,) = copy_nodes(uuid, 0)
        with stopped(where(uuid, 0)[1]):
            # Replaced by the checks alone: no request to it failed.
            wait_for(lambda: shard_map(uuid)[0]["term"] == 2, attempts=1200)
            assert copy_nodes(uuid, 0)[0] == replica
            acknowledged |= bulk(http, "stalled", [f"u{i}" for i in range(5)], refresh=True)
            assert len(acknowledged) == 25  # writes go on, on the promoted copy
            count = http.get("/stalled/_count").json()
            assert count["_shards"]["failed"] == 0 and count["count"] == 25
        # It answers again: the former primary recovers from the new one.
        waited = http.get("/_cluster/health/stalled", params={"wait_for_status": "green", "timeout": "90s"})
        assert waited.status_code == 200 and waited.json()["status"] == "green", waited.text
        assert copy_nodes(uuid, 0) == (replica, [primary])
        ids = sorted(acknowledged)
        assert read_copy(primary, uuid, 0, ids) == read_copy(replica, uuid, 0, ids)
        assert len(read_copy(primary, uuid, 0, ids)) == 25


def test_a_primary_whose_machine_actor_is_killed_is_replaced_with_no_request_to_it(
    http: httpx.Client,
) -> None:
    import ray

    uuid = create(http, "unasked", shards=1, replicas=1)
    acknowledged = bulk(http, "unasked", [f"k{i}" for i in range(10)], refresh=True)
    primary, (replica,) = copy_nodes(uuid, 0)
    ray.kill(machine_of(primary), no_restart=False)
    wait_for(lambda: shard_map(uuid)[0]["term"] == 2)  # its check found it disconnected
    assert copy_nodes(uuid, 0)[0] == replica
    # Writes, gets and their optimistic checks answer the shard's new primary term.
    lines = b'{"index":{"_index":"unasked","_id":"after"}}\n{"n":1}\n'
    (item,) = http.post("/_bulk", content=lines, headers=_NDJSON).json()["items"]
    assert (item["index"]["status"], item["index"]["_primary_term"]) == (201, 2)
    got = http.get("/unasked/_doc/after").json()
    assert got["_primary_term"] == 2 and got["_seq_no"] == item["index"]["_seq_no"]
    at = {"if_seq_no": got["_seq_no"]}
    stale = http.put("/unasked/_doc/after", params={**at, "if_primary_term": 1}, json={})
    assert stale.status_code == 409, stale.text
    assert stale.json()["error"]["type"] == "version_conflict_engine_exception"
    fresh = http.put("/unasked/_doc/after", params={**at, "if_primary_term": 2}, json={})
    assert fresh.status_code == 200 and fresh.json()["_primary_term"] == 2, fresh.text
    updated = http.post("/unasked/_update/after", json={"doc": {"n": 3}})
    assert updated.status_code == 200 and updated.json()["_primary_term"] == 2, updated.text
    acknowledged.add("after")
    waited = http.get("/_cluster/health/unasked", params={"wait_for_status": "green", "timeout": "90s"})
    assert waited.status_code == 200 and waited.json()["status"] == "green", waited.text
    ids = sorted(acknowledged)
    assert read_copy(primary, uuid, 0, ids) == read_copy(replica, uuid, 0, ids)
    assert len(read_copy(primary, uuid, 0, ids)) == 11


def test_a_replica_not_refreshed_by_a_refreshing_write_leaves_the_in_sync_set(http: httpx.Client) -> None:
    """A machine the coordinator still counts failed, though it serves again (its next check
    not due yet), holds in-sync replicas of an index created meanwhile: a `?refresh=true` write
    does not ask them to refresh, so they leave the in-sync set, and no search reads a copy
    that misses the write once the machine counts as serving again (they catch up first)."""
    import ray

    with follower_checks(http, "2s") as checks:
        watched = create(http, "watched", shards=1, replicas=2)  # a copy on each machine
        (entry,) = shard_map(watched)
        replica = next(c for c in entry["copies"] if c["id"] != entry["primary"])
        machine = replica["node"]
        pid = ray.get(machine_of(machine).where.remote(), timeout=60)[1]
        with stopped(pid):
            wait_for(lambda: replica["id"] not in shard_map(watched)[0]["in_sync"], attempts=1200)  # failed
            later = {"transient": {"cluster.fault_detection.follower_check.interval": "1h"}}
            assert http.put("/_cluster/settings", json=later).status_code == 200
        # The machine serves again; its next check is an hour away.
        settings = {"number_of_shards": 3, "number_of_replicas": 2, "refresh_interval": -1}
        assert http.put("/unrefreshed", json={"settings": settings}).status_code == 200
        uuid = http.get("/unrefreshed/_settings").json()["unrefreshed"]["settings"]["index"]["uuid"]
        ids = {f"r{i}" for i in range(90)}
        assert bulk(http, "unrefreshed", sorted(ids), refresh=True) == ids
        in_sync_there = [
            c["id"] in entry["in_sync"]
            for entry in shard_map(uuid)
            for c in entry["copies"]
            if c["node"] == machine and c["id"] != entry["primary"]
        ]
        assert in_sync_there and not any(in_sync_there)  # its replicas, not refreshed, left the set
        assert http.put("/_cluster/settings", json={"transient": checks}).status_code == 200
        green = {"wait_for_status": "green", "timeout": "90s"}
        waited = http.get("/_cluster/health/unrefreshed", params=green)
        assert waited.status_code == 200 and waited.json()["status"] == "green", waited.text
        for _ in range(6):  # (each copy of each shard read in turn)
            page = http.post("/unrefreshed/_search", json={"size": 100}).json()
            assert page["_shards"]["failed"] == 0 and {hit["_id"] for hit in page["hits"]["hits"]} == ids


def test_a_replica_whose_machine_left_is_placed_on_another_and_recovers(
    ray_cluster: Any, http: httpx.Client
) -> None:
    """(Last: it removes a node from the module's cluster.)"""
    import ray

    settings = {"number_of_shards": 1, "number_of_replicas": 1, "unassigned.node_left.delayed_timeout": "0s"}
    assert http.put("/moved", json={"settings": settings}).status_code == 200
    uuid = http.get("/moved/_settings").json()["moved"]["settings"]["index"]["uuid"]
    acknowledged = bulk(http, "moved", [f"m{i}" for i in range(40)], refresh=True)
    primary, (replica,) = copy_nodes(uuid, 0)
    workers = {node.node_id: node for node in ray_cluster.cluster.worker_nodes}
    leaving_machine = replica if node_of(replica) in workers else primary
    leaving = node_of(leaving_machine)
    ray_cluster.cluster.remove_node(workers[leaving], allow_graceful=False)
    wait_for(lambda: leaving not in {n["NodeID"] for n in ray.nodes() if n["Alive"]}, attempts=1200)
    if leaving_machine == replica:  # a search that reads it is sent to the primary instead
        for _ in range(4):
            count = http.get("/moved/_count").json()
            assert count["_shards"]["failed"] == 0 and count["count"] == 40, count
    acknowledged |= bulk(
        http, "moved", [f"n{i}" for i in range(10)]
    )  # (after a failover, if it held the primary)
    waited = http.get("/_cluster/health/moved", params={"wait_for_status": "green", "timeout": "120s"})
    assert waited.status_code == 200, waited.text
    primary, (replica,) = copy_nodes(uuid, 0)
    assert leaving_machine not in (primary, replica)
    ids = sorted(acknowledged)
    assert read_copy(replica, uuid, 0, ids) == read_copy(primary, uuid, 0, ids)
    assert len(read_copy(replica, uuid, 0, ids)) == len(acknowledged)
