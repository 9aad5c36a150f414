"""What a search process pays on its first queries when another process ran the first one.

    python -m bench.cold_process                 # 1,000,000 documents
    python -m bench.cold_process --docs 300000 --runs 3
    python -m bench.cold_process --engine /work/main   # the search processes import that tree's leafsearch

With two search workers, W6's query 0 runs in one worker and query 1 in the other, which has not
seen the segments yet: whatever a process derives per segment (sort orders, keyword postings,
source offsets, widened columns) it pays on its first queries, once per process. This measures
that without the server: the data is loaded once through a server (`leafsearch import`, merges
on, as the bench loads it); then, per run, a copy of the data folder without the files derived
from its segments (`sort-*.order`, `*.postings`) is opened by one process that runs query 0 and
exits, and by a fresh process that runs the other 100 queries. Times are CPU time of that process
per query (`time.process_time`), which a busy machine distorts less than wall time; wall times
are printed beside them. The second process imports `numpy.ma` first, as a search worker does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import orjson

SEED = 42  # the bench's default data seed, which W6's queries are drawn from


def _queries(first: int, last: int) -> list[dict]:
    """W6's bodies (query 0 first), drawn as W6 draws them over the dataset's time span."""
    from bench.workloads.top_pages import W6_QUERIES, service_range_body, service_range_queries

    span = SimpleNamespace(dataset=SimpleNamespace(ts_ms=np.array([first, last - 1])))
    drawn = service_range_queries(span, SEED + 6, W6_QUERIES + 1)  # type: ignore[arg-type]
    return [service_range_body(*q) for q in drawn]


def _process(data: str, bodies: str) -> None:
    """One search process: run the bodies in order, print their CPU and wall times (ms) as JSON."""
    import numpy.ma  # noqa: F401 - as a search worker imports it at start

    from leafsearch import Client, Node

    with Node(data, background=False) as node:
        client = Client(node=node)
        cpu, wall = [], []
        for body in orjson.loads(Path(bodies).read_bytes()):
            started, used = time.perf_counter(), time.process_time()
            client.search(index="bench", **body)
            cpu.append((time.process_time() - used) * 1000)
            wall.append((time.perf_counter() - started) * 1000)
    print(orjson.dumps({"cpu": cpu, "wall": wall}).decode())


def _run(data: Path, work: Path, bodies: list[dict], engine: str | None) -> dict[str, float]:
    copy = work / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(data, copy)
    for derived in [*copy.rglob("sort-*.order"), *copy.rglob("*.postings")]:
        derived.unlink()
    times = []
    for part in (bodies[:1], bodies[1:]):
        (work / "bodies.json").write_bytes(orjson.dumps(part))
        # Run as a script (not `-m bench...`), so that `--engine` decides where leafsearch comes from.
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--process",
            str(copy),
            str(work / "bodies.json"),
        ]
        env = {**os.environ, **({"PYTHONPATH": engine} if engine else {})}
        out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
        times.append(orjson.loads(out.strip().splitlines()[-1]))
    first, rest = times
    cpu = rest["cpu"]
    return {
        "query 0, first process, CPU ms": first["cpu"][0],
        "query 1, second process, CPU ms": cpu[0],
        "second process p50 CPU ms": float(np.percentile(cpu, 50)),
        "second process p99 CPU ms": float(np.percentile(cpu, 99)),
        "second process queries over 5 ms CPU": float(sum(c > 5 for c in cpu)),
        "second process slowest CPU ms": float(max(cpu)),
        "second process second slowest CPU ms": float(sorted(cpu)[-2]),
        "second process p50 wall ms": float(np.percentile(rest["wall"], 50)),
        "second process p99 wall ms": float(np.percentile(rest["wall"], 99)),
    }


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--process":
        _process(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--engine", help="a source tree whose leafsearch the search processes import")
    options = parser.parse_args()
    from bench.workers import _load

    work = Path(tempfile.mkdtemp(prefix="leafsearch-cold-"))
    try:
        data, first, last = _load(work, options.docs)
        (data / "node.lock").unlink(missing_ok=True)
        bodies = _queries(first, last)
        print(f"{options.docs:,} documents; W6's query 0 in one process, queries 1-100 in a fresh one")
        for run in range(options.runs):
            for key, value in _run(data, work, bodies, options.engine).items():
                print(f"  run {run + 1}  {key:<40} {value:>8.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
