"""Scroll batches and PIT pages written to the client's socket by the search worker that renders
them (search/socket_sink.py), through HTTP against the session's server (every walk in a worker).

A lent response must be the relayed one byte for byte (a request with `human=false` is relayed:
the server process rewrites such bodies), keep-alive and pipelined requests on one connection
must be answered in order and whole, and a client or a worker that goes away mid-body must leave
nothing behind and the node serving.
"""

from __future__ import annotations

import os
import re
import signal
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from concurrency import readers_beside_a_writer, wait_for
from conftest import bulk_index, running_server
from elasticsearch import Elasticsearch, helpers
from raw_http import Conn
from tls_helpers import certificate

from tests import web

NDJSON = "application/x-ndjson"
_TOOK = re.compile(rb'"took":\d+')
_DATE = re.compile(rb"date: [^\r]*\r\n")
#: A head's date, and a page's length where its `took` may differ (a digit more).
_DATE_LENGTH = re.compile(rb"(date|content-length): [^\r]*\r\n")


def _docs(n: int, pad: int = 40) -> dict[str, dict[str, Any]]:
    return {f"d{i}": {"n": i, "pad": "x" * pad} for i in range(n)}


def _workers(http: httpx.Client) -> dict[str, Any]:
    node = next(iter(http.get("/_nodes/stats/search_workers").json()["nodes"].values()))
    return node["search_workers"]


def _written(http: httpx.Client) -> int:
    """Responses a worker wrote to the client's socket: as a task's, or on a connection it kept
    after a PIT page (search/workers/parking.py)."""
    workers = _workers(http)
    return workers["socket_writes"] + workers["parked_pages"]


@pytest.fixture(autouse=True)
def _workers_ready(http: httpx.Client) -> None:
    """The session server's workers start after its first answer; until then pages render here."""
    wait_for(lambda: _all_ready(http))


def _all_ready(http: httpx.Client) -> bool:
    workers = _workers(http)
    return workers["ready"] == workers["count"]


def _scroll_ids(http: httpx.Client, index: str, size: int, **body: Any) -> tuple[str, list[str]]:
    response = http.post(f"/{index}/_search?scroll=1m", json={"size": size, "sort": ["_doc"], **body})
    assert response.status_code == 200, response.text
    return response.json()["_scroll_id"], [h["_id"] for h in response.json()["hits"]["hits"]]


# ---- walks through the official client ------------------------------------------------------


def test_scroll_walks_and_sliced_scrolls_give_every_document_once(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    bulk_index(http, index, _docs(2500))
    before = _written(http)
    seen = [hit["_id"] for hit in helpers.scan(es, index=index, size=300, query={"query": {"match_all": {}}})]
    assert sorted(seen) == sorted(_docs(2500))
    sliced: list[str] = []
    for i in range(2):
        sliced += [
            hit["_id"]
            for hit in helpers.scan(es, index=index, size=300, query={"slice": {"id": i, "max": 2}})
        ]
    assert sorted(sliced) == sorted(_docs(2500))
    # every batch (the first of each scroll too) was written by a worker: 9 + 5 + 5 with hits,
    # and each scroll's last, empty one
    assert _written(http) - before == 22


def test_pit_walks_with_search_after_give_every_document_once(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    bulk_index(http, index, _docs(2100))
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    before = _written(http)
    seen: list[int] = []
    after = None
    while True:
        page = es.search(
            pit={"id": pit, "keep_alive": "1m"}, size=500, sort=[{"n": "desc"}], search_after=after
        )
        hits = page["hits"]["hits"]
        if not hits:
            break
        seen += [hit["_source"]["n"] for hit in hits]
        after = hits[-1]["sort"]
    assert seen == list(range(2099, -1, -1))
    wait_for(lambda: _written(http) - before == 6)  # (kept pages' notes: with their hand-back)
    es.close_point_in_time(id=pit)


def test_walks_beside_a_writer_read_their_snapshot_exactly_once(
    server: str, es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    bulk_index(http, index, _docs(1500))
    stop = threading.Event()

    def write() -> None:
        with web.Client(base_url=server, timeout=60) as client:
            i = 0
            while not stop.is_set() or i < 3:
                lines = [
                    orjson.dumps({"index": {"_index": index, "_id": f"new{i}"}}),
                    orjson.dumps({"n": 10_000 + i}),
                    orjson.dumps({"delete": {"_index": index, "_id": f"d{i % 1500}"}}),
                ]
                response = client.post(
                    "/_bulk?refresh=true", content=b"\n".join(lines) + b"\n", headers={"content-type": NDJSON}
                )
                assert response.status_code == 200 and not response.json()["errors"]
                i += 1

    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    scroll_id, first = _scroll_ids(http, index, 200)

    def pit_walk() -> None:
        seen, after = [], None
        while True:
            page = es.search(pit={"id": pit}, size=200, sort=[{"n": "asc"}], search_after=after)
            hits = page["hits"]["hits"]
            if not hits:
                break
            seen += [hit["_id"] for hit in hits]
            after = hits[-1]["sort"]
        assert seen == [f"d{i}" for i in range(1500)]  # the PIT's snapshot, in `n` order

    def scroll_walk() -> None:
        seen, sid = list(first), scroll_id
        with web.Client(base_url=server, timeout=60) as client:
            while True:
                body = client.post("/_search/scroll", json={"scroll": "1m", "scroll_id": sid}).json()
                hits = body["hits"]["hits"]
                if not hits:
                    break
                seen += [hit["_id"] for hit in hits]
                sid = body["_scroll_id"]
        assert sorted(seen) == sorted(_docs(1500))

    readers_beside_a_writer(write, [pit_walk, scroll_walk], stop)
    es.close_point_in_time(id=pit)


# ---- the bytes ------------------------------------------------------------------------------


def test_a_lent_response_is_the_relayed_one_byte_for_byte(
    server: str, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    """A replayed scroll batch (its `took` as first answered) and a PIT page (`took` aside),
    written by the worker and relayed (`human=false`), head and body."""
    index = new_index(settings={"number_of_shards": 2})
    bulk_index(http, index, _docs(900))
    scroll_id, _ = _scroll_ids(
        http, index, 300, query={"range": {"n": {"gte": 10}}}, aggs={"m": {"max": {"field": "n"}}}
    )
    http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id})  # moves past it
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    page = {"pit": {"id": pit}, "size": 250, "sort": [{"n": "asc"}], "search_after": [100]}
    connection = Conn(server)
    try:
        before = _written(http)
        replay = {"scroll": "1m", "scroll_id": scroll_id}  # the id before the latest: a replay
        connection.send(Conn.request("/_search/scroll", replay))
        lent = connection.response_with_head()
        connection.send(Conn.request("/_search/scroll?human=false", replay))
        relayed = connection.response_with_head()
        connection.send(Conn.request("/_search", page))
        lent_page = connection.response_with_head()
        connection.send(Conn.request("/_search?human=false", page))
        relayed_page = connection.response_with_head()
        assert _written(http) - before == 2
    finally:
        connection.close()
    assert lent[1] == relayed[1] and len(orjson.loads(lent[1])["hits"]["hits"]) == 300
    assert _DATE.sub(b"", lent[0]) == _DATE.sub(b"", relayed[0])
    assert b"content-length: %d\r\n" % len(lent[1]) in lent[0]
    assert _TOOK.sub(b"", lent_page[1]) == _TOOK.sub(b"", relayed_page[1])
    assert _DATE_LENGTH.sub(b"", lent_page[0]) == _DATE_LENGTH.sub(b"", relayed_page[0])
    assert b"content-length: %d\r\n" % len(lent_page[1]) in lent_page[0]
    assert [h["sort"][0] for h in orjson.loads(lent_page[1])["hits"]["hits"]] == list(range(101, 351))


def test_renderings_the_server_rewrites_stay_relayed(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    bulk_index(http, index, _docs(50))
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    page = {"pit": {"id": pit}, "size": 5, "sort": [{"n": "asc"}]}
    before = _written(http)
    pretty = http.post("/_search?pretty", json=page)
    assert pretty.text.startswith('{\n  "pit_id" : ')
    filtered = http.post("/_search?filter_path=hits.hits._id", json=page).json()
    assert filtered == {"hits": {"hits": [{"_id": f"d{i}"} for i in range(5)]}}
    yaml = http.post("/_search?format=yaml", json=page)
    assert yaml.text.startswith("---\npit_id:")
    scroll_id, _ = _scroll_ids(http, index, 5)
    as_int = http.post(
        "/_search/scroll?rest_total_hits_as_int=true", json={"scroll": "1m", "scroll_id": scroll_id}
    )
    assert as_int.json()["hits"]["total"] == 50
    assert _written(http) - before == 1  # only the scroll's first batch


def test_an_error_before_the_first_byte_is_an_elasticsearch_error(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    bulk_index(http, index, _docs(20))
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    response = http.post("/_search", json={"pit": {"id": pit}, "sort": [{"missing": "asc"}]})
    assert response.status_code == 400
    assert (
        response.json()["error"]["root_cause"][0]["reason"]
        == "No mapping found for [missing] in order to sort on"
    )
    ok = http.post("/_search", json={"pit": {"id": pit}, "size": 3, "sort": [{"n": "asc"}]})
    assert [h["_id"] for h in ok.json()["hits"]["hits"]] == ["d0", "d1", "d2"]


# ---- one connection, several requests --------------------------------------------------------


def test_keep_alive_and_pipelined_requests_are_answered_in_order_and_whole(
    server: str, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    bulk_index(http, index, _docs(3000, pad=400))
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    scroll_id, first = _scroll_ids(http, index, 1000)
    connection = Conn(server)
    try:
        # in a row: each request once the one before was answered
        for after in (None, [999], [1999]):
            body: dict[str, Any] = {"pit": {"id": pit}, "size": 1000, "sort": [{"n": "asc"}]}
            if after is not None:
                body["search_after"] = after
            connection.send(Conn.request("/_search", body))
            hits = orjson.loads(connection.response_with_head()[1])["hits"]["hits"]
            start = 0 if after is None else after[0] + 1
            assert [h["_source"]["n"] for h in hits] == list(range(start, start + 1000))
        # pipelined: all written at once, each large page answered whole before the next
        connection.send(
            Conn.request("/_search/scroll", {"scroll": "1m", "scroll_id": scroll_id}),
            Conn.request("/_search", {"pit": {"id": pit}, "size": 1000, "sort": [{"n": "desc"}]}),
            Conn.request("/", method="GET"),
            Conn.request("/_search", {"pit": {"id": pit}, "size": 2, "sort": [{"n": "asc"}]}),
        )
        batch = orjson.loads(connection.response_with_head()[1])
        page = orjson.loads(connection.response_with_head()[1])
        root = orjson.loads(connection.response_with_head()[1])
        small = orjson.loads(connection.response_with_head()[1])
    finally:
        connection.close()
    assert len(batch["hits"]["hits"]) == 1000 and not {h["_id"] for h in batch["hits"]["hits"]} & set(first)
    assert [h["_source"]["n"] for h in page["hits"]["hits"]] == list(range(2999, 1999, -1))
    assert root["tagline"] == "You Know, for Search"
    assert [h["_id"] for h in small["hits"]["hits"]] == ["d0", "d1"]


# ---- clients and workers that go away ---------------------------------------------------------


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_client_gone_mid_body_leaves_no_descriptor_and_no_stuck_worker(
    server: str, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    """A page far larger than the sockets' buffers, to a client that reads a little and goes
    away: the worker stops writing (the write fails or the cancel reaches it) and closes its
    duplicate of the socket, again and again; the next request on a new connection works."""
    index = new_index()
    bulk_index(http, index, _docs(4000, pad=3000))
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    page = {"pit": {"id": pit}, "size": 4000, "sort": [{"n": "asc"}]}
    http.post("/_search?human=false", json={**page, "size": 10})  # the workers know the snapshot
    pids = [worker["pid"] for worker in _workers(http)["workers"]]
    baseline = {pid: _open_fds(pid) for pid in pids}
    before = _written(http)
    for attempt in range(4):
        connection = Conn(server, receive_buffer=4096)
        connection.send(Conn.request("/_search", page))
        head = b""
        while b"\r\n\r\n" not in head:
            head += connection.sock.recv(1024)
        assert head.startswith(b"HTTP/1.1 200 OK"), (attempt, head[:200])
        connection.close()
    wait_for(
        lambda: _workers(http)["workers"] and all(w["tasks_running"] == 0 for w in _workers(http)["workers"])
    )
    wait_for(lambda: all(_open_fds(pid) <= baseline[pid] for pid in pids))
    assert _written(http) - before == 4
    ok = http.post("/_search", json={**page, "size": 3})
    assert [h["_id"] for h in ok.json()["hits"]["hits"]] == ["d0", "d1", "d2"]


def test_clients_that_stop_reading_hold_no_thread_that_other_tasks_need(
    server: str, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    """A page written to a client's socket runs on a thread of its own, not one that reads the
    worker's tasks: more pages of one walk's worker than it has threads, each blocked on a client
    that does not read, and that worker still answers the walk's next page; the stalled ones end
    with their connections."""
    index = new_index()
    bulk_index(http, index, _docs(4000, pad=3000))
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    page = {"pit": {"id": pit}, "size": 4000, "sort": [{"n": "asc"}]}
    http.post("/_search?human=false", json={**page, "size": 10})  # the workers know the snapshot
    stalled = []
    for _ in range(8):  # more than a worker's threads (3): a walk's pages all go to its worker
        connection = Conn(server, receive_buffer=4096)
        connection.send(Conn.request("/_search", page))
        while b"\r\n\r\n" not in connection.pending:
            connection.read_more()
        stalled.append(connection)
    wait_for(lambda: sum(w["tasks_running"] for w in _workers(http)["workers"]) == 8)
    ok = http.post("/_search", json={**page, "size": 3, "search_after": [9]})
    assert [h["_id"] for h in ok.json()["hits"]["hits"]] == ["d10", "d11", "d12"]
    for connection in stalled:
        connection.close()
    wait_for(lambda: all(w["tasks_running"] == 0 for w in _workers(http)["workers"]))


def test_a_worker_killed_mid_body_cuts_the_response_and_the_next_request_works(
    tmp_path: Path,
) -> None:
    """A scroll batch larger than the sockets' buffers to a client that does not read: the worker
    blocks writing it; killed, the client sees the connection end before the Content-Length, and
    the scroll's previous id gives the same batch again (the context moved before the write)."""
    with running_server(tmp_path / "data") as (url, _), web.Client(base_url=url, timeout=60) as http:
        http.put("/_cluster/settings", json={"transient": {"search.workers.lone_walks_in_server": False}})
        bulk_index(http, "cut", _docs(3000, pad=3000))
        wait_for(lambda: _all_ready(http))
        scroll_id, first = _scroll_ids(http, "cut", 1000)
        connection = Conn(url, receive_buffer=4096)
        connection.send(Conn.request("/_search/scroll", {"scroll": "1m", "scroll_id": scroll_id}))
        while b"\r\n\r\n" not in connection.pending:
            connection.read_more()
        length = int(re.search(rb"content-length: (\d+)", connection.pending).group(1))  # type: ignore[union-attr]
        busy: list[int] = []

        def writing() -> bool:
            busy[:] = [w["pid"] for w in _workers(http)["workers"] if w["tasks_running"]]
            return bool(busy)

        wait_for(writing)
        os.kill(busy[0], signal.SIGKILL)
        received = len(connection.pending.partition(b"\r\n\r\n")[2])
        with pytest.raises(ConnectionError):
            while True:
                connection.read_more()
                received = len(connection.pending.partition(b"\r\n\r\n")[2])
        connection.close()
        assert received < length
        again = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id})
        assert again.status_code == 200, again.text
        ids = [h["_id"] for h in again.json()["hits"]["hits"]]
        assert len(ids) == 1000 and not set(ids) & set(first)
        assert http.get("/").status_code == 200


def test_connection_close_is_honoured_by_a_lent_response(
    server: str, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    bulk_index(http, index, _docs(30))
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    before = _written(http)
    connection = Conn(server)
    try:
        request = Conn.request("/_search", {"pit": {"id": pit}, "size": 4, "sort": ["n"]})
        connection.send(request.replace(b"host: localhost\r\n", b"host: localhost\r\nconnection: close\r\n"))
        head, body = connection.response_with_head()
        assert b"\r\nconnection: close\r\n" in head
        assert [h["_id"] for h in orjson.loads(body)["hits"]["hits"]] == ["d0", "d1", "d2", "d3"]
        with pytest.raises(ConnectionError):
            connection.read_more()  # the server closed it after the response
    finally:
        connection.close()
    assert _written(http) - before == 1


def test_over_tls_pages_are_relayed(tmp_path: Path) -> None:
    """No plain socket to lend: the HTTP server sends every page, and they are whole."""
    cert, key = certificate(tmp_path)
    with (
        running_server(tmp_path / "data", "--tls-cert", str(cert), "--tls-key", str(key)) as (url, _),
        web.Client(base_url=url, verify=ssl.create_default_context(cafile=cert), timeout=60) as https,
    ):
        https.put("/_cluster/settings", json={"transient": {"search.workers.lone_walks_in_server": False}})
        bulk_index(https, "tls", _docs(1500))
        wait_for(lambda: _all_ready(https))
        scroll_id, first = _scroll_ids(https, "tls", 1000)
        rest = https.post("/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id}).json()
        assert sorted(first + [h["_id"] for h in rest["hits"]["hits"]]) == sorted(_docs(1500))
        pit = https.post("/tls/_pit?keep_alive=1m").json()["id"]
        page = https.post("/_search", json={"pit": {"id": pit}, "size": 1500, "sort": ["n"]}).json()
        assert [h["_id"] for h in page["hits"]["hits"]] == [f"d{i}" for i in range(1500)]
        assert _written(https) == 0


def test_a_lent_response_carries_the_cors_headers_of_the_relayed_one(tmp_path: Path) -> None:
    settings = ("-E", "http.cors.enabled=true", "-E", "http.cors.allow-origin=https://app.example")
    with running_server(tmp_path / "data", *settings) as (url, _), web.Client(base_url=url) as http:
        http.put("/_cluster/settings", json={"transient": {"search.workers.lone_walks_in_server": False}})
        bulk_index(http, "cors", _docs(40))
        wait_for(lambda: _all_ready(http))
        pit = http.post("/cors/_pit?keep_alive=1m").json()["id"]
        page = {"pit": {"id": pit}, "size": 10, "sort": ["n"]}
        connection = Conn(url)
        heads = []
        try:
            for path in ("/_search", "/_search?human=false"):
                request = Conn.request(path, page)
                connection.send(request.replace(b"\r\n\r\n", b"\r\norigin: https://app.example\r\n\r\n", 1))
                heads.append(connection.response_with_head()[0])
        finally:
            connection.close()
        assert _written(http) == 1
        lent, relayed = (_DATE_LENGTH.sub(b"", head) for head in heads)
        assert lent == relayed and b"access-control-allow-origin: https://app.example\r\n" in lent
