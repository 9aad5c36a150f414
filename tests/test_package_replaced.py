"""A running server whose installed package is replaced beside it keeps answering (issue 23).

`pip install .` then `pip install -e ".[test]"` (the README's two commands, in that order, with
the server of the first one running) removes the files the server was started from. A module the
server imported lazily, at a request that first needed it, then no longer existed: 500
`ModuleNotFoundError`. The server now imports the whole package once it has answered, and each
search worker what it can run before it is ready (common/preload.py): here the server runs from a
copy of the package, which is moved away once both are done (the server and its worker report it
in the log), and every kind of request must still be answered, in the server process and in a
worker. The server runs without `site` (`-S`; the site-packages folders on PYTHONPATH instead),
so that no installed `leafsearch` (an editable install's finder) can stand in for the copy."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from conftest import REPO, free_port, wait_until_up

from tests import web


def _wait(condition: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def _workers_ready(http: httpx.Client) -> int:
    nodes = http.get("/_nodes/stats").json()["nodes"]
    return next(iter(nodes.values()))["search_workers"]["ready"]


def _requests(http: httpx.Client, tag: str) -> list[tuple[str, int, str]]:
    """A little of everything: (what, status, body when not 2xx)."""
    answers = []

    def call(method: str, path: str, **kwargs: Any) -> Any:
        response = http.request(method, path, **kwargs)
        answers.append((f"{method} {path}", response.status_code, response.text[:300]))
        return response.json() if "json" in response.headers.get("content-type", "") else None

    index = f"replaced-{tag}"
    mappings = {"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}}}
    call("PUT", f"/{index}", json={"mappings": mappings})
    lines = b"".join(
        b"%s\n%s\n" % (orjson.dumps({"index": {"_id": str(i)}}), orjson.dumps({"n": i, "k": "ab"[i % 2]}))
        for i in range(40)
    )
    ndjson = {"content-type": "application/x-ndjson"}
    call("POST", f"/{index}/_bulk?refresh=true", content=lines, headers=ndjson)
    call("PUT", f"/{index}/_doc/x?refresh=true", json={"n": 100, "k": "c", "t": "hello"})
    aggs = {
        "k": {"terms": {"field": "k"}},
        "h": {"histogram": {"field": "n", "interval": 10}},
        "s": {"stats": {"field": "n"}},
    }
    call("POST", f"/{index}/_search", json={"query": {"match": {"t": "hello"}}, "aggs": aggs})
    deep = {"query": {"range": {"n": {"gte": 5}}}, "sort": [{"n": "desc"}], "from": 3}
    call("POST", f"/{index}/_search", json=deep)
    call("GET", f"/{index}/_count?q=k:a")
    call("GET", "/_cat/indices?v")
    call("GET", "/_cat/shards")
    call("GET", "/_nodes/stats")
    call("GET", "/_cluster/health")
    call("GET", f"/{index}/_mapping")
    pit = call("POST", f"/{index}/_pit?keep_alive=1m")["id"]
    walk = {"pit": {"id": pit, "keep_alive": "1m"}, "size": 10, "sort": [{"n": "asc"}]}
    page = call("POST", "/_search", json=walk)
    call("POST", "/_search", json={**walk, "search_after": page["hits"]["hits"][-1]["sort"]})
    call("DELETE", "/_pit", json={"id": pit})
    scroll = call("POST", f"/{index}/_search?scroll=1m", json={"size": 10, "sort": ["_doc"]})["_scroll_id"]
    call("POST", "/_search/scroll", json={"scroll": "1m", "scroll_id": scroll})
    call("DELETE", "/_search/scroll", json={"scroll_id": scroll})
    # Few deletes: a segment a third deleted would be merged, in the merge process, which starts on
    # the first merge and imports the package then (index/merge_worker.py): not what this covers.
    call("POST", f"/{index}/_delete_by_query?refresh=true", json={"query": {"range": {"n": {"lt": 3}}}})
    call("DELETE", f"/{index}")
    return answers


def test_a_server_answers_after_its_package_files_are_moved_away(tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(REPO / "leafsearch", site / "leafsearch", ignore=shutil.ignore_patterns("__pycache__"))
    packages = dict.fromkeys([str(site), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(packages)}
    where = subprocess.run(
        [sys.executable, "-S", "-c", "import leafsearch; print(leafsearch.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(site)), where.stdout  # the server imports the copy
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    data = tmp_path / "data"
    command = [sys.executable, "-S", "-m", "leafsearch", "serve", "--port", str(port), "--data", str(data)]
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [*command, "--search-workers", "1", "--log-level", "debug"],
            cwd=tmp_path,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_up(process, url, log)  # the first answer: the server preloads, its worker starts
        _wait(lambda: "preloaded" in log.read_text(), "the server imported the package")
        _wait(lambda: "search worker 0 ready" in log.read_text(), "the search worker is ready")
        with web.Client(base_url=url, timeout=60) as http:
            shutil.move(site / "leafsearch", tmp_path / "moved-away")  # as pip replacing the install
            answers = _requests(http, "server")  # lone requests and walks run in the server process
            to_workers = dict.fromkeys(
                ("search.workers.lone_requests_in_server", "search.workers.lone_walks_in_server"), False
            )
            assert http.put("/_cluster/settings", json={"transient": to_workers}).status_code == 200
            answers += _requests(http, "worker")
            failed = [answer for answer in answers if not 200 <= answer[1] < 300]
            assert not failed, failed
            assert _workers_ready(http) == 1  # the worker served its share and lives
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    logged = log.read_text()
    assert "ModuleNotFoundError" not in logged and " ERROR " not in logged, logged


def test_preload_imports_every_module_of_the_package_but_those_left_out() -> None:
    from leafsearch.common.preload import module_names, preload, wanted

    names = module_names()
    assert "leafsearch.node.stats" in names and "leafsearch.search.aggs.terms" in names
    assert "leafsearch.__main__" in names and not wanted("leafsearch.__main__")
    assert not wanted("leafsearch.rest.app", exclude=("leafsearch.rest",)) and wanted("leafsearch.rest.app")
    preload()
    assert [name for name in names if wanted(name) and name not in sys.modules] == []
