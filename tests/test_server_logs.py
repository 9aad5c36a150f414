"""`leafsearch serve`'s command line: version, help, environment variables, the access log and
Elasticsearch's slow logs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
from conftest import REPO, error_of, free_port, running_server, serve_command, server_env, wait_until_up
from raw_http import Conn

from tests import web


def _leafsearch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "leafsearch", *args],
        cwd=REPO,
        env=env or server_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _lines(path: Path, count: int) -> list[str]:
    """The first `count` lines of a log another process writes (waiting for them, bounded)."""
    deadline = time.monotonic() + 30
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.01)


def test_version_and_short_help() -> None:
    version = _leafsearch("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("leafsearch 0.")
    assert "Elasticsearch 8." in version.stdout
    short = _leafsearch("serve", "-h")
    assert short.returncode == 0
    for variable in ("LEAFSEARCH_HOST", "LEAFSEARCH_PORT", "LEAFSEARCH_DATA", "LEAFSEARCH_LOG_LEVEL"):
        assert variable in short.stdout
    assert all(command in _leafsearch("-h").stdout for command in ("serve", "export", "import", "users"))


def test_serve_takes_its_options_from_the_environment(tmp_path: Path) -> None:
    port = free_port()
    env = server_env() | {
        "LEAFSEARCH_PORT": str(port),
        "LEAFSEARCH_DATA": str(tmp_path / "from-env"),
        "LEAFSEARCH_ACCESS_LOG": str(tmp_path / "access.log"),
    }
    log = tmp_path / "server.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "leafsearch", "serve"], cwd=REPO, env=env, stdout=output, stderr=output
        )
    try:
        wait_until_up(process, f"http://127.0.0.1:{port}", log)
        assert (tmp_path / "from-env").is_dir()
        assert _lines(tmp_path / "access.log", 1)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_access_log_records_method_path_status_and_time(tmp_path: Path) -> None:
    access = tmp_path / "access.log"
    with running_server(tmp_path / "data", "--access-log", str(access), fresh_interpreter=True) as (url, _):
        web.put(f"{url}/logged", timeout=30)
        web.get(f"{url}/logged/_search?q=x", timeout=30)
        web.get(f"{url}/missing/_doc/1", timeout=30)
        lines = _lines(access, 3)
    assert len(lines) == 3
    assert '"PUT /logged HTTP/1.1" 200 ' in lines[0]
    assert '"GET /logged/_search?q=x HTTP/1.1" 200 ' in lines[1]
    assert '"GET /missing/_doc/1 HTTP/1.1" 404 ' in lines[2]
    assert all(line.endswith("ms") and "127.0.0.1" in line for line in lines)


def test_no_access_log_unless_asked(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", fresh_interpreter=True) as (url, _):
        web.get(f"{url}/", timeout=30)
    server_log = (tmp_path / "data.log").read_text()
    assert '"GET / HTTP/1.1"' not in server_log


def test_search_slow_log_follows_the_index_thresholds(tmp_path: Path) -> None:
    slow = tmp_path / "slow.json"
    with running_server(tmp_path / "data", "--slow-log", str(slow), fresh_interpreter=True) as (url, _):
        settings = {"index.search.slowlog.threshold.query.trace": "0ms"}
        assert web.put(f"{url}/slow", json={"settings": settings}, timeout=30).status_code == 200
        assert web.put(f"{url}/quiet", timeout=30).status_code == 200
        web.post(f"{url}/slow,quiet/_doc?refresh=true", json={"a": 1}, timeout=30)
        web.post(f"{url}/slow/_doc?refresh=true", json={"a": 2}, timeout=30)
        body = {"query": {"match_all": {}}}
        web.post(f"{url}/quiet/_search", json=body, timeout=30)
        web.post(f"{url}/slow/_search", json=body, headers={"X-Opaque-Id": "req-7"}, timeout=30)
        events = [orjson.loads(line) for line in _lines(slow, 1)]
        assert len(events) == 1
        event = events[0]
        assert event["log.logger"] == "index.search.slowlog.query"
        assert event["log.level"] == "TRACE"
        assert event["elasticsearch.slowlog.message"] == "[slow][0]"
        assert event["elasticsearch.slowlog.id"] == "req-7"
        assert orjson.loads(event["elasticsearch.slowlog.source"]) == body
        assert event["elasticsearch.slowlog.total_hits"] == "1 hits"
        assert event["elasticsearch.slowlog.search_type"] == "QUERY_THEN_FETCH"
        assert event["event.dataset"] == "elasticsearch.index_search_slowlog"
        assert isinstance(event["elasticsearch.slowlog.took_millis"], int)
        # dynamic: a fetch threshold set later logs the fetch phase at the level it names
        update = {"index.search.slowlog.threshold.fetch.warn": "0s"}
        assert web.put(f"{url}/quiet/_settings", json=update, timeout=30).status_code == 200
        web.post(f"{url}/quiet/_search", json=body, timeout=30)
        fetch = orjson.loads(_lines(slow, 2)[1])
        assert (fetch["log.logger"], fetch["log.level"]) == ("index.search.slowlog.fetch", "WARN")
        assert fetch["elasticsearch.slowlog.message"] == "[quiet][0]"
        # a page through a PIT logs the PIT's index (read from the context the page held)
        pit = web.post(f"{url}/slow/_pit?keep_alive=1m", timeout=30).json()["id"]
        web.post(f"{url}/_search", json={"pit": {"id": pit}, "size": 1}, timeout=30)
        paged = orjson.loads(_lines(slow, 3)[2])
        assert (paged["log.logger"], paged["elasticsearch.slowlog.message"]) == (
            "index.search.slowlog.query",
            "[slow][0]",
        )
        bad = web.put(
            f"{url}/quiet/_settings", json={"index.search.slowlog.threshold.query.info": "fast"}, timeout=30
        )
        assert bad.status_code == 400
        assert error_of(bad)["type"] == "illegal_argument_exception"


def test_indexing_slow_log_with_its_source_limit(tmp_path: Path) -> None:
    slow = tmp_path / "slow.json"
    with running_server(tmp_path / "data", "--slow-log", str(slow), fresh_interpreter=True) as (url, _):
        settings = {"index.indexing.slowlog.threshold.index.info": "0s", "index.indexing.slowlog.source": "8"}
        assert web.put(f"{url}/writes", json={"settings": settings}, timeout=30).status_code == 200
        web.put(
            f"{url}/writes/_doc/d1?routing=r",
            content=b'{ "title":  "a long title" }',
            headers={"content-type": "application/json"},
            timeout=30,
        )
        event = orjson.loads(_lines(slow, 1)[0])
    assert event["log.logger"] == "index.indexing.slowlog.index"
    assert event["log.level"] == "INFO"
    assert event["elasticsearch.slowlog.id"] == "d1"
    assert event["elasticsearch.slowlog.routing"] == "r"
    assert event["elasticsearch.slowlog.source"] == '{"title"'  # reformatted on one line, then cut
    assert event["elasticsearch.index.name"] == "writes"
    assert event["elasticsearch.slowlog.message"].startswith("[writes/")


def test_log_level_quiets_the_server_log(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            serve_command(tmp_path / "data", port, "--log-level", "warning"),
            cwd=REPO,
            env=server_env(),
            stdout=output,
            stderr=output,
        )
    try:
        wait_until_up(process, f"http://127.0.0.1:{port}", log)
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
    assert "listening on" not in log.read_text()


@pytest.mark.parametrize("requests", [0, 1, 2])
def test_a_server_stopped_right_after_it_starts_logs_no_error(tmp_path: Path, requests: int) -> None:
    """SIGTERM as soon as the server accepts (the pytest plugin's servers, `leafsearch.testing`):
    before any request, its search workers are not started yet; right after the first answers,
    they are still starting (each imports the engine), and a worker that exits because the pool
    closes is no error. Nor is anything else of the stop."""
    with running_server(tmp_path / "data", "--log-level", "debug", fresh_interpreter=True) as (url, process):
        for _ in range(requests):
            assert web.get(f"{url}/", timeout=30).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    logged = (tmp_path / "data.log").read_text()
    assert "leafsearch stopped" in logged
    assert not [line for line in logged.splitlines() if " ERROR " in line or " WARNING " in line], logged
    assert "Traceback" not in logged, logged


def test_a_websocket_upgrade_is_answered_as_http_without_a_warning(tmp_path: Path) -> None:
    """Elasticsearch speaks no WebSocket: a request asking to upgrade is answered as any other,
    and its connection goes on as HTTP/1.1. `serve` runs uvicorn without a WebSocket protocol
    (none is imported at start), and logs nothing of the ignored header."""
    upgrade = {
        "connection": "Upgrade",
        "upgrade": "websocket",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
    }

    def client(url: str) -> list[tuple[int, bytes]]:
        conn = Conn(url)
        try:
            # (one at a time: a client that asked to upgrade waits for the answer before more)
            return [
                *conn.ask(Conn.request("/", headers=upgrade, method="GET")),
                *conn.ask(Conn.request("/", method="GET")),
            ]
        finally:
            conn.close()

    with running_server(tmp_path / "data", fresh_interpreter=True) as (url, _), ThreadPoolExecutor(4) as pool:
        answers = [answer for answers in pool.map(client, [url] * 4) for answer in answers]
    assert [status for status, _ in answers] == [200] * 8
    assert {orjson.loads(body)["tagline"] for _, body in answers} == {"You Know, for Search"}
    logged = (tmp_path / "data.log").read_text()
    assert "leafsearch stopped" in logged
    assert "WARNING" not in logged and "Unsupported upgrade" not in logged, logged
