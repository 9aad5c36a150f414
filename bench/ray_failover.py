"""How soon a coordinator of a Ray cluster replaces a lost primary, and what its follower checks
cost it (ray_backend/fault_detection.py), on a local 3-node Ray cluster started here (the tests'
`tests/ray_cluster.py`) with one `leafsearch serve --ray` coordinator:

    python -m bench.ray_failover              # 3 rounds of each kill, 20 s of idle CPU each way

- detection: seconds from a `kill -9` to the shard map naming the promoted replica (term 2),
  with no request to the shard meanwhile (the checks alone find it): the primary's machine actor
  process killed (Ray restarts it), then a whole node's processes (`ray_cluster.kill_node`);
- the checks' cost: the idle coordinator's CPU per second (its process's user + system time)
  with the checks every second (the default) and with `interval` 1h, 3 machines checked.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import time
from pathlib import Path

import httpx

from tests.ray_cluster import (
    add_machine,
    copy_nodes,
    kill_node,
    machine_resource,
    ray_server,
    shard_map,
    start_cluster,
    stop_cluster,
    where,
)

#: How soon a node killed is dead to Ray (about 5 s; Ray's default ~30 s; the tests' clusters:
#: tests/ray_cluster.py `SHARED_SYSTEM_CONFIG`).
SYSTEM_CONFIG = {
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 2000,
    "health_check_failure_threshold": 5,
}


def _promoted(uuid: str, started: float) -> float:
    """Seconds from `started` until the shard map's term is 2 (polled every 10 ms)."""
    while shard_map(uuid)[0]["term"] < 2:
        time.sleep(0.01)
    return time.monotonic() - started


def _index(http: httpx.Client, name: str) -> str:
    body = {"settings": {"number_of_shards": 1, "number_of_replicas": 1}}
    assert http.put(f"/{name}", json=body).status_code == 200
    assert http.post(f"/{name}/_doc?refresh=true", json={"n": 1}).status_code == 201
    return http.get(f"/{name}/_settings").json()[name]["settings"]["index"]["uuid"]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_cpu(pid: int, seconds: float) -> float:
    """The process's CPU milliseconds per second over `seconds` of idleness."""
    before = _cpu_seconds(pid)
    time.sleep(seconds)
    return (_cpu_seconds(pid) - before) * 1000 / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU measured each way")
    args = parser.parse_args()
    local = start_cluster(SYSTEM_CONFIG)
    import ray  # (after the cluster's start: it sets Ray's environment first)

    try:
        with tempfile.TemporaryDirectory() as work, ray_server(local.address, Path(work) / "data") as server:
            http = httpx.Client(base_url=server.url, timeout=120)
            pid = server.process.pid
            _index(http, "warm")  # (every machine checked from now on)
            time.sleep(2)
            checked = _idle_cpu(pid, args.idle)
            interval = "cluster.fault_detection.follower_check.interval"
            assert http.put("/_cluster/settings", json={"transient": {interval: "1h"}}).status_code == 200
            time.sleep(2)  # (each check's wait started with the former interval)
            unchecked = _idle_cpu(pid, args.idle)
            http.put("/_cluster/settings", json={"transient": {interval: None}})
            print(f"idle coordinator CPU, ms/s: {checked:.2f} with checks every 1s, {unchecked:.2f} without")
            actor = []
            for k in range(args.rounds):
                uuid = _index(http, f"actor{k}")
                _, machine_pid = where(uuid, 0)
                started = time.monotonic()
                os.kill(machine_pid, signal.SIGKILL)
                actor.append(_promoted(uuid, started))
                health = {"wait_for_status": "green", "timeout": "120s"}
                assert http.get("/_cluster/health", params=health).status_code == 200
            print("machine actor killed, promoted after (s):", ", ".join(f"{s:.2f}" for s in actor))
            nodes = []
            for k in range(args.rounds):
                uuid = _index(http, f"node{k}")
                primary, _ = copy_nodes(uuid, 0)
                workers = {n.node_id: n for n in local.cluster.worker_nodes}
                node_id = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and primary in n["Resources"])
                if node_id not in workers:  # (the head's node is not killed: it runs the cluster)
                    continue
                started = time.monotonic()
                kill_node(local.cluster, workers[node_id])
                nodes.append(_promoted(uuid, started))
                add_machine(local.cluster, int(primary.removeprefix(machine_resource(0)[:-1])))
                health = {"wait_for_status": "green", "timeout": "180s"}
                assert http.get("/_cluster/health", params=health).status_code == 200
            print("node killed, promoted after (s):", ", ".join(f"{s:.2f}" for s in nodes))
            http.close()
    finally:
        stop_cluster(local)


if __name__ == "__main__":
    main()
