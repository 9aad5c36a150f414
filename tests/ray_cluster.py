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
from tests.server_zygote import SERVER_ZYGOTE

NODES = 3
#: Ray's minimum object store; the tests move small messages only.
OBJECT_STORE_BYTES = 80 * 1024 * 1024
#: Every Ray process on 127.0.0.1: Ray otherwise takes the address of the machine's route out.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: Seconds a coordinator may take to start: it connects to the cluster and finds its actors.
COORDINATOR_STARTUP_SECONDS = 120.0
#: Ray's health checks of the shared clusters' nodes (`SharedCluster`): a node whose raylet is gone
#: (its port refuses) is found dead after 5 checks 300 ms apart, about 1.5 s (Ray's default: 3 s
#: apart, about 15 s; 1 s apart took 4.9 to 8.8 s, bench/RESULTS.md "Session 18"), which the tests
#: removing or killing a node wait out; one that is slow to answer only after 5 checks in a row
#: have each waited 5 s, so a loaded machine does not lose its nodes. A node's checks start 1 s
#: after it joins (Ray's default 5 s: a node added and soon killed again was found dead late).
#: Ray's workers (the machine actors, which do the shards' work) at `nice` 0, the Ray groups' own,
#: not Ray's default 15: below the rest of the suite's (10, tests/scheduling.py `REST_NICENESS`),
#: each page and actor restart of the Ray groups waited behind it.
SHARED_SYSTEM_CONFIG = {
    "health_check_period_ms": 300,
    "health_check_timeout_ms": 5000,
    "health_check_failure_threshold": 5,
    "health_check_initial_delay_ms": 1000,
    "worker_niceness": 0,
}


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


#: The start of the resources naming the test cluster's machines.
MACHINE = "leafsearch-machine-m"


def machine_resource(i: int) -> str:
    """The resource naming the test cluster's machine `m<i>` (ray_backend/cluster.py)."""
    return f"{MACHINE}{i}"


@dataclass
class LocalCluster:
    cluster: Any
    address: str
    node_ids: list[str]
    started_in: float  # seconds the 3 nodes took to start


def start_cluster(system_config: dict[str, Any] | None = None) -> LocalCluster:
    """`system_config`: Ray's, for the head (e.g. how soon a killed node counts as dead). No log
    monitor: it tails every worker's log files to stream them to drivers, and every driver here
    (this process, the coordinators) connects with `log_to_driver=False`; the workers still write
    their files. It used about 0.01 of a core over a cluster's life (bench/RESULTS.md "Session 22")."""
    ray = import_ray()
    from ray.cluster_utils import Cluster

    started = time.monotonic()
    head_args = {
        **NODE_ARGS,
        "include_dashboard": False,
        "include_log_monitor": False,
        "resources": {machine_resource(0): 1},
    }
    if system_config:
        head_args["_system_config"] = dict(system_config)  # (Ray adds its session's entries to it)
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
    workers = children(node.all_processes["raylet"][0].process.pid)
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    cluster.remove_node(node, allow_graceful=False)
    return workers


def children(pid: int) -> list[int]:
    """The pids of a process's children."""
    return [
        int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and _parent(entry) == pid
    ]


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


def leafsearch_actors() -> list[str]:
    """The names of leafsearch's named actors on the cluster (the metadata and machine actors)."""
    import ray

    from leafsearch.ray_backend.cluster import NAMESPACE

    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE]


class SharedCluster:
    """One local cluster for the Ray modules of an xdist worker (its Ray group: tests/scheduling.py)
    that leave its shape as they found it: started for the first of them (`take`), reset when
    each lets it go (`give_back`), stopped once the worker's next test needs none
    (tests/conftest.py), so the rest of the worker's tests do not share the cores with it.

    Why: each start of a 3-node cluster cost 9 to 27 s of wall on this machine (bench/RESULTS.md
    "The test suite"). What a module's coordinators leave on the cluster lives in leafsearch's
    named actors (the metadata actor, the machine actors with their shards and contexts) and in
    its key-value entries (indices, users and API keys, cluster settings, contexts, the
    cluster's secret); `give_back` empties the machine actors (each shard they hold destroyed,
    its contexts and folder with it, as its index's deletion would), ends the metadata actor and
    deletes the entries but the secret (the machine actors' channels check it), so the next
    module's first coordinator starts on what is, to leafsearch, a new cluster whose machines
    hold nothing. The machine actors' processes are kept (each started again cost Ray's worker
    start and the engine's import, 0.7 s of CPU, bench/RESULTS.md "Session 21") unless one of
    them does not answer, or the cluster lost a node: then every leafsearch actor is ended and
    every entry deleted, as a new cluster has none."""

    def __init__(self) -> None:
        self.local: LocalCluster | None = None
        self.holders = 0
        self.starts = 0

    def take(self) -> LocalCluster:
        if self.local is None:
            self.local = start_cluster(SHARED_SYSTEM_CONFIG)
            self.starts += 1
        self.holders += 1
        return self.local

    def give_back(self) -> None:
        """A holder is done with the cluster: leafsearch's state on it goes (see the class), and
        a machine whose node a test removed gets a node again; a cluster whose removed node Ray
        still counts alive is stopped instead (the next holder starts another)."""
        self.holders -= 1
        if self.local is None or self.holders:
            return
        import ray
        from ray.experimental import internal_kv

        from leafsearch.ray_backend.cluster import NAMESPACE
        from leafsearch.ray_backend.metadata import KV_NAMESPACE, SECRET_KEY
        from tests.concurrency import wait_for

        try:
            kept = self._emptied_machines()
            for name in leafsearch_actors():
                if name not in kept:
                    with contextlib.suppress(ValueError):  # (ended meanwhile)
                        ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
            wait_for(lambda: set(leafsearch_actors()) <= kept)
            for key in internal_kv._internal_kv_list("", namespace=KV_NAMESPACE):
                if not kept or key != SECRET_KEY.encode():
                    internal_kv._internal_kv_del(key, namespace=KV_NAMESPACE)
            self._restore_shape()
        except BaseException:  # not reset: the next holder gets a new cluster
            self.stop()
            raise

    def _emptied_machines(self) -> set[str]:
        """The names of the machine actors, each emptied, when all of them answer on a cluster of
        its full shape; otherwise none (they are ended, see the class)."""
        import ray

        from leafsearch.ray_backend.actor import MACHINE_PREFIX
        from leafsearch.ray_backend.cluster import NAMESPACE

        names = {name for name in leafsearch_actors() if name.startswith(MACHINE_PREFIX)}
        alive = [n for n in ray.nodes() if n["Alive"]]
        if len(alive) != NODES or len(names) != NODES:
            return set()
        try:
            for name in names:
                machine = ray.get_actor(name, namespace=NAMESPACE)
                for key in ray.get(machine.held.remote(), timeout=60):
                    ray.get(machine.call.remote(tuple(key), "destroy"), timeout=60)
                if ray.get(machine.stats.remote(), timeout=60)["shards"]:
                    return set()
        except (ray.exceptions.RayError, ValueError):  # (one not answering, or ended meanwhile)
            return set()
        return names

    def _restore_shape(self) -> None:
        import ray

        assert self.local is not None
        cluster = self.local.cluster
        nodes = [cluster.head_node, *cluster.worker_nodes]
        alive = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
        if cluster.head_node is None or set(alive) != {node.node_id for node in nodes}:
            self.stop()  # (a node removed but not yet found dead, or the head gone)
            return
        machines = {name for resources in alive.values() for name in resources if name.startswith(MACHINE)}
        for i in range(NODES):
            if machine_resource(i) not in machines:
                add_machine(cluster, i)
        cluster.wait_for_nodes()
        self.local.node_ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])

    def stop(self) -> None:
        if self.local is not None:
            stop_cluster(self.local)
            self.local = None


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
        try:
            calls.update(ray.get(machine.stats.remote(), timeout=60)["calls"])
        except (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError):
            # A machine a test just killed, which Ray still lists as alive for a moment: its
            # process, and the calls it counted, are gone (Ray's restart counts from none).
            continue
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
    """A `leafsearch serve --ray <address>` coordinator on `data`, for the block (a fork of the
    test process's `SERVER_ZYGOTE`, which imports Ray after the fork)."""
    args = ["--ray", address]
    with Server(
        data,
        args=args,
        env=LOOPBACK_ENV,
        startup_timeout=COORDINATOR_STARTUP_SECONDS,
        popen=SERVER_ZYGOTE.popen,
    ) as server:
        yield server
