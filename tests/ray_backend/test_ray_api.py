"""The APIs of an index whose shards are Ray actors that read or change every shard at once:
by-query operations and `_reindex`, scrolls sorted by `_score`, `_close`/`_open`, per-shard
listings and the health of a shard whose actor is down, through the REST API of a coordinator
(`serve --ray`) on a local 3-node Ray cluster (one cluster and one coordinator for the module).

The coordinator's data folder first holds indices of a node started without Ray (`local`,
`local_scored`, `local_dest`): a node keeps the shards of an index where they were created, so
the same coordinator serves local and Ray-backed indices, and reindexing between them is tested.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.testing import Server
from tests import web
from tests.concurrency import wait_for
from tests.conftest import error_of
from tests.ray_cluster import machine_actor, ray_server, shard_actor, shard_map, where
from tests.server_zygote import SERVER_ZYGOTE
from tests.write.test_by_query_api import result_of, start_slow, unthrottle, waiting_after

SHARDS = 2
_NDJSON = {"content-type": "application/x-ndjson"}
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def source(n: int) -> dict[str, Any]:
    """A document whose `body` repeats words by `n`, so a match query scores with many ties."""
    words = [WORDS[i % len(WORDS)] for i in range(n % 3, n % 3 + 1 + n % 4)]
    return {"n": n, "tag": f"t{n % 5}", "body": " ".join(words)}


def bulk(http: httpx.Client, index: str, docs: dict[str, dict[str, Any]], refresh: bool = True) -> None:
    lines = []
    for doc_id, body in docs.items():
        lines += [orjson.dumps({"index": {"_index": index, "_id": doc_id}}), orjson.dumps(body)]
    response = http.post(
        "/_bulk" + ("?refresh=true" if refresh else ""), content=b"\n".join(lines) + b"\n", headers=_NDJSON
    )
    assert response.status_code == 200 and response.json()["errors"] is False, response.text


def create(http: httpx.Client, index: str, shards: int = SHARDS) -> str:
    body = {
        "settings": {"number_of_shards": shards, "number_of_replicas": 0},
        "mappings": {"properties": {"n": {"type": "long"}}},
    }
    response = http.put(f"/{index}", json=body)
    assert response.status_code == 200, response.text
    return http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]


SCORED = {f"s{n}": source(n) for n in range(500)}


@pytest.fixture(scope="module")
def coordinator(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("ray-api") / "data"
    with (
        Server(data, popen=SERVER_ZYGOTE.popen) as plain,
        web.Client(base_url=plain.url, timeout=120) as http,
    ):
        create(http, "local")
        bulk(http, "local", {f"l{n}": source(n) for n in range(300)})
        create(http, "local_scored")
        bulk(http, "local_scored", SCORED)
        create(http, "local_dest")
    with ray_server(ray_cluster.address, data) as server:
        yield server


@pytest.fixture
def http(coordinator: Server) -> Iterator[httpx.Client]:
    with web.Client(base_url=coordinator.url, timeout=120) as client:
        yield client


def is_ray_backed(http: httpx.Client, index: str) -> bool:
    uuid = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]
    try:
        shard_actor(uuid, 0)
    except ValueError:  # no actor of that name
        return False
    return True


def count(http: httpx.Client, index: str, query: dict[str, Any] | None = None) -> int:
    http.post(f"/{index}/_refresh")
    body = {"query": query} if query is not None else {}
    response = http.post(f"/{index}/_count", json=body)
    assert response.status_code == 200, response.text
    return response.json()["count"]


# ---- by-query operations and reindex ---------------------------------------------------------


def test_delete_by_query_counts_the_conflicts_of_concurrent_writers(http: httpx.Client) -> None:
    create(http, "dbq")
    bulk(http, "dbq", {f"d{n}": source(n) for n in range(400)})
    # Throttled after its first batch of 20: the writers then update every document it matches.
    task = start_slow(
        http,
        "/dbq/_delete_by_query",
        {"query": {"range": {"n": {"lt": 200}}}},
        scroll_size="20",
        conflicts="proceed",
    )
    waiting_after(http, task, 1)
    updated: list[str] = []
    missing: list[str] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            for n in range(w, 200, 2):
                answer = own.post(f"/dbq/_update/d{n}", json={"doc": {"touched": True}})
                assert answer.status_code in (200, 404), answer.text
                with lock:
                    (updated if answer.status_code == 200 else missing).append(f"d{n}")
            bulk(own, "dbq", {f"new{w}-{i}": source(1000 + i) for i in range(50)}, refresh=False)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    unthrottle(http, "_delete_by_query", task)
    response = result_of(http, task)["response"]
    # The first batch was deleted before the writers came; every document they changed since the
    # operation's snapshot is a conflict, counted and left alone; nothing else is touched.
    assert len(missing) == 20 and len(updated) == 180
    assert response["total"] == 200 and response["failures"] == []
    assert response["deleted"] == 20 and response["version_conflicts"] == 180
    assert response["batches"] == 10
    assert count(http, "dbq") == 180 + 200 + 100  # (refreshed)
    left = http.post(
        "/dbq/_search", json={"size": 1000, "query": {"range": {"n": {"lt": 200}}}, "_source": ["touched"]}
    ).json()["hits"]["hits"]
    assert sorted(hit["_id"] for hit in left) == sorted(updated)
    assert all(hit["_source"] == {"touched": True} for hit in left)


def test_update_by_query_in_slices_beside_writers(http: httpx.Client) -> None:
    create(http, "ubq")
    bulk(http, "ubq", {f"d{n}": source(n) for n in range(400)})
    stop = threading.Event()
    written: list[str] = []

    def writer() -> None:  # new documents beside the operation: not in its snapshot
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            i = 0
            while not stop.is_set():
                bulk(own, "ubq", {f"w{i}": {"n": 10_000 + i}}, refresh=True)
                written.append(f"w{i}")
                i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        response = http.post(
            "/ubq/_update_by_query",
            params={"slices": "auto", "scroll_size": "37", "refresh": "true"},
            json={"query": {"range": {"n": {"lt": 1000}}}},
        )
    finally:
        stop.set()
        thread.join()
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total"] == body["updated"] == 400 and body["version_conflicts"] == 0
    assert [s["slice_id"] for s in body["slices"]] == list(range(SHARDS))  # auto: one per shard
    assert sum(s["total"] for s in body["slices"]) == 400 and all(s["total"] for s in body["slices"])
    hits = http.post("/ubq/_search", json={"size": 1000, "version": True, "_source": False}).json()["hits"][
        "hits"
    ]
    versions = {hit["_id"]: hit["_version"] for hit in hits}
    assert {versions[f"d{n}"] for n in range(400)} == {2}  # each matched document re-indexed once
    assert {versions[w] for w in written} <= {1} and len(versions) == 400 + len(written)


def test_reindex_between_ray_backed_and_local_indices(http: httpx.Client) -> None:
    create(http, "ray_src")
    bulk(http, "ray_src", {f"r{n}": source(n) for n in range(250)})
    assert is_ray_backed(http, "ray_src") and not is_ray_backed(http, "local")

    def reindex(body: dict[str, Any], **params: str) -> dict[str, Any]:
        response = http.post("/_reindex", params={"refresh": "true", **params}, json=body)
        assert response.status_code == 200, response.text
        return response.json()

    # Ray -> Ray (the destination created on the cluster), in slices.
    done = reindex({"source": {"index": "ray_src", "size": 40}, "dest": {"index": "ray_copy"}}, slices="3")
    assert done["created"] == 250 and len(done["slices"]) == 3
    assert is_ray_backed(http, "ray_copy")
    # local -> Ray, with a query.
    done = reindex(
        {"source": {"index": "local", "query": {"term": {"tag": "t1"}}}, "dest": {"index": "from_local"}}
    )
    assert done["total"] == done["created"] == 60
    # Ray -> local, creating only: what exists already is a conflict.
    bulk(http, "local_dest", {"r7": {"n": -1}})
    done = reindex(
        {
            "source": {"index": "ray_src"},
            "dest": {"index": "local_dest", "op_type": "create"},
            "conflicts": "proceed",
        }
    )
    assert done["created"] == 249 and done["version_conflicts"] == 1
    assert not is_ray_backed(http, "local_dest")

    def sources(index: str) -> dict[str, Any]:
        hits = http.post(f"/{index}/_search", json={"size": 1000}).json()["hits"]["hits"]
        return {hit["_id"]: hit["_source"] for hit in hits}

    original = sources("ray_src")
    assert sources("ray_copy") == original
    assert sources("from_local") == {f"l{n}": source(n) for n in range(300) if n % 5 == 1}
    assert sources("local_dest") == {**original, "r7": {"n": -1}}


def test_a_by_query_operation_in_the_background_is_a_task(http: httpx.Client) -> None:
    create(http, "bg", shards=1)
    bulk(http, "bg", {f"d{n}": source(n) for n in range(100)})
    response = http.post(
        "/bg/_delete_by_query",
        params={"wait_for_completion": "false", "refresh": "true"},
        json={"query": {"term": {"tag": "t0"}}},
    )
    assert response.status_code == 200, response.text
    done = result_of(http, response.json()["task"])
    assert done["response"]["deleted"] == 20 and done["response"]["failures"] == []
    assert count(http, "bg") == 80


# ---- scrolls sorted by _score -------------------------------------------------------------------


def scroll_hits(http: httpx.Client, index: str, body: dict[str, Any]) -> list[tuple[str, float]]:
    """Every (id, score) of a scroll, in its order."""
    page = http.post(f"/{index}/_search", params={"scroll": "1m"}, json=body)
    hits: list[tuple[str, float]] = []
    while True:
        assert page.status_code == 200, page.text
        data = page.json()
        assert data["_shards"]["failed"] == 0
        if not data["hits"]["hits"]:
            break
        hits += [(hit["_id"], hit["_score"]) for hit in data["hits"]["hits"]]
        page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": data["_scroll_id"]})
    http.request("DELETE", "/_search/scroll", json={"scroll_id": data["_scroll_id"]})
    return hits


def by_score(hits: list[tuple[str, float]]) -> list[tuple[float, frozenset[str]]]:
    """The scores in order, each with the ids that have it: what a `_score` order defines."""
    groups: list[tuple[float, set[str]]] = []
    for doc_id, score in hits:
        if groups and groups[-1][0] == score:
            groups[-1][1].add(doc_id)
        else:
            groups.append((score, {doc_id}))
    return [(score, frozenset(ids)) for score, ids in groups]


def test_a_scroll_sorted_by_score_matches_the_same_scroll_on_a_local_index(http: httpx.Client) -> None:
    create(http, "scored")
    bulk(http, "scored", SCORED)
    stop = threading.Event()

    def writer() -> None:  # matching documents written beside the scroll are not in its snapshot
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            i = 0
            while not stop.is_set():
                bulk(own, "scored", {f"extra{i}": {"body": "alpha beta gamma"}}, refresh=True)
                i += 1

    query = {"match": {"body": "alpha gamma"}}
    remote_doc = scroll_hits(http, "scored", {"size": 50, "query": query, "sort": ["_score", "_doc"]})
    sliced = [
        scroll_hits(http, "scored", {"size": 31, "query": query, "slice": {"id": i, "max": 2}})
        for i in range(2)
    ]
    thread = threading.Thread(target=writer)
    thread.start()
    try:  # refreshes change the index's statistics: the scroll's pinned snapshots keep their scores
        remote = scroll_hits(http, "scored", {"size": 23, "query": query})
    finally:
        stop.set()
        thread.join()
    local = scroll_hits(http, "local_scored", {"size": 23, "query": query})
    expected = count(http, "local_scored", query)
    assert len(local) == expected > 100
    # Exactly once, and in the same order where `_score` defines one.
    assert len({doc_id for doc_id, _ in remote}) == len(remote) == expected
    assert by_score(remote) == by_score(local)
    assert remote_doc == remote  # ties by `_shard_doc`, whatever the batch size
    joined = sliced[0] + sliced[1]
    assert all(sliced) and sorted(joined) == sorted(remote)


# ---- _close and _open -------------------------------------------------------------------------


def test_close_and_open_keep_every_acknowledged_write_across_a_coordinator_restart(
    ray_cluster: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    acknowledged: set[str] = set()
    with (
        ray_server(ray_cluster.address, data) as first,
        web.Client(base_url=first.url, timeout=120) as http,
    ):
        uuid = create(http, "closing")
        bulk(http, "closing", {f"d{n}": source(n) for n in range(200)}, refresh=False)
        acknowledged |= {f"d{n}" for n in range(200)}
        stop = threading.Event()
        writing = threading.Event()
        outcomes: list[tuple[str, int, str | None]] = []

        def writer() -> None:  # writes while the index closes: acknowledged, or refused as closed
            with web.Client(base_url=first.url, timeout=120) as own:
                i = 0
                while not stop.is_set():
                    answer = own.put(f"/closing/_doc/w{i}", json=source(i))
                    outcomes.append(
                        (f"w{i}", answer.status_code, error_of(answer)["type"] if answer.is_error else None)
                    )
                    i += 1
                    if i == 5:
                        writing.set()

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            assert writing.wait(60)  # the writer is under way
            closed = http.post("/closing/_close")
        finally:
            stop.set()
            thread.join()
        assert closed.status_code == 200, closed.text
        assert closed.json()["indices"] == {"closing": {"closed": True}}
        for doc_id, status, error in outcomes:
            assert status in (200, 201) or (status == 400 and error == "index_closed_exception"), (
                status,
                error,
            )
            if status in (200, 201):
                acknowledged.add(doc_id)
        # Closed: reads and writes refused, listed as closed, no shard actor left.
        refused = http.post("/closing/_search")
        assert refused.status_code == 400 and error_of(refused)["type"] == "index_closed_exception"
        refused = http.put("/closing/_doc/late", json={"n": 1})
        assert refused.status_code == 400 and error_of(refused)["type"] == "index_closed_exception"
        (row,) = http.get(
            "/_cat/indices/closing", params={"format": "json", "expand_wildcards": "all"}
        ).json()
        assert row["status"] == "close"
        for shard in range(SHARDS):
            with pytest.raises(ValueError):
                shard_actor(uuid, shard)
    with (
        ray_server(ray_cluster.address, data) as second,
        web.Client(base_url=second.url, timeout=120) as http,
    ):
        # Still closed after the coordinator's restart, and still without actors.
        assert error_of(http.post("/closing/_count"))["type"] == "index_closed_exception"
        with pytest.raises(ValueError):
            shard_actor(uuid, 0)
        opened = http.post("/closing/_open")
        assert opened.status_code == 200 and opened.json()["acknowledged"] is True
        hits = http.post("/closing/_search", json={"size": 10_000, "_source": False}).json()["hits"]["hits"]
        assert {hit["_id"] for hit in hits} == acknowledged  # reopened from the shards' folders
        # Closed and opened at once: the actors end and come back under the same names.
        assert http.post("/closing/_close").status_code == 200
        assert http.post("/closing/_open").status_code == 200
        assert http.put("/closing/_doc/after?refresh=true", json={"n": 1}).status_code == 201
        assert count(http, "closing") == len(acknowledged) + 1
        # A closed index is deleted with its shards' folders.
        folders = sorted(data.glob(f"ray-shards/*/{uuid}"))
        assert len(folders) == SHARDS  # on as many nodes
        assert http.post("/closing/_close").status_code == 200
        assert http.delete("/closing").status_code == 200
        assert not any(folder.exists() for folder in folders)
        assert http.get("/closing/_count").status_code == 404


def test_a_codec_set_while_closed_compresses_the_shard_actors_next_segments(http: httpx.Client) -> None:
    """`index.codec` through a Ray-backed index: `best_compression`'s segments in zstd (no codec
    in their meta.json); changed while the index is closed, the reopened shard actors write their
    next segments in LZ4 (the coordinator's state is newer than the one their folder kept), and
    every source of both reads back."""
    body = {
        "settings": {"number_of_shards": SHARDS, "number_of_replicas": 0, "codec": "best_compression"},
        "mappings": {"properties": {"n": {"type": "long"}}},
    }
    assert http.put("/codecs", json=body).status_code == 200
    assert is_ray_backed(http, "codecs")
    uuid = http.get("/codecs/_settings").json()["codecs"]["settings"]["index"]["uuid"]

    def codecs() -> set[str | None]:
        folders = [Path(c["folder"]) / "shard" for entry in shard_map(uuid) or [] for c in entry["copies"]]
        metas = [
            orjson.loads(meta.read_bytes()) for folder in folders for meta in folder.glob("seg_*/meta.json")
        ]
        return {meta.get("source_codec") for meta in metas}

    bulk(http, "codecs", {f"a{n}": source(n) for n in range(300)})
    assert codecs() == {None}
    assert http.post("/codecs/_close").status_code == 200
    assert http.put("/codecs/_settings", json={"index.codec": "default"}).status_code == 200
    assert http.post("/codecs/_open").status_code == 200
    bulk(http, "codecs", {f"b{n}": source(n) for n in range(300)})
    assert codecs() == {None, "lz4"}
    hits = http.post("/codecs/_search", json={"size": 600}).json()["hits"]["hits"]
    assert {h["_id"]: h["_source"] for h in hits} == {f"{p}{n}": source(n) for p in "ab" for n in range(300)}


def one_shard_on_its_machine(http: httpx.Client, index: str, docs: int) -> tuple[str, Any, dict, Any]:
    """A new index of one shard and `docs` documents: its uuid, its machine actor, its copy's
    entry in the shard map and the index state a coordinator pushes to it."""
    from leafsearch.search.workers.mirror import IndexState

    uuid = create(http, index, shards=1)
    bulk(http, index, {f"d{n}": source(n) for n in range(docs)})
    ((copy,),) = [entry["copies"] for entry in shard_map(uuid) or []]
    body = http.get(f"/{index}/_mapping").json()[index]["mappings"]
    state = IndexState(uuid, index, {"index.number_of_shards": "1"}, body, 1, 1)
    return uuid, machine_actor(uuid, 0), copy, state


def test_a_state_push_sent_before_a_close_does_not_open_the_shard_again(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """A write's push of the index's state, or another coordinator's, that reaches a machine after
    the index closed there (sent before the close) leaves the shard closed; the open's push opens
    it, with every document."""
    import ray

    from leafsearch.ray_backend.actor import Refusal

    with (
        ray_server(ray_cluster.address, tmp_path / "data") as server,
        web.Client(base_url=server.url, timeout=120) as http,
    ):
        uuid, machine, copy, state = one_shard_on_its_machine(http, "pushed", 20)
        assert http.post("/pushed/_close").status_code == 200
        assert not ray.get(machine.holds.remote((uuid, 0)), timeout=60)
        # The push of a state as old as the one the shard held when it closed (the first: order 1).
        refused = ray.get(machine.call.remote((uuid, 0), "put_index", copy["folder"], state, 1), timeout=60)
        assert isinstance(refused, Refusal) and "was closed on this machine" in str(refused.error)
        assert not ray.get(machine.holds.remote((uuid, 0)), timeout=60)
        assert http.post("/pushed/_open").status_code == 200
        assert ray.get(machine.holds.remote((uuid, 0)), timeout=60)
        assert count(http, "pushed") == 20


def test_a_copy_recovering_on_a_machine_refuses_the_calls_of_an_open_shard_as_unavailable(
    http: httpx.Client,
) -> None:
    """A call a recovering copy has no answer for (a coordinator's refresh, a search, sent to the
    machine before or while the copy started over) is the shard's unavailability, which the
    coordinator handles as for a shard not open, not an error of the machine's code."""
    import ray

    from leafsearch.errors import ShardUnavailable
    from leafsearch.ray_backend.actor import Refusal

    uuid, machine, copy, state = one_shard_on_its_machine(http, "startover", 5)
    started = machine.call.remote((uuid, 0), "start_recovery", copy["folder"], state, 1, 1)
    assert ray.get(started, timeout=60) is None
    node, _ = ray.get(machine.call.remote((uuid, 0), "where"), timeout=60)  # (the copy answers it)
    assert node == where(uuid, 0)[0]
    for method in ("refresh", "stats"):
        refused = ray.get(machine.call.remote((uuid, 0), method), timeout=60)
        assert isinstance(refused, Refusal) and isinstance(refused.error, ShardUnavailable), refused
        assert str(refused.error).endswith("[startover][0] is recovering on this machine")
    assert http.delete("/startover").status_code == 200
    assert not ray.get(machine.holds.remote((uuid, 0)), timeout=60)


# ---- per-shard listings and health ------------------------------------------------------------


def primaries(http: httpx.Client, index: str) -> list[dict[str, str]]:
    columns = "shard,prirep,state,docs,id,ip,node,unassigned.reason"
    rows = http.get(f"/_cat/shards/{index}", params={"format": "json", "h": columns})
    assert rows.status_code == 200, rows.text
    return sorted((row for row in rows.json() if row["prirep"] == "p"), key=lambda row: int(row["shard"]))


def test_per_shard_listings_name_the_ray_node_of_each_shard(http: httpx.Client) -> None:
    uuid = create(http, "listed", shards=3)  # one per node
    bulk(http, "listed", {f"d{n}": source(n) for n in range(200)})
    nodes = [where(uuid, shard)[0] for shard in range(3)]
    rows = primaries(http, "listed")
    assert [row["id"] for row in rows] == [row["node"] for row in rows] == nodes
    assert {row["state"] for row in rows} == {"STARTED"} and {row["ip"] for row in rows} == {"127.0.0.1"}
    assert sum(int(row["docs"]) for row in rows) == 200 and all(int(row["docs"]) for row in rows)

    segments = http.get("/_cat/segments/listed", params={"format": "json", "h": "shard,id,docs.count"}).json()
    assert sum(int(row["docs.count"]) for row in segments) == 200
    assert {(int(row["shard"]), row["id"]) for row in segments} == set(enumerate(nodes))

    shards = http.get("/listed/_stats", params={"level": "shards"}).json()["indices"]["listed"]["shards"]
    assert sorted(shards, key=int) == [str(s) for s in range(3)]
    assert [shards[str(s)][0]["routing"]["node"] for s in range(3)] == nodes
    assert sum(shards[str(s)][0]["docs"]["count"] for s in range(3)) == 200
    assert [shards[str(s)][0]["commit"]["num_docs"] for s in range(3)] == [int(r["docs"]) for r in rows]
    node_shards = http.get("/_nodes/stats/indices", params={"level": "shards"}).json()
    (stats,) = node_shards["nodes"].values()
    assert (
        sum(next(iter(entry.values()))["docs"]["count"] for entry in stats["indices"]["shards"]["listed"])
        == 200
    )


def health(http: httpx.Client, index: str, **params: str) -> httpx.Response:
    return http.get(f"/_cluster/health/{index}", params=params)


def test_health_is_red_while_a_shard_actor_is_down(http: httpx.Client) -> None:
    import ray

    uuid = create(http, "healthy")
    assert http.put("/healthy/_settings", json={"index": {"number_of_replicas": 0}}).status_code == 200
    bulk(http, "healthy", {f"d{n}": source(n) for n in range(100)})
    assert health(http, "healthy").json()["status"] == "green"
    # Killed, the actor is restarted by Ray: the index is green again once it answers.
    old = where(uuid, 0)[1]
    os.kill(old, signal.SIGKILL)
    back = health(http, "healthy", wait_for_status="green", timeout="60s")
    assert back.status_code == 200 and back.json()["status"] == "green"
    assert count(http, "healthy") == 100
    # Ended for good, the shard is an unassigned primary: red, listed UNASSIGNED, searches partial.
    actor = machine_actor(uuid, 1)  # (shard 0 is on another machine)
    ray.kill(actor, no_restart=True)
    with pytest.raises(ray.exceptions.RayActorError):  # (once the kill lands: it is asynchronous)
        for _ in range(1000):
            ray.get(actor.where.remote(), timeout=60)
    # Red once the coordinator's failure detector has found the machine's actor gone (its next
    # check, a second apart), answered at once (200), as Elasticsearch does without
    # `wait_for_status`.
    wait_for(lambda: health(http, "healthy").json()["status"] == "red")
    answered = health(http, "healthy", level="indices")
    assert answered.status_code == 200 and answered.json()["timed_out"] is False
    body = answered.json()
    assert body["status"] == "red" and body["unassigned_primary_shards"] == 1
    assert body["active_primary_shards"] == SHARDS - 1 and body["unassigned_shards"] == 1
    assert body["indices"]["healthy"]["status"] == "red"
    waited = health(http, "healthy", wait_for_status="yellow", timeout="0s")
    assert waited.status_code == 408 and waited.json()["timed_out"] is True
    rows = primaries(http, "healthy")
    assert [row["state"] for row in rows] == ["STARTED", "UNASSIGNED"]
    assert rows[1]["unassigned.reason"] == "NODE_LEFT"  # its machine failed (disconnected)
    (row,) = http.get("/_cat/indices/healthy", params={"format": "json", "h": "health,status"}).json()
    assert row == {"health": "red", "status": "open"}
    stats = http.get("/healthy/_stats/docs")
    assert stats.status_code == 200, stats.text
    assert stats.json()["_shards"] == {"total": SHARDS, "successful": SHARDS - 1, "failed": 0}
    assert stats.json()["indices"]["healthy"]["health"] == "red"
    assert 0 < stats.json()["_all"]["primaries"]["docs"]["count"] < 100
    page = http.post("/healthy/_search", json={"size": 0}).json()
    assert page["_shards"]["failed"] == 1 and 0 < page["hits"]["total"]["value"] < 100
    assert http.delete("/healthy").status_code == 200


def test_a_shard_whose_ray_node_left_stays_unassigned(http: httpx.Client, ray_cluster: Any) -> None:
    """Last in the module: a node of the module's cluster leaves for good. As Elasticsearch's
    primary without replicas whose node left: unassigned (NODE_LEFT), red, searches partial."""
    uuid = create(http, "orphaned", shards=3)  # one shard per node
    bulk(http, "orphaned", {f"d{n}": source(n) for n in range(90)})
    # Every shard started first: the machine whose actor the test before ended for good has a new
    # one, found answering by the failure detector's next check.
    started = health(http, "orphaned", wait_for_status="green", timeout="60s")
    assert started.status_code == 200 and started.json()["status"] == "green", started.text
    nodes = [where(uuid, shard)[0] for shard in range(3)]
    leaving = (
        ray_cluster.cluster.worker_nodes
        and sorted(ray_cluster.cluster.worker_nodes, key=lambda n: n.node_id)[0]
    )
    lost = nodes.index(leaving.node_id)
    ray_cluster.cluster.remove_node(leaving, allow_graceful=True)
    answered = health(http, "orphaned")
    assert answered.status_code == 200 and answered.json()["timed_out"] is False
    body = answered.json()
    assert body["status"] == "red" and body["unassigned_primary_shards"] == 1
    rows = primaries(http, "orphaned")
    assert [row["state"] == "UNASSIGNED" for row in rows] == [s == lost for s in range(3)]
    assert rows[lost]["unassigned.reason"] == "NODE_LEFT"
    page = http.post("/orphaned/_search", json={"size": 100}).json()
    assert page["_shards"]["successful"] == 2 and page["_shards"]["failed"] == 1
    assert [failure["shard"] for failure in page["_shards"]["failures"]] == [lost]
    assert 0 < len(page["hits"]["hits"]) < 90
    lines = []
    for n in range(30):
        lines += [orjson.dumps({"index": {"_index": "orphaned", "_id": f"e{n}"}}), orjson.dumps(source(n))]
    items = http.post("/_bulk", content=b"\n".join(lines) + b"\n", headers=_NDJSON).json()["items"]
    failed = [item["index"] for item in items if item["index"]["status"] != 201]
    assert failed and len(failed) < 30
    for item in failed:
        assert item["status"] == 503 and item["error"]["type"] == "unavailable_shards_exception"
        assert item["error"]["reason"].startswith(f"[orphaned][{lost}] primary shard is not active")
