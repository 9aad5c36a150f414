"""The coordinator's side of a Ray-backed index: its shards on machine actors behind the engine's seams.

- `RemoteIndex` (`Index.remote`): the index's shards and the machine actor of each; sends them
  the index's state (mapping, settings) when it changes, its shard writes, refreshes. Whatever
  it asks of several shards goes in one call per machine (`send_calls`, `MachineCall`).
- `RemoteShard` (what `Index.shards` holds): what the node reads of a shard (its number, its
  search counters) and the lease on its snapshot that a search takes (`acquire_searcher`).
- `RemoteSnapshot` (a `Target.searcher`): a lease on one snapshot of the shard. The first phase
  of a search that names no context pins the shard's current snapshot and the lease keeps the
  pin's id, so every later phase of that search (DFS, query, fetch) reads the same snapshot;
  a search's last fetch hands the pin to the shard, which frees it as it answers, and
  otherwise the last `release` frees it (a message not waited for).
- `RayShard`: `ShardSearch` over a shard on its machine, what the search code calls for such a
  target; a phase's messages to one machine's shards go in one call (`send_all`).

The calls travel on the machine actors' channels (channel.py), Ray telling where they are. A
broken channel, a Ray error (the machine actor died or is restarting), or its machine gone (no
alive node has its resource: a call, which would wait until the machine is back, gives up as soon
as it sees that) becomes Elasticsearch's error for an unavailable shard, for each shard of the call:
`unavailable_shards_exception` (503) for a write, and for a search phase
`no_shard_available_action_exception`, which the coordinator reports as the shard's failure.
Such a failure fails its request alone: the machine is checked at once (fault_detection.py), and
only a machine the failure detector finds failed has its primaries replaced (`machine_failed`).
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import ActorUnschedulableError, GetTimeoutError, RayActorError

from leafsearch.common import wire_pickle
from leafsearch.errors import ElasticError, IndexClosed, SearchContextMissing, ShardFailed, ShardUnavailable
from leafsearch.index.shard_listing import CopyListing, ShardListing, ShardMissing
from leafsearch.index.shard_write import DocRead, ShardWrite, ShardWriteOutcome
from leafsearch.ray_backend.actor import Refusal, ShardCall, ShardKey, SharedCalls
from leafsearch.ray_backend.channel import ChannelBroken, Channels, ChannelTimeout, Pending
from leafsearch.ray_backend.recovery_lease import LeaseRenewal
from leafsearch.ray_backend.replication import (
    RECOVERY_LEASE_SECONDS,
    RECOVERY_RENEW_SECONDS,
    Replicated,
    ShardMap,
    ShardMaps,
    claim_recovery,
    drop_from_in_sync,
    initial_map,
    promote,
    recovery_stage,
    remove_copies,
    renew_recovery,
    resize,
)
from leafsearch.search.dfs import DfsStats
from leafsearch.search.shard_api import (
    ShardContextId,
    ShardDfs,
    ShardFetch,
    ShardFetchResult,
    ShardQuery,
    ShardSuggest,
    ShardTopDocs,
)
from leafsearch.search.stats import SearchStats
from leafsearch.search.workers.mirror import IndexState

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.ray_backend.cluster import Machine, RayBackend
    from leafsearch.search.targets import Target

_log = logging.getLogger("leafsearch")


class MachineUnavailable(ShardUnavailable):
    """A shard unavailable because its machine did not answer the call (rather than refusing it)."""


class MachineGone(ConnectionError):
    """No alive node has the machine's resource: its node was lost and has not come back."""

    def __init__(self, machine: str) -> None:
        super().__init__(f"machine [{machine}] is gone")


#: What a call to a machine actor raises when the actor cannot answer: it died or is restarting
#: (`RayActorError`, or its channel broke: `ChannelBroken`), it cannot be scheduled
#: (`ActorUnschedulableError`, not a `RayActorError`), its machine is gone (`MachineGone`), or it
#: did not answer in time.
UNAVAILABLE = (
    RayActorError,
    ActorUnschedulableError,
    GetTimeoutError,
    ChannelBroken,
    ChannelTimeout,
    MachineGone,
)

#: How long a coordinator waits for a shard actor's answer (Elasticsearch's default timeout of a
#: write waiting for its primary, and of a search's shard request without `timeout`).
CALL_TIMEOUT_SECONDS = 60.0
#: How often a call waiting for its machine's answer checks that the machine is still there: first
#: after `FIRST_PRESENCE_SECONDS`, then twice as long each time, up to `PRESENCE_SECONDS`.
FIRST_PRESENCE_SECONDS = 0.05
PRESENCE_SECONDS = 1.0
#: How long a health check waits for the shard actors' answers (and for the failure detector's
#: check of a machine that did not answer): a copy on a machine that is not failed counts as
#: started though it did not answer in time (busy), as Elasticsearch's health reads the cluster
#: state, not the shards.
HEALTH_TIMEOUT_SECONDS = 2.0


def unavailable_for_write(index: Index, shard_id: int, count: int, cause: Exception) -> ElasticError:
    """Elasticsearch's UnavailableShardsException for a bulk shard request whose primary is down."""
    return ElasticError(
        f"[{index.name}][{shard_id}] primary shard is not active: {type(cause).__name__}, request: "
        f"[BulkShardRequest [[{index.name}][{shard_id}]] containing [{count}] requests]",
        status=503,
        error_type="unavailable_shards_exception",
    )


#: How long a coordinator waits for a primary's copy to a recovering replica (`recover_to`: every
#: file of the shard): Elasticsearch's `indices.recovery.internal_action_long_timeout`. Its claim
#: is renewed meanwhile (recovery_lease.py), each piece it sends bounded on the primary.
RECOVERY_CALL_SECONDS = 30 * 60.0
#: Seconds between a read's tries while its machine actor restarts (`MachineCall`).
RETRY_PAUSE_SECONDS = 0.05


def unwrap(value: Any) -> Any:
    """A shard's answer; a `Refusal` raised as its error."""
    if isinstance(value, Refusal):
        raise value.error
    return value


class MachineCall:
    """One call to a machine actor carrying several of its shards' calls (`MachineActor.batch`)
    on its channel (channel.py), and its answers, read once by whichever shard's wait comes
    first. `again`: a read, sent again when the channel broke under it (the actor died or Ray
    restarted it: the next try asks Ray where it is now, which waits while it restarts and its
    machine is there), until its deadline; a read changes nothing, and one caught by a restart
    runs once the actor is back, with its shards reopened and their contexts kept on disk, so a
    walk goes on over a machine restart. A write is never resent: one whose answer was lost is
    not acknowledged. `channels` None: the call goes as a Ray task (`MachineActor.batch`), for
    the questions whose answer is Ray's view of the actor (is it alive: health, listings), which
    a process Ray has just ended for good may still answer on its channel for a moment.
    `machine`: a shard machine (cluster.py `Machine`), or the metadata actor (metadata.py, which
    serves its channel so too, with a call of its own as `calls`)."""

    def __init__(
        self,
        channels: Channels | None,
        machine: Any,
        calls: Any,
        again: bool,
        deadline: float | None,
    ) -> None:
        self._channels = channels
        self._machine = machine
        self._again = again
        self._message = wire_pickle.dumps(calls)
        self._deadline = time.monotonic() + CALL_TIMEOUT_SECONDS if deadline is None else deadline
        self._lock = threading.Lock()
        self._pending: Pending | _RayTask | None = None
        self._answers: list[Any] | None = None
        self._failure: Exception | None = None
        self._retried = False
        self._send()

    def _send(self) -> None:
        try:
            if self._channels is None:
                self._pending = _RayTask(self._machine, self._message)
            else:
                self._pending = self._channels.send(self._machine, self._message, self._deadline)
        except UNAVAILABLE as exc:
            self._failure = exc

    def answers(self) -> list[Any]:
        """Per call its answer; raises the error that kept the machine from answering (past
        the call's deadline: a timeout)."""
        with self._lock:
            if self._answers is None:
                self._answers = pickle.loads(self._received())
            return self._answers

    def answer_bytes(self) -> bytes:
        """The answer as it came, not unpickled (a page relayed: `ShardActor.relay`), read once;
        raises as `answers`."""
        with self._lock:
            return self._received()

    def _received(self) -> bytes:
        while True:
            if self._pending is not None:
                pending, self._pending = self._pending, None
                try:
                    return pending.answer(self._deadline)
                except UNAVAILABLE as exc:
                    self._failure = exc
            assert self._failure is not None
            if not (self._again and isinstance(self._failure, ChannelBroken)):
                raise self._failure
            if time.monotonic() + RETRY_PAUSE_SECONDS >= self._deadline:
                raise self._failure
            if self._retried:
                time.sleep(RETRY_PAUSE_SECONDS)
            self._retried = True
            self._failure = None
            self._send()


class _RayTask:
    """A machine call sent as a Ray task (`MachineCall`)."""

    def __init__(self, machine: Machine, message: bytes) -> None:
        self.machine = machine
        self.ref = machine.actor.batch.options(max_task_retries=0).remote(message)

    def answer(self, deadline: float) -> bytes:
        return until_gone(self.machine, self.ref, deadline)


def until_gone(machine: Machine, ref: Any, deadline: float) -> Any:
    """What the Ray call `ref` to `machine`'s actor answers by `deadline`, checking that the
    machine is there (`Machine.present`: its raylet's port refuses once its processes died) after
    `FIRST_PRESENCE_SECONDS`, then less often: Ray holds a call to an actor not yet scheduled
    until the machine returns (its node restarted), and the shard must fail now instead, while an
    actor Ray restarts on a machine that is there answers within a second. The call is
    cancelled: unsent, it would otherwise run, for no one, once the machine returns."""
    wait = FIRST_PRESENCE_SECONDS
    while True:
        left = max(0.0, deadline - time.monotonic())
        try:
            return ray.get(ref, timeout=min(left, wait))
        except GetTimeoutError:
            if time.monotonic() >= deadline:
                raise
            if not machine.present():
                with contextlib.suppress(Exception):  # (already sent, or answered since)
                    ray.cancel(ref)
                raise MachineGone(machine.name) from None
            wait = min(2 * wait, PRESENCE_SECONDS)


def send_calls(
    channels: Channels | None,
    calls: list[tuple[Machine, ShardCall, str]],
    *,
    again: bool = False,
    deadline: float | None = None,
    shared: bool = False,
) -> list[Callable[[], Any]]:
    """Send shards' calls, one call per machine actor carrying all of its shards' (each given as
    (machine, shard call, shard name)); per call the function that waits for its answer:
    the shard's answer, its `Refusal` raised, the machine's failure as the shard's
    `ShardUnavailable`. `shared`: the calls share most of their arguments (a search phase's):
    pickled once for all the machines (`SharedCalls`; a write's documents are each one
    shard's, and go to their machine alone)."""
    by_machine: dict[Machine, list[int]] = {}
    for i, (machine, _, _) in enumerate(calls):
        by_machine.setdefault(machine, []).append(i)
    every = None
    if shared and len(by_machine) > 1:
        every = wire_pickle.dumps([call for _, call, _ in calls])
    waits: list[Callable[[], Any]] = [None] * len(calls)  # type: ignore[list-item]
    for machine, positions in by_machine.items():
        message = [calls[i][1] for i in positions] if every is None else SharedCalls(tuple(positions), every)
        call = MachineCall(channels, machine, message, again, deadline)
        for j, i in enumerate(positions):
            waits[i] = _waiter(call, j, calls[i][2])
    return waits


def _waiter(call: MachineCall, j: int, shard: str) -> Callable[[], Any]:
    def wait() -> Any:
        try:
            answers = call.answers()
        except UNAVAILABLE as exc:
            raise MachineUnavailable(f"{shard} is unavailable: {type(exc).__name__}") from None
        return unwrap(answers[j])

    return wait


class RemoteIndex:
    """An index's shards on their machine actors (see the module's docstring)."""

    def __init__(self, backend: RayBackend, index: Index, placement: list[dict[str, Any]]) -> None:
        self.backend = backend
        self.index = index
        #: Where each shard's copies are (each copy's `node`: its machine, cluster.py).
        self.placement = backend.named(placement)
        self._lock = threading.Lock()
        self._map_lock = threading.Lock()  # (this coordinator's changes of the shard map, one at a time)
        self._handles: dict[str, Machine] = {}
        self.maps = ShardMaps(backend.metadata.store) if backend.metadata is not None else None
        #: Which machines failed (told `machine_failed` once the map is read, before any machine
        #: is handed out: told earlier, this index would fail, and keep the next from being told).
        self.detector = backend.detector
        #: The shard map (ray_backend/replication.py): every copy of each shard, which is primary.
        self.shard_map = self._load_map()
        #: Per shard, the machine of its primary.
        self.machines: list[Machine] = []
        self.detector.listen(self)
        self._route()
        self.shards = [RemoteShard(self, i) for i in range(len(placement))]
        #: Per copy (shard, allocation id), the version of the index state it acknowledged, and
        #: of which of its recoveries (a copy recovering again starts from the state it is sent).
        self._sent: dict[tuple[int, str], tuple[tuple[int, int], int]] = {}
        #: The copies this coordinator's threads are recovering (or claiming) now, by (shard,
        #: allocation id); every coordinator's are claimed in the shard map (`recovering`).
        self._recovering: set[tuple[int, str]] = set()
        self._turn = 0  # (`read_copy`)
        #: Since when (monotonic) each replica's machine has been seen gone.
        self._left: dict[tuple[int, str], float] = {}
        self.push_state(range(len(placement)))

    def _load_map(self) -> ShardMap:
        """The index's shard map from the cluster's metadata; a first one (its placement's
        primaries and replicas) published when there is none."""
        if self.maps is not None:
            found = self.maps.read(self.index.uuid)
            if found is not None:
                return found
        first = initial_map(self.placement)
        return first if self.maps is None else self.maps.claim(self.index.uuid, first)

    def machine(self, node: str) -> Machine:
        """The machine of a copy's `node` (its machine's name, cluster.py)."""
        handle = self._handles.get(node)
        if handle is None:
            handle = self._handles[node] = self.backend.machine(node)
        return handle

    def _route(self) -> None:
        self.machines = [self.machine(self.shard_map.primary(i)["node"]) for i in range(len(self.placement))]

    def adopt_map(self, version: int, raw: bytes | None) -> None:
        """The shard map as another coordinator changed it (node/cluster_sync.py)."""
        if raw is None or version <= self.shard_map.version:
            return
        with self._map_lock:
            if version > self.shard_map.version:
                self.shard_map = ShardMap.decode(raw, version)
                self._route()

    def change_map(self, edit: Any) -> bool:
        """Change the shard map (a compare-and-set, replication.py `ShardMaps.change`); whether
        `edit` applied."""
        with self._map_lock:
            if self.maps is None:
                edited = self.shard_map.copy()
                done = edit(edited)
                if done:
                    self.shard_map = edited
            else:
                self.shard_map, done = self.maps.change(self.index.uuid, self.shard_map, edit)
            self._route()
            return done

    def recovering(self, shard_id: int, allocation_id: str) -> bool:
        """Whether a copy is recovering: by a thread of this coordinator, or any coordinator's
        claim holds (replication.py `claim_recovery`)."""
        return (shard_id, allocation_id) in self._recovering or self.shard_map.recovering(
            shard_id, allocation_id, time.time()
        )

    @property
    def recoveries(self) -> dict[tuple[int, str], dict[str, Any]]:
        """The last recovery of each copy that recovered, whichever coordinator ran it
        (`_cat/recovery`), by (shard, allocation id)."""
        return {
            (shard_id, allocation_id): record
            for shard_id, entry in enumerate(self.shard_map.shards)
            for allocation_id, record in entry.get("recovery", {}).items()
        }

    def read_copy(self, shard_id: int) -> tuple[str, Any]:
        """The copy a search reads (allocation id, machine actor): the started copies in turn, one
        turn per search (it moves with each search's shard 0, so the shards of one search, dealt
        round-robin, read from as few machines as their primaries)."""
        if shard_id == 0:
            self._turn += 1
        started = self.started(shard_id)
        copy = started[self._turn % len(started)]
        return copy["id"], self.machine(copy["node"])

    def started(self, shard_id: int) -> list[dict[str, str]]:
        """The copies a read may go to: the primary, then the in-sync replicas not recovering on
        machines not failed."""
        shard_map = self.shard_map
        entry = shard_map.shards[shard_id]
        return [shard_map.primary(shard_id)] + [
            c
            for c in shard_map.replicas(shard_id)
            if c["id"] in entry["in_sync"]
            and not self.recovering(shard_id, c["id"])
            and not self.detector.failed(c["node"])
        ]

    def other_copy(self, shard_id: int, allocation_id: str) -> dict[str, str] | None:
        """A started copy of the shard but `allocation_id` (a read its machine could not answer
        goes there: every started copy has every acknowledged write), None if there is none."""
        return next((c for c in self.started(shard_id) if c["id"] != allocation_id), None)

    def machine_failed(self, machine: str) -> None:
        """The failure detector found `machine` failed (fault_detection.py): each primary there is
        replaced by an in-sync replica, and the replicas there leave the in-sync set (writes no
        longer wait for them; back, they catch up from their primary, `reconcile`), as
        Elasticsearch fails every copy of a node that left."""
        if self.index.closed:
            return
        shard_map = self.shard_map
        for shard_id in range(len(shard_map.shards)):
            primary = shard_map.primary(shard_id)
            if primary["node"] == machine:
                self.fail_primary(shard_id, primary["id"])
                continue
            there = [c["id"] for c in shard_map.replicas(shard_id) if c["node"] == machine]
            if any(shard_map.in_sync(shard_id, i) for i in there):
                self.drop_copies(shard_id, tuple(there), shard_map.term(shard_id))

    def fail_primary(self, shard_id: int, primary: str) -> bool:
        """The primary `primary` (an allocation id) is on a failed machine: an in-sync replica is
        promoted (term + 1), unless another coordinator changed the primary already; whether
        the shard has another primary now."""
        if self.shard_map.shards[shard_id]["primary"] != primary:
            return True
        done = self.change_map(promote(shard_id, primary))
        if done:
            _log.warning("%s: primary [%s] lost, replica promoted", self.describe(shard_id), primary)
        return done or self.shard_map.shards[shard_id]["primary"] != primary

    def drop_copies(self, shard_id: int, allocation_ids: tuple[str, ...], term: int) -> bool:
        """Take copies that failed a write of primary term `term` out of the shard's in-sync set,
        before the write is acknowledged; False (the write must fail) when the term moved on."""
        current = self.shard_map
        if current.term(shard_id) == term and not any(current.in_sync(shard_id, i) for i in allocation_ids):
            return True
        return self.change_map(drop_from_in_sync(shard_id, allocation_ids, term))

    def key(self, shard_id: int) -> ShardKey:
        return (self.index.uuid, shard_id)

    def calls(
        self,
        method: str,
        args: Iterable[tuple[int, tuple]],
        *,
        again: bool = False,
        deadline: float | None = None,
        through_ray: bool = False,
    ) -> list[Callable[[], Any]]:
        """`method` on each shard of `args` ((shard, arguments) pairs), one call per machine (on
        its channel; `through_ray`: as a Ray task, `MachineCall`)."""
        return send_calls(
            None if through_ray else self.backend.channels,
            [(self.machines[i], (self.key(i), method, a), self.describe(i)) for i, a in args],
            again=again,
            deadline=deadline,
        )

    def call(self, shard_id: int, method: str, *args: Any) -> Any:
        """`method` on one shard, waited for."""
        (wait,) = self.calls(method, [(shard_id, args)])
        return wait()

    def each(self, method: str, *args: Any) -> list[Callable[[], Any]]:
        """`method` with the same arguments on every shard, one call per machine."""
        return self.calls(method, [(i, args) for i in range(len(self.shards))])

    def state(self) -> IndexState:
        index = self.index
        settings = dict(index.settings)
        with index.lock:  # the mapping's version and body, read together
            version = index.mapping.version
            body = index.mapping.to_body()
        return IndexState(index.uuid, index.name, settings, body, index.num_shards, version)

    def _version(self) -> tuple[int, int]:
        return self.index.mapping.version, hash(tuple(sorted(self.index.settings.items())))

    def push_state(self, shard_ids: Iterable[int]) -> dict[int, ElasticError]:
        """Send the index's state to every copy of those shards that has not acknowledged its
        current version (each keeps it before answering; a machine opens a copy it does not hold
        from its folder); per shard whose primary could not take it, why. A copy is sent a write
        only once it holds the state the write was parsed with: replaying its translog, it parses
        with that state; so an in-sync replica that cannot take it leaves the in-sync set."""
        with self._lock:
            version = self._version()
            shard_map = self.shard_map
            stale = [
                (i, c)
                for i in shard_ids
                for c in shard_map.shards[i]["copies"]
                if self._sent.get((i, c["id"])) != (version, shard_map.attempts(i, c["id"]))
                and (c["id"] in shard_map.shards[i]["in_sync"] or self.recovering(i, c["id"]))
            ]
            if not stale:
                return {}
            state = self.state()
            order = self.index.shared_version
            calls = [
                (
                    self.machine(c["node"]),
                    (self.key(i), "put_index", (c["folder"], state, order)),
                    self.describe(i),
                )
                for i, c in stale
            ]
            failed: dict[int, ElasticError] = {}
            lost: dict[int, list[str]] = {}
            for (shard_id, copy), wait in zip(stale, send_calls(self.backend.channels, calls), strict=True):
                try:
                    wait()
                    self._sent[(shard_id, copy["id"])] = (version, shard_map.attempts(shard_id, copy["id"]))
                except ElasticError as exc:
                    if copy["id"] == shard_map.shards[shard_id]["primary"]:
                        failed[shard_id] = exc
                    else:
                        lost.setdefault(shard_id, []).append(copy["id"])
        for shard_id, ids in lost.items():
            self.drop_copies(shard_id, tuple(ids), shard_map.term(shard_id))
        return failed

    def describe(self, shard_id: int) -> str:
        return f"[{self.index.name}][{shard_id}]"

    def retain_contexts(self, names: list[set[str]]) -> None:
        """A restarted coordinator holds, per shard, the contexts named in `names`: each shard
        frees the others opened before now (its pins of contexts freed while it could not
        answer, and the in-memory contexts of the searches the coordinator was running; a call
        that arrives late leaves the new ones alone). One call per machine; a shard that cannot
        answer keeps its pins until the next start."""
        since = time.time()
        kept = [(i, (sorted(shard_names), since)) for i, shard_names in enumerate(names)]
        for wait in self.calls("retain_contexts", kept):
            with contextlib.suppress(ShardUnavailable):
                wait()

    def write(self, writes: list[ShardWrite]) -> list[ShardWriteOutcome | ElasticError]:
        """Every shard's write at once; per write its outcomes, or the error that failed it."""
        return self.send(writes)()

    def send(self, writes: list[ShardWrite]) -> Callable[[], list[ShardWriteOutcome | ElasticError]]:
        """Send every shard's write at once, one call per machine; the function that waits for
        their answers: per write its outcomes, or the error that failed it (an unavailable
        shard: Elasticsearch's `unavailable_shards_exception`, nothing applied, or, when the
        actor died while applying it, maybe applied: as with a primary lost before it answered,
        the client cannot know, and the write's translog decides on recovery)."""
        sent_to = [self.machines[w.shard_id].name for w in writes]
        failed = self.push_state(w.shard_id for w in writes)
        ready = [i for i, w in enumerate(writes) if w.shard_id not in failed]
        shard_map = self.shard_map
        replications = {i: shard_map.replication(writes[i].shard_id) for i in ready}
        sent = self.calls(
            "write",
            [
                (
                    writes[i].shard_id,
                    (writes[i],) if replications[i] is None else (writes[i], replications[i]),
                )
                for i in ready
            ],
        )
        waits = dict(zip(ready, sent, strict=True))

        def results() -> list[ShardWriteOutcome | ElasticError]:
            out: list[ShardWriteOutcome | ElasticError] = []
            for i, write in enumerate(writes):
                try:
                    if i not in waits:
                        raise failed[write.shard_id]
                    answer = waits[i]()
                    if isinstance(answer, Replicated):
                        replication = replications[i]
                        assert replication is not None
                        if answer.failed and not self.drop_copies(
                            write.shard_id, answer.failed, replication.term
                        ):
                            raise ShardUnavailable(f"{self.describe(write.shard_id)} has a new primary")
                        answer = answer.outcomes
                    out.append(answer)
                except ShardUnavailable as exc:
                    if self.index.closed:  # the shard ended with the index's close
                        out.append(IndexClosed(self.index.name, self.index.uuid))
                        continue
                    # Its outcome unknown, the write fails (never applied twice); its machine
                    # is checked: a failed one's primaries are replaced.
                    self.detector.suspect(sent_to[i])
                    out.append(unavailable_for_write(self.index, write.shard_id, len(write.ops), exc))
                except ElasticError as exc:
                    out.append(exc)
            return out

        return results

    def get(self, shard_id: int, doc_id: str, realtime: bool) -> DocRead | None:
        """A document from the shard's primary; when its machine cannot answer, from another
        started copy (its machine checked at once: a failed one's primaries are replaced)."""
        try:
            return self.call(shard_id, "get", doc_id, realtime)
        except MachineUnavailable:
            other = self.other_copy(shard_id, self.shard_map.shards[shard_id]["primary"])
            if other is None:
                raise
            self.detector.suspect(self.machines[shard_id].name)
            return self.call_copy(shard_id, other, "get", doc_id, realtime)

    def listings(self) -> list[ShardListing | ShardMissing]:
        """Every shard's listing (index/shard_listing.py), one call per machine; a shard that
        cannot answer is listed as missing, with whether its machine is gone."""
        out: list[ShardListing | ShardMissing] = []
        for shard_id, wait in enumerate(
            self.calls("listing", [(i, ()) for i in range(len(self.shards))], through_ray=True)
        ):
            try:
                out.append(wait())
            except ShardUnavailable as exc:
                out.append(ShardMissing(shard_id, exc, self.detector.failed(self.machines[shard_id].name)))
        return out

    def copies(self, listed: bool) -> list[CopyListing]:
        """Every copy of every shard (`listed`: with its listing), asked all at once, one call per
        machine, for `HEALTH_TIMEOUT_SECONDS` in all. A copy on a machine the failure detector
        found failed is UNASSIGNED (NODE_LEFT); one whose machine did not answer is checked
        (`verdict`, in that time) and, its machine not failed (busy), counted as the shard map
        says, without a listing: STARTED (the primary, an in-sync replica) or INITIALIZING (a
        replica not in sync). One its machine refused (not open there) is UNASSIGNED
        (ALLOCATION_FAILED). Replicas the setting asks for that no machine could take are
        UNASSIGNED too."""
        deadline = time.monotonic() + HEALTH_TIMEOUT_SECONDS
        self.reconcile()
        shard_map = self.shard_map
        pairs = [(i, c) for i in range(len(self.shards)) for c in shard_map.shards[i]["copies"]]
        asked = [(i, c) for i, c in pairs if not self.detector.failed(c["node"])]
        method = "listing" if listed else "where"
        calls = [(self.machine(c["node"]), (self.key(i), method, ()), self.describe(i)) for i, c in asked]
        # (as Ray tasks: Ray's view of the actors, `MachineCall`)
        sent = send_calls(None, calls, deadline=deadline)
        waits = {(i, c["id"]): wait for (i, c), wait in zip(asked, sent, strict=True)}
        wanted = int(self.index.setting("index.number_of_replicas"))
        failed_meanwhile = False
        out: list[CopyListing] = []
        for shard_id, copy in pairs:
            entry = shard_map.shards[shard_id]
            primary = copy["id"] == entry["primary"]
            in_sync = copy["id"] in entry["in_sync"] and not self.recovering(shard_id, copy["id"])
            state = "STARTED" if primary or in_sync else "INITIALIZING"
            wait = waits.get((shard_id, copy["id"]))
            try:
                if wait is None:
                    raise MachineUnavailable(f"{self.describe(shard_id)}: its machine failed")
                answer = wait()
            except MachineUnavailable:
                if wait is not None and not self.detector.verdict(copy["node"], deadline):
                    out.append(CopyListing(shard_id, primary, state))
                    continue
                failed_meanwhile |= wait is not None
                out.append(CopyListing(shard_id, primary, "UNASSIGNED", reason="NODE_LEFT"))
                continue
            except ElasticError:
                out.append(CopyListing(shard_id, primary, "UNASSIGNED", reason="ALLOCATION_FAILED"))
                continue
            listing = answer if listed else None
            out.append(CopyListing(shard_id, primary, state, listing, listing.node if listing else None))
        if failed_meanwhile and self.shard_map is not shard_map:
            return self.copies(listed)  # (its primaries replaced: their states as the next request sees them)
        for shard_id in range(len(self.shards)):
            missing = wanted - len(shard_map.replicas(shard_id))
            out.extend(
                CopyListing(shard_id, False, "UNASSIGNED", reason="INDEX_CREATED") for _ in range(missing)
            )
        out.sort(key=lambda c: (c.shard_id, not c.primary))
        return out

    def reconcile(self) -> None:
        """Bring the copies to what the index asks: replicas added or removed as
        `index.number_of_replicas` says (on the alive machines without a copy), and each replica
        not in sync (new, or back after a failure) recovering from its primary, on a thread of
        its own (`recover`). Run in the background by every coordinator (node.py `allocate`) and
        by the health and `_cat/shards`, as Elasticsearch allocates and recovers; nothing to do
        (every replica there and in sync) costs no call."""
        wanted = int(self.index.setting("index.number_of_replicas"))
        shard_map = self.shard_map
        if all(
            len(shard_map.replicas(i)) == wanted and len(entry["in_sync"]) == len(entry["copies"])
            for i, entry in enumerate(shard_map.shards)
        ):
            return
        nodes = [m for m in sorted(self.backend.machines()) if not self.detector.failed(m)]
        self._replace_left(nodes)
        for shard_id in range(len(self.shards)):
            if len(self.shard_map.replicas(shard_id)) == wanted:
                continue
            before = self.shard_map.shards[shard_id]["copies"]
            folder_of = partial(self._folder, shard_id)
            self.change_map(resize(shard_id, wanted, nodes, folder_of))
            kept = {c["id"] for c in self.shard_map.shards[shard_id]["copies"]}
            for copy in before:
                if copy["id"] not in kept:
                    self._remove_copy(shard_id, copy)
        shard_map = self.shard_map
        for shard_id, entry in enumerate(shard_map.shards):
            for copy in shard_map.replicas(shard_id):
                if copy["id"] in entry["in_sync"] or copy["node"] not in nodes:
                    continue
                with self._lock:  # (two threads of this coordinator at once start one recovery)
                    if self.recovering(shard_id, copy["id"]):
                        continue
                    self._recovering.add((shard_id, copy["id"]))
                threading.Thread(
                    target=self.recover, args=(shard_id, copy), name="leafsearch-recovery", daemon=True
                ).start()

    def _replace_left(self, nodes: list[str]) -> None:
        """Replicas whose machine left the cluster `index.unassigned.node_left.delayed_timeout`
        ago leave the map (the resize then places others): as Elasticsearch, a machine that
        comes back sooner keeps its copies, which catch up."""
        delay = float(self.index.setting("index.unassigned.node_left.delayed_timeout"))
        now = time.monotonic()
        seen = set()
        for shard_id in range(len(self.shards)):
            gone = set()
            for copy in self.shard_map.replicas(shard_id):
                if copy["node"] in nodes:
                    continue
                key = (shard_id, copy["id"])
                seen.add(key)
                if now - self._left.setdefault(key, now) >= delay:
                    gone.add(copy["id"])
            if gone:
                self.change_map(remove_copies(shard_id, gone))
        self._left = {key: since for key, since in self._left.items() if key in seen}

    def _folder(self, shard_id: int, node: str) -> str:
        return self.backend.folder(node, self.index.uuid, shard_id)

    def _remove_copy(self, shard_id: int, copy: dict[str, str]) -> None:
        """A copy no longer in the map (fewer replicas): its machine deletes it (a message not
        waited for; a machine that is down keeps the folder)."""
        with contextlib.suppress(Exception):
            self.machine(copy["node"]).actor.call.remote(self.key(shard_id), "destroy")

    def recover(self, shard_id: int, copy: dict[str, str]) -> None:
        """Recover a replica from its shard's primary once this coordinator's claim on it won
        (replication.py `claim_recovery`: another coordinator's, or the copy in sync meanwhile,
        leaves it alone): `ShardActor.recover_to` (files, then the writes sent meanwhile), then
        the copy joins the in-sync set, unless the claim or the primary changed, or it missed a
        write since; its stages and counts in the claim (`_cat/recovery`). The claim is renewed
        meanwhile (recovery_lease.py): lost, the primary stops its copy and the recovery fails,
        for the claim's new owner to run. A copy that joined stays tracked by the primary, which
        sends it every write from then on, named or not: a write a coordinator sent from a shard
        map older than the join does not name it."""
        key = (shard_id, copy["id"])
        owner = self.backend.owner
        try:
            if not self.change_map(claim_recovery(shard_id, copy["id"], owner, time.time())):
                return
            shard_map = self.shard_map
            primary, term = shard_map.primary(shard_id), shard_map.term(shard_id)
            attempt = shard_map.attempts(shard_id, copy["id"])
            stage = partial(recovery_stage, shard_id, copy["id"], owner)
            renewal = LeaseRenewal(
                partial(self._renew_claim, shard_id, copy["id"], attempt),
                partial(self._stop_copy, shard_id, primary, copy["id"], attempt),
                RECOVERY_RENEW_SECONDS,
                RECOVERY_LEASE_SECONDS,
            )
            state = self.state()
            args = (copy["node"], copy["id"], copy["folder"], state, self.index.shared_version, attempt)
            with renewal:
                try:
                    deadline = time.monotonic() + RECOVERY_CALL_SECONDS
                    done = self.call_copy(shard_id, primary, "recover_to", *args, deadline=deadline)
                    counts = {"files": done["files"], "bytes": done["bytes"], "ops": done["ops"]}
                    added = self.change_map(stage("finalize", time.time(), **counts))
                    if added and not self.call_copy(shard_id, primary, "tracked", copy["id"]):
                        self.drop_copies(shard_id, (copy["id"],), term)  # it missed a write meanwhile
                        added = False
                    if not added:  # (joined, it stays tracked: `ShardActor._targets`)
                        with contextlib.suppress(ElasticError):
                            self.call_copy(shard_id, primary, "untrack", copy["id"])
                except ElasticError as exc:
                    _log.warning("%s: recovering [%s] failed: %s", self.describe(shard_id), copy["id"], exc)
                    added = False
            self.change_map(stage("done" if added else "failed", time.time()))
        except ElasticError as exc:  # (the shard map's compare-and-sets: the next reconcile tries again)
            _log.warning("%s: the recovery of [%s] stopped: %s", self.describe(shard_id), copy["id"], exc)
        finally:
            self._recovering.discard(key)

    def _renew_claim(self, shard_id: int, allocation_id: str, attempt: int) -> bool:
        """Renew this coordinator's claim `attempt` on a copy's recovery (`recover`); whether it
        still holds."""
        owner = self.backend.owner
        return self.change_map(renew_recovery(shard_id, allocation_id, owner, attempt, time.time()))

    def _stop_copy(self, shard_id: int, primary: dict[str, str], allocation_id: str, attempt: int) -> None:
        """This coordinator lost its claim `attempt` on a copy's recovery: the primary stops
        copying (`ShardActor.cancel_recovery`), and the recovery fails (`recover`). A primary
        that cannot answer is not copying either, or stops when the next claim's copy begins."""
        _log.warning("%s: the claim on recovering [%s] was lost", self.describe(shard_id), allocation_id)
        with contextlib.suppress(ElasticError):
            self.call_copy(shard_id, primary, "cancel_recovery", allocation_id, attempt)

    def call_copy(
        self, shard_id: int, copy: dict[str, str], method: str, *args: Any, deadline: float | None = None
    ) -> Any:
        """`method` on one copy of a shard, waited for (until `deadline`, monotonic; None: the
        call's timeout)."""
        (wait,) = send_calls(
            self.backend.channels,
            [(self.machine(copy["node"]), (self.key(shard_id), method, args), self.describe(shard_id))],
            deadline=deadline,
        )
        return wait()

    def refresh(self, shard_ids: Iterable[int] | None = None) -> None:
        """Every copy of those shards (None: all) refreshes (a promoted replica serves what was
        refreshed); a primary's failure is raised. A replica on a machine the failure detector
        failed is not asked (a `?refresh=true` write would otherwise wait out the call's timeout
        on a silent machine). An in-sync replica that did not refresh, asked or not, leaves the
        in-sync set before this returns, as Elasticsearch fails a replica that fails a write's
        refresh: searches read the started copies in turn (`read_copy`), and one read after a
        refresh must find every write before it (the copy catches up by its recovery)."""
        every = range(len(self.shards)) if shard_ids is None else list(shard_ids)
        shard_map = self.shard_map
        skipped = {
            (i, c["id"]) for i in every for c in shard_map.replicas(i) if self.detector.failed(c["node"])
        }
        stale: dict[int, list[str]] = {}
        for shard_id, allocation_id in skipped:
            stale.setdefault(shard_id, []).append(allocation_id)
        failure: ElasticError | None = None
        for shard_id, copy, wait in self.each_copy("refresh", every, skipped):
            try:
                wait()
            except ElasticError as exc:
                if copy["id"] == shard_map.shards[shard_id]["primary"]:
                    failure = failure or exc
                else:
                    stale.setdefault(shard_id, []).append(copy["id"])
        for shard_id, allocation_ids in stale.items():
            self.drop_copies(shard_id, tuple(allocation_ids), shard_map.term(shard_id))
        if failure is not None:
            raise failure

    def close(self) -> None:
        """`_close`: each shard flushes (every acknowledged write into a committed segment) and
        its machine lets it go (a restarted machine does not reopen it): a closed index holds
        nothing. A shard that cannot answer (its machine is down) still has every acknowledged
        write in its translog, which the open replays."""
        self._end("close_shard")

    def destroy(self) -> None:
        """Delete every copy's folder; its machine lets it go (a dead machine's folder is left
        behind); the shard map goes."""
        self._end("destroy")
        if self.maps is not None:
            self.maps.remove(self.index.uuid)

    def _end(self, method: str) -> None:
        for _, _, wait in self.each_copy(method):
            with contextlib.suppress(ElasticError):
                wait()

    def each_copy(
        self,
        method: str,
        shard_ids: Iterable[int] | None = None,
        skipped: frozenset[tuple[int, str]] | set[tuple[int, str]] = frozenset(),
    ) -> list[tuple[int, dict[str, str], Callable[[], Any]]]:
        """`method` on every copy of those shards (None: all) but the `skipped` ones ((shard,
        allocation id) pairs), one call per machine: per copy (shard, copy, the function waiting
        for its answer)."""
        every = range(len(self.shards)) if shard_ids is None else shard_ids
        shards = self.shard_map.shards
        copies = [(i, c) for i in every for c in shards[i]["copies"] if (i, c["id"]) not in skipped]
        calls = [(self.machine(c["node"]), (self.key(i), method, ()), self.describe(i)) for i, c in copies]
        return [
            (i, c, wait)
            for (i, c), wait in zip(copies, send_calls(self.backend.channels, calls), strict=True)
        ]


class RemoteShard:
    """A shard of a Ray-backed index as the node sees it (an entry of `Index.shards`)."""

    segments: tuple = ()  # merges are the machine's own

    def __init__(self, remote: RemoteIndex, shard_id: int) -> None:
        self.remote = remote
        self.shard_id = shard_id
        self.search_stats = SearchStats()

    def call(self, method: str, *args: Any) -> Any:
        return self.remote.call(self.shard_id, method, *args)

    @property
    def primary_term(self) -> int:
        """The shard's primary term (the shard map's: one more at each promotion)."""
        return self.remote.shard_map.term(self.shard_id)

    def tell(self, method: str, *args: Any, machine: Any = None) -> None:
        """`method` sent and not waited for (to the primary, or `machine`'s copy)."""
        target = self.remote.machines[self.shard_id] if machine is None else machine
        target.actor.call.remote(self.remote.key(self.shard_id), method, *args)

    def acquire_searcher(self) -> RemoteSnapshot:
        return RemoteSnapshot(self)

    def refresh(self) -> None:
        self.remote.refresh([self.shard_id])

    def maybe_merge(self) -> bool:
        return False

    def close(self) -> None:
        """Nothing: the machine actor outlives the coordinator (a restarted one finds it again)."""

    def _counts(self) -> dict[str, int]:
        return self.call("stats")

    def doc_count(self) -> int:
        return self._counts()["docs"]

    def lucene_doc_count(self) -> int:
        return self._counts()["lucene_docs"]

    def deleted_count(self) -> int:
        return self._counts()["deleted"]

    def store_size_bytes(self) -> int:
        return self._counts()["store_bytes"]

    def segment_count(self) -> int:
        return self._counts()["segments"]

    def stats_sections(self, metrics: tuple[str, ...], *, open_contexts: int, file_sizes: bool) -> dict:
        """The shard's `_stats` sections from its machine, with this coordinator's search counters."""
        stats = self.call("stats_sections", metrics, file_sizes)
        if "search" in stats:
            stats["search"] = {"open_contexts": open_contexts, **self.search_stats.snapshot()}
        return stats


class RemoteSnapshot:
    """A lease on one snapshot of a shard on its machine actor (see the module's docstring); a
    `Target`'s searcher for a Ray-backed index."""

    remote = True

    def __init__(self, shard: RemoteShard) -> None:
        self.shard = shard
        #: The copy this search reads (allocation id, machine actor): its phases, and its pin.
        self.copy, self.machine = shard.remote.read_copy(shard.shard_id)
        self.context: ShardContextId | None = None
        self._refs = 1
        self._lock = threading.Lock()

    def acquire(self) -> None:
        with self._lock:
            self._refs += 1

    def release(self) -> None:
        with self._lock:
            self._refs -= 1
            context = self.context if self._refs == 0 else None
            if context is not None:
                self.context = None
        if context is not None:
            self.shard.tell("free_context", context, machine=self.machine)

    def pin(self, context: ShardContextId) -> ShardContextId:
        """Keep the context the first phase pinned; a second one (two phases raced) is freed."""
        with self._lock:
            if self.context is None and self._refs > 0:
                self.context = context
                return context
            kept = self.context
        self.shard.tell("free_context", context, machine=self.machine)
        return kept if kept is not None else context

    def hand_over(self) -> ShardContextId | None:
        """The pinned context, no longer this lease's, for a fetch that frees it as it answers
        (the search's last phase on this shard); None when nothing is pinned, or when another
        holder of the lease may still read it."""
        with self._lock:
            if self._refs != 1:
                return None
            context, self.context = self.context, None
            return context

    def handle(self, target: Target) -> RayShard:
        return RayShard(self, target)


class RayShard:
    """`ShardSearch` over a shard on its machine actor, for one target of a search. A phase's
    messages to the shards of one machine are sent in one call (`route`: the machine actor;
    `send_all`), and waited for apart, so a search sends every machine's call before it waits
    for any (`shard_api.each_phase`)."""

    def __init__(self, snapshot: RemoteSnapshot, target: Target) -> None:
        self.snapshot = snapshot
        self.alias_filter = target.alias_filter
        shard = snapshot.shard
        self.name = shard.remote.describe(shard.shard_id)
        #: The shard's primary (a primary whose machine is lost fails over): it holds the reader
        #: contexts (PIT, scroll, by-query), whose phases it serves.
        self.primary = shard.remote.shard_map.shards[shard.shard_id]["primary"]
        self.primary_machine = shard.remote.machines[shard.shard_id]
        #: The machine of the copy this search reads (its phases without a context).
        self.route = snapshot.machine

    def open_context(self, name: str | None = None) -> ShardContextId:
        """With `name`, the shard keeps the pin on disk (a PIT's or a scroll's), and serves it
        by that name after Ray restarts its machine, or a restarted coordinator sends its
        recorded id."""
        (wait,) = self.call_all("open_context", [(self, (name,))])
        return wait()

    def free_context(self, context: ShardContextId) -> bool:
        """Raises `ShardUnavailable` when the machine cannot answer (the caller frees a pin kept
        on disk again later)."""
        (wait,) = self.call_all("free_context", [(self, (context,))])
        return bool(wait())

    def call_all(self, method: str, calls: list[tuple[RayShard, tuple]]) -> list[Callable[[], Any]]:
        """`open_context` (its argument: the name) or `free_context` (the context) of shards of
        this shard's machine, in one call (`shard_api.each_call`)."""
        sent = []
        for shard, args in calls:
            remote = shard.snapshot.shard
            shard_args = (shard.alias_filter, *args) if method == "open_context" else args
            sent.append(
                (shard.primary_machine, (remote.remote.key(remote.shard_id), method, shard_args), shard.name)
            )
        return send_calls(self.snapshot.shard.remote.backend.channels, sent)

    def send_all(self, phase: str, sends: list[tuple[RayShard, Any]]) -> list[Callable[[], Any]]:
        """Send a phase ("dfs", "query", "fetch") to shards, one message each, one call per
        machine (what the messages share pickled once for all, `send_calls`); per message the
        function that waits for its answer. A message naming
        no context reads the snapshot this search pinned (the first phase pins the shard's
        current one, named in its answer; a shard whose query found no hit frees its pin at
        once and names none). A search's last fetch hands the pin over: the shard frees it as it
        answers, so no release message follows; so does a query that fetches its page as the
        search's last phase (search/query_and_fetch.py). The phase's unavailability, or the loss
        of the context it names, fails that shard alone (`ShardFailed`); a machine that died or
        restarted under the call is sent it again (`MachineCall`): a PIT's or scroll's context
        is still there, by its name."""
        calls, sent = [], []
        for shard, message in sends:
            on_primary = message.context is not None or shard.snapshot.copy == shard.primary
            first = message.context is None and shard.snapshot.context is None
            prepared, args = shard._prepare(phase, message)
            remote = shard.snapshot.shard.remote
            machine = shard.primary_machine if message.context is not None else shard.route
            call = (remote.key(shard.snapshot.shard.shard_id), phase, args)
            calls.append((machine, call, shard.name))
            # A search's first phase on a copy that cannot answer is sent to another started copy.
            retry = partial(shard._elsewhere, call) if first else None
            sent.append((shard, prepared, on_primary, retry))
        waits = send_calls(self.snapshot.shard.remote.backend.channels, calls, again=True, shared=True)
        return [
            shard._finish(message, wait, on_primary, retry)
            for (shard, message, on_primary, retry), wait in zip(sent, waits, strict=True)
        ]

    def _elsewhere(self, call: ShardCall) -> Callable[[], Any] | None:
        """`call` sent to another started copy of the shard (the primary first), whose snapshot
        this search reads from now on; the machine that did not answer is checked at once. None
        when the shard has no other copy."""
        snapshot = self.snapshot
        remote = snapshot.shard.remote
        other = remote.other_copy(snapshot.shard.shard_id, snapshot.copy)
        if other is None:
            return None
        remote.detector.suspect(self.route.name)
        snapshot.copy, snapshot.machine = other["id"], remote.machine(other["node"])
        self.route = snapshot.machine
        (wait,) = send_calls(remote.backend.channels, [(self.route, call, self.name)], again=True)
        return wait

    def _prepare(self, phase: str, message: Any) -> tuple[Any, tuple]:
        """The message as sent (naming this search's pin) and the shard method's arguments."""
        snapshot = self.snapshot
        free_after = False
        if message.context is None:
            context = snapshot.hand_over() if _last_phase(phase, message) else None
            free_after = context is not None
            if context is None:  # (not handed over: another holder of the lease may read it)
                context = snapshot.context
            if context is not None:
                message = replace(message, context=context)
        if phase in ("fetch", "query"):
            return message, (message, self.alias_filter, free_after)
        return message, (message, self.alias_filter)

    def _finish(
        self,
        message: Any,
        wait: Callable[[], Any],
        on_primary: bool,
        retry: Callable[[], Callable[[], Any] | None] | None,
    ) -> Callable[[], Any]:
        snapshot = self.snapshot
        primary_machine = self.primary_machine.name

        def finish() -> Any:
            try:
                try:
                    context, result = wait()
                except ShardUnavailable:
                    again = None if retry is None else retry()
                    if again is None:
                        raise
                    context, result = again()
            except (ShardUnavailable, SearchContextMissing) as exc:
                shard = snapshot.shard
                if on_primary and isinstance(exc, ShardUnavailable):  # (replaced if its machine failed)
                    shard.remote.detector.suspect(primary_machine)
                raise ShardFailed(exc, message.shard_index, shard.remote.index.name, shard.shard_id) from None
            if message.context is None and context is not None:
                snapshot.pin(context)
            return result

        return finish

    def send(self, phase: str, message: Any) -> Callable[[], Any]:
        (wait,) = self.send_all(phase, [(self, message)])
        return wait

    def relay(self, query: ShardQuery, alone: bool) -> bytes | None:
        """A PIT page's hits as its primary's machine renders them (`ShardActor.relay`,
        search/page_relay.py), or None: not a page to relay, or the machine did not answer it
        (sent once: the general path that serves the page then asks again, resends to a
        restarted machine, reports a failed shard or fails over)."""
        remote = self.snapshot.shard.remote
        call = (remote.key(self.snapshot.shard.shard_id), "relay", (query, self.alias_filter, alone))
        try:
            sent = MachineCall(remote.backend.channels, self.primary_machine, [call], False, None)
            answer = sent.answer_bytes()
        except UNAVAILABLE:
            return None
        return answer if answer[:1] == b"[" else None

    def dfs(self, request: ShardDfs) -> DfsStats:
        return self.send("dfs", request)()

    def query(self, query: ShardQuery) -> ShardTopDocs:
        return self.send("query", query)()

    def fetch(self, fetch: ShardFetch) -> ShardFetchResult:
        return self.send("fetch", fetch)()

    def suggest(self, message: ShardSuggest) -> list[Any]:
        return self.send("suggest", message)()


def _last_phase(phase: str, message: Any) -> bool:
    """Whether a message is the search's last phase on its shard: a fetch so marked, or a query
    that runs such a fetch with it."""
    if phase == "fetch":
        return bool(message.last_phase)
    return phase == "query" and message.fetch is not None and message.fetch.last_phase
