"""How long searches and realtime gets take while a machine is `kill -9`ed, and what they
answer, with two code trees' coordinators taking turns on one local 3-node Ray cluster (the tests'
`tests/ray_cluster.py`), so before and after are measured in the same run:

    python -m bench.ray_kill_search --before /work/main --rounds 3

Each turn starts a `leafsearch serve --ray` coordinator of one tree (`--before`, and this one:
the tree on its PYTHONPATH) and creates a 3-shard index with 0 or 1 replica (300 documents); a
client then sends a search (size 10) and a realtime get of a document of one shard in turn, one
request at a time, while the processes of the (non-head) machine holding that shard's primary
are killed (`ray_cluster.kill_node`), until `--window` seconds after the kill began. Per turn:
the slowest search and get started after the kill began, and what they answered (failed shards,
status). With 0 replicas the shard has no other copy: its searches fail it and its get is a 503,
the question is how soon; with 1, a copy that is there answers (once the loss is detected, the
promoted replica: a coordinator's follower checks find a killed machine within about a second).
The machine then returns and the turn waits for green. Ray finds a killed node dead after about
5 s here (`bench.ray_failover`'s settings; Ray's default about 15 s): what a call that waits for
Ray waits out.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.ray_failover import SYSTEM_CONFIG
from leafsearch.index.routing import default_routing_num_shards, shard_for
from leafsearch.testing import Server
from tests.ray_cluster import (
    COORDINATOR_STARTUP_SECONDS,
    LOOPBACK_ENV,
    LocalCluster,
    add_machine,
    copy_nodes,
    kill_node,
    machine_resource,
    start_cluster,
    stop_cluster,
)

SHARDS = 3
DOCS = 300


def _turn(
    local: LocalCluster, tree: str | None, work: Path, name: str, window: float, replicas: int
) -> dict[str, Any]:
    """One coordinator's turn (see the module's docstring), its data in `work`/`name`: kept until
    the run ends, as the machine actors' registries are in the first coordinator's."""
    import ray  # (after the cluster's start: it sets Ray's environment first)

    from leafsearch.ray_backend.cluster import machine_of

    env = dict(LOOPBACK_ENV) | ({"PYTHONPATH": tree} if tree else {})
    server = Server(
        work / name / "data",
        args=["--ray", local.address],
        env=env,
        startup_timeout=COORDINATOR_STARTUP_SECONDS,
    ).start()
    try:
        http = httpx.Client(base_url=server.url, timeout=180)
        body = {"settings": {"number_of_shards": SHARDS, "number_of_replicas": replicas}}
        assert http.put(f"/{name}", json=body).status_code == 200
        lines = "".join(f'{{"index":{{"_id":"{i}"}}}}\n{{"n":{i}}}\n' for i in range(DOCS))
        bulk = http.post(
            f"/{name}/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
        )
        assert bulk.status_code == 200 and not bulk.json()["errors"]
        green = {"wait_for_status": "green", "timeout": "180s"}
        assert http.get("/_cluster/health", params=green).json()["status"] == "green"
        uuid = http.get(f"/{name}/_settings").json()[name]["settings"]["index"]["uuid"]
        workers = {n.node_id: n for n in local.cluster.worker_nodes}
        alive = {machine_of(n["Resources"]): n["NodeID"] for n in ray.nodes() if n["Alive"]}
        # (a shard whose primary is not on the head: the head runs the cluster)
        shard, primary = next((s, p) for s in range(SHARDS) if alive[p := copy_nodes(uuid, s)[0]] in workers)
        routing = default_routing_num_shards(SHARDS)
        doc = next(str(i) for i in range(DOCS) if shard_for(str(i), SHARDS, routing) == shard)
        killed = threading.Event()
        since: list[float] = []
        timed: dict[str, list[tuple[float, Any]]] = {"search": [], "get": []}

        def client() -> None:
            while not since or time.monotonic() - since[0] < window:
                for kind in timed:
                    began, after = time.monotonic(), killed.is_set()
                    if kind == "search":
                        found = http.post(f"/{name}/_search", json={"size": 10}).json()
                        answer = found["_shards"]["failed"]
                    else:
                        answer = http.get(f"/{name}/_doc/{doc}").status_code
                    if after:
                        timed[kind].append((time.monotonic() - began, answer))

        thread = threading.Thread(target=client)
        thread.start()
        since.append(time.monotonic())
        killed.set()
        kill_node(local.cluster, workers[alive[primary]])
        thread.join()
        add_machine(local.cluster, int(primary.removeprefix(machine_resource(0)[:-1])))
        back = http.get("/_cluster/health", params=green).json()
        assert back["status"] == "green", (back, server.output()[-3000:])
        http.delete(f"/{name}")
        http.close()
        return {kind: (len(done), max(done, key=lambda t: t[0])) for kind, done in timed.items()}
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the tree whose coordinator is 'before'")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=8.0, help="seconds of requests from the kill on")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())  # (every turn's data kept to the end: see `_turn`)
    local = start_cluster(SYSTEM_CONFIG)
    try:
        for k in range(args.rounds):
            sides = [("before", args.before), ("after", None)]
            for replicas, (side, tree) in itertools.product((0, 1), sides if k % 2 == 0 else sides[::-1]):
                name = f"{side}{k}r{replicas}"
                slowest = _turn(local, tree, work, name, args.window, replicas)
                with open("/proc/loadavg") as fh:
                    load = fh.read().split()[0]
                shown = "; ".join(
                    f"{kind}: {n} sent, slowest {seconds:.3f} s ({answer})"
                    for kind, (n, (seconds, answer)) in slowest.items()
                )
                print(f"round {k} {side} replicas {replicas}: {shown}; load {load}")
    finally:
        stop_cluster(local)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
