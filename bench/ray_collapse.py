"""A collapsed walk's page on a Ray-backed index against a plain `search_after` page:

    python -m bench.ray_collapse                       # 50,000 documents, 5,000 users, 3 shards
    python -m bench.ray_collapse --docs 200000 --users 20000 --tries 30
    python -m bench.ray_collapse --inner-hits 3 --tries 10   # each collapsed hit's 3 latest posts

A coordinator (`serve --ray`) on a local one-node Ray cluster, one index of `--docs` posts by
`--users` users (each user's posts spread over the shards by id), sorted by `ts` desc. On one
PIT, for each try a cursor at a random depth (the sort values of a hit taken from a plain walk of
the PIT, so both pages start at the same place): the plain page of 100 after it, then the
collapsed page of 100 (`collapse` on `user`) after it, alternating which goes first. Each
collapsed page is checked: 100 distinct users (or the walk's end), none of them with a post
before the cursor. Before the tries, one collapsed page builds each shard's grouped list (kept
for the PIT's snapshot, as a walk's first page does). `--inner-hits N`: the collapsed pages ask
each hit's N latest posts (`inner_hits`, one search of every shard per hit). Medians and p99 in
ms.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from leafsearch.testing import Server

#: Every Ray process on loopback (Ray otherwise takes the address of the machine's route out).
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
SIZE = 100
SORT = [{"ts": "desc"}]


def _fill(http: httpx.Client, docs: int, users: int, shards: int) -> None:
    mappings = {"properties": {"user": {"type": "keyword"}, "ts": {"type": "long"}}}
    body = {"settings": {"number_of_shards": shards}, "mappings": mappings}
    assert http.put("/posts", json=body).status_code == 200
    rng = random.Random(1)
    for start in range(0, docs, 5000):
        lines = []
        for n in range(start, min(docs, start + 5000)):
            source = {"user": f"u{rng.randrange(users)}", "ts": n}
            lines += [orjson.dumps({"index": {"_id": str(n)}}), orjson.dumps(source)]
        ndjson = {"content-type": "application/x-ndjson"}
        response = http.post("/posts/_bulk", content=b"\n".join(lines) + b"\n", headers=ndjson)
        assert response.status_code == 200 and not response.json()["errors"]
    assert http.post("/posts/_refresh").status_code == 200


def _page(
    http: httpx.Client, pit: str, after: list[Any] | None, collapse: bool, inner: int = 0
) -> tuple[float, list]:
    body: dict[str, Any] = {"size": SIZE, "sort": SORT, "pit": {"id": pit}, "track_total_hits": False}
    if after is not None:
        body["search_after"] = after
    if collapse:
        body["collapse"] = {"field": "user"}
        if inner:
            body["collapse"]["inner_hits"] = {"name": "latest", "size": inner, "sort": SORT}
    began = time.perf_counter()
    response = http.post("/_search", json=body)
    took = (time.perf_counter() - began) * 1000
    assert response.status_code == 200, response.text[:500]
    return took, response.json()["hits"]["hits"]


def run(docs: int, users: int, shards: int, tries: int, inner: int) -> dict[str, list[float]]:
    os.environ.update(LOOPBACK_ENV)
    import ray
    from ray.cluster_utils import Cluster

    folder = Path(tempfile.mkdtemp(prefix="leafsearch-ray-collapse-"))
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False},
    )
    results: dict[str, list[float]] = {"plain search_after page": [], "collapsed page": []}
    try:
        args = ["--ray", cluster.address]
        with (
            Server(folder / "data", args=args, env=LOOPBACK_ENV, startup_timeout=120) as server,
            httpx.Client(base_url=server.url, timeout=600) as http,
        ):
            _fill(http, docs, users, shards)
            pit = http.post("/posts/_pit", params={"keep_alive": "10m"}).json()["id"]
            # every hit's (user, sort values) in the walk's order: the cursors, and the check
            order: list[tuple[str, list[Any]]] = []
            after = None
            while True:
                body = {"size": 10_000, "sort": SORT, "pit": {"id": pit}, "_source": ["user"]}
                if after is not None:
                    body["search_after"] = after
                hits = http.post("/_search", json=body).json()["hits"]["hits"]
                if not hits:
                    break
                order += [(h["_source"]["user"], h["sort"]) for h in hits]
                after = hits[-1]["sort"]
            first_seen: dict[str, int] = {}
            for position, (user, _) in enumerate(order):
                first_seen.setdefault(user, position)
            _page(http, pit, None, collapse=True)  # (each shard groups its matches once)
            rng = random.Random(2)
            for attempt in range(tries):
                position = rng.randrange(len(order) - 1)
                cursor = order[position][1]
                for collapse in (False, True) if attempt % 2 else (True, False):
                    took, hits = _page(http, pit, cursor, collapse, inner)
                    name = "collapsed page" if collapse else "plain search_after page"
                    results[name].append(took)
                    if collapse:
                        keys = [h["fields"]["user"][0] for h in hits]
                        assert len(set(keys)) == len(keys)
                        assert all(first_seen[k] > position for k in keys), "a key shown before the cursor"
                        expected = sorted(first_seen.values())
                        wanted = [p for p in expected if p > position][:SIZE]
                        assert [first_seen[k] for k in keys] == wanted, "not the grouping's page"
                        if inner:
                            latest = [h["inner_hits"]["latest"]["hits"]["hits"] for h in hits]
                            assert all(
                                group and group[0]["_id"] == h["_id"]
                                for group, h in zip(latest, hits, strict=True)
                            )
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--users", type=int, default=5_000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--inner-hits", type=int, default=0)
    options = parser.parse_args()
    results = run(options.docs, options.users, options.shards, options.tries, options.inner_hits)
    for name, values in results.items():
        values = sorted(values)
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        print(f"{name:26s} p50 {statistics.median(values):8.2f} ms   p99 {p99:8.2f} ms   n={len(values)}")


if __name__ == "__main__":
    main()
