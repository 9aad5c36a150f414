"""Exact kNN over HTTP: `python -m bench.knn [--docs 20000] [--dims 384] [--queries 50]`.

Starts `leafsearch serve` on a temporary folder, indexes `--docs` random unit vectors
(`dense_vector`, `dot_product`) with `_bulk` (500 per request, one client), refreshes, then times
`--queries` top-level `knn` searches (`k: 10, num_candidates: 100`) one after the other and checks
each answer against a numpy brute force over the same vectors. Prints indexing documents per
second, the searches' p50 and p99 in milliseconds beside the same search done by numpy in this
process (the floor of an exact search), and recall@10 (1.0 for an exact search)."""

from __future__ import annotations

import argparse
import time

import httpx
import numpy as np
import orjson

from leafsearch.testing import Server

CHUNK = 500


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.knn", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    stored = rng.normal(size=(args.docs, args.dims)).astype(np.float32)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    queries = rng.normal(size=(args.queries, args.dims)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    mapping = {"properties": {"v": {"type": "dense_vector", "dims": args.dims, "similarity": "dot_product"}}}
    ndjson = {"content-type": "application/x-ndjson"}
    with Server() as server, httpx.Client(base_url=server.url, timeout=3600) as http:
        assert http.put("/vec", json={"mappings": mapping}).status_code == 200
        bodies = [
            b"".join(
                orjson.dumps({"index": {"_id": str(i)}})
                + b"\n"
                + orjson.dumps({"v": stored[i].tolist()})
                + b"\n"
                for i in range(start, min(start + CHUNK, args.docs))
            )
            for start in range(0, args.docs, CHUNK)
        ]
        began = time.perf_counter()
        for body in bodies:
            response = http.post("/vec/_bulk", content=body, headers=ndjson)
            assert response.status_code == 200 and not response.json()["errors"], response.text[:500]
        http.post("/vec/_refresh")
        indexing = args.docs / (time.perf_counter() - began)
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
    print(f"docs={args.docs} dims={args.dims} indexing={indexing:,.0f} docs/s")
    print(
        f"knn k=10 num_candidates=100: p50={np.percentile(ms, 50):.1f} ms p99={np.percentile(ms, 99):.1f} ms"
    )
    numpy_ms = np.array(baseline) * 1000
    print(f"numpy exact (stored @ q, top 10), same run: p50={np.percentile(numpy_ms, 50):.1f} ms")
    print(f"recall@10={found / (10 * args.queries):.3f}")


if __name__ == "__main__":
    main()
