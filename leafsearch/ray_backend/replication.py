"""Replicas on Ray: the shard map of an index (its copies, which is primary, the in-sync set, the
primary term), kept as one entry of the cluster's versioned metadata, and what a write carries to
replicate.

- **The shard map** (`ShardMap`, entry `shards/<index uuid>` of ray_backend/metadata.py): per
  shard its copies (machine key, folder, allocation id), the primary's allocation id, the
  in-sync set (allocation ids, the primary's included) and the primary term. Every change is a
  compare-and-set on that entry (`ShardMaps.change`), so two coordinators never both promote, and
  a copy dropped from the in-sync set by one is dropped for all (each coordinator applies the
  entry at its next request, node/cluster_sync.py). Why an entry of its own rather than a key of
  the index's `meta.json`: a copy failing a write changes it in the write's path, and a
  compare-and-set of the shard map alone never has to merge a concurrent mapping update.
- **A write** goes to the primary's machine (one call per machine, as without replicas) with a
  `Replication`: the term and the copies to replicate to. The primary applies it (seq_nos,
  versions), then sends the translog records it logged to each replica's machine and fsyncs its
  own translog meanwhile; each replica appends and applies them (`shard_write.apply_replicated`:
  a bulk's run by column) and answers after its fsync. The primary answers `Replicated`: the
  outcomes, and the copies that failed. Why the primary forwards rather than the coordinator:
  the coordinator's CPU per call is what bounds a coordinator (bench/RESULTS.md "Shards as Ray
  actors"), and the documents would cross it twice. The coordinator drops the failed copies from
  the in-sync set (a versioned change) before the write is acknowledged: never a silent
  divergence. A change refused because the primary term moved (another coordinator promoted a
  replica meanwhile) fails the write.
- **A recovery is claimed in the map** (`claim_recovery`): a shard's entry keeps, per copy, its
  last recovery (`recovery`: the claiming coordinator, the claim's expiry, the primary term, the
  stage and counts `_cat/recovery` shows). Every coordinator reconciles in the background
  (remote.py `reconcile`), so several react to one machine's return; the claim is a
  compare-and-set of the entry, so one wins, and the copy joins the in-sync set by an edit that
  checks the claim is still its owner's (`recovery_stage`), in the same compare-and-set. Why in
  the map rather than an entry of its own: the claim and the in-sync set change together, never
  one without the other. The owner renews its claim while the recovery runs (`renew_recovery`,
  every `RECOVERY_RENEW_SECONDS`), so the lease is short (`RECOVERY_LEASE_SECONDS`, wall clock)
  whatever the copy's length: a claim whose coordinator died expires within seconds and another
  coordinator takes it over; an owner that finds its claim lost stops its copy.
- **Machine keys** are whatever a placement entry's `node` holds; the backend resolves them.
"""

from __future__ import annotations

import copy
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from leafsearch.errors import ElasticError
from leafsearch.index.shard_write import ShardWriteOutcome
from leafsearch.index.shared_meta import ABSENT, MAX_ROUNDS

#: The metadata entry of an index's shard map.
SHARD_MAP = "shards/"
#: How long a primary waits for a replica's answer before it counts the replica as failed.
REPLICA_TIMEOUT_SECONDS = 30.0
#: How often the owner of a recovery's claim renews it while the recovery runs (wall-clock seconds).
RECOVERY_RENEW_SECONDS = 2.0
#: How long a recovery's claim holds unless renewed (wall-clock seconds): five renewals, so a live
#: owner whose renewals are late or fail (a busy machine, the metadata actor restarting) keeps
#: it, and a dead owner's expires within seconds: the next coordinator to reconcile claims the copy.
RECOVERY_LEASE_SECONDS = 5 * RECOVERY_RENEW_SECONDS
#: The stages of a recovery whose claim holds (Elasticsearch's `_cat/recovery` stages).
ACTIVE_STAGES = frozenset({"index", "finalize"})


def new_allocation_id() -> str:
    return uuidlib.uuid4().hex[:22]


@dataclass(frozen=True, slots=True)
class Replication:
    """What a write to a primary carries: the primary term, and each copy to replicate to
    (machine key, allocation id)."""

    term: int
    targets: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Replicated:
    """A primary's answer to a replicated write: its outcomes, and the allocation ids of the
    copies that did not acknowledge it."""

    outcomes: ShardWriteOutcome
    failed: tuple[str, ...]


class ShardMap:
    """An index's shard map (see the module's docstring): `shards[i]` is
    `{"term", "primary", "in_sync": [ids], "copies": [{"id", "node", "folder"}]}`."""

    def __init__(self, shards: list[dict[str, Any]], version: int = 0) -> None:
        self.shards = shards
        #: The version of the metadata entry this map was read from (0: not published).
        self.version = version

    @classmethod
    def decode(cls, raw: bytes, version: int) -> ShardMap:
        return cls(orjson.loads(raw)["shards"], version)

    def encode(self) -> bytes:
        return orjson.dumps({"shards": self.shards})

    def copy(self) -> ShardMap:
        return ShardMap(copy.deepcopy(self.shards), self.version)

    def primary(self, shard_id: int) -> dict[str, str]:
        entry = self.shards[shard_id]
        return next(c for c in entry["copies"] if c["id"] == entry["primary"])

    def replicas(self, shard_id: int) -> list[dict[str, str]]:
        entry = self.shards[shard_id]
        return [c for c in entry["copies"] if c["id"] != entry["primary"]]

    def term(self, shard_id: int) -> int:
        return self.shards[shard_id]["term"]

    def in_sync(self, shard_id: int, allocation_id: str) -> bool:
        return allocation_id in self.shards[shard_id]["in_sync"]

    def replication(self, shard_id: int) -> Replication | None:
        """What a write to the shard carries: the primary term and every in-sync replica (each
        must acknowledge it); None for a shard that never had a replica nor a promotion (its
        primary answers term 1 and records nothing to forward)."""
        entry = self.shards[shard_id]
        targets = tuple((c["node"], c["id"]) for c in self.replicas(shard_id) if c["id"] in entry["in_sync"])
        if targets or entry["term"] > 1 or len(entry["copies"]) > 1:
            return Replication(entry["term"], targets)
        return None

    def nodes(self, shard_id: int) -> set[str]:
        return {c["node"] for c in self.shards[shard_id]["copies"]}

    def recovery(self, shard_id: int, allocation_id: str) -> dict[str, Any] | None:
        """The copy's last recovery (its claim), None if it never recovered."""
        return self.shards[shard_id].get("recovery", {}).get(allocation_id)

    def attempts(self, shard_id: int, allocation_id: str) -> int:
        """How many recoveries of the copy were claimed (the last claim's `attempt`)."""
        return (self.recovery(shard_id, allocation_id) or {}).get("attempt", 0)

    def recovering(self, shard_id: int, allocation_id: str, now: float) -> bool:
        """Whether the copy is recovering: a claim on it holds (at wall-clock time `now`)."""
        record = self.recovery(shard_id, allocation_id)
        return record is not None and record["stage"] in ACTIVE_STAGES and record["expires"] > now

    def claim_of(self, shard_id: int, allocation_id: str, owner: str, now: float) -> dict[str, Any] | None:
        """The copy's recovery record if it is `owner`'s claim and holds at `now`, else None."""
        record = self.recovery(shard_id, allocation_id)
        if record is None or record["owner"] != owner or not self.recovering(shard_id, allocation_id, now):
            return None
        return record


def initial_map(placement: list[dict[str, Any]]) -> ShardMap:
    """The first shard map of an index, from its placement (cluster.py `RayBackend.place`): each
    shard's primary and the replicas placed with it, all in sync (a new index's copies are all
    empty). An index placed before replicas were has its primaries alone."""
    shards = []
    for entry in placement:
        primary = {"id": entry.get("allocation_id", "p"), "node": entry["node"], "folder": entry["folder"]}
        copies = [primary, *({**r} for r in entry.get("replicas", ()))]
        in_sync = [c["id"] for c in copies]
        shards.append({"term": 1, "primary": primary["id"], "in_sync": in_sync, "copies": copies})
    return ShardMap(shards)


class ShardMaps:
    """The shard maps in the cluster's metadata (`store`: ray_backend/metadata.py's client)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def read(self, index_uuid: str) -> ShardMap | None:
        version, raw = self.store.get(SHARD_MAP + index_uuid)
        return None if raw is None else ShardMap.decode(raw, version)

    def claim(self, index_uuid: str, shard_map: ShardMap) -> ShardMap:
        """Publish a first shard map; the one published first wins (another coordinator's)."""
        done, version, raw = self.store.put(SHARD_MAP + index_uuid, shard_map.encode(), ABSENT)
        return ShardMap(shard_map.shards, version) if done else ShardMap.decode(raw, version)

    def change(
        self, index_uuid: str, current: ShardMap, edit: Callable[[ShardMap], bool]
    ) -> tuple[ShardMap, bool]:
        """Apply `edit` (which changes the map it is given in place, and answers whether it
        did: False when the change no longer applies) to the newest map, as a compare-and-set
        retried on the map another coordinator published meanwhile; (the newest map, whether
        `edit` changed it)."""
        for _ in range(MAX_ROUNDS):
            edited = current.copy()
            if not edit(edited):
                return current, False
            done, version, raw = self.store.put(SHARD_MAP + index_uuid, edited.encode(), current.version)
            if done:
                return ShardMap(edited.shards, version), True
            if raw is None:  # the index was deleted
                return current, False
            current = ShardMap.decode(raw, version)
        raise ElasticError(
            f"the shard map of [{index_uuid}] changed through other coordinators {MAX_ROUNDS} times",
            status=503,
            error_type="process_cluster_event_timeout_exception",
        )

    def remove(self, index_uuid: str) -> None:
        self.store.put(SHARD_MAP + index_uuid, None, None)


def drop_from_in_sync(
    shard_id: int, allocation_ids: tuple[str, ...], term: int
) -> Callable[[ShardMap], bool]:
    """The edit that takes copies out of a shard's in-sync set after they failed a write of
    primary term `term`; it does not apply (the write must fail) once the term moved on."""

    def edit(shard_map: ShardMap) -> bool:
        entry = shard_map.shards[shard_id]
        if entry["term"] != term:
            return False
        entry["in_sync"] = [i for i in entry["in_sync"] if i not in allocation_ids or i == entry["primary"]]
        return True

    return edit


def promote(shard_id: int, lost_primary: str) -> Callable[[ShardMap], bool]:
    """The edit that makes an in-sync replica primary (term + 1) in place of `lost_primary`, which
    leaves the in-sync set; it does not apply when the primary changed already, or no replica is
    in sync."""

    def edit(shard_map: ShardMap) -> bool:
        entry = shard_map.shards[shard_id]
        if entry["primary"] != lost_primary:
            return False
        candidates = [c["id"] for c in shard_map.replicas(shard_id) if c["id"] in entry["in_sync"]]
        if not candidates:
            return False
        entry["primary"] = candidates[0]
        entry["term"] += 1
        entry["in_sync"] = [i for i in entry["in_sync"] if i != lost_primary]
        return True

    return edit


def claim_recovery(shard_id: int, allocation_id: str, owner: str, now: float) -> Callable[[ShardMap], bool]:
    """The edit by which coordinator `owner` claims the recovery of a copy from the shard's
    current primary (see the module's docstring); it does not apply when the copy left the map or
    is in sync, or another claim on it holds."""

    def edit(shard_map: ShardMap) -> bool:
        entry = shard_map.shards[shard_id]
        copy = next((c for c in entry["copies"] if c["id"] == allocation_id), None)
        if copy is None or allocation_id in entry["in_sync"]:
            return False
        if shard_map.recovering(shard_id, allocation_id, now):
            return False
        attempt = shard_map.attempts(shard_id, allocation_id) + 1
        entry.setdefault("recovery", {})[allocation_id] = {
            "owner": owner,
            "expires": now + RECOVERY_LEASE_SECONDS,
            "term": entry["term"],
            "attempt": attempt,
            "shard": shard_id,
            "type": "peer",
            "stage": "index",
            "source_node": shard_map.primary(shard_id)["node"],
            "target_node": copy["node"],
            "start": now,
            "stop": None,
            "files": 0,
            "bytes": 0,
            "ops": 0,
        }
        return True

    return edit


def renew_recovery(
    shard_id: int, allocation_id: str, owner: str, attempt: int, now: float
) -> Callable[[ShardMap], bool]:
    """The edit by which `owner` renews its claim (its `attempt`) on a copy's recovery while it
    runs: the claim holds `RECOVERY_LEASE_SECONDS` from `now`. It does not apply (the claim is
    lost: the owner stops its copy) unless the claim is that one of `owner`'s and still holds at
    `now`: an expired claim may have been taken over, or be about to be."""

    def edit(shard_map: ShardMap) -> bool:
        record = shard_map.claim_of(shard_id, allocation_id, owner, now)
        if record is None or record["attempt"] != attempt:
            return False
        record["expires"] = now + RECOVERY_LEASE_SECONDS
        return True

    return edit


def recovery_stage(
    shard_id: int, allocation_id: str, owner: str, stage: str, now: float, **counts: int
) -> Callable[[ShardMap], bool]:
    """The edit by which `owner`'s recovery of a copy reaches `stage` (with `counts`: files,
    bytes, ops): "finalize" adds the copy to the in-sync set, "done" or "failed" ends the claim
    (its record stays, `_cat/recovery`). It does not apply unless the claim is still `owner`'s
    and holds; "finalize" not either once the primary term moved on (the copy recovered from a
    replaced primary) or the copy left the map."""

    def edit(shard_map: ShardMap) -> bool:
        entry = shard_map.shards[shard_id]
        record = shard_map.claim_of(shard_id, allocation_id, owner, now)
        if record is None:
            return False
        if stage == "finalize":
            if entry["term"] != record["term"] or allocation_id not in {c["id"] for c in entry["copies"]}:
                return False
            if allocation_id not in entry["in_sync"]:
                entry["in_sync"].append(allocation_id)
        record.update(counts, stage=stage)
        if stage not in ACTIVE_STAGES:
            record["stop"] = now
        return True

    return edit


def resize(
    shard_id: int, wanted: int, nodes: list[str], folder_of: Callable[[str], str]
) -> Callable[[ShardMap], bool]:
    """The edit that gives a shard `wanted` replicas (`index.number_of_replicas` changed): new
    copies on the alive machines `nodes` without one (not in sync until recovered), or copies
    removed (those not in sync first); it does not apply when the shard has that many."""

    def edit(shard_map: ShardMap) -> bool:
        entry = shard_map.shards[shard_id]
        replicas = shard_map.replicas(shard_id)
        if len(replicas) > wanted:
            ordered = sorted(replicas, key=lambda c: c["id"] in entry["in_sync"])
            gone = {c["id"] for c in ordered[: len(replicas) - wanted]}
            _forget(entry, gone)
            return True
        free = [n for n in nodes if n not in shard_map.nodes(shard_id)][: wanted - len(replicas)]
        for node in free:
            entry["copies"].append({"id": new_allocation_id(), "node": node, "folder": folder_of(node)})
        return bool(free)

    return edit


def remove_copies(shard_id: int, allocation_ids: set[str]) -> Callable[[ShardMap], bool]:
    """The edit that takes replicas out of a shard's map (their machine left for longer than
    `index.unassigned.node_left.delayed_timeout`: others are placed instead); never the primary."""

    def edit(shard_map: ShardMap) -> bool:
        entry = shard_map.shards[shard_id]
        gone = allocation_ids - {entry["primary"]}
        if not gone & {c["id"] for c in entry["copies"]}:
            return False
        _forget(entry, gone)
        return True

    return edit


def _forget(entry: dict[str, Any], gone: set[str]) -> None:
    """Copies leave a shard's entry: its copies, in-sync set and recoveries."""
    entry["copies"] = [c for c in entry["copies"] if c["id"] not in gone]
    entry["in_sync"] = [i for i in entry["in_sync"] if i not in gone]
    for allocation_id in gone & set(entry.get("recovery", ())):
        del entry["recovery"][allocation_id]
