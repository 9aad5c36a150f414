"""Background merges run beside searches and writes: an index that is never quiet still merges.

A node used to hold merges back while an index was being searched or written (unless a shard
reached 40 segments), so an index under steady traffic searched two dozen small segments on
every query. Merges now run in the merge worker at a lower CPU priority whatever the traffic
(merge_worker.py); these tests keep a reader and a writer busy the whole time.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.indices import admin
from leafsearch.node.node import Node
from tests import web
from tests.conftest import error_of
from tests.inprocess import count, search

ROUNDS = 24  # one segment per round: all in the policy's smallest tier, which merges by 10
REFRESHES = 5  # by the writer, during the traffic


def _segments(http: httpx.Client, index: str) -> int:
    rows = http.get(f"/_cat/segments/{index}?format=json").json()
    return len(rows)


def _merges(http: httpx.Client, index: str) -> dict[str, Any]:
    return http.get(f"/{index}/_stats/merge").json()["indices"][index]["primaries"]["merges"]


def _bulk(http: httpx.Client, index: str, ids: range, refresh: bool) -> None:
    lines = b"".join(
        b'{"index":{"_id":"%d"}}\n%s\n' % (i, orjson.dumps({"n": i, "tag": f"t{i % 7}"})) for i in ids
    )
    response = http.post(
        f"/{index}/_bulk" + ("?refresh=true" if refresh else ""),
        content=lines,
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and response.json()["errors"] is False, response.text


def test_an_index_searched_and_written_without_pause_still_merges(http: httpx.Client) -> None:
    index = "merges-beside-traffic"
    created = http.put(
        f"/{index}",
        json={
            "settings": {"number_of_shards": 1, "refresh_interval": "-1"},
            "mappings": {"properties": {"n": {"type": "long"}, "tag": {"type": "keyword"}}},
        },
    )
    assert created.status_code == 200, error_of(created)
    for r in range(ROUNDS):
        _bulk(http, index, range(r * 50, r * 50 + 50), refresh=True)
    published = ROUNDS * 50
    stop = threading.Event()
    failures: list[BaseException] = []
    written = [published]

    def reader() -> None:
        """Every snapshot a search sees holds every document published before the traffic began
        (the writer's are not refreshed), whatever merge is installed meanwhile."""
        try:
            with web.Client(base_url=str(http.base_url), timeout=60) as own:
                while not stop.is_set():
                    body: dict[str, Any] = {
                        "size": 5,
                        "query": {"range": {"n": {"lt": published}}},
                        "sort": [{"n": "desc"}],
                    }
                    page = own.post(f"/{index}/_search", json=body).json()
                    assert page["hits"]["total"] == {"value": published, "relation": "eq"}, page
                    assert [hit["_id"] for hit in page["hits"]["hits"]] == [
                        str(n) for n in range(published - 1, published - 6, -1)
                    ]
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            failures.append(exc)

    def writer() -> None:
        """Writes without pause; a few of its bulks refresh, so the readers' snapshots change
        (a merge is searched from the next refresh on) while the segments stay well below the
        40 at which merges used to start under traffic."""
        try:
            with web.Client(base_url=str(http.base_url), timeout=60) as own:
                rounds = 0
                while not stop.is_set():
                    refresh = rounds % 30 == 29 and rounds < 30 * REFRESHES
                    _bulk(own, index, range(written[0], written[0] + 20), refresh=refresh)
                    written[0] += 20
                    rounds += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            failures.append(exc)

    threads = [
        threading.Thread(target=reader),
        threading.Thread(target=reader),
        threading.Thread(target=writer),
    ]
    for thread in threads:
        thread.start()
    try:
        # The background merges are awaited by watching what a client sees (no hook into the node).
        deadline = time.monotonic() + 120
        while _merges(http, index)["total"] < 2 and time.monotonic() < deadline and not failures:
            stop.wait(0.1)
        merges = _merges(http, index)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not failures, failures
    assert merges["total"] >= 2, f"merges did not run while the index was searched and written: {merges}"
    # Nothing written is lost across the merges installed beside the writer, and the snapshot
    # searched from now on holds the merged segments.
    assert http.post(f"/{index}/_refresh").status_code == 200
    assert http.get(f"/{index}/_count").json()["count"] == written[0]
    assert _segments(http, index) < ROUNDS
    assert http.delete(f"/{index}").status_code == 200


def test_a_merge_worker_that_died_is_replaced_by_the_next_merge(tmp_path: Path) -> None:
    """A merge worker killed (the OOM killer, an operator) fails the merge it was running; the
    next merge starts a new worker instead of every later merge failing on the broken pool."""
    with Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "m", {"settings": {"number_of_shards": 1}})
        shard = node.indices["m"].shards[0]

        def segments(start: int) -> None:
            for r in range(start, start + 10):
                body = b"".join(
                    b'{"index":{"_id":"%d"}}\n{"n":%d}\n' % (i, i) for i in range(r * 10, r * 10 + 10)
                )
                node.bulk(body, index="m", refresh="true")

        segments(0)
        assert shard.maybe_merge()
        (worker,) = node.shard_services.merges._executor()._processes  # type: ignore[attr-defined]
        os.kill(worker, signal.SIGKILL)
        segments(10)
        before = len(shard.segments)
        with pytest.raises(BrokenProcessPool):
            shard.maybe_merge()
        assert len(shard.segments) == before  # the failed merge changed nothing
        assert shard.maybe_merge()
        assert len(shard.segments) < before
        assert count(node, "m", None)["count"] == 200


def test_segments_whose_documents_were_all_deleted_merge_into_nothing(tmp_path: Path) -> None:
    """No empty segment is left behind: every search would skip it and the policy merge it again."""
    with Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "m", {"settings": {"number_of_shards": 1}})
        shard = node.indices["m"].shards[0]
        for r in range(12):
            body = b"".join(
                b'{"index":{"_id":"%d"}}\n{"n":%d}\n' % (i, i) for i in range(r * 10, r * 10 + 10)
            )
            node.bulk(body, index="m", refresh="true")
        kept = b'{"index":{"_id":"kept"}}\n{"n":-1}\n'
        node.bulk(kept, index="m", refresh="true")
        deletes = b"".join(b'{"delete":{"_id":"%d"}}\n' % i for i in range(120))
        node.bulk(deletes, index="m", refresh="true")
        while shard.maybe_merge():
            pass
        assert [s.max_doc for s in shard.segments] == [1]
        node.indices["m"].refresh()
        assert count(node, "m", None)["count"] == 1
    with Node(tmp_path / "node", background=False) as reopened:  # the commit names no empty segment
        assert [s.max_doc for s in reopened.indices["m"].shards[0].segments] == [1]
        assert search(reopened, "m", {})["hits"]["hits"][0]["_id"] == "kept"
