"""The HNSW libraries and the exact pass, in process:
`python -m bench.knn_graph [--docs 20000] [--dims 384] [--queries 50] [--graphs i8,f32,hnswlib]
[--clusters 1000]`.

Builds graphs of `--docs` seeded clustered unit vectors (bench/knn.py's) with usearch (int8 and
float32, as `int8_hnsw` and `hnsw` store them; m 16, ef_construction 100, 2 threads) and, when it
is importable (`PYTHONPATH` naming a folder it was built into: it has no wheel here), hnswlib
with the same parameters; prints each one's build rate, its search time for 100 candidates and
recall@10 of those against numpy's exact answer, beside the time of the exact pass over every
vector (index/vectors.py's), and the rows that pass scores in the time of one graph candidate
(`vector_graph.ROWS_PER_CANDIDATE` is chosen from it); then each usearch graph's file size and
this process's peak resident memory."""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.knn import generate
from leafsearch.index import vector_graph, vectors

CANDIDATES = 100


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.knn_graph", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--graphs", default="i8,f32,hnswlib", help="which graphs to build")
    parser.add_argument("--clusters", type=int, default=1000, help="0: uniform on the sphere")
    args = parser.parse_args()
    graphs = args.graphs.split(",")
    both = generate(args.docs + args.queries, args.dims, args.clusters, seed=0)
    stored, queries = both[: args.docs], both[args.docs :]
    rows = np.arange(args.docs)
    began = time.perf_counter()
    exact = [np.argsort(-vectors.similarities(stored, rows, q, "dot_product"))[:10] for q in queries]
    exact_ms = (time.perf_counter() - began) / len(queries) * 1000
    print(f"docs={args.docs} dims={args.dims}: exact pass {exact_ms:.1f} ms a query")
    with tempfile.TemporaryDirectory() as temporary:  # the graph files, deleted at the end
        folder = Path(temporary)
        for dtype in (d for d in ("i8", "f32") if d in graphs):
            spec = vector_graph.GraphSpec("ip", dtype, 16, 100)
            began = time.perf_counter()
            vector_graph.build(stored, spec, folder / f"{dtype}.usearch")
            built = args.docs / (time.perf_counter() - began)
            graph = vector_graph.Graph(folder / f"{dtype}.usearch", spec)
            began = time.perf_counter()
            found = [graph.rows(q, CANDIDATES) for q in queries]
            report(f"usearch {dtype}", built, began, found, exact, exact_ms, args.docs)
            size = (folder / f"{dtype}.usearch").stat().st_size / 2**20
            plain = stored.nbytes / 2**20
            print(f"usearch {dtype}: graph file {size:,.0f} MB (the vectors as float32: {plain:,.0f} MB)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process: {peak:,.0f} MB")
    if "hnswlib" not in graphs:
        return
    try:
        import hnswlib  # type: ignore[import-not-found]
    except ImportError:
        print("hnswlib: not importable")
        return
    index = hnswlib.Index(space="ip", dim=args.dims)
    index.init_index(max_elements=args.docs, M=16, ef_construction=100)
    index.set_num_threads(2)
    began = time.perf_counter()
    index.add_items(stored, rows)
    built = args.docs / (time.perf_counter() - began)
    index.set_ef(CANDIDATES)
    began = time.perf_counter()
    found = [index.knn_query(q, k=CANDIDATES)[0][0] for q in queries]
    report("hnswlib f32", built, began, found, exact, exact_ms, args.docs)


def report(
    name: str, built: float, began: float, found: list, exact: list, exact_ms: float, docs: int
) -> None:
    search_ms = (time.perf_counter() - began) / len(found) * 1000
    recall = np.mean([len(set(f.tolist()) & set(e.tolist())) / 10 for f, e in zip(found, exact, strict=True)])
    per_candidate = (search_ms / CANDIDATES) / (exact_ms / docs)
    print(
        f"{name}: build {built:,.0f} vectors/s, search {search_ms:.2f} ms for {CANDIDATES} candidates, "
        f"recall@10 {recall:.3f}, one candidate costs {per_candidate:.0f} rows of the exact pass"
    )


if __name__ == "__main__":
    main()
