"""W2 and W3: `search_after` over a point in time, sorted by `@timestamp` desc.

A page at depth d is timed first on FIRSTS new PITs, each on a new snapshot (`fresh_snapshot`),
so no HitList of an earlier PIT can answer: what a client meets on the first page it asks of a
new PIT, wherever that page starts. Its cursor comes from the dataset, not from a PIT (whose
`_shard_doc` values a new snapshot may number differently): the hits after `[t + 1, max]`, t the
timestamp at depth d, so the page starts at the first hit of timestamp t. The goals judge these.
Beside them, the page repeated on one PIT, reached the way a walking client reaches it (the sort
values of hit d-1, found once by walking that PIT in big pages), which the HitList built by that
walk answers. Then a whole walk on a new PIT of a new snapshot. The baseline is SQLite keyset
pagination, `WHERE (ts, id) < (?, ?)`, over an index on (ts, id), each page run FIRSTS times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np

from bench import harness
from bench.harness import Context, Recorder, Row, Stopwatch, check, each_ms, median_ms, time_each
from bench.workloads.common import (
    check_timestamps,
    cursor_at,
    fresh_snapshot,
    hit_ids,
    search,
    settle_heap,
)

DEPTHS = (0, 1_000, 10_000, 100_000, 900_000)
SIZE = 100
ANCHOR_PAGE = 10_000  # the largest size the default max_result_window allows
WALK_PAGE = 1_000
KEEP_ALIVE = "5m"
SHARD_DOC_MAX = 2**63 - 1  # after every `_shard_doc`: a cursor past all hits of its timestamp


class Pit:
    """An open point in time; every search through it uses the latest `pit_id` returned."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.id = ctx.http.json("POST", f"/{ctx.index}/_pit?keep_alive={KEEP_ALIVE}")["id"]

    def search(self, body: dict[str, Any]) -> dict[str, Any]:
        response = search(self.ctx, {**body, "pit": {"id": self.id, "keep_alive": KEEP_ALIVE}}, "/_search")
        self.id = response.get("pit_id", self.id)
        return response

    def close(self) -> None:
        self.ctx.http.json("DELETE", "/_pit", {"id": self.id})


def _anchors(pit: Pit, base: dict, depths: list[int]) -> dict[int, tuple[list | None, str]]:
    """For every depth d: the sort values of hit d-1 (None for d=0) and the `_id` of hit d."""
    after: dict[int, list | None] = {0: None}
    first_ids: dict[int, str] = {}
    position, search_after = 0, None
    watch = Stopwatch()
    while position <= max(depths):
        watch.check_budget()
        body = {**base, "size": ANCHOR_PAGE, "_source": False, "track_total_hits": False}
        if search_after is not None:
            body["search_after"] = search_after
        hits = pit.search(body)["hits"]["hits"]
        check(bool(hits), f"the PIT walk ended at hit {position}, before depth {max(depths)}")
        for depth in depths:
            if position <= depth - 1 < position + len(hits):
                after[depth] = hits[depth - 1 - position]["sort"]
            if position <= depth < position + len(hits):
                first_ids[depth] = hits[depth - position]["_id"]
        position += len(hits)
        search_after = hits[-1]["sort"]
    return {depth: (after[depth], first_ids[depth]) for depth in depths}


def _new_pit_pages(ctx: Context, body: dict) -> Iterator[Callable[[], dict[str, Any]]]:
    """The page `body` for `time_each`, FIRSTS times, each on a new PIT of a fresh snapshot,
    opened before and closed after the timed request (neither timed)."""
    for _ in range(harness.FIRSTS):
        fresh_snapshot(ctx)
        pit = Pit(ctx)
        try:
            yield partial(pit.search, body)
        finally:
            pit.close()


def _first_pages(ctx: Context, rec: Recorder, names: tuple[str, str], base: dict, depth: int) -> None:
    """Time the page at about `depth` on new PITs; check each against SQLite's and the dataset."""
    match = ctx.match if "query" in base else None
    body = {**base, "size": SIZE}
    after, key = cursor_at(ctx, depth, match)
    if after is not None:
        body["search_after"] = [after, SHARD_DOC_MAX]
    expected = ctx.sqlite.keyset_page(key, SIZE, match)
    sqlite = each_ms(lambda: ctx.sqlite.keyset_page(key, SIZE, match) for _ in range(harness.FIRSTS))
    rec.percentiles(names, sqlite, baseline=True)
    pages = _new_pit_pages(ctx, body)
    try:
        timed = time_each(pages)
    finally:
        pages.close()
    for _, response in timed:
        hits = response["hits"]["hits"]
        check_timestamps(hits, expected, names[0])
        stamps = ctx.dataset.ts_ms[[int(hit["_id"]) for hit in hits]].tolist()
        check(
            stamps == [hit["sort"][0] for hit in hits],
            f"{names[0]}: hits whose @timestamp is not their sort value",
        )
    rec.percentiles(names, (ms for ms, _ in timed))
    rec.note(names[0], f"{len(timed)} new PITs, each on a new snapshot")


def _repeated_page(
    ctx: Context, rec: Recorder, pit: Pit, name: str, base: dict, depth: int, anchor: tuple[list | None, str]
) -> None:
    """Time the page at `depth` repeated on `pit`, after checking it against SQLite and the anchor walk."""
    match = ctx.match if "query" in base else None
    search_after, first_id = anchor
    body = {**base, "size": SIZE}
    if search_after is not None:
        body["search_after"] = search_after
    hits = pit.search(body)["hits"]["hits"]
    check_timestamps(hits, ctx.sqlite.keyset_page(ctx.sqlite.keyset_after(depth, match), SIZE, match), name)
    check(hits[0]["_id"] == first_id, f"{name}: first hit {hits[0]['_id']}, the walk had {first_id} there")
    rec.repeated(name, median_ms(lambda: pit.search(body)))


def _walk(pit: Pit, base: dict, total: int) -> float:
    """Read every hit in pages of WALK_PAGE; docs/s, after checking each hit came exactly once."""
    id_pages: list[np.ndarray] = []
    timestamp_pages: list[np.ndarray] = []
    search_after = None
    settle_heap()
    watch = Stopwatch()
    while True:
        body = {**base, "size": WALK_PAGE, "track_total_hits": False}
        if search_after is not None:
            body["search_after"] = search_after
        hits = pit.search(body)["hits"]["hits"]
        if not hits:
            break
        id_pages.append(hit_ids(hits))
        timestamp_pages.append(np.array([hit["sort"][0] for hit in hits], dtype=np.int64))
        search_after = hits[-1]["sort"]
        watch.check_budget()
    seconds = watch.seconds()
    ids = np.concatenate(id_pages) if id_pages else np.zeros(0, dtype=np.int64)
    distinct = len(np.unique(ids))
    check(
        len(ids) == total and distinct == total,
        f"walk returned {len(ids)} hits, {distinct} distinct, want {total}",
    )
    timestamps = np.concatenate(timestamp_pages) if timestamp_pages else ids
    check(bool(np.all(np.diff(timestamps) <= 0)), "walk not in @timestamp desc order")
    return total / seconds


def _run(
    ctx: Context, workload: str, query: dict | None, page_goal_ms: float, walk_goal: tuple[str, float] | None
) -> list[Row]:
    rec = Recorder(workload)
    match = None if query is None else ctx.match
    total = ctx.sqlite.count(match)
    depths = [d for d in DEPTHS if d + SIZE <= total] or [0]
    if total - SIZE > depths[-1]:
        depths.append(total - SIZE)  # the last full page: the deepest a walk goes
    pages = {d: rec.plan_firsts(f"page of {SIZE} at depth {d}", ("<=", page_goal_ms)) for d in depths}
    deepest = (
        rec.plan(f"depth {depths[-1]} / depth 0, first p50s", "x", ("<=", 1.5)) if len(depths) > 1 else None
    )
    walk = rec.plan(f"full walk of {total} hits on a new PIT, pages of {WALK_PAGE}", "docs/s", walk_goal)
    if total == 0:
        rec.fail(list(rec.rows), "unsupported: no generated document matches the query (use more --docs)")
        return rec.finish()
    settle_heap()
    watch = Stopwatch()
    ctx.sqlite.walk(WALK_PAGE, match)
    rec.baseline(walk, total / watch.seconds())

    base: dict[str, Any] = {"sort": [{"@timestamp": "desc"}]}
    if query is not None:
        base["query"] = query
    # Repeated first: a failure then shows in its row even once the first requests are measured.
    with rec.step(*(names[0] for names in pages.values())):
        pit = Pit(ctx)
        try:
            anchors = _anchors(pit, base, depths)
            for depth, names in pages.items():
                with rec.step(names[0]):
                    _repeated_page(ctx, rec, pit, names[0], base, depth, anchors[depth])
        finally:
            pit.close()
    for depth, names in pages.items():
        with rec.step(*names):
            _first_pages(ctx, rec, names, base, depth)
    if deepest is not None:
        with rec.step(deepest):
            rec.ratio(deepest, pages[depths[-1]][0], pages[0][0])
    with rec.step(walk):
        fresh_snapshot(ctx)
        pit = Pit(ctx)
        try:
            rec.set(walk, _walk(pit, base, total))
        finally:
            pit.close()
    return rec.finish()


def run_all(ctx: Context) -> list[Row]:
    """W2: every document."""
    return _run(ctx, "W2", None, 3.0, (">=", 200_000))


def run_query(ctx: Context) -> list[Row]:
    """W3: a `match` on a mid-frequency term with a `term` filter on `service`."""
    return _run(ctx, "W3", ctx.query, 5.0, None)
