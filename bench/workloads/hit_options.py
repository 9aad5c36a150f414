"""W12: a big page with per-hit options against the same page without them.

A client exporting or auditing documents asks for `version` and `seq_no_primary_term` (to write
them back with `if_seq_no`), or for `docvalue_fields`, on pages of thousands of hits. The page is
5,000 hits of `match_all` sorted by `@timestamp` desc; each option must cost little beside the
plain page. Responses are timed as bytes (the client does not parse them while timed) and checked
afterwards: the sort values must be SQLite's, every hit must carry its options.

Each page is timed first at FIRSTS places no earlier request of this workload read (a
`search_after` timestamp taken from the dataset; the places are spread over the index below the
top page, the three pages taking turns), since the source blocks a page decompresses stay cached
whatever the snapshot: the ratios of these judge the options. Beside them, the page at the top
repeated, whose fetch the block cache answers.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import orjson

from bench import harness
from bench.harness import Context, Recorder, Row, check, median_ms, time_each
from bench.workloads.common import check_timestamps, cursor_at

SIZE = 5_000
RATIO_GOAL = 1.5
OPTIONS: dict[str, dict[str, Any]] = {
    "plain": {},
    "version + seq_no_primary_term": {"version": True, "seq_no_primary_term": True},
    "docvalue_fields @timestamp, service, bytes": {
        "docvalue_fields": ["@timestamp", "service", {"field": "bytes", "format": "0"}]
    },
}
EXPECTED_KEYS = {
    "plain": (),
    "version + seq_no_primary_term": ("_version", "_seq_no", "_primary_term"),
    "docvalue_fields @timestamp, service, bytes": ("fields",),
}


def _page(ctx: Context, body: dict[str, Any]) -> bytes:
    return ctx.http.raw("POST", f"/{ctx.index}/_search", orjson.dumps(body))


def _check(hits: list[dict], expected: list[tuple], keys: tuple[str, ...], what: str) -> None:
    check_timestamps(hits, expected, what)
    lacking = [hit["_id"] for hit in hits if any(key not in hit for key in keys)]
    check(not lacking, f"{what}: {len(lacking)} hits lack {keys}, first {lacking[:1]}")


def _firsts(ctx: Context, rec: Recorder, rows: dict[str, tuple[str, str]], base: dict[str, Any]) -> None:
    """Each option's page FIRSTS times, each time at a place of the index no page read before
    (below the repeated top page, when the index holds two pages)."""
    n, size, places = len(ctx.dataset), base["size"], harness.FIRSTS * len(OPTIONS)
    lo = size if n >= 2 * size else 0
    depths = [lo + j * (n - size - lo) // (places - 1) for j in range(places)]
    requests = []  # (option, SQLite's key of the page, body)
    for j, depth in enumerate(depths):
        label = list(OPTIONS)[j % len(OPTIONS)]
        after, key = cursor_at(ctx, depth)
        body = {**base, **OPTIONS[label]} | ({} if after is None else {"search_after": [after]})
        requests.append((label, key, body))
    timed = time_each(partial(_page, ctx, body) for _, _, body in requests)
    for (label, key, _), (_, data) in zip(requests, timed, strict=False):
        expected = ctx.sqlite.keyset_page(key, base["size"])
        _check(orjson.loads(data)["hits"]["hits"], expected, EXPECTED_KEYS[label], rows[label][0])
    for label, names in rows.items():
        samples = [ms for (option, _, _), (ms, _) in zip(requests, timed, strict=False) if option == label]
        rec.percentiles(names, samples)
        rec.note(names[0], f"{len(samples)} places")


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W12")
    size = min(SIZE, len(ctx.dataset))  # a small run pages through what it has
    rows = {label: rec.plan_firsts(f"page of {size:,} by @timestamp desc, {label}") for label in OPTIONS}
    ratios = {
        label: rec.plan(f"{label} / plain, first p50s", "x", ("<=", RATIO_GOAL))
        for label in OPTIONS
        if label != "plain"
    }
    base: dict[str, Any] = {"size": size, "sort": [{"@timestamp": "desc"}]}
    top = ctx.sqlite.offset_page(0, size)
    # Repeated first: a failure then shows in its row even once the first requests are measured.
    for label, options in OPTIONS.items():
        body = {**base, **options}
        with rec.step(rows[label][0]):
            _check(orjson.loads(_page(ctx, body))["hits"]["hits"], top, EXPECTED_KEYS[label], rows[label][0])
            rec.repeated(rows[label][0], median_ms(partial(_page, ctx, body)))
    with rec.step(*(name for names in rows.values() for name in names)):
        _firsts(ctx, rec, rows, base)
    for label, name in ratios.items():
        with rec.step(name):
            rec.ratio(name, rows[label][0], rows["plain"][0])
    return rec.finish()
