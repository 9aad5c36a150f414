"""Export and import throughput: `leafsearch export` / `leafsearch import` beside the server's raw
stream, raw `_bulk` and elasticdump, on the benchmark's generated documents, in one run against
one server.

    python -m bench.transfer                 # 1,000,000 documents
    python -m bench.transfer --docs 200000 --json transfer.json
    python -m bench.transfer --import-only --rounds 3   # raw _bulk and the import, 3 times in turn

Rows, in order:
- `bench` is loaded (raw `_bulk`, not measured);
- the raw stream: `POST /bench/_export`, bytes received and counted, not decoded (the export's
  reference); `leafsearch export` of `bench` to `.ndjson` (1 stream, 2 slices) and to `.ndjson.zst`;
  elasticdump's export (scroll, `--limit 10000`);
- raw `_bulk`, 4 clients: the same pre-encoded bodies of 5,000 documents posted by 4 threads into a
  new index with the benchmark's mapping, then `_refresh` (the import's reference); `leafsearch
  import` of the exported `.ndjson` into a new index (`--workers 4`; the mapping from the
  `.index.json` the export wrote beside it; it ends with `_refresh` too), and elasticdump's
  import of the same file (`--limit 5000`) into an index created with the same mapping.
With `--import-only` the export is made once (not measured) and only the import rows run,
`--rounds` times in turn (raw `_bulk`, `leafsearch import`, elasticdump's import, raw `_bulk`, ...;
a row of a later round is named with its round): an A/B of the import's client, server and
workers CPU in one run. Every row starts once the background merges of the load or of the row
before settled, so that no row's CPU holds another's merges.
Each figure is documents per second of wall time for the whole command, process start included,
and CPU milliseconds per 1,000 documents: the client's (this process's threads for the raw rows,
the command's process otherwise), the server process's and its workers'. Every export is checked
(N lines, N distinct `_id`s), every import counted. Indices other than `bench` are deleted after
their row, so the server holds at most two copies.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import httpx
import orjson
import zstandard

from bench import harness
from bench.client import Client as BenchClient
from bench.generate import MAPPING, generate
from bench.server import ROOT, MemorySampler, Server
from bench.workloads.common import settle_merges

ELASTICDUMP = ROOT / "tests" / "clients" / "js" / "node_modules" / "elasticdump" / "bin" / "elasticdump"
BULK_DOCS = 5_000
BULK_CLIENTS = 4


@dataclass
class Row:
    name: str
    seconds: float
    client_cpu: float
    server_cpu: float
    workers_cpu: float
    reference: str = ""  # the row this one is a ratio of
    ratio: float = 0.0


def _cpu(kind: int) -> float:
    usage = resource.getrusage(kind)
    return usage.ru_utime + usage.ru_stime


class Bench:
    def __init__(self, server: Server, n: int) -> None:
        self.server = server
        self.n = n
        self.http = httpx.Client(base_url=server.url, timeout=600)
        self.rows: dict[str, Row] = {}
        self.phase = ""  # the row being measured (the memory's peak is told with it)

    def measure(self, name: str, work: Callable[[], None], *, in_process: bool = False) -> Row:
        """Runs `work`, timing it and the CPU of the client (this process's threads when
        `in_process`, else the child processes it waited for) and of the server's processes."""
        kind = resource.RUSAGE_SELF if in_process else resource.RUSAGE_CHILDREN
        self.phase = name
        client0 = _cpu(kind)
        own0, below0 = self.server.cpu_seconds()
        started = time.perf_counter()
        work()
        seconds = time.perf_counter() - started
        own1, below1 = self.server.cpu_seconds()
        row = Row(name, seconds, _cpu(kind) - client0, own1 - own0, below1 - below0)
        self.rows[name] = row
        print(f"  {name}: {self.n / seconds:,.0f} docs/s", file=sys.stderr, flush=True)
        return row

    def create(self, index: str) -> None:
        self.http.put(f"/{index}", json={"mappings": MAPPING}).raise_for_status()

    def drop(self, index: str) -> None:
        self.http.delete(f"/{index}")

    def count(self, index: str) -> int:
        self.http.post(f"/{index}/_refresh").raise_for_status()
        return self.http.get(f"/{index}/_count").json()["count"]

    def raw_bulk(self, bodies: list[bytes], index: str) -> None:
        """`bodies` posted by `BULK_CLIENTS` threads, each its own connection."""
        pending = list(reversed(bodies))
        lock = threading.Lock()
        failures: list[str] = []

        def post() -> None:
            with httpx.Client(base_url=self.server.url, timeout=600) as http:
                while True:
                    with lock:
                        if not pending:
                            return
                        body = pending.pop()
                    answer = http.post(
                        f"/{index}/_bulk", content=body, headers={"content-type": "application/x-ndjson"}
                    )
                    if answer.status_code != 200 or b'"errors":true' in answer.content[:100]:
                        failures.append(answer.text[:300])

        threads = [threading.Thread(target=post) for _ in range(BULK_CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise RuntimeError(f"raw _bulk failed: {failures[0]}")

    def raw_stream(self, index: str) -> None:
        """The export endpoint's response, received and counted (lines), never decoded."""
        lines = 0
        with self.http.stream("POST", f"/{index}/_export", json={}) as response:
            response.raise_for_status()
            for data in response.iter_raw(1 << 20):
                lines += data.count(b"\n")
        if lines != self.n + 1:  # the documents and the trailer
            raise RuntimeError(f"the raw stream had {lines} lines, expected {self.n + 1}")


def _run(command: list[str]) -> None:
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def _leafsearch(*args: str) -> Callable[[], None]:
    return lambda: _run([sys.executable, "-m", "leafsearch", *args, "--quiet"])


def _elasticdump(*args: str) -> Callable[[], None]:
    return lambda: _run(["node", str(ELASTICDUMP), *args])


def _check_export(path: Path, n: int) -> None:
    data = path.read_bytes()
    if path.suffix == ".zst":
        data = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
    ids = {orjson.loads(line)["_id"] for line in data.splitlines()}
    lines = data.count(b"\n")
    if lines != n or len(ids) != n:
        raise RuntimeError(f"{path}: {lines} lines, {len(ids)} distinct ids, expected {n}")


def settle(server: Server, index: str) -> None:
    """Until the background merges of `index` are done (`bench.workloads.common.settle_merges`)."""
    http = BenchClient(server.url)
    try:
        settle_merges(SimpleNamespace(http=http), index)
    finally:
        http.close()


def export_rows(bench: Bench, work: Path, exported: Path, elasticdump: bool) -> None:
    """The export rows: the raw stream, `leafsearch export` (to `exported`, kept for the import
    rows) and elasticdump's export."""
    server = bench.server
    raw = bench.measure(
        "raw stream (_export, bytes received)", lambda: bench.raw_stream("bench"), in_process=True
    )
    for name, output, slices in (
        ("leafsearch export to .ndjson", exported, 1),
        ("leafsearch export to .ndjson, 2 slices", work / "export-2.ndjson", 2),
        ("leafsearch export to .ndjson.zst", work / "export.ndjson.zst", 1),
    ):
        row = bench.measure(
            name,
            _leafsearch("export", "bench", str(output), "--url", server.url, "--slices", str(slices)),
        )
        row.reference, row.ratio = raw.name, raw.seconds / row.seconds
        _check_export(output, bench.n)
        if output != exported:
            output.unlink()
    dump = None
    if elasticdump:
        output = work / "elasticdump.ndjson"
        dump = bench.measure(
            "elasticdump export (scroll, --limit 10000)",
            _elasticdump(f"--input={server.url}/bench", f"--output={output}", "--limit=10000"),
        )
        _check_export(output, bench.n)
        output.unlink()
        row = bench.rows["leafsearch export to .ndjson"]
        bench.rows["leafsearch export to .ndjson vs elasticdump"] = Row(
            "leafsearch export to .ndjson vs elasticdump",
            row.seconds,
            row.client_cpu,
            row.server_cpu,
            row.workers_cpu,
            dump.name,
            dump.seconds / row.seconds,
        )


def import_rows(bench: Bench, bodies: list[bytes], exported: Path, elasticdump: bool, round_no: int) -> None:
    """The import rows: raw `_bulk` of `bodies` (the import's reference, in the same state of the
    server: raw bodies, then the refresh that `leafsearch import` also ends with), `leafsearch
    import` of `exported` and elasticdump's import; each index's background merges settle before
    it is dropped, so that no row's CPU holds the merges of the one before."""
    server, n = bench.server, bench.n
    suffix = f" (round {round_no})" if round_no > 1 else ""

    def done(index: str, what: str) -> None:
        if bench.count(index) != n:
            raise RuntimeError(f"{what}: not every document arrived")
        settle(server, index)
        bench.drop(index)

    bench.create("bench-raw")
    raw_bulk = bench.measure(
        f"raw _bulk, {BULK_CLIENTS} clients, then _refresh{suffix}",
        lambda: (bench.raw_bulk(bodies, "bench-raw"), bench.count("bench-raw")),
        in_process=True,
    )
    done("bench-raw", "raw _bulk")
    name = f"leafsearch import of the export, --workers {BULK_CLIENTS}{suffix}"
    row = bench.measure(
        name,
        _leafsearch(
            "import", str(exported), "bench-import", "--url", server.url, "--workers", str(BULK_CLIENTS)
        ),
    )
    row.reference, row.ratio = raw_bulk.name, raw_bulk.seconds / row.seconds
    done("bench-import", "leafsearch import")
    if elasticdump:
        bench.create("bench-dump")
        dump_import = bench.measure(
            f"elasticdump import of the export (--limit 5000){suffix}",
            _elasticdump(f"--input={exported}", f"--output={server.url}/bench-dump", "--limit=5000"),
        )
        done("bench-dump", "elasticdump import")
        bench.rows[f"leafsearch import vs elasticdump{suffix}"] = Row(
            f"leafsearch import vs elasticdump{suffix}",
            row.seconds,
            row.client_cpu,
            row.server_cpu,
            row.workers_cpu,
            dump_import.name,
            dump_import.seconds / row.seconds,
        )


@dataclass
class Memory:
    """The server's processes' memory over the run, in kB: the largest sum of their `VmRSS` at one
    moment and of their `Pss` (sampled every 0.1 s), and the sum of each one's own peak (`VmHWM`,
    reached at different moments: an upper bound)."""

    rss_peak: int = 0
    pss_peak: int = 0
    hwm_sum: int = 0
    peak_phase: str = ""  # the row measured at the RSS peak
    #: Each process's memory at the RSS peak, by role (`bench.server.process_memory_kb`).
    peak_processes: list[tuple[str, dict[str, int]]] = field(default_factory=list)


def run(
    n: int, work: Path, elasticdump: bool, *, import_only: bool = False, rounds: int = 1
) -> tuple[list[Row], Memory]:
    dataset = generate(n)
    bodies = dataset.bulk_bodies(BULK_DOCS)
    del dataset
    server = Server(work / "data", work / "server.log")
    server.start()
    bench = Bench(server, n)
    memory = Memory()
    with MemorySampler(server, interval=0.1, pss=True, phase=lambda: bench.phase) as sampler:
        try:
            bench.phase = "loading bench"
            bench.create("bench")  # the index the exports read
            bench.raw_bulk(bodies, "bench")
            assert bench.count("bench") == n
            settle(server, "bench")  # (no row holds the load's merges)

            exported = work / "export.ndjson"
            if import_only:
                _leafsearch("export", "bench", str(exported), "--url", server.url)()
                _check_export(exported, n)
            else:
                export_rows(bench, work, exported, elasticdump)
            for round_no in range(1, rounds + 1):
                import_rows(bench, bodies, exported, elasticdump, round_no)
            memory.hwm_sum = server.memory_kb("VmHWM")
        finally:
            bench.http.close()
            server.stop()
    memory.rss_peak, memory.pss_peak = sampler.peak_kb, sampler.peak_pss_kb
    memory.peak_phase, memory.peak_processes = sampler.peak_phase, sampler.peak_processes
    return list(bench.rows.values()), memory


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-elasticdump", action="store_true")
    parser.add_argument(
        "--import-only",
        action="store_true",
        help="export once, unmeasured, then only the import rows (raw _bulk, leafsearch import, "
        "elasticdump's import)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="the import rows this many times in turn (default 1)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a quarter of each fixed wait (the merges' quiet time), as tests/test_bench_smoke.py "
        "runs it: its figures are no measurements",
    )
    options = parser.parse_args()
    if options.smoke:
        harness.smoke()
    n = options.docs
    elasticdump = not options.no_elasticdump and ELASTICDUMP.exists() and shutil.which("node") is not None
    if not elasticdump and not options.no_elasticdump:
        print(
            "elasticdump: not installed (a run of tests/clients installs it); its rows are left out",
            file=sys.stderr,
        )
    work = Path(tempfile.mkdtemp(prefix="leafsearch-transfer-"))
    try:
        rows, memory = run(n, work, elasticdump, import_only=options.import_only, rounds=options.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    per_k = 1000 / n
    print(
        f"{n:,} documents; the server's processes at their peak: RSS {memory.rss_peak / 1024:,.0f} MB, "
        f"PSS {memory.pss_peak / 1024:,.0f} MB (sum of each one's own peak: {memory.hwm_sum / 1024:,.0f} MB)"
    )
    print(f"At the RSS peak ({memory.peak_phase}), MB: RSS (anonymous + mapped files), PSS (the same)")
    for role, kb in memory.peak_processes:
        mb = {key: value / 1024 for key, value in kb.items()}
        print(
            f"  {role}: RSS {mb['VmRSS']:,.0f} ({mb['RssAnon']:,.0f} + {mb['RssFile']:,.0f}), "
            f"PSS {mb['Pss']:,.0f} ({mb['Pss_Anon']:,.0f} + {mb['Pss_File']:,.0f})"
        )
    print("| row | docs/s | ratio | client CPU ms/1k docs | server ms/1k | workers ms/1k |")
    print("|---|---:|---|---:|---:|---:|")
    for row in rows:
        ratio = f"{row.ratio:.2f}x {row.reference}" if row.reference else ""
        print(
            f"| {row.name} | {n / row.seconds:,.0f} | {ratio} | {row.client_cpu * 1000 * per_k:.1f} "
            f"| {row.server_cpu * 1000 * per_k:.1f} | {row.workers_cpu * 1000 * per_k:.1f} |"
        )
    if options.json:
        payload = {"docs": n, "memory_kb": memory.__dict__, "rows": [row.__dict__ for row in rows]}
        options.json.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
