"""Snapshot and restore of the benchmark index: a first snapshot, a second after a share of the
documents changed (incremental), and a restore under a new name.

    python -m bench.snapshots --docs 1000000            # a temporary data folder and repository
    python -m bench.snapshots --docs 1000000 --data /tmp/snap1m   # loads the folder once, reuses it
    python -m bench.snapshots --docs 20000 --json snap.json

The data is bench/generate.py's, loaded into index `bench` (merges settled) by a server started
with `--path-repo` and `--search-workers 0`. Figures, each one timed request
(`wait_for_completion=true`):

- first snapshot: time, the bytes it copied into the repository (`_status`: incremental
  size; all of it is new) and the repository's size on disk;
- `--changed` (default 1%) of the documents overwritten (same ids, a message new to the run; one bulk per
  5,000, refreshed; the index is not merged again), then the second snapshot: time, bytes copied
  (incremental) against the bytes it references in all;
- restore of the second snapshot as `restored-bench`: time until the request answers, and until
  `GET /restored-bench/_count` answers every document.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

from bench.client import Client, HttpError
from bench.generate import MAPPING, generate
from bench.server import Server, disk_bytes
from bench.workloads.common import BULK_CHUNK, settle_merges

INDEX = "bench"
REPO = "bench-repo"
RESTORED = "restored-bench"


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _call(http: Client, method: str, path: str, body: Any = None) -> Any:
    return orjson.loads(http.raw(method, path, None if body is None else orjson.dumps(body)))


def _timed(http: Client, method: str, path: str, body: Any = None) -> tuple[float, Any]:
    began = time.perf_counter()
    answer = _call(http, method, path, body)
    return time.perf_counter() - began, answer


def ensure_loaded(http: Client, docs: int, seed: int) -> Any:
    dataset = generate(docs, seed)
    try:
        loaded = _call(http, "GET", f"/{INDEX}/_count")["count"] == docs
    except HttpError as error:
        if error.status != 404:
            raise
        loaded = False
    if not loaded:
        _progress(f"loading {docs:,} documents")
        try:
            _call(http, "DELETE", f"/{INDEX}")
        except HttpError as error:
            if error.status != 404:
                raise
        _call(http, "PUT", f"/{INDEX}", {"mappings": MAPPING})
        for body in dataset.bulk_bodies(BULK_CHUNK):
            response = orjson.loads(http.raw("POST", f"/{INDEX}/_bulk", body, "application/x-ndjson"))
            assert not response["errors"], "bulk errors while loading"
        _call(http, "POST", f"/{INDEX}/_refresh")
    settle_merges(SimpleNamespace(http=http), INDEX)
    return dataset


def change(http: Client, dataset: Any, share: float) -> int:
    """Overwrite every `1/share`-th document (same id, another message)."""
    step = max(1, round(1 / share))
    ids = dataset.ids[::step]
    run = time.time_ns()  # new text each run: a reused folder's earlier changes are not these
    for k in range(0, len(ids), BULK_CHUNK):
        source = '{{"@timestamp":"2024-01-01T00:00:00Z","message":"changed {0} {1}","id":"{0}"}}'
        lines = [f'{{"index":{{"_id":"{i}"}}}}\n{source.format(i, run)}\n' for i in ids[k : k + BULK_CHUNK]]
        response = orjson.loads(
            http.raw("POST", f"/{INDEX}/_bulk", "".join(lines).encode(), "application/x-ndjson")
        )
        assert not response["errors"], "bulk errors while changing"
    _call(http, "POST", f"/{INDEX}/_refresh")
    return len(ids)


def _stats(http: Client, snapshot: str) -> dict[str, Any]:
    return _call(http, "GET", f"/_snapshot/{REPO}/{snapshot}/_status")["snapshots"][0]["stats"]


def run(http: Client, repo_folder: Path, docs: int, seed: int, share: float) -> list[dict[str, Any]]:
    dataset = ensure_loaded(http, docs, seed)
    # registered first: a reused data folder may name the repository of an earlier run's folder
    _call(http, "PUT", f"/_snapshot/{REPO}", {"type": "fs", "settings": {"location": REPO}})
    for name in ("one", "two"):
        try:
            _call(http, "DELETE", f"/_snapshot/{REPO}/{name}")
        except HttpError as error:
            if error.status != 404:
                raise
    try:
        _call(http, "DELETE", f"/{RESTORED}")
    except HttpError as error:
        if error.status != 404:
            raise
    rows: list[dict[str, Any]] = []
    index_bytes = _call(http, "GET", f"/{INDEX}/_stats/store")["_all"]["primaries"]["store"]["size_in_bytes"]
    rows.append({"name": "index store size", "value": index_bytes / 1e6, "unit": "MB"})

    _progress("first snapshot")
    took, answer = _timed(http, "PUT", f"/_snapshot/{REPO}/one?wait_for_completion=true", {"indices": INDEX})
    assert answer["snapshot"]["state"] == "SUCCESS", answer
    first = _stats(http, "one")
    rows += [
        {"name": "first snapshot: time", "value": took, "unit": "s"},
        {
            "name": "first snapshot: bytes copied",
            "value": first["incremental"]["size_in_bytes"] / 1e6,
            "unit": "MB",
        },
        {
            "name": "first snapshot: files copied",
            "value": first["incremental"]["file_count"],
            "unit": "files",
        },
        {"name": "repository on disk after it", "value": disk_bytes(repo_folder) / 1e6, "unit": "MB"},
    ]

    _progress(f"changing {share:.1%} of the documents")
    changed = change(http, dataset, share)
    rows.append({"name": "documents changed", "value": changed, "unit": "docs"})
    _progress("second snapshot")
    took, answer = _timed(http, "PUT", f"/_snapshot/{REPO}/two?wait_for_completion=true", {"indices": INDEX})
    assert answer["snapshot"]["state"] == "SUCCESS", answer
    second = _stats(http, "two")
    rows += [
        {"name": "second snapshot: time", "value": took, "unit": "s"},
        {
            "name": "second snapshot: bytes copied",
            "value": second["incremental"]["size_in_bytes"] / 1e6,
            "unit": "MB",
        },
        {
            "name": "second snapshot: files copied",
            "value": second["incremental"]["file_count"],
            "unit": "files",
        },
        {
            "name": "second snapshot: bytes referenced",
            "value": second["total"]["size_in_bytes"] / 1e6,
            "unit": "MB",
        },
        {"name": "repository on disk after it", "value": disk_bytes(repo_folder) / 1e6, "unit": "MB"},
    ]

    _progress("restore")
    began = time.perf_counter()
    answer = _call(
        http,
        "POST",
        f"/_snapshot/{REPO}/two/_restore?wait_for_completion=true",
        {"indices": INDEX, "rename_pattern": INDEX, "rename_replacement": RESTORED},
    )
    answered = time.perf_counter() - began
    count = _call(http, "GET", f"/{RESTORED}/_count")["count"]
    counted = time.perf_counter() - began
    assert count == docs, (count, docs)
    rows += [
        {"name": "restore: time until it answers", "value": answered, "unit": "s"},
        {"name": "restore: time until _count answers every document", "value": counted, "unit": "s"},
    ]
    _call(http, "DELETE", f"/{RESTORED}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshots", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--changed", type=float, default=0.01, help="share of documents changed (0.01)")
    parser.add_argument("--data", type=Path, help="data folder, kept (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leafsearch-snapshots-") as scratch:
        data = args.data or Path(scratch) / "data"
        data.mkdir(parents=True, exist_ok=True)
        repos = Path(scratch) / "repos"
        repos.mkdir()
        server = Server(
            data, Path(scratch) / "server.log", ["--path-repo", str(repos), "--search-workers", "0"]
        )
        server.start()
        _progress(f"server pid {server.pid} on {server.url}, data in {data}")
        try:
            rows = run(Client(server.url, timeout=3600.0), repos / REPO, args.docs, args.seed, args.changed)
        finally:
            server.stop()
    for row in rows:
        print(f"{row['name']:52s} {row['value']:12,.2f}  {row['unit']}")
    if args.json is not None:
        args.json.write_text(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
