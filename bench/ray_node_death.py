"""How soon Ray finds a killed node dead on the tests' local clusters (tests/ray_cluster.py), with
given health-check settings: what every test that kills or removes a node waits out.

    python -m bench.ray_node_death                                 # the shared clusters' settings
    python -m bench.ray_node_death --period-ms 1000 --initial-delay-ms 5000   # before session 18

Each round `kill -9`s a worker node (`ray_cluster.kill_node`: its workers, then its raylet),
polls `ray.nodes()` every 20 ms until the node is dead, and adds its machine again; the next
round kills that new node (so a node's first checks, `health_check_initial_delay_ms` after it
joins, count too).
"""

from __future__ import annotations

import argparse
import time

from tests.ray_cluster import (
    MACHINE,
    SHARED_SYSTEM_CONFIG,
    add_machine,
    kill_node,
    start_cluster,
    stop_cluster,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--period-ms", type=int, default=SHARED_SYSTEM_CONFIG["health_check_period_ms"])
    parser.add_argument(
        "--initial-delay-ms", type=int, default=SHARED_SYSTEM_CONFIG["health_check_initial_delay_ms"]
    )
    args = parser.parse_args()
    config = {
        **SHARED_SYSTEM_CONFIG,
        "health_check_period_ms": args.period_ms,
        "health_check_initial_delay_ms": args.initial_delay_ms,
    }
    print(f"settings: {config}", flush=True)
    local = start_cluster(config)
    import ray  # (after the cluster's start: it sets Ray's environment first)

    try:
        for _ in range(args.rounds):
            node = max(local.cluster.worker_nodes, key=lambda n: n.node_id)
            resources = next(n["Resources"] for n in ray.nodes() if n["NodeID"] == node.node_id)
            machine = int(next(k for k in resources if k.startswith(MACHINE))[len(MACHINE) :])
            started = time.monotonic()
            kill_node(local.cluster, node)
            while any(n["NodeID"] == node.node_id and n["Alive"] for n in ray.nodes()):
                time.sleep(0.02)
            print(f"dead after {time.monotonic() - started:.2f} s", flush=True)
            add_machine(local.cluster, machine)
            local.cluster.wait_for_nodes()
    finally:
        stop_cluster(local)


if __name__ == "__main__":
    main()
