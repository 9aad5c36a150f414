"""A local Ray cluster for the Ray backend's tests: 3 nodes on loopback, started by the tests,
each its own machine (`leafsearch-machine-m0` to `m2`: they share this host, so they are named).

Without Ray installed the tests skip, unless `LEAFSEARCH_REQUIRE_RAY=1` (CI sets it): then they
fail, so a CI that lost the extra cannot pass by running none of them.
"""

from __future__ import annotations

import contextlib
import os
import signal
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


#: Each node's arguments but its machine's resource.
NODE_ARGS = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES, "node_ip_address": "127.0.0.1"}


def machine_resource(i: int) -> str:
    """The resource naming the test cluster's machine `m<i>` (ray_backend/cluster.py)."""
    return f"leafsearch-machine-m{i}"


@dataclass
class LocalCluster:
    cluster: Any
    address: str
    node_ids: list[str]
    started_in: float  # seconds the 3 nodes took to start


def start_cluster(system_config: dict[str, Any] | None = None) -> LocalCluster:
    """`system_config`: Ray's, for the head (e.g. how soon a killed node counts as dead)."""
    ray = import_ray()
    from ray.cluster_utils import Cluster

    started = time.monotonic()
    head_args = {**NODE_ARGS, "include_dashboard": False, "resources": {machine_resource(0): 1}}
    if system_config:
        head_args["_system_config"] = system_config
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    for i in range(1, NODES):
        add_machine(cluster, i)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="leafsearch", log_to_driver=False)
    node_ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    assert len(node_ids) == NODES
    return LocalCluster(cluster, cluster.address, node_ids, time.monotonic() - started)


def add_machine(cluster: Any, i: int) -> Any:
    """A node of machine `m<i>` (its first, or the one that replaces it), started."""
    return cluster.add_node(**NODE_ARGS, resources={machine_resource(i): 1})


def kill_node(cluster: Any, node: Any) -> list[int]:
    """`kill -9` of a node: its raylet's children (its workers: the actors there) at once, then
    the raylet and the node's other processes (`remove_node` without a graceful stop); the
    workers' pids."""
    raylet = node.all_processes["raylet"][0].process.pid
    workers = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _parent(entry) == raylet
    ]
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    cluster.remove_node(node, allow_graceful=False)
    return workers


def stop(pid: int) -> None:
    """SIGSTOP to a process, returning once it is stopped (the signal is delivered
    asynchronously: the process may run on a little after `kill`)."""
    os.kill(pid, signal.SIGSTOP)
    stat = Path(f"/proc/{pid}/stat")
    while stat.read_text().rpartition(")")[2].split()[0] not in ("T", "t"):
        os.sched_yield()


def ended(pid: int) -> bool:
    """Whether a process has ended (gone, or a zombie its parent has not reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


def _parent(proc: Path) -> int | None:
    try:  # "pid (name) state ppid ...": the name may hold spaces
        return int((proc / "stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):  # (ended meanwhile)
        return None


def alive_machines() -> list[str]:
    """The machines of the cluster's alive nodes."""
    import ray

    from leafsearch.ray_backend.cluster import machine_of

    return sorted({machine_of(n["Resources"]) for n in ray.nodes() if n["Alive"]})


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
    """(the machine of a shard's primary, those of its replicas)."""
    entry = (shard_map(index_uuid) or [])[shard_id]
    nodes = {c["id"]: c["node"] for c in entry["copies"]}
    return nodes[entry["primary"]], [n for i, n in nodes.items() if i != entry["primary"]]


def node_of(machine: str) -> str:
    """The Ray node id of a machine's alive node."""
    import ray

    from leafsearch.ray_backend.cluster import machine_of as machine_of_node

    return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and machine_of_node(n["Resources"]) == machine)


def machine_of(node: str) -> Any:
    """The actor of a machine (a copy's `node`)."""
    import ray

    return ray.get_actor(f"machine/{node}", namespace="leafsearch")


def machine_actor(index_uuid: str, shard_id: int) -> Any:
    """The machine actor holding a shard's primary (ValueError: none holds it, e.g. its index is
    closed). A machine restarting is waited for (Ray sends the call again until it is back)."""
    import ray

    machines = alive_machines()
    if shard_map(index_uuid) is not None:  # the primary's machine first
        primary = copy_nodes(index_uuid, shard_id)[0]
        machines = [primary, *(m for m in machines if m != primary)]
    for machine in machines:
        try:
            actor = machine_of(machine)
        except ValueError:  # no machine actor on that machine
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
    for name in alive_machines():
        try:
            machine = ray.get_actor(f"machine/{name}", namespace="leafsearch")
        except ValueError:  # no machine actor on that machine
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
