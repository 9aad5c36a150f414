"""W6, W8, W9: the first page of queries never seen before, as a new user's queries are.

Every timed request is a distinct query (a new service and `@timestamp` range, a new cursor, a new
aggregation size), so no answer cached from an earlier identical request is measured; the first
query on a sort key, which builds that key's per-segment sort orders, is reported on its own row.
Each answer is checked after the timed loop: its sort values against SQLite's (or, for the
cursors of W9, against the order recomputed from the dataset), its total against SQLite's count.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from bench.generate import SERVICES
from bench.harness import Context, Recorder, Row, check, each_ms, time_each
from bench.workloads.common import search

SIZE = 100
TRACK_TOTAL_LIMIT = 10_000  # Elasticsearch's default `track_total_hits`
HOUR_MS = 3_600_000
W6_QUERIES = 100
W8_QUERIES = 50
W9_CURSORS = 20
W9_DEEP = 900_000
BY_TIME_THEN_ID = [{"@timestamp": "desc"}, {"id": "asc"}]


def time_ranges(ctx: Context, rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
    """`count` random [lo, hi) ranges inside the dataset's span, widths log-uniform from one hour
    to the whole span: from a few matches to most of the documents."""
    first, last = int(ctx.dataset.ts_ms.min()), int(ctx.dataset.ts_ms.max()) + 1
    span = last - first
    widths = np.exp(rng.uniform(np.log(HOUR_MS), np.log(span), size=count)).astype(np.int64)
    starts = first + (rng.random(count) * (span - widths)).astype(np.int64)
    return [(int(lo), int(lo + width)) for lo, width in zip(starts, widths, strict=True)]


def service_range_queries(ctx: Context, seed: int, count: int) -> list[tuple[str, int, int]]:
    """W6's shape: a random service (uniform over the 50, whose sizes are skewed) and time range."""
    rng = np.random.default_rng(seed)
    services = rng.integers(0, len(SERVICES), size=count)
    return [(SERVICES[s], lo, hi) for s, (lo, hi) in zip(services, time_ranges(ctx, rng, count), strict=True)]


def service_range_body(service: str, lo: int, hi: int) -> dict[str, Any]:
    return {
        "size": SIZE,
        "query": {
            "bool": {
                "filter": [{"term": {"service": service}}, {"range": {"@timestamp": {"gte": lo, "lt": hi}}}]
            }
        },
        "sort": BY_TIME_THEN_ID,
    }


def check_total(response: dict[str, Any], expected: int, what: str) -> None:
    """The default `track_total_hits`: exact up to 10,000, then 10,000 with relation `gte`."""
    total = response["hits"]["total"]
    want = (
        {"value": expected, "relation": "eq"}
        if expected <= TRACK_TOTAL_LIMIT
        else {"value": TRACK_TOTAL_LIMIT, "relation": "gte"}
    )
    check(total == want, f"{what}: total {total}, SQLite counts {expected}")


def check_service_range(
    ctx: Context, query: tuple[str, int, int], response: dict[str, Any], what: str
) -> None:
    """Sort values (timestamp, id) equal SQLite's page exactly (the id makes the order total)."""
    got = [tuple(hit["sort"]) for hit in response["hits"]["hits"]]
    want = ctx.sqlite.service_range_page(*query, SIZE)
    check(got == want, f"{what} {query}: {len(got)} hits, SQLite {len(want)}; {got[:2]} vs {want[:2]}")
    check_total(response, ctx.sqlite.service_range_count(*query), f"{what} {query}")


def timed_service_range(ctx: Context, queries: Iterable[tuple[str, int, int]]) -> list[tuple[float, Any]]:
    """Each query once (`queries` may be lazy: it is read as the loop goes)."""
    return time_each(lambda q=q: search(ctx, service_range_body(*q)) for q in queries)


def run_service_range(ctx: Context) -> list[Row]:
    """W6: term on service + random time range, sorted by time desc then id, first page of 100."""
    rec = Recorder("W6")
    first = rec.plan("first query on the sort (builds its segment orders)", "ms")
    p50 = rec.plan(f"{W6_QUERIES} distinct term + range queries, page of {SIZE}, p50", "ms", ("<=", 3.0))
    p99 = rec.plan(f"{W6_QUERIES} distinct term + range queries, page of {SIZE}, p99", "ms", ("<=", 10.0))
    queries = service_range_queries(ctx, ctx.seed + 6, W6_QUERIES + 1)
    sqlite = each_ms(lambda q=q: ctx.sqlite.service_range_page(*q, SIZE) for q in queries[1:])
    rec.percentiles((p50, p99), sqlite, baseline=True)
    with rec.step(first, p50, p99):
        timed = timed_service_range(ctx, queries)
        for query, (_, response) in zip(queries, timed, strict=False):
            check_service_range(ctx, query, response, "page")
        rec.set(first, timed[0][0])
        rec.percentiles((p50, p99), (ms for ms, _ in timed[1:]))
        rec.note(p50, f"{len(timed) - 1} queries timed")
    return rec.finish()


def run_bytes_sort(ctx: Context) -> list[Row]:
    """W8: random time ranges sorted by `bytes` desc (a key no earlier workload sorted by)."""
    rec = Recorder("W8")
    first = rec.plan("first query sorted by bytes (builds its segment orders)", "ms")
    p50 = rec.plan(f"{W8_QUERIES} distinct ranges by bytes desc, page of {SIZE}, p50", "ms", ("<=", 10.0))
    p99 = rec.plan(f"{W8_QUERIES} distinct ranges by bytes desc, page of {SIZE}, p99", "ms")
    ranges = time_ranges(ctx, np.random.default_rng(ctx.seed + 8), W8_QUERIES + 1)
    sqlite = each_ms(lambda r=r: ctx.sqlite.range_top_bytes(*r, SIZE) for r in ranges[1:])
    rec.percentiles((p50, p99), sqlite, baseline=True)

    def body(lo: int, hi: int) -> dict[str, Any]:
        query = {"range": {"@timestamp": {"gte": lo, "lt": hi}}}
        return {"size": SIZE, "query": query, "sort": [{"bytes": "desc"}]}

    with rec.step(first, p50, p99):
        timed = time_each(lambda r=r: search(ctx, body(*r)) for r in ranges)
        for (lo, hi), (_, response) in zip(ranges, timed, strict=False):
            got = [hit["sort"][0] for hit in response["hits"]["hits"]]
            want = ctx.sqlite.range_top_bytes(lo, hi, SIZE)
            check(got == want, f"range [{lo}, {hi}) by bytes: {got[:3]}... vs SQLite {want[:3]}...")
            check_total(response, ctx.sqlite.range_count(lo, hi), f"range [{lo}, {hi})")
        rec.set(first, timed[0][0])
        rec.percentiles((p50, p99), (ms for ms, _ in timed[1:]))
        rec.note(p50, f"{len(timed) - 1} queries timed")
    return rec.finish()


def _cursor_pages(
    ctx: Context, rec: Recorder, names: tuple[str, str], depths: list[int], order: np.ndarray
) -> None:
    """Time a page of SIZE after the cursor of each depth (sort values of the hit before it, from
    the dataset's order); check ids and sort values against that order."""
    data = ctx.dataset

    def cursor(depth: int) -> tuple[int, str] | None:
        if depth == 0:
            return None
        doc = int(order[depth - 1])
        return int(data.ts_ms[doc]), data.ids[doc]

    def body(depth: int) -> dict[str, Any]:
        after = cursor(depth)
        body: dict[str, Any] = {"size": SIZE, "sort": BY_TIME_THEN_ID}
        if after is not None:
            body["search_after"] = list(after)
        return body

    sqlite = each_ms(lambda d=d: ctx.sqlite.keyset_page_id_asc(cursor(d), SIZE) for d in depths)
    rec.percentiles(names, sqlite, baseline=True)
    timed = time_each(lambda d=d: search(ctx, body(d)) for d in depths)
    for depth, (_, response) in zip(depths, timed, strict=False):
        hits = response["hits"]["hits"]
        want = order[depth : depth + SIZE]
        got_ids, want_ids = [hit["_id"] for hit in hits], [data.ids[doc] for doc in want]
        check(got_ids == want_ids, f"search_after at depth {depth}: {got_ids[:2]}... vs {want_ids[:2]}...")
        check(
            [hit["sort"] for hit in hits] == [[int(data.ts_ms[doc]), data.ids[doc]] for doc in want],
            f"search_after at depth {depth}: sort values differ from the dataset's",
        )
    rec.percentiles(names, (ms for ms, _ in timed))


def _services_aggregation(ctx: Context, rec: Recorder, names: tuple[str, str]) -> None:
    """`size: 0` + `terms` on service over every document; distinct by the terms size (10 to 29),
    each answer checked against SQLite's `GROUP BY`."""
    sizes = list(range(10, 10 + W9_CURSORS))
    rec.percentiles(names, each_ms(ctx.sqlite.service_counts for _ in sizes), baseline=True)
    expected = ctx.sqlite.service_counts()

    def body(size: int) -> dict[str, Any]:
        return {"size": 0, "aggs": {"services": {"terms": {"field": "service", "size": size}}}}

    timed = time_each(lambda s=s: search(ctx, body(s)) for s in sizes)
    for size, (_, response) in zip(sizes, timed, strict=False):
        got = [(b["key"], b["doc_count"]) for b in response["aggregations"]["services"]["buckets"]]
        check(got == expected[:size], f"terms size {size}: {got[:3]}... vs SQLite {expected[:3]}...")
        check(response["hits"]["hits"] == [], "size 0 returned hits")
    rec.percentiles(names, (ms for ms, _ in timed))


def run_cursors(ctx: Context) -> list[Row]:
    """W9: `search_after` without a PIT at depth 0 and deep, and a `size: 0` terms aggregation."""
    rec = Recorder("W9")
    n = len(ctx.dataset)
    deep = min(W9_DEEP, n - SIZE)
    shallow_depths = [SIZE * j for j in range(W9_CURSORS) if SIZE * j + SIZE <= n]
    deep_depths = [deep - SIZE * j for j in range(W9_CURSORS) if deep - SIZE * j >= 0]
    shallow = (
        rec.plan(f"search_after no PIT, depth 0 (+{SIZE * (W9_CURSORS - 1):,}), p50", "ms"),
        rec.plan(f"search_after no PIT, depth 0 (+{SIZE * (W9_CURSORS - 1):,}), p99", "ms"),
    )
    deeper = (
        rec.plan(f"search_after no PIT, depth {deep:,} (-{SIZE * (W9_CURSORS - 1):,}), p50", "ms"),
        rec.plan(f"search_after no PIT, depth {deep:,} (-{SIZE * (W9_CURSORS - 1):,}), p99", "ms"),
    )
    ratio = rec.plan(f"depth {deep:,} / depth 0 (p50)", "x", ("<=", 1.5))
    aggregation = (
        rec.plan("size 0 + terms on service over all, p50", "ms", ("<=", 15.0)),
        rec.plan("size 0 + terms on service over all, p99", "ms"),
    )
    order = np.lexsort((np.arange(n), -ctx.dataset.ts_ms))  # ids are the row numbers, zero-padded
    with rec.step(*shallow):
        _cursor_pages(ctx, rec, shallow, shallow_depths, order)
    with rec.step(*deeper):
        _cursor_pages(ctx, rec, deeper, deep_depths, order)
    with rec.step(ratio):
        rec.ratio(ratio, deeper[0], shallow[0])
    with rec.step(*aggregation):
        _services_aggregation(ctx, rec, aggregation)
    return rec.finish()
