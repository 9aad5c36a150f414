"""W4: exporting the whole index with scroll, plainly, through the official helper, and sliced.

Slices are read by separate processes, as a real parallel export would, so that the client's own
JSON parsing does not cap the figure; SQLite's baseline for k slices is k processes reading a
k-th of the rows each (rowid ranges), so both sides do the same work with as many readers. Every
reader, on either side, freezes its heap out of the cycle collector's sight before it reads. The
memory cost of open scroll contexts is read from the server's /proc status with 500 of them open
(the default `search.max_open_scroll_context`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
from elasticsearch import helpers

from bench.client import Client, HttpError
from bench.harness import WALK_BUDGET_S, Context, Recorder, Row, Stopwatch, check
from bench.sqlite_baseline import SqliteBaseline
from bench.workloads.common import hit_ids, in_processes, settle_heap

BATCH = 1_000
SCROLL = "1m"
OPEN_SCROLLS = 500
SLICES = (2, 4)


def clear_scrolls(client: Client, scroll_ids: list[str] | None) -> None:
    """Free the given scroll contexts, or all of them (None).

    Elasticsearch answers 404 when there was nothing left to free: not a failure here.
    """
    try:
        if scroll_ids is None:
            client.raw("DELETE", "/_search/scroll/_all")
        else:
            client.json("DELETE", "/_search/scroll", {"scroll_id": scroll_ids})
    except HttpError as error:
        if error.status != 404:
            raise


def read_scroll(url: str, index: str, slice_: dict[str, int] | None = None) -> tuple[np.ndarray, int]:
    """Every document of one scroll (or slice of one): the ids read, as integers, and the bytes received.

    Runs in worker processes too, so it takes a URL rather than the caller's connection.
    """
    client = Client(url)
    body: dict[str, Any] = {"sort": ["_doc"], "size": BATCH}
    if slice_ is not None:
        body["slice"] = slice_
    settle_heap()
    data = client.raw("POST", f"/{index}/_search?scroll={SCROLL}", orjson.dumps(body))
    received, ids = 0, []
    watch = Stopwatch()
    while True:
        received += len(data)
        response = orjson.loads(data)
        hits = response["hits"]["hits"]
        if not hits:
            break
        ids.append(hit_ids(hits))
        watch.check_budget()
        data = client.raw(
            "POST", "/_search/scroll", orjson.dumps({"scroll": SCROLL, "scroll_id": response["_scroll_id"]})
        )
    clear_scrolls(client, [response["_scroll_id"]])
    client.close()
    return np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64), received


def _check_all(ids: np.ndarray, n: int, what: str) -> None:
    check(
        len(ids) == n and len(np.unique(ids)) == n,
        f"{what} returned {len(ids)} documents, {len(np.unique(ids))} distinct, want {n}",
    )


def _slice_worker(url: str, index: str, slice_: dict[str, int], start: Any, results: Any) -> None:
    """One slice in its own process; waits at `start` so that process start-up is not timed."""
    settle_heap()
    start.wait()
    try:
        results.put(read_scroll(url, index, slice_)[0])
    except Exception as error:  # handed to the parent, which reports it in the row
        results.put(error)


def _sliced(ctx: Context, slices: int) -> float:
    args = [(ctx.url, ctx.index, {"id": i, "max": slices}) for i in range(slices)]
    parts, seconds = in_processes(_slice_worker, args, start_timeout=60, budget=WALK_BUDGET_S + 60)
    _check_all(np.concatenate(parts), len(ctx.dataset), f"{slices} slices")
    return len(ctx.dataset) / seconds


def _sqlite_share_worker(path: Path, share: int, shares: int, start: Any, results: Any) -> None:
    """One of `shares` SQLite readers in its own process, reading its rowid range of the table."""
    sqlite = SqliteBaseline(path)
    settle_heap()
    start.wait()
    try:
        results.put(sqlite.scan(BATCH, share, shares))
    except Exception as error:  # handed to the parent, which reports it in the row
        results.put(error)
    finally:
        sqlite.close()


def _sqlite_sliced(ctx: Context, slices: int) -> float:
    """docs/s of `slices` SQLite reader processes reading the table together, a share each."""
    args = [(ctx.sqlite.path, i, slices) for i in range(slices)]
    parts, seconds = in_processes(_sqlite_share_worker, args, start_timeout=60, budget=WALK_BUDGET_S + 60)
    check(sum(parts) == len(ctx.dataset), f"{slices} SQLite readers read {sum(parts)} rows")
    return len(ctx.dataset) / seconds


def _open_scrolls_rss(ctx: Context, rec: Recorder, absolute: str, ratio: str) -> None:
    server = ctx.own_server()
    clear_scrolls(ctx.http, None)
    before = server.memory_kb("VmRSS")
    scroll_ids = []
    try:
        for _ in range(OPEN_SCROLLS):
            response = ctx.http.json(
                "POST", f"/{ctx.index}/_search?scroll={SCROLL}", {"sort": ["_doc"], "size": 10}
            )
            check(len(response["hits"]["hits"]) == 10, "a new scroll returned a short page")
            scroll_ids.append(response["_scroll_id"])
        after = server.memory_kb("VmRSS")
    finally:
        if scroll_ids:
            clear_scrolls(ctx.http, scroll_ids)
    rec.set(absolute, after / 1024)
    rec.set(ratio, after / before)


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W4")
    n = len(ctx.dataset)
    stream = rec.plan(f"one scroll stream, batches of {BATCH}, http.client", "docs/s", (">=", 300_000))
    stream_mb = rec.plan("one scroll stream, response bytes", "MB/s")
    scan = rec.plan("elasticsearch.helpers.scan", "docs/s")
    sliced = {
        k: rec.plan(f"{k} slices in {k} processes, total (SQLite: {k} reader processes)", "docs/s")
        for k in SLICES
    }
    rss = rec.plan(f"server RSS with {OPEN_SCROLLS} open scrolls", "MB")
    rss_ratio = rec.plan(f"RSS with {OPEN_SCROLLS} open scrolls / with none", "x", ("<=", 1.2))
    settle_heap()
    watch = Stopwatch()
    ctx.sqlite.scan(BATCH)
    baseline = n / watch.seconds()
    for name in (stream, scan):
        rec.baseline(name, baseline)
    for slices, name in sliced.items():
        with rec.step(name):
            rec.baseline(name, _sqlite_sliced(ctx, slices))

    with rec.step(stream, stream_mb):
        watch = Stopwatch()
        ids, received = read_scroll(ctx.url, ctx.index)
        seconds = watch.seconds()
        _check_all(ids, n, "the scroll")
        rec.set(stream, n / seconds)
        rec.set(stream_mb, received / seconds / 1e6)
    with rec.step(scan):
        watch = Stopwatch()
        ids = [hit["_id"] for hit in helpers.scan(ctx.es, index=ctx.index, size=BATCH, scroll=SCROLL)]
        seconds = watch.seconds()
        _check_all(np.array(ids, dtype=np.int64), n, "helpers.scan")
        rec.set(scan, n / seconds)
    for slices, name in sliced.items():
        with rec.step(name):
            rec.set(name, _sliced(ctx, slices))
    with rec.step(rss, rss_ratio):
        _open_scrolls_rss(ctx, rec, rss, rss_ratio)
    return rec.finish()
