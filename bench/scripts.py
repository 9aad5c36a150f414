"""What scripts cost: `python -m bench.scripts [--docs 1000000] [--only update|score]`.

Starts `leafsearch serve` on a temporary folder, loads `--docs` small documents, then, timed
through HTTP in one run:
- `update`: `_update_by_query` with the script `ctx._source.n += params.by` over every document,
  and the same change sent as `_bulk` partial updates (`{"doc": {"n": ...}}`, 1,000 per request,
  one client), each followed by a refresh;
- `score`: a `script_score` query over every document (`Math.log(2 + doc['n'].value) *
  params.w`), the median of a few tries: as written, which runs over columns, and as a statement
  (`def v = ...; return ...`), which runs per document as every script did before column
  evaluation: the before and after of it in one run.
Prints documents per second of each and the server's CPU (its process and its workers) per
1,000 documents: the machine is shared, so CPU says more than wall time."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from bench.client import Client
from bench.server import Server

CHUNK = 1000
SCORE_SCRIPT = "Math.log(2 + doc['n'].value) * params.w"
#: The same score, not one expression: it runs per document (scripts/vector.py).
PER_DOCUMENT_SCRIPT = "def v = doc['n'].value; return Math.log(2 + v) * params.w;"
NDJSON = "application/x-ndjson"


def _cpu(server: Server) -> float:
    return sum(server.cpu_seconds())


def _load(http: Client, docs: int) -> None:
    mapping = {"mappings": {"properties": {"n": {"type": "long"}, "tag": {"type": "keyword"}}}}
    http.raw("PUT", "/s", orjson.dumps(mapping))
    for start in range(0, docs, CHUNK):
        lines = b"".join(
            orjson.dumps({"index": {"_id": str(i)}})
            + b"\n"
            + orjson.dumps({"n": i, "tag": f"t{i % 50}"})
            + b"\n"
            for i in range(start, min(start + CHUNK, docs))
        )
        assert not orjson.loads(http.raw("POST", "/s/_bulk", lines, NDJSON))["errors"]
    http.raw("POST", "/s/_refresh")


def updates(http: Client, server: Server, docs: int) -> None:
    before, started = _cpu(server), time.perf_counter()
    body = {"script": {"source": "ctx._source.n += params.by", "params": {"by": 1}}}
    answer = orjson.loads(http.raw("POST", "/s/_update_by_query?refresh=true", orjson.dumps(body)))
    scripted, scripted_cpu = time.perf_counter() - started, _cpu(server) - before
    assert answer["updated"] == docs, answer

    before, started = _cpu(server), time.perf_counter()
    for start in range(0, docs, CHUNK):
        lines = b"".join(
            orjson.dumps({"update": {"_id": str(i)}}) + b"\n" + orjson.dumps({"doc": {"n": i + 2}}) + b"\n"
            for i in range(start, min(start + CHUNK, docs))
        )
        assert not orjson.loads(http.raw("POST", "/s/_bulk", lines, NDJSON))["errors"]
    http.raw("POST", "/s/_refresh")
    partial, partial_cpu = time.perf_counter() - started, _cpu(server) - before
    line("_update_by_query with a script", docs, scripted, scripted_cpu)
    line("_bulk partial updates, 1 client", docs, partial, partial_cpu)


def scores(http: Client, server: Server, docs: int, tries: int) -> None:
    for label, source in (("columns", SCORE_SCRIPT), ("per document", PER_DOCUMENT_SCRIPT)):
        script = {"source": source, "params": {"w": 2}}
        query = {"script_score": {"query": {"match_all": {}}, "script": script}}
        body = orjson.dumps({"size": 10, "track_total_hits": True, "query": query})
        first = orjson.loads(http.raw("POST", "/s/_search", body))  # the first reads the columns
        took, cpu = [], []
        for _ in range(tries):
            before, started = _cpu(server), time.perf_counter()
            answer = orjson.loads(http.raw("POST", "/s/_search", body))
            took.append(time.perf_counter() - started)
            cpu.append(_cpu(server) - before)
            assert answer["hits"]["total"]["value"] == docs, answer
            assert answer["hits"]["hits"] == first["hits"]["hits"]
        line(
            f"script_score, {label}, median of {tries}", docs, statistics.median(took), statistics.median(cpu)
        )


def line(what: str, docs: int, seconds: float, cpu: float) -> None:
    per_thousand = cpu * 1e6 / docs  # CPU ms per 1,000 documents
    rate = docs / seconds
    print(f"{what:<44} {rate:>12,.0f} docs/s  ({seconds:.2f} s; CPU {per_thousand:,.1f} ms per 1,000 docs)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scripts", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--only", choices=("update", "score"))
    parser.add_argument("--tries", type=int, default=5, help="script_score searches (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="leafsearch-scripts-") as scratch:
        server = Server(Path(scratch) / "data", Path(scratch) / "server.log")
        server.start()
        try:
            http = Client(server.url, timeout=7200)
            _load(http, args.docs)
            if args.only in (None, "score"):
                scores(http, server, args.docs, args.tries)
            if args.only in (None, "update"):
                updates(http, server, args.docs)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
