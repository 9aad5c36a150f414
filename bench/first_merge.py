"""The CPU of a served node's first merge, and the memory of its merge worker.

    python -m bench.first_merge                     # 5 runs, 1 search worker
    python -m bench.first_merge --runs 3 --search-workers 0

Each run starts `leafsearch serve` on a fresh folder (the `leafsearch` this process imports, as
`leafsearch.testing` arranges), waits until its search workers are ready and its process tree
idle, then writes twelve bulk requests of `--docs` documents, each refreshed into a segment of its
own (refresh_interval -1 otherwise), and waits until the node's background merges have merged
them (`_stats/merge`) and the tree is idle again. Reported per run, from /proc (10 ms ticks):
the CPU the whole process tree used over the load and its merge, the merge worker's own CPU (its
start, its imports when spawned, and the merge), and the merge worker's PSS and RSS and the
tree's PSS once the merge is done.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.startup import _cpu_seconds
from leafsearch.testing import Server

SEGMENTS = 12  # the merge policy's smallest tier merges by 10


def _descendants(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
            found += [int(child), *_descendants(int(child))]
    return found


def _own_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory(pid: int) -> dict[str, int]:
    """The process's `Pss` and `Rss` in kB (/proc/<pid>/smaps_rollup)."""
    found = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("Pss", "Rss"):
            found[name] = int(value.split()[0])
    return found


def _idle(pid: int) -> float:
    """Wait until the tree used under 20 ms of CPU in half a second (the server's background
    preload, a worker's start); the tree's CPU seconds then."""
    before = _cpu_seconds(pid)
    while True:
        time.sleep(0.5)
        now = _cpu_seconds(pid)
        if now - before < 0.02:
            return now
        before = now


def _wait(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.05)


def run_once(workers: int, docs: int) -> dict[str, float]:
    with Server(args=["--search-workers", str(workers)]) as server, httpx.Client(base_url=server.url) as http:
        assert server.process is not None
        pid = server.process.pid

        def stats() -> dict[str, Any]:
            nodes = http.get("/_nodes/stats/search_workers").json()["nodes"]
            return next(iter(nodes.values())).get("search_workers") or {"ready": 0, "count": 0, "workers": []}

        _wait(lambda: stats()["ready"] == stats()["count"])
        body = {"settings": {"number_of_shards": 1, "refresh_interval": "-1"}}
        http.put("/first", json=body).raise_for_status()
        start = _idle(pid)
        before = set(_descendants(pid))
        for segment in range(SEGMENTS):
            ids = range(segment * docs, (segment + 1) * docs)
            documents = [{"n": i, "tag": f"t{i % 7}", "text": f"word{i % 97} x"} for i in ids]
            lines = b"".join(b'{"index":{}}\n' + orjson.dumps(document) + b"\n" for document in documents)
            headers = {"content-type": "application/x-ndjson"}
            http.post("/first/_bulk?refresh=true", content=lines, headers=headers).raise_for_status()

        def merged() -> bool:
            merges = http.get("/first/_stats/merge").json()["indices"]["first"]["primaries"]["merges"]
            return merges["total"] >= 1 and merges["current"] == 0

        _wait(merged)
        end = _idle(pid)
        searching = {worker["pid"] for worker in stats()["workers"]}
        new = [
            p
            for p in set(_descendants(pid)) - before - searching
            if b"resource_tracker" not in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        (worker,) = new
        memory = _memory(worker)
        tree = sum(_memory(p)["Pss"] for p in [pid, *_descendants(pid)])
        return {
            "tree CPU s": end - start,
            "merge worker CPU s": _own_cpu(worker),
            "merge worker PSS MB": memory["Pss"] / 1024,
            "merge worker RSS MB": memory["Rss"] / 1024,
            "tree PSS MB": tree / 1024,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--search-workers", type=int, default=1)
    parser.add_argument("--docs", type=int, default=100, help="documents per bulk request (segment)")
    args = parser.parse_args()
    runs = []
    for n in range(args.runs):
        runs.append(run_once(args.search_workers, args.docs))
        print(f"run {n + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in runs[-1].items()), flush=True)
    print("median: " + ", ".join(f"{k} {statistics.median(r[k] for r in runs):.2f}" for k in runs[0]))


if __name__ == "__main__":
    main()
