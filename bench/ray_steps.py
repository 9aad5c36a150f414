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
- `POST bench/_count` (a POST answered from one call per machine);
- W6's searches (bench/workers.py `_queries`: a `term` and a random time range, sorted by time
  then id, first page of 100 with sources; every request of the run a distinct query), one call
  per machine;
- the same W6 searches and `_count` through a second coordinator in this process (`Node(ray=...)`
  and the in-process `leafsearch.Client`: the route's handler, the search and the render, no
  HTTP), CPU of the calling thread alone (`time.thread_time`; the client's decoding of the
  answer included): against the HTTP rows, what the HTTP front costs a request.

The same page is asked again and again (its `search_after` fixed), so neither path reads it
ahead: the general path's machine call is in the request's thread, the relayed one's too. CPU is
read from /proc, of the coordinator's process (all its threads) and of the machine actors', at
the kernel's tick (10 ms): the medians of the turns are printed, in ms per request.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

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
from bench.workers import _queries

if TYPE_CHECKING:
    from leafsearch import Node

WARM_UP = 50


Request = tuple[str, str, list[bytes | None]]


def _kinds(pit: str, after: list, searches: list[bytes]) -> dict[str, Request]:
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
        "GET /": ("GET", "/", [None]),
        "page of 1,000 relayed": ("POST", "/_search", [orjson.dumps(page)]),
        "page of 1,000 general path": ("POST", "/_search", [orjson.dumps({**page, **general})]),
        "page of 1 relayed": ("POST", "/_search", [orjson.dumps({**page, "size": 1})]),
        "page of 1 general path": ("POST", "/_search", [orjson.dumps({**page, "size": 1, **general})]),
        "POST bench/_count": ("POST", "/bench/_count", [COUNT]),
        "W6 search": ("POST", "/bench/_search", searches),
    }


COUNT = orjson.dumps({"query": {"match_all": {}}})


def _in_process(node: Node, searches: list[bytes]) -> dict[str, Callable[[int], None]]:
    """The in-process kinds: each asks its request of `node` the given number of times."""
    from leafsearch import Client as NodeClient

    client = NodeClient(node=node)
    bodies = [orjson.loads(body) for body in searches]
    count = orjson.loads(COUNT)
    queries = itertools.cycle(bodies)

    def w6(times: int) -> None:
        for _ in range(times):
            client.search(index="bench", **next(queries))

    def counts(times: int) -> None:
        for _ in range(times):
            client.count(index="bench", **count)

    return {"in-process POST bench/_count": counts, "in-process W6 search": w6}


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
        dataset, records, create_body = bench_files(work, options.docs)
        first_ms, last_ms = int(dataset.ts_ms.min()), int(dataset.ts_ms.max()) + 1
        asked = options.turns * (WARM_UP + options.requests)  # (each kind's requests in the run)
        searches = [orjson.dumps(body) for body in _queries(first_ms, last_ms, 6, asked)]
        with local_cluster(3) as cluster, ray_server(work, "ray", cluster.address) as server:
            from leafsearch import Node

            _load(server, records, create_body)
            client = Client(server.url)
            pit = client.json("POST", "/bench/_pit?keep_alive=10m")["id"]
            first = {"size": 1, "pit": {"id": pit}, "sort": ["_shard_doc"], "slice": {"id": 0, "max": 3}}
            after = client.json("POST", "/_search", first)["hits"]["hits"][0]["sort"]
            kinds = _kinds(pit, after, searches)
            node = Node(work / "in-process", ray=cluster.address)
            here = _in_process(node, searches)
            spent: dict[str, list[tuple[float, float]]] = {kind: [] for kind in [*kinds, *here]}
            asking = {kind: itertools.cycle(bodies) for kind, (_, _, bodies) in kinds.items()}
            for _ in range(options.turns):
                for kind, (method, path, _) in kinds.items():
                    asks = asking[kind]
                    for _ in range(WARM_UP):
                        client.raw(method, path, next(asks))
                    cpu, machines = server.cpu_seconds()[0], _machine_cpu()
                    for _ in range(options.requests):
                        client.raw(method, path, next(asks))
                    spent[kind].append((server.cpu_seconds()[0] - cpu, _machine_cpu() - machines))
                for kind, ask in here.items():
                    ask(WARM_UP)
                    cpu, machines = time.thread_time(), _machine_cpu()
                    ask(options.requests)
                    spent[kind].append((time.thread_time() - cpu, _machine_cpu() - machines))
            node.close()
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
