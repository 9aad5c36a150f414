"""The coordinator's CPU per request on Ray, step by step: what the HTTP exchange costs alone,
what a sliced PIT page relayed as bytes costs (search/page_relay.py), and the same page through
the general path, in one `serve --ray` over a local Ray cluster (bench/RESULTS.md, "Pages
relayed as bytes"):

    python -m bench.ray_steps                       # 30,000 documents, 400 requests a turn, 5 turns
    python -m bench.ray_steps --requests 1000 --turns 9

The bench documents are imported into 6 shards on 3 local Ray nodes (as `bench.ray_cluster`
starts them); one PIT is opened, and one client asks, in turns, each request below `--requests`
times after 50 to warm up:

- `GET /`: the HTTP exchange's floor;
- a page of slice 0 of 3 (1,000 hits, `_source: false`, `_shard_doc`, nothing counted), relayed;
- the same page through the general path (a `timeout` sends it there: a relayed response has
  no `timed_out` to report);
- both again for a page of 1 hit (what the page's bytes cost, against the request's own path);
- `POST bench/_count` (a POST answered from one call per machine).

The same page is asked again and again (its `search_after` fixed), so neither path reads it
ahead: the general path's machine call is in the request's thread, the relayed one's too. CPU is
read from /proc, of the coordinator's process (all its threads) and of the machine actors', at
the kernel's tick (10 ms): the medians of the turns are printed, in ms per request.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import orjson

from bench.client import Client
from bench.ray_cluster import (
    LOOPBACK_ENV,
    SHARDS,
    _load,
    _machine_cpu,
    bench_files,
    local_cluster,
    ray_server,
)

WARM_UP = 50


def _kinds(pit: str, after: list) -> dict[str, tuple[str, str, bytes | None]]:
    page = {
        "size": 1000,
        "pit": {"id": pit, "keep_alive": "10m"},
        "sort": ["_shard_doc"],
        "track_total_hits": False,
        "_source": False,
        "slice": {"id": 0, "max": 3},
        "search_after": after,
    }
    general = {"timeout": "10m"}
    return {
        "GET /": ("GET", "/", None),
        "page of 1,000 relayed": ("POST", "/_search", orjson.dumps(page)),
        "page of 1,000 general path": ("POST", "/_search", orjson.dumps({**page, **general})),
        "page of 1 relayed": ("POST", "/_search", orjson.dumps({**page, "size": 1})),
        "page of 1 general path": ("POST", "/_search", orjson.dumps({**page, "size": 1, **general})),
        "POST bench/_count": ("POST", "/bench/_count", orjson.dumps({"query": {"match_all": {}}})),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=30_000)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--turns", type=int, default=5)
    options = parser.parse_args()
    os.environ.update(LOOPBACK_ENV)  # before Ray is imported, and for the servers it starts
    work = Path(tempfile.mkdtemp(prefix="leafsearch-ray-steps-"))
    try:
        _, records, create_body = bench_files(work, options.docs)
        with local_cluster(3) as cluster, ray_server(work, "ray", cluster.address) as server:
            _load(server, records, create_body)
            client = Client(server.url)
            pit = client.json("POST", "/bench/_pit?keep_alive=10m")["id"]
            first = {"size": 1, "pit": {"id": pit}, "sort": ["_shard_doc"], "slice": {"id": 0, "max": 3}}
            after = client.json("POST", "/_search", first)["hits"]["hits"][0]["sort"]
            kinds = _kinds(pit, after)
            spent: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
            for _ in range(options.turns):
                for kind, (method, path, body) in kinds.items():
                    for _ in range(WARM_UP):
                        client.raw(method, path, body)
                    cpu, machines = server.cpu_seconds()[0], _machine_cpu()
                    for _ in range(options.requests):
                        client.raw(method, path, body)
                    spent[kind].append((server.cpu_seconds()[0] - cpu, _machine_cpu() - machines))
            client.raw("DELETE", "/_pit", orjson.dumps({"id": pit}))
            client.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{options.docs:,} documents, {SHARDS} shards, 3 local Ray nodes; CPU ms per request, median of "
        f"{options.turns} turns of {options.requests}; load average {os.getloadavg()[0]:.1f}"
    )
    width = max(map(len, spent))
    print(f"  {'':<{width}}  coordinator  machine actors")
    for kind, values in spent.items():
        coordinator = sorted(v[0] for v in values)[len(values) // 2] / options.requests * 1000
        machines = sorted(v[1] for v in values)[len(values) // 2] / options.requests * 1000
        print(f"  {kind:<{width}}  {coordinator:11.3f}  {machines:14.3f}")


if __name__ == "__main__":
    main()
