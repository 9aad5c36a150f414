"""kNN over HTTP, approximate (HNSW) beside exact:
`python -m bench.knn [--docs 20000] [--dims 384] [--queries 50] [--index-type int8_hnsw]`.

Starts `leafsearch serve` on `--data` (a temporary folder by default), indexes `--docs` seeded
unit vectors (`dense_vector`, `dot_product`, `index_options.type: --index-type`) with `_bulk`
(500 per request, one client), refreshes, then times `--queries` top-level `knn` searches
(`k: 10, num_candidates: 100`) one after the other and checks each answer against a numpy brute
force over the same vectors. The vectors are drawn around `--clusters` random centres (as
embeddings of real text cluster; 0: uniform on the sphere, the worst case of any graph index).
Prints indexing documents per second, the server's memory (its processes' resident set) and the
size of its files, the segments searched, the searches' p50 and p99 in milliseconds beside the
same search done exactly by numpy in this process, and recall@10 against that exact answer.
The searches start once no merge runs (the graphs of merged segments built)."""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import orjson

from leafsearch.testing import Server

CHUNK = 500
#: Rows of the generated vectors made at a time (a block of float64 normals, then float32).
_BLOCK = 50_000


def generate(docs: int, dims: int, clusters: int, seed: int) -> np.ndarray:
    """`docs` unit vectors (float32), seeded."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(clusters, 1), dims)).astype(np.float32)
    out = np.empty((docs, dims), dtype=np.float32)
    for start in range(0, docs, _BLOCK):
        n = min(_BLOCK, docs - start)
        block = rng.normal(size=(n, dims)).astype(np.float32)
        if clusters:
            block = centres[rng.integers(0, clusters, n)] + np.float32(0.5) * block
        out[start : start + n] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def bulk_bodies(stored: np.ndarray) -> Iterator[bytes]:
    for start in range(0, len(stored), CHUNK):
        yield b"".join(
            orjson.dumps({"index": {"_id": str(i)}}) + b"\n" + orjson.dumps({"v": stored[i].tolist()}) + b"\n"
            for i in range(start, min(start + CHUNK, len(stored)))
        )


def resident_mb(pid: int) -> float:
    """Resident memory of `pid` and its descendants (search and merge workers), in MB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return total / 1024


def disk_mb(folder: Path) -> tuple[float, float]:
    """(all files, vector graph files) under `folder`, in MB."""
    files = [f for f in folder.rglob("*") if f.is_file()]
    graphs = sum(f.stat().st_size for f in files if f.name.endswith(".usearch"))
    return sum(f.stat().st_size for f in files) / 2**20, graphs / 2**20


def merges_done(http: httpx.Client) -> None:
    """Wait until the index ran no merge for 3 seconds (the merge loop looks every half second)."""
    http.post("/vec/_refresh")
    quiet, last = 0, None
    while quiet < 3:
        merges = http.get("/vec/_stats/merge").json()["_all"]["primaries"]["merges"]
        state = (merges["current"], merges["total"])
        quiet = quiet + 1 if state == last and merges["current"] == 0 else 0
        last = state
        time.sleep(1)


def measure(http: httpx.Client, stored: np.ndarray, queries: np.ndarray) -> None:
    segments = http.get("/_cat/segments/vec", params={"format": "json"}).json()
    print(f"segments searched: {len(segments)}")
    took, baseline, found = [], [], 0
    for q in queries:
        knn = {"field": "v", "query_vector": q.tolist(), "k": 10, "num_candidates": 100}
        began = time.perf_counter()
        response = http.post("/vec/_search", json={"knn": knn, "_source": False})
        took.append(time.perf_counter() - began)
        assert response.status_code == 200, response.text[:500]
        got = {int(h["_id"]) for h in response.json()["hits"]["hits"]}
        began = time.perf_counter()
        scores = stored @ q
        expected = set(np.argpartition(-scores, 9)[:10].tolist())
        baseline.append(time.perf_counter() - began)
        found += len(got & expected)
    ms = np.array(took) * 1000
    p50, p99 = np.percentile(ms, 50), np.percentile(ms, 99)
    print(f"knn k=10 num_candidates=100: p50={p50:.1f} ms p99={p99:.1f} ms")
    numpy_ms = np.array(baseline) * 1000
    print(
        f"numpy exact (stored @ q, top 10), same run: p50={np.percentile(numpy_ms, 50):.1f} ms "
        f"p99={np.percentile(numpy_ms, 99):.1f} ms"
    )
    print(f"recall@10={found / (10 * len(queries)):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.knn", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--index-type", default="int8_hnsw")
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--data", type=Path, default=None, help="the server's folder (deleted at the end)")
    args = parser.parse_args()
    stored = generate(args.docs, args.dims, args.clusters, seed=0)
    queries = generate(args.queries + args.docs, args.dims, args.clusters, seed=0)[args.docs :]
    mapping = {
        "properties": {
            "v": {
                "type": "dense_vector",
                "dims": args.dims,
                "similarity": "dot_product",
                "index_options": {"type": args.index_type},
            }
        }
    }
    ndjson = {"content-type": "application/x-ndjson"}
    data = args.data / "data" if args.data is not None else None
    try:
        with Server(data) as server, httpx.Client(base_url=server.url, timeout=7200) as http:
            assert http.put("/vec", json={"mappings": mapping}).status_code == 200
            began = time.perf_counter()
            for body in bulk_bodies(stored):
                response = http.post("/vec/_bulk", content=body, headers=ndjson)
                assert response.status_code == 200 and not response.json()["errors"], response.text[:500]
            http.post("/vec/_refresh")
            seconds = time.perf_counter() - began
            merges_done(http)
            settled = time.perf_counter() - began
            print(f"docs={args.docs} dims={args.dims} type={args.index_type} clusters={args.clusters}")
            rate = args.docs / seconds
            print(f"indexing (bulk, refresh, graphs built)={rate:,.0f} docs/s ({seconds:.0f} s)")
            print(f"merges done after {settled:.0f} s")
            print(f"server resident memory after indexing: {resident_mb(server.process.pid):,.0f} MB")
            files, graphs = disk_mb(server.data)
            print(f"on disk: {files:,.0f} MB, of which vector graphs {graphs:,.0f} MB")
            measure(http, stored, queries[: args.queries])
            print(f"server resident memory after searching: {resident_mb(server.process.pid):,.0f} MB")
    finally:
        if args.data is not None:
            shutil.rmtree(args.data, ignore_errors=True)


if __name__ == "__main__":
    main()
