"""What a scripted update costs: `python -m bench.scripts [--docs 100000]`.

Starts `leafsearch serve` on a temporary folder, loads `--docs` small documents, then, timed
through HTTP in one run: `_update_by_query` with the script `ctx._source.n += params.by` over
every document, and the same change sent as `_bulk` partial updates (`{"doc": {"n": ...}}`, 1,000
per request, one client), each followed by a refresh. Prints documents per second of each."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable

import httpx
import orjson

from leafsearch.testing import Server

CHUNK = 1000


def ndjson_pairs(pairs: Iterable[tuple[dict, dict]]) -> bytes:
    return b"".join(orjson.dumps(action) + b"\n" + orjson.dumps(source) + b"\n" for action, source in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scripts", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    args = parser.parse_args()
    ndjson = {"content-type": "application/x-ndjson"}
    with Server() as server, httpx.Client(base_url=server.url, timeout=3600) as http:
        http.put("/s", json={"mappings": {"properties": {"n": {"type": "long"}, "tag": {"type": "keyword"}}}})
        for start in range(0, args.docs, CHUNK):
            lines = b"".join(
                orjson.dumps({"index": {"_id": str(i)}})
                + b"\n"
                + orjson.dumps({"n": i, "tag": f"t{i % 50}"})
                + b"\n"
                for i in range(start, min(start + CHUNK, args.docs))
            )
            http.post("/s/_bulk", content=lines, headers=ndjson).raise_for_status()
        http.post("/s/_refresh").raise_for_status()

        started = time.perf_counter()
        answer = http.post(
            "/s/_update_by_query?refresh=true",
            json={"script": {"source": "ctx._source.n += params.by", "params": {"by": 1}}},
        ).json()
        scripted = time.perf_counter() - started
        assert answer["updated"] == args.docs, answer

        started = time.perf_counter()
        for start in range(0, args.docs, CHUNK):
            lines = b"".join(
                orjson.dumps({"update": {"_id": str(i)}})
                + b"\n"
                + orjson.dumps({"doc": {"n": i + 2}})
                + b"\n"
                for i in range(start, min(start + CHUNK, args.docs))
            )
            response = http.post("/s/_bulk", content=lines, headers=ndjson).json()
            assert not response["errors"]
        http.post("/s/_refresh").raise_for_status()
        partial = time.perf_counter() - started
    print(f"_update_by_query with a script   {args.docs / scripted:>10,.0f} docs/s  ({scripted:.1f} s)")
    print(f"_bulk partial updates, 1 client  {args.docs / partial:>10,.0f} docs/s  ({partial:.1f} s)")


if __name__ == "__main__":
    main()
