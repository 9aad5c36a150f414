"""Starting a walk: the first page of a new point in time, scroll, sliced PIT and by-query batch,
each on a snapshot no request has seen, against a warm page; then a whole PIT walk, and the
server's memory while 4 walks run at once against one.

    python -m bench.walk_start --docs 1000000 --data /tmp/walk1m   # loads the folder once, then reuses it
    python -m bench.walk_start --docs 200000 --tries 10
    python -m bench.walk_start --url http://127.0.0.1:9200 --docs 200000   # a server holding `bench`
    python -m bench.walk_start --docs 2000 --tries 3 --json walk.json      # the figures as rows too

The data is bench/generate.py's (the same `--docs` and `--seed` give the same documents), loaded
into index `bench` when the folder does not hold it yet. A *fresh snapshot*: before each timed
try one new document (newer than the dataset) is written and the index refreshed, untimed, so the
request runs on a snapshot no request has seen (as after each refresh of a busy index). The new
documents are deleted at the end. Every figure is the median and p99 of `--tries` tries, timed
around one HTTP request and the decoding of its response with orjson; pages sorted by
`@timestamp` desc then `id` desc, 100 hits:

- warm page: the same search again on an unchanged snapshot;
- `search_after` without a PIT at 90% depth, fresh snapshot;
- first page of a new PIT (the PIT opened after the write, its opening timed apart), and its
  second page;
- first batch of a new scroll (`?scroll=1m`);
- first page of each of 4 slices of a new PIT (every slice's page is a sample);
- a by-query batch: `_reindex` of `max_docs` 100 documents (`_doc` order, one batch of 100) into
  a scratch index, beside the `_bulk` of the same 100 documents into it: the difference is the
  source's read;

then, on an unchanged snapshot, one whole PIT walk sorted by `@timestamp` desc in pages of 1,000
(`track_total_hits: false`, as W2's walk): documents/s, each document checked to come once; a
whole PIT walk sorted by `_score` of a `match` on the dataset's mid-frequency word (about 6% of
the documents), as the node serves it (a list of every match from its second page) and with
`search.walks.max_memory: 0` (every page from its cursor), both checked to return the same hits;
and the server's resident memory (server and search workers, sampled every 20 ms) before, during
one walk and during 4 walks of their own PITs by 4 client processes at once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson

from bench.client import Client, HttpError
from bench.generate import MAPPING, generate
from bench.processes import client_processes
from bench.server import Server
from bench.workloads.common import BULK_CHUNK, settle_heap, settle_merges

INDEX = "bench"
SCRATCH = "walk-start-scratch"
SORT = [{"@timestamp": "desc"}, {"id": "desc"}]
SIZE = 100
WALK_PAGE = 1_000
SLICES = 4
CONCURRENT_WALKS = 4
BY_QUERY_DOCS = 100


def _ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000


class Bench:
    def __init__(self, url: str, docs: int, seed: int, server: Server | None) -> None:
        self.url = url
        self.http = Client(url)
        self.server = server
        self.dataset = generate(docs, seed)
        self.written: list[str] = []
        self.newest_ms = int(self.dataset.ts_ms.max())

    # ---- requests ----------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return orjson.loads(self.http.raw(method, path, None if body is None else orjson.dumps(body)))

    def timed(self, method: str, path: str, body: Any = None) -> tuple[float, Any]:
        encoded = None if body is None else orjson.dumps(body)
        began = time.perf_counter()
        response = orjson.loads(self.http.raw(method, path, encoded))
        return _ms(began), response

    def fresh_snapshot(self) -> None:
        """One new document, newest of all, then a refresh: the next request reads a new snapshot."""
        number = len(self.dataset) + len(self.written)
        doc_id = f"{number:010d}"
        stamp = np.datetime_as_string(np.datetime64(self.newest_ms + 1000 * (len(self.written) + 1), "ms"))
        source = {"@timestamp": stamp + "Z", "status": 200, "service": "walk", "bytes": 1, "id": doc_id}
        self.call("PUT", f"/{INDEX}/_doc/{doc_id}", source)
        self.written.append(doc_id)
        self.call("POST", f"/{INDEX}/_refresh")

    # ---- set-up ------------------------------------------------------------------------------

    def ensure_loaded(self) -> None:
        try:
            loaded = self.call("GET", f"/{INDEX}/_count")["count"] == len(self.dataset)
        except HttpError as error:
            if error.status != 404:
                raise
            loaded = False
        if not loaded:
            _progress(f"loading {len(self.dataset):,} documents")
            try:
                self.call("DELETE", f"/{INDEX}")
            except HttpError as error:
                if error.status != 404:
                    raise
            self.call("PUT", f"/{INDEX}", {"mappings": MAPPING})
            for body in self.dataset.bulk_bodies(BULK_CHUNK):
                response = orjson.loads(
                    self.http.raw("POST", f"/{INDEX}/_bulk", body, "application/x-ndjson")
                )
                assert not response["errors"], "bulk errors while loading"
            self.call("POST", f"/{INDEX}/_refresh")
        settle_merges(SimpleNamespace(http=self.http), INDEX)

    def clean_up(self) -> None:
        if self.written:
            lines = "".join(f'{{"delete":{{"_id":"{doc_id}"}}}}\n' for doc_id in self.written).encode()
            self.http.raw("POST", f"/{INDEX}/_bulk?refresh=true", lines, "application/x-ndjson")
            self.written = []
        try:
            self.call("DELETE", f"/{SCRATCH}")
        except HttpError as error:
            if error.status != 404:
                raise

    # ---- the first pages ---------------------------------------------------------------------

    def warm_page(self, tries: int) -> list[float]:
        body = {"size": SIZE, "sort": SORT}
        self.call("POST", f"/{INDEX}/_search", body)
        return [self.timed("POST", f"/{INDEX}/_search", body)[0] for _ in range(tries)]

    def deep_search_after(self, tries: int) -> list[float]:
        """`search_after` the hit at 90% depth of the dataset, without a PIT."""
        n = len(self.dataset)
        order = np.lexsort((np.array(self.dataset.ids, dtype="U10"), self.dataset.ts_ms))[::-1]
        at = int(order[int(n * 0.9) - 1])
        cursor = [int(self.dataset.ts_ms[at]), self.dataset.ids[at]]
        body = {"size": SIZE, "sort": SORT, "search_after": cursor}
        samples = []
        for _ in range(tries):
            self.fresh_snapshot()
            ms, response = self.timed("POST", f"/{INDEX}/_search", body)
            assert len(response["hits"]["hits"]) == SIZE
            samples.append(ms)
        return samples

    def pit_first_pages(self, tries: int) -> tuple[list[float], list[float], list[float]]:
        """(opening, first page, second page) of a new PIT on a fresh snapshot each time."""
        opening, first, second = [], [], []
        for _ in range(tries):
            self.fresh_snapshot()
            ms, opened = self.timed("POST", f"/{INDEX}/_pit?keep_alive=1m")
            opening.append(ms)
            pit = {"id": opened["id"], "keep_alive": "1m"}
            ms, page = self.timed("POST", "/_search", {"size": SIZE, "sort": SORT, "pit": pit})
            first.append(ms)
            hits = page["hits"]["hits"]
            assert hits[0]["_id"] == self.written[-1], (
                "the first page does not start with the newest document"
            )
            body = {"size": SIZE, "sort": SORT, "pit": pit, "search_after": hits[-1]["sort"]}
            ms, page = self.timed("POST", "/_search", body)
            second.append(ms)
            assert len(page["hits"]["hits"]) == SIZE
            self.call("DELETE", "/_pit", {"id": opened["id"]})
        return opening, first, second

    def scroll_first_batches(self, tries: int) -> list[float]:
        samples = []
        for _ in range(tries):
            self.fresh_snapshot()
            ms, page = self.timed("POST", f"/{INDEX}/_search?scroll=1m", {"size": SIZE, "sort": SORT})
            samples.append(ms)
            assert page["hits"]["hits"][0]["_id"] == self.written[-1]
            self.call("DELETE", "/_search/scroll", {"scroll_id": page["_scroll_id"]})
        return samples

    def sliced_pit_first_pages(self, tries: int) -> list[float]:
        samples = []
        for _ in range(tries):
            self.fresh_snapshot()
            pit_id = self.call("POST", f"/{INDEX}/_pit?keep_alive=1m")["id"]
            for slice_id in range(SLICES):
                body = {
                    "size": SIZE,
                    "sort": SORT,
                    "pit": {"id": pit_id, "keep_alive": "1m"},
                    "slice": {"id": slice_id, "max": SLICES},
                }
                ms, page = self.timed("POST", "/_search", body)
                samples.append(ms)
                assert len(page["hits"]["hits"]) == SIZE
            self.call("DELETE", "/_pit", {"id": pit_id})
        return samples

    def by_query_batches(self, tries: int) -> tuple[list[float], list[float]]:
        """(`_reindex` of one batch of BY_QUERY_DOCS, `_bulk` of the same documents) per try."""
        reindex, bulk = [], []
        body = {
            "source": {"index": INDEX, "size": BY_QUERY_DOCS},
            "dest": {"index": SCRATCH},
            "max_docs": BY_QUERY_DOCS,
        }
        sources = dict(zip(self.dataset.ids[:BY_QUERY_DOCS], self.dataset.sources, strict=False))
        lines = "".join(f'{{"index":{{"_id":"{i}"}}}}\n{s}\n' for i, s in sources.items()).encode()
        for _ in range(tries):
            self.clean_scratch()
            self.fresh_snapshot()
            ms, done = self.timed("POST", "/_reindex", body)
            assert done["created"] + done["updated"] == BY_QUERY_DOCS, done
            reindex.append(ms)
            began = time.perf_counter()
            self.http.raw("POST", f"/{SCRATCH}/_bulk", lines, "application/x-ndjson")
            bulk.append(_ms(began))
        return reindex, bulk

    def clean_scratch(self) -> None:
        try:
            self.call("DELETE", f"/{SCRATCH}")
        except HttpError as error:
            if error.status != 404:
                raise
        self.call("PUT", f"/{SCRATCH}", {"mappings": MAPPING})

    # ---- walks and memory --------------------------------------------------------------------

    def whole_walk(self) -> float:
        total = len(self.dataset) + len(self.written)
        seconds, hits, distinct = walk(self.url)
        assert hits == distinct == total, f"the walk returned {hits} hits, {distinct} distinct, want {total}"
        return total / seconds

    def score_walks(self) -> dict[str, float]:
        """Documents/s of a whole `_score` walk with and without a list of every match."""
        query = {"match": {"message": self.dataset.mid_term}}
        figures, seen = {}, {}
        for name, limit in (("as the node serves it", None), ("from its cursor", "0b")):
            if limit is not None:
                try:
                    self.call("PUT", "/_cluster/settings", {"transient": {"search.walks.max_memory": limit}})
                except HttpError as error:  # a server without the setting: its own way only
                    print(f"  {name}: {error}", file=sys.stderr)
                    continue
            began = time.perf_counter()
            ids = walk(self.url, query=query, sort=["_score"], ids=True)
            figures[name] = len(ids) / (time.perf_counter() - began)
            seen[name] = ids
        if len(seen) > 1:
            self.call("PUT", "/_cluster/settings", {"transient": {"search.walks.max_memory": None}})
        walked = list(seen.values())
        assert all(ids == walked[0] and len(set(ids)) == len(ids) for ids in walked), "_score walks differ"
        return figures

    def walks_memory(self) -> dict[str, float]:
        """Peak resident MB of the server's processes while 1, then CONCURRENT_WALKS walks run."""
        assert self.server is not None
        figures = {"idle": self.server.memory_kb("VmRSS") / 1024}
        for count in (1, CONCURRENT_WALKS):
            stop = threading.Event()
            peak = [0]

            def sample(stop: threading.Event = stop, peak: list[int] = peak) -> None:
                while not stop.is_set():
                    peak[0] = max(peak[0], self.server.memory_kb("VmRSS"))  # type: ignore[union-attr]
                    stop.wait(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            with client_processes("bench.walk_start").Pool(count) as pool:
                results = pool.map(walk, [self.url] * count)
            stop.set()
            sampler.join()
            total = len(self.dataset) + len(self.written)
            assert all(hits == distinct == total for _, hits, distinct in results), "a walk was not exact"
            figures[f"{count} walks"] = peak[0] / 1024
        return figures


def walk(
    url: str, *, query: dict[str, Any] | None = None, sort: list[Any] | None = None, ids: bool = False
) -> Any:
    """One whole PIT walk (a client of its own), sorted by `@timestamp` desc unless `sort`:
    (seconds, hits, distinct documents), or with `ids` the ids in walk order."""
    http = Client(url)
    pit_id = orjson.loads(http.raw("POST", f"/{INDEX}/_pit?keep_alive=1m"))["id"]
    pages: list[np.ndarray] = []
    after = None
    began = time.perf_counter()
    while True:
        body: dict[str, Any] = {
            "size": WALK_PAGE,
            "sort": sort or [{"@timestamp": "desc"}],
            "pit": {"id": pit_id, "keep_alive": "1m"},
            "track_total_hits": False,
        }
        if query is not None:
            body["query"] = query
        if after is not None:
            body["search_after"] = after
        hits = orjson.loads(http.raw("POST", "/_search", orjson.dumps(body)))["hits"]["hits"]
        if not hits:
            break
        pages.append(np.array([hit["_id"] for hit in hits], dtype=np.int64))
        after = hits[-1]["sort"]
    seconds = time.perf_counter() - began
    http.raw("DELETE", "/_pit", orjson.dumps({"id": pit_id}))
    http.close()
    seen = np.concatenate(pages) if pages else np.zeros(0, np.int64)
    if ids:
        return seen.tolist()
    return seconds, len(seen), len(np.unique(seen))


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Rows:
    """The figures of a run: printed as a table, and with `--json` written as rows."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def timed(self, name: str, samples: list[float]) -> None:
        p50, p99 = statistics.median(samples), float(np.percentile(samples, 99))
        self.rows.append({"name": name, "value": p50, "p99": p99, "unit": "ms", "samples": len(samples)})

    def add(self, name: str, value: float, unit: str) -> None:
        self.rows.append({"name": name, "value": value, "unit": unit})

    def table(self) -> str:
        lines = []
        for row in self.rows:
            if "p99" in row:
                figure = f"{row['value']:9.2f} {row['p99']:9.2f}  ms ({row['samples']} samples)"
            else:
                figure = f"{row['value']:9,.{2 if row['unit'] == 'x' else 0}f}  {row['unit']}"
            lines.append(f"{row['name']:62s} {figure}")
        return "\n".join(lines)


def run(bench: Bench, tries: int) -> Rows:
    bench.ensure_loaded()
    rows = Rows()
    _progress("warm page, search_after at 90% depth")
    warm = bench.warm_page(tries)
    rows.timed("warm page (the same search again)", warm)
    rows.timed("search_after without PIT at 90% depth, fresh snapshot", bench.deep_search_after(tries))
    _progress("new PITs")
    opening, first, second = bench.pit_first_pages(tries)
    rows.timed("open a PIT, fresh snapshot", opening)
    rows.timed("first page of a new PIT", first)
    rows.timed("second page of that PIT", second)
    _progress("new scrolls, sliced PITs, by-query batches")
    rows.timed("first batch of a new scroll", bench.scroll_first_batches(tries))
    rows.timed(f"first page of each of {SLICES} slices of a new PIT", bench.sliced_pit_first_pages(tries))
    reindex, bulk = bench.by_query_batches(tries)
    rows.timed(f"_reindex of {BY_QUERY_DOCS} documents (one batch)", reindex)
    rows.timed(f"_bulk of the same {BY_QUERY_DOCS} documents", bulk)
    rows.add(
        "first page of a new PIT / warm page (medians)",
        statistics.median(first) / statistics.median(warm),
        "x",
    )
    _progress("a whole PIT walk")
    settle_heap()  # the generated dataset out of the cycle collector's sight while walks parse
    rows.add("whole PIT walk, pages of 1,000", bench.whole_walk(), "docs/s")
    _progress("_score walks")
    for how, rate in bench.score_walks().items():
        rows.add(f"whole _score PIT walk of a match, {how}", rate, "docs/s")
    if bench.server is not None:
        _progress(f"1 and {CONCURRENT_WALKS} concurrent walks")
        for what, mb in bench.walks_memory().items():
            rows.add(f"server resident memory, {what} (peak)", mb, "MB")
    print(rows.table())
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.walk_start", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tries", type=int, default=10, help="tries per figure (default 10)")
    parser.add_argument("--data", type=Path, help="data folder, kept (default: a temporary one)")
    parser.add_argument("--url", help="a running server instead (memory figures are then left out)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leafsearch-walk-") as scratch:
        server = None
        if args.url is None:
            data = args.data or Path(scratch) / "data"
            data.mkdir(parents=True, exist_ok=True)
            server = Server(data, Path(scratch) / "server.log")
            server.start()
            _progress(f"server pid {server.pid} on {server.url}, data in {data}")
        try:
            bench = Bench(args.url if server is None else server.url, args.docs, args.seed, server)
            try:
                rows = run(bench, args.tries)
            finally:
                bench.clean_up()
        finally:
            if server is not None:
                server.stop()
    if args.json is not None:
        args.json.write_bytes(orjson.dumps({"docs": args.docs, "tries": args.tries, "rows": rows.rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
