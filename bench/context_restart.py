"""Contexts across a restart: what a PIT page and a scroll batch cost before and after `kill -9`,
and the disk an open PIT holds once every document was updated and merged.

    python -m bench.context_restart --docs 200000
    python -m bench.context_restart --docs 20000 --pages 5   # a quick look
    python -m bench.context_restart --server-args "--search-workers 0"
    python -m bench.context_restart --ray 3   # a Ray-backed index over 3 local Ray nodes

The data is bench/generate.py's, loaded into index `bench` (1 shard, the default) of a new data
folder. Then, on one PIT (sorted by `@timestamp` desc, 100 hits a page, `search_after` from the
last hit) and one scroll (the same sort, batches of 100): `--pages` pages each, timed one by one
around one HTTP request and the decoding of its response; the server is killed (SIGKILL),
started again on the folder (the time until `GET /` answers is printed), and the same PIT and
scroll go on for `--pages` more, timed the same way, after a PIT opened on the restarted server
walked `--pages` pages (what any walk costs on a server just started). A server's first seconds
are its warm-up (search workers starting, the package imported: cli.py), which slows every
request; `--settle` times the pages only once the server's processes are idle. Printed: the
median page before, the first page after the restart and the median after, and their ratio to
the median before.

Then the disk: the whole dataset indexed again (every document replaced) with the PIT open, the
merges waited for, and `_nodes/stats` read: the index's store size and the part only the PIT
holds (`store.contexts_size_in_bytes`, segments merged away since it opened and its pin files);
then the PIT closed and the same figures read again.

With `--ray N`, a local cluster of N Ray nodes is started here and the server coordinates it
(`serve --ray`): the index's shards (`--shards`, default 1) are actors, which survive the
server's `kill -9`; the disk figures are then the actors' (each shard's folder).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

from bench.client import Client
from bench.generate import MAPPING, generate
from bench.ray_cluster import LOOPBACK_ENV
from bench.server import Server
from bench.workloads.common import BULK_CHUNK, settle_merges

INDEX = "bench"
SORT = [{"@timestamp": "desc"}]
SIZE = 100


def _timed(http: Client, method: str, path: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    began = time.perf_counter()
    answer = orjson.loads(http.raw(method, path, orjson.dumps(body)))
    return (time.perf_counter() - began) * 1000, answer


class Walks:
    """A PIT walk and a scroll, each going on from where the last page left it."""

    def __init__(self, http: Client) -> None:
        self.pit = http.json("POST", f"/{INDEX}/_pit?keep_alive=10m")["id"]
        self.after: list | None = None
        first = http.json("POST", f"/{INDEX}/_search?scroll=10m", {"size": SIZE, "sort": SORT})
        self.scroll_id = first["_scroll_id"]
        self.seen: set[str] = {hit["_id"] for hit in first["hits"]["hits"]}

    def pit_page(self, http: Client) -> float:
        body: dict[str, Any] = {"size": SIZE, "sort": SORT, "pit": {"id": self.pit, "keep_alive": "10m"}}
        if self.after is not None:
            body["search_after"] = self.after
        ms, page = _timed(http, "POST", "/_search", body)
        self.after = page["hits"]["hits"][-1]["sort"]
        return ms

    def scroll_batch(self, http: Client) -> float:
        ms, batch = _timed(http, "POST", "/_search/scroll", {"scroll_id": self.scroll_id, "scroll": "10m"})
        self.scroll_id = batch["_scroll_id"]
        ids = {hit["_id"] for hit in batch["hits"]["hits"]}
        assert len(ids) == SIZE and not ids & self.seen, "a scroll batch lost or repeated documents"
        self.seen |= ids
        return ms


def settle_start(server: Server, http: Client) -> float:
    """Answer one request (it starts the server's warm-up: search workers, the package's imports,
    cli.py), then wait until the server's processes use under 5% of a core over half a second;
    the seconds waited."""
    began = time.perf_counter()
    http.raw("GET", "/")
    last = sum(server.cpu_seconds())
    while time.perf_counter() - began < 120:
        time.sleep(0.5)
        now = sum(server.cpu_seconds())
        if now - last < 0.025:
            break
        last = now
    return time.perf_counter() - began


def store(http: Client) -> tuple[int, int]:
    """(the node's store size, the part only open contexts hold), in bytes."""
    nodes = http.json("GET", "/_nodes/stats/indices/store")["nodes"]
    section = next(iter(nodes.values()))["indices"]["store"]
    return section["size_in_bytes"], section["contexts_size_in_bytes"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--verbose", action="store_true", help="every PIT page's time")
    parser.add_argument(
        "--settle",
        action="store_true",
        help="time pages only once the server's start-up work is done (its processes idle)",
    )
    parser.add_argument("--server-args", default="", help="added to `serve`, e.g. '--search-workers 0'")
    parser.add_argument("--ray", type=int, default=0, metavar="N", help="on a local cluster of N Ray nodes")
    parser.add_argument("--shards", type=int, default=1)
    args = parser.parse_args()
    dataset = generate(args.docs, args.seed)
    if args.ray:
        os.environ.update(LOOPBACK_ENV)  # before Ray is imported, and for the servers started here
    cluster = _ray_cluster(args.ray) if args.ray else None
    server_args = args.server_args.split() + (["--ray", cluster.address] if cluster is not None else [])
    with tempfile.TemporaryDirectory(prefix="leafsearch-ctx-") as folder:
        data, log = Path(folder) / "data", Path(folder) / "server.log"
        server = Server(data, log, server_args)
        server.start(timeout=120)
        try:
            http = Client(server.url)
            settings = {"number_of_shards": args.shards}
            http.json("PUT", f"/{INDEX}", {"mappings": MAPPING, "settings": settings})
            for body in dataset.bulk_bodies(BULK_CHUNK):
                assert not orjson.loads(http.raw("POST", f"/{INDEX}/_bulk", body, "application/x-ndjson"))[
                    "errors"
                ]
            http.json("POST", f"/{INDEX}/_refresh")
            settle_merges(SimpleNamespace(http=http), INDEX)
            if args.settle:
                settle_start(server, http)
            walks = Walks(http)
            pit_before = [walks.pit_page(http) for _ in range(args.pages)]
            scroll_before = [walks.scroll_batch(http) for _ in range(args.pages)]
            server.kill()
            http.close()
            began = time.perf_counter()
            server = Server(data, log, server_args)
            server.start(timeout=120)
            restart_ms = (time.perf_counter() - began) * 1000
            http = Client(server.url)
            if args.settle:
                print(f"the restarted server settled in {settle_start(server, http):.1f} s")
            # A new PIT's walk first: what any walk costs on the server just started, then the
            # walks that were open before the kill go on.
            fresh = Walks(http)
            pit_fresh = [fresh.pit_page(http) for _ in range(args.pages)]
            pit_after = [walks.pit_page(http) for _ in range(args.pages)]
            scroll_after = [walks.scroll_batch(http) for _ in range(args.pages)]
            if args.verbose:
                for name, pages in (("before", pit_before), ("after", pit_after), ("fresh", pit_fresh)):
                    print(name, " ".join(f"{ms:.1f}" for ms in pages))
            print(
                f"{args.docs:,} documents, {args.pages} pages of {SIZE} each side; "
                f"restart after kill -9: {restart_ms:.0f} ms"
            )
            for name, before, after in (
                ("PIT page", pit_before, pit_after),
                ("scroll batch", scroll_before, scroll_after),
            ):
                median = statistics.median(before)
                print(
                    f"{name}: median before {median:.2f} ms; first after the restart {after[0]:.2f} ms "
                    f"({after[0] / median:.2f}x); median after {statistics.median(after):.2f} ms "
                    f"({statistics.median(after) / median:.2f}x)"
                )
            print(
                f"a PIT opened after the restart: first page {pit_fresh[0]:.2f} ms, "
                f"median {statistics.median(pit_fresh):.2f} ms"
            )
            http.raw("DELETE", "/_pit", orjson.dumps({"id": fresh.pit}))
            http.raw("DELETE", "/_search/scroll/_all")
            size, held = store(http)
            print(f"with the PIT open: store {size / 1e6:.1f} MB, held by contexts {held / 1e6:.2f} MB")
            for body in dataset.bulk_bodies(BULK_CHUNK):  # every document replaced
                assert not orjson.loads(http.raw("POST", f"/{INDEX}/_bulk", body, "application/x-ndjson"))[
                    "errors"
                ]
            http.json("POST", f"/{INDEX}/_refresh")
            settle_merges(SimpleNamespace(http=http), INDEX)
            size, held = store(http)
            print(
                f"after every document was updated and merged: store {size / 1e6:.1f} MB, "
                f"held only by the PIT {held / 1e6:.1f} MB "
                f"({held / (size - held):.2f}x the index's own {(size - held) / 1e6:.1f} MB)"
            )
            http.raw("DELETE", "/_pit", orjson.dumps({"id": walks.pit}))
            size, held = store(http)
            print(f"after closing the PIT: store {size / 1e6:.1f} MB, held by contexts {held / 1e6:.2f} MB")
        finally:
            server.stop()
            if cluster is not None:
                cluster.shutdown()


def _ray_cluster(nodes: int) -> Any:
    """A local Ray cluster of `nodes` nodes on loopback (as bench/ray_cluster.py starts them)."""
    from ray.cluster_utils import Cluster

    node_args = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={**node_args, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(**node_args)
    cluster.wait_for_nodes()
    return cluster


if __name__ == "__main__":
    main()
