"""No request leaves memory behind: refused and accepted heavy requests, repeated, against a real
server (its search workers included).

Two checks. The precise one runs the requests through an in-process server with the cycle
collector saving what it finds: a refusal used to keep its traceback's frames, and with them the
whole request, in a reference cycle (an error holding itself as its root cause, or held by a frame
it passed through), which the server's raised collector thresholds left alive for hundreds of
requests. The benchmark-style one repeats every kind of request against `leafsearch serve` and
reads the resident memory of all its processes: once the allocator has reached its high-water
mark (the first rounds), the second half of the run must not add more than a margin.
"""

from __future__ import annotations

import gc
import socket
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from conftest import running_server, serving_clocked

from bench.server import tree_memory_kb
from tests import web

INDEX = "memory"
MAPPING = {"properties": {"k": {"type": "keyword"}, "t": {"type": "text"}, "n": {"type": "long"}}}


JSON = {"content-type": "application/json"}


def _post(path: str, body: dict[str, Any]) -> Callable[[httpx.Client], httpx.Response]:
    data = orjson.dumps(body)
    return lambda http: http.post(path, content=data, headers=JSON)


def _words(count: int) -> str:
    return " ".join(f"w{i:06d}" for i in range(count))


def _terms(count: int) -> dict[str, Any]:
    return {"query": {"terms": {"k": [f"term{i}" for i in range(count)]}}}


SEARCH = f"/{INDEX}/_search"
QUERY_STRING = " OR ".join(["t:x"] * 3_000)  # longer than any text the node's caches keep
MAXES = {f"m{i}": {"max": {"field": "n"}} for i in range(5_000)}
#: Each kind of heavy request, and the status it gets.
REQUESTS: list[tuple[str, Callable[[httpx.Client], httpx.Response], int]] = [
    ("terms refused", _post(SEARCH, _terms(100_000)), 400),
    ("match refused", _post(SEARCH, {"query": {"match": {"t": _words(200_000)}}}), 400),
    ("terms accepted", _post(SEARCH, _terms(60_000)), 200),
    ("match accepted", _post(SEARCH, {"query": {"match": {"t": _words(4_000)}}}), 200),
    ("query_string", _post(SEARCH, {"query": {"query_string": {"query": QUERY_STRING}}}), 200),
    ("sort keys refused", _post(SEARCH, {"sort": [{"n": "asc"}] * 5_000}), 400),
    ("aggregations refused", _post(SEARCH, {"aggs": MAXES}), 400),
    ("fields refused", _post(f"/{INDEX}/_doc", {f"f{i}": i for i in range(20_000)}), 400),
    ("id refused", _post(f"/{INDEX}/_doc/x%00", {"t": _words(50_000)}), 400),
    ("deep page", _post(SEARCH, {"from": 9_000, "size": 1_000, "sort": [{"n": "desc"}]}), 200),
]


def _load(http: httpx.Client) -> None:
    assert http.put(f"/{INDEX}", json={"mappings": MAPPING}).status_code == 200
    lines = b"".join(
        b'{"index":{}}\n' + orjson.dumps({"k": f"v{i % 50}", "t": f"w{i:06d} hello", "n": i}) + b"\n"
        for i in range(500)
    )
    response = http.post(
        f"/{INDEX}/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 200 and not response.json()["errors"]


def test_requests_leave_no_reference_cycles_behind(tmp_path: Path) -> None:
    """Every request of `REQUESTS` is answered without leaving a frame or an error in a reference
    cycle (which would keep the request alive until the cycle collector runs)."""
    with serving_clocked(tmp_path / "data") as served:
        http = served.http
        _load(http)
        for _, send, status in REQUESTS:  # once first: imports and caches are not the requests'
            assert send(http).status_code == status
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            kept: dict[str, list[str]] = {}
            for name, send, status in REQUESTS:
                assert send(http).status_code == status
                gc.collect()
                found = [o for o in gc.garbage if isinstance(o, types.FrameType | BaseException)]
                if found:
                    kept[name] = sorted({_describe(o) for o in found})
                gc.garbage.clear()
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert kept == {}


def _describe(obj: object) -> str:
    if isinstance(obj, types.FrameType):
        return f"frame {obj.f_code.co_name} ({Path(obj.f_code.co_filename).name})"
    return f"{type(obj).__name__}: {str(obj)[:80]}"


#: Rounds of every request: the first third reaches the allocator's high-water mark. The leak this
#: guards against (about 10 MB per refused request) adds 150 MB over the last 15 rounds, three
#: times the margin.
ROUNDS = 30
#: What the last half of the rounds may add to the server's processes together, whatever the allocator keeps.
MARGIN_KB = 48 * 1024


def test_the_server_stops_growing_under_repeated_heavy_requests(tmp_path: Path) -> None:
    """Each round sends every request of `REQUESTS` (and a 64 KiB header), once run by the server
    process and once by a search worker (`search.workers.lone_requests_in_server` alternates); the
    resident memory of the server and its workers together is read after every round. Before the
    fix a refused `terms` query of 100,000 terms kept about 10 MB per request."""
    with (
        running_server(tmp_path / "data", "--search-workers", "2") as (url, process),
        web.Client(base_url=url, timeout=120) as http,
    ):
        _load(http)
        rss: list[int] = []
        for round_ in range(ROUNDS):
            lone = {"search.workers.lone_requests_in_server": round_ % 2 == 0}
            assert http.put("/_cluster/settings", json={"transient": lone}).status_code == 200
            for name, send, status in REQUESTS:
                assert send(http).status_code == status, name
            assert _big_header(url) == 400
            rss.append(tree_memory_kb(process.pid, "VmRSS"))
        settled, end = max(rss[ROUNDS // 3 : ROUNDS // 2]), max(rss[ROUNDS // 2 :])
        assert end - settled < MARGIN_KB, [kb // 1024 for kb in rss]


def _big_header(url: str) -> int:
    """The status of a request with a 64 KiB header (on its own connection, which the server
    closes after answering)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * (64 << 10) + b"\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])
