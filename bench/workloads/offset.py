"""W1: offset paging (`from`/`size`) sorted by `@timestamp`, and whether depth costs; and one
aggregation request over every document.

Beyond 10,000 hits the index's `max_result_window` is raised, as a user who needs deep offsets
would; SQLite's `LIMIT ... OFFSET` on an index over ts is the baseline at every depth, and its
`GROUP BY` the baseline of the aggregations.

Each request is timed first on FIRSTS new snapshots (`on_fresh_snapshots`), where no HitList of
an earlier request can answer: the goals judge these. Beside them, the same request repeated on
one snapshot, which the HitList cache answers for pages past top hits (`from` + `size` beyond
10,000). SQLite, which keeps no answers, runs each query FIRSTS times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench import harness
from bench.harness import Context, Recorder, Row, check, each_ms, median_ms, time_each
from bench.workloads.common import check_timestamps, on_fresh_snapshots, search

DEPTHS = (0, 1_000, 9_900, 100_000, 900_000)
SIZE = 100
DEFAULT_WINDOW = 10_000
PAGE_GOAL_MS = 10.0
AGGS_GOAL_MS = 500.0
AGGS = {
    "services": {"terms": {"field": "service", "size": 10}},
    "days": {"date_histogram": {"field": "@timestamp", "calendar_interval": "day"}},
}


def _timed(
    ctx: Context,
    rec: Recorder,
    names: tuple[str, str],
    sqlite: Callable[[], Any],
    body: dict,
    check_response: Callable[[dict], None],
) -> None:
    """SQLite's `sqlite` FIRSTS times; `body` repeated on one snapshot, then first on new
    snapshots, each of those answers checked (in this order, so that a failure shows in the rows
    even when the repeated figure was measured)."""
    rec.percentiles(names, each_ms(sqlite for _ in range(harness.FIRSTS)), baseline=True)
    rec.repeated(names[0], median_ms(lambda: search(ctx, body)))
    timed = time_each(on_fresh_snapshots(ctx, lambda: search(ctx, body)))
    for _, response in timed:
        check_response(response)
    rec.percentiles(names, (ms for ms, _ in timed))
    rec.note(names[0], f"{len(timed)} new snapshots")


def _page(ctx: Context, rec: Recorder, names: tuple[str, str], depth: int, query: dict | None) -> None:
    match = None if query is None else ctx.match
    body = {"from": depth, "size": SIZE, "sort": [{"@timestamp": "desc"}]}
    if query is not None:
        body["query"] = query
    expected = ctx.sqlite.offset_page(depth, SIZE, match)
    _timed(
        ctx,
        rec,
        names,
        lambda: ctx.sqlite.offset_page(depth, SIZE, match),
        body,
        lambda response: check_timestamps(response["hits"]["hits"], expected, names[0]),
    )


def _aggregations(ctx: Context, rec: Recorder, names: tuple[str, str]) -> None:
    """`terms` on service and a daily `date_histogram`, size 0: their counts must be SQLite's."""
    services, days = ctx.sqlite.service_counts_and_days()

    def check_buckets(response: dict) -> None:
        got = response["aggregations"]
        got_services = [(b["key"], b["doc_count"]) for b in got["services"]["buckets"]]
        check(got_services == services[:10], f"terms buckets {got_services[:3]}... vs {services[:3]}...")
        got_days = [(b["key"], b["doc_count"]) for b in got["days"]["buckets"] if b["doc_count"]]
        check(got_days == days, f"{len(got_days)} non-empty days, SQLite has {len(days)}")

    body = {"size": 0, "track_total_hits": True, "aggs": AGGS}
    _timed(ctx, rec, names, ctx.sqlite.service_counts_and_days, body, check_buckets)


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W1")
    depths = [d for d in DEPTHS if d + SIZE <= len(ctx.dataset)]
    pages = {
        d: rec.plan_firsts(f"from={d} size={SIZE} by @timestamp desc", ("<=", PAGE_GOAL_MS)) for d in depths
    }
    ratios = {
        d: rec.plan(f"from={d} / from=0, first p50s", "x", ("<=", 2.0 if d < DEFAULT_WINDOW else 3.0))
        for d in depths[1:]
    }
    matched = rec.plan_firsts("match + term filter, page of 100", ("<=", PAGE_GOAL_MS))
    aggregations = rec.plan_firsts("terms + daily date_histogram over all, size 0", ("<=", AGGS_GOAL_MS))

    deep = [d for d in depths if d + SIZE > DEFAULT_WINDOW]
    window_raised = False
    with rec.step(*(name for d in deep for name in pages[d])):
        if deep:
            ctx.http.json(
                "PUT", f"/{ctx.index}/_settings", {"index": {"max_result_window": len(ctx.dataset)}}
            )
            window_raised = True

    for depth in depths:
        if depth in deep and not window_raised:
            continue
        with rec.step(*pages[depth]):
            _page(ctx, rec, pages[depth], depth, None)
    for depth, name in ratios.items():
        with rec.step(name):
            rec.ratio(name, pages[depth][0], pages[0][0])
    with rec.step(*matched):
        _page(ctx, rec, matched, 0, ctx.query)
    with rec.step(*aggregations):
        _aggregations(ctx, rec, aggregations)
    return rec.finish()
