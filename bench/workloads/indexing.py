"""W0: bulk indexing throughput, size on disk, peak memory, and restart time after kill -9."""

from __future__ import annotations

import itertools
import time
from typing import Any

import orjson
from elasticsearch import Elasticsearch, OrjsonSerializer, helpers

from bench.client import Client
from bench.generate import generate
from bench.harness import CheckFailed, Context, Recorder, Row, Stopwatch, Unsupported, check
from bench.server import disk_bytes
from bench.workloads.common import (
    BULK_CHUNK,
    bulk_raw,
    count,
    create_index,
    in_processes,
    searchable,
    settle_heap,
)

RAW_INDEX = "bench-raw"
ORJSON_INDEX = "bench-orjson"
PARALLEL_INDEX = "bench-parallel"
CLIENTS = 4
RESTART_TIMEOUT_S = 120.0
WORKER_BUDGET_S = 1800.0


def _client_worker(url: str, kind: str, n: int, seed: int, part: int, start: Any, results: Any) -> None:
    """One of `CLIENTS` client processes indexing its share of the dataset (the whole dataset is
    generated again here, before the start barrier, so only the requests are timed, and frozen out
    of the cycle collector's sight, as in the parent whose clients and SQLite's load it is
    compared with)."""
    try:
        dataset = generate(n, seed)
        settle_heap()
        lo, hi = part * n // CLIENTS, (part + 1) * n // CLIENTS
        if kind == "raw":
            bodies = dataset.bulk_bodies(BULK_CHUNK)[part::CLIENTS]
            client = Client(url)
            start.wait()
            cpu = time.process_time()
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
            cpu = time.process_time()
            indexed, _ = helpers.bulk(es, actions, chunk_size=BULK_CHUNK)
            es.close()
        results.put((indexed, time.process_time() - cpu))
    except Exception as error:  # handed to the parent, which reports it in the row
        results.put(error)


def _concurrent_clients(ctx: Context, kind: str, seed: int) -> tuple[float, Cpu | None]:
    """docs/s of `CLIENTS` client processes indexing the dataset together into a fresh index, until
    it is searchable and merged, and the CPU each side spent on the requests (None against a
    server given by URL)."""
    n = len(ctx.dataset)
    create_index(ctx, PARALLEL_INDEX)
    args = [(ctx.url, kind, n, seed, part) for part in range(CLIENTS)]
    before = ctx.server.cpu_by_role() if ctx.server is not None else None
    parts, seconds = in_processes(_client_worker, args, start_timeout=300, budget=WORKER_BUDGET_S)
    after = ctx.server.cpu_by_role() if ctx.server is not None else None
    seconds += searchable(ctx, PARALLEL_INDEX, Stopwatch())
    merged = ctx.server.cpu_by_role() if ctx.server is not None else None
    indexed = sum(part[0] for part in parts)
    seen = count(ctx, PARALLEL_INDEX)
    check(indexed == n and seen == n, f"{CLIENTS} clients indexed {indexed}, _count {seen}, want {n}")
    ctx.http.raw("DELETE", f"/{PARALLEL_INDEX}")
    cpu = None
    if before is not None and after is not None and merged is not None:
        # (roles as they are after: the merge worker starts with the first merge)
        spent = {role: cpu - before.get(role, 0.0) for role, cpu in after.items()}
        to_merged = {role: cpu - before.get(role, 0.0) for role, cpu in merged.items()}
        server = spent.pop("server", 0.0)
        clients = sum(part[1] for part in parts)
        until_merged = (to_merged.get("search worker", 0.0), to_merged.get("merge worker", 0.0))
        cpu = Cpu(server, sum(spent.values()), clients, n, *until_merged)
    return n / seconds, cpu


class Cpu:
    """CPU seconds of an indexing run: the server process, its worker processes, the clients,
    until the clients were done; and the search workers' (builds, parsing) and the merge worker's
    until the load was searchable and merged (the builds and merges it left running included)."""

    def __init__(
        self,
        server: float,
        workers: float,
        clients: float,
        docs: int,
        search_merged: float = 0.0,
        merge_merged: float = 0.0,
    ) -> None:
        self.server, self.workers, self.clients, self.docs = server, workers, clients, docs
        self.search_merged, self.merge_merged = search_merged, merge_merged

    def per_doc(self, seconds: float) -> float:
        return seconds / self.docs * 1e6


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
    # Where the CPU goes, which wall-clock figures on a busy machine do not show: what the server
    # process (its interpreter: one thread at a time) and the search workers spend per document.
    raw_server_1 = rec.plan("raw NDJSON, 1 client: server process CPU", "us/doc")
    raw_server = rec.plan(f"raw NDJSON, {CLIENTS} clients: server process CPU", "us/doc")
    raw_workers = rec.plan(f"raw NDJSON, {CLIENTS} clients: worker processes CPU", "us/doc")
    raw_clients = rec.plan(f"raw NDJSON, {CLIENTS} clients: client processes CPU", "us/doc")
    raw_search = rec.plan(f"raw NDJSON, {CLIENTS} clients until merged: search workers CPU", "us/doc")
    raw_merge = rec.plan(f"raw NDJSON, {CLIENTS} clients until merged: merge worker CPU", "us/doc")
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
        seconds = searchable(ctx, ctx.index, watch)
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

    with rec.step(raw, raw_server_1):
        bodies = ctx.dataset.bulk_bodies(BULK_CHUNK)
        create_index(ctx, RAW_INDEX)
        server = ctx.server  # None with --url: no CPU figure
        before = server.cpu_seconds()[0] if server is not None else 0.0
        watch = Stopwatch()
        indexed = bulk_raw(ctx, RAW_INDEX, bodies)
        if server is not None:
            rec.set(raw_server_1, (server.cpu_seconds()[0] - before) / n * 1e6)
        else:
            rec.fail([raw_server_1], "needs the server process (--url given)")
        seconds = searchable(ctx, RAW_INDEX, watch)
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
        seconds = searchable(ctx, ORJSON_INDEX, watch)
        client.close()
        seen = count(ctx, ORJSON_INDEX)
        check(indexed == n and seen == n, f"helpers.bulk (orjson) indexed {indexed}, _count {seen}, want {n}")
        ctx.http.raw("DELETE", f"/{ORJSON_INDEX}")
        rec.set(fast_client, n / seconds)

    # Concurrent clients share translog fsyncs (group commit): together they must index faster
    # than one client alone, never slower.
    with rec.step(bulk_many, bulk_ratio):
        rec.set(bulk_many, _concurrent_clients(ctx, "helpers", ctx.seed)[0])
        rec.set(bulk_ratio, rec.value(bulk_many) / rec.value(bulk))
    with rec.step(raw_many, raw_ratio, raw_server, raw_workers, raw_clients, raw_search, raw_merge):
        docs_per_s, cpu = _concurrent_clients(ctx, "raw", ctx.seed)
        rec.set(raw_many, docs_per_s)
        rec.set(raw_ratio, rec.value(raw_many) / rec.value(raw))
        if cpu is None:
            raise Unsupported("needs the server process (--url given)")
        rec.set(raw_server, cpu.per_doc(cpu.server))
        rec.set(raw_workers, cpu.per_doc(cpu.workers))
        rec.set(raw_clients, cpu.per_doc(cpu.clients))
        rec.set(raw_search, cpu.per_doc(cpu.search_merged))
        rec.set(raw_merge, cpu.per_doc(cpu.merge_merged))

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
