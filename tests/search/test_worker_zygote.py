"""Search workers forked from the zygote of `leafsearch serve` (search/workers/zygote.py): the
workers are forks of one copy of the server that holds none of its files, a worker killed is
replaced by another fork, a dead zygote does not stop workers from starting, and nothing is left
once the server is killed. The merge worker (index/merge_worker.py) is a fork of the same zygote,
at its lower CPU priority, replaced by the next merge once killed."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from leafsearch.index.merge_worker import NICENESS
from leafsearch.search.workers import zygote
from tests import web
from tests.conftest import bulk_index, running_server, search_ok


def _wait(condition: Any, what: str, timeout: float = 30.0) -> None:
    """Wait until `condition()` holds (state another process changes)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def _workers(http: httpx.Client) -> dict[str, Any]:
    stats = http.get("/_nodes/stats/search_workers").json()
    return next(iter(stats["nodes"].values()))["search_workers"]


def _ready(http: httpx.Client, count: int) -> dict[str, Any]:
    _wait(lambda: _workers(http)["ready"] == count, f"{count} workers are ready")
    return _workers(http)


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, which its parent has not reaped yet, has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _open_files(pid: int) -> list[str]:
    folder = Path(f"/proc/{pid}/fd")
    found = []
    for entry in folder.iterdir():
        try:
            found.append(os.readlink(entry))
        except FileNotFoundError:  # closed meanwhile
            continue
    return found


def test_workers_are_forks_of_one_zygote_holding_none_of_the_servers_files(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", search_workers=2, fresh_interpreter=True) as (url, server),
        web.Client(base_url=url, timeout=60) as http,
    ):
        bulk_index(http, "forked", {str(i): {"n": i} for i in range(50)})
        workers = _ready(http, 2)["workers"]
        parents = {_parent(worker["pid"]) for worker in workers}
        assert len(parents) == 1
        (zygote_pid,) = parents
        assert zygote_pid != server.pid and _parent(zygote_pid) == server.pid
        for worker in workers:  # files it makes are private, as the server's (cli.py)
            assert "Umask:\t0077" in Path(f"/proc/{worker['pid']}/status").read_text()
        server_files = _open_files(server.pid)
        assert any(name.endswith("node.lock") for name in server_files)
        held = _open_files(zygote_pid)
        assert not any(
            name.endswith("node.lock") or name.startswith("socket:") and name in server_files for name in held
        )
        assert not any(name.startswith(f"{tmp_path / 'data'}/") for name in held)  # (its log is its output)
        body = {"query": {"range": {"n": {"gte": 10}}}, "size": 0, "track_total_hits": True}
        assert search_ok(http, "forked", body)["hits"]["total"]["value"] == 40


def test_a_worker_killed_is_replaced_by_another_fork_and_a_dead_zygote_by_a_new_one(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", search_workers=1, fresh_interpreter=True) as (url, server),
        web.Client(base_url=url, timeout=60) as http,
    ):
        bulk_index(http, "replaced", {str(i): {"n": i} for i in range(20)})
        (first,) = _ready(http, 1)["workers"]
        zygote_pid = _parent(first["pid"])
        os.kill(first["pid"], signal.SIGKILL)
        _wait(lambda: _workers(http)["lost"] == 1, "the pool saw the worker die")
        (second,) = _ready(http, 1)["workers"]
        assert second["pid"] != first["pid"] and _parent(second["pid"]) == zygote_pid
        assert search_ok(http, "replaced", {"size": 0})["hits"]["total"]["value"] == 20

        os.kill(zygote_pid, signal.SIGKILL)  # its worker runs on; the next one needs a fork server
        _wait(lambda: not _alive(zygote_pid), "the zygote is gone")
        os.kill(second["pid"], signal.SIGKILL)
        _wait(lambda: _workers(http)["lost"] == 2, "the pool saw the second worker die")
        (third,) = _ready(http, 1)["workers"]
        assert _parent(third["pid"]) not in (zygote_pid, server.pid)  # a fork server started anew
        assert search_ok(http, "replaced", {"size": 0})["hits"]["total"]["value"] == 20


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(pid):
            try:
                if _parent(int(entry.name)) == pid and _alive(int(entry.name)):
                    found.add(int(entry.name))
            except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
                continue
    return found


def _merges(http: httpx.Client, index: str) -> int:
    stats = http.get(f"/{index}/_stats/merge").json()
    return int(stats["indices"][index]["primaries"]["merges"]["total"])


def _merged(http: httpx.Client, index: str, start: int) -> None:
    """Write twelve one-document segments into `index` (refresh off but for each write): the
    node's background merges then merge them, in its merge worker."""
    before = _merges(http, index)
    for n in range(start, start + 12):
        http.post(f"/{index}/_doc?refresh=true", json={"n": n}).raise_for_status()
    _wait(lambda: _merges(http, index) > before, f"{index} merged")


def _merge_worker(http: httpx.Client, zygote_pid: int) -> int:
    """The zygote's child that is not a search worker."""
    searching = {worker["pid"] for worker in _workers(http)["workers"]}
    (pid,) = _children(zygote_pid) - searching
    return pid


def test_the_merge_worker_is_a_fork_of_the_zygote_at_a_lower_priority_replaced_once_killed(
    tmp_path: Path,
) -> None:
    with (
        running_server(tmp_path / "data", search_workers=1, fresh_interpreter=True) as (url, server),
        web.Client(base_url=url, timeout=60) as http,
    ):
        (worker,) = _ready(http, 1)["workers"]
        zygote_pid = _parent(worker["pid"])
        assert http.put("/merging", json={"settings": {"refresh_interval": "-1"}}).status_code == 200
        _merged(http, "merging", 0)
        first = _merge_worker(http, zygote_pid)
        niceness = os.getpriority(os.PRIO_PROCESS, server.pid)
        assert os.getpriority(os.PRIO_PROCESS, first) == min(niceness + NICENESS, 19)
        assert "Umask:\t0077" in Path(f"/proc/{first}/status").read_text()

        os.kill(first, signal.SIGKILL)
        _wait(lambda: not _alive(first), "the merge worker is gone")
        _merged(http, "merging", 12)  # a merge may fail on the broken pool; a later one runs
        second = _merge_worker(http, zygote_pid)
        assert second != first
        assert os.getpriority(os.PRIO_PROCESS, second) == min(niceness + NICENESS, 19)
        assert search_ok(http, "merging", {"size": 0})["hits"]["total"]["value"] == 24


def test_a_server_killed_leaves_neither_zygote_nor_workers(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", search_workers=2, fresh_interpreter=True) as (url, server),
        web.Client(base_url=url, timeout=60) as http,
    ):
        workers = [worker["pid"] for worker in _ready(http, 2)["workers"]]
        zygote_pid = _parent(workers[0])
        assert http.put("/merging", json={"settings": {"refresh_interval": "-1"}}).status_code == 200
        _merged(http, "merging", 0)
        merging = _merge_worker(http, zygote_pid)
        server.kill()
        server.wait()
        ended = (zygote_pid, merging, *workers)
        _wait(lambda: not any(_alive(pid) for pid in ended), "the server's processes end")


def test_a_process_with_threads_is_not_forked() -> None:
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert zygote.start(()) is None
    finally:
        release.set()
        thread.join()
