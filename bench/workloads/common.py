"""Index set-up and search helpers shared by the workloads."""

from __future__ import annotations

import gc
import multiprocessing
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

from bench.client import HttpError
from bench.generate import MAPPING
from bench.harness import CheckFailed, Context, Stopwatch, check

BULK_CHUNK = 5_000


def settle_heap() -> None:
    """Put everything allocated so far out of the cycle collector's sight before a timed read.

    A walk parses thousands of hit dicts per page; each collection they trigger would otherwise
    rescan whatever earlier workloads left alive, and the figure would measure the client.
    """
    gc.collect()
    gc.freeze()


def hit_ids(hits: list[dict[str, Any]]) -> np.ndarray:
    """A page's ids (zero-padded integers) as one small array: a walk keeps a million of them, and
    as Python strings they would grow the heap every later response is parsed into."""
    return np.array([hit["_id"] for hit in hits], dtype=np.int64)


def create_index(ctx: Context, name: str) -> None:
    """A fresh index with the benchmark mapping (an older one of that name is deleted)."""
    try:
        ctx.http.raw("DELETE", f"/{name}")
    except HttpError as error:
        if error.status != 404:
            raise
    ctx.http.json("PUT", f"/{name}", {"mappings": MAPPING})


def bulk_raw(ctx: Context, name: str, bodies: list[bytes]) -> int:
    """POST pre-encoded NDJSON bodies; the number of documents the server acknowledged."""
    indexed = 0
    for body in bodies:
        response = orjson.loads(ctx.http.raw("POST", f"/{name}/_bulk", body, "application/x-ndjson"))
        failed = [item for item in response["items"] if "error" in next(iter(item.values()))]
        check(
            not response["errors"] and not failed,
            f"bulk reported errors, first: {failed[0] if failed else response['errors']}",
        )
        indexed += len(response["items"])
    return indexed


def count(ctx: Context, name: str) -> int:
    return ctx.http.json("GET", f"/{name}/_count")["count"]


def refresh(ctx: Context, name: str) -> None:
    ctx.http.json("POST", f"/{name}/_refresh")


def ensure_loaded(ctx: Context) -> None:
    """Make sure the benchmark index holds the dataset, whether or not W0 ran (or succeeded), and
    that the merges the load started are done (`settle_merges`)."""
    try:
        loaded = count(ctx, ctx.index) == len(ctx.dataset)
    except HttpError as error:
        if error.status != 404:
            raise
        loaded = False
    if not loaded:
        create_index(ctx, ctx.index)
        bulk_raw(ctx, ctx.index, ctx.dataset.bulk_bodies(BULK_CHUNK))
        refresh(ctx, ctx.index)
        check(
            count(ctx, ctx.index) == len(ctx.dataset), "the index does not hold every document after loading"
        )
    settle_merges(ctx)


#: How long the segments must stay unchanged, no merge running, for the index to count as merged.
SETTLED_SECONDS = 2.0
SETTLE_LIMIT_SECONDS = 600.0


def settle_merges(ctx: Context) -> None:
    """Wait until the background merges a load started are done, as a benchmark of a search
    engine waits for an index to be merged before it times searches (Rally's `force-merge` or
    wait steps): a read workload then measures the index a user searches once the load is over,
    not the merges of its first minutes beside it. How long it took goes to the progress log.
    Merges that a workload's own writes start (W7, W10) still run beside that workload."""
    started = time.monotonic()
    last: tuple[int, int] | None = None
    since = started
    while time.monotonic() - started < SETTLE_LIMIT_SECONDS:
        merges = ctx.http.json("GET", f"/{ctx.index}/_stats/merge")["_all"]["primaries"]["merges"]
        segments = len(orjson.loads(ctx.http.raw("GET", f"/_cat/segments/{ctx.index}?format=json")))
        state = (merges["total"], segments)
        now = time.monotonic()
        if merges["current"] or state != last:
            last, since = state, now
        elif now - since >= SETTLED_SECONDS:
            waited = now - started - SETTLED_SECONDS
            if waited > 1:
                note = f"  merges after the load settled in {waited:.0f} s ({segments} segments)"
                print(note, file=sys.stderr)
            return
        time.sleep(0.25)
    raise CheckFailed(f"the index's merges did not settle within {SETTLE_LIMIT_SECONDS:.0f} s")


def search(ctx: Context, body: dict[str, Any], path: str | None = None) -> dict[str, Any]:
    return ctx.http.json("POST", path or f"/{ctx.index}/_search", body)


def check_timestamps(hits: list[dict], expected: list[tuple], what: str) -> None:
    """The page's sort timestamps must be SQLite's at the same depth (ties do not change them)."""
    got = [hit["sort"][0] for hit in hits]
    want = [row[0] for row in expected]
    if got == want:
        return
    differ = (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b)
    at = next(differ, min(len(got), len(want)))
    raise CheckFailed(
        f"{what}: {len(got)} hits, SQLite has {len(want)}; first difference at hit {at}: "
        f"{got[at : at + 1]} vs {want[at : at + 1]}"
    )


def future_ms(ctx: Context) -> int:
    """A timestamp an hour after the dataset's newest: documents written from there on sort first
    by `@timestamp` desc and fall outside every range drawn from the dataset's span."""
    return int(ctx.dataset.ts_ms.max()) + 3_600_000


def extra_docs(ctx: Context, first: int, timestamps_ms: np.ndarray) -> list[tuple[str, str]]:
    """(`_id`, `_source`) of documents written beyond the dataset: ids from `first` on (zero-padded
    like the dataset's), the given timestamps, the other fields copied from the dataset's docs."""
    n = len(ctx.dataset)
    stamps = np.datetime_as_string(timestamps_ms.astype("datetime64[ms]"), unit="ms", timezone="UTC")
    docs = []
    for k, stamp in enumerate(stamps.tolist()):
        i, doc_id = k % n, f"{first + k:010d}"
        d = ctx.dataset
        docs.append(
            (
                doc_id,
                f'{{"@timestamp":"{stamp}","status":{d.status[i]},"service":"{d.services[i]}",'
                f'"user_id":"{d.users[i]}","bytes":{d.nbytes[i]},"message":"{d.messages[i]}",'
                f'"id":"{doc_id}"}}',
            )
        )
    return docs


def ndjson_index(docs: list[tuple[str, str]]) -> bytes:
    return "".join(f'{{"index":{{"_id":"{i}"}}}}\n{source}\n' for i, source in docs).encode()


def remove_extra_docs(ctx: Context, ids: list[str]) -> None:
    """Delete what a workload wrote beyond the dataset, so the next workloads find exactly it."""
    for k in range(0, len(ids), BULK_CHUNK):
        body = "".join(f'{{"delete":{{"_id":"{i}"}}}}\n' for i in ids[k : k + BULK_CHUNK]).encode()
        bulk_raw(ctx, ctx.index, [body])
    refresh(ctx, ctx.index)
    check(count(ctx, ctx.index) == len(ctx.dataset), "the extra documents are still counted after deletion")


def in_processes(
    target: Callable[..., None], args: list[tuple], *, start_timeout: float, budget: float
) -> tuple[list[Any], float]:
    """Run `target(*args[i], start, results)` in one process each, and time them from the moment
    they are all ready (each waits at `start` once set up, so process start-up and data loading
    are not timed) until each has put its result on `results`. An exception a process put there
    is raised here. Returns (results in finishing order, seconds)."""
    spawn = multiprocessing.get_context("spawn")  # no inherited client sockets or threads
    start, results = spawn.Barrier(len(args) + 1), spawn.Queue()
    workers = [spawn.Process(target=target, daemon=True, args=(*a, start, results)) for a in args]
    for worker in workers:
        worker.start()
    try:
        start.wait(timeout=start_timeout)
        watch = Stopwatch()
        parts = [results.get(timeout=budget) for _ in workers]
        seconds = watch.seconds()
    finally:
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.kill()
    for part in parts:
        if isinstance(part, Exception):
            raise part
    return parts, seconds
