"""W1: offset paging (`from`/`size`) sorted by `@timestamp`, and whether depth costs; and one
aggregation request over every document.

Beyond 10,000 hits the index's `max_result_window` is raised, as a user who needs deep offsets
would; SQLite's `LIMIT ... OFFSET` on an index over ts is the baseline at every depth, and its
`GROUP BY` the baseline of the aggregations.
"""

from __future__ import annotations

from bench.harness import Context, Recorder, Row, check, median_ms
from bench.workloads.common import check_timestamps, search

DEPTHS = (0, 1_000, 9_900, 100_000, 900_000)
SIZE = 100
DEFAULT_WINDOW = 10_000
PAGE_GOAL_MS = 10.0
AGGS_GOAL_MS = 500.0
AGGS = {
    "services": {"terms": {"field": "service", "size": 10}},
    "days": {"date_histogram": {"field": "@timestamp", "calendar_interval": "day"}},
}


def _page(ctx: Context, rec: Recorder, name: str, depth: int, query: dict | None) -> None:
    match = None if query is None else ctx.match
    rec.baseline(name, median_ms(lambda: ctx.sqlite.offset_page(depth, SIZE, match)))
    body = {"from": depth, "size": SIZE, "sort": [{"@timestamp": "desc"}]}
    if query is not None:
        body["query"] = query
    check_timestamps(search(ctx, body)["hits"]["hits"], ctx.sqlite.offset_page(depth, SIZE, match), name)
    rec.set(name, median_ms(lambda: search(ctx, body)))


def _aggregations(ctx: Context, rec: Recorder, name: str) -> None:
    """`terms` on service and a daily `date_histogram`, size 0: their counts must be SQLite's."""
    rec.baseline(name, median_ms(ctx.sqlite.service_counts_and_days))
    services, days = ctx.sqlite.service_counts_and_days()
    body = {"size": 0, "track_total_hits": True, "aggs": AGGS}
    got = search(ctx, body)["aggregations"]
    got_services = [(b["key"], b["doc_count"]) for b in got["services"]["buckets"]]
    check(got_services == services[:10], f"{name}: terms buckets {got_services[:3]}... vs {services[:3]}...")
    got_days = [(b["key"], b["doc_count"]) for b in got["days"]["buckets"] if b["doc_count"]]
    check(got_days == days, f"{name}: {len(got_days)} non-empty days, SQLite has {len(days)}")
    rec.set(name, median_ms(lambda: search(ctx, body)))


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W1")
    depths = [d for d in DEPTHS if d + SIZE <= len(ctx.dataset)]
    pages = {
        d: rec.plan(f"from={d} size={SIZE} by @timestamp desc", "ms", ("<=", PAGE_GOAL_MS)) for d in depths
    }
    ratios = {
        d: rec.plan(f"from={d} / from=0", "x", ("<=", 2.0 if d < DEFAULT_WINDOW else 3.0)) for d in depths[1:]
    }
    matched = rec.plan("match + term filter, first page", "ms", ("<=", PAGE_GOAL_MS))
    aggregations = rec.plan("terms + daily date_histogram over all, size 0", "ms", ("<=", AGGS_GOAL_MS))

    deep = [d for d in depths if d + SIZE > DEFAULT_WINDOW]
    window_raised = False
    with rec.step(*(pages[d] for d in deep)):
        if deep:
            ctx.http.json(
                "PUT", f"/{ctx.index}/_settings", {"index": {"max_result_window": len(ctx.dataset)}}
            )
            window_raised = True

    for depth in depths:
        if depth in deep and not window_raised:
            continue
        with rec.step(pages[depth]):
            _page(ctx, rec, pages[depth], depth, None)
    for depth, name in ratios.items():
        with rec.step(name):
            rec.ratio(name, pages[depth], pages[0])
    with rec.step(matched):
        _page(ctx, rec, matched, 0, ctx.query)
    with rec.step(aggregations):
        _aggregations(ctx, rec, aggregations)
    return rec.finish()
