"""A PIT walk's page at depth 0 and at 90% depth, over a `nested` index and a range-field index:
`python -m bench.walk_depth [--parents 200000]`.

In-process (`leafsearch.Client`, no search workers): `--parents` documents with 5 `nested`
objects each, and as many documents with an `integer_range`, bulk loaded and refreshed. Each
index is walked once with `search_after` in pages of 1,000 on a PIT (a `nested` query, then a
`range` query by relation, sorted by a long), keeping every page's cursor; then the page at the
first cursor and the page at 90% of the walk are each asked 20 times. Prints the pages walked,
the two medians in milliseconds and their ratio (depth-free: about 1)."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from leafsearch.client import Client

NESTED = {
    "n": {"type": "long"},
    "c": {"type": "nested", "properties": {"a": {"type": "keyword"}, "x": {"type": "long"}}},
}
RANGES = {"n": {"type": "long"}, "r": {"type": "integer_range"}}
QUERIES = {
    "nested": {"nested": {"path": "c", "query": {"term": {"c.a": "k3"}}}},
    "ranges": {"range": {"r": {"gte": 100, "lte": 900, "relation": "intersects"}}},
}


def load(client: Client, index: str, docs: list[tuple[int, dict[str, Any]]]) -> None:
    for start in range(0, len(docs), 5000):
        ops: list[dict[str, Any]] = []
        for i, doc in docs[start : start + 5000]:
            ops += [{"index": {"_index": index, "_id": str(i)}}, doc]
        assert not client.bulk(operations=ops)["errors"]


def page_medians(client: Client, index: str, query: dict[str, Any]) -> tuple[int, float, float]:
    """Pages of the whole walk, and the median ms of the page at depth 0 and at 90%."""
    pit = client.open_point_in_time(index=index, keep_alive="5m")["id"]

    def page(after: list[Any] | None) -> list[dict[str, Any]]:
        body: dict[str, Any] = {
            "query": query,
            "sort": [{"n": "asc"}],
            "size": 1000,
            "track_total_hits": False,
        }
        body["pit"] = {"id": pit}
        if after is not None:
            body["search_after"] = after
        return client.search(**body)["hits"]["hits"]

    cursors: list[list[Any] | None] = [None]
    while hits := page(cursors[-1]):
        cursors.append(hits[-1]["sort"])
    medians = []
    for cursor in (cursors[0], cursors[int((len(cursors) - 1) * 0.9)]):
        times = []
        for _ in range(20):
            started = time.perf_counter()
            page(cursor)
            times.append((time.perf_counter() - started) * 1000)
        medians.append(statistics.median(times))
    client.close_point_in_time(id=pit)
    return len(cursors) - 1, medians[0], medians[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parents", type=int, default=200_000)
    args = parser.parse_args()
    n = args.parents
    with Client(tempfile.mkdtemp(), search_workers=0) as client:
        settings = {"number_of_shards": 2}
        client.indices.create(index="nested", settings=settings, mappings={"properties": NESTED})
        load(
            client,
            "nested",
            [(i, {"n": i, "c": [{"a": f"k{(i + j) % 10}", "x": j} for j in range(5)]}) for i in range(n)],
        )
        client.indices.create(index="ranges", settings=settings, mappings={"properties": RANGES})
        load(
            client, "ranges", [(i, {"n": i, "r": {"gte": i % 1000, "lte": i % 1000 + 50}}) for i in range(n)]
        )
        client.indices.refresh(index="nested,ranges")
        for index, query in QUERIES.items():
            pages, first, deep = page_medians(client, index, query)
            ratio = deep / first
            print(
                f"{index}: {pages} pages, depth 0 {first:.2f} ms, depth 90% {deep:.2f} ms, ratio {ratio:.2f}"
            )


if __name__ == "__main__":
    main()
