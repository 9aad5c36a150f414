"""A local Ray cluster for the Ray backend's tests: 3 nodes on loopback, started by the tests.

Without Ray installed the tests skip, unless `LEAFSEARCH_REQUIRE_RAY=1` (CI sets it): then they
fail, so a CI that lost the extra cannot pass by running none of them.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from leafsearch.testing import Server

NODES = 3
#: Ray's minimum object store; the tests move small messages only.
OBJECT_STORE_BYTES = 80 * 1024 * 1024
#: Every Ray process on 127.0.0.1: Ray otherwise takes the address of the machine's route out.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: Seconds a coordinator may take to start: it connects to the cluster and finds its actors.
COORDINATOR_STARTUP_SECONDS = 120.0


def import_ray() -> Any:
    """Ray, or the test's skip (its failure under LEAFSEARCH_REQUIRE_RAY=1)."""
    os.environ.update(LOOPBACK_ENV)  # before Ray reads its constants
    try:
        import ray
    except ModuleNotFoundError:
        if os.environ.get("LEAFSEARCH_REQUIRE_RAY") == "1":
            pytest.fail('LEAFSEARCH_REQUIRE_RAY=1 but Ray is not installed: pip install -e ".[ray]"')
        pytest.skip('Ray is not installed (pip install -e ".[ray]")')
    return ray


@dataclass
class LocalCluster:
    cluster: Any
    address: str
    node_ids: list[str]
    started_in: float  # seconds the 3 nodes took to start


def start_cluster() -> LocalCluster:
    ray = import_ray()
    from ray.cluster_utils import Cluster

    started = time.monotonic()
    node_args = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={**node_args, "include_dashboard": False})
    for _ in range(NODES - 1):
        cluster.add_node(**node_args)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="leafsearch", log_to_driver=False)
    node_ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    assert len(node_ids) == NODES
    return LocalCluster(cluster, cluster.address, node_ids, time.monotonic() - started)


def stop_cluster(local: LocalCluster) -> None:
    import ray

    ray.shutdown()
    local.cluster.shutdown()


def shard_map(index_uuid: str) -> list[dict[str, Any]] | None:
    """An index's shard map in the cluster's metadata (ray_backend/replication.py), None if none."""
    import orjson
    import ray

    metadata = ray.get_actor("metadata", namespace="leafsearch")
    _, raw = ray.get(metadata.get.remote(f"shards/{index_uuid}"), timeout=60)
    return None if raw is None else orjson.loads(raw)["shards"]


def copy_nodes(index_uuid: str, shard_id: int) -> tuple[str, list[str]]:
    """(the machine key of a shard's primary, those of its replicas)."""
    entry = (shard_map(index_uuid) or [])[shard_id]
    nodes = {c["id"]: c["node"] for c in entry["copies"]}
    return nodes[entry["primary"]], [n for i, n in nodes.items() if i != entry["primary"]]


def machine_of(node: str) -> Any:
    import ray

    return ray.get_actor(f"machine/{node}", namespace="leafsearch")


def machine_actor(index_uuid: str, shard_id: int) -> Any:
    """The machine actor holding a shard's primary (ValueError: none holds it, e.g. its index is
    closed). A machine restarting is waited for (Ray sends the call again until it is back)."""
    import ray

    found = shard_map(index_uuid)
    nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    if found is not None:  # the primary's node first
        primary = copy_nodes(index_uuid, shard_id)[0]
        nodes = [primary, *(n for n in nodes if n != primary)]
    for node in nodes:
        try:
            actor = machine_of(node)
        except ValueError:  # no machine actor on that node
            continue
        try:
            if ray.get(actor.holds.options(max_task_retries=-1).remote((index_uuid, shard_id)), timeout=60):
                return actor
        except ray.exceptions.ActorDiedError:  # ended for good
            continue
    raise ValueError(f"no machine actor holds shard [{index_uuid}][{shard_id}]")


def machine_calls() -> Counter[str]:
    """The calls every machine actor of the cluster served so far, by method."""
    import ray

    calls: Counter[str] = Counter()
    for node in ray.nodes():
        try:
            machine = ray.get_actor(f"machine/{node['NodeID']}", namespace="leafsearch")
        except ValueError:  # no machine actor on that node
            continue
        calls.update(ray.get(machine.stats.remote(), timeout=60)["calls"])
    return calls


class ShardOnMachine:
    """A shard's methods on the machine actor holding it: `shard.stats.remote()` is
    `MachineActor.call` of that shard's `stats`."""

    def __init__(self, machine: Any, key: tuple[str, int]) -> None:
        self.machine = machine
        self.key = key

    def __getattr__(self, method: str) -> Any:
        machine, key = self.machine, self.key

        class Method:
            @staticmethod
            def remote(*args: Any) -> Any:
                return machine.call.remote(key, method, *args)

        return Method


def shard_actor(index_uuid: str, shard_id: int) -> ShardOnMachine:
    """A shard on the machine actor holding it (ValueError: none holds it)."""
    return ShardOnMachine(machine_actor(index_uuid, shard_id), (index_uuid, shard_id))


def where(index_uuid: str, shard_id: int) -> tuple[str, int]:
    """(Ray node id, pid) of the machine actor holding a shard."""
    import ray

    return ray.get(machine_actor(index_uuid, shard_id).where.remote(), timeout=60)


@contextmanager
def ray_server(address: str, data: Path) -> Iterator[Server]:
    """A `leafsearch serve --ray <address>` coordinator on `data`, for the block."""
    args = ["--ray", address]
    with Server(data, args=args, env=LOOPBACK_ENV, startup_timeout=COORDINATOR_STARTUP_SECONDS) as server:
        yield server
