"""A kept scroll's record written ahead (search/workers/parking.py asks, `scroll_pit.extend_record`
writes on the server process's records thread, workers/records_ahead.py): a client reading a
scroll on a kept connection is never handed back to the server process between the windows its
record names, and what the record names after each extension is every position its client may
hold: a kill -9 at any point loses no id, a scroll cleared or expired meanwhile writes nothing."""

from __future__ import annotations

import os
import random
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from concurrency import wait_for
from conftest import ClockedNode, bulk_index, running_server, serving_clocked
from raw_http import Conn

from leafsearch.search import execution
from leafsearch.search.context_records import ContextRecords
from leafsearch.search.execution import RECORDED_AHEAD, ScrollTask
from leafsearch.search.scroll_pit import extend_record
from leafsearch.search.workers.records_ahead import RecordsAhead
from tests import web
from tests.search.test_parked_scrolls import _ids, _next, _open, _to_the_end
from tests.search.test_parked_walks import _all_ready, _workers, churning_writers

DOCS = 1500
SIZE = 5  # 300 batches: the opening's record and 4 extensions of it


def _stats(url: str) -> tuple[int, int]:
    """Batches served on kept connections, and kept scrolls' records written ahead."""
    workers = _workers(url)
    return workers["parked_pages"], workers["scroll_records_ahead"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("records-ahead") / "data"
    with running_server(data, search_workers=2) as (url, _):
        with web.Client(base_url=url, timeout=60) as http:
            for index in ("written", "scrolled"):  # (written: with writers beside)
                bulk_index(http, index, {f"d{i}": {"n": i} for i in range(DOCS)})
        wait_for(lambda: _all_ready(url))
        yield url
    assert " ERROR " not in Path(f"{data}.log").read_text(errors="replace")


def test_a_kept_scroll_with_writers_beside_is_never_handed_back_between_windows(server: str) -> None:
    """A scroll of small batches over more windows than its opening's record names, read on a
    kept connection while two writers add, delete and refresh in its index: every document of its
    snapshot once (those of a scroll opened with it, read in one batch), and the server process
    answers only the first `_search/scroll` request (the opening's connection is not kept) and
    those after the last full batch, none at a window's end."""
    quiet = threading.Lock()  # held by a writer for a write and its refresh
    conn = Conn(server)
    try:
        with churning_writers(server, DOCS, quiet):
            with quiet:  # two scrolls of one snapshot
                scroll_id, first = _open(conn, "written", size=SIZE)
                whole = web.post(
                    f"{server}/written/_search?scroll=1m", json={"size": 10_000, "sort": ["_doc"]}, timeout=60
                ).json()
            before = _stats(server)
            rest, requests = _read(conn, scroll_id)
    finally:
        conn.close()
    ids = _ids(first) + rest
    total = orjson.loads(first)["hits"]["total"]["value"]
    snapshot = [hit["_id"] for hit in whole["hits"]["hits"]]
    assert len(ids) == len(set(ids)) == total == len(snapshot) and sorted(ids) == sorted(snapshot)
    after = _stats(server)
    assert after[0] - before[0] == requests - _in_server(total)
    assert after[1] - before[1] >= (total // SIZE - 1 - RECORDED_AHEAD) // RECORDED_AHEAD


def test_two_slices_read_at_once_on_kept_connections_are_never_handed_back(server: str) -> None:
    """The two slices of a scroll, each read on its connection by a thread of its own, each
    over more windows than its opening's record names: every document once, and the server
    process answers of each slice only the first `_search/scroll` request and those after its
    last full batch."""
    before = _stats(server)

    def read(slice_id: int) -> tuple[int, list[str], int]:
        conn = Conn(server)
        try:
            body = {"size": SIZE, "sort": ["_doc"], "slice": {"id": slice_id, "max": 2}}
            status, first = conn.ask(Conn.request("/scrolled/_search?scroll=1m", body))[0]
            assert status == 200, first
            rest, requests = _read(conn, orjson.loads(first)["_scroll_id"])
            return orjson.loads(first)["hits"]["total"]["value"], _ids(first) + rest, requests
        finally:
            conn.close()

    with ThreadPoolExecutor(2) as pool:
        reads = list(pool.map(read, range(2)))
    assert sorted(reads[0][1] + reads[1][1]) == sorted(f"d{i}" for i in range(DOCS))
    assert all(total == len(ids) and total // SIZE > 2 * RECORDED_AHEAD for total, ids, _ in reads)
    requests = sum(r for _, _, r in reads)
    assert _stats(server)[0] - before[0] == requests - sum(_in_server(t) for t, _, _ in reads)


def _read(conn: Conn, scroll_id: str) -> tuple[list[str], int]:
    """The ids of every batch from `scroll_id` on, asked on `conn`, and how many requests."""
    ids: list[str] = []
    requests = 0
    while True:
        status, body = conn.ask(_next(scroll_id))[0]
        assert status == 200, body
        requests += 1
        if not _ids(body):
            return ids, requests
        ids += _ids(body)
        scroll_id = orjson.loads(body)["_scroll_id"]


def _in_server(total: int) -> int:
    """The `_search/scroll` requests of a scroll of `total` documents its server process answers:
    the first (the opening's connection is not kept), a last partial batch, the empty one."""
    return 1 + (total % SIZE != 0) + 1


def test_a_kept_scroll_killed_at_random_points_answers_the_ids_its_client_holds(tmp_path: Path) -> None:
    """SIGKILL at random points of a stream read on a kept connection (around and past the
    windows' ends, records extended meanwhile): after each restart the id before the latest is
    answered with the batch the client last received, the latest with the next one, and the
    scroll read across the restarts is every document once, in order."""
    data = tmp_path / "data"
    rng = random.Random(26)
    ids: list[str] = []
    previous = latest = ""
    last: list[str] = []
    for kill in range(4):
        with running_server(data, search_workers=2) as (url, process):
            if kill == 0:
                with web.Client(base_url=url, timeout=60) as http:
                    bulk_index(http, "scrolled", {f"d{i}": {"n": i} for i in range(DOCS)})
            wait_for(lambda: _all_ready(url))  # noqa: B023 - (called here, in this round)
            conn = Conn(url)
            if kill == 0:
                latest, first = _open(conn, size=SIZE)
                ids, last = _ids(first), _ids(first)
            else:
                status, again = conn.ask(_next(previous))[0]  # a retry of the last batch received
                assert status == 200 and _ids(again) == last, again
            for _ in range(rng.randint(20, 70)):
                status, body = conn.ask(_next(latest))[0]
                assert status == 200, body
                previous, latest, last = latest, orjson.loads(body)["_scroll_id"], _ids(body)
                ids += last
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            conn.close()
    with running_server(data, search_workers=2) as (url, _):
        conn = Conn(url)
        status, again = conn.ask(_next(previous))[0]
        assert status == 200 and _ids(again) == last
        ids += _to_the_end(conn, latest)
        conn.close()
    assert ids == [f"d{i}" for i in range(DOCS)]


def test_scrolls_cleared_as_their_records_are_extended_stay_cleared_after_a_kill(tmp_path: Path) -> None:
    """Scrolls cleared on another connection right after the batch whose worker asked for the
    record's extension, or a few batches later (the extension queued, being written, or
    written): the kept connection's next request is the general path's 404, and after a
    SIGKILL and a restart every one of them is still missing (no record came back)."""
    data = tmp_path / "data"
    cleared = []
    with running_server(data, search_workers=2) as (url, process):
        with web.Client(base_url=url, timeout=60) as http:
            bulk_index(http, "scrolled", {f"d{i}": {"n": i} for i in range(DOCS)})
        wait_for(lambda: _all_ready(url))
        # The opening's record names batches 2..65; the worker asks once 32 are left after a
        # batch: after batch 33.
        for batches in range(31, 38):
            conn = Conn(url)
            scroll_id, _ = _open(conn, size=SIZE)
            for _ in range(batches - 1):
                status, body = conn.ask(_next(scroll_id))[0]
                assert status == 200, body
                scroll_id = orjson.loads(body)["_scroll_id"]
            response = web.request(
                "DELETE", f"{url}/_search/scroll", json={"scroll_id": scroll_id}, timeout=60
            )
            assert response.json() == {"succeeded": True, "num_freed": 1}
            status, body = conn.ask(_next(scroll_id))[0]
            assert status == 404, body
            assert orjson.loads(body)["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
            cleared.append(scroll_id)
            conn.close()
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    with running_server(data, search_workers=2) as (url, _):
        conn = Conn(url)
        for scroll_id in cleared:
            status, body = conn.ask(_next(scroll_id))[0]
            assert status == 404, body
        conn.close()


# ---- the record's extension itself (in-process, on a fake clock) ---------------------------


@pytest.fixture
def clocked_scroll(tmp_path: Path) -> Iterator[tuple[ClockedNode, dict[str, Any]]]:
    """An in-process node (no search workers) with 200 documents and a scroll of batches of 1
    opened on it (its record names batches 2..65), with a 2 s keep-alive."""
    with serving_clocked(tmp_path / "node") as clocked:
        bulk_index(clocked.http, "d", {f"d{i}": {"n": i} for i in range(200)})
        response = clocked.http.post("/d/_search?scroll=2s", json={"size": 1, "sort": ["_doc"]})
        assert response.status_code == 200, response.text
        yield clocked, response.json()


def _beyond(clocked: ClockedNode, scroll_id: str) -> tuple[int, list | None, list[list]]:
    """The last position the scroll's record names, where it ends, and the ends of the next
    batches as a worker serving it finds them (`ScrollTask.extend`)."""
    services = clocked.node.search_services
    ctx = services.contexts.get(scroll_id, "scroll")
    task = ScrollTask(
        ctx.targets, ctx.request, 0.0, False, ctx.ctx_id, ctx.public_id, ctx.cursor, ctx.total, False, False
    )
    _, _, _, ends = execution.run(services, replace(task, named=len(ctx.ahead), extend=True))
    return ctx.seq + len(ctx.ahead), ctx.ahead[-1], ends


def _recorded(clocked: ClockedNode) -> dict[str, dict[str, Any]]:
    return ContextRecords(clocked.node.path / "contexts").load()


def test_an_extended_record_names_the_positions_before_and_after(
    clocked_scroll: tuple[ClockedNode, dict[str, Any]],
) -> None:
    clocked, opened = clocked_scroll
    services = clocked.node.search_services
    scroll_id = opened["_scroll_id"]
    seq, end, ends = _beyond(clocked, scroll_id)
    assert seq == 1 + RECORDED_AHEAD and len(ends) == RECORDED_AHEAD
    (record,) = _recorded(clocked).values()
    named = record["ahead"]
    assert extend_record(services, scroll_id, seq - 1, end, ends) is None  # not where it ends
    assert extend_record(services, scroll_id, seq, end, ends + ends[:1]) is None  # more than a window
    answer = extend_record(services, scroll_id, seq, end, ends)
    assert answer is not None and answer.seq == seq and [e for e, _ in answer.ends] == ends
    (record,) = _recorded(clocked).values()
    assert record["seq"] == 1 and record["ahead"] == named + ends  # the window served, and the next
    # The ids answered are the scroll's own: the last one named is answered after a restart as
    # any position its record names (here, after the batches before it on the general path).
    http = clocked.http
    for _ in range(seq + len(ends) - 1):
        response = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id})
        assert response.status_code == 200, response.text
        scroll_id = response.json()["_scroll_id"]
    assert scroll_id == answer.ends[-1][1]


def test_an_extension_of_a_cleared_scroll_writes_nothing(
    clocked_scroll: tuple[ClockedNode, dict[str, Any]],
) -> None:
    clocked, opened = clocked_scroll
    seq, end, ends = _beyond(clocked, opened["_scroll_id"])
    response = clocked.http.request("DELETE", "/_search/scroll", json={"scroll_id": opened["_scroll_id"]})
    assert response.json()["num_freed"] == 1
    assert extend_record(clocked.node.search_services, opened["_scroll_id"], seq, end, ends) is None
    assert _recorded(clocked) == {}


def test_an_extension_of_an_expired_scroll_writes_nothing(
    clocked_scroll: tuple[ClockedNode, dict[str, Any]],
) -> None:
    clocked, opened = clocked_scroll
    seq, end, ends = _beyond(clocked, opened["_scroll_id"])
    clocked.clock.advance(3.0)  # past its 2 s keep-alive, the reaper not run yet
    assert extend_record(clocked.node.search_services, opened["_scroll_id"], seq, end, ends) is None
    assert _recorded(clocked) == {}


def test_one_extension_per_context_is_pending_at_most() -> None:
    """A second ask of a context whose extension is being written is answered None at once;
    another context's waits its turn; the records written are counted."""
    records = RecordsAhead()
    writing, go = threading.Event(), threading.Event()
    answers: dict[str, Any] = {}
    done = threading.Event()

    def blocked() -> str:
        writing.set()
        go.wait()
        return "first"

    def answer(name: str) -> Any:
        def called(result: Any) -> None:
            answers[name] = result
            if len(answers) == 3:
                done.set()

        return called

    try:
        records.ask(7, blocked, answer("first"))
        writing.wait()
        records.ask(7, lambda: "again", answer("again"))
        assert answers == {"again": None}  # answered at once, nothing run
        records.ask(8, lambda: "other", answer("other"))
        go.set()
        done.wait()
        assert answers == {"again": None, "first": "first", "other": "other"}
        assert records.written == 2
    finally:
        go.set()
        records.close()
