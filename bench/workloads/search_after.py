"""W2 and W3: `search_after` over a point in time, sorted by `@timestamp` desc.

A page at depth d is reached the way a client reaches it: with the sort values of hit d-1, found
once by walking the PIT in big pages. Then that single page is timed. The baseline is SQLite keyset
pagination, `WHERE (ts, id) < (?, ?)`, over an index on (ts, id).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.harness import Context, Recorder, Row, Stopwatch, check, median_ms
from bench.workloads.common import check_timestamps, hit_ids, search, settle_heap

DEPTHS = (0, 1_000, 10_000, 100_000, 900_000)
SIZE = 100
ANCHOR_PAGE = 10_000  # the largest size the default max_result_window allows
WALK_PAGE = 1_000
KEEP_ALIVE = "5m"


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


def _page(
    ctx: Context, rec: Recorder, pit: Pit, name: str, body: dict, depth: int, anchor: tuple[list | None, str]
) -> None:
    """Time the page at `depth` after checking it against SQLite and the anchor walk."""
    match = ctx.match if "query" in body else None
    key = ctx.sqlite.keyset_after(depth, match)
    rec.baseline(name, median_ms(lambda: ctx.sqlite.keyset_page(key, SIZE, match)))
    search_after, first_id = anchor
    body = {**body, "size": SIZE}
    if search_after is not None:
        body["search_after"] = search_after
    hits = pit.search(body)["hits"]["hits"]
    check_timestamps(hits, ctx.sqlite.keyset_page(key, SIZE, match), name)
    check(hits[0]["_id"] == first_id, f"{name}: first hit {hits[0]['_id']}, the walk had {first_id} there")
    rec.set(name, median_ms(lambda: pit.search(body)))


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
    pages = {d: rec.plan(f"page of {SIZE} at depth {d}", "ms", ("<=", page_goal_ms)) for d in depths}
    deepest = rec.plan(f"depth {depths[-1]} / depth 0", "x", ("<=", 1.5)) if len(depths) > 1 else None
    walk = rec.plan(f"full walk of {total} hits, pages of {WALK_PAGE}", "docs/s", walk_goal)
    if total == 0:
        rec.fail(list(rec.rows), "unsupported: no generated document matches the query (use more --docs)")
        return rec.finish()
    watch = Stopwatch()
    ctx.sqlite.walk(WALK_PAGE, match)
    rec.baseline(walk, total / watch.seconds())

    base: dict[str, Any] = {"sort": [{"@timestamp": "desc"}]}
    if query is not None:
        base["query"] = query
    with rec.step(*rec.rows):
        pit = Pit(ctx)
        try:
            anchors = _anchors(pit, base, depths)
            for depth, name in pages.items():
                with rec.step(name):
                    _page(ctx, rec, pit, name, base, depth, anchors[depth])
            if deepest is not None:
                with rec.step(deepest):
                    rec.ratio(deepest, pages[depths[-1]], pages[0])
            with rec.step(walk):
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
