"""Search worker processes (issue 15): searches run in other processes and answer what the server
process would, walks stay exactly-once across workers and their deaths, nothing leaks.

The session's server (conftest) runs with the default workers, so every HTTP test of the suite
goes through them too; the tests here are about what only workers bring.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import httpx
import pytest

from leafsearch.errors import SearchPhaseExecution, TaskCancelled
from leafsearch.indices import admin
from leafsearch.node.node import Node
from leafsearch.search.workers.pool import LONE_REQUESTS_IN_SERVER, LONE_WALKS_IN_SERVER
from tests import web
from tests.concurrency import stop_process
from tests.conftest import running_server
from tests.inprocess import count, search
from tests.search.walk_clients import client_scroll, client_walk

DOCS = 3_000


def _bulk(node: Node, ids: range, index: str = "t") -> None:
    lines = b"".join(
        b'{"index":{"_id":"%d"}}\n{"n":%d,"tag":"t%d","text":"word%d common"}\n' % (i, i, i % 7, i % 13)
        for i in ids
    )
    node.bulk(lines, index=index, refresh="true")


def _wait(condition: Any, what: str, timeout: float = 30.0) -> None:
    """Wait until `condition()` holds (state another thread or process changes)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


@pytest.fixture
def node(tmp_path: Path, worker_processes: BaseContext) -> Iterator[Node]:
    """A node with 2 search workers, ready, holding DOCS documents on 3 shards; every one-shot
    request goes to the workers (one alone would otherwise run in the server process)."""
    with Node(tmp_path / "node", search_workers=2, worker_processes=worker_processes) as n:
        n.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "false"}})
        admin.create_index(n, "t", {"settings": {"number_of_shards": 3}})
        for start in range(0, DOCS, 1000):  # several segments per shard
            _bulk(n, range(start, start + 1000))
        assert n.search_workers is not None and n.search_workers.wait_ready(60)
        yield n


def _worker_stats(node: Node) -> list[dict[str, Any]]:
    assert node.search_workers is not None
    return node.search_workers.stats()["workers"]


def test_searches_in_workers_answer_what_the_server_process_computes(node: Node) -> None:
    body = {
        "query": {
            "bool": {
                "filter": [{"range": {"n": {"gte": 100, "lt": 2900}}}],
                "should": [{"match": {"text": "word3"}}],
            }
        },
        "sort": [{"n": "desc"}],
        "size": 25,
        "from": 10,
        "aggs": {"tags": {"terms": {"field": "tag.keyword"}}, "total": {"sum": {"field": "n"}}},
    }
    via_workers = search(node, "t", body)
    assert node.search_stats.snapshot()["query_total"] >= 1  # counted where the client asked
    pool, node.search_services.workers = node.search_services.workers, None
    try:
        here = search(node, "t", body)
    finally:
        node.search_services.workers = pool
    assert [h["_id"] for h in via_workers["hits"]["hits"]] == [str(n) for n in range(2889, 2864, -1)]
    for response in (via_workers, here):
        response.pop("took")
    assert via_workers == here
    assert via_workers["aggregations"]["total"]["value"] == sum(range(100, 2900))
    assert count(node, "t", {"query": {"term": {"tag.keyword": "t3"}}})["count"] == len(range(3, DOCS, 7))
    held = [w["snapshots"] for w in _worker_stats(node)]
    assert sum(held) >= 3  # the shards' snapshots were published to a worker


class _Held:
    """A message part whose pickling waits for `release`: posted to a worker, it holds that
    worker's sender thread (the pool's messages queued behind it wait too)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def __reduce__(self) -> tuple[Any, ...]:
        self.release.wait(60)
        return (list, ())


def test_a_settings_change_reaches_each_worker_before_the_next_search(node: Node) -> None:
    """A search answered after `_cluster/settings` changed a limit is held to it, in whichever
    worker runs it, even while the workers' sender threads are busy (the change was queued
    behind them, and the next search's task, written directly, overtook it)."""
    pool = node.search_workers
    assert pool is not None
    release = threading.Event()
    for worker in pool._slots:
        worker.post(("release", _Held(release)))
    try:
        node.cluster_settings.update({"transient": {"search.max_buckets": "1"}})
        for _ in range(2):  # (each worker)
            with pytest.raises(SearchPhaseExecution) as refused:
                search(node, "t", {"size": 0, "aggs": {"tags": {"terms": {"field": "tag.keyword"}}}})
            assert "too_many_buckets_exception" in str(refused.value.body())
    finally:
        release.set()


def test_a_worker_keeps_segments_open_across_refreshes_until_their_files_are_deleted(tmp_path: Path) -> None:
    """A refresh releases the old snapshot before the next search names the new one: the worker
    opens only the new segment (not every segment again, with its sort orders), and closes a
    segment once the server process deletes its files (merged away, index deleted)."""
    body = {"sort": [{"n": "desc"}], "size": 5}
    with Node(tmp_path / "one", background=False, search_workers=1) as node:
        node.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "false"}})
        admin.create_index(node, "t", {"settings": {"number_of_shards": 1}})
        for start in range(0, 300, 100):
            _bulk(node, range(start, start + 100))
        pool = node.search_workers
        assert pool is not None and pool.wait_ready(60)
        assert search(node, "t", body)["hits"]["total"]["value"] == 300
        (worker,) = pool.stats()["workers"]
        assert (worker["open_segments"], worker["segments_opened"]) == (3, 3)
        for n in range(300, 312):
            _bulk(node, range(n, n + 1))  # one new segment and a new snapshot each time
            assert [h["_id"] for h in search(node, "t", body)["hits"]["hits"]][0] == str(n)
        (worker,) = pool.stats()["workers"]
        assert (worker["open_segments"], worker["segments_opened"]) == (15, 15)
        shard = node.indices["t"].shards[0]
        while shard.maybe_merge():
            pass
        node.indices["t"].refresh()
        assert search(node, "t", body)["hits"]["total"]["value"] == 312
        current = len(shard.segments)
        assert current < 15
        (worker,) = pool.stats()["workers"]
        assert worker["open_segments"] == current  # the merged-away segments were closed
        node.drop_index("t")
        (worker,) = pool.stats()["workers"]
        assert worker["open_segments"] == 0 and worker["snapshots"] == 0


def test_errors_cross_from_a_worker_with_their_type_and_status(node: Node) -> None:
    body = {"query": {"range": {"n": {"gte": "not a number"}}}}
    with pytest.raises(SearchPhaseExecution) as in_worker:
        search(node, "t", body)
    pool, node.search_services.workers = node.search_services.workers, None
    try:
        with pytest.raises(SearchPhaseExecution) as here:
            search(node, "t", body)
    finally:
        node.search_services.workers = pool
    assert in_worker.value.status == 400
    error = in_worker.value.body()["error"]
    assert error["root_cause"][0]["type"] == "query_shard_exception"
    assert in_worker.value.body() == here.value.body()


def _walk_pit(node: Node, pit: str, slice_: dict | None, size: int = 128) -> list[str]:
    ids: list[str] = []
    body: dict[str, Any] = {"size": size, "pit": {"id": pit, "keep_alive": "1m"}, "sort": [{"n": "asc"}]}
    if slice_ is not None:
        body["slice"] = slice_
    while True:
        hits = search(node, None, body)["hits"]["hits"]
        if not hits:
            return ids
        ids += [h["_id"] for h in hits]
        body["search_after"] = hits[-1]["sort"]


def test_concurrent_walks_and_searches_with_writes_beside_them_are_exactly_once(node: Node) -> None:
    pit = node.open_pit("t", "1m")["id"]
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        next_id = DOCS
        while not stop.is_set():
            _bulk(node, range(next_id, next_id + 50))
            written.append(next_id)
            next_id += 50

    def scroll_slice(slice_id: int) -> list[str]:
        body = {"size": 200, "sort": ["_doc"], "slice": {"id": slice_id, "max": 2}}
        page = search(node, "t", body, {"scroll": "1m"})
        ids: list[str] = []
        while page["hits"]["hits"]:
            ids += [h["_id"] for h in page["hits"]["hits"]]
            page = node.scroll(page["_scroll_id"], "1m")
        node.clear_scroll([page["_scroll_id"]])
        return ids

    results: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def run(name: str, fn: Any, *args: Any) -> None:
        try:
            results[name] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=writer)]
    threads += [
        threading.Thread(target=run, args=(f"pit{s}", _walk_pit, node, pit, {"id": s, "max": 2}))
        for s in (0, 1)
    ]
    threads += [threading.Thread(target=run, args=(f"scroll{s}", scroll_slice, s)) for s in (0, 1)]
    threads += [threading.Thread(target=run, args=("plain", _walk_pit, node, pit, None, 500))]
    for t in threads:
        t.start()
    for t in threads[1:]:
        t.join()
    stop.set()
    threads[0].join()
    assert not errors, errors
    initial = {str(i) for i in range(DOCS)}
    pit_ids = results["pit0"] + results["pit1"]
    assert len(pit_ids) == len(set(pit_ids)) and set(pit_ids) == initial  # the PIT's snapshot, once each
    assert sorted(results["plain"], key=int) == results["plain"] and set(results["plain"]) == initial
    scrolled = results["scroll0"] + results["scroll1"]
    assert len(scrolled) == len(set(scrolled)) and initial <= set(scrolled)
    node.close_pit(pit)
    assert node.contexts.open_count() == 0
    _wait(
        lambda: all(
            w["walk_memory"]["lists"] == 0 and w["pages_read_ahead"] == 0 for w in _worker_stats(node)
        ),
        "walks forgotten",
    )


def test_a_walk_alone_runs_in_the_server_process_and_walks_beside_it_in_workers(node: Node) -> None:
    """A walk that starts while nothing else runs is served by the server process (relaying its
    pages would cost more than rendering them); one that starts beside it goes to a worker; each
    is exactly once; killing every worker does not touch the walk the server serves; with
    `search.workers.lone_walks_in_server: false` a lone walk goes to a worker."""
    pool = node.search_workers
    assert pool is not None

    def walks() -> tuple[int, list[int]]:
        stats = pool.stats()
        return stats["walks_in_server_process"], [w["walks"] for w in stats["workers"]]

    page = search(node, "t", {"size": 300, "sort": ["_doc"]}, {"scroll": "1m"})
    scrolled = [h["_id"] for h in page["hits"]["hits"]]
    assert walks() == (1, [0, 0])
    pit = node.open_pit("t", "1m")["id"]
    walked = _walk_pit(node, pit, {"id": 0, "max": 2}, size=200)
    assert walks()[0] == 1 and sum(walks()[1]) == 1  # the slice beside the scroll ran in a worker
    for worker in pool.stats()["workers"]:
        os.kill(worker["pid"], signal.SIGKILL)
    while page["hits"]["hits"]:
        page = node.scroll(page["_scroll_id"], "1m")  # never reaches a worker: no failure
        scrolled += [h["_id"] for h in page["hits"]["hits"]]
    node.clear_scroll([page["_scroll_id"]])
    assert sorted(scrolled, key=int) == [str(i) for i in range(DOCS)]
    assert walks()[0] == 0
    _wait(lambda: pool.stats()["ready"] == 2, "the workers are replaced")
    walked += _walk_pit(node, pit, {"id": 1, "max": 2}, size=200)  # alone now: in the server
    assert sorted(walked, key=int) == [str(i) for i in range(DOCS)]
    node.close_pit(pit)
    node.cluster_settings.update({"transient": {LONE_WALKS_IN_SERVER: "false"}})
    pit = node.open_pit("t", "1m")["id"]
    assert sorted(_walk_pit(node, pit, None, size=500), key=int) == [str(i) for i in range(DOCS)]
    assert walks()[0] == 0 and sum(walks()[1]) == 1
    node.close_pit(pit)
    assert walks() == (0, [0, 0])


def test_a_walk_served_in_the_server_process_moves_to_a_worker_once_others_walk_beside_it(
    node: Node,
) -> None:
    """Served alone by the server process, a walk's next page goes to a worker once another walk
    is open and a worker has work in flight (the server would render it and relay the other's);
    its pages stay exactly once. An open walk that reads nothing meanwhile does not move it."""
    pool = node.search_workers
    assert pool is not None
    pit = node.open_pit("t", "1m")["id"]
    body: dict[str, Any] = {"size": 100, "pit": {"id": pit}, "sort": [{"n": "asc"}]}
    hits = search(node, None, body)["hits"]["hits"]
    assert pool.stats()["walks_in_server_process"] == 1
    scroll = search(node, "t", {"size": 10, "sort": ["_doc"]}, {"scroll": "1m"})  # beside it
    ids = [h["_id"] for h in hits]
    body["search_after"] = hits[-1]["sort"]
    hits = search(node, None, body)["hits"]["hits"]  # the scroll reads nothing meanwhile
    assert pool.stats()["walks_in_server_process"] == 1
    ids += [h["_id"] for h in hits]
    worker = _stop_worker(node)
    with worker.lock:
        worker.inflight[-1] = object()  # the other walk's page in flight on a worker
    try:
        body["search_after"] = hits[-1]["sort"]
        hits = search(node, None, body)["hits"]["hits"]
        assert pool.stats()["walks_in_server_process"] == 0
    finally:
        with worker.lock:
            del worker.inflight[-1]
    ids += [h["_id"] for h in hits]
    body["search_after"] = hits[-1]["sort"]
    while hits:
        hits = search(node, None, body)["hits"]["hits"]
        ids += [h["_id"] for h in hits]
        if hits:
            body["search_after"] = hits[-1]["sort"]
    assert ids == [str(i) for i in range(DOCS)]
    node.clear_scroll([scroll["_scroll_id"]])
    node.close_pit(pit)


def test_a_request_alone_runs_in_the_server_process_and_one_beside_others_in_a_worker(node: Node) -> None:
    """A one-shot request that arrives while nothing else runs is spared the worker's round trip;
    one that arrives while a task is in flight on a worker, or while another runs here, goes to
    the workers; the setting turns it off. Both paths answer the same."""
    pool = node.search_workers
    assert pool is not None
    body = {"query": {"range": {"n": {"gte": 10}}}, "sort": [{"n": "desc"}], "size": 7}
    in_worker = search(node, "t", body)  # the fixture sends every request to the workers
    assert pool.stats()["requests_in_server_process"] == 0
    node.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "true"}})
    here = search(node, "t", body)
    assert pool.stats()["requests_in_server_process"] == 1
    for response in (in_worker, here):
        response.pop("took")
    assert here == in_worker
    worker = _stop_worker(node)
    with worker.lock:
        worker.inflight[-1] = object()  # a task in flight on a worker: the next request is not alone
    try:
        assert not pool._take_here()
    finally:
        with worker.lock:
            del worker.inflight[-1]
    assert pool._take_here()  # alone again; now one runs here, so the next is not alone
    try:
        assert not pool._take_here()
    finally:
        with pool._lock:
            pool._here_busy -= 1
    page = search(node, "t", {"size": 10, "sort": ["_doc"]}, {"scroll": "1m"})  # a walk alone: here
    assert pool.stats()["walks_in_server_process"] == 1
    assert not pool._take_here()  # a walk is served here: the next request goes to a worker
    node.clear_scroll([page["_scroll_id"]])
    node.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "false"}})
    assert not pool._take_here()


def _stop_worker(node: Node, slot: int = 0) -> Any:
    assert node.search_workers is not None
    worker = node.search_workers._slots[slot]
    assert worker is not None
    return worker


def test_a_request_in_flight_on_a_worker_that_dies_gets_a_500_and_the_next_is_answered(
    tmp_path: Path,
) -> None:
    with Node(tmp_path / "one", search_workers=1) as node:
        node.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "false"}})
        admin.create_index(node, "t", {"settings": {"number_of_shards": 2}})
        _bulk(node, range(500))
        pool = node.search_workers
        assert pool is not None and pool.wait_ready(60)
        worker = _stop_worker(node)
        stop_process(worker.pid)  # the task waits in the worker's connection
        outcome: list[Any] = []
        thread = threading.Thread(target=lambda: outcome.append(_try_search(node)))
        thread.start()
        _wait(lambda: len(worker.inflight) == 1, "the search is in flight")
        os.kill(worker.pid, signal.SIGKILL)
        thread.join()
        error = outcome[0]
        assert isinstance(error, SearchPhaseExecution) and error.status == 500
        assert error.body()["error"]["root_cause"][0]["type"] == "node_disconnected_exception"
        # Answered at once (in the server process until the replacement is ready), then by it.
        assert search(node, "t", {"size": 0})["hits"]["total"]["value"] == 500
        assert pool.wait_ready(60) and pool.lost == 1
        assert search(node, "t", {"size": 0})["hits"]["total"]["value"] == 500


def _try_search(node: Node) -> Any:
    try:
        return search(node, "t", {"query": {"match_all": {}}})
    except SearchPhaseExecution as exc:
        return exc


def test_a_cancelled_request_stops_in_the_worker(tmp_path: Path) -> None:
    # No background refreshes or merges: nothing but this test's requests reaches the worker.
    with Node(tmp_path / "one", background=False, search_workers=1) as node:
        node.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "false"}})
        admin.create_index(node, "t", {})
        _bulk(node, range(500))
        pool = node.search_workers
        assert pool is not None and pool.wait_ready(60)
        assert search(node, "t", {"size": 0})["hits"]["total"]["value"] == 500  # all sent before
        # A stats round trip goes through the same queue as the settings the worker got when it
        # started: once it is answered, nothing else is left to be written before the task.
        assert pool.stats()["ready"] == 1
        worker = _stop_worker(node)
        # Which messages the sender thread writes: other messages (a snapshot's release) may go
        # beside the task, so the test waits for the cancel itself rather than a count.
        posted: list[str] = []
        write = worker._write
        worker._write = lambda message: (write(message), posted.append(message[0]))
        stop_process(worker.pid)
        cancelled = threading.Event()
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(search(node, "t", {"query": {"match_all": {}}}, cancelled=cancelled))
            except TaskCancelled as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        _wait(lambda: len(worker.inflight) == 1, "the search is in flight")
        cancelled.set()  # the client went away
        _wait(lambda: "cancel" in posted, "the task and its cancel are in the connection")
        os.kill(worker.pid, signal.SIGCONT)
        thread.join()
        assert isinstance(outcome[0], TaskCancelled)
        assert search(node, "t", {"size": 0})["hits"]["total"]["value"] == 500  # the worker goes on


# ---- through HTTP, from client processes ------------------------------------------------------


def _http_bulk(http: httpx.Client, index: str, ids: range) -> None:
    lines = b"".join(b'{"index":{"_id":"%d"}}\n{"n":%d}\n' % (i, i) for i in ids)
    response = http.post(f"/{index}/_bulk", content=lines, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200 and not response.json()["errors"]


def _search_workers(http: httpx.Client) -> dict[str, Any]:
    stats = http.get("/_nodes/stats/search_workers").json()
    return next(iter(stats["nodes"].values()))["search_workers"]


def test_slices_walked_by_client_processes_with_writes_beside_them(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", "--search-workers", "2") as (url, _),
        web.Client(base_url=url, timeout=60) as http,
    ):
        index = "walks"
        assert http.put(f"/{index}", json={"settings": {"number_of_shards": 3}}).status_code == 200
        for start in range(0, 6000, 2000):
            _http_bulk(http, index, range(start, start + 2000))
            http.post(f"/{index}/_refresh")
        _wait(lambda: _search_workers(http)["ready"] == 2, "the workers are ready")
        pit = http.post(f"/{index}/_pit", params={"keep_alive": "1m"}).json()["id"]
        stop = threading.Event()

        def writer() -> None:
            with web.Client(base_url=url, timeout=60) as own:
                next_id = 6000
                while not stop.is_set():
                    _http_bulk(own, index, range(next_id, next_id + 100))
                    own.post(f"/{index}/_refresh")
                    next_id += 100

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            with multiprocessing.get_context("spawn").Pool(4) as pool:
                walks = [pool.apply_async(client_walk, (url, pit, s, 2)) for s in (0, 1)]
                scrolls = [pool.apply_async(client_scroll, (url, index, s, 2)) for s in (0, 1)]
                walked = [w.get(timeout=300) for w in walks]
                scrolled = [s.get(timeout=300) for s in scrolls]
        finally:
            stop.set()
            thread.join()
        initial = {str(i) for i in range(6000)}
        pit_ids = walked[0] + walked[1]
        assert len(pit_ids) == len(set(pit_ids)) and set(pit_ids) == initial
        scroll_ids = scrolled[0] + scrolled[1]
        assert len(scroll_ids) == len(set(scroll_ids)) and initial <= set(scroll_ids)
        http.request("DELETE", "/_pit", json={"id": pit})
        workers = _search_workers(http)
        assert workers["lost"] == 0
        assert all(w["walk_memory"]["lists"] == 0 and w["pages_read_ahead"] == 0 for w in workers["workers"])


def test_workers_killed_in_the_middle_of_walks_lose_nothing_and_leak_nothing(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", "--search-workers", "2") as (url, _),
        web.Client(base_url=url, timeout=60) as http,
    ):
        index = "kills"
        # Both walks in workers (the first, alone, would otherwise run in the server process).
        settings = {"transient": {LONE_WALKS_IN_SERVER: False}}
        assert http.put("/_cluster/settings", json=settings).status_code == 200
        assert http.put(f"/{index}", json={"settings": {"number_of_shards": 2}}).status_code == 200
        _http_bulk(http, index, range(3000))
        http.post(f"/{index}/_refresh")
        _wait(lambda: _search_workers(http)["ready"] == 2, "the workers are ready")
        pit = http.post(f"/{index}/_pit", params={"keep_alive": "1m"}).json()["id"]
        pit_body: dict[str, Any] = {
            "size": 100,
            "pit": {"id": pit, "keep_alive": "1m"},
            "sort": [{"n": "desc"}],
        }
        page = http.post(
            f"/{index}/_search", params={"scroll": "1m"}, json={"size": 100, "sort": ["_doc"]}
        ).json()
        scroll_id = page["_scroll_id"]
        scrolled = [h["_id"] for h in page["hits"]["hits"]]
        walked: list[str] = []
        failures = 0
        for step in range(60):
            if step in (5, 17, 33):  # kill every worker between two pages
                _wait(lambda: _search_workers(http)["ready"] == 2, "the workers are ready")
                for worker in _search_workers(http)["workers"]:
                    os.kill(worker["pid"], signal.SIGKILL)
            try:
                response = http.post("/_search", json=pit_body)
            except httpx.RemoteProtocolError:  # the connection the killed worker kept was closed
                failures += 1
                continue
            if response.status_code != 200:  # a request that reached a dying worker
                failures += 1
                assert response.status_code == 500
                error = response.json()["error"]
                assert error["type"] == "search_phase_execution_exception"
                assert error["root_cause"][0]["type"] == "node_disconnected_exception"
                continue
            hits = response.json()["hits"]["hits"]
            if hits:
                walked += [h["_id"] for h in hits]
                pit_body["search_after"] = hits[-1]["sort"]
            response = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id})
            if response.status_code != 200:
                failures += 1
                assert response.status_code == 500
                continue
            scrolled += [h["_id"] for h in response.json()["hits"]["hits"]]
            scroll_id = response.json()["_scroll_id"]
        assert failures <= 6  # at most the one request per kill that met a dying worker, per walk
        expected = [str(i) for i in range(2999, -1, -1)]
        assert walked == expected  # in order, every document exactly once
        assert sorted(scrolled, key=int) == sorted(expected, key=int) and len(scrolled) == 3000
        http.request("DELETE", "/_pit", json={"id": pit})
        http.request("DELETE", "/_search/scroll", json={"scroll_id": scroll_id})
        _wait(lambda: _search_workers(http)["ready"] == 2, "the workers are replaced")
        workers = _search_workers(http)
        assert workers["lost"] == 6
        stats = http.get("/_nodes/stats/indices/search").json()
        node_stats = next(iter(stats["nodes"].values()))
        assert node_stats["indices"]["search"]["open_contexts"] == 0
        for worker in workers["workers"]:
            assert worker["walk_memory"]["lists"] == 0 and worker["pages_read_ahead"] == 0
            assert worker["snapshots"] <= 2  # at most the index's current snapshots
        count = http.post(f"/{index}/_count").json()["count"]
        assert count == 3000


def test_a_served_node_without_workers_runs_searches_in_its_own_process(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", "--search-workers", "0") as (url, _),
        web.Client(base_url=url, timeout=60) as http,
    ):
        _http_bulk(http, "plain", range(10))
        http.post("/plain/_refresh")
        assert http.post("/plain/_count").json()["count"] == 10
        for path in ("/_nodes/stats", "/_nodes/stats/search_workers"):
            response = http.get(path)
            assert response.status_code == 200
            assert "search_workers" not in next(iter(response.json()["nodes"].values()))
