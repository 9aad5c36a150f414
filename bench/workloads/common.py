"""Index set-up and search helpers shared by the workloads."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import orjson

from bench import harness
from bench.client import HttpError
from bench.generate import MAPPING
from bench.harness import CheckFailed, Context, Stopwatch, check
from bench.processes import client_processes

BULK_CHUNK = 5_000
T = TypeVar("T")


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
    settle_merges(ctx, ctx.index)


#: How long the segments must stay unchanged, no merge running, for the index to count as merged.
SETTLED_SECONDS = 2.0
SETTLE_LIMIT_SECONDS = 600.0
SETTLE_POLL_SECONDS = 0.1


def settle_merges(ctx: Context, name: str) -> float:
    """Wait until the background merges a load started in index `name` are done, as a benchmark of
    a search engine waits for an index to be merged before it times searches (Rally's
    `force-merge` or wait steps): a read workload then measures the index a user searches once
    the load is over, not the merges of its first minutes beside it. How long it took goes to the
    progress log. Merges that a workload's own writes start (W7, W10) still run beside that
    workload. Returns the `time.monotonic()` at which the merges were first seen done (the
    quiet time waited after it, to be sure no other merge follows, is not part of the load)."""
    started = time.monotonic()
    last: tuple[int, int] | None = None
    since = started
    while time.monotonic() - started < SETTLE_LIMIT_SECONDS:
        merges = ctx.http.json("GET", f"/{name}/_stats/merge")["_all"]["primaries"]["merges"]
        segments = len(orjson.loads(ctx.http.raw("GET", f"/_cat/segments/{name}?format=json")))
        state = (merges["total"], segments)
        now = time.monotonic()
        if merges["current"] or state != last:
            last, since = state, now
        elif now - since >= SETTLED_SECONDS * harness.PACE:
            if since - started > 1:
                note = f"  merges of {name} settled in {since - started:.0f} s ({segments} segments)"
                print(note, file=sys.stderr)
            return since
        time.sleep(SETTLE_POLL_SECONDS)
    raise CheckFailed(f"the merges of {name} did not settle within {SETTLE_LIMIT_SECONDS:.0f} s")


def searchable(ctx: Context, name: str, watch: Stopwatch) -> float:
    """Seconds on `watch` (started with a load into index `name`) until what was loaded is
    searchable and merged: the final refresh, then every merge it and the load started, seen done
    by `settle_merges` (to within its poll). SQLite's load likewise ends with its index builds and
    its commit."""
    refresh(ctx, name)
    merged = settle_merges(ctx, name)
    return watch.seconds() - (time.monotonic() - merged)


def search(ctx: Context, body: dict[str, Any], path: str | None = None) -> dict[str, Any]:
    return ctx.http.json("POST", path or f"/{ctx.index}/_search", body)


def cursor_at(ctx: Context, depth: int, match: tuple[str, str] | None = None) -> tuple[int | None, tuple]:
    """A `search_after` timestamp for the page at about `depth` by `@timestamp` desc, valid on any
    snapshot (unlike a hit's sort values, whose `_shard_doc` or order of ties are one snapshot's):
    t + 1, t the timestamp at `depth`, so the page starts at the first hit of timestamp t, a few
    hits before `depth` when t is shared. None at depth 0 (no cursor). Also SQLite's keyset key
    of the same page."""
    if depth == 0:
        return None, ctx.sqlite.keyset_after(0)
    t = ctx.sqlite.keyset_after(depth + 1, match)[0]
    return t + 1, (t + 1, "")


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


#: The `_id` written and deleted again to make a new snapshot (beyond what any workload writes).
FRESH_ID = 30_000_000


def fresh_snapshot(ctx: Context) -> None:
    """A new snapshot of the benchmark index holding exactly the dataset, which no cache has seen:
    one document is written and deleted again, each made visible by a refresh. The HitLists (and
    anything else kept per snapshot) of the snapshots before cannot answer a request on it, while
    every answer, and so every check, stays the dataset's. What is kept per segment (sort orders,
    postings, source blocks) stays, as it does for a user's index after a refresh."""
    doc_id, source = extra_docs(ctx, FRESH_ID, np.array([future_ms(ctx)], dtype=np.int64))[0]
    ctx.http.raw("PUT", f"/{ctx.index}/_doc/{doc_id}?refresh=true", source.encode())
    ctx.http.raw("DELETE", f"/{ctx.index}/_doc/{doc_id}?refresh=true")


def on_fresh_snapshots(
    ctx: Context, request: Callable[[], T], count: int | None = None
) -> Iterator[Callable[[], T]]:
    """`request`, handed to `time_each` `count` times (FIRSTS by default), each time on a
    `fresh_snapshot` made before it (not timed): the first request of a query on a snapshot, as
    a user's index meets it after each refresh."""
    for _ in range(harness.FIRSTS if count is None else count):
        fresh_snapshot(ctx)
        yield request


def in_processes(
    target: Callable[..., None], args: list[tuple], *, start_timeout: float, budget: float
) -> tuple[list[Any], float]:
    """Run `target(*args[i], start, results)` in one process each, and time them from the moment
    they are all ready (each waits at `start` once set up, so process start-up and data loading
    are not timed) until each has put its result on `results`. An exception a process put there
    is raised here. Returns (results in finishing order, seconds)."""
    context = client_processes(target.__module__)
    start, results = context.Barrier(len(args) + 1), context.Queue()
    workers = [context.Process(target=target, daemon=True, args=(*a, start, results)) for a in args]
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
