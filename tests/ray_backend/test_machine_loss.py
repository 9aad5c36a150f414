"""A machine killed with `kill -9` and restarted loses nothing (issue 28, item 5).

On a local 3-machine cluster (tests/ray_cluster.py: nodes named `m0` to `m2`), with two
coordinators: 3 bulk clients write, a PIT `search_after` walk and a scroll page through both
coordinators in turn, and then machine `m1`'s processes are killed with `kill -9` (its workers,
its machine actor among them, then its raylet and the rest: `ray_cluster.kill_node`), with
one of the coordinators. While `m1` is gone its shards' writes fail 503
(`unavailable_shards_exception`, not acknowledged), searches list its shards in
`_shards.failed`, `_cluster/health` is red and `_cat/shards` lists them UNASSIGNED (`NODE_LEFT`).
A node started again under the name `m1` (a new Ray node id) gets the machine actor back, which
reopens every shard from its folders: green again, every write a client got 201/200 for is there
with its content, and each walk is exactly once or failed cleanly (a page that reported the
failed shard, never a duplicate or a silently missing hit: the PIT walk asks the failed page
again after the return and then has every document once; the scroll's batches go on and miss
only documents of the shards they reported failed).

`REPLICAS`: the index's `number_of_replicas`. With 0 the lost machine's shards have no copy;
with 1, searches and gets sent right after the kill read the other copies, and once the loss is
detected (ray_backend/fault_detection.py) writes and searches go on and health is yellow, not red
(`expect_copies`); the walks' contexts on the replaced primaries fail
their shards cleanly; the returned machine's copies recover from their primaries in the
background, with no request to a coordinator (node.py `allocate`), while the bulk clients write:
each copy is recovered once though two coordinators react to the return (a claim in the shard
map, ray_backend/replication.py), `_cat/recovery` through either lists it, health is green at
once, and the copies hold every write acknowledged meanwhile.

On the worker's shared cluster (tests/conftest.py `ray_cluster`), on which a killed node is found
dead within about 1.5 s (tests/ray_cluster.py `SHARED_SYSTEM_CONFIG`: Ray's default takes about
15 s; a slower detection only makes the loss last longer); each trial leaves it with its three
machines, as it found it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import ApiError, Elasticsearch

from leafsearch.index.routing import default_routing_num_shards, shard_for
from leafsearch.index.shard_write import DocRead
from tests.concurrency import wait_for
from tests.node.test_durable_contexts import kill_9
from tests.ray_backend.test_ray_contexts_restart import coordinator
from tests.ray_cluster import (
    add_machine,
    copy_nodes,
    kill_node,
    machine_calls,
    machine_of,
    machine_resource,
    shard_map,
    where,
)

REPLICAS = [0, 1]
SHARDS = 6
N = 600
PAGE = 40
LOST = 1  # machine m1: not the head, whose node runs the cluster's control store
BULK_CLIENTS = 3
BATCH = 10
MAPPING = {"properties": {"n": {"type": "long"}, "client": {"type": "keyword"}}}


def node_of(local: Any, machine: str) -> Any:
    """The cluster's alive node of a machine (a `ray.cluster_utils` node)."""
    import ray

    (node_id,) = [n["NodeID"] for n in ray.nodes() if n["Alive"] and machine in n["Resources"]]
    (node,) = [node for node in local.cluster.worker_nodes if node.node_id == node_id]
    return node


def shard_of(doc_id: str, shards: int = SHARDS) -> int:
    return shard_for(doc_id, shards, default_routing_num_shards(shards))


def index_operations(index: str, docs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """A bulk body indexing `docs` (id: source)."""
    operations: list[dict[str, Any]] = []
    for doc_id, source in docs.items():
        operations += [{"index": {"_index": index, "_id": doc_id}}, source]
    return operations


class BulkClient:
    """Bulks of new documents until stopped; what was acknowledged (id: source) and how every
    other item failed."""

    def __init__(self, url: str, number: int, stop: threading.Event) -> None:
        self.es = Elasticsearch(url, request_timeout=120, max_retries=0)
        self.number = number
        self.stop = stop
        self.acknowledged: dict[str, dict[str, Any]] = {}
        self.refused: list[tuple[str, int, str]] = []  # (id, status, error type)
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name=f"bulk-{number}")

    def _run(self) -> None:
        seq = 0
        try:
            while not self.stop.is_set():
                docs = {}
                for _ in range(BATCH):
                    docs[f"c{self.number}-{seq}"] = {"n": N + seq, "client": f"c{self.number}"}
                    seq += 1
                for item in self.es.bulk(operations=index_operations("lost", docs)).body["items"]:
                    result = item["index"]
                    if result["status"] in (200, 201):
                        self.acknowledged[result["_id"]] = docs[result["_id"]]
                    else:
                        self.refused.append((result["_id"], result["status"], result["error"]["type"]))
                self.stop.wait(0.05)  # (a pace: three clients, not three busy loops, on 2 cores)
        except BaseException as exc:  # noqa: BLE001 - asserted in the test's thread
            self.errors.append(exc)


class PitWalk:
    """A PIT `search_after` walk; a page that reports a failed shard is asked again later, or,
    `lasting` (its shard's context is gone for good: it was on a primary that was replaced), taken
    as it is, its failed shards recorded."""

    def __init__(self, es: Elasticsearch) -> None:
        self.id = es.open_point_in_time(index="lost", keep_alive="5m").body["id"]
        self.hits: list[dict[str, Any]] = []
        self.after: list[Any] | None = None
        self.failed_pages = 0
        self.failed_shards: set[int] = set()
        self.lasting = False
        self.done = False

    def page(self, es: Elasticsearch) -> dict[str, Any]:
        kwargs: dict[str, Any] = {} if self.after is None else {"search_after": self.after}
        body = es.search(
            pit={"id": self.id, "keep_alive": "5m"}, size=PAGE, sort=["_shard_doc"], **kwargs
        ).body
        self.id = body["pit_id"]
        if body["_shards"]["failed"]:
            self.failed_pages += 1
            self.failed_shards |= {failure["shard"] for failure in body["_shards"]["failures"]}
            if not self.lasting:
                return body
        hits = body["hits"]["hits"]
        self.hits += hits
        self.done = len(hits) < PAGE
        if hits:
            self.after = hits[-1]["sort"]
        return body


class ScrollWalk:
    """A scroll's batches; the shards a batch reported failed."""

    def __init__(self, es: Elasticsearch) -> None:
        first = es.search(index="lost", scroll="5m", size=PAGE, sort=["_doc"]).body
        self.id = first["_scroll_id"]
        self.hits: list[dict[str, Any]] = first["hits"]["hits"]
        self.failed_shards: set[int] = set()
        self.done = False

    def page(self, es: Elasticsearch) -> dict[str, Any]:
        body = es.scroll(scroll_id=self.id, scroll="5m").body
        self.id = body["_scroll_id"]
        self.failed_shards |= {failure["shard"] for failure in body["_shards"].get("failures", [])}
        self.hits += body["hits"]["hits"]
        self.done = not body["hits"]["hits"]
        return body


#: The `_cat/recovery` columns compared.
RECOVERY_COLUMNS = "shard,type,stage,target_node"
#: Seconds the client waits for a health answer: longer than any `timeout` a call here gives the
#: server to wait for a status (the coordinators' clients time out after 60).
HEALTH_REQUEST_SECONDS = 180


def health(es: Elasticsearch, index: str = "lost", **params: Any) -> dict[str, Any]:
    client = es.options(ignore_status=408, request_timeout=HEALTH_REQUEST_SECONDS)
    return client.cluster.health(index=index, **params).body


def unassigned(es: Elasticsearch) -> dict[int, str]:
    """The index's unassigned primaries and why."""
    rows = es.cat.shards(index="lost", format="json", h="shard,prirep,state,unassigned.reason").body
    return {
        int(row["shard"]): row["unassigned.reason"]
        for row in rows
        if row["prirep"] == "p" and row["state"] == "UNASSIGNED"
    }


@pytest.mark.parametrize("replicas", REPLICAS)
def test_a_machine_killed_and_restarted_loses_no_acknowledged_write(
    ray_cluster: Any, tmp_path: Path, replicas: int
) -> None:
    lost_machine = machine_resource(LOST)
    doomed = coordinator(ray_cluster.address, tmp_path / "doomed")  # killed with the machine
    survivor = coordinator(ray_cluster.address, tmp_path / "survivor")
    other = None  # (replicas: a second coordinator reacting to the machine's return)
    stop = threading.Event()
    clients: list[BulkClient] = []
    try:
        a, b = doomed.client(), survivor.client()
        settings = {"number_of_shards": SHARDS, "number_of_replicas": replicas, "refresh_interval": "50ms"}
        a.indices.create(index="lost", settings=settings, mappings=MAPPING)
        uuid = a.indices.get_settings(index="lost").body["lost"]["settings"]["index"]["uuid"]
        truth = {str(i): {"n": i, "client": "fill"} for i in range(N)}
        assert b.bulk(operations=index_operations("lost", truth), refresh=True).body["errors"] is False
        assert health(b, wait_for_status="green", timeout="60s")["status"] == "green"
        lost_node = node_of(ray_cluster, lost_machine).node_id
        on_lost = {s for s in range(SHARDS) if where(uuid, s)[0] == lost_node}
        assert len(on_lost) == SHARDS // 3  # two shards a machine

        # Both walks open through one coordinator and page through both in turn.
        pit, scroll = PitWalk(a), ScrollWalk(b)
        for es in (a, b, a):
            pit.page(es)
            scroll.page(es)
        assert not pit.failed_pages and not scroll.failed_shards

        clients = [BulkClient(survivor.url, c, stop) for c in range(BULK_CLIENTS)]
        for client in clients:
            client.thread.start()
        wait_for(lambda: all(len(client.acknowledged) >= 3 * BATCH for client in clients))

        # kill -9: the node's workers (its machine actor among them), its raylet and the rest of
        # its processes, and a coordinator of the walks.
        actor_pid = where(uuid, min(on_lost))[1]
        assert actor_pid in kill_node(ray_cluster.cluster, node_of(ray_cluster, lost_machine))
        kill_9(doomed)

        on_lost_doc = next(doc_id for doc_id in truth if shard_of(doc_id) in on_lost)
        if replicas:
            # At once (the loss perhaps not known yet): a search reads each shard's other copy
            # where its copy there does not answer, a get reads a replica in place of its primary.
            found = b.search(index="lost", size=PAGE).body
            assert found["_shards"]["failed"] == 0 and found["hits"]["total"]["value"] >= N
            assert b.get(index="lost", id=on_lost_doc).body["_source"] == truth[on_lost_doc]

        # While it is gone.
        during = health(b)
        written_during: dict[str, dict[str, Any]] = {}
        if replicas:
            written_during = expect_copies(b, on_lost)
            # The walks' contexts on the replaced primaries are gone: their pages report those
            # shards failed, and go on.
            pit.lasting = True
            assert pit.page(b)["_shards"]["failed"] == len(on_lost)
            scroll.page(b)
            assert pit.failed_shards == on_lost and scroll.failed_shards <= on_lost
        else:
            assert during["status"] == "red" and during["unassigned_primary_shards"] == len(on_lost)
            found = b.search(index="lost", size=0).body
            assert found["_shards"]["failed"] == len(on_lost)
            assert {f["shard"] for f in found["_shards"]["failures"]} == on_lost
            wait_for(lambda: unassigned(b) == dict.fromkeys(on_lost, "NODE_LEFT"))  # once Ray knows
            # A realtime get of a document there: 503, as Elasticsearch's shard without a copy.
            with pytest.raises(ApiError) as refused:
                b.get(index="lost", id=on_lost_doc)
            assert refused.value.meta.status == 503
            assert refused.value.body["error"]["type"] == "no_shard_available_action_exception"
            # Each walk pages on through the other coordinator: its page reports the failure.
            assert pit.page(b)["_shards"]["failed"] == len(on_lost)
            assert scroll.page(b)["_shards"]["failed"] == len(on_lost)
            # The bulk clients' items for the lost shards fail 503, and only those.
            wait_for(lambda: any(client.refused for client in clients))
            assert (
                health(b, wait_for_status="yellow", timeout="0s")["status"] == "red"
            )  # (and stays so meanwhile)

        if replicas:
            other = coordinator(ray_cluster.address, tmp_path / "other")
            recovered_before = machine_calls()["recover_to"]

        # The machine returns: a new node, the same name; its actor reopens every shard.
        add_machine(ray_cluster.cluster, LOST)
        if replicas:  # no request to a coordinator until its copies are in sync: the background's
            wait_for(lambda: recovered(uuid), attempts=2400)
        # (the shard map says so; a coordinator's own view may take a round of its own to see it)
        back = health(b, wait_for_status="green", timeout="120s")
        assert back["status"] == "green" and not back["timed_out"], back
        assert unassigned(b) == {}
        if replicas:  # its copies are back, each recovered from its shard's primary
            rows = b.cat.shards(index="lost", format="json", h="state,node").body
            assert [row["state"] for row in rows] == ["STARTED"] * SHARDS * 2
            back_on = node_of(ray_cluster, lost_machine).node_id
            assert sum(row["node"] == back_on for row in rows) == len(on_lost) * 2
            # ... which `_cat/recovery` lists: a peer recovery done to it for each.
            copies = [copy_nodes(uuid, s) for s in range(SHARDS)]
            held = {s for s, (primary, others) in enumerate(copies) if lost_machine in {primary, *others}}
            assert held >= on_lost and len(held) == len(on_lost) * 2
            rows = b.cat.recovery(index="lost", format="json", h=RECOVERY_COLUMNS).body
            assert held == {
                int(row["shard"])
                for row in rows
                if (row["type"], row["stage"], row["target_node"]) == ("peer", "done", lost_machine)
            }
            assert other is not None
            through_other = other.client().cat.recovery(index="lost", format="json", h=RECOVERY_COLUMNS)
            assert through_other.body == rows
            # Two coordinators reacted; each recovery claimed ran once: one `recover_to` per claim.
            attempts = [
                record["attempt"]
                for entry in shard_map(uuid) or []
                for record in entry.get("recovery", {}).values()
            ]
            assert len(attempts) == len(held)
            assert machine_calls()["recover_to"] - recovered_before == sum(attempts)
        else:
            assert where(uuid, min(on_lost))[0] == node_of(ray_cluster, lost_machine).node_id
        since = [len(client.acknowledged) for client in clients]  # each client writes on after it
        wait_for(
            lambda: all(len(c.acknowledged) >= n + 3 * BATCH for c, n in zip(clients, since, strict=True))
        )
        stop.set()
        for client in clients:
            client.thread.join()
        assert not [error for client in clients for error in client.errors]

        # The walks go on: the PIT's failed page asked again, then to its end; the scroll's batches.
        while not pit.done:
            assert pit.page(b)["_shards"]["failed"] == (len(on_lost) if replicas else 0)
        while not scroll.done:
            assert scroll.page(b)["_shards"]["failed"] == (len(scroll.failed_shards) if replicas else 0)
        pit_ids = [hit["_id"] for hit in pit.hits]
        assert len(pit_ids) == len(set(pit_ids)), "a document came twice in the PIT walk"
        if replicas:  # failed cleanly: what it missed is in the shards its pages reported failed
            assert set(pit_ids) <= set(truth)
            assert {shard_of(doc_id) for doc_id in set(truth) - set(pit_ids)} <= pit.failed_shards
        else:
            assert sorted(pit_ids) == sorted(truth), "the PIT walk missed documents"
        assert all(hit["_source"] == truth[hit["_id"]] for hit in pit.hits)
        scroll_ids = [hit["_id"] for hit in scroll.hits]
        assert len(scroll_ids) == len(set(scroll_ids)), "a document came twice in the scroll"
        missed = set(truth) - set(scroll_ids)
        assert set(scroll_ids) <= set(truth) and all(
            hit["_source"] == truth[hit["_id"]] for hit in scroll.hits
        )
        assert {shard_of(doc_id) for doc_id in missed} <= scroll.failed_shards, (
            "the scroll missed hits silently"
        )
        assert b.close_point_in_time(id=pit.id).body["num_freed"] == 1
        assert b.clear_scroll(scroll_id=scroll.id).body["num_freed"] == 1

        # Every acknowledged write is there, with its content; every refused one was a 503 of
        # a lost shard.
        refused = [entry for client in clients for entry in client.refused]
        if not replicas:
            assert refused
        for doc_id, status, error_type in refused:
            assert (status, error_type) == (503, "unavailable_shards_exception")
            assert shard_of(doc_id) in on_lost
        acknowledged = {
            **truth,
            **written_during,
            **{k: v for client in clients for k, v in client.acknowledged.items()},
        }
        b.indices.refresh(index="lost")
        ids = sorted(acknowledged)
        for start in range(0, len(ids), 1000):
            docs = b.mget(index="lost", ids=ids[start : start + 1000]).body["docs"]
            lost_writes = [doc["_id"] for doc in docs if not doc["found"]]
            assert not lost_writes, f"{len(lost_writes)} acknowledged writes lost: {lost_writes[:5]}"
            assert all(doc["_source"] == acknowledged[doc["_id"]] for doc in docs)
        if replicas:  # the recovered copies hold every write acknowledged, during the recovery too
            assert_on_copies(uuid, lost_machine, acknowledged)
        total = b.count(index="lost").body["count"]
        assert len(acknowledged) <= total <= len(acknowledged) + len(refused)
        b.indices.delete(index="lost")
    finally:
        stop.set()
        for client in clients:
            if client.thread.is_alive():
                client.thread.join()
        doomed.stop()
        survivor.stop()
        if other is not None:
            other.stop()


def recovered(uuid: str) -> bool:
    """Whether every copy of the index is in sync and its last recovery done (read from the
    cluster's metadata, not through a coordinator)."""
    shards = shard_map(uuid) or []
    return all(
        len(entry["in_sync"]) == len(entry["copies"])
        and all(record["stage"] == "done" for record in entry.get("recovery", {}).values())
        for entry in shards
    )


def assert_on_copies(uuid: str, machine: str, written: dict[str, dict[str, Any]]) -> None:
    """Every document of `written` of a shard with a copy on `machine` is in that copy (a
    realtime get of the copy, on its machine actor), with its content."""
    import orjson
    import ray

    actor = machine_of(machine)
    held = {s for s in range(SHARDS) if machine in {copy_nodes(uuid, s)[0], *copy_nodes(uuid, s)[1]}}
    ids = [doc_id for doc_id in written if shard_of(doc_id) in held]
    reads = ray.get([actor.call.remote((uuid, shard_of(d)), "get", d, True) for d in ids], timeout=120)
    missing = [doc_id for doc_id, read in zip(ids, reads, strict=True) if not isinstance(read, DocRead)]
    assert not missing, f"{len(missing)} acknowledged writes missing on the recovered copies: {missing[:5]}"
    assert all(orjson.loads(read.source) == written[d] for d, read in zip(ids, reads, strict=True))


def expect_copies(es: Elasticsearch, on_lost: set[int]) -> dict[str, dict[str, Any]]:
    """With replicas, the loss leaves a copy of each shard: once it is detected (Elasticsearch's
    follower checks: at once for processes killed), yellow, searches whole, and a write to every
    shard acknowledged; what was written."""
    wait_for(lambda: health(es)["status"] == "yellow")
    found = es.search(index="lost", size=0).body
    assert found["_shards"]["failed"] == 0 and found["hits"]["total"]["value"] >= N
    docs = {f"during-{i}": {"n": N + i, "client": "during"} for i in range(4 * SHARDS)}
    assert {shard_of(doc_id) for doc_id in docs} >= on_lost
    items = es.bulk(operations=index_operations("lost", docs)).body["items"]
    assert [item["index"]["status"] for item in items] == [201] * len(docs), items
    return docs


def test_a_coordinator_started_while_a_machine_is_gone_serves_the_rest(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """A coordinator (re)started while a machine is down starts at once, serves the other
    machines' shards, and the gone machine's once a node of it returns."""
    gone = machine_resource(2)
    data = tmp_path / "data"
    docs = {f"d{n}": {"n": n, "client": "fill"} for n in range(90)}
    server = coordinator(ray_cluster.address, data)
    try:
        es = server.client()
        es.indices.create(index="waiting", settings={"number_of_shards": 3, "number_of_replicas": 0})
        assert es.bulk(operations=index_operations("waiting", docs), refresh=True).body["errors"] is False
        uuid = es.indices.get_settings(index="waiting").body["waiting"]["settings"]["index"]["uuid"]
        (down,) = [s for s in range(3) if where(uuid, s)[0] == node_of(ray_cluster, gone).node_id]
        server.stop()
        kill_node(ray_cluster.cluster, node_of(ray_cluster, gone))
        server = coordinator(ray_cluster.address, data)
        es = server.client()
        assert health(es, "waiting")["status"] == "red"
        page = es.search(index="waiting", size=100).body
        assert [failure["shard"] for failure in page["_shards"]["failures"]] == [down]
        assert {hit["_id"] for hit in page["hits"]["hits"]} == {d for d in docs if shard_of(d, 3) != down}
        later = {f"e{n}": {"n": n, "client": "later"} for n in range(12)}
        written = es.bulk(operations=index_operations("waiting", later)).body["items"]
        statuses = {item["index"]["_id"]: item["index"]["status"] for item in written}
        assert statuses == {doc_id: 503 if shard_of(doc_id, 3) == down else 201 for doc_id in later}
        add_machine(ray_cluster.cluster, 2)
        assert health(es, "waiting", wait_for_status="green", timeout="120s")["status"] == "green"
        es.indices.refresh(index="waiting")
        acknowledged = len(docs) + sum(status == 201 for status in statuses.values())
        assert es.count(index="waiting").body["count"] == acknowledged
        es.indices.delete(index="waiting")
    finally:
        server.stop()
