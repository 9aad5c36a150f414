"""Highlighting a page: a page of 100 hits of a `match` on `message` (the dataset's mid-frequency
word, in about 6% of the messages), with `highlight` on `message` and without, as the node serves
them (the page's fetch in the search workers).

    python -m bench.highlight --docs 1000000 --data /tmp/hl1m   # loads the folder once, then reuses it
    python -m bench.highlight --docs 100000 --tries 30
    python -m bench.highlight --url http://127.0.0.1:9200 --docs 100000   # a server holding `bench`

The data is bench/generate.py's, loaded into index `bench` when the folder does not hold it yet.
Eight untimed pages of each kind come first (the first page of the sort builds its per-segment
orders; each search worker process reads the segments a first time). Each try then asks a page no
request asked before (`from` grows by 100 each time, below 10,000), the plain and the highlighted request
taking turns; figures are the median and p99 of `--tries` tries,
timed around one HTTP request and the decoding of its response; beside them, the CPU the server
and its search workers spent per page of each kind (from /proc, summed over the tries: steadier
than wall-clock figures on a busy machine). Every highlighted hit is checked
to hold the word between the tags.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

from bench.client import Client, HttpError
from bench.generate import MAPPING, generate
from bench.server import Server
from bench.workloads.common import BULK_CHUNK, settle_merges

INDEX = "bench"
SIZE = 100
WARM_UPS = 8


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _load(http: Client, dataset: Any) -> None:
    try:
        loaded = orjson.loads(http.raw("GET", f"/{INDEX}/_count"))["count"] == len(dataset)
    except HttpError as error:
        if error.status != 404:
            raise
        loaded = False
    if not loaded:
        _progress(f"loading {len(dataset):,} documents")
        try:
            http.raw("DELETE", f"/{INDEX}")
        except HttpError as error:
            if error.status != 404:
                raise
        http.raw("PUT", f"/{INDEX}", orjson.dumps({"mappings": MAPPING}))
        for body in dataset.bulk_bodies(BULK_CHUNK):
            assert not orjson.loads(http.raw("POST", f"/{INDEX}/_bulk", body, "application/x-ndjson"))[
                "errors"
            ]
        http.raw("POST", f"/{INDEX}/_refresh")
    settle_merges(SimpleNamespace(http=http), INDEX)


def _timed(http: Client, body: dict) -> tuple[float, Any]:
    encoded = orjson.dumps(body)
    began = time.perf_counter()
    response = orjson.loads(http.raw("POST", f"/{INDEX}/_search", encoded))
    return (time.perf_counter() - began) * 1000, response


def _cpu(server: Server | None) -> float:
    return sum(server.cpu_seconds()) if server is not None else 0.0


def run(http: Client, word: str, tries: int, server: Server | None) -> dict[str, Any]:
    query = {"match": {"message": word}}
    plain: list[float] = []
    highlighted: list[float] = []
    cpu = {"plain": 0.0, "highlight": 0.0}
    # Untimed first: the first page of the sort builds its per-segment orders (the pages below
    # 10,000 hits walk them), and each search worker reads the segments a first time.
    for w in range(WARM_UPS):
        warm = {"query": query, "from": w * SIZE, "size": SIZE, "sort": [{"@timestamp": "desc"}]}
        _timed(http, warm)
        _timed(http, {**warm, "highlight": {"fields": {"message": {}}}})
    for i in range(tries):
        at = WARM_UPS + i
        page = {"query": query, "from": at * SIZE, "size": SIZE, "sort": [{"@timestamp": "desc"}]}
        before = _cpu(server)
        ms, _ = _timed(http, page)
        plain.append(ms)
        middle = _cpu(server)
        ms, response = _timed(
            http, {**page, "from": (tries + at) * SIZE, "highlight": {"fields": {"message": {}}}}
        )
        highlighted.append(ms)
        cpu["plain"] += middle - before
        cpu["highlight"] += _cpu(server) - middle
        hits = response["hits"]["hits"]
        assert len(hits) == SIZE, "a short page"
        for hit in hits:
            assert f"<em>{word}</em>" in hit["highlight"]["message"][0].lower(), hit
    return {
        "plain": _stats(plain),
        "highlight": _stats(highlighted),
        "cpu_ms": {kind: seconds * 1000 / tries for kind, seconds in cpu.items()},
    }


def _stats(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.highlight", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tries", type=int, default=20, help="pages of each kind (default 20)")
    parser.add_argument("--data", type=Path, help="data folder, kept (default: a temporary one)")
    parser.add_argument("--url", help="a running server instead")
    args = parser.parse_args(argv)
    dataset = generate(args.docs, args.seed)
    with tempfile.TemporaryDirectory(prefix="leafsearch-highlight-") as scratch:
        server = None
        if args.url is None:
            data = args.data or Path(scratch) / "data"
            data.mkdir(parents=True, exist_ok=True)
            server = Server(data, Path(scratch) / "server.log")
            server.start()
        try:
            http = Client(args.url if server is None else server.url)
            _load(http, dataset)
            figures = run(http, dataset.mid_term, args.tries, server)
        finally:
            if server is not None:
                server.stop()
    (plain_p50, plain_p99), (hl_p50, hl_p99) = figures["plain"], figures["highlight"]
    print(f"page of {SIZE} hits, match on message, {args.docs:,} documents, {args.tries} tries each")
    print(f"  without highlight: p50 {plain_p50:.1f} ms, p99 {plain_p99:.1f} ms")
    print(f"  with highlight:    p50 {hl_p50:.1f} ms, p99 {hl_p99:.1f} ms ({hl_p50 / plain_p50:.1f}x p50)")
    if server is not None:
        cpu = figures["cpu_ms"]
        print(
            f"  server CPU per page (server and search workers): {cpu['plain']:.1f} ms without, "
            f"{cpu['highlight']:.1f} ms with highlight"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
