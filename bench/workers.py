"""Search workers against `--search-workers 0`: one server's data, the same clients, one run.

    python -m bench.workers                    # 1,000,000 documents
    python -m bench.workers --docs 200000 --json workers.json

The data is loaded once; then the server is started on it twice, first with the default search
workers (one per core), then with `--search-workers 0` (every search in the server process), and
each start runs the same measurements from client *processes* (so the clients' own interpreter
is not what is measured):

- start-up: from spawning the server to its first answer to `GET /`;
- W6's queries (term on `service` + a random `@timestamp` range, sorted by time then id, first
  page of 100; every query distinct), after 40 warm-up queries from 4 clients (each search
  process builds the segments' sort orders once): one client, then 4 clients at once: queries/s,
  p50, p99;
- a scroll of every document (`_doc`, batches of 1,000) by 1 client, and sliced into 2 and 4
  slices read by as many client processes, which only count the hits: documents/s;
- one PIT walk (`_shard_doc`, `search_after`, pages of 1,000): documents/s;
- for each scroll and the walk, the CPU it took in the server process, in its search workers and
  in the clients (ms per 1,000 documents), and the docs/s that total would give with every core
  busy: the clients share the machine's cores with the server, so when the server process and
  the clients already keep all cores busy without workers, no split of the server's work between
  processes can go faster than that ceiling;
- `GET /` latency (p50, p99) while another client runs heavy aggregations over every document;
- resident memory of the server and its workers together, idle after start-up and at the end.

Each scroll and walk is checked: every document exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.client import Client
from bench.generate import generate, write_import_files
from bench.processes import client_processes
from bench.server import Server
from bench.workloads.top_pages import service_range_body

W6_PER_CLIENT = 150
WARM_UP_QUERIES = 10  # per client, 4 clients, before the W6 measurements
HEAVY_AGGS = {
    "size": 0,
    "aggs": {
        "by_service": {"terms": {"field": "service", "size": 50}, "aggs": {"b": {"sum": {"field": "bytes"}}}},
        "per_hour": {"date_histogram": {"field": "@timestamp", "fixed_interval": "1h"}},
    },
}


def _queries(first: int, last: int, seed: int, count: int) -> list[dict[str, Any]]:
    from bench.generate import SERVICES

    rng = np.random.default_rng(seed)
    span = last - first
    widths = np.exp(rng.uniform(np.log(3_600_000), np.log(span), size=count)).astype(np.int64)
    starts = first + (rng.random(count) * (span - widths)).astype(np.int64)
    services = rng.integers(0, len(SERVICES), size=count)
    return [
        service_range_body(SERVICES[s], int(lo), int(lo + w))
        for s, lo, w in zip(services.tolist(), starts.tolist(), widths.tolist(), strict=True)
    ]


def _query_client(
    url: str, bodies: list[dict[str, Any]], start: Any, path: str = "/bench/_search"
) -> list[float]:
    """One client process: its queries one after another (to `path`); the latency of each, in ms."""
    client = Client(url)
    encoded = [orjson.dumps(b) for b in bodies]
    start.wait()
    latencies = []
    for body in encoded:
        began = time.perf_counter()
        client.raw("POST", path, body)
        latencies.append((time.perf_counter() - began) * 1000)
    client.close()
    return latencies


def _scroll_client(url: str, slice_id: int | None, slices: int, start: Any) -> tuple[list[str], float]:
    """One client process reading a scroll (one slice of it): the ids it saw and its CPU seconds."""
    client = Client(url)
    body: dict[str, Any] = {"size": 1000, "sort": ["_doc"], "_source": False}
    if slice_id is not None:
        body["slice"] = {"id": slice_id, "max": slices}
    start.wait()
    began = time.process_time()
    page = client.json("POST", "/bench/_search?scroll=1m", body)
    ids = []
    while page["hits"]["hits"]:
        ids += [hit["_id"] for hit in page["hits"]["hits"]]
        page = client.json("POST", "/_search/scroll", {"scroll": "1m", "scroll_id": page["_scroll_id"]})
    client.raw("DELETE", "/_search/scroll", orjson.dumps({"scroll_id": page["_scroll_id"]}))
    client.close()
    return ids, time.process_time() - began


def _heavy_client(url: str, stop: Any) -> int:
    client = Client(url)
    runs = 0
    while not stop.is_set():
        client.raw("POST", "/bench/_search", orjson.dumps(HEAVY_AGGS))
        runs += 1
    client.close()
    return runs


def _in_processes(manager: Any, pool: Any, function: Any, argument_lists: list[tuple]) -> tuple[float, list]:
    """Run `function(*args, barrier)` in one process each; wall seconds from the moment all of them
    (and this process) reached the barrier."""
    barrier = manager.Barrier(len(argument_lists) + 1)
    results = [pool.apply_async(function, (*args, barrier)) for args in argument_lists]
    barrier.wait()
    began = time.perf_counter()
    values = [r.get() for r in results]
    return time.perf_counter() - began, values


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    return float(np.percentile(latencies, 50)), float(np.percentile(latencies, 99))


def _wait_workers(url: str, timeout: float = 60.0) -> None:
    client = Client(url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            stats = client.json("GET", "/_nodes/stats")
            node = next(iter(stats["nodes"].values()))
            workers = node.get("search_workers")
            if workers is None or workers["ready"] == workers["count"]:
                return
            time.sleep(0.05)
    finally:
        client.close()
    raise TimeoutError("search workers not ready")


def _measure(
    data: Path, log: Path, extra: list[str], n: int, first: int, last: int, queries: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    server = Server(data, log, args=extra)
    began = time.perf_counter()
    server.start()
    out["start-up, s"] = time.perf_counter() - began
    try:
        _wait_workers(server.url)
        out["RSS idle, MB"] = server.memory_kb("VmRSS") / 1024
        context = client_processes("bench.workers")
        manager = context.Manager()
        with context.Pool(5) as pool:
            # Each process that runs searches builds the segments' sort orders on its first query
            # (bench W6 reports that cost); warm every one up, then measure distinct queries.
            warm = [(server.url, _queries(first, last, 100 + c, WARM_UP_QUERIES)) for c in range(4)]
            _in_processes(manager, pool, _query_client, warm)
            seconds, (lat,) = _in_processes(
                manager, pool, _query_client, [(server.url, _queries(first, last, 1, queries))]
            )
            out["W6 1 client, q/s"] = queries / seconds
            out["W6 1 client p50, ms"], out["W6 1 client p99, ms"] = _percentiles(lat)
            lists = [(server.url, _queries(first, last, 10 + c, queries)) for c in range(4)]
            seconds, lats = _in_processes(manager, pool, _query_client, lists)
            out["W6 4 clients, q/s"] = 4 * queries / seconds
            out["W6 4 clients p50, ms"], out["W6 4 clients p99, ms"] = _percentiles(sum(lats, []))
            for slices in (1, 2, 4):
                args = [(server.url, None if slices == 1 else s, slices) for s in range(slices)]
                before = server.cpu_seconds()
                seconds, results = _in_processes(manager, pool, _scroll_client, args)
                ids = [i for part, _ in results for i in part]
                if len(ids) != n or len(set(ids)) != n:
                    raise RuntimeError(
                        f"scroll with {slices} slices: {len(ids)} hits, {len(set(ids))} distinct"
                    )
                name = f"scroll, {slices} slice(s)"
                out[f"{name}, docs/s"] = n / seconds
                _cpu_split(out, name, n, before, server.cpu_seconds(), sum(c for _, c in results))
            before = server.cpu_seconds()
            began_cpu = time.process_time()
            out["PIT walk, docs/s"] = _pit_walk(server.url, n)
            _cpu_split(out, "PIT walk", n, before, server.cpu_seconds(), time.process_time() - began_cpu)
            stop = manager.Event()
            heavy = pool.apply_async(_heavy_client, (server.url, stop))
            client = Client(server.url)
            client.raw("GET", "/")
            latencies = []
            for _ in range(300):
                began_get = time.perf_counter()
                client.raw("GET", "/")
                latencies.append((time.perf_counter() - began_get) * 1000)
                time.sleep(0.005)
            stop.set()
            out["heavy aggregations run"] = heavy.get()
            out["GET / while heavy p50, ms"], out["GET / while heavy p99, ms"] = _percentiles(latencies)
            client.close()
        manager.shutdown()
        out["RSS after, MB"] = server.memory_kb("VmRSS") / 1024
        out["RSS peak (sum of peaks), MB"] = server.memory_kb("VmHWM") / 1024
    finally:
        server.stop()
    return out


def _cpu_split(
    out: dict[str, Any],
    name: str,
    n: int,
    before: tuple[float, float],
    after: tuple[float, float],
    clients: float,
) -> None:
    """Where an export's CPU went, in ms per 1,000 documents (server process, its search workers,
    the clients), and the docs/s that total allows when every core of the machine does nothing
    else: the ceiling any split of the work between processes can reach on this machine."""
    server, workers = after[0] - before[0], after[1] - before[1]
    per_thousand = 1_000_000 / n
    out[f"{name}, CPU server, ms/1000 docs"] = server * per_thousand
    out[f"{name}, CPU workers, ms/1000 docs"] = workers * per_thousand
    out[f"{name}, CPU clients, ms/1000 docs"] = clients * per_thousand
    out[f"{name}, all cores busy, docs/s"] = (os.cpu_count() or 1) * n / (server + workers + clients)


def _pit_walk(url: str, n: int) -> float:
    client = Client(url)
    pit = client.json("POST", "/bench/_pit?keep_alive=1m")["id"]
    began = time.perf_counter()
    seen = 0
    body: dict[str, Any] = {"size": 1000, "pit": {"id": pit, "keep_alive": "1m"}, "sort": ["_shard_doc"]}
    body["track_total_hits"] = False
    while True:
        page = client.json("POST", "/_search", body)
        hits = page["hits"]["hits"]
        if not hits:
            break
        seen += len(hits)
        body["search_after"] = hits[-1]["sort"]
    seconds = time.perf_counter() - began
    client.raw("DELETE", "/_pit", orjson.dumps({"id": pit}))
    client.close()
    if seen != n:
        raise RuntimeError(f"PIT walk saw {seen} documents, want {n}")
    return n / seconds


def _load(work: Path, n: int) -> tuple[Path, int, int]:
    dataset = generate(n)
    records, mapping = write_import_files(dataset, work)
    data = work / "data"
    server = Server(data, work / "load.log", args=["--search-workers", "0"])
    server.start()
    try:
        command = [sys.executable, "-m", "leafsearch", "import", str(records), "bench", "--url", server.url]
        subprocess.run([*command, "--mapping", str(mapping), "--workers", "2", "--quiet"], check=True)
        Client(server.url).json("POST", "/bench/_refresh")
    finally:
        server.stop()
    return data, int(dataset.ts_ms.min()), int(dataset.ts_ms.max()) + 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--queries", type=int, default=W6_PER_CLIENT, help=f"W6 queries per client (default {W6_PER_CLIENT})"
    )
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="leafsearch-workers-"))
    try:
        data, first, last = _load(work, options.docs)
        workers = _measure(data, work / "workers.log", [], options.docs, first, last, options.queries)
        inline = _measure(
            data, work / "inline.log", ["--search-workers", "0"], options.docs, first, last, options.queries
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{options.docs:,} documents; default search workers vs --search-workers 0, same run")
    print(f"  {'':<34} {'workers':>10} {'0':>10} {'ratio':>7}")
    for key, value in workers.items():
        other = inline[key]
        ratio = value / other if other else float("nan")
        print(f"  {key:<34} {value:>10,.2f} {other:>10,.2f} {ratio:>7.2f}")
    w6 = workers["W6 4 clients, q/s"] / workers["W6 1 client, q/s"]
    print(f"  W6: 4 clients / 1 client with workers: {w6:.2f}x")
    if options.json:
        options.json.write_text(
            json.dumps({"docs": options.docs, "workers": workers, "inline": inline}, indent=2)
        )


if __name__ == "__main__":
    main()
