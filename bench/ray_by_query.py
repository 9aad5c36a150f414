"""By-query operations and `_score` scrolls on a Ray-backed index against the same on a local
index, served by one coordinator, in one run, on the same documents:

    python -m bench.ray_by_query                      # 50,000 documents, 3 shards, 3 rounds
    python -m bench.ray_by_query --docs 200000 --rounds 5

The coordinator's data folder first gets the local index from a node started without Ray (a
node keeps an index's shards where they were created), then the same node is started with
`--ray` on a local one-node Ray cluster and the Ray-backed index is filled with the same
documents. Each round runs, alternating local and Ray so both see the same machine load:

- `_update_by_query` of every document (`scroll_size` 1,000, `conflicts=proceed`, `refresh`, so
  the scroll after it reads a snapshot of every document): documents/s (the local one ranges
  over one HitList, the Ray one walks the shard contexts with `search_after`:
  by_query_source.py);
- a scroll sorted by `_score` (a `match` query matching every document, batches of 1,000):
  documents/s (the local one pages one HitList; the Ray one walks `_score`, `_shard_doc`).

Every run is checked: the operation updated every document, the scroll gave each once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from leafsearch.testing import Server

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
#: Every Ray process on loopback (Ray otherwise takes the address of the machine's route out).
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _fill(http: httpx.Client, index: str, docs: int, shards: int) -> None:
    body = {"settings": {"number_of_shards": shards, "number_of_replicas": 0}}
    assert http.put(f"/{index}", json=body).status_code == 200
    for start in range(0, docs, 5000):
        lines = []
        for n in range(start, min(docs, start + 5000)):
            words = " ".join(WORDS[(n * 7 + i) % len(WORDS)] for i in range(1 + n % 5))
            lines += [
                orjson.dumps({"index": {"_id": str(n)}}),
                orjson.dumps({"n": n, "body": f"alpha {words}"}),
            ]
        response = http.post(
            f"/{index}/_bulk",
            content=b"\n".join(lines) + b"\n",
            headers={"content-type": "application/x-ndjson"},
        )
        assert response.status_code == 200 and not response.json()["errors"]
    assert http.post(f"/{index}/_refresh").status_code == 200


def _update_by_query(http: httpx.Client, index: str, docs: int) -> float:
    began = time.perf_counter()
    response = http.post(
        f"/{index}/_update_by_query",
        params={"scroll_size": "1000", "conflicts": "proceed", "refresh": "true"},
        json={},
    )
    seconds = time.perf_counter() - began
    assert response.status_code == 200, response.text
    assert response.json()["updated"] == docs, response.text
    return docs / seconds


def _score_scroll(http: httpx.Client, index: str, docs: int) -> float:
    began = time.perf_counter()
    body = {"size": 1000, "query": {"match": {"body": "alpha gamma"}}, "_source": False}
    page = http.post(f"/{index}/_search", params={"scroll": "1m"}, json=body).json()
    seen: set[str] = set()
    while page["hits"]["hits"]:
        assert page["_shards"]["failed"] == 0, page["_shards"]
        seen.update(hit["_id"] for hit in page["hits"]["hits"])
        page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": page["_scroll_id"]}).json()
    seconds = time.perf_counter() - began
    http.request("DELETE", "/_search/scroll", json={"scroll_id": page["_scroll_id"]})
    assert len(seen) == docs, (index, len(seen), docs)
    return docs / seconds


def run(docs: int, shards: int, rounds: int) -> dict[str, Any]:
    os.environ.update(LOOPBACK_ENV)
    import ray
    from ray.cluster_utils import Cluster

    folder = Path(tempfile.mkdtemp(prefix="leafsearch-ray-by-query-"))
    data = folder / "data"
    with Server(data) as plain, httpx.Client(base_url=plain.url, timeout=600) as http:
        _fill(http, "local", docs, shards)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False},
    )
    results: dict[str, list[float]] = {}
    try:
        args = ["--ray", cluster.address]
        with (
            Server(data, args=args, env=LOOPBACK_ENV, startup_timeout=120) as server,
            httpx.Client(base_url=server.url, timeout=600) as http,
        ):
            _fill(http, "remote", docs, shards)
            for _ in range(rounds):
                for kind, index in (("local", "local"), ("ray", "remote")):
                    ubq = _update_by_query(http, index, docs)
                    results.setdefault(f"update_by_query {kind}", []).append(ubq)
                    scroll = _score_scroll(http, index, docs)
                    results.setdefault(f"_score scroll {kind}", []).append(scroll)
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    return {name: sorted(values) for name, values in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    results = run(options.docs, options.shards, options.rounds)
    for name, values in results.items():
        print(
            f"{name:28s} median {statistics.median(values):10,.0f} docs/s   runs {[round(v) for v in values]}"
        )


if __name__ == "__main__":
    main()
