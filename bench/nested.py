"""Nested query and nested sort over HTTP: `python -m bench.nested [--parents 200000] [--children 5]`.

Starts `leafsearch serve` on a temporary folder and indexes the same documents twice with `_bulk`
(1,000 per request, one client): into `nested`, where `c` is a `nested` field, and into `flat`,
where `c` is a plain object (its values flattened into the document). Each document has
`--children` objects `{"a": one of 50 keywords, "n": 0..999}` and a `title`. After a refresh
and the merges it asks for, it times `--queries` distinct requests of each kind, one after the
other (first requests: each a query no cache has seen), with `track_total_hits: true`:
- `query`: `a = X and n >= Y` on one object (`nested` query) beside the same bool on `flat`
  (where the two conditions may hold on different objects);
- `sort`: a `term` on `title` sorted by `c.n` (min) through `nested.path` with a `filter`
  beside the same sort on `flat` (min over every object).
Prints indexing documents per second, p50 and p99 in milliseconds of each, and checks that the
nested answers hold parents only (no more than `--parents` hits)."""

from __future__ import annotations

import argparse
import random
import time

import httpx
import numpy as np
import orjson

from leafsearch.testing import Server

CHUNK = 1_000
KEYWORDS = [f"k{i:02d}" for i in range(50)]
NDJSON = {"content-type": "application/x-ndjson"}


def mapping(nested: bool) -> dict:
    c = {"properties": {"a": {"type": "keyword"}, "n": {"type": "long"}}}
    if nested:
        c["type"] = "nested"
    return {"properties": {"title": {"type": "keyword"}, "c": c}}


def index(http: httpx.Client, name: str, parents: int, children: int, seed: int) -> float:
    """Documents per second of `_bulk` into `name` (then refreshed)."""
    rng = random.Random(seed)
    began = time.perf_counter()
    for start in range(0, parents, CHUNK):
        lines = []
        for i in range(start, min(start + CHUNK, parents)):
            objects = [{"a": rng.choice(KEYWORDS), "n": rng.randrange(1000)} for _ in range(children)]
            lines.append(orjson.dumps({"index": {"_id": str(i)}}))
            lines.append(orjson.dumps({"title": f"t{i % 100}", "c": objects}))
        response = http.post(f"/{name}/_bulk", content=b"\n".join(lines) + b"\n", headers=NDJSON)
        assert response.status_code == 200 and not response.json()["errors"], response.text[:500]
    assert http.post(f"/{name}/_refresh").status_code == 200
    return parents / (time.perf_counter() - began)


def timed(http: httpx.Client, name: str, bodies: list[dict], parents: int) -> np.ndarray:
    took = []
    for body in bodies:
        began = time.perf_counter()
        response = http.post(f"/{name}/_search", json=body)
        took.append(time.perf_counter() - began)
        assert response.status_code == 200, response.text[:500]
        assert response.json()["hits"]["total"]["value"] <= parents
    return np.array(took) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.nested", description=__doc__.splitlines()[0])
    parser.add_argument("--parents", type=int, default=200_000)
    parser.add_argument("--children", type=int, default=5)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(1)
    pairs = [(rng.choice(KEYWORDS), rng.randrange(900)) for _ in range(2 * args.queries)]
    with Server() as server, httpx.Client(base_url=server.url, timeout=3600) as http:
        rates = {}
        for name in ("nested", "flat"):
            assert http.put(f"/{name}", json={"mappings": mapping(name == "nested")}).status_code == 200
            rates[name] = index(http, name, args.parents, args.children, seed=7)
        rows = []
        for name in ("nested", "flat"):
            queries = []
            for a, n in pairs[: args.queries]:
                query = {"bool": {"filter": [{"term": {"c.a": a}}, {"range": {"c.n": {"gte": n}}}]}}
                if name == "nested":
                    query = {"nested": {"path": "c", "query": query}}
                queries.append({"query": query, "track_total_hits": True, "_source": False})
            rows.append((f"query {name}", timed(http, name, queries, args.parents)))
        for name in ("nested", "flat"):
            sorts = []
            for i, (a, _) in enumerate(pairs[args.queries :]):
                spec: dict = {"order": "asc", "mode": "min"}
                if name == "nested":
                    spec["nested"] = {"path": "c", "filter": {"term": {"c.a": a}}}
                body = {
                    "query": {"term": {"title": f"t{i}"}},
                    "sort": [{"c.n": spec}],
                    "track_total_hits": True,
                }
                sorts.append({**body, "_source": False})
            rows.append((f"sort {name}", timed(http, name, sorts, args.parents)))
    print(f"parents={args.parents} children={args.children} queries={args.queries}")
    for name, rate in rates.items():
        print(f"indexing {name}: {rate:,.0f} parents/s")
    for label, ms in rows:
        print(f"{label}: p50={np.percentile(ms, 50):.1f} ms p99={np.percentile(ms, 99):.1f} ms")


if __name__ == "__main__":
    main()
