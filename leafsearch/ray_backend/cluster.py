"""`RayBackend`: a node's connection to a Ray cluster, and its machine actors.

- **Connection**: `address` is a Ray address (`ray://...` or `host:port` of a running cluster),
  `auto` (the cluster this machine runs, as `ray.init(address="auto")` finds it) or `local`
  (a single-node cluster started in this process). A process already connected (tests, an
  application embedding the node) keeps its connection. Before connecting, the address is
  resolved and its port tried (`NoRayCluster` when nothing is there): `ray.init` would raise a
  traceback, or wait for a cluster that a stale session file names, rather than say what to run.
- **Placement**: a new index's shards are dealt round-robin over the cluster's alive nodes,
  starting at a node that moves with every index, so shards and indices spread (what Ray's
  SPREAD strategy aims at); each replica of a shard on the nodes after its primary's, never two
  copies on one node (with fewer nodes than copies, the extra replicas are unassigned). The
  placement (node, folder, allocation id of each copy) is kept in the index's `meta.json`; the
  shard map it starts (which copy is primary, the in-sync set, the primary term: replication.py)
  in the cluster's metadata (metadata.py), so both survive any coordinator.
- **One actor per machine** (`MachineActor`, actor.py): each node's shards, of every index, are
  served by one actor pinned to that node (`NodeAffinitySchedulingStrategy`, not soft: the
  folders are on its disk, so Ray must restart it there), so a search phase or a bulk costs one
  call per machine, not per shard. It runs `threads` shards at once (the node's cores).
- **Names**: each machine actor is named `machine/<Ray node id>` in the `leafsearch` namespace
  and detached from the coordinator's process: a restarted coordinator finds it by name
  (`get_if_exists`), with its shards' open contexts and caches; one that no longer exists (the
  whole Ray cluster restarted, or it was ended for good) is created again and reopens every
  shard from its folder.
- **Faults**: `max_restarts=-1` (Ray restarts a dead machine actor on its node, and it reopens
  its shards from their folders); `max_task_retries=0`, since a write retried blindly could
  apply twice (a generated id, a version bump): a call caught by a crash fails, and the caller
  decides.
"""

from __future__ import annotations

import itertools
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from leafsearch.ray_backend.actor import MACHINE_PREFIX, MachineActor
from leafsearch.ray_backend.remote import RemoteIndex
from leafsearch.ray_backend.replication import new_allocation_id

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.index.shared_meta import SharedIndexMeta

NAMESPACE = "leafsearch"
#: Calls one machine actor serves at once (searches beside writes, from several coordinators;
#: each call's shards run on the actor's own threads, the engine has its locks).
ACTOR_CONCURRENCY = 32
#: How long the cluster's address may take to accept a connection before it counts as not running.
PROBE_SECONDS = 3.0


class NoRayCluster(ConnectionError):
    """No Ray cluster runs where `--ray` points; the message says what to run."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"no Ray cluster is running {where}. Start one with `ray start --head` (then "
            "`leafsearch serve --ray auto`), or run a one-node cluster in this process with `--ray local`"
        )


def cluster_address(address: str) -> str:
    """The address of the running cluster `address` names: `auto` as Ray resolves it
    (`RAY_ADDRESS`, the cluster `ray start` recorded, a raylet of this machine). Raises
    `NoRayCluster` when none is found, or when nothing accepts connections at that address."""
    from ray._private.services import get_ray_address_from_environment  # Ray's own `auto`

    if address.startswith("ray://"):  # Ray Client: its server answers for the cluster
        return address
    where = "on this machine" if address == "auto" else f"at {address}"
    try:
        resolved = get_ray_address_from_environment(address, None) if address == "auto" else address
    except ConnectionError:
        raise NoRayCluster(where) from None
    host, _, port = resolved.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except (OSError, ValueError):
        raise NoRayCluster(f"at {resolved}" if address == "auto" else where) from None
    return resolved


class RayBackend:
    def __init__(self, address: str, shard_root: Path) -> None:
        """`shard_root`: the folder under which each Ray node keeps its shards (created on the
        node by the actor: the same path on every machine)."""
        if not ray.is_initialized():
            if address == "local":
                ray.init(namespace=NAMESPACE, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=cluster_address(address), namespace=NAMESPACE, log_to_driver=False)
        self.shard_root = shard_root
        #: The cluster's metadata, shared by every coordinator (set by the node: node/cluster_sync.py).
        self.metadata: SharedIndexMeta | None = None
        self._actor_class = ray.remote(MachineActor)
        self._deal = itertools.count()

    def alive_nodes(self) -> list[str]:
        return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])

    def place(self, index_uuid: str, num_shards: int, replicas: int = 0) -> list[dict[str, Any]]:
        """Where a new index's copies go: per shard, its primary's node, folder and allocation
        id, and its replicas' (see the module's docstring)."""
        nodes = self.alive_nodes()
        first = next(self._deal)
        placement = []
        for shard_id in range(num_shards):
            at = (first + shard_id) % len(nodes)
            copies = [
                {"node": node, "folder": self.folder(node, index_uuid, shard_id), "id": new_allocation_id()}
                for node in (nodes[(at + k) % len(nodes)] for k in range(min(1 + replicas, len(nodes))))
            ]
            primary = copies[0]
            entry = {"node": primary["node"], "folder": primary["folder"], "allocation_id": primary["id"]}
            placement.append(entry | ({"replicas": copies[1:]} if len(copies) > 1 else {}))
        return placement

    def folder(self, node: str, index_uuid: str, shard_id: int) -> str:
        """The folder of a shard's copy on a node."""
        return str(self.shard_root / node[:16] / index_uuid / str(shard_id))

    def attach(self, index: Index, placement: list[dict[str, Any]]) -> RemoteIndex:
        """The index's shard actors, found by name or created on their nodes."""
        return RemoteIndex(self, index, placement)

    def machine(self, node_id: str) -> Any:
        """The machine actor of a Ray node, found by name or created there."""
        cpus = next((n["Resources"].get("CPU", 1) for n in ray.nodes() if n["NodeID"] == node_id), 1)
        return self._actor_class.options(
            name=MACHINE_PREFIX + node_id,
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=0,
            max_concurrency=ACTOR_CONCURRENCY,
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(node_id, max(2, int(cpus)))
