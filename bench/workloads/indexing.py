"""W0: bulk indexing throughput, size on disk, peak memory, and restart time after kill -9."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from elasticsearch import Elasticsearch, OrjsonSerializer, helpers

from bench.client import Client
from bench.generate import generate
from bench.harness import CheckFailed, Context, Recorder, Row, Stopwatch, check
from bench.server import disk_bytes
from bench.workloads.common import BULK_CHUNK, bulk_raw, count, create_index, in_processes, refresh

RAW_INDEX = "bench-raw"
ORJSON_INDEX = "bench-orjson"
PARALLEL_INDEX = "bench-parallel"
CLIENTS = 4
RESTART_TIMEOUT_S = 120.0
WORKER_BUDGET_S = 1800.0


def _client_worker(url: str, kind: str, n: int, seed: int, part: int, start: Any, results: Any) -> None:
    """One of `CLIENTS` client processes indexing its share of the dataset (the whole dataset is
    generated again here, before the start barrier, so only the requests are timed)."""
    try:
        dataset = generate(n, seed)
        lo, hi = part * n // CLIENTS, (part + 1) * n // CLIENTS
        if kind == "raw":
            bodies = dataset.bulk_bodies(BULK_CHUNK)[part::CLIENTS]
            client = Client(url)
            start.wait()
            indexed = 0
            for body in bodies:
                response = orjson.loads(
                    client.raw("POST", f"/{PARALLEL_INDEX}/_bulk", body, "application/x-ndjson")
                )
                if response["errors"]:
                    raise CheckFailed("a bulk request reported errors")
                indexed += len(response["items"])
            client.close()
        else:
            es = Elasticsearch(url, request_timeout=300)
            actions = itertools.islice(dataset.actions(PARALLEL_INDEX), lo, hi)
            start.wait()
            indexed, _ = helpers.bulk(es, actions, chunk_size=BULK_CHUNK)
            es.close()
        results.put(indexed)
    except Exception as error:  # handed to the parent, which reports it in the row
        results.put(error)


def _concurrent_clients(ctx: Context, kind: str, seed: int) -> float:
    """docs/s of `CLIENTS` client processes indexing the dataset together into a fresh index."""
    n = len(ctx.dataset)
    create_index(ctx, PARALLEL_INDEX)
    args = [(ctx.url, kind, n, seed, part) for part in range(CLIENTS)]
    parts, seconds = in_processes(_client_worker, args, start_timeout=300, budget=WORKER_BUDGET_S)
    refresh(ctx, PARALLEL_INDEX)
    seen = count(ctx, PARALLEL_INDEX)
    check(sum(parts) == n and seen == n, f"{CLIENTS} clients indexed {sum(parts)}, _count {seen}, want {n}")
    ctx.http.raw("DELETE", f"/{PARALLEL_INDEX}")
    return n / seconds


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W0")
    n = len(ctx.dataset)
    bulk = rec.plan(f"helpers.bulk, chunks of {BULK_CHUNK}", "docs/s", (">=", 50_000))
    raw = rec.plan(f"raw NDJSON POST /_bulk, chunks of {BULK_CHUNK}", "docs/s", (">=", 50_000))
    fast_client = rec.plan("helpers.bulk, client with OrjsonSerializer", "docs/s")
    bulk_many = rec.plan(f"helpers.bulk, {CLIENTS} client processes at once", "docs/s")
    bulk_ratio = rec.plan(f"helpers.bulk, {CLIENTS} clients / 1 client", "x", (">=", 1))
    raw_many = rec.plan(f"raw NDJSON, {CLIENTS} client processes at once", "docs/s")
    raw_ratio = rec.plan(f"raw NDJSON, {CLIENTS} clients / 1 client", "x", (">=", 1))
    disk = rec.plan("data folder after refresh (du / N)", "bytes/doc", ("<=", 240))
    rss = rec.plan("server peak RSS after indexing (VmHWM)", "MB", ("<=", 1024))
    restart = rec.plan("restart after kill -9 until _count = N", "s", ("<=", 2))
    for name in (bulk, raw, fast_client, bulk_many, raw_many):
        rec.baseline(name, n / ctx.sqlite.load_seconds)
    rec.baseline(disk, ctx.sqlite.file_bytes() / n)

    with rec.step(bulk):
        create_index(ctx, ctx.index)
        watch = Stopwatch()
        indexed, _ = helpers.bulk(ctx.es, ctx.dataset.actions(ctx.index), chunk_size=BULK_CHUNK)
        seconds = watch.seconds()
        refresh(ctx, ctx.index)
        seen = count(ctx, ctx.index)
        check(indexed == n and seen == n, f"helpers.bulk indexed {indexed}, _count {seen}, want {n}")
        rec.set(bulk, n / seconds)

    # Memory and disk are read before the second index exists, so they describe N documents.
    with rec.step(rss):
        rec.value(bulk)
        rec.set(rss, ctx.own_server().memory_kb("VmHWM") / 1024)
    with rec.step(disk):
        rec.value(bulk)
        rec.set(disk, disk_bytes(ctx.own_server().data) / n)

    with rec.step(raw):
        bodies = ctx.dataset.bulk_bodies(BULK_CHUNK)
        create_index(ctx, RAW_INDEX)
        watch = Stopwatch()
        indexed = bulk_raw(ctx, RAW_INDEX, bodies)
        seconds = watch.seconds()
        refresh(ctx, RAW_INDEX)
        seen = count(ctx, RAW_INDEX)
        check(indexed == n and seen == n, f"raw _bulk indexed {indexed}, _count {seen}, want {n}")
        ctx.http.raw("DELETE", f"/{RAW_INDEX}")
        rec.set(raw, n / seconds)

    # The official client's default serializer (the standard json module) costs about as much
    # per document as the server does; its documented orjson serializer shows the same helper
    # with a lighter client.
    with rec.step(fast_client):
        create_index(ctx, ORJSON_INDEX)
        client = Elasticsearch(ctx.url, request_timeout=120, serializer=OrjsonSerializer())
        watch = Stopwatch()
        indexed, _ = helpers.bulk(client, ctx.dataset.actions(ORJSON_INDEX), chunk_size=BULK_CHUNK)
        seconds = watch.seconds()
        client.close()
        refresh(ctx, ORJSON_INDEX)
        seen = count(ctx, ORJSON_INDEX)
        check(indexed == n and seen == n, f"helpers.bulk (orjson) indexed {indexed}, _count {seen}, want {n}")
        ctx.http.raw("DELETE", f"/{ORJSON_INDEX}")
        rec.set(fast_client, n / seconds)

    # Concurrent clients share translog fsyncs (group commit): together they must index faster
    # than one client alone, never slower.
    with rec.step(bulk_many, bulk_ratio):
        rec.set(bulk_many, _concurrent_clients(ctx, "helpers", ctx.seed))
        rec.set(bulk_ratio, rec.value(bulk_many) / rec.value(bulk))
    with rec.step(raw_many, raw_ratio):
        rec.set(raw_many, _concurrent_clients(ctx, "raw", ctx.seed))
        rec.set(raw_ratio, rec.value(raw_many) / rec.value(raw))

    with rec.step(restart):
        rec.value(bulk)
        server = ctx.own_server()
        server.kill()
        ctx.http.close()
        watch = Stopwatch()
        server.spawn()
        try:
            server.wait_until(
                lambda client: client.json("GET", f"/{ctx.index}/_count")["count"] == n, RESTART_TIMEOUT_S
            )
        except TimeoutError:
            raise CheckFailed(f"_count is {count(ctx, ctx.index)} after restart, want {n}") from None
        rec.set(restart, watch.seconds())
    return rec.finish()
