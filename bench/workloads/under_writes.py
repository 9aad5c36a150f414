"""W10: W6's distinct pages while documents are indexed into the same index, against idle.

First the idle p99 of W6-shaped queries (distinct services and time ranges, sorted by time desc
then id) is measured; then, with `refresh_interval: 1s`, a background thread posts a bulk of 500
documents every 0.1 s (5,000 docs/s) into the benchmark index while more distinct queries are
timed. Each refresh brings a new segment that the next queries must order and search. The new
documents lie an hour after the dataset's span, so every query's answer stays SQLite's and is
checked; `_count` must then be the dataset plus every acknowledged document. They are deleted
afterwards and the index's refresh interval is reset.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import orjson

from bench import harness
from bench.client import Client
from bench.harness import CheckFailed, Context, Recorder, Row, check
from bench.workloads.common import (
    count,
    extra_docs,
    future_ms,
    ndjson_index,
    refresh,
    remove_extra_docs,
)
from bench.workloads.top_pages import (
    check_service_range,
    service_range_queries,
    timed_service_range,
)

IDLE_QUERIES = 200
BATCH = 500
PERIOD_S = 0.1
WRITE_S = 6.0
FIRST_ID = 10_000_000  # beyond any --docs in use: the ids of the written documents


class Writer(threading.Thread):
    """Posts pre-encoded bulks on a fixed schedule from its own connection; records what it could."""

    def __init__(self, url: str, index: str, bodies: list[bytes]) -> None:
        super().__init__(daemon=True)
        self.url, self.index, self.bodies = url, index, bodies
        self.acknowledged = 0
        self.seconds = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        client = Client(self.url)
        start = time.perf_counter()
        try:
            for k, body in enumerate(self.bodies):
                data = client.raw("POST", f"/{self.index}/_bulk", body, "application/x-ndjson")
                if b'"errors":false' not in data[:64] and orjson.loads(data)["errors"]:
                    raise CheckFailed("a background bulk reported errors")
                self.acknowledged += BATCH
                delay = start + (k + 1) * PERIOD_S - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
        except BaseException as error:  # handed to the workload, which reports it in its rows
            self.error = error
        finally:
            self.seconds = time.perf_counter() - start
            client.close()


def _queries_while(writer: Writer, queries: list[tuple[str, int, int]]) -> Iterator[tuple[str, int, int]]:
    """The queries, handed out lazily one after the other for as long as the writer writes."""
    for query in queries:
        if not writer.is_alive():
            return
        yield query


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W10")
    idle = (
        rec.plan(f"{IDLE_QUERIES} distinct W6 queries, idle, p50", "ms"),
        rec.plan(f"{IDLE_QUERIES} distinct W6 queries, idle, p99", "ms"),
    )
    busy = (
        rec.plan(f"W6 queries while {BATCH * round(1 / PERIOD_S):,} docs/s are indexed, p50", "ms"),
        rec.plan(f"W6 queries while {BATCH * round(1 / PERIOD_S):,} docs/s are indexed, p99", "ms"),
    )
    ratio = rec.plan("p99 while indexing / p99 idle", "x", ("<=", 3.0))
    rate = rec.plan("indexing rate achieved meanwhile", "docs/s")
    n = len(ctx.dataset)
    queries = service_range_queries(ctx, ctx.seed + 10, IDLE_QUERIES + 5_000)
    idle_queries, busy_queries = queries[:IDLE_QUERIES], queries[IDLE_QUERIES:]

    with rec.step(*idle):
        timed = timed_service_range(ctx, idle_queries)
        for query, (_, response) in zip(idle_queries, timed, strict=False):
            check_service_range(ctx, query, response, "idle page")
        rec.percentiles(idle, (ms for ms, _ in timed))

    batches = round(WRITE_S * harness.PACE / PERIOD_S)
    docs = extra_docs(ctx, FIRST_ID, future_ms(ctx) + np.arange(batches * BATCH, dtype=np.int64))
    bodies = [ndjson_index(docs[k : k + BATCH]) for k in range(0, len(docs), BATCH)]
    writer = Writer(ctx.url, ctx.index, bodies)
    with rec.step(*busy, ratio, rate):
        ctx.http.json("PUT", f"/{ctx.index}/_settings", {"index": {"refresh_interval": "1s"}})
        try:
            writer.start()
            timed = timed_service_range(ctx, _queries_while(writer, busy_queries))
            writer.join()
            if writer.error is not None:
                raise writer.error
            for query, (_, response) in zip(busy_queries, timed, strict=False):
                check_service_range(ctx, query, response, "page under writes")
            refresh(ctx, ctx.index)
            total = count(ctx, ctx.index)
            written = writer.acknowledged
            check(total == n + written, f"_count {total}, want {n} + {written} written")
            rec.percentiles(busy, (ms for ms, _ in timed))
            rec.note(busy[0], f"{len(timed)} queries timed")
            rec.ratio(ratio, busy[1], idle[1])
            rec.set(rate, writer.acknowledged / writer.seconds)
        finally:
            writer.join()
            ctx.http.json("PUT", f"/{ctx.index}/_settings", {"index": {"refresh_interval": None}})
            attempted = min(len(docs), writer.acknowledged + BATCH)  # a failed bulk may have applied some
            remove_extra_docs(ctx, [doc_id for doc_id, _ in docs[:attempted]])
    return rec.finish()
