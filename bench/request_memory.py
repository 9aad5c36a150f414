"""What heavy and refused requests cost a server and whether it gets the memory back.

    python -m bench.request_memory                      # every case, 60 repeats of each
    python -m bench.request_memory --repeats 80 --cases terms-refused,match-refused

A `leafsearch serve` process (search workers as configured, one per core by default) on a fresh
data folder, one small index (`bench-memory`: a keyword, a text and a long field, 200 documents),
then each case in turn. A case is one request sent `--repeats` times back to back; after each
answer the resident memory of the server process and its workers together (VmRSS from /proc) is
read. Printed per case: the answer (status and error type), the median time of one request, RSS
before the case, after 25%, 50% and all of the repeats, and the growth per request over the
second half (the allocator's high-water mark is reached in the first half; a leak keeps
growing in the second). `bulk-overwrites` indexes the same 2,000 ids 400 times into an index of
its own (`bench-overwrites`, 2 shards): the steady overwrite load of issue 25.

Each request is timed alone around its HTTP round trip (wall clock, on a machine that may be
shared: figures move between runs).
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.server import Server

INDEX = "bench-memory"
DOCS = 200


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    body: Callable[[], bytes]
    headers: Callable[[], dict[str, str]] = dict
    repeats: int | None = None  # None: --repeats


def _json(value: object) -> Callable[[], bytes]:
    return lambda: orjson.dumps(value)


def _many_fields(count: int) -> Callable[[], bytes]:
    return _json({f"f{i}": i for i in range(count)})


def _overwrites(count: int) -> Callable[[], bytes]:
    """A bulk body indexing the same `count` ids each time (each repeat overwrites them all)."""

    def body() -> bytes:
        lines = []
        for i in range(count):
            lines.append(orjson.dumps({"index": {"_id": str(i)}}))
            lines.append(orjson.dumps({"u": f"u{i % 300}", "n": i, "t": f"word{i % 97} other{i % 13} " * 20}))
        return b"\n".join(lines) + b"\n"

    return body


CASES = [
    Case(
        "terms-refused",
        "POST",
        f"/{INDEX}/_search",
        _json({"query": {"terms": {"k": [f"term{i}" for i in range(100_000)]}}}),
    ),
    Case(
        "match-refused",
        "POST",
        f"/{INDEX}/_search",
        _json({"query": {"match": {"t": " ".join(f"w{i:06d}" for i in range(290_000))}}}),
    ),
    Case(
        "terms-accepted",
        "POST",
        f"/{INDEX}/_search",
        _json({"query": {"terms": {"k": [f"term{i}" for i in range(60_000)]}}}),
    ),
    Case(
        "match-accepted",
        "POST",
        f"/{INDEX}/_search",
        _json({"query": {"match": {"t": " ".join(f"w{i:06d}" for i in range(4_000))}}}),
    ),
    Case("sort-1000", "POST", f"/{INDEX}/_search", _json({"sort": [{"n": "asc"}, {"k": "desc"}] * 500})),
    Case("sort-100000", "POST", f"/{INDEX}/_search", _json({"sort": [{"n": "asc"}] * 100_000}), repeats=3),
    Case(
        "aggs-100000",
        "POST",
        f"/{INDEX}/_search",
        _json({"size": 0, "aggs": {f"m{i}": {"max": {"field": "n"}} for i in range(100_000)}}),
        repeats=3,
    ),
    Case("fields-20000", "POST", "/bench-fields/_doc", _many_fields(20_000), repeats=3),
    Case("fields-100000", "POST", "/bench-fields/_doc", _many_fields(100_000), repeats=1),
    Case("runtime-type", "PUT", f"/{INDEX}/_mapping", _json({"runtime": {"r": {"type": {}}}}), repeats=3),
    Case("header-1mib", "GET", "/", lambda: b"", lambda: {"X-Big": "a" * (1 << 20)}, repeats=3),
    Case("index-nul", "PUT", "/bench-%00", lambda: b"", repeats=1),
    Case(
        "bulk-overwrites",
        "POST",
        "/bench-overwrites/_bulk",
        _overwrites(2_000),
        lambda: {"Content-Type": "application/x-ndjson"},
        repeats=400,
    ),
]


def _send(
    conn: http.client.HTTPConnection, case: Case, body: bytes, headers: dict[str, str]
) -> tuple[int, str]:
    conn.request(
        case.method, case.path, body=body or None, headers={"Content-Type": "application/json", **headers}
    )
    response = conn.getresponse()
    data = response.read()
    kind = ""
    if response.status >= 400:
        try:
            error = orjson.loads(data)["error"]
            kind = error["root_cause"][0]["type"] if isinstance(error, dict) else str(error)[:60]
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
            kind = data[:60].decode(errors="replace")
    if response.getheader("connection", "").lower() == "close":
        conn.close()
    return response.status, kind


def run_case(server: Server, case: Case, repeats: int) -> dict[str, object]:
    host, port = "127.0.0.1", server.port
    conn = http.client.HTTPConnection(host, port, timeout=600)
    body, headers = case.body(), case.headers()
    count = case.repeats or repeats
    before = server.memory_kb("VmRSS") // 1024
    rss: list[int] = []
    times: list[float] = []
    answers: set[str] = set()
    for _ in range(count):
        started = time.perf_counter()
        try:
            status, kind = _send(conn, case, body, headers)
            answers.add(f"{status} {kind}".strip())
        except (OSError, http.client.HTTPException) as exc:
            answers.add(f"no answer: {type(exc).__name__}")
            conn.close()
        times.append(time.perf_counter() - started)
        rss.append(server.memory_kb("VmRSS") // 1024)
    conn.close()
    half = count // 2
    slope = (rss[-1] - rss[half - 1]) / (count - half) if half else 0.0
    return {
        "case": case.name,
        "answers": sorted(answers),
        "repeats": count,
        "median_s": statistics.median(times),
        "rss_before_mib": before,
        "rss_quarter_mib": rss[max(0, count // 4 - 1)],
        "rss_half_mib": rss[max(0, half - 1)],
        "rss_end_mib": rss[-1],
        "growth_per_request_mib": round(slope, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument("--search-workers", type=int, default=None)
    args = parser.parse_args()
    chosen = [c for c in CASES if c.name in args.cases.split(",")]
    folder = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    extra = [] if args.search_workers is None else ["--search-workers", str(args.search_workers)]
    server = Server(folder / "data", folder / "server.log", extra)
    try:
        server.start()
        _load(server)
        for case in chosen:
            print(orjson.dumps(run_case(server, case, args.repeats)).decode(), flush=True)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _load(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    mapping = {"properties": {"k": {"type": "keyword"}, "t": {"type": "text"}, "n": {"type": "long"}}}
    lines = b"".join(
        b'{"index":{}}\n' + orjson.dumps({"k": f"v{i % 50}", "t": f"w{i:06d} hello", "n": i}) + b"\n"
        for i in range(DOCS)
    )
    for method, path, body, kind in (
        ("PUT", f"/{INDEX}", orjson.dumps({"mappings": mapping}), "application/json"),
        ("POST", f"/{INDEX}/_bulk?refresh=true", lines, "application/x-ndjson"),
        (
            "PUT",
            "/bench-overwrites",
            orjson.dumps({"settings": {"number_of_shards": 2}}),
            "application/json",
        ),
        (
            "PUT",
            "/bench-fields",
            orjson.dumps({"settings": {"index.mapping.total_fields.limit": 1000}}),
            "application/json",
        ),
    ):
        conn.request(method, path, body=body, headers={"Content-Type": kind})
        response = conn.getresponse()
        response.read()
        assert response.status == 200, (path, response.status)
    conn.close()


if __name__ == "__main__":
    main()
