"""A scroll's connection kept by the search worker that wrote its batch (search/workers/parking.py),
through HTTP: the batches served there are the general path's, only batches whose position the
scroll's record names already, every other request on the connection is the general path's
answer, and the server process knows where the scroll is (a replay, another connection, a
restart) before it answers anything about it."""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from concurrency import wait_for
from conftest import bulk_index, running_server
from elasticsearch import Elasticsearch, helpers
from raw_http import Conn

from leafsearch.search.execution import RECORDED_AHEAD
from tests import web
from tests.search.test_parked_walks import (
    _all_ready,
    _parked_pages,
    _workers,
    churning_writers,
    kept_connections,
    search_totals,
    serving,
)

DOCS = 1200
SIZE = 100
_VARYING = re.compile(rb'"took":\d+|"_scroll_id":"[^"]*"')


def _open(conn: Conn, index: str = "scrolled", keep_alive: str = "1m", size: int = SIZE) -> tuple[str, bytes]:
    """A scroll opened on `conn` (sorted by `_doc`): its first id and batch."""
    request = Conn.request(f"/{index}/_search?scroll={keep_alive}", {"size": size, "sort": ["_doc"]})
    status, body = conn.ask(request)[0]
    assert status == 200, body
    return orjson.loads(body)["_scroll_id"], body


def _next(scroll_id: str, keep_alive: str = "1m", headers: dict[str, str] | None = None) -> bytes:
    """The official client's request for the next batch."""
    return Conn.request("/_search/scroll", {"scroll": keep_alive, "scroll_id": scroll_id}, headers)


def _ids(body: bytes) -> list[str]:
    return [hit["_id"] for hit in orjson.loads(body)["hits"]["hits"]]


def _to_the_end(conn: Conn, scroll_id: str) -> list[str]:
    """The ids of every batch from `scroll_id` on, asked on `conn` until one is empty."""
    ids: list[str] = []
    while True:
        status, body = conn.ask(_next(scroll_id))[0]
        assert status == 200, body
        if not _ids(body):
            return ids
        ids += _ids(body)
        scroll_id = orjson.loads(body)["_scroll_id"]


def _walk(conn: Conn, scroll_id: str, batches: int, keep_alive: str = "1m") -> tuple[str, bytes]:
    """`batches` batches asked on `conn`: the last id and batch."""
    body = b""
    for _ in range(batches):
        status, body = conn.ask(_next(scroll_id, keep_alive))[0]
        assert status == 200, body
        scroll_id = orjson.loads(body)["_scroll_id"]
    return scroll_id, body


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("parked-scrolls") / "data", "scrolled", DOCS) as url:
        yield url


def test_batches_on_a_kept_connection_are_a_fresh_connections_with_writers_beside(server: str) -> None:
    """Two scrolls of one snapshot (nothing written between their opening), one read on a kept
    connection, one on a new connection per batch, while documents are written and refreshed:
    the same batches, each document of the snapshot once, most batches served by the worker."""
    with web.Client(base_url=server, timeout=60) as http:
        bulk_index(http, "written", {f"d{i}": {"n": i} for i in range(DOCS)})
    quiet = threading.Lock()  # held by a writer for a write and its refresh
    kept_conn = Conn(server)
    try:
        with churning_writers(server, DOCS, quiet):
            with quiet:
                kept_id, first = _open(kept_conn, "written")
                opener = Conn(server)
                fresh_id, fresh_first = _open(opener, "written")
                opener.close()
            before = _parked_pages(server)
            kept, fresh = [first], [fresh_first]
            while orjson.loads(kept[-1])["hits"]["hits"]:
                status, body = kept_conn.ask(_next(kept_id))[0]
                conn = Conn(server)
                status_fresh, body_fresh = conn.ask(_next(fresh_id))[0]
                conn.close()
                assert status == status_fresh == 200, (body, body_fresh)
                kept.append(body)
                fresh.append(body_fresh)
                kept_id, fresh_id = orjson.loads(body)["_scroll_id"], orjson.loads(body_fresh)["_scroll_id"]
    finally:
        kept_conn.close()
    assert [_VARYING.sub(b"", a) for a in kept] == [_VARYING.sub(b"", b) for b in fresh]
    ids = [i for body in kept for i in _ids(body)]
    assert len(ids) == len(set(ids)) == orjson.loads(first)["hits"]["total"]["value"]
    # Served by the server process: the first `_search/scroll` request (it parks), the one after
    # each window its record names (1 + `RECORDED_AHEAD` batches), and the empty one after the last.
    assert _parked_pages(server) - before >= len(kept) - 1 - 3


def test_the_official_clients_scans_from_several_threads_are_served_on_kept_connections(server: str) -> None:
    before = _parked_pages(server)
    results: list[list[str]] = []
    failures: list[BaseException] = []

    def scan() -> None:
        try:
            with Elasticsearch(server, request_timeout=60) as es:
                hits = helpers.scan(es, index="scrolled", size=SIZE, scroll="1m")
                results.append(sorted(hit["_id"] for hit in hits))
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert results == [sorted(f"d{i}" for i in range(DOCS))] * 4
    assert _parked_pages(server) - before >= 4 * (DOCS // SIZE - 3)


def test_the_previous_id_asked_again_is_the_same_bytes_as_the_batch_the_worker_wrote(server: str) -> None:
    conn = Conn(server)
    scroll_id, _ = _open(conn)
    previous, _ = _walk(conn, scroll_id, 2)
    before = _parked_pages(server)
    status, served = conn.ask(_next(previous))[0]  # served by the worker
    assert status == 200 and _parked_pages(server) == before + 1
    for asker in (conn, Conn(server)):  # replayed on the kept connection, and on another
        status, again = asker.ask(_next(previous))[0]
        assert status == 200 and again == served
    conn.close()


def _variants(scroll_id: str, other_id: str) -> dict[str, list[bytes]]:
    return {
        "another scroll's id": [_next(other_id)],
        "keep-alive": [_next(scroll_id, keep_alive="2m")],
        "headers": [_next(scroll_id, headers={"x-opaque-id": "another"})],
        "query string": [
            Conn.request(
                "/_search/scroll?filter_path=hits.hits._id", {"scroll": "1m", "scroll_id": scroll_id}
            )
        ],
        "path": [Conn.request(f"/_search/scroll/{scroll_id}?scroll=1m")],
        "another request": [Conn.request("/scrolled/_count", {}, method="GET")],
    }


@pytest.mark.parametrize(
    "variant", ["another scroll's id", "keep-alive", "headers", "query string", "path", "another request"]
)
def test_what_is_not_the_scrolls_continuation_is_answered_by_the_general_path(
    server: str, variant: str
) -> None:
    conn, other = Conn(server), Conn(server)
    scroll_id, _ = _open(conn)
    scroll_id, _ = _walk(conn, scroll_id, 2)  # parked
    other_id, _ = _open(other)
    other.close()
    request = _variants(scroll_id, other_id)[variant]
    before = _parked_pages(server)
    status, body = conn.ask(*request)[0]
    assert status == 200, body
    assert _parked_pages(server) == before  # answered by the server process
    if variant == "another scroll's id":
        assert _ids(body) == [f"d{i}" for i in range(SIZE, 2 * SIZE)]  # that scroll's second batch
        next_id = scroll_id
    elif variant == "another request":
        assert orjson.loads(body)["count"] == DOCS
        next_id = scroll_id
    elif variant == "query string":  # (no id in the filtered answer: the same batch again names it)
        assert [hit["_id"] for hit in orjson.loads(body)["hits"]["hits"]] == [
            f"d{i}" for i in range(300, 400)
        ]
        status, again = conn.ask(_next(scroll_id))[0]
        assert status == 200 and _ids(again) == [f"d{i}" for i in range(300, 400)]
        next_id = orjson.loads(again)["_scroll_id"]
    else:
        assert _ids(body) == [f"d{i}" for i in range(300, 400)]
        next_id = orjson.loads(body)["_scroll_id"]
    # The connection goes on as any, and the scroll with it.
    rest = _to_the_end(conn, next_id)
    assert rest[-1] == f"d{DOCS - 1}" and len(rest) == len(set(rest))
    conn.close()


def test_pipelined_continuations_are_the_batch_and_its_replay(server: str) -> None:
    conn = Conn(server)
    scroll_id, _ = _open(conn)
    scroll_id, _ = _walk(conn, scroll_id, 2)
    before = _parked_pages(server)
    (status, first), (status_again, again) = conn.ask(_next(scroll_id), _next(scroll_id))
    assert status == status_again == 200
    assert first == again and _ids(first) == [f"d{i}" for i in range(3 * SIZE, 4 * SIZE)]
    assert _parked_pages(server) == before
    conn.close()


def test_a_scroll_moved_on_another_connection_is_not_answered_from_the_kept_position(server: str) -> None:
    conn = Conn(server)
    scroll_id, _ = _open(conn)
    scroll_id, _ = _walk(conn, scroll_id, 2)  # parked, knowing batch 3's id
    elsewhere = Conn(server)
    moved_id, _ = _walk(elsewhere, scroll_id, 2)  # batches 3 and 4 on the general path
    elsewhere.close()
    before = _parked_pages(server)
    status, body = conn.ask(_next(scroll_id))[0]
    assert status == 404, body  # two ids back: as the general path answers it
    assert orjson.loads(body)["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
    status, body = conn.ask(_next(moved_id))[0]
    assert status == 200 and _ids(body) == [f"d{i}" for i in range(5 * SIZE, 6 * SIZE)]
    assert _parked_pages(server) == before
    conn.close()


def test_the_next_id_asked_on_another_connection_finds_the_scroll_moved_by_the_worker(server: str) -> None:
    """Each batch the worker wrote is known to the server process before the client holds its
    id: a client that alternates connections reads the scroll once, in order."""
    kept = Conn(server)
    scroll_id, first = _open(kept)
    ids = _ids(first)
    for batch in range(DOCS // SIZE):
        asker = kept if batch % 3 else Conn(server)
        status, body = asker.ask(_next(scroll_id))[0]
        assert status == 200, body
        ids += _ids(body)
        scroll_id = orjson.loads(body)["_scroll_id"]
        if asker is not kept:
            asker.close()
    assert ids == [f"d{i}" for i in range(DOCS)]
    kept.close()


def test_an_old_id_asked_elsewhere_right_after_kept_batches_is_refused_as_moved_past(server: str) -> None:
    """The batches a worker served on a kept connection are told to the server process together,
    a little later: a request of the scroll on another connection waits for them first, so an id
    two batches back is refused there as it is after any batch (only the latest two answered)."""
    opened = Conn(server)
    fresh = Conn(server)  # connected before, so that its request follows the batches at once
    ids = [_open(opened)[0]]
    for _ in range(4):
        status, body = opened.ask(_next(ids[-1]))[0]
        assert status == 200, body
        ids.append(orjson.loads(body)["_scroll_id"])
    status, body = fresh.ask(_next(ids[-3]))[0]
    assert status == 404, body
    assert "moved past this batch" in orjson.loads(body)["error"]["root_cause"][0]["reason"]
    status, body = fresh.ask(_next(ids[-1]))[0]  # the latest: the scroll goes on there
    assert status == 200 and _ids(body) == [f"d{i}" for i in range(5 * SIZE, 6 * SIZE)]
    opened.close()
    fresh.close()


def test_a_scroll_cleared_on_another_connection_ends_the_kept_one_with_a_404(server: str) -> None:
    conn = Conn(server)
    scroll_id, _ = _open(conn)
    scroll_id, _ = _walk(conn, scroll_id, 2)
    cleared = web.request("DELETE", f"{server}/_search/scroll", json={"scroll_id": scroll_id}, timeout=60)
    assert cleared.json() == {"succeeded": True, "num_freed": 1}
    status, body = conn.ask(_next(scroll_id))[0]
    assert status == 404
    assert orjson.loads(body)["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
    conn.close()


def test_kept_batches_count_as_searches_and_keep_the_scroll_alive(server: str) -> None:
    def totals() -> tuple[int, int]:
        return search_totals(server, "scrolled")

    # A worker serves a kept batch only while its scroll's keep-alive has more than
    # `_KEEP_ALIVE_MARGIN` (1 s) left: with 3 s, a batch more than 2 s after the last (a 1 s wait
    # and a loaded machine's second) went to the server process and was not counted here.
    conn = Conn(server)
    scroll_id, _ = _open(conn, keep_alive="5s")
    scroll_id, _ = _walk(conn, scroll_id, 1, keep_alive="5s")
    before, parked = totals(), _parked_pages(server)
    batches = 8
    for _ in range(batches):  # 8 batches over ~8 s: alive because each extends it by 5 s
        threading.Event().wait(1.0)  # time passing is what is tested: the keep-alive
        status, body = conn.ask(_next(scroll_id, keep_alive="5s"))[0]
        assert status == 200, body
        scroll_id = orjson.loads(body)["_scroll_id"]
    assert _parked_pages(server) - parked == batches
    wait_for(lambda: totals() == (before[0] + batches, before[1] + batches))
    conn.close()


def test_a_scroll_restored_after_a_kill_answers_the_ids_its_client_holds(tmp_path: Path) -> None:
    """Killed (SIGKILL) after 70 batches of 10, most served on a kept connection, past the 65 its
    opening's record named (the general path wrote the next record): the restarted server
    answers the id before the latest with the batch the client last received, and the latest
    with the next one."""
    data = tmp_path / "data"
    with running_server(data, search_workers=2) as (url, process):
        with web.Client(base_url=url, timeout=60) as http:
            bulk_index(http, "scrolled", {f"d{i}": {"n": i} for i in range(DOCS)})
        wait_for(lambda: _all_ready(url))
        conn = Conn(url)
        scroll_id, _ = _open(conn, size=10)
        assert RECORDED_AHEAD + 1 < 70
        previous, _ = _walk(conn, scroll_id, 69)
        latest, last = _walk(conn, previous, 1)
        assert _ids(last) == [f"d{i}" for i in range(700, 710)]
        assert _parked_pages(url) >= 70 - 3
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        conn.close()
    with running_server(data, search_workers=2) as (url, _):
        conn = Conn(url)
        status, again = conn.ask(_next(previous))[0]  # a retry of the last batch received
        assert status == 200 and _ids(again) == _ids(last)
        status, body = conn.ask(_next(latest))[0]
        assert status == 200, body
        assert _ids(body) == [f"d{i}" for i in range(710, 720)]
        conn.close()


def test_a_client_that_closes_a_kept_scroll_connection_leaves_nothing_in_the_worker(server: str) -> None:
    conns = []
    for _ in range(3):
        conn = Conn(server)
        scroll_id, _ = _open(conn)
        _walk(conn, scroll_id, 2)
        conns.append(conn)
    assert kept_connections(server) >= 3
    for conn in conns:
        conn.close()
    wait_for(lambda: kept_connections(server) == 0)


def test_a_sliced_scrolls_slices_are_kept_by_different_workers(server: str) -> None:
    """Two slices read at once, each on its connection: each is kept by a worker of its own
    while the workers are idle, and together they are every document once."""
    conns = [Conn(server), Conn(server)]
    ids: list[str] = []
    scroll_ids = []
    for slice_id, conn in enumerate(conns):
        body = {"size": SIZE, "sort": ["_doc"], "slice": {"id": slice_id, "max": 2}}
        status, first = conn.ask(Conn.request("/scrolled/_search?scroll=1m", body))[0]
        assert status == 200, first
        ids += _ids(first)
        scroll_ids.append(orjson.loads(first)["_scroll_id"])
    before, held = _parked_pages(server), [w["parked_connections"] for w in _workers(server)["workers"]]
    batches = 0
    while any(scroll_ids):
        for i, conn in enumerate(conns):
            if not scroll_ids[i]:
                continue
            status, body = conn.ask(_next(scroll_ids[i]))[0]
            assert status == 200, body
            ids += _ids(body)
            batches += 1
            scroll_ids[i] = orjson.loads(body)["_scroll_id"] if _ids(body) else ""
            if batches == 4:  # both slices past their first batch: each kept by its own worker
                now = [w["parked_connections"] for w in _workers(server)["workers"]]
                assert [a - b for a, b in zip(now, held, strict=True)] == [1, 1]
    assert sorted(ids) == sorted(f"d{i}" for i in range(DOCS))
    assert _parked_pages(server) - before >= batches - 6
    for conn in conns:
        conn.close()


@pytest.mark.parametrize(("size", "batches"), [(SIZE, 3), (5, 100)])
def test_a_scroll_whose_keeping_worker_is_killed_goes_on_from_the_id_its_client_holds(
    tmp_path: Path, size: int, batches: int
) -> None:
    """The worker that kept the scroll's connection killed right after a batch (its batches are
    told to the server process together, a little after they are written): a new connection
    asking for the id the client holds reads the rest of the scroll, every document once. Also
    past the batches its opening's record named (102 of 5): served on the record the worker had
    extended (`scroll_records_ahead`)."""
    with running_server(tmp_path / "data", search_workers=2) as (url, _):
        with web.Client(base_url=url, timeout=60) as http:
            bulk_index(http, "scrolled", {f"d{i}": {"n": i} for i in range(DOCS)})
        wait_for(lambda: _all_ready(url))
        conn = Conn(url)
        scroll_id, first = _open(conn, size=size)
        scroll_id, body = _walk(conn, scroll_id, 2)  # kept by now
        holder = next(w["pid"] for w in _workers(url)["workers"] if w["parked_connections"])
        ids = _ids(first) + [f"d{i}" for i in range(size, 2 * size)] + _ids(body)
        for _ in range(batches):  # served by the worker, asked as fast as the client can
            status, body = conn.ask(_next(scroll_id))[0]
            assert status == 200, body
            ids += _ids(body)
            scroll_id = orjson.loads(body)["_scroll_id"]
        assert (_workers(url)["scroll_records_ahead"] > 0) == (3 + batches > 1 + RECORDED_AHEAD)
        os.kill(holder, signal.SIGKILL)
        conn.close()
        fresh = Conn(url)
        ids += _to_the_end(fresh, scroll_id)
        fresh.close()
    assert ids == [f"d{i}" for i in range(DOCS)]
