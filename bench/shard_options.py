"""`rescore` and `terminate_after` of a local index: its HitList path (phases.query_phase: every
match sorted, then rescored or cut) against the shards serving them in their query phase, as
shard actors do (top_hits.top_hits with this process's `LocalShard`s), in one process:

    python -m bench.shard_options                  # 100,000 documents, 3 shards, 60 queries
    python -m bench.shard_options --docs 300000 --queries 100

Distinct `match` queries of two words of 200; each query runs both ways, alternating which goes
first, with the node keeping no HitList (`indices.cache.hitlist.size: 0`), so neither reads a
list the other built. The pages of both ways are checked equal. Prints p50 / p99 in ms per way.
What it is for: whether the local path should serve these options through the shards too (it
gives the same answers, tests/search/test_shard_api.py); only a figure, noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

import orjson

import leafsearch
from leafsearch.indices import admin
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import phases, top_hits
from leafsearch.search.targets import release_targets

WORDS = [f"w{i}" for i in range(200)]


def _body(option: str, q: int) -> dict:
    query = {"match": {"t": f"w{q % 200} w{(q * 7 + 3) % 200}"}}
    if option == "rescore":
        rescore_query = {"match": {"t": f"w{(q * 13) % 200}"}}
        return {
            "query": query,
            "size": 10,
            "rescore": {"window_size": 100, "query": {"rescore_query": rescore_query}},
        }
    return {"query": query, "size": 10, "terminate_after": 1000, "track_total_hits": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as folder, leafsearch.Node(folder, background=False) as node:
        node.cluster_settings.update({"persistent": {"indices.cache.hitlist.size": "0b"}})
        mappings = {"properties": {"n": {"type": "long"}, "t": {"type": "text"}}}
        admin.create_index(node, "b", {"settings": {"number_of_shards": 3}, "mappings": mappings})
        for i in range(args.docs):
            doc = {"n": i, "t": " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))}
            node.index_doc("b", str(i), orjson.dumps(doc))
            if i % 50_000 == 49_999:
                node.indices["b"].refresh()
        node.indices["b"].refresh()
        for option in ("rescore", "terminate_after"):
            times: dict[str, list[float]] = {"hitlist": [], "shards": []}
            for q in range(args.queries):
                request = parse_search_request(_body(option, q), {}, indices="b")
                pages = {}
                for way in ("hitlist", "shards") if q % 2 else ("shards", "hitlist"):
                    targets = phases.resolve_targets(node.search_services, request)
                    try:
                        started = time.perf_counter()
                        if way == "hitlist":
                            hits, _ = phases.query_phase(node.search_services, targets, request, aggs=False)
                        else:
                            now = int(time.time() * 1000)
                            shards = top_hits.shard_handles(node.search_services, targets)
                            hits = top_hits.top_hits(
                                node.search_services,
                                targets,
                                request,
                                now_millis=now,
                                aggs=False,
                                shards=shards,
                            )
                        times[way].append((time.perf_counter() - started) * 1000)
                        start, end = phases.page_bounds(hits, request)
                        pages[way] = (hits.doc[start:end].tolist(), hits.total, hits.terminated_early)
                    finally:
                        release_targets(targets)
                assert pages["hitlist"] == pages["shards"], (option, q)
            for way, measured in times.items():
                ordered = sorted(measured)
                p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
                print(f"{option:16s} {way:8s} p50 {statistics.median(ordered):7.2f} ms  p99 {p99:7.2f} ms")


if __name__ == "__main__":
    main()
