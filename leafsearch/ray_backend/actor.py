"""`MachineActor`: every shard placed on one machine, in one actor; `ShardActor`: one of them.

A machine actor runs on a Ray node of its machine (cluster.py: a machine is named by a resource
its node is started with, which a restarted node has again) and holds a `ShardActor` per shard
of every index placed there, each in its own folder on that machine's disk. Each `ShardActor`
opens the engine's `Shard` from its folder (committed segments, then translog replay), so when
Ray restarts the machine actor after a crash, or on the node that replaced its node
(`max_restarts`), it reopens every shard it held (its registry) with every acknowledged write.
A coordinator's call carries the calls of all the shards it needs on this machine (`batch`),
run at once on the actor's threads, one answer per shard; it comes on the actor's channel
(channel.py: a socket, its address told through Ray), not as a Ray task. A `ShardActor` serves:

- the shard write interface (`write(ShardWrite)`: index/shard_write.py), answered only after
  the translog fsync of that write, so an acknowledged write survives `kill -9` of the actor;
  a primary's write also goes to its replicas (`replicate`: the records it logged), and is
  answered once they did (ray_backend/replication.py);
- recoveries (`recover_to` on the primary; `RecoveringCopy` in place of the copy that recovers,
  receiving the snapshot's files and logging the writes sent meanwhile);
- realtime gets (`get`), refresh, and its counts (`stats`);
- the shard search interface (search/shard_api.py) over its own snapshots: `open_context` /
  `free_context`, and `dfs`, `query`, `fetch` through the same `LocalShard` code the
  in-process node runs. A phase without a context reads a snapshot the actor pins for it and
  names in its answer, so the query and fetch phases of one search read the same snapshot
  (Elasticsearch's reader context between the query and the fetch phase); it is freed by the
  search's last fetch (`free_after`), by a query that found no hit for the page, or by the
  coordinator when the search ends (`RemoteSnapshot.release`).

The mapping the translog replay parses with is the coordinator's: sent when the shard is first
hosted and again on every change (`put_index`), and kept in the folder (`index_state.json`,
written before the change is acknowledged), which is what a restarted machine reopens it with.
Each shard refreshes on `index.refresh_interval` and merges in its own background thread, as a
node does for its shards, the merges running in the machine actor's merge worker, which its
shards share as a node's do. Everything it answers pickles; an `ElasticError` comes back as a
`Refusal` value (Ray would wrap a raised one, and fail the other shards' answers of the call),
which the coordinator raises again.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import shutil
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from leafsearch.common import wire_pickle
from leafsearch.common.durable import FOLDER_MODE, private
from leafsearch.errors import ElasticError, SearchContextMissing, ShardUnavailable
from leafsearch.index.index import write_json
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.merge_worker import MergeWorker
from leafsearch.index.shard import Shard
from leafsearch.index.shard_listing import ShardListing, of_shard
from leafsearch.index.shard_services import ShardServices
from leafsearch.index.shard_write import DocRead, ShardWrite, ShardWriteOutcome, apply_replicated, apply_write
from leafsearch.index.translog import decode_records
from leafsearch.ray_backend.channel import Address, ChannelServer
from leafsearch.ray_backend.fault_detection import PING
from leafsearch.ray_backend.merge_processes import SpawnWithoutMain
from leafsearch.ray_backend.metadata import cluster_secret
from leafsearch.ray_backend.replication import REPLICA_TIMEOUT_SECONDS, Replicated, Replication
from leafsearch.request.query_dsl import Query
from leafsearch.search import page_relay, query_and_fetch, walks
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
from leafsearch.search.shard_contexts import ShardContexts
from leafsearch.search.targets import Target
from leafsearch.search.top_hits import LocalShard
from leafsearch.search.workers.mirror import IndexMirror, IndexState
from leafsearch.search.workers.process import WorkerConfig, WorkerState

_STATE_FILE = "index_state.json"
#: A recovery sends a segment file in pieces of at most this (each one call, well under what the
#: object store of a small machine holds).
RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024
#: A machine actor's name is this and its machine key (cluster.py creates it, a primary finds its
#: replicas' machines by it).
MACHINE_PREFIX = "machine/"
_log = logging.getLogger("leafsearch")


@dataclass(frozen=True, slots=True)
class Relayed:
    """A page's hits as one JSON array (`ShardActor.relay`): the machine call's whole answer, as
    it is, not pickled (a pickle starts with another byte than `[`)."""

    hits: bytes


@dataclass(frozen=True, slots=True)
class _RelayPage:
    """A page `ShardActor.relay` found (read ahead, or for the call): its hits' bytes (None: not
    one to relay) and the cursor after its last hit (None: it has none, or the walk ends)."""

    hits: bytes | None
    following: list[Any] | None

    def nbytes(self) -> int:
        return 0 if self.hits is None else len(self.hits)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An `ElasticError` a shard actor answered (the coordinator raises it)."""

    error: ElasticError


class ActorState(WorkerState):
    """What a shard actor holds for its searches: a search worker's, plus the reader contexts this
    shard pinned (`shard_of`: the actor's engine shard)."""

    def __init__(self, node_id: str, shard_of: Callable[[Target], Shard]) -> None:
        super().__init__(WorkerConfig(node_id, workers=1, threads=4, persistent={}, transient={}))
        self.shard_contexts = self.services.shard_contexts = ShardContexts(shard_of)


class ShardActor:
    """One shard of a machine actor (see the module's docstring)."""

    def __init__(
        self, folder: str, state: IndexState, shard_id: int, merges: MergeWorker | None = None
    ) -> None:
        """`merges`: its machine actor's merge worker, shared by the machine's shards (None: one
        of its own)."""
        self.folder = Path(folder)
        self.folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        stored = self.folder / _STATE_FILE
        if stored.exists():  # the newest mapping the coordinator sent (creation args are older)
            state = IndexState(**orjson.loads(stored.read_bytes()))
        else:
            write_json(stored, asdict(state))
        self.index = IndexMirror(state)
        self.state_order = 0  # the cluster version of the state held (`put_index`)
        self._state_lock = threading.Lock()
        self.state = ActorState(f"shard-{state.uuid}-{shard_id}", lambda target: self.shard)
        self.shard_id = shard_id
        #: The shard's block cache and flush thread, and the merge worker; its events are the ones
        #: this actor's caches listen to.
        self.shard_services = ShardServices(self.state.source_blocks, self.state.events, merges=merges)
        self.shard = Shard(
            self.folder / "shard",
            shard_id,
            self._parse,
            self.index.sort,
            self.shard_services,
            self.index.codec,
        )
        self.shard.index_ref = (self.index.name, self.index.uuid)
        #: The highest primary term a write to this copy carried: a replica refuses a write of
        #: an older term (a former primary, replaced, that does not know it yet).
        self.term = 0
        #: The machine actor of a machine key, for the replicas of this copy's writes (set by the
        #: machine actor holding it).
        self.peer: Callable[[str], Any] | None = None
        #: Copies recovering from this primary (allocation id -> machine key): sent every write
        #: from the moment their snapshot is taken (`recover_to`), whatever a coordinator's call
        #: names; and those that failed one since (`tracked`).
        self.tracking: dict[str, str] = {}
        self._tracking_failed: set[str] = set()
        #: The copies this primary is recovering now: allocation id -> (the claim's attempt, set
        #: to stop its copy: `cancel_recovery`, or a later claim's `recover_to`).
        self._recovering: dict[str, tuple[int, threading.Event]] = {}
        self._recovery_lock = threading.Condition()
        #: Search calls served, by method (`stats`: what a search costs in calls, bench/ray_cluster.py).
        self._calls: Counter[str] = Counter()
        self._calls_lock = threading.Lock()
        self._taking_back = threading.Lock()  # (`_pinned`)
        self._closed = threading.Event()
        self._background = threading.Thread(target=self._loop, name="leafsearch-shard-actor", daemon=True)
        self._background.start()
        self._merges = threading.Thread(target=self._merge_loop, name="leafsearch-shard-merges", daemon=True)
        self._merges.start()

    def _parse(self, source: bytes, doc_id: str) -> Any:
        return self.index.mapping.parse_document(source, doc_id)

    def _loop(self) -> None:
        """Refresh on `index.refresh_interval`."""
        last_refresh = time.monotonic()
        while not self._closed.wait(0.05):
            try:
                interval = self.index.setting("index.refresh_interval")
                now = time.monotonic()
                if interval is not None and interval >= 0 and now - last_refresh >= interval:
                    last_refresh = now
                    self.shard.refresh()
            except Exception:  # keep the shard serving; the next tick retries, a request reports it
                _log.exception("shard actor refresh failed")

    def _merge_loop(self) -> None:
        """Merges beside searches and writes, as the node runs them for its own shards (in the
        merge worker processes of its machine actor, merge_worker.py), on a thread of their own so
        that a merge of seconds never delays the shard's refreshes. The shard's end waits for
        this thread, and so for its merge in flight, before its folder may go (the worker is the
        machine's: its end no longer waits for this shard's merge)."""
        while not self._closed.wait(0.5):
            try:
                while not self._closed.is_set() and self.shard.maybe_merge():
                    pass
            except Exception:  # keep the shard serving; the next tick retries
                _log.exception("shard actor merge failed")

    # ---- identity and metadata -----------------------------------------------------------

    def where(self) -> tuple[str, int]:
        """(Ray node id, pid) of this actor's process."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def put_index(self, state: IndexState, order: int = 0) -> None:
        """The coordinator's index state (a mapping or settings change), kept before it is used.
        `order`: the state's version in the cluster's metadata; one older than the state held
        (a coordinator's push overtaken by another's, node/cluster_sync.py) is ignored."""
        with self._state_lock:  # (two coordinators' pushes at once: one file written at a time)
            if order < self.state_order:
                return
            self.state_order = order
            write_json(self.folder / _STATE_FILE, asdict(state))
            self.index = IndexMirror(state)
            # `index.codec` changes only while the index is closed: the state an opened index's
            # coordinator sends may be newer than the one the shard opened with (its file's).
            self.shard.codec = self.index.codec

    def close_shard(self) -> None:
        """The index is closed: every acknowledged write goes into a committed segment (the
        translog written out) and the contexts are freed; the coordinator then ends this actor."""
        self._closed.set()
        self.state.contexts.read_ahead.close()  # (pages read ahead: `relay`)
        self.state.shard_contexts.close_all()
        try:
            self.shard.close()
        except ElasticError:  # its flush failed; it closed all the same, every operation in its translog
            _log.exception("closing shard actor [%s][%d] failed", self.index.name, self.shard_id)
        self._merges.join()
        self.shard_services.close()

    def destroy(self) -> None:
        """The index is deleted: release everything and delete the folder."""
        self._closed.set()
        self.state.contexts.read_ahead.close()  # (pages read ahead: `relay`)
        self.state.shard_contexts.close_all()
        with contextlib.suppress(ElasticError):  # a flush that failed: what it would have
            self.shard.close()  # written is deleted now
        self._merges.join()
        self.shard_services.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        with contextlib.suppress(OSError):  # the index's folder on this node, once its last shard went
            self.folder.parent.rmdir()

    # ---- writes and reads ----------------------------------------------------------------

    def write(
        self, write: ShardWrite, replication: Replication | None = None
    ) -> ShardWriteOutcome | Replicated | Refusal:
        """Apply a shard write and answer after its translog fsync (nothing of it is
        acknowledged when the fsync fails: every operation then answers that error). With
        `replication` this copy is the primary: the records it logged go to every replica while
        it fsyncs, and it answers once each replica answered (ray_backend/replication.py)."""
        if replication is not None and replication.term < self.term:
            return Refusal(_stale(self._describe(), replication.term, self.term))
        records: list[bytes] = []
        try:
            with self.shard.writing() as point:
                if replication is not None:
                    self.term = self.shard.primary_term = replication.term
                    self.shard.translog.recording = records
                try:
                    outcomes = apply_write(self.shard, write)
                finally:
                    self.shard.translog.recording = None
                targets = self._targets(replication) if replication is not None else ()
            sent = self._forward(replication.term, targets, b"".join(records)) if targets and records else []
            self.shard.sync(point)
        except ElasticError as exc:
            return Refusal(exc)
        if replication is None:
            return outcomes
        failed = tuple(allocation_id for allocation_id, wait in sent if not wait())
        for allocation_id in failed:
            if self.tracking.pop(allocation_id, None) is not None:
                self._tracking_failed.add(allocation_id)
        return Replicated(outcomes, failed)

    def _targets(self, replication: Replication) -> tuple[tuple[str, str], ...]:
        """The copies a write goes to: the coordinator's in-sync replicas and those this copy
        tracks (under the shard's write lock: a recovery's snapshot is taken under it): those
        recovering from it, and those that recovered from it, which a write sent from a shard map
        older than their join to the in-sync set (another coordinator's, or one in flight then)
        does not name."""
        named = {allocation_id for _, allocation_id in replication.targets}
        extra = tuple((m, a) for a, m in self.tracking.items() if a not in named)
        return replication.targets + extra

    def _forward(
        self, term: int, targets: tuple[tuple[str, str], ...], records: bytes
    ) -> list[tuple[str, Callable[[], bool]]]:
        """Send a write's records to each replica (one call each, not waited for); per replica
        its allocation id and the function telling whether it acknowledged them."""
        import ray

        assert self.peer is not None
        message = pickle.dumps(
            [((self.index.uuid, self.shard_id), "replicate", (records, term))],
            protocol=pickle.HIGHEST_PROTOCOL,
        )
        sent = []
        for machine, allocation_id in targets:
            try:
                ref = self.peer(machine).batch.remote(message)
            except Exception:  # no such actor (its node is gone): failed, as a call that fails
                _log.warning(
                    "%s: the replica on %s cannot be reached", self._describe(), machine, exc_info=True
                )
                sent.append((allocation_id, lambda: False))
                continue

            def acknowledged(ref: Any = ref, machine: str = machine) -> bool:
                try:
                    (answer,) = pickle.loads(ray.get(ref, timeout=REPLICA_TIMEOUT_SECONDS))
                except Exception as exc:  # the replica's machine died, or did not answer in time
                    _log.warning("%s: the replica on %s failed: %s", self._describe(), machine, exc)
                    return False
                if isinstance(answer, Refusal):
                    _log.warning("%s: the replica on %s refused: %s", self._describe(), machine, answer.error)
                    return False
                return True

            sent.append((allocation_id, acknowledged))
        return sent

    def replicate(self, records: bytes, term: int) -> None | Refusal:
        """A replica's part of its primary's write (`records`: what the primary logged): applied
        with the primary's seq_nos and versions, answered after this copy's fsync. A write of an
        older primary term than one seen is refused."""
        if term < self.term:
            return Refusal(_stale(self._describe(), term, self.term))
        self.term = self.shard.primary_term = term
        try:
            with self.shard.writing() as point:
                apply_replicated(self.shard, records, partial(parse_batch, self.index.mapping))
            self.shard.sync(point)
        except ElasticError as exc:
            return Refusal(exc)
        return None

    # ---- recovery: this copy the primary, another recovering from it ----------------------

    def recover_to(
        self, machine: str, allocation_id: str, folder: str, state: IndexState, order: int, attempt: int
    ) -> Any:
        """Recover the copy `allocation_id` on `machine` (in `folder`) from this primary, for the
        claim `attempt` (replication.py `claim_recovery`): it starts over empty
        (`MachineActor.start_recovery`); under the write lock this copy starts sending it every
        write and takes a snapshot (refreshed: every operation before is in its segments); the
        snapshot's files then go to it through Ray, piece by piece, and it opens from them,
        replaying the writes it received meanwhile (`finish_recovery`). Answers what was sent
        (files, bytes, operations replayed, the times). A recovery of that copy already running
        for the same or a later claim is refused; one for an earlier claim (its owner lost it:
        this one took it over) is stopped first. A stopped copy (`cancel_recovery`) fails
        between two pieces."""
        import numpy as np

        with self._recovery_lock:
            while (running := self._recovering.get(allocation_id)) is not None:
                if running[0] < attempt:  # (an earlier claim's: it stops before its next piece)
                    running[1].set()
                if running[0] >= attempt or not self._recovery_lock.wait(REPLICA_TIMEOUT_SECONDS):
                    busy = f"{self._describe()} is already recovering [{allocation_id}]"
                    return Refusal(ElasticError(busy, status=409))
            cancelled = threading.Event()
            self._recovering[allocation_id] = (attempt, cancelled)

        def going_on() -> None:
            if cancelled.is_set():
                raise ElasticError(f"stopped: claim [{attempt}] was lost or taken over")

        started = time.time()
        key = (self.index.uuid, self.shard_id)
        try:
            assert self.peer is not None
            target = self.peer(machine)
            _ask(target, key, "start_recovery", (folder, state, order, self.term))
            with self.shard.writing():
                self.tracking[allocation_id] = machine
                self._tracking_failed.discard(allocation_id)
                self.shard.refresh()
                searcher = self.shard.acquire_searcher()
                manifest: dict[str, Any] = {
                    "max_seq_no": self.shard.max_seq_no,
                    "segment_gen": self.shard._seg_gen,
                }
            files = sent = 0
            try:
                live: dict[str, bytes] = {}
                for view in searcher.views:
                    segment = view.segment
                    for path in sorted(p for p in segment.folder.rglob("*") if p.is_file()):
                        name = f"{segment.name}/{path.relative_to(segment.folder)}"
                        with open(path, "rb") as fh:
                            offset = 0
                            while True:
                                chunk = fh.read(RECOVERY_CHUNK_BYTES)
                                if chunk or offset == 0:  # (an empty file is sent too)
                                    going_on()
                                    _ask(target, key, "recovery_file", (name, offset, chunk))
                                offset += len(chunk)
                                if len(chunk) < RECOVERY_CHUNK_BYTES:
                                    break
                        files, sent = files + 1, sent + offset
                    if view.live is not None:
                        buffer = io.BytesIO()
                        np.save(buffer, view.live)
                        live[segment.name] = buffer.getvalue()
                manifest |= {"segments": [view.segment.name for view in searcher.views], "live": live}
                going_on()
                ops = _ask(target, key, "finish_recovery", (manifest,))
            finally:
                searcher.release()
        except Exception as exc:
            self.tracking.pop(allocation_id, None)
            error = exc if isinstance(exc, ElasticError) else ElasticError(f"{type(exc).__name__}: {exc}")
            return Refusal(ElasticError(f"{self._describe()} recovery of [{allocation_id}] failed: {error}"))
        finally:
            with self._recovery_lock:
                del self._recovering[allocation_id]
                self._recovery_lock.notify_all()
        return {"files": files, "bytes": sent, "ops": ops, "start": started, "stop": time.time()}

    def cancel_recovery(self, allocation_id: str, attempt: int) -> bool:
        """Stop the copy to `allocation_id` of the claim `attempt` (its owner lost the claim:
        remote.py `RemoteIndex.recover`), which fails before its next piece; whether it was
        running."""
        with self._recovery_lock:
            running = self._recovering.get(allocation_id)
            if running is None or running[0] != attempt:
                return False
            running[1].set()
            return True

    def tracked(self, allocation_id: str) -> bool:
        """Whether a recovered copy received every write since its recovery began (it failed
        none: the coordinator adds it to the in-sync set, then asks)."""
        return allocation_id not in self._tracking_failed and allocation_id in self.tracking

    def untrack(self, allocation_id: str) -> None:
        """The copy's recovery did not make it in sync: writes go to it no longer (a copy that
        failed a write is no longer tracked either)."""
        self.tracking.pop(allocation_id, None)
        self._tracking_failed.discard(allocation_id)

    def abandon(self) -> None:
        """This copy starts over (a recovery): let everything go, its folder emptied."""
        self._closed.set()
        self.state.shard_contexts.close_all()
        with contextlib.suppress(ElasticError):
            self.shard.close()
        self._merges.join()
        self.shard_services.close()
        shutil.rmtree(self.folder / "shard", ignore_errors=True)

    def get(self, doc_id: str, realtime: bool) -> DocRead | None | Refusal:
        """The current document (realtime: from the version map and buffer), None when absent."""
        from leafsearch.write.documents import read_doc

        try:
            state, source = read_doc(self.shard, doc_id, realtime=realtime, refresh=False)
        except ElasticError as exc:
            return Refusal(exc)
        if state is None:
            return None
        return DocRead(state.version, state.seq_no, state.routing, source)

    def refresh(self) -> Refusal | None:
        """A refresh; one that failed (the shard left as it was) answers its error."""
        try:
            self.shard.refresh()
        except ElasticError as exc:
            return Refusal(exc)
        return None

    def stats_sections(self, metrics: tuple[str, ...], file_sizes: bool) -> dict[str, Any]:
        """The shard's `_stats` sections (index_stats.py), but its search counters, which the
        coordinator keeps."""
        from leafsearch.indices.stats import shard_stats

        return shard_stats(self.shard, metrics, file_sizes=file_sizes)

    def listing(self) -> ShardListing:
        """The shard's row of the per-shard listings, with the Ray node it runs on."""
        import ray

        return of_shard(self.shard, (ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()))

    def stats(self) -> dict[str, Any]:
        with self._calls_lock:
            calls = dict(self._calls)
        return {
            "docs": self.shard.doc_count(),
            "lucene_docs": self.shard.lucene_doc_count(),
            "deleted": self.shard.deleted_count(),
            "store_bytes": self.shard.store_size_bytes(),
            "segments": self.shard.segment_count(),
            "open_contexts": self.state.shard_contexts.open_count(),
            "pages_read_ahead": self.state.contexts.read_ahead.held(),
            "search_calls": calls,
        }

    def _count(self, method: str) -> None:
        with self._calls_lock:
            self._calls[method] += 1

    # ---- the shard search interface --------------------------------------------------------

    def _target(self, alias_filter: Query | None) -> Target:
        """The shard's current snapshot, acquired (the caller pins or releases it)."""
        return Target(self.index, self.shard_id, self.shard.acquire_searcher(), alias_filter)  # type: ignore[arg-type]

    def open_context(self, alias_filter: Query | None, name: str | None = None) -> ShardContextId | Refusal:
        """A context on the current snapshot; with `name` (a PIT's or a scroll's), kept on disk
        too (index/pins.py), durable when this answers."""
        self._count("open_context")
        return self._pin(alias_filter, name)

    def _pin(self, alias_filter: Query | None, name: str | None = None) -> ShardContextId | Refusal:
        """A context on the current snapshot."""
        try:
            target = self._target(alias_filter)
        except ElasticError as exc:
            return Refusal(exc)
        try:
            return self.state.shard_contexts.open(target, name)
        except OSError as exc:  # its pin could not be written: nothing was pinned
            return Refusal(ElasticError(f"cannot keep the snapshot of {self._describe()}: {exc}"))
        finally:
            target.searcher.release()

    def _describe(self) -> str:
        return f"[{self.index.name}][{self.shard_id}]"

    def _pinned(self, context: ShardContextId, alias_filter: Query | None) -> Target:
        """The snapshot a context names. One kept on disk that this actor's process does not hold
        yet (Ray restarted the actor, which found the pin in its folder) is taken back here, under
        the alias filter its phases are sent with; one phase at a time, so that a concurrent one
        finds it taken back."""
        contexts = self.state.shard_contexts
        try:
            return contexts.get(context)
        except SearchContextMissing:
            if context.name is None:
                raise
        with self._taking_back:
            searcher = self.shard.take_restored(context.name)
            if searcher is not None:
                contexts.adopt(Target(self.index, self.shard_id, searcher, alias_filter), context.name)  # type: ignore[arg-type]
            return contexts.get(context)

    def free_context(self, context: ShardContextId) -> bool:
        """Release a context; one kept on disk and not taken back since a restart is deleted."""
        self._count("free_context")
        self.state.contexts.read_ahead.forget(context.number)
        if self.state.shard_contexts.free(context):
            return True
        searcher = None if context.name is None else self.shard.take_restored(context.name)
        if searcher is None:
            return False
        self.shard.unpin(context.name)  # type: ignore[arg-type]
        searcher.release()
        return True

    def retain_contexts(self, names: list[str], since: float) -> int:
        """A coordinator started at `since` (wall time): every context of before that it does not
        hold goes (those of searches it ran before it stopped, those kept on disk that it freed
        while this actor could not answer); how many went."""
        kept = set(names)
        freed = self.state.shard_contexts.retain(kept, since)
        for name in set(self.shard.restored_names()) - kept:
            freed += self.free_context(ShardContextId("", 0, name=name))
        return freed

    def dfs(self, request: ShardDfs, alias_filter: Query | None) -> tuple[ShardContextId, DfsStats] | Refusal:
        self._count("dfs")
        return self._phase(request, alias_filter, lambda shard, message: shard.dfs(message))

    def query(
        self, query: ShardQuery, alias_filter: Query | None, free_after: bool = False
    ) -> tuple[ShardContextId | None, ShardTopDocs] | Refusal:
        """The query phase, and the page's fetch with it when the search asks this shard alone
        (`query.fetch`: search/query_and_fetch.py). A snapshot pinned for this phase alone (the
        message names no context) is freed at once when the shard has no hit for the page:
        nothing will fetch from it (Elasticsearch frees a single-session reader context whose
        query found no hit), so the coordinator has nothing to release; the answer then names no
        context. The same when the page was fetched here as the search's last phase (and then,
        with `free_after`, the context the message names: it was handed over), failed or not."""
        along = query.fetch
        last = along is not None and along.last_phase
        self._count("query" if along is None else "query_fetch")
        answered = self._phase(query, alias_filter, query_and_fetch.run)
        if isinstance(answered, Refusal):
            if free_after and query.context is not None:
                self.state.shard_contexts.free(query.context)
            return answered
        context, top = answered
        # The columns' field types (for rendering) are the coordinator's to give: it merges the
        # shards' columns with its own mapping's. Sent back, a date field's type was 0.7 KB to
        # pickle here and to rebuild on the coordinator, in every answer.
        top.columns = [replace(column, field_types=()) for column in top.columns]
        # (a collapsed page's next rounds read the snapshot its first pinned, hits or not)
        empty = not len(top.docs) and query.collapse is None
        if (query.context is None and (last or empty)) or (last and free_after):
            self.state.shard_contexts.free(context)
            return None, top
        return context, top

    def relay(self, query: ShardQuery, alias_filter: Query | None, alone: bool) -> Relayed | None:
        """A PIT page's query and fetch on its context (search/page_relay.py): the page's hits as
        the bytes the coordinator relays, when the general path would take them from this answer
        alone (`alone`: no other shard is asked); None otherwise, and for whatever the general
        path reports (a refusal, a lost context), which the coordinator then runs.

        The walk's next page is prepared meanwhile (search/read_ahead.py, as the coordinator's
        read-ahead does for the pages it serves): after a page that continued the one before it,
        the page after its last hit, on the same pinned snapshot, so the next call finds it while
        the coordinator relays this one and the client reads it. Its key is everything the page
        depends on but the cursor (the request as the walk's identity, the shard's position and
        whether it is asked alone, the alias filter); its preparation fails (the call then runs
        its own) when the context was freed meanwhile; a freed context's pages go with it."""
        self._count("relay")
        context = query.context
        if context is None:  # (a PIT's page names its pin)
            return None
        read_ahead = self.state.contexts.read_ahead
        walk = (walks.identity(query.request), query.shard_index, alone, repr(alias_filter))
        served = walks.cursor_key(query.request.search_after)
        page = read_ahead.take(context.number, walk, served)
        if page is not None:
            self._count("relay_read_ahead")
        else:
            try:
                page = self._relay_page(query, alias_filter, alone)
            except ElasticError:
                return None
        if page.hits is None:
            return None
        following = page.following
        if following is not None:
            after = replace(query, request=replace(query.request, search_after=following))
            target = self._pinned(context, alias_filter)
            read_ahead.continue_walk(
                context.number,
                walk,
                served,
                walks.cursor_key(following),
                [target],
                partial(self._relay_page, after, alias_filter, alone),
            )
        return Relayed(page.hits)

    def _relay_page(self, query: ShardQuery, alias_filter: Query | None, alone: bool) -> _RelayPage:
        """A page `relay` answers; raises what the general path would report."""
        answered = self._phase(query, alias_filter, query_and_fetch.run_to_cursor)
        if isinstance(answered, Refusal):
            raise answered.error
        top, following = answered[1]
        hits = page_relay.relayed_hits(top, query.request, alone)
        return _RelayPage(hits, following if hits is not None and len(top.docs) else None)

    def fetch(
        self, fetch: ShardFetch, alias_filter: Query | None, free_after: bool = False
    ) -> tuple[ShardContextId, ShardFetchResult] | Refusal:
        """The fetch phase; `free_after`: the search's last phase here, whose context is freed
        as it answers, failed or not (the coordinator sends no release)."""
        self._count("fetch")
        try:
            return self._phase(fetch, alias_filter, lambda shard, message: shard.fetch(message))
        finally:
            if free_after and fetch.context is not None:
                self.state.shard_contexts.free(fetch.context)

    def suggest(
        self, message: ShardSuggest, alias_filter: Query | None
    ) -> tuple[ShardContextId, list] | Refusal:
        """A search's `suggest` section on this shard (search/suggest.py)."""
        self._count("suggest")
        return self._phase(message, alias_filter, lambda shard, m: shard.suggest(m))

    def _phase(self, message: Any, alias_filter: Query | None, run: Any) -> Any:
        """Run a phase on its context's snapshot, pinning the current one when it names none;
        answers (context, result). A pin of its own is freed when the phase fails: its answer
        names no context, so no one else could."""
        opened: ShardContextId | Refusal | None = None
        try:
            context = message.context
            if context is None:
                opened = self._pin(alias_filter)
                if isinstance(opened, Refusal):
                    return opened
                context = opened
                message = replace(message, context=context)
            pinned = self._pinned(context, alias_filter)
            return context, run(LocalShard(self.state.services, pinned, None), message)  # type: ignore[arg-type]
        except ElasticError as exc:
            if isinstance(opened, ShardContextId):
                self.state.shard_contexts.free(opened)
            return Refusal(exc)


def _ask(machine: Any, key: ShardKey, method: str, args: tuple) -> Any:
    """One shard's call on another machine actor, waited for (a recovery's steps)."""
    import ray

    (answer,) = pickle.loads(
        ray.get(machine.batch.remote(pickle.dumps([(key, method, args)])), timeout=REPLICA_TIMEOUT_SECONDS)
    )
    if isinstance(answer, Refusal):
        raise answer.error
    return answer


class RecoveringCopy:
    """A copy recovering from its primary (`ShardActor.recover_to`), in place of its `ShardActor`
    on this machine: it receives the snapshot's files into its emptied folder, and logs the
    writes its primary sends meanwhile (fsynced before it answers, as a replica does), which the
    shard replays once it opens from the files (`MachineActor.finish_recovery`)."""

    def __init__(self, folder: str, state: IndexState, shard_id: int, term: int) -> None:
        self.folder = Path(folder)
        self.shard_id = shard_id
        self.index = IndexMirror(state)
        self.state_body = state
        self.state_order = 0  # (as `ShardActor`'s)
        self.term = term
        shutil.rmtree(self.folder / "shard", ignore_errors=True)
        (self.folder / "shard").mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        write_json(self.folder / _STATE_FILE, asdict(state))
        self.lock = threading.Lock()
        self._log = open(self.folder / "recovery.tlog", "wb", opener=private)  # noqa: SIM115 - until finished
        #: The shard opened from the recovered files: later calls go to it.
        self.successor: ShardActor | None = None

    def _describe(self) -> str:
        return f"[{self.index.name}][{self.shard_id}]"

    def replicate(self, records: bytes, term: int) -> None | Refusal:
        with self.lock:
            if self.successor is None:
                if term < self.term:
                    return Refusal(_stale(self._describe(), term, self.term))
                self.term = term
                self._log.write(records)
                self._log.flush()
                os.fsync(self._log.fileno())
                return None
        return self.successor.replicate(records, term)

    def recovery_file(self, name: str, offset: int, data: bytes) -> None:
        """A piece of a segment file of the snapshot, at `offset` (0: the file starts)."""
        path = (self.folder / "shard" / name).resolve()
        if (self.folder / "shard").resolve() not in path.parents:
            raise ElasticError(f"{self._describe()}: [{name}] is not a file of a segment")
        path.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        with open(path, "r+b" if offset else "wb", opener=private) as fh:
            fh.seek(offset)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def put_index(self, state: IndexState, order: int = 0) -> None:
        with self.lock:
            self.state_order = max(self.state_order, order)
            self.state_body = state
            self.index = IndexMirror(state)
            write_json(self.folder / _STATE_FILE, asdict(state))

    def finish(self, manifest: dict[str, Any], open_shard: Callable[[], ShardActor]) -> int:
        """Write the snapshot's commit, make the logged writes its translog and open the shard
        (`open_shard`); how many logged operations it replayed."""
        with self.lock:
            shard = self.folder / "shard"
            live = {}
            for name, data in manifest["live"].items():
                live[name] = f"live_{name}_1.npy"
                (shard / live[name]).write_bytes(data)
            commit = {
                "segments": manifest["segments"],
                "live": live,
                "max_seq_no": manifest["max_seq_no"],
                "segment_gen": manifest["segment_gen"],
                "live_gen": 1,
                "translog_gen": 1,
            }
            write_json(shard / "commit.json", commit)
            self._log.close()
            logged = (self.folder / "recovery.tlog").read_bytes()
            (shard / "translog").mkdir(mode=FOLDER_MODE, exist_ok=True)
            os.replace(self.folder / "recovery.tlog", shard / "translog" / "translog-1.tlog")
            self.successor = open_shard()
            self.successor.term = self.successor.shard.primary_term = max(1, self.term)
            return len(decode_records(logged)[0])

    def where(self) -> tuple[str, int]:
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def listing(self) -> ShardListing:
        import ray

        node = (ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address())
        return ShardListing(self.shard_id, 0, 0, -1, 0, 0, 0, (), node)

    def abandon(self) -> None:
        with contextlib.suppress(OSError):
            self._log.close()

    def close_shard(self) -> None:
        self.abandon()

    def destroy(self) -> None:
        self.abandon()
        shutil.rmtree(self.folder, ignore_errors=True)


def _stale(shard: str, term: int, current: int) -> ElasticError:
    """Elasticsearch's refusal of an operation from a primary that was replaced."""
    return ElasticError(
        f"{shard} operation primary term [{term}] is too old (current [{current}])",
        status=500,
        error_type="illegal_state_exception",
    )


#: A shard on a machine: (index uuid, shard number).
ShardKey = tuple[str, int]
#: A shard's part of a machine call: the shard, the `ShardActor` method, its arguments.
ShardCall = tuple[ShardKey, str, tuple]


class SharedCalls(NamedTuple):
    """A machine call's shard calls as the positions of this machine's among `calls`, the
    pickled calls of every machine of a search phase: the phase's request (its query, sort,
    page), which every shard's message carries, is pickled once for all the machines rather
    than once a machine (remote.py `send_calls`)."""

    positions: tuple[int, ...]
    calls: bytes

    def select(self) -> list[ShardCall]:
        every = pickle.loads(self.calls)
        return [every[i] for i in self.positions]


#: The `ShardActor` methods a machine call may name (`put_index`, `close_shard` and `destroy`
#: also change which shards the machine holds).
SHARD_METHODS = frozenset(
    {
        "where",
        "put_index",
        "close_shard",
        "destroy",
        "write",
        "replicate",
        "recover_to",
        "cancel_recovery",
        "tracked",
        "untrack",
        "start_recovery",
        "recovery_file",
        "finish_recovery",
        "get",
        "refresh",
        "stats_sections",
        "listing",
        "stats",
        "open_context",
        "free_context",
        "retain_contexts",
        "dfs",
        "query",
        "fetch",
        "suggest",
        "relay",
    }
)


#: How many closed or deleted shards a machine actor remembers the state order of (`_ended`).
ENDED_KEPT = 10_000


class MachineActor:
    """Every shard placed on one machine (see the module's docstring). Wrapped by `ray.remote`
    in cluster.py, which schedules it by its machine's resource, so that it runs on whichever
    node has it: the one that restarted in place of a node killed.

    Which shards it holds, and their folders, it keeps in its registry (`registry`: a file in its
    machine's folder under the shard root, on the machine's disk), changed before a call that
    hosts or lets go a shard answers: a restarted actor reopens exactly those. Why not a scan of
    a folder of shards: coordinators with different data paths may share a cluster (the registry
    is the first one's, naming every coordinator's folders), and a closed index's folders stay
    where they are but are not opened. A machine a coordinator has not used yet starts with no
    registry; the coordinators host their shards on it as they attach their indices."""

    def __init__(self, machine: str, registry: str, threads: int) -> None:
        self.machine = machine
        self.registry = Path(registry)
        self.registry.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        self._shards: dict[ShardKey, ShardActor] = {}
        self._hosting = threading.Lock()  # (which shards are held changes under it)
        #: Per shard closed or deleted here, the state order it held then (`_end`; the last
        #: `ENDED_KEPT`): a state push no newer (a write's, or another coordinator's, sent before
        #: the close and arriving after it) does not open it again, as an open's does (the close
        #: is published to the cluster's metadata before an open starts, so an open's is newer).
        self._ended: OrderedDict[ShardKey, int] = OrderedDict()
        #: Calls served, by the method they carry ("query_fetch": queries fetching their page):
        #: what a search costs in calls (`stats`, bench/ray_cluster.py).
        self._calls: Counter[str] = Counter()
        self._calls_lock = threading.Lock()
        #: The threads a call's shards run on at once: numpy, zstd and file reads release the
        #: interpreter, so shards of one call overlap (bench/RESULTS.md "Shards as Ray actors").
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="leafsearch-machine")
        #: The merge worker of every shard here: each process spawned is an interpreter importing
        #: the segment code (not Ray's worker script: merge_processes.py); one per shard started
        #: as many as the machine held shards (bench/RESULTS.md "The test suite", "Session 20").
        #: As many merges at once as calls.
        self._merge_worker = MergeWorker(SpawnWithoutMain(), workers=threads)
        self._peers: dict[str, Any] = {}
        hosted: dict[str, str] = orjson.loads(self.registry.read_bytes()) if self.registry.exists() else {}
        folders = [Path(folder) for folder in hosted.values()]
        for name, opened in zip(hosted, self._pool.map(self._reopen, folders), strict=True):
            uuid, _, shard_id = name.rpartition("/")
            if opened is not None:
                opened.peer = self._peer
                self._shards[(uuid, int(shard_id))] = opened
        import ray

        #: What a follower check is answered (fault_detection.py): new with each start.
        self._incarnation = os.urandom(16)
        #: The coordinators' calls come on it (`batch`), Ray tells them where (`channel`).
        self._channel = ChannelServer(ray.util.get_node_ip_address(), cluster_secret(), self.batch)

    def _peer(self, machine: str) -> Any:
        """The machine actor of a machine key (its replicas' machines, for a primary's writes);
        raises when there is none (its node is gone)."""
        import ray

        actor = self._peers.get(machine)
        if actor is None:
            namespace = ray.get_runtime_context().namespace
            actor = self._peers[machine] = ray.get_actor(MACHINE_PREFIX + machine, namespace=namespace)
        return actor

    def _reopen(self, folder: Path) -> ShardActor | None:
        """A shard of before the restart, from its folder (None, logged, when it cannot open: the
        coordinator's next `put_index` tries again and reports why)."""
        try:
            state = IndexState(**orjson.loads((folder / _STATE_FILE).read_bytes()))
            return ShardActor(str(folder), state, int(folder.name), self._merge_worker)
        except Exception:
            _log.exception("reopening the shard in %s failed", folder)
            return None

    def _record(self) -> None:
        """Write the registry of the shards held (under `_hosting`)."""
        hosted = {f"{uuid}/{shard_id}": str(shard.folder) for (uuid, shard_id), shard in self._shards.items()}
        write_json(self.registry, hosted)

    def where(self) -> tuple[str, int]:
        """(Ray node id, pid) of this actor's process."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def channel(self) -> Address:
        """Where the coordinators send this actor's machine calls (channel.py): new with each
        start of the actor."""
        return self._channel.address

    def holds(self, key: ShardKey) -> bool:
        return key in self._shards

    def held(self) -> list[ShardKey]:
        """The shards held (tools: each is ended by its `destroy` call, as its index's deletion
        ends it)."""
        return list(self._shards)

    def stats(self) -> dict[str, Any]:
        """The shards held and the calls served (by method)."""
        with self._calls_lock:
            return {"shards": len(self._shards), "calls": dict(self._calls)}

    def batch(self, message: bytes) -> bytes:
        """Each shard's call of `message` (a pickled list of `ShardCall`s, or `SharedCalls`), at
        once on the actor's threads; per call its answer (a `Refusal` for an `ElasticError`, and
        for a shard this machine does not hold), pickled. Why pickled by the C pickler rather
        than Ray's cloudpickle: that runs Python for every object of a message (the messages are
        plain data, search/shard_api.py). A follower check (`PING`) is answered at once, on the
        connection's thread; a page relayed (`ShardActor.relay`) is its bytes alone."""
        if message == PING:
            return self._incarnation
        calls = pickle.loads(message)
        if isinstance(calls, SharedCalls):
            calls = calls.select()
        answers = self._batch(calls)
        if len(answers) == 1 and isinstance(answers[0], Relayed):
            return answers[0].hits
        if len(calls) > 1 and all(method == "query" for _, method, _ in calls):
            # (a query phase's shards here: what their candidates hold of no page stays here)
            query_and_fetch.machine_candidates(
                [
                    (args[0], answer[1])
                    for (_, _, args), answer in zip(calls, answers, strict=True)
                    if not isinstance(answer, Refusal)
                ]
            )
        return wire_pickle.dumps(answers)

    def _batch(self, calls: list[ShardCall]) -> list[Any]:
        if not calls:
            return []
        self._count(calls[0])
        if len(calls) == 1:
            return [self._run(calls[0])]
        return list(self._pool.map(self._run, calls))

    def call(self, key: ShardKey, method: str, *args: Any) -> Any:
        """One shard's call alone (a message not waited for, tools)."""
        self._count((key, method, args))
        return self._run((key, method, args))

    def _count(self, call: ShardCall) -> None:
        _, method, args = call
        along = method == "query" and getattr(args[0], "fetch", None) is not None
        with self._calls_lock:
            self._calls["query_fetch" if along else method] += 1

    def _run(self, call: ShardCall) -> Any:
        key, method, args = call
        if method not in SHARD_METHODS:
            raise ValueError(f"[{method}] is not a shard method")
        if method == "put_index":
            return self._put_index(key, *args)
        if method == "start_recovery":
            return self._start_recovery(key, *args)
        if method == "finish_recovery":
            return self._finish_recovery(key, *args)
        shard = self._shards.get(key)
        if shard is None:
            return Refusal(ShardUnavailable(f"[{key[0]}][{key[1]}] is not open on this machine"))
        if method in ("close_shard", "destroy"):
            return self._end(key, shard, method)
        if isinstance(shard, RecoveringCopy) and not hasattr(shard, method):
            # (a search, a coordinator's write or refresh: until the copy opens, as if not open)
            return Refusal(ShardUnavailable(f"{shard._describe()} is recovering on this machine"))
        try:
            return getattr(shard, method)(*args)
        except ElasticError as exc:
            return Refusal(exc)
        except Exception as exc:  # this shard's alone: the call's other shards still answer
            _log.exception("[%s][%d] %s failed", shard.index.name, key[1], method)
            return Refusal(ElasticError(f"{shard._describe()} {method} failed: {type(exc).__name__}: {exc}"))

    def _put_index(self, key: ShardKey, folder: str, state: IndexState, order: int = 0) -> Refusal | None:
        """The coordinator's index state for a shard (`order`: its cluster version,
        `ShardActor.put_index`), which this machine opens from `folder` when it does not hold it
        yet (a new index, an opened one)."""
        try:
            with self._hosting:
                shard = self._shards.get(key)
                if shard is None:
                    if order and order <= self._ended.get(key, 0):
                        return Refusal(ShardUnavailable(f"[{key[0]}][{key[1]}] was closed on this machine"))
                    self._ended.pop(key, None)
                    shard = self._shards[key] = ShardActor(folder, state, key[1], self._merge_worker)
                    shard.peer = self._peer
                    self._record()
            shard.put_index(state, order)
        except ElasticError as exc:
            return Refusal(exc)
        return None

    def _start_recovery(self, key: ShardKey, folder: str, state: IndexState, order: int, term: int) -> None:
        """The copy of `key` starts over, to recover from its primary (`ShardActor.recover_to`)."""
        with self._hosting:
            old = self._shards.pop(key, None)
            if old is not None:
                old.abandon()
            self._shards[key] = RecoveringCopy(folder, state, key[1], term)  # type: ignore[assignment]
            self._record()
        return None

    def _finish_recovery(self, key: ShardKey, manifest: dict[str, Any]) -> int | Refusal:
        copy = self._shards.get(key)
        if not isinstance(copy, RecoveringCopy):
            return Refusal(ShardUnavailable(f"[{key[0]}][{key[1]}] is not recovering on this machine"))

        def open_shard() -> ShardActor:
            opened = ShardActor(str(copy.folder), copy.state_body, key[1], self._merge_worker)
            opened.peer = self._peer
            return opened

        ops = copy.finish(manifest, open_shard)
        with self._hosting:
            if self._shards.get(key) is copy:
                self._shards[key] = copy.successor  # type: ignore[assignment]
                self._record()
        return ops

    def _end(self, key: ShardKey, shard: ShardActor, method: str) -> None:
        """`close_shard` or `destroy`; the machine no longer holds it (nor would a restart)."""
        with self._hosting:
            if self._shards.get(key) is not shard:
                return
            del self._shards[key]
            self._record()
            self._ended[key] = shard.state_order
            while len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)
        if method == "close_shard":
            shard.close_shard()
        else:
            shard.destroy()
