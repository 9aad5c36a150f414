"""`RayBackend`: a node's connection to a Ray cluster, and its machine actors.

- **Connection**: `address` is a Ray address (`ray://...` or `host:port` of a running cluster),
  `auto` (the cluster this machine runs, as `ray.init(address="auto")` finds it) or `local`
  (a single-node cluster started in this process). A process already connected (tests, an
  application embedding the node) keeps its connection. Before connecting, the address is
  resolved and its port tried (`NoRayCluster` when nothing is there): `ray.init` would raise a
  traceback, or wait for a cluster that a stale session file names, rather than say what to run.
- **Machines**: a machine is named by something that survives a restart of its Ray node (a
  restarted raylet has a new node id): the custom resource `leafsearch-machine-NAME` the operator
  gives `ray start` (`--resources '{"leafsearch-machine-m1": 1}'`), else the node's address, Ray's
  own `node:<ip>` resource (one machine per host: nodes of one host without names share its disk
  and one actor). A machine is that resource's key (`machines`). Why a resource rather than a
  name kept in a file on the node: Ray schedules by resource, so the machine actor, waiting for
  its resource while the node is gone, is started by Ray on the node that comes back with it,
  with no coordinator's help; a file would need a coordinator to find the new node and re-create
  the actor.
- **Placement**: a new index's shards are dealt round-robin over the cluster's alive machines,
  starting at a machine that moves with every index, so shards and indices spread (what Ray's
  SPREAD strategy aims at); each replica of a shard on the machines after its primary's, never
  two copies on one machine (with fewer machines than copies, the extra replicas are
  unassigned). The placement (each copy's machine as its `node`, its folder `<shard root>/
  <machine>/<index uuid>/<shard>` and allocation id) is kept in the index's `meta.json`; the
  shard map it starts (which copy is primary, the in-sync set, the primary term: replication.py)
  in the cluster's metadata (metadata.py), so both survive any coordinator.
- **One actor per machine** (`MachineActor`, actor.py): each machine's shards, of every index,
  are served by one actor scheduled by the machine's resource (the folders are on its disk, so
  Ray must restart it there), so a search phase or a bulk costs one call per machine, not per
  shard. It runs `threads` shards at once (the node's cores). Its registry (which shards it
  holds) is in its machine's folder under the shard root.
- **Names**: each machine actor is named `machine/<machine>` in the `leafsearch` namespace
  and detached from the coordinator's process: a restarted coordinator finds it by name
  (`get_if_exists`), with its shards' open contexts and caches; one that no longer exists (the
  whole Ray cluster restarted, or it was ended for good) is created again and reopens every
  shard of its registry.
- **Data plane**: the machine calls go on each actor's channel (channel.py, `channels`), not as
  Ray tasks; Ray tells the channel's address (`MachineActor.channel`), again after a restart.
- **Faults**: `max_restarts=-1` (Ray restarts a dead machine actor on a node of its machine, the
  same node or the one that replaced it, and it reopens its shards from their folders);
  `max_task_retries=0`, since a write retried blindly could apply twice (a generated id, a
  version bump): a call caught by a crash fails, and the caller decides (remote.py `MachineCall`
  resends a read over a broken channel, never a write). While no alive node has the machine's
  resource the machine is gone (`present`): its calls fail (remote.py). Whether a machine has
  *failed* (its primaries replaced) is the backend's failure detector's one answer
  (fault_detection.py: follower checks of each machine a coordinator's copies are on), never
  one call's timeout.
"""

from __future__ import annotations

import itertools
import re
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from leafsearch.ray_backend.actor import MACHINE_PREFIX, MachineActor
from leafsearch.ray_backend.channel import Address, Channels
from leafsearch.ray_backend.fault_detection import FailureDetector, FollowerCheck, MachineLink
from leafsearch.ray_backend.metadata import cluster_secret
from leafsearch.ray_backend.remote import RemoteIndex, until_gone
from leafsearch.ray_backend.replication import new_allocation_id

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.index.shared_meta import SharedIndexMeta

NAMESPACE = "leafsearch"
#: Calls one machine actor serves at once (searches beside writes, from several coordinators;
#: each call's shards run on the actor's own threads, the engine has its locks).
ACTOR_CONCURRENCY = 32
#: The custom resource naming a machine: `leafsearch-machine-NAME` (`machine_folder` for its folder).
MACHINE_RESOURCE = "leafsearch-machine-"
#: The share of its machine's resource a machine actor asks for (there is one actor per machine).
MACHINE_SHARE = 0.01
#: How long the cluster's address may take to accept a connection before it counts as not running.
PROBE_SECONDS = 3.0
#: How long a node's raylet may take to accept a connection before its machine's presence is
#: left to Ray's health checks (`Machine.present`).
RAYLET_PROBE_SECONDS = 0.5


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


def machine_of(resources: dict[str, float]) -> str:
    """The machine of a Ray node with these resources: its `leafsearch-machine-NAME` resource
    (the first by name, if an operator gave two), else its `node:<ip>` resource."""
    named = sorted(key for key in resources if key.startswith(MACHINE_RESOURCE))
    if named:
        return named[0]
    return min(key for key in resources if key.startswith("node:") and key != "node:__internal_head__")


def machine_folder(machine: str) -> str:
    """A machine's folder name under the shard root (its resource key, file-name safe)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", machine)


@dataclass(frozen=True)
class Machine:
    """A machine actor as the coordinator calls it: equal by machine, so that calls to one machine
    through several indices' handles go in one call (remote.send_calls)."""

    name: str  # the machine: its resource's key
    actor: Any = field(compare=False)

    def present(self) -> bool:
        """Whether an alive node has the machine's resource: one Ray can start its actor on. A
        node whose processes were killed counts as alive to Ray until its health checks mark it
        dead (seconds: Ray's default about 15), so its raylet's port is tried too: refused, the
        node is gone now (a raylet that does not answer in `RAYLET_PROBE_SECONDS` is left to
        Ray's checks: a busy machine is not gone)."""
        return any(
            node["Alive"] and self.name in node["Resources"] and _raylet_listens(node) for node in ray.nodes()
        )

    def address(self, deadline: float) -> Address:
        """Its actor's channel address, asked through Ray, which waits while the actor restarts,
        given up as soon as the machine is gone (remote.py `until_gone`)."""
        asked = self.actor.channel.options(max_task_retries=-1).remote()
        return tuple(until_gone(self, asked, deadline))


class RayBackend:
    def __init__(
        self, address: str, shard_root: Path, follower_check: Callable[[], FollowerCheck] = FollowerCheck
    ) -> None:
        """`shard_root`: the folder under which each machine keeps its shards, in a folder of
        its own (created on the machine by its actor: the same path on every machine).
        `follower_check`: the failure detector's current settings (the node's cluster settings)."""
        if not ray.is_initialized():
            if address == "local":
                # ("local": a new cluster, even where `ray start` left one this machine would join)
                ray.init(address="local", namespace=NAMESPACE, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=cluster_address(address), namespace=NAMESPACE, log_to_driver=False)
        self.shard_root = shard_root
        #: This coordinator's name in the recoveries it claims (replication.py `claim_recovery`),
        #: new with each start: a restarted coordinator's claims of before expire.
        self.owner = uuid.uuid4().hex
        #: The cluster's metadata, shared by every coordinator (set by the node: node/cluster_sync.py).
        self.metadata: SharedIndexMeta | None = None
        self._actor_class = ray.remote(MachineActor)
        self._deal = itertools.count()
        #: The machine calls' connections (channel.py): the data plane beside Ray's.
        self._secret = cluster_secret()
        self.channels = Channels(self._secret, Machine.address)
        #: The latest actor handle of each machine handed out (`machine`), for its checks.
        self._handles: dict[str, Machine] = {}
        #: Which machines have failed (fault_detection.py): each machine handed out is checked.
        self.detector = FailureDetector(self._link, lambda: set(self.machines()), follower_check)

    def _link(self, machine: str) -> MachineLink:
        return MachineLink(partial(self._locate, machine), self._secret)

    def _locate(self, machine: str, deadline: float) -> Address:
        return self._handles[machine].address(deadline)

    def close(self) -> None:
        """Stop the failure detector's checks and close the machines' connections."""
        self.detector.close()
        self.channels.close()

    def machines(self) -> dict[str, int]:
        """The cluster's machines that have an alive node, each with its CPUs."""
        found: dict[str, int] = {}
        for node in ray.nodes():
            if node["Alive"]:
                machine = machine_of(node["Resources"])
                found[machine] = max(found.get(machine, 0), int(node["Resources"].get("CPU", 1)))
        return found

    def place(self, index_uuid: str, num_shards: int, replicas: int = 0) -> list[dict[str, Any]]:
        """Where a new index's copies go: per shard, its primary's machine (`node`), folder and
        allocation id, and its replicas' (see the module's docstring)."""
        machines = sorted(self.machines())
        first = next(self._deal)
        placement = []
        for shard_id in range(num_shards):
            at = (first + shard_id) % len(machines)
            copies = [
                {
                    "node": machine,
                    "folder": self.folder(machine, index_uuid, shard_id),
                    "id": new_allocation_id(),
                }
                for machine in (
                    machines[(at + k) % len(machines)] for k in range(min(1 + replicas, len(machines)))
                )
            ]
            primary = copies[0]
            entry = {"node": primary["node"], "folder": primary["folder"], "allocation_id": primary["id"]}
            placement.append(entry | ({"replicas": copies[1:]} if len(copies) > 1 else {}))
        return placement

    def folder(self, machine: str, index_uuid: str, shard_id: int) -> str:
        """The folder of a shard's copy on a machine."""
        return str(self.shard_root / machine_folder(machine) / index_uuid / str(shard_id))

    def named(self, placement: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The placement with each copy's `node` a machine. One written before machines were
        named has a Ray node id there: it is read as the machine of that node while it is alive,
        else, its node restarted with another id, as the cluster's machine when it has one alone
        (the one host whose disk has its folder); on a larger cluster as a machine no node has
        (its shard unavailable: which host has its folder is not known)."""
        if all(_is_machine(entry["node"]) for entry in placement):
            return placement
        alive = {n["NodeID"]: machine_of(n["Resources"]) for n in ray.nodes() if n["Alive"]}
        machines = set(alive.values())
        only = machines.pop() if len(machines) == 1 else None

        def machine(node: str) -> str:
            if _is_machine(node):
                return node
            return alive.get(node) or only or f"{MACHINE_RESOURCE}node-{node}"

        return [entry | {"node": machine(entry["node"])} for entry in placement]

    def attach(self, index: Index, placement: list[dict[str, str]]) -> RemoteIndex:
        """The index's shard actors, found by name or created on their nodes."""
        return RemoteIndex(self, index, placement)

    def machine(self, machine: str) -> Machine:
        """The actor of a machine, found by name or created there (scheduled by the machine's
        resource: Ray starts it once a node of the machine is alive)."""
        cpus = self.machines().get(machine, 1)
        registry = self.shard_root / machine_folder(machine) / "machine.json"
        actor = self._actor_class.options(
            name=MACHINE_PREFIX + machine,
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=0,
            max_concurrency=ACTOR_CONCURRENCY,
            num_cpus=0,
            resources={machine: MACHINE_SHARE},
        ).remote(machine, str(registry), max(2, cpus))
        handle = self._handles[machine] = Machine(machine, actor)
        self.detector.watch(machine)
        return handle


def _raylet_listens(node: dict[str, Any]) -> bool:
    """Whether a node's raylet accepts a connection (or cannot be told: no answer in time)."""
    try:
        socket.create_connection(
            (node["NodeManagerAddress"], node["NodeManagerPort"]), timeout=RAYLET_PROBE_SECONDS
        ).close()
    except ConnectionRefusedError:
        return False
    except (OSError, KeyError):
        pass
    return True


def _is_machine(node: str) -> bool:
    """Whether a placement's `node` names a machine (not a Ray node id, as before machines)."""
    return node.startswith((MACHINE_RESOURCE, "node:"))
