"""W12: a big page with per-hit options against the same page without them.

A client exporting or auditing documents asks for `version` and `seq_no_primary_term` (to write
them back with `if_seq_no`), or for `docvalue_fields`, on pages of thousands of hits. The page is
5,000 hits of `match_all` sorted by `@timestamp` desc; each option must cost little beside the
plain page. Responses are timed as bytes (the client's own parsing is not the server's cost) and
checked once: the sort values must be SQLite's, every hit must carry its options.
"""

from __future__ import annotations

from typing import Any

import orjson

from bench.harness import Context, Recorder, Row, check, median_ms
from bench.workloads.common import check_timestamps

SIZE = 5_000
RATIO_GOAL = 1.5
OPTIONS: dict[str, dict[str, Any]] = {
    "version + seq_no_primary_term": {"version": True, "seq_no_primary_term": True},
    "docvalue_fields @timestamp, service, bytes": {
        "docvalue_fields": ["@timestamp", "service", {"field": "bytes", "format": "0"}]
    },
}
EXPECTED_KEYS = {
    "version + seq_no_primary_term": ("_version", "_seq_no", "_primary_term"),
    "docvalue_fields @timestamp, service, bytes": ("fields",),
}


def _page(ctx: Context, body: dict[str, Any]) -> bytes:
    return ctx.http.raw("POST", f"/{ctx.index}/_search", orjson.dumps(body))


def _checked(ctx: Context, body: dict[str, Any], keys: tuple[str, ...], what: str) -> None:
    hits = orjson.loads(_page(ctx, body))["hits"]["hits"]
    check_timestamps(hits, ctx.sqlite.offset_page(0, body["size"]), what)
    lacking = [hit["_id"] for hit in hits if any(key not in hit for key in keys)]
    check(not lacking, f"{what}: {len(lacking)} hits lack {keys}, first {lacking[:1]}")


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W12")
    size = min(SIZE, len(ctx.dataset))  # a small run pages through what it has
    plain = rec.plan(f"plain page of {size:,} by @timestamp desc", "ms")
    timed = {label: rec.plan(f"{label}, same page", "ms") for label in OPTIONS}
    ratios = {label: rec.plan(f"{label} / plain", "x", ("<=", RATIO_GOAL)) for label in OPTIONS}
    base: dict[str, Any] = {"size": size, "sort": [{"@timestamp": "desc"}]}
    with rec.step(plain):
        _checked(ctx, base, (), plain)
        rec.set(plain, median_ms(lambda: _page(ctx, base)))
    for label, options in OPTIONS.items():
        body = {**base, **options}
        with rec.step(timed[label]):
            _checked(ctx, body, EXPECTED_KEYS[label], timed[label])
            rec.set(timed[label], median_ms(lambda body=body: _page(ctx, body)))
        with rec.step(ratios[label]):
            rec.ratio(ratios[label], timed[label], plain)
    return rec.finish()
