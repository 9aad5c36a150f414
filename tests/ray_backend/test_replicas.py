"""Replicas on Ray (ray_backend/replication.py): copies placed on other machines, every
acknowledged write on every in-sync copy, a failing replica dropped from the in-sync set before
the write is acknowledged; through the REST API of a coordinator on a local 3-node cluster."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.testing import Server
from tests.ray_cluster import copy_nodes, machine_of, ray_server, shard_map

_NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def coordinator(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with ray_server(ray_cluster.address, tmp_path_factory.mktemp("replicas") / "data") as server:
        yield server


@pytest.fixture
def http(coordinator: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=coordinator.url, timeout=120) as client:
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
    with httpx.Client(base_url=coordinator.url, timeout=120) as http:
        uuid = create(http, "copies", shards=2, replicas=1)
    acknowledged: set[str] = set()
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(n: int) -> None:
        try:
            with httpx.Client(base_url=coordinator.url, timeout=120) as client:
                for batch in range(8):
                    # (ids overlap across clients: the same documents overwritten concurrently)
                    ids = [f"d{(n * 37 + batch * 11 + i) % 150}" for i in range(25)]
                    acknowledged.update(bulk(client, "copies", ids))
        except BaseException as exc:  # reported below
            errors.append(exc)

    def refresher() -> None:
        with httpx.Client(base_url=coordinator.url, timeout=120) as client:
            while not done.is_set():
                client.post("/copies/_refresh")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    beside = threading.Thread(target=refresher)
    beside.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    beside.join()
    assert not errors and acknowledged
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
