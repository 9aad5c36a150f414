"""Export and import throughput: `leafsearch export` / `leafsearch import` beside elasticdump, on
the benchmark's generated documents, in one run against one server.

    python -m bench.transfer                 # 1,000,000 documents
    python -m bench.transfer --docs 200000 --json transfer.json

Rows: import with 1, 2 and 4 parallel bulk requests (each into a new index, deleted after), then
export of the same index with one stream, 2 and 4 slices (plain NDJSON), one stream to `.zst`,
and elasticdump's export (scroll, `--limit 1000`) and import (`--limit 5000`) of the same file.
Each figure is documents per second of wall time for the whole command, process start included.
Every export is checked: N lines, N distinct `_id`s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import zstandard

from bench.generate import generate, write_import_files
from bench.server import ROOT, Server

ELASTICDUMP = ROOT / "tests" / "clients" / "js" / "node_modules" / "elasticdump" / "bin" / "elasticdump"


def _run(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return seconds


def _leafsearch(*args: str) -> float:
    return _run([sys.executable, "-m", "leafsearch", *args, "--quiet"])


def _check_export(paths: list[Path], n: int) -> None:
    ids: set[str] = set()
    lines = 0
    for path in paths:
        data = path.read_bytes()
        if path.suffix == ".zst":
            data = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
        for line in data.splitlines():
            ids.add(orjson.loads(line)["_id"])
            lines += 1
    if lines != n or len(ids) != n:
        raise RuntimeError(f"{paths[0]}: {lines} lines, {len(ids)} distinct ids, expected {n}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-elasticdump", action="store_true")
    options = parser.parse_args()
    n = options.docs
    work = Path(tempfile.mkdtemp(prefix="leafsearch-transfer-"))
    rows: list[tuple[str, float]] = []
    try:
        dataset = generate(n)
        records, mapping = write_import_files(dataset, work)
        server = Server(work / "data", work / "server.log")
        server.start()
        url = server.url
        try:
            for workers in (1, 2, 4):
                index = "bench" if workers == 2 else f"bench-w{workers}"
                seconds = _leafsearch(
                    "import",
                    str(records),
                    index,
                    "--url",
                    url,
                    "--mapping",
                    str(mapping),
                    "--workers",
                    str(workers),
                )
                rows.append((f"leafsearch import, {workers} parallel bulk requests", n / seconds))
                if index != "bench":
                    subprocess.run(["curl", "-s", "-XDELETE", f"{url}/{index}"], capture_output=True)
            for slices in (1, 2, 4):
                output = work / f"export-{slices}.ndjson"
                seconds = _leafsearch("export", "bench", str(output), "--url", url, "--slices", str(slices))
                _check_export([output], n)
                rows.append((f"leafsearch export, {slices} slice{'s' if slices > 1 else ''}", n / seconds))
            for slices in (1, 4):
                output = work / f"export-{slices}.ndjson.zst"
                seconds = _leafsearch("export", "bench", str(output), "--url", url, "--slices", str(slices))
                _check_export([output], n)
                rows.append(
                    (f"leafsearch export to .zst, {slices} slice{'s' if slices > 1 else ''}", n / seconds)
                )
            if not options.no_elasticdump and ELASTICDUMP.exists() and shutil.which("node"):
                output = work / "elasticdump.ndjson"
                seconds = _run(
                    ["node", str(ELASTICDUMP), f"--input={url}/bench", f"--output={output}", "--limit=1000"]
                )
                _check_export([output], n)
                rows.append(("elasticdump export (scroll, --limit 1000)", n / seconds))
                seconds = _run(
                    [
                        "node",
                        str(ELASTICDUMP),
                        f"--input={records}",
                        f"--output={url}/bench-dump",
                        "--limit=5000",
                    ]
                )
                rows.append(("elasticdump import (--limit 5000)", n / seconds))
            else:
                rows.append(("elasticdump: not installed (tests/clients/js: npm ci)", 0.0))
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{n:,} documents")
    for name, rate in rows:
        print(f"  {name:<50} {rate:>10,.0f} docs/s")
    if options.json:
        options.json.write_text(json.dumps({"docs": n, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
