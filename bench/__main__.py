"""`python -m bench`: start a server, load the data, run the workloads, print one table.

Exit status: 0 when every figure was measured or refused by the server (shown as "unsupported"),
1 when a correctness check failed (the server returned wrong results), 2 when the server could not
be started or reached.
"""

from __future__ import annotations

import argparse
import gc
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import orjson
from elasticsearch import Elasticsearch

from bench import harness
from bench.client import Client, HttpError
from bench.generate import generate
from bench.harness import Context, Row, describe
from bench.report import table
from bench.server import Server
from bench.sqlite_baseline import SqliteBaseline
from bench.workloads import WORKLOADS
from bench.workloads.common import ensure_loaded

INDEX = "bench"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--docs", type=int, default=1_000_000, help="documents to generate (default 1,000,000)"
    )
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help=f"comma-separated subset of {','.join(WORKLOADS)} (default all)",
    )
    parser.add_argument(
        "--data", type=Path, help="data folder for the server (new or empty; default: a temporary one)"
    )
    parser.add_argument(
        "--url",
        help="benchmark a running server instead (its index 'bench' is replaced; "
        "memory, disk and restart figures are then unsupported)",
    )
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--seed", type=int, default=42, help="data generator seed (default 42)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="go through every workload and check with few repetitions (3 samples per figure, "
        "a quarter of each fixed duration): a test that the benchmark works, no measurement",
    )
    args = parser.parse_args(argv)
    args.workloads = [name.strip().upper() for name in args.workloads.split(",") if name.strip()]
    unknown = [name for name in args.workloads if name not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {list(WORKLOADS)}")
    if args.docs < 100:
        parser.error("--docs must be at least 100 (one page)")
    if args.data is not None and args.data.exists() and any(args.data.iterdir()):
        parser.error(f"--data {args.data} is not empty: the benchmark needs a fresh data folder")
    return args


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _reach(args: argparse.Namespace, server: Server | None) -> str | None:
    """The server's URL once it answers; None (after saying why) when it cannot be started or reached."""
    if server is None:
        probe = Client(args.url, timeout=10)
        try:
            probe.raw("GET", "/")
        except (OSError, HttpError) as error:
            print(f"cannot reach the server at {args.url}: {error}", file=sys.stderr)
            return None
        finally:
            probe.close()
        return args.url
    try:
        server.start()
    except (RuntimeError, TimeoutError) as error:
        print(f"cannot start the server: {error}", file=sys.stderr)
        return None
    _progress(f"server pid {server.pid} on {server.url}, data in {server.data}")
    return server.url


def _run(args: argparse.Namespace, workdir: Path) -> int:
    started = time.perf_counter()
    dataset = generate(args.docs, args.seed)
    _progress(f"generated {len(dataset):,} documents in {time.perf_counter() - started:.1f} s")
    # The generated dataset stays alive for the correctness checks. Left to the cycle collector,
    # its millions of objects are rescanned on every collection that parsing a response triggers,
    # and the client, not the server, becomes what a read workload measures (at 1M documents
    # this halved the scroll and walk figures). Frozen, the collector skips them: before SQLite's
    # load, so that both sides' loads and reads run with the same collector settings.
    gc.collect()
    gc.freeze()
    sqlite = SqliteBaseline(workdir / "baseline.db")
    sqlite.load(dataset)
    _progress(f"SQLite baseline loaded in {sqlite.load_seconds:.1f} s")

    server = None
    if args.url is None:
        data = args.data or workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        server = Server(data, workdir / "server.log")
    try:
        url = _reach(args, server)
        if url is None:
            return 2
        ctx = Context(
            url=url,
            index=INDEX,
            dataset=dataset,
            seed=args.seed,
            sqlite=sqlite,
            http=Client(url),
            es=Elasticsearch(url, request_timeout=120),
            server=server,
        )
        try:
            rows = _workloads(ctx, args.workloads)
        finally:
            ctx.es.close()
            ctx.http.close()
    finally:
        sqlite.close()
        if server is not None:
            server.stop()

    print(
        f"leafsearch benchmark: {len(dataset):,} documents, seed {args.seed}, {url}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(table(rows))
    if args.json is not None:
        args.json.write_bytes(
            orjson.dumps(
                {"docs": len(dataset), "seed": args.seed, "rows": [row.as_json() for row in rows]},
                option=orjson.OPT_INDENT_2,
            )
        )
    return 1 if any(row.error and row.error.startswith("failed check") for row in rows) else 0


def _workloads(ctx: Context, names: list[str]) -> list[Row]:
    rows: list[Row] = []
    for name in names:
        title, run = WORKLOADS[name]
        _progress(f"{name}: {title}")
        try:
            if name != "W0":
                ensure_loaded(ctx)
            rows += run(ctx)
        except Exception as error:  # set-up failed: the workload's figures cannot exist
            rows.append(Row(name, title, "", error=describe(error)))
    return rows


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.smoke:
        harness.smoke()
    workdir = Path(tempfile.mkdtemp(prefix="leafsearch-bench-"))
    try:
        return _run(args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
