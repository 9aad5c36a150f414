"""A PIT walk's connection kept by the search worker that holds the walk between its pages
(search/workers/parking.py), through HTTP: a page served there is the page the general path
serves, anything but the walk's continuation is the general path's answer, and a connection
closed, a worker killed or a server stopped while one is parked leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from concurrency import wait_for
from conftest import bulk_index, running_server
from elasticsearch import Elasticsearch
from raw_http import Conn

from tests import web

_TOOK = re.compile(rb'"took":\d+')
DOCS = 1200
SIZE = 100


def _page(pit: str, after: list[Any] | None, size: int = SIZE) -> dict[str, Any]:
    body: dict[str, Any] = {"size": size, "pit": {"id": pit, "keep_alive": "1m"}, "sort": [{"n": "asc"}]}
    if after is not None:
        body["search_after"] = after
    return body


def _workers(url: str) -> dict[str, Any]:
    stats = web.get(f"{url}/_nodes/stats/search_workers", timeout=60).json()
    return next(iter(stats["nodes"].values()))["search_workers"]


def search_totals(url: str, index: str) -> tuple[int, int]:
    """The index's primaries' query and fetch totals."""
    search = web.get(f"{url}/{index}/_stats/search", timeout=60).json()["_all"]["primaries"]["search"]
    return search["query_total"], search["fetch_total"]


def kept_connections(url: str) -> int:
    """Connections the server's search workers keep (`parked_connections` of each)."""
    return sum(worker["parked_connections"] for worker in _workers(url)["workers"])


def _parked_pages(url: str) -> int:
    return _workers(url)["parked_pages"]


def _same(a: bytes, b: bytes) -> bool:
    return _TOOK.sub(b"", a) == _TOOK.sub(b"", b)


def _fresh(url: str, request: bytes) -> tuple[int, bytes]:
    conn = Conn(url)
    try:
        return conn.ask(request)[0]
    finally:
        conn.close()


@contextmanager
def serving(data: Path, index: str, docs: int) -> Iterator[str]:
    """A server with two search workers, both ready, holding `docs` documents in `index`; its
    log without an ERROR line once stopped."""
    with running_server(data, search_workers=2) as (url, _):
        with web.Client(base_url=url, timeout=60) as http:
            bulk_index(http, index, {f"d{i}": {"n": i} for i in range(docs)})
            wait_for(lambda: _all_ready(url))
        yield url
    assert " ERROR " not in Path(f"{data}.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("parked") / "data", "walked", DOCS) as url:
        yield url


def _all_ready(url: str) -> bool:
    workers = _workers(url)
    return workers["ready"] == workers["count"]


#: The PITs the running test opened (`_open_pit`), closed when it ends (`_pits_closed`).
_OPENED: list[tuple[str, str]] = []


@pytest.fixture(autouse=True)
def _pits_closed() -> Iterator[None]:
    """Each test's PITs are closed as it ends: one left to expire would free its context during a
    later test of the module's server, and a context freed sends the next page of every kept
    connection to the general path (`ParkOffer.security`), which the counts of pages kept see."""
    _OPENED.clear()
    yield
    for url, pit in _OPENED:
        with contextlib.suppress(httpx.TransportError):  # (a server the test stopped)
            web.request("DELETE", f"{url}/_pit", json={"id": pit}, timeout=60)


def _open_pit(url: str, index: str = "walked", keep_alive: str = "1m") -> str:
    response = web.post(f"{url}/{index}/_pit?keep_alive={keep_alive}", timeout=60)
    assert response.status_code == 200, response.text
    pit = response.json()["id"]
    _OPENED.append((url, pit))
    return pit


def _parked_walk(url: str, pit: str, pages: int = 3) -> tuple[Conn, list[Any]]:
    """A connection whose walk has gone `pages` pages (the later ones parked); its cursor."""
    conn, after = Conn(url), None
    for _ in range(pages):
        status, body = conn.ask(Conn.request("/_search", _page(pit, after)))[0]
        assert status == 200, body
        after = orjson.loads(body)["hits"]["hits"][-1]["sort"]
    return conn, after


@contextmanager
def churning_writers(url: str, docs: int, quiet: threading.Lock | None = None) -> Iterator[None]:
    """Two writers beside the block, each adding a document to index `written`, deleting one of
    its first `docs` (`d0`...) and refreshing, again and again, until the block ends (`quiet`: held by a
    writer for each write and its refresh); the first error a writer raised is raised then."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            with web.Client(base_url=url, timeout=60) as writer:
                i = docs
                while not stop.is_set():
                    with quiet or contextlib.nullcontext():
                        writer.put(f"/written/_doc/w{i}", json={"n": -i})
                        writer.delete(f"/written/_doc/d{i % docs}")
                        writer.post("/written/_refresh")
                    i += 1
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread
            failures.append(exc)

    writers = [threading.Thread(target=write) for _ in range(2)]
    for thread in writers:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in writers:
            thread.join()
    if failures:
        raise failures[0]


def test_a_walk_on_a_kept_connection_is_the_walk_of_fresh_connections_with_writers_beside(
    server: str,
) -> None:
    with web.Client(base_url=server, timeout=60) as http:
        bulk_index(http, "written", {f"d{i}": {"n": i} for i in range(DOCS)})
        pit = _open_pit(server, "written")
        before = _parked_pages(server)
        with churning_writers(server, DOCS):
            kept: list[bytes] = []
            fresh: list[bytes] = []
            conn, after, fresh_after = Conn(server), None, None
            while True:
                status, body = conn.ask(Conn.request("/_search", _page(pit, after)))[0]
                status_fresh, body_fresh = _fresh(server, Conn.request("/_search", _page(pit, fresh_after)))
                assert status == status_fresh == 200
                kept.append(body)
                fresh.append(body_fresh)
                hits = orjson.loads(body)["hits"]["hits"]
                if not hits:
                    break
                after = hits[-1]["sort"]
                fresh_after = orjson.loads(body_fresh)["hits"]["hits"][-1]["sort"]
            conn.close()
        assert all(_same(a, b) for a, b in zip(kept, fresh, strict=True))
        ids = [hit["_id"] for body in kept for hit in orjson.loads(body)["hits"]["hits"]]
        assert sorted(ids) == sorted(f"d{i}" for i in range(DOCS))  # the PIT's documents, once each
        # the first page parks the rest (their notes come before the connection goes back)
        wait_for(lambda: _parked_pages(server) - before >= len(kept) - 2)


def _variants(pit: str, after: list[Any], first: list[Any]) -> dict[str, list[bytes]]:
    continuation = Conn.request("/_search", _page(pit, after))
    return {
        "body": [Conn.request("/_search", _page(pit, after, size=SIZE + 1))],
        "query string": [Conn.request("/_search?filter_path=hits.hits._id", _page(pit, after))],
        "headers": [Conn.request("/_search", _page(pit, after), {"x-opaque-id": "another"})],
        "cursor": [Conn.request("/_search", _page(pit, first))],
        "path": [Conn.request("/walked/_search", _page(pit, after))],
        "pipelined": [continuation, continuation],
        "another request": [Conn.request("/walked/_count", {}, method="GET")],
    }


@pytest.mark.parametrize(
    "variant", ["body", "query string", "headers", "cursor", "path", "pipelined", "another request"]
)
def test_what_is_not_the_walks_continuation_is_answered_by_the_general_path(
    server: str, variant: str
) -> None:
    pit = _open_pit(server)
    first = orjson.loads(_fresh(server, Conn.request("/_search", _page(pit, None)))[1])["hits"]["hits"][-1][
        "sort"
    ]
    conn, after = _parked_walk(server, pit)
    requests = _variants(pit, after, first)[variant]
    expected = [_fresh(server, request) for request in requests]
    before = _parked_pages(server)
    answers = conn.ask(*requests)
    assert [status for status, _ in answers] == [status for status, _ in expected]
    assert all(_same(a, b) for (_, a), (_, b) in zip(answers, expected, strict=True))
    assert _parked_pages(server) == before  # none of them served by the worker
    # The connection goes on as any: the walk's continuation is served again.
    status, body = conn.ask(Conn.request("/_search", _page(pit, after)))[0]
    assert status == 200 and _same(body, _fresh(server, Conn.request("/_search", _page(pit, after)))[1])
    conn.close()


def test_a_pit_deleted_from_another_connection_ends_the_parked_walk_with_a_404(server: str) -> None:
    pit = _open_pit(server)
    conn, after = _parked_walk(server, pit)
    assert web.request("DELETE", f"{server}/_pit", json={"id": pit}, timeout=60).status_code == 200
    status, body = conn.ask(Conn.request("/_search", _page(pit, after)))[0]
    assert status == 404
    assert orjson.loads(body)["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
    conn.close()


def test_parked_pages_count_as_searches_and_keep_the_pit_alive(server: str) -> None:
    def totals() -> tuple[int, int]:  # (a page read ahead counts when it is served)
        return search_totals(server, "walked")

    # (a worker serves a page only if the PIT's keep-alive has 1 s left when it comes: a page
    # delayed 1 s past its second on a loaded machine is served by the server process instead)
    pit = _open_pit(server, keep_alive="5s")
    conn, after = Conn(server), None
    before, parked = totals(), _parked_pages(server)
    pages = 0
    for _ in range(7):  # 7 pages over ~7 s: the PIT lives on because each page extends it by 5 s
        body = _page(pit, after)
        body["pit"]["keep_alive"] = "5s"
        status, answer = conn.ask(Conn.request("/_search", body))[0]
        assert status == 200, answer
        after = orjson.loads(answer)["hits"]["hits"][-1]["sort"]
        pages += 1
        threading.Event().wait(1.0)  # time passing is what is tested: the keep-alive
    assert _parked_pages(server) - parked >= pages - 2
    wait_for(lambda: totals() == (before[0] + pages, before[1] + pages))
    conn.close()


def _fds(pids: list[int]) -> int:
    return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in pids)


def test_a_client_that_closes_a_parked_connection_leaves_nothing_in_the_worker(server: str) -> None:
    pids = [worker["pid"] for worker in _workers(server)["workers"]]
    baseline = _fds(pids)
    pit = _open_pit(server)
    conns = [_parked_walk(server, pit)[0] for _ in range(3)]
    assert kept_connections(server) >= 3
    assert _fds(pids) > baseline
    for conn in conns:
        conn.close()
    wait_for(lambda: _fds(pids) <= baseline)
    wait_for(lambda: kept_connections(server) == 0)


def test_a_killed_worker_closes_its_parked_connections_and_a_clean_stop_logs_no_error(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", search_workers=2) as (url, _):
        with web.Client(base_url=url, timeout=60) as http:
            bulk_index(http, "walked", {f"d{i}": {"n": i} for i in range(DOCS)})
        wait_for(lambda: _all_ready(url))
        pit = _open_pit(url)
        conn, after = _parked_walk(url, pit)
        holder = next(w["pid"] for w in _workers(url)["workers"] if w["parked_connections"])
        os.kill(holder, signal.SIGKILL)
        with pytest.raises((ConnectionError, OSError)):
            conn.ask(Conn.request("/_search", _page(pit, after)))
        conn.close()
        wait_for(lambda: _all_ready(url) and holder not in [w["pid"] for w in _workers(url)["workers"]])
        other, after = _parked_walk(url, pit)  # a new connection walks on
        assert any(w["parked_connections"] for w in _workers(url)["workers"])
        log = Path(f"{tmp_path / 'data'}.log")
    # Stopped with `other` parked: the client sees the connection closed, and nothing failed.
    with pytest.raises((ConnectionError, OSError)):
        other.ask(Conn.request("/_search", _page(pit, after)))
    other.close()
    assert " ERROR " not in log.read_text(errors="replace")


def test_a_walk_on_an_index_with_a_search_slow_log_is_not_kept(server: str) -> None:
    """The server process logs what it times: such a walk's pages all take the general path."""
    with web.Client(base_url=server, timeout=60) as http:
        bulk_index(http, "slowly", {f"d{i}": {"n": i} for i in range(600)})
        settings = {"index.search.slowlog.threshold.fetch.warn": "0ms"}
        assert http.put("/slowly/_settings", json=settings).status_code == 200
    pit = _open_pit(server, "slowly")
    before = _parked_pages(server)
    conn, _ = _parked_walk(server, pit, pages=4)
    conn.close()
    assert _parked_pages(server) == before


def test_the_official_client_and_concurrent_walkers_are_served_on_kept_connections(server: str) -> None:
    """Walks of the `elasticsearch` client (its requests' headers are the same bytes page after
    page) from several threads at once, each exactly the PIT's documents, most pages kept."""
    pit = _open_pit(server)
    before = _parked_pages(server)
    results: list[list[str]] = []
    failures: list[BaseException] = []

    def walk() -> None:
        try:
            with Elasticsearch(server, request_timeout=60) as es:
                seen: list[str] = []
                after = None
                while True:
                    page = es.search(
                        pit={"id": pit, "keep_alive": "1m"},
                        sort=[{"n": "asc"}],
                        size=SIZE,
                        search_after=after,
                    )
                    hits = page["hits"]["hits"]
                    if not hits:
                        break
                    seen += [hit["_id"] for hit in hits]
                    after = hits[-1]["sort"]
                results.append(seen)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)

    threads = [threading.Thread(target=walk) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    expected = [f"d{i}" for i in range(DOCS)]
    assert results == [expected] * 4
    pages = DOCS // SIZE + 1
    wait_for(lambda: _parked_pages(server) - before >= 4 * (pages - 2))
