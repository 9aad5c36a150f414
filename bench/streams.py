"""Moving every document: walks, scroll streams and the streaming export against SQLite's reads of
the same rows, in one run.

    python -m bench.streams --docs 1000000 --data /tmp/streams/d1m --sqlite /tmp/streams/s1m.db
    python -m bench.streams --docs 20000 --data /tmp/streams/d20k --sqlite /tmp/streams/s20k.db

The data is bench/generate.py's, loaded into index `bench` of `--data` when the folder does not
hold it yet (a folder built by bench.walk_start serves as it is), and into `--sqlite` (the `docs`
table and its `(ts, id)` index, what the keyset walk reads) when that file does not exist. Rows,
each timed from its first request to its last byte, with the documents it read checked:

- PIT walk, `search_after` pages of 1,000 sorted by `@timestamp` desc (`track_total_hits:
  false`), the client decoding each page with orjson; beside it SQLite's keyset walk by (ts, id)
  in pages of 1,000;
- one scroll stream (`_doc`, batches of 1,000) and one `_export` stream, bytes received (the
  client finds the scroll id and whether the batch is empty, decodes nothing; it keeps what it
  received and counts the hits or lines once the clock has stopped, so that counting, which a
  client writing the bytes somewhere does not do, is not timed); beside them SQLite's read of
  every row with `fetchmany(1000)`;
- 2 slices of a PIT (`_export` with `slice`) and of a scroll, each read by its own process at
  once, against the one stream;
- (`pages`) 400 PIT pages of 1 hit each, in walk order: what a page costs before its hits (the
  request, its hand-over to a worker, the task), so its CPU per 1,000 is per 1,000 requests;

and for each row the CPU per 1,000 documents of the server process, of its search workers, and of
the client, and the peak resident memory of the server's processes (sampled every 20 ms). With
`--rounds N` the rows run N times in turn against the same server: each goal's ratio per round,
and their median (a row lasts about a second at 1M documents, so one disturbance moves a round).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.client import Client, HttpError
from bench.generate import MAPPING, Dataset, generate
from bench.server import MemorySampler, Server
from bench.sqlite_baseline import SqliteBaseline
from bench.workloads.common import BULK_CHUNK, settle_heap

INDEX = "bench"
PAGE = 1_000
SMALL_PAGES = 400
_SCROLL_ID = re.compile(rb'"_scroll_id":"([^"]+)"')
_NO_HITS = b'"hits":[]}}'  # how a scroll's last, empty batch ends


@dataclass
class Row:
    name: str
    docs: int
    seconds: float
    server_cpu: float = 0.0  # seconds
    workers_cpu: float = 0.0
    client_cpu: float = 0.0
    peak_rss_mb: float = 0.0
    received_mb: float = 0.0

    @property
    def rate(self) -> float:
        return self.docs / self.seconds

    def per_1000(self, seconds: float) -> float:
        return seconds * 1000 / self.docs * 1000  # ms per 1,000 documents


#: What a client read: its documents (a count, or how to count them once the clock has stopped)
#: and the bytes it received.
Read = tuple["int | Callable[[], int]", int]


@dataclass
class Measured:
    """What a row's run returns: as `Read`, with the clients' CPU and the seconds from their
    release to the last one's end when they ran in processes of their own (else None: this
    process's, timed by `measure`)."""

    docs: int | Callable[[], int]
    received: int
    client_cpu: float | None = None
    seconds: float | None = None


# ---- clients (each also runs in a process of its own for the slices) -------------------------


def _client_cpu() -> float:
    times = os.times()
    return times.user + times.system


def pit_walk(url: str) -> Read:
    """Every document by `@timestamp` desc in `search_after` pages of 1,000, each page decoded."""
    client = Client(url)
    pit = client.json("POST", f"/{INDEX}/_pit?keep_alive=2m")["id"]
    body: dict[str, Any] = {
        "size": PAGE,
        "sort": [{"@timestamp": "desc"}],
        "track_total_hits": False,
        "pit": {"id": pit, "keep_alive": "2m"},
    }
    seen = received = 0
    while True:
        data = client.raw("POST", "/_search", orjson.dumps(body))
        received += len(data)
        hits = orjson.loads(data)["hits"]["hits"]
        if not hits:
            break
        seen += len(hits)
        body["search_after"] = hits[-1]["sort"]
    client.json("DELETE", "/_pit", {"id": pit})
    client.close()
    return seen, received


def pit_small_pages(url: str, pages: int = SMALL_PAGES) -> Read:
    """`pages` pages of 1 hit of a PIT walk by `@timestamp` desc, each decoded: the fixed cost of
    a page, beside the walks' cost per hit."""
    client = Client(url)
    pit = client.json("POST", f"/{INDEX}/_pit?keep_alive=2m")["id"]
    body: dict[str, Any] = {
        "size": 1,
        "sort": [{"@timestamp": "desc"}],
        "track_total_hits": False,
        "pit": {"id": pit, "keep_alive": "2m"},
    }
    seen = received = 0
    for _ in range(pages):
        data = client.raw("POST", "/_search", orjson.dumps(body))
        received += len(data)
        hits = orjson.loads(data)["hits"]["hits"]
        seen += len(hits)
        body["search_after"] = hits[-1]["sort"]
    client.json("DELETE", "/_pit", {"id": pit})
    client.close()
    return seen, received


def scroll_stream(url: str, slice_: dict[str, int] | None = None) -> Read:
    """Every document of a `_doc` scroll (or one slice), bytes received: the client finds the
    scroll id at the batch's head and whether it is empty at its end, without decoding; the
    batches' hits are counted later."""
    client = Client(url)
    body: dict[str, Any] = {"sort": ["_doc"], "size": PAGE}
    if slice_ is not None:
        body["slice"] = slice_
    data = client.raw("POST", f"/{INDEX}/_search?scroll=2m", orjson.dumps(body))
    batches = []
    while True:
        batches.append(data)
        match = _SCROLL_ID.search(data, 0, 4096)
        assert match is not None
        scroll_id = match.group(1).decode()
        if data.endswith(_NO_HITS):
            break
        data = client.raw("POST", "/_search/scroll", orjson.dumps({"scroll": "2m", "scroll_id": scroll_id}))
    client.json("DELETE", "/_search/scroll", {"scroll_id": [scroll_id]})
    client.close()
    return lambda: sum(batch.count(b'{"_index":') for batch in batches), sum(map(len, batches))


def export_stream(url: str, body: dict[str, Any] | None = None, path: str = f"/{INDEX}/_export") -> Read:
    """Every document of an `_export` stream, bytes received, nothing decoded; its lines are
    counted later, and the last must say the export is complete."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    conn.request("POST", path, body=orjson.dumps(body or {}), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise HttpError("POST", path, response.status, response.read())
    chunks = []
    while chunk := response.read1(1 << 20):
        chunks.append(chunk)
    conn.close()

    def lines() -> int:
        last = b"".join(chunks[-2:]).rstrip(b"\n").rsplit(b"\n", 1)[-1]
        assert orjson.loads(last)["_export"]["complete"] is True, last
        return sum(chunk.count(b"\n") for chunk in chunks) - 1

    return lines, sum(map(len, chunks))


def _in_process(target: Callable[..., Read], args: tuple, ready: Any, go: Any, out: Any) -> None:
    ready.wait()
    go.wait()
    started = _client_cpu()
    docs, received = target(*args)
    ended = time.perf_counter()  # CLOCK_MONOTONIC: one clock for every process
    cpu = _client_cpu() - started
    out.put((_count(docs), received, cpu, ended))


def _count(docs: int | Callable[[], int]) -> int:
    return docs() if callable(docs) else docs


def in_processes(jobs: list[tuple[Callable[..., Read], tuple]]) -> Measured:
    """Run each job in a process of its own, all released at once: their documents, bytes and
    CPU, and the seconds from the release to the last one's end (their counting not timed)."""
    context = multiprocessing.get_context("fork")
    ready = context.Barrier(len(jobs) + 1)
    go = context.Event()
    out = context.Queue()
    processes = [context.Process(target=_in_process, args=(t, a, ready, go, out)) for t, a in jobs]
    for process in processes:
        process.start()
    ready.wait()
    began = time.perf_counter()
    go.set()
    results = [out.get() for _ in processes]
    for process in processes:
        process.join()
    return Measured(
        sum(r[0] for r in results),
        sum(r[1] for r in results),
        sum(r[2] for r in results),
        max(r[3] for r in results) - began,
    )


# ---- the run --------------------------------------------------------------------------------


def measure(name: str, server: Server | None, expected: int, run: Callable[[], Measured]) -> Row:
    """Time `run` with the server's CPU; its documents are counted once the clock has stopped."""
    settle_heap()
    own0, below0 = server.cpu_seconds() if server is not None else (0.0, 0.0)
    client0 = _client_cpu()
    with MemorySampler(server) as sampler:
        began = time.perf_counter()
        measured = run()
        seconds = time.perf_counter() - began
    client_cpu = _client_cpu() - client0 if measured.client_cpu is None else measured.client_cpu
    own1, below1 = server.cpu_seconds() if server is not None else (0.0, 0.0)
    docs = _count(measured.docs)
    if docs != expected:
        raise AssertionError(f"{name}: read {docs} documents, expected {expected}")
    return Row(
        name,
        docs,
        seconds if measured.seconds is None else measured.seconds,
        own1 - own0,
        below1 - below0,
        client_cpu,
        sampler.peak_kb / 1024,
        measured.received / 1e6,
    )


def load_sqlite(path: Path, dataset: Dataset) -> SqliteBaseline:
    """The `docs` table and its (ts, id) index (what the keyset walk reads), once per file."""
    if not path.exists():
        db = sqlite3.connect(path)
        with db:
            db.execute(
                "CREATE TABLE docs (id TEXT PRIMARY KEY, ts INTEGER, status INTEGER, service TEXT,"
                " user_id TEXT, bytes INTEGER, message TEXT)"
            )
            db.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?)", dataset.rows())
            db.execute("CREATE INDEX docs_ts_id ON docs (ts, id)")
        db.close()
    return SqliteBaseline(path)


def load_index(url: str, dataset: Dataset) -> None:
    client = Client(url)
    try:
        count = client.json("GET", f"/{INDEX}/_count")["count"]
    except HttpError:
        count = None
    if count == len(dataset):
        return
    if count is not None:
        client.raw("DELETE", f"/{INDEX}")
    client.json("PUT", f"/{INDEX}", {"mappings": MAPPING})
    for body in dataset.bulk_bodies(BULK_CHUNK):
        client.raw("POST", f"/{INDEX}/_bulk", body, "application/x-ndjson")
    client.raw("POST", f"/{INDEX}/_refresh")
    client.close()


def run(url: str, server: Server | None, sqlite: SqliteBaseline, n: int, rows: set[str]) -> list[Row]:
    out: list[Row] = []

    def add(row: Row) -> None:
        out.append(row)
        print(_line(row), flush=True)

    if "walk" in rows:
        add(measure("SQLite keyset walk, pages of 1,000", None, n, lambda: Measured(sqlite.walk(PAGE), 0)))
        add(measure("PIT walk, pages of 1,000, orjson", server, n, lambda: Measured(*pit_walk(url))))
    if "stream" in rows:
        add(
            measure(
                "SQLite read of every row, fetchmany(1000)", None, n, lambda: Measured(sqlite.scan(PAGE), 0)
            )
        )
        add(measure("scroll, one stream, bytes", server, n, lambda: Measured(*scroll_stream(url))))
        add(measure("_export, one stream, bytes", server, n, lambda: Measured(*export_stream(url))))
    if "slices" in rows:
        client = Client(url)
        pit = client.json("POST", f"/{INDEX}/_pit?keep_alive=5m")["id"]
        jobs = [
            (export_stream, ({"pit": {"id": pit}, "slice": {"id": i, "max": 2}}, "/_export"))
            for i in range(2)
        ]
        add(measure("_export, 2 PIT slices in 2 processes", server, n, lambda: _jobs(url, jobs)))
        client.json("DELETE", "/_pit", {"id": pit})
        client.close()
        scrolls = [(scroll_stream, ({"id": i, "max": 2},)) for i in range(2)]
        add(measure("scroll, 2 slices in 2 processes", server, n, lambda: _jobs(url, scrolls)))
    if "pages" in rows:
        pages = min(SMALL_PAGES, n)

        add(
            measure(
                "PIT pages of 1 hit (per 1k requests)",
                server,
                pages,
                lambda: Measured(*pit_small_pages(url, pages)),
            )
        )
    return out


def _workers_ready(client: Client) -> bool:
    node = next(iter(client.json("GET", "/_nodes/stats/search_workers")["nodes"].values()))
    workers = node.get("search_workers")
    return workers is None or workers["ready"] == workers["count"]


def _jobs(url: str, jobs: list[tuple[Callable[..., Read], tuple]]) -> Measured:
    return in_processes([(target, (url, *args)) for target, args in jobs])


def _line(row: Row) -> str:
    cpu = [row.per_1000(seconds) for seconds in (row.server_cpu, row.workers_cpu, row.client_cpu)]
    return (
        f"{row.name:46s} {row.rate:>11,.0f} docs/s  {row.seconds:6.2f} s  CPU ms/1k docs: "
        f"server {cpu[0]:5.2f} workers {cpu[1]:5.2f} client {cpu[2]:5.2f}  "
        f"peak RSS {row.peak_rss_mb:6.0f} MB  {row.received_mb:7.0f} MB"
    )


def ratios(rows: list[Row]) -> dict[str, float]:
    """Each goal's ratio in one round of rows, by what it compares (its goal in brackets)."""
    by = {row.name.split(",")[0] + ("" if "slices" not in row.name else " slices"): row for row in rows}
    out = {}
    walk, keyset = by.get("PIT walk"), by.get("SQLite keyset walk")
    if walk and keyset:
        out["PIT walk / SQLite keyset walk (goal >= 0.6)"] = walk.rate / keyset.rate
    read = by.get("SQLite read of every row")
    for name in ("scroll", "_export"):
        one, two = by.get(name), by.get(f"{name} slices")
        if one and read:
            out[f"{name} one stream / SQLite read (goal >= 0.8)"] = one.rate / read.rate
        if one and two:
            out[f"{name} 2 slices / one stream (goal >= 1.2)"] = two.rate / one.rate
    return out


def summary(rounds: list[list[Row]]) -> list[str]:
    """Each round's ratios, their medians when there are several rounds, and the peak memory."""
    each = [ratios(rows) for rows in rounds]
    lines = [f"{what}: {' '.join(f'{r[what]:.2f}x' for r in each)}" for what in each[0]]
    if len(rounds) > 1:
        lines += [f"median {what}: {statistics.median(r[what] for r in each):.2f}x" for what in each[0]]
    peak = max((row.peak_rss_mb for rows in rounds for row in rows), default=0)
    return [*lines, f"server RSS (all processes), peak: {peak:.0f} MB (goal <= 1024)"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--data", type=Path, help="the server's data folder (loaded when it lacks the index)")
    parser.add_argument("--sqlite", type=Path, help="the SQLite file (loaded when missing)")
    parser.add_argument("--url", help="a running server holding the index (its CPU and memory are not read)")
    parser.add_argument("--rows", default="walk,stream,slices,pages", help="walk, stream, slices, pages")
    parser.add_argument("--rounds", type=int, default=1, help="the rows run this many times, in turn")
    parser.add_argument("--server-args", default="", help="added to `serve`'s command line")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    dataset = generate(args.docs, args.seed)
    sqlite = load_sqlite(args.sqlite or scratch / "docs.db", dataset)
    server = None
    url = args.url
    if url is None:
        data = args.data or scratch / "data"
        server = Server(data, scratch / "server.log", args.server_args.split())
        server.start(timeout=300)
        url = server.url
    try:
        load_index(url, dataset)
        if server is not None:  # the search workers start once the first request was answered
            server.wait_until(_workers_ready, 120)
        rounds = []
        for number in range(1, args.rounds + 1):
            if args.rounds > 1:
                print(f"round {number}", flush=True)
            rounds.append(run(url, server, sqlite, len(dataset), set(args.rows.split(","))))
    finally:
        if server is not None:
            server.stop()
        sqlite.close()
    for line in summary(rounds):
        print(line)
    if args.json is not None:
        args.json.write_bytes(
            orjson.dumps([[{**asdict(r), "rate": r.rate} for r in rows] for rows in rounds])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
