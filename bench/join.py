"""Parent/child joins over HTTP: `python -m bench.join [--parents 100000] [--children 5] [--queries 20]`.

Starts `leafsearch serve` on a temporary folder with 2 shards, indexes `--parents` parents
(`join` relation `question`) and `--children` children each (`answer`, routed to their parent)
with `_bulk` (1,000 per request, one client), refreshes, then times distinct searches one after
the other, each answer checked against the generator's brute force: `has_child` (a child `term`
of 1 in 10 children; `score_mode` `none` and `max`), `has_parent`, and beside them the plain
`term` query on the children alone (the same selectivity) as the floor. Prints indexing
documents per second and each search's p50 and p99 in milliseconds."""

from __future__ import annotations

import argparse
import time
from typing import Any

import httpx
import numpy as np

from leafsearch.testing import Server

CHUNK = 1_000
TAGS = 10


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.join", description=__doc__.splitlines()[0])
    parser.add_argument("--parents", type=int, default=100_000)
    parser.add_argument("--children", type=int, default=5)
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n_children = args.parents * args.children
    child_tags = rng.integers(0, TAGS, n_children)
    child_votes = rng.integers(0, 100, n_children)
    parent_tags = rng.integers(0, TAGS, args.parents)
    parent_of = np.repeat(np.arange(args.parents), args.children)
    mapping = {
        "properties": {
            "rel": {"type": "join", "relations": {"question": "answer"}},
            "tag": {"type": "keyword"},
            "votes": {"type": "long"},
        }
    }
    lines = [
        b'{"index":{"_id":"q%d"}}\n{"rel":"question","tag":"t%d"}\n' % (p, parent_tags[p])
        for p in range(args.parents)
    ]
    lines += [
        b'{"index":{"_id":"a%d","routing":"q%d"}}\n{"rel":{"name":"answer","parent":"q%d"},"tag":"t%d","votes":%d}\n'
        % (c, parent_of[c], parent_of[c], child_tags[c], child_votes[c])
        for c in range(n_children)
    ]
    bodies = [b"".join(lines[i : i + CHUNK]) for i in range(0, len(lines), CHUNK)]
    ndjson = {"content-type": "application/x-ndjson"}
    with Server() as server, httpx.Client(base_url=server.url, timeout=3600) as http:
        settings = {"number_of_shards": 2, "refresh_interval": "-1"}
        assert http.put("/qa", json={"settings": settings, "mappings": mapping}).status_code == 200
        began = time.perf_counter()
        for body in bodies:
            response = http.post("/qa/_bulk", content=body, headers=ndjson)
            assert response.status_code == 200 and not response.json()["errors"], response.text[:500]
        http.post("/qa/_refresh")
        indexing = len(lines) / (time.perf_counter() - began)
        print(f"parents={args.parents} children={n_children} indexing={indexing:,.0f} docs/s")

        def timed(name: str, query_of: Any, expected_of: Any) -> None:
            took = []
            for i in range(args.queries):
                tag = i % TAGS
                body = {"query": query_of(tag, i), "size": 10, "_source": False, "track_total_hits": True}
                began = time.perf_counter()
                response = http.post("/qa/_search", json=body)
                took.append(time.perf_counter() - began)
                assert response.status_code == 200, response.text[:500]
                total = response.json()["hits"]["total"]["value"]
                assert total == expected_of(tag), (name, total, expected_of(tag))
            ms = np.array(took) * 1000
            print(f"{name}: p50={np.percentile(ms, 50):.1f} ms p99={np.percentile(ms, 99):.1f} ms")

        def child_term(tag: int, i: int) -> dict:
            # a distinct query each time (the boost changes nothing matched): no cache answers it
            return {"term": {"tag": {"value": f"t{tag}", "boost": 1 + i}}}

        parents_with = [np.unique(parent_of[child_tags == t]).size for t in range(TAGS)]
        timed(
            "term on the children (the floor)",
            lambda t, i: {"bool": {"filter": [{"term": {"rel": "answer"}}], "must": [child_term(t, i)]}},
            lambda t: int((child_tags == t).sum()),
        )
        for mode in ("none", "max"):
            timed(
                f"has_child score_mode={mode}",
                lambda t, i, m=mode: {
                    "has_child": {"type": "answer", "query": child_term(t, i), "score_mode": m}
                },
                lambda t: parents_with[t],
            )
        timed(
            "has_parent",
            lambda t, i: {"has_parent": {"parent_type": "question", "query": child_term(t, i)}},
            lambda t: int(args.children * (parent_tags == t).sum()),
        )


if __name__ == "__main__":
    main()
