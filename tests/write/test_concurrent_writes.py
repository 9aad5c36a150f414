"""Many writers at once, refreshes, flushes and merges beside them, then `kill -9` at a random
moment: every acknowledged operation is there after the restart, with its acknowledged version.

Each writer thread owns its ids and runs one request at a time, so for every id the last
acknowledged operation is known, and so is the one request that may have been in flight when the
server died (applied or not: both are allowed for it, nothing else is). The seed is printed on
failure; `LEAFSEARCH_CRASH_TRIALS` runs more trials per writer count (two by default).
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from conftest import running_server

from tests import web

TRIALS = int(os.environ.get("LEAFSEARCH_CRASH_TRIALS", "2"))
IDS_PER_WRITER = 25
SETTINGS = {"settings": {"number_of_shards": 2, "refresh_interval": "100ms"}}


@dataclass
class Expected:
    """What the server acknowledged for one id, and the outcome of a request still in flight."""

    exists: bool = False
    version: int = 0
    value: int | None = None
    in_flight: list[tuple[bool, int | None]] = field(default_factory=list)  # (exists, value)


@dataclass
class Run:
    index: str
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Condition = field(default_factory=threading.Condition)
    acknowledged: int = 0
    server_errors: list[str] = field(default_factory=list)
    failures: list[BaseException] = field(default_factory=list)

    def acked(self, count: int) -> None:
        with self.lock:
            self.acknowledged += count
            self.lock.notify_all()


def writer(run: Run, url: str, name: str, rng: random.Random, state: dict[str, Expected]) -> None:
    try:
        write_until_killed(run, url, name, rng, state)
    except BaseException as exc:  # handed to the test thread
        run.failures.append(exc)
        run.acked(10**9)  # nothing to wait for any more


def write_until_killed(run: Run, url: str, name: str, rng: random.Random, state: dict[str, Expected]) -> None:
    """Index, update (`doc_as_upsert`), delete and bulk on this writer's own ids until the server
    dies. Each request's possible outcomes are noted before it is sent."""
    ids = [f"{name}-{j}" for j in range(IDS_PER_WRITER)]
    counter = 0
    with web.Client(base_url=url, timeout=30) as http:
        while True:
            kind = rng.choice(("index", "update", "delete", "bulk", "bulk"))
            chosen = rng.sample(ids, rng.randint(2, 12)) if kind == "bulk" else [rng.choice(ids)]
            planned: list[tuple[str, str, int]] = []
            for doc_id in chosen:
                counter += 1
                op = rng.choice(("index", "update", "delete")) if kind == "bulk" else kind
                planned.append((doc_id, op, counter))
                state[doc_id].in_flight = [(op != "delete", None if op == "delete" else counter)]
            try:
                responses = send(http, run.index, kind, planned)
            except httpx.TransportError:
                return  # the server was killed: the in-flight outcomes stay open
            for (doc_id, op, value), (status, item) in zip(planned, responses, strict=True):
                expected = state[doc_id]
                if status >= 500:
                    run.server_errors.append(f"{op} {doc_id}: {status} {item}")
                elif op == "delete" and status == 404:
                    assert not expected.exists, (doc_id, item)
                else:
                    assert status < 300, (op, doc_id, status, item)
                    expected.exists = op != "delete"
                    expected.value = None if op == "delete" else value
                    expected.version = item["_version"]
                expected.in_flight = []
            run.acked(len(planned))


def send(
    http: httpx.Client, index: str, kind: str, planned: list[tuple[str, str, int]]
) -> list[tuple[int, Any]]:
    """One request for the planned operations; (status, result) per operation."""
    if kind == "bulk":
        lines: list[bytes] = []
        for doc_id, op, value in planned:
            lines.append(orjson.dumps({op: {"_index": index, "_id": doc_id}}))
            if op == "index":
                lines.append(orjson.dumps({"v": value}))
            elif op == "update":
                lines.append(orjson.dumps({"doc": {"v": value}, "doc_as_upsert": True}))
        response = http.post(
            "/_bulk", content=b"\n".join(lines) + b"\n", headers={"content-type": "application/json"}
        )
        if response.status_code != 200:
            return [(response.status_code, response.text)] * len(planned)
        items = [next(iter(item.values())) for item in response.json()["items"]]
        return [(item["status"], item) for item in items]
    doc_id, op, value = planned[0]
    if op == "index":
        response = http.put(f"/{index}/_doc/{doc_id}", json={"v": value})
    elif op == "update":
        response = http.post(f"/{index}/_update/{doc_id}", json={"doc": {"v": value}, "doc_as_upsert": True})
    else:
        response = http.delete(f"/{index}/_doc/{doc_id}")
    return [(response.status_code, response.json())]


def housekeeping(run: Run, url: str) -> None:
    """Refreshes and flushes beside the writers (merges start on their own once a shard holds
    many small segments)."""
    with web.Client(base_url=url, timeout=30) as http:
        while not run.stop.is_set():
            try:
                for path in (f"/{run.index}/_refresh", f"/{run.index}/_refresh", f"/{run.index}/_flush"):
                    response = http.post(path)
                    if response.status_code >= 500:
                        run.server_errors.append(f"{path}: {response.status_code} {response.text}")
            except httpx.TransportError:
                return


def check_after_restart(url: str, index: str, state: dict[str, Expected]) -> None:
    with web.Client(base_url=url, timeout=60) as http:
        docs = http.post(f"/{index}/_mget", json={"ids": list(state)}).json()["docs"]
    lost: list[str] = []
    for doc in docs:
        expected = state[doc["_id"]]
        seen = (doc["found"], doc["_source"]["v"] if doc["found"] else None)
        acknowledged = (expected.exists, expected.value)
        if seen == acknowledged:
            if doc["found"]:
                assert doc["_version"] == expected.version, (doc, expected)
            continue
        if seen not in expected.in_flight:
            lost.append(
                f"{doc['_id']}: acknowledged {acknowledged}, in flight {expected.in_flight}, found {seen}"
            )
    assert not lost, f"{len(lost)} acknowledged operations lost or changed: {lost[:10]}"


@pytest.mark.parametrize("writers", [1, 2, 4, 8])
@pytest.mark.parametrize("trial", range(TRIALS))
def test_concurrent_writers_lose_nothing_acknowledged_across_kill_9(
    tmp_path: Path, writers: int, trial: int
) -> None:
    crash_trial(tmp_path, writers, worker_parse=False)


@pytest.mark.parametrize("writers", [4, 8])
@pytest.mark.parametrize("trial", range(TRIALS))
def test_writers_whose_bulks_workers_parse_lose_nothing_acknowledged_across_kill_9(
    tmp_path: Path, writers: int, trial: int
) -> None:
    """The same with every bulk that waits for the indexing slot split and parsed in the search
    workers (bulk_offload.py; any size), and every buffer written as a segment by a worker
    (index/buffer_wire.py; any size): the kill comes after the workers took some."""
    crash_trial(tmp_path, writers, worker_parse=True)


def worker_jobs(url: str) -> int:
    nodes = web.get(f"{url}/_nodes/stats/search_workers").json()["nodes"]
    return sum(node.get("search_workers", {}).get("jobs", 0) for node in nodes.values())


def crash_trial(tmp_path: Path, writers: int, *, worker_parse: bool) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    data = tmp_path / "data"
    run = Run("crash")
    states = [{f"w{k}-{j}": Expected() for j in range(IDS_PER_WRITER)} for k in range(writers)]
    with running_server(data) as (url, process):
        assert web.put(f"{url}/{run.index}", json=SETTINGS).status_code == 200
        if worker_parse:
            any_time = {
                "indices.bulk.worker_parse_min_size": "1b",
                "indices.bulk.worker_parse_min_idle_cpu": "0",
                "indices.segments.worker_build_min_docs": "1",
            }
            settings = {"persistent": any_time}
            assert web.put(f"{url}/_cluster/settings", json=settings).status_code == 200
        threads = [
            threading.Thread(target=writer, args=(run, url, f"w{k}", random.Random(rng.random()), states[k]))
            for k in range(writers)
        ]
        threads.append(threading.Thread(target=housekeeping, args=(run, url)))
        kill_after = rng.randint(100, 1500)  # acknowledged operations before the kill
        for thread in threads:
            thread.start()
        with run.lock:
            run.lock.wait_for(lambda: run.acknowledged >= kill_after, timeout=120)
            # With worker parsing: go on until the workers have taken some bulks (they start in
            # the background, and a bulk goes to them only when another holds the slot).
            while worker_parse and not run.failures and worker_jobs(url) == 0:
                target = run.acknowledged + 20
                reached = run.lock.wait_for(lambda target=target: run.acknowledged >= target, timeout=120)
                assert reached, f"seed {seed}: no progress"
        process.kill()
        process.wait()
        run.stop.set()
        for thread in threads:
            thread.join(timeout=60)
        assert not run.failures, f"seed {seed}: {run.failures[0]!r}"
        assert run.acknowledged >= kill_after, f"seed {seed}: only {run.acknowledged} operations answered"
    assert not run.server_errors, f"seed {seed}: {run.server_errors[:5]}"
    with running_server(data) as (url, _):
        for state in states:
            try:
                check_after_restart(url, run.index, state)
            except AssertionError as exc:
                raise AssertionError(f"seed {seed}, {writers} writers: {exc}") from None
    # Shown with `pytest -s`: the figures of the trial.
    path = "bulks parsed in workers" if worker_parse else "in-process parsing"
    print(f"crash trial ({path}): {writers} writers, {run.acknowledged} operations acknowledged, 0 lost")
