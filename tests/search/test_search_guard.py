"""No request can stall the others or hold the node's memory: search timeouts, client disconnects,
the request circuit breaker, the open-PIT limit, memory given back, and the merge worker ending
with its server.

Timeouts and disconnects are made deterministic with the node's clock: the tests give a Node a
clock that advances (or waits) exactly when the search checks it, and serve it over HTTP with the
application and server `leafsearch serve` runs.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn

from leafsearch.errors import TaskCancelled
from leafsearch.node.node import Node
from leafsearch.rest.app import create_app
from tests import web
from tests.conftest import error_of, free_port, running_server

SEGMENTS = 5
DOCS_PER_SEGMENT = 4


class SteppingClock:
    """A clock that advances one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += 1.0
        return self.now


def _segments(client: httpx.Client, index: str) -> None:
    """SEGMENTS segments of DOCS_PER_SEGMENT documents each (one refresh per segment)."""
    mappings = {"properties": {"n": {"type": "long"}}}
    assert client.put(f"/{index}", json={"mappings": mappings}).status_code == 200
    for s in range(SEGMENTS):
        lines = b"".join(
            b'{"index":{}}\n' + orjson.dumps({"n": s * DOCS_PER_SEGMENT + d}) + b"\n"
            for d in range(DOCS_PER_SEGMENT)
        )
        response = client.post(
            f"/{index}/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
        )
        assert response.status_code == 200 and not response.json()["errors"]


@contextmanager
def serving(tmp_path: Path, clock: Callable[[], float]) -> Iterator[tuple[httpx.Client, Node]]:
    """A real HTTP server (uvicorn on a socket, in a thread) on a node with `clock`, holding the
    index `logs` of SEGMENTS segments."""
    node = Node(tmp_path / "node", background=False, clock=clock)
    server = uvicorn.Server(
        uvicorn.Config(create_app(node), port=free_port(), lifespan="off", log_level="warning", workers=1)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(600):
            if server.started:
                break
            thread.join(0.05)
        with web.Client(base_url=f"http://127.0.0.1:{server.config.port}", timeout=30) as client:
            _segments(client, "logs")
            yield client, node
    finally:
        server.should_exit = True
        thread.join(30)
        node.close()


@pytest.fixture
def stepping(tmp_path: Path) -> Iterator[tuple[httpx.Client, SteppingClock]]:
    clock = SteppingClock()
    with serving(tmp_path, clock) as (client, _):
        yield client, clock


# ---- timeout ---------------------------------------------------------------------------------


def test_a_search_past_its_timeout_answers_with_the_segments_it_searched(
    stepping: tuple[httpx.Client, SteppingClock],
) -> None:
    client, _ = stepping
    # The deadline is 1 s + 4.5 s; each segment reads the clock before its query and before its
    # aggregations (2 s, 3 s; 4 s, 5 s), the third segment reads 6 s: two segments were searched.
    body = client.post(
        "/logs/_search", json={"timeout": "4500ms", "size": 100, "aggs": {"top": {"max": {"field": "n"}}}}
    ).json()
    assert body["timed_out"] is True
    assert body["hits"]["total"] == {"value": 2 * DOCS_PER_SEGMENT, "relation": "eq"}
    assert len(body["hits"]["hits"]) == 2 * DOCS_PER_SEGMENT
    assert body["aggregations"]["top"]["value"] == 2 * DOCS_PER_SEGMENT - 1
    assert body["_shards"]["failed"] == 0


def test_the_timeout_parameter_and_the_cluster_default_apply_and_no_timeout_searches_all(
    stepping: tuple[httpx.Client, SteppingClock],
) -> None:
    client, _ = stepping
    everything = SEGMENTS * DOCS_PER_SEGMENT
    timed = client.get("/logs/_search", params={"timeout": "1500ms"}).json()
    assert timed["timed_out"] is True and timed["hits"]["total"]["value"] == DOCS_PER_SEGMENT
    settings = {"transient": {"search.default_search_timeout": "1500ms"}}
    assert client.put("/_cluster/settings", json=settings).status_code == 200
    by_default = client.get("/logs/_search").json()
    assert by_default["timed_out"] is True and by_default["hits"]["total"]["value"] == DOCS_PER_SEGMENT
    # A request's own timeout wins over the default; without one, every segment is searched.
    own = client.post("/logs/_search", json={"timeout": "-1"}).json()
    assert own["timed_out"] is False and own["hits"]["total"]["value"] == everything


def test_a_timed_out_search_is_not_cached_for_the_next_one(
    stepping: tuple[httpx.Client, SteppingClock],
) -> None:
    client, _ = stepping
    query = {"query": {"range": {"n": {"gte": 0}}}, "sort": ["n"]}
    assert client.post("/logs/_search", json={**query, "timeout": "1500ms"}).json()["timed_out"] is True
    full = client.post("/logs/_search", json=query).json()
    assert full["timed_out"] is False and full["hits"]["total"]["value"] == SEGMENTS * DOCS_PER_SEGMENT


def test_no_partial_results_turns_a_timeout_into_elasticsearchs_error(
    stepping: tuple[httpx.Client, SteppingClock],
) -> None:
    client, _ = stepping
    response = client.post(
        "/logs/_search", params={"allow_partial_search_results": "false"}, json={"timeout": "1500ms"}
    )
    assert response.status_code == 429
    body = response.json()
    error = body["error"]
    assert body["status"] == 429
    assert (error["type"], error["phase"]) == ("search_phase_execution_exception", "query")
    assert error["root_cause"][0] == {"type": "search_timeout_exception", "reason": "Time exceeded"}


# ---- client disconnect -------------------------------------------------------------------------


class GateClock:
    """A clock that stops the search at its first segment check until the test opens the gate."""

    def __init__(self) -> None:
        self.reads = 0
        self.reached = threading.Event()
        self.gate = threading.Event()
        self.armed = False

    def __call__(self) -> float:
        if self.armed:
            self.reads += 1
            if self.reads == 2:  # the first read sets the deadline, the second is segment 1's check
                self.reached.set()
                assert self.gate.wait(30)
        return 0.0


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[httpx.Client, Node, GateClock]]:
    clock = GateClock()
    try:
        with serving(tmp_path, clock) as (client, node):
            yield client, node, clock
    finally:
        clock.gate.set()


def test_a_client_that_disconnects_cancels_its_search(gated: tuple[httpx.Client, Node, GateClock]) -> None:
    client, node, clock = gated
    outcome: list[Any] = []
    flags: list[threading.Event] = []
    done = threading.Event()
    search = node.search

    def watched(*args: Any, **kwargs: Any) -> Any:
        flags.append(kwargs["cancelled"])
        try:
            outcome.append(search(*args, **kwargs))
        except BaseException as exc:
            outcome.append(exc)
            raise
        finally:
            done.set()
        return outcome[-1]

    node.search = watched  # type: ignore[method-assign]
    clock.armed = True
    port = client.base_url.port
    body = b'{"timeout": "1h"}'
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            b"POST /logs/_search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        assert clock.reached.wait(30)  # the search is running, stopped at its first segment
    # The socket is closed: the server notices and flags the search, which stops at its next check.
    assert flags[0].wait(30)
    clock.gate.set()
    assert done.wait(30)
    assert isinstance(outcome[0], TaskCancelled)
    assert clock.reads == 2  # no segment after the first was searched
    # The node serves the next request as usual.
    clock.armed = False
    assert client.get("/logs/_count").json()["count"] == SEGMENTS * DOCS_PER_SEGMENT


# ---- circuit breaker ------------------------------------------------------------------------------


def _breaker(http: httpx.Client) -> dict[str, Any]:
    nodes = http.get("/_nodes/stats/breaker").json()["nodes"]
    return next(iter(nodes.values()))["breakers"]["request"]


def test_the_request_breaker_refuses_a_search_whose_arrays_would_not_fit(
    http: httpx.Client, index_name: str, cluster_setting: Callable[[str, Any], None]
) -> None:
    _segments(http, index_name)
    try:
        before = _breaker(http)
        assert before["limit_size_in_bytes"] > 0 and before["estimated_size_in_bytes"] == 0
        cluster_setting("indices.breaker.request.limit", "32b")
        response = http.post(f"/{index_name}/_search", json={"query": {"match_all": {}}})
        assert response.status_code == 429
        error = error_of(response)
        assert error["type"] == "circuit_breaking_exception"
        assert error["durability"] == "TRANSIENT"
        assert error["bytes_limit"] == 32
        wanted = error["bytes_wanted"]
        assert wanted > 32
        assert error["reason"] == (
            f"[request] Data too large, data for [<reused_arrays>] would be [{wanted}/{wanted}b], "
            "which is larger than the limit of [32/32b]"
        )
        after = _breaker(http)
        assert after["tripped"] == before["tripped"] + 1
        assert (after["limit_size_in_bytes"], after["limit_size"]) == (32, "32b")
        assert after["estimated_size_in_bytes"] == 0  # a refused request holds nothing
        cluster_setting("indices.breaker.request.limit", "1mb")
        assert http.post(f"/{index_name}/_search").json()["hits"]["total"]["value"] == 20
        assert _breaker(http)["estimated_size_in_bytes"] == 0  # released when the search ended
    finally:
        http.delete(f"/{index_name}")


def test_breaker_limits_are_validated(http: httpx.Client) -> None:
    for value in ("101%", "lots"):
        setting = {"transient": {"indices.breaker.request.limit": value}}
        response = http.put("/_cluster/settings", json=setting)
        assert response.status_code == 400
        assert error_of(response)["type"] == "illegal_argument_exception"


# ---- open point-in-time limit ---------------------------------------------------------------------


def test_open_pits_are_capped_by_search_max_open_pit_context(
    http: httpx.Client, new_index: Callable[..., str], cluster_setting: Callable[[str, Any], None]
) -> None:
    index = new_index()
    cluster_setting("search.max_open_pit_context", 2)
    opened = [http.post(f"/{index}/_pit?keep_alive=1m") for _ in range(2)]
    try:
        assert [r.status_code for r in opened] == [200, 200]
        refused = http.post(f"/{index}/_pit?keep_alive=1m")
        assert refused.status_code == 429
        error = error_of(refused)
        assert error["type"] == "rejected_execution_exception"
        assert error["reason"] == (
            "Trying to create too many Point In Time contexts. Must be less than or equal to: [2]. "
            "This limit can be set by changing the [search.max_open_pit_context] setting."
        )
        # Closing one makes room for another.
        assert http.request("DELETE", "/_pit", json={"id": opened.pop().json()["id"]}).status_code == 200
        again = http.post(f"/{index}/_pit?keep_alive=1m")
        assert again.status_code == 200
        opened.append(again)
    finally:
        for response in opened:
            http.request("DELETE", "/_pit", json={"id": response.json()["id"]})


# ---- memory goes back ---------------------------------------------------------------------------


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's /proc status")
def test_memory_goes_back_after_heavy_aggregations(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data") as (url, process),
        web.Client(base_url=url, timeout=120) as client,
    ):
        mappings = {"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}}}
        assert client.put("/big", json={"mappings": mappings}).status_code == 200
        lines = b"".join(
            b'{"index":{}}\n' + orjson.dumps({"n": i, "k": f"k{i % 5000}"}) + b"\n" for i in range(200_000)
        )
        ndjson = {"content-type": "application/x-ndjson"}
        bulk = client.post("/big/_bulk?refresh=true", content=lines, headers=ndjson)
        assert bulk.status_code == 200 and not bulk.json()["errors"]

        def heavy(start: int) -> int:
            aggs = {  # 55,000 buckets: under search.max_buckets
                "each": {"histogram": {"field": "n", "interval": 4}},
                "keys": {"terms": {"field": "k", "size": 5000}, "aggs": {"top": {"max": {"field": "n"}}}},
            }
            body = {"size": 0, "query": {"range": {"n": {"gte": start}}}, "aggs": aggs}
            with web.Client(base_url=url, timeout=120) as own:
                return own.post("/big/_search", json=body).status_code

        assert heavy(0) == 200  # columns read once (segments keep them) before the baseline
        baseline = _rss(process.pid)
        with ThreadPoolExecutor(6) as pool:
            assert set(pool.map(heavy, range(1, 13))) == {200}
        # Without pinned allocator thresholds and trimming the process stays ~200 MB above.
        assert _rss(process.pid) < baseline + 96 * 1024 * 1024


# ---- the merge worker ends with its server ------------------------------------------------------


def _children(pid: int) -> dict[int, str]:
    """Live child processes of `pid` and their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = cmdline
    return found


def _poll(condition: Callable[[], Any], seconds: float = 30.0) -> Any:
    """The first true value of `condition`, checked every 20 ms for at most `seconds` (another
    process's state has no event to wait on); the last false one when time runs out."""
    deadline = time.monotonic() + seconds
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="walks /proc for the worker")
def test_the_merge_worker_ends_when_its_server_is_killed_while_it_starts(tmp_path: Path) -> None:
    # Without search workers the server has no zygote and spawns its merge worker; the forked
    # one is tests/search/test_worker_zygote.py's.
    with (
        running_server(tmp_path / "data", search_workers=0) as (url, process),
        web.Client(base_url=url, timeout=60) as client,
    ):
        assert client.put("/merging", json={"settings": {"refresh_interval": "-1"}}).status_code == 200
        for n in range(12):  # twelve small segments: a merge once the index is quiet
            client.post("/merging/_doc?refresh=true", json={"n": n}).raise_for_status()

        # The worker and the resource tracker, seen as soon as they exist.
        def started() -> dict[int, str]:
            found = _children(process.pid)
            return found if any("spawn_main" in cmd for cmd in found.values()) else {}

        children = _poll(started)
        assert children, "the merge worker did not start"
        process.kill()  # while the worker is still starting up
        process.wait()
        assert _poll(lambda: not any(_alive(pid) for pid in children)), children
