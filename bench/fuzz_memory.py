"""The fuzzer (bench/fuzz/) against a server under a memory cap: its answers, its memory, its time.

    python -m bench.fuzz_memory                                # 10,000 requests, 3 GiB cap
    python -m bench.fuzz_memory --requests 20000 --seed 7 --memory-cap 2gb --json out.json

A `leafsearch serve` process (search workers as `--search-workers` says, one per core by default)
starts on a fresh data folder with its address space capped (RLIMIT_AS, inherited by its worker
processes), the control index is loaded, and `--requests` fuzzed requests follow, one at a time.
After each answer the resident memory of the server and its workers together is read (VmRSS from
/proc). Reported:

- the answers: 5xx (each distinct one with a reproducer), error bodies without Elasticsearch's
  shape, requests without an answer within 60 s;
- memory: RSS after the first 500 requests and at the end, their ratio (the goal: at most 1.5),
  and the peak; the same for the anonymous part of RSS alone (RssAnon: the heaps, without the
  pages of segment files the processes map);
- time: requests that took more than `--slow` seconds (10) in the run are sent again alone, on a
  quiet server; those that still take that long are reported;
- indices: every index is checked after the run (`_count`, a search, `_refresh`, its health not
  red), and the control index must be unchanged.

Times are wall clock on the machine the run shares with whatever else runs there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from bench.fuzz.requests import Fuzzer, Sent
from bench.fuzz.run import load_control, run, snapshot
from bench.server import Server
from leafsearch.common.settings import parse_byte_size

#: Requests after which the allocator is taken to have reached its high-water mark.
SETTLED_AFTER = 500
TIMEOUT = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=20240807)
    parser.add_argument("--memory-cap", default="3gb", help="the server's address space (RLIMIT_AS)")
    parser.add_argument("--search-workers", type=int, default=None)
    parser.add_argument(
        "--slow", type=float, default=10.0, help="seconds past which to replay a request alone"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file too")
    args = parser.parse_args()
    cap = parse_byte_size(args.memory_cap, "--memory-cap")
    folder = Path(tempfile.mkdtemp(prefix="bench-fuzz-"))
    extra = [] if args.search_workers is None else ["--search-workers", str(args.search_workers)]
    server = Server(folder / "data", folder / "server.log", extra, preexec_fn=lambda: _cap(cap))
    try:
        server.start()
        figures = measure(server, args.requests, args.seed, args.slow)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    figures["memory_cap_bytes"] = cap
    print(json.dumps(figures, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))
    clean = not (figures["server_errors"] or figures["bad_shapes"] or figures["stalled"])
    return 0 if clean and not figures["slow_alone"] and not figures["broken_indices"] else 1


def _cap(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def measure(server: Server, requests: int, seed: int, slow: float) -> dict[str, Any]:
    rss_mib: list[float] = []  # resident: the heaps, and the pages of the segment files mapped
    anon_mib: list[float] = []  # the heaps alone (what a leak grows)
    times: list[float] = []
    slow_requests: list[tuple[Sent, float]] = []

    def observe(sent: Sent, response: httpx.Response | None, seconds: float) -> None:
        rss_mib.append(server.memory_kb("VmRSS") / 1024)
        anon_mib.append(server.memory_kb("RssAnon") / 1024)
        times.append(seconds)
        if seconds > slow:
            slow_requests.append((sent, seconds))

    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
        before = load_control(http)
        started = time.perf_counter()
        findings = run(http, Fuzzer(random.Random(seed)), requests, observe)
        elapsed = time.perf_counter() - started
        alive = server.running()
        after = snapshot(http) if alive else None
        slow_alone = [_replay(http, sent) for sent, _ in slow_requests] if alive else []
        broken = _broken_indices(http) if alive else ["the server is down"]
    if alive and after != before:
        broken.append("control: changed")
    settled = rss_mib[min(SETTLED_AFTER, len(rss_mib)) - 1] if rss_mib else 0.0
    anon_settled = anon_mib[min(SETTLED_AFTER, len(anon_mib)) - 1] if anon_mib else 0.0
    return {
        "requests": len(times),
        "seed": seed,
        "seconds": round(elapsed, 1),
        "server_errors": [
            f"{sign}\n{sent.reproducer()}" for sign, (sent, _) in findings.server_errors.items()
        ],
        "bad_shapes": [f"{problem}\n{sent.reproducer()}" for sent, problem in findings.bad_shapes],
        "stalled": [sent.reproducer() for sent in findings.stalled],
        "rss_after_500_mib": round(settled, 1),
        "rss_end_mib": round(rss_mib[-1], 1) if rss_mib else 0.0,
        "rss_end_over_500": round(rss_mib[-1] / settled, 2) if settled else None,
        "rss_peak_mib": round(max(rss_mib), 1) if rss_mib else 0.0,
        "anon_after_500_mib": round(anon_settled, 1),
        "anon_end_mib": round(anon_mib[-1], 1) if anon_mib else 0.0,
        "anon_end_over_500": round(anon_mib[-1] / anon_settled, 2) if anon_settled else None,
        "peak_hwm_mib": round(server.memory_kb("VmHWM") / 1024, 1) if alive else None,
        "request_p50_ms": round(statistics.median(times) * 1000, 1) if times else None,
        "request_max_s": round(max(times), 2) if times else None,
        "slow_in_run": [(round(seconds, 1), sent.reproducer()[:300]) for sent, seconds in slow_requests],
        "slow_alone": [(round(seconds, 1), text) for seconds, text in slow_alone if seconds > slow],
        "broken_indices": broken,
    }


def _replay(http: httpx.Client, sent: Sent) -> tuple[float, str]:
    """The seconds `sent` takes alone, and its reproducer."""
    started = time.perf_counter()
    with contextlib.suppress(httpx.HTTPError):  # its time is what counts
        http.request(sent.method, sent.url, headers=sent.headers, content=sent.body)
    return time.perf_counter() - started, sent.reproducer()[:300]


def _broken_indices(http: httpx.Client) -> list[str]:
    """Every index that does not count, search or refresh, or is red."""
    broken = []
    listing = http.get("/_cat/indices", params={"format": "json", "expand_wildcards": "all"})
    for row in listing.json():
        name = row["index"]
        if row.get("status") == "close":
            continue
        path = "/" + quote(name, safe="")
        checks = {
            "count": http.get(f"{path}/_count").status_code,
            "search": http.post(f"{path}/_search", json={"size": 5}).status_code,
            "refresh": http.post(f"{path}/_refresh").status_code,
        }
        failed = [check for check, status in checks.items() if status != 200]
        if row.get("health") == "red":
            failed.append("red")
        if failed:
            broken.append(f"{name}: {', '.join(failed)}")
    return broken


if __name__ == "__main__":
    sys.exit(main())
