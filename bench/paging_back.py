"""Paging backwards: a `search_before` page at the start, middle and 90% depth of the sort order,
against a `search_after` page at the same depths, with and without a point in time; then a
collapsed walk (`collapse` on `user_id`, 200,000 users, sorted by `@timestamp` desc).

    python -m bench.paging_back --docs 1000000 --data /tmp/walk1m   # bench.walk_start's folder
    python -m bench.paging_back --docs 2000 --tries 3

The data is bench/generate.py's, loaded into index `bench` as `bench.walk_start` loads it (a folder
that holds it is reused). Pages of 100 hits sorted by `@timestamp` desc then `id` desc. *Depth d*
is the position of the page's first hit in that order: a `search_after` page at depth d has the
hit before it as its cursor, a `search_before` page at depth d the hit after it. Each try uses
another cursor near its depth (1,000 hits apart: a PIT walk's window of 8 pages never serves one),
and its page is checked against the dataset's own order. Every figure is the median and p99 of
`--tries` requests, timed around one HTTP request and the decoding of its response with orjson.

Collapsed pages: the first page on a snapshot no request has seen (one new document written and
the index refreshed before each, untimed: the list of every match is sorted and grouped), then
pages at 90% depth of the groups on a PIT (`search_after` the group before), each checked against
the dataset's own grouping (each user's newest document, in sort order).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import orjson

from bench.server import Server
from bench.walk_start import INDEX, SIZE, SORT, Bench, Rows, _progress

DEPTHS = (0.0, 0.5, 0.9)
#: Hits between two tries' cursors: more than a PIT walk's window (8 pages), so none is served
#: from the window of the try before.
SPACING = 10 * SIZE


def pages(bench: Bench, tries: int, pit: str | None) -> dict[str, list[float]]:
    """Per (direction, depth), the request times of `tries` pages."""
    n = len(bench.dataset)
    order = np.lexsort((np.array(bench.dataset.ids, dtype="U10"), bench.dataset.ts_ms))[::-1]

    def cursor(position: int) -> list:
        doc = int(order[position])
        return [int(bench.dataset.ts_ms[doc]), bench.dataset.ids[doc]]

    samples: dict[str, list[float]] = {}
    for depth in DEPTHS:
        for k in range(tries):  # (the two directions alternate: a change of load hits both)
            offset = k * SPACING if depth == 0 else -k * SPACING  # (away from the ends)
            start = min(max(int(n * depth) + offset, 1), n - SIZE - 1)
            for direction in ("search_after", "search_before"):
                at = start - 1 if direction == "search_after" else start + SIZE
                body = {"size": SIZE, "sort": SORT, direction: cursor(at), "track_total_hits": False}
                path = f"/{INDEX}/_search"
                if pit is not None:
                    body["pit"] = {"id": pit, "keep_alive": "5m"}
                    path = "/_search"
                ms, response = bench.timed("POST", path, body)
                ids = [hit["_id"] for hit in response["hits"]["hits"]]
                expected = [bench.dataset.ids[int(d)] for d in order[start : start + SIZE]]
                assert ids == expected, (direction, depth)
                samples.setdefault(f"{direction} at depth {depth:.0%}", []).append(ms)
    return samples


def collapsed_pages(bench: Bench, tries: int) -> tuple[list[float], list[float]]:
    """(first collapsed page on a fresh snapshot, collapsed page at 90% depth of the groups on a
    PIT) request times."""
    order = np.lexsort((np.array(bench.dataset.ids, dtype="U10"), bench.dataset.ts_ms))[::-1]
    users = np.array(bench.dataset.users)[order]
    _, firsts = np.unique(users, return_index=True)
    groups = order[np.sort(firsts)]  # each user's first document in sort order, in that order
    body = {"size": SIZE, "sort": SORT, "collapse": {"field": "user_id"}, "track_total_hits": False}
    first = []
    for _ in range(tries):
        bench.fresh_snapshot()
        ms, response = bench.timed("POST", f"/{INDEX}/_search", body)
        assert response["hits"]["hits"][0]["_id"] == bench.written[-1]
        first.append(ms)
    pit = bench.call("POST", f"/{INDEX}/_pit?keep_alive=5m")["id"]
    deep = []
    try:
        for k in range(tries + 1):
            start = int(len(groups) * 0.9) - k * SPACING
            doc = int(groups[start - 1])
            cursor = [int(bench.dataset.ts_ms[doc]), bench.dataset.ids[doc]]
            asked = {**body, "pit": {"id": pit, "keep_alive": "5m"}, "search_after": cursor}
            ms, response = bench.timed("POST", "/_search", asked)
            ids = [hit["_id"] for hit in response["hits"]["hits"]]
            assert ids == [bench.dataset.ids[int(d)] for d in groups[start : start + SIZE]]
            if k:  # (the first builds the PIT's list)
                deep.append(ms)
    finally:
        bench.call("DELETE", "/_pit", {"id": pit})
    return first, deep


def run(bench: Bench, tries: int) -> Rows:
    bench.ensure_loaded()
    rows = Rows()
    _progress("collapsed pages")
    first, deep = collapsed_pages(bench, tries)
    rows.timed("collapsed first page, fresh snapshot", first)
    rows.timed("collapsed page at 90% depth of the groups, PIT", deep)
    for label, use_pit in (("without PIT", False), ("with a PIT", True)):
        _progress(f"pages {label}")
        pit = bench.call("POST", f"/{INDEX}/_pit?keep_alive=5m")["id"] if use_pit else None
        try:
            pages(bench, 2, pit)  # (the sort orders of every segment built, untimed)
            found = pages(bench, tries, pit)
        finally:
            if pit is not None:
                bench.call("DELETE", "/_pit", {"id": pit})
        for name, times in found.items():
            rows.timed(f"{name}, {label}", times)
        first = statistics.median(found["search_before at depth 0%"])
        deep = statistics.median(found["search_before at depth 90%"])
        rows.add(f"search_before at depth 90% / depth 0%, {label} (medians)", deep / first, "x")
    print(rows.table())
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.paging_back", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tries", type=int, default=20, help="tries per figure (default 20)")
    parser.add_argument("--data", type=Path, help="data folder, kept (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leafsearch-back-") as scratch:
        data = args.data or Path(scratch) / "data"
        data.mkdir(parents=True, exist_ok=True)
        server = Server(data, Path(scratch) / "server.log")
        server.start()
        _progress(f"server pid {server.pid} on {server.url}, data in {data}")
        try:
            bench = Bench(server.url, args.docs, args.seed, server)
            try:
                rows = run(bench, args.tries)
            finally:
                bench.clean_up()
        finally:
            server.stop()
    if args.json is not None:
        args.json.write_bytes(orjson.dumps({"docs": args.docs, "tries": args.tries, "rows": rows.rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
