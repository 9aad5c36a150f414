"""The coordinator's side of a Ray-backed index: its shard actors behind the engine's seams.

- `RemoteIndex` (`Index.remote`): the index's actors by shard number; sends them the index's
  state (mapping, settings) when it changes, its shard writes (all shards at once), refreshes.
- `RemoteShard` (what `Index.shards` holds): what the node reads of a shard (its number, its
  search counters) and the lease on its snapshot that a search takes (`acquire_searcher`).
- `RemoteSnapshot` (a `Target.searcher`): a lease on one snapshot of the actor. The first phase
  of a search that names no context pins the actor's current snapshot and the lease keeps the
  pin's id, so every later phase of that search (DFS, query, fetch) reads the same snapshot;
  a search's last fetch hands the pin to the actor, which frees it as it answers, and
  otherwise the last `release` frees it (a message not waited for).
- `RayShard`: `ShardSearch` over an actor, what the search code calls for such a target.

A Ray error (the actor died, is restarting, or its node is gone) becomes Elasticsearch's error
for an unavailable shard: `unavailable_shards_exception` (503) for a write, and for a search
phase `no_shard_available_action_exception`, which the coordinator reports as the shard's
failure.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import ActorUnschedulableError, GetTimeoutError, RayActorError

from leafsearch.errors import ElasticError, IndexClosed, SearchContextMissing, ShardFailed, ShardUnavailable
from leafsearch.index.shard_listing import ShardListing, ShardMissing
from leafsearch.index.shard_write import DocRead, ShardWrite, ShardWriteOutcome
from leafsearch.ray_backend.actor import Refusal
from leafsearch.search.dfs import DfsStats
from leafsearch.search.shard_api import (
    ShardContextId,
    ShardDfs,
    ShardFetch,
    ShardFetchResult,
    ShardQuery,
    ShardTopDocs,
)
from leafsearch.search.stats import SearchStats
from leafsearch.search.workers.mirror import IndexState

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.ray_backend.cluster import RayBackend
    from leafsearch.search.targets import Target

#: What a call to a shard actor raises when the actor cannot answer: it died or is restarting
#: (`RayActorError`), its node is gone and it was pinned there (`ActorUnschedulableError`, not
#: a `RayActorError`), or it did not answer in time.
UNAVAILABLE = (RayActorError, ActorUnschedulableError, GetTimeoutError)

#: How long a coordinator waits for a shard actor's answer (Elasticsearch's default timeout of a
#: write waiting for its primary, and of a search's shard request without `timeout`).
CALL_TIMEOUT_SECONDS = 60.0
#: How long a health check waits for the shard actors' answers: one that has not answered by
#: then (dead, restarting, its node gone, or stuck) counts as an unassigned primary.
HEALTH_TIMEOUT_SECONDS = 2.0


def unavailable_for_write(index: Index, shard_id: int, count: int, cause: Exception) -> ElasticError:
    """Elasticsearch's UnavailableShardsException for a bulk shard request whose primary is down."""
    return ElasticError(
        f"[{index.name}][{shard_id}] primary shard is not active: {type(cause).__name__}, request: "
        f"[BulkShardRequest [[{index.name}][{shard_id}]] containing [{count}] requests]",
        status=503,
        error_type="unavailable_shards_exception",
    )


#: Times a search phase is sent to an actor that died or was restarting while it had it: a read
#: changes nothing, and sent again it waits for Ray's restart of the actor (whose contexts kept
#: on disk are still there), so a walk goes on over an actor restart.
PHASE_ATTEMPTS = 3


def answer(
    ref: Any, shard: str, timeout: float = CALL_TIMEOUT_SECONDS, again: Callable[[], Any] | None = None
) -> Any:
    """An actor method's answer; a `Refusal` raised as its error, a Ray failure as the shard's
    unavailability. `again`: sends the call again when the actor died or restarted under it (a
    read), up to `PHASE_ATTEMPTS` times in all."""
    attempts = PHASE_ATTEMPTS if again is not None else 1
    for attempt in range(1, attempts + 1):
        try:
            value = ray.get(ref, timeout=timeout)
            break
        except RayActorError as exc:
            if again is None or attempt == attempts:
                raise ShardUnavailable(f"{shard} is unavailable: {type(exc).__name__}") from None
            ref = again()
        except UNAVAILABLE as exc:
            raise ShardUnavailable(f"{shard} is unavailable: {type(exc).__name__}") from None
    if isinstance(value, Refusal):
        raise value.error
    return value


class RemoteIndex:
    """An index's shard actors (see the module's docstring)."""

    def __init__(self, backend: RayBackend, index: Index, placement: list[dict[str, str]]) -> None:
        self.backend = backend
        self.index = index
        self.placement = placement
        state = self.state()
        self.actors = [backend.actor(state, i, p) for i, p in enumerate(placement)]
        self.shards = [RemoteShard(self, i) for i in range(len(placement))]
        self._lock = threading.Lock()
        #: Per shard, the version of the index state it acknowledged (None: not yet).
        self._sent: list[tuple[int, int] | None] = [None] * len(placement)
        self.push_state(range(len(placement)))

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
        """Send the index's state to those shards that have not acknowledged its current version
        (each keeps it before answering); per shard that could not take it, why. A shard is sent
        a write only once it holds the state the write was parsed with: replaying its translog,
        it parses with that state."""
        with self._lock:
            version = self._version()
            stale = [i for i in shard_ids if self._sent[i] != version]
            if not stale:
                return {}
            state = self.state()
            order = self.index.shared_version
            refs = {i: self.actors[i].put_index.remote(state, order) for i in stale}
            failed: dict[int, ElasticError] = {}
            for shard_id, ref in refs.items():
                try:
                    answer(ref, self.describe(shard_id))
                    self._sent[shard_id] = version
                except ElasticError as exc:
                    failed[shard_id] = exc
            return failed

    def describe(self, shard_id: int) -> str:
        return f"[{self.index.name}][{shard_id}]"

    def retain_contexts(self, names: list[set[str]]) -> None:
        """A restarted coordinator holds, per shard, the contexts named in `names`: each actor
        frees the others opened before now (its pins of contexts freed while it could not
        answer, and the in-memory contexts of the searches the coordinator was running; a call
        that arrives late leaves the new ones alone). All actors at once; one that cannot answer
        keeps its pins until the next start."""
        since = time.time()
        pairs = zip(self.actors, names, strict=True)
        refs = [actor.retain_contexts.remote(sorted(kept), since) for actor, kept in pairs]
        for shard_id, ref in enumerate(refs):
            with contextlib.suppress(ShardUnavailable):
                answer(ref, self.describe(shard_id))

    def write(self, writes: list[ShardWrite]) -> list[ShardWriteOutcome | ElasticError]:
        """Every shard's write at once; per write its outcomes, or the error that failed it."""
        return self.send(writes)()

    def send(self, writes: list[ShardWrite]) -> Callable[[], list[ShardWriteOutcome | ElasticError]]:
        """Send every shard's write at once; the function that waits for their answers: per
        write its outcomes, or the error that failed it (an unavailable shard: Elasticsearch's
        `unavailable_shards_exception`, nothing applied, or, when the actor died while applying
        it, maybe applied: as with a primary lost before it answered, the client cannot know,
        and the write's translog decides on recovery)."""
        failed = self.push_state(w.shard_id for w in writes)
        refs = [None if w.shard_id in failed else self.actors[w.shard_id].write.remote(w) for w in writes]

        def results() -> list[ShardWriteOutcome | ElasticError]:
            out: list[ShardWriteOutcome | ElasticError] = []
            for write, ref in zip(writes, refs, strict=True):
                try:
                    if ref is None:
                        raise failed[write.shard_id]
                    out.append(answer(ref, self.describe(write.shard_id)))
                except ShardUnavailable as exc:
                    if self.index.closed:  # the actor ended with the index's close
                        out.append(IndexClosed(self.index.name, self.index.uuid))
                    else:
                        out.append(unavailable_for_write(self.index, write.shard_id, len(write.ops), exc))
                except ElasticError as exc:
                    out.append(exc)
            return out

        return results

    def get(self, shard_id: int, doc_id: str, realtime: bool) -> DocRead | None:
        return answer(self.actors[shard_id].get.remote(doc_id, realtime), self.describe(shard_id))

    def inactive_shards(self) -> list[int]:
        """The shards whose actor does not answer now: the primaries Elasticsearch would list
        unassigned. Why a call rather than Ray's actor states: those are readable without a call
        only through Ray's state API, which needs the dashboard a cluster may run without; and
        an answer is what a search needs of the shard. One call per shard, all at once."""
        refs = [actor.where.remote() for actor in self.actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=HEALTH_TIMEOUT_SECONDS)
        answered = set(ready)
        inactive = []
        for shard_id, ref in enumerate(refs):
            try:
                if ref not in answered:
                    raise GetTimeoutError
                ray.get(ref, timeout=0)
            except UNAVAILABLE:
                inactive.append(shard_id)
        return inactive

    def listings(self) -> list[ShardListing | ShardMissing]:
        """Every shard's listing (index/shard_listing.py), the actors asked at once; a shard
        whose actor cannot answer is listed as missing, with whether its Ray node is gone."""
        refs = [actor.listing.remote() for actor in self.actors]
        alive: set[str] | None = None
        out: list[ShardListing | ShardMissing] = []
        for shard_id, ref in enumerate(refs):
            try:
                out.append(answer(ref, self.describe(shard_id)))
            except ShardUnavailable as exc:
                if alive is None:
                    alive = set(self.backend.alive_nodes())
                out.append(ShardMissing(shard_id, exc, self.placement[shard_id]["node"] not in alive))
        return out

    def refresh(self) -> None:
        refs = [actor.refresh.remote() for actor in self.actors]
        for shard_id, ref in enumerate(refs):
            answer(ref, self.describe(shard_id))

    def close(self) -> None:
        """`_close`: each shard flushes (every acknowledged write into a committed segment), then
        its actor ends: a closed index holds no process. A shard that cannot answer (its actor is
        down) still has every acknowledged write in its translog, which the open replays. Returns
        once every actor is gone, so an open right after creates new ones under the same names."""
        refs = [actor.close_shard.remote() for actor in self.actors]
        for ref in refs:
            with contextlib.suppress(*UNAVAILABLE):
                ray.get(ref, timeout=CALL_TIMEOUT_SECONDS)
        self._end_actors()

    def _end_actors(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        for actor in self.actors:  # a call to a killed actor fails once Ray has let it go
            with contextlib.suppress(*UNAVAILABLE):
                ray.get(actor.where.remote(), timeout=CALL_TIMEOUT_SECONDS)

    def destroy(self) -> None:
        """Delete every shard's folder and end its actor."""
        refs = [actor.destroy.remote() for actor in self.actors]
        for ref in refs:
            # (a dead shard's folder is left behind; its actor goes below anyway)
            with contextlib.suppress(*UNAVAILABLE):
                ray.get(ref, timeout=CALL_TIMEOUT_SECONDS)
        self._end_actors()


class RemoteShard:
    """A shard of a Ray-backed index as the node sees it (an entry of `Index.shards`)."""

    segments: tuple = ()  # merges are the actor's own

    def __init__(self, remote: RemoteIndex, shard_id: int) -> None:
        self.remote = remote
        self.shard_id = shard_id
        self.search_stats = SearchStats()

    @property
    def actor(self) -> Any:
        return self.remote.actors[self.shard_id]

    def acquire_searcher(self) -> RemoteSnapshot:
        return RemoteSnapshot(self)

    def refresh(self) -> None:
        answer(self.actor.refresh.remote(), self.remote.describe(self.shard_id))

    def maybe_merge(self) -> bool:
        return False

    def close(self) -> None:
        """Nothing: the actor outlives the coordinator (a restarted one finds it again)."""

    def _counts(self) -> dict[str, int]:
        return answer(self.actor.stats.remote(), self.remote.describe(self.shard_id))

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
        """The shard's `_stats` sections from its actor, with this coordinator's search counters."""
        stats = answer(
            self.actor.stats_sections.remote(metrics, file_sizes), self.remote.describe(self.shard_id)
        )
        if "search" in stats:
            stats["search"] = {"open_contexts": open_contexts, **self.search_stats.snapshot()}
        return stats


class RemoteSnapshot:
    """A lease on one snapshot of a shard actor (see the module's docstring); a `Target`'s
    searcher for a Ray-backed index."""

    remote = True

    def __init__(self, shard: RemoteShard) -> None:
        self.shard = shard
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
            self.shard.actor.free_context.remote(context)  # not waited for

    def pin(self, context: ShardContextId) -> ShardContextId:
        """Keep the context the first phase pinned; a second one (two phases raced) is freed."""
        with self._lock:
            if self.context is None and self._refs > 0:
                self.context = context
                return context
            kept = self.context
        self.shard.actor.free_context.remote(context)
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
    """`ShardSearch` over a shard actor, for one target of a search. Its phases are sent
    (`send`) and waited for apart, so a search sends every shard's message before it waits for
    any (`shard_api.each_phase`)."""

    def __init__(self, snapshot: RemoteSnapshot, target: Target) -> None:
        self.snapshot = snapshot
        self.alias_filter = target.alias_filter
        self.name = snapshot.shard.remote.describe(snapshot.shard.shard_id)

    def open_context(self, name: str | None = None) -> ShardContextId:
        """With `name`, the actor keeps the pin on disk (a PIT's or a scroll's), and serves it
        by that name after Ray restarts it, or a restarted coordinator sends its recorded id."""
        return answer(self.snapshot.shard.actor.open_context.remote(self.alias_filter, name), self.name)

    def free_context(self, context: ShardContextId) -> bool:
        """Raises `ShardUnavailable` when the actor cannot answer (the caller frees a pin kept on
        disk again later)."""
        return bool(answer(self.snapshot.shard.actor.free_context.remote(context), self.name))

    def send(self, phase: str, message: Any) -> Callable[[], Any]:
        """Send a phase ("dfs", "query", "fetch") to the actor; the function that waits for its
        answer. A message naming no context reads the snapshot this search pinned (the first
        phase pins the actor's current one, named in its answer; an actor whose query found no
        hit frees its pin at once and names none). A search's last fetch hands the pin over:
        the actor frees it as it answers, so no release message follows; so does a query that
        fetches its page as the search's last phase (search/query_and_fetch.py). The phase's
        unavailability, or the loss of the context it names, fails this shard alone
        (`ShardFailed`); an actor that died or restarted under it is sent it again
        (`PHASE_ATTEMPTS`): a PIT's or scroll's context is still there, by its name."""
        snapshot = self.snapshot
        actor = snapshot.shard.actor
        free_after = False
        if message.context is None:
            context = snapshot.hand_over() if _last_phase(phase, message) else None
            free_after = context is not None
            if context is None:  # (not handed over: another holder of the lease may read it)
                context = snapshot.context
            if context is not None:
                message = replace(message, context=context)
        method = getattr(actor, phase)
        args = (
            (message, self.alias_filter, free_after)
            if phase in ("fetch", "query")
            else (message, self.alias_filter)
        )

        def submit() -> Any:
            return method.remote(*args)

        ref = submit()

        def wait() -> Any:
            try:
                context, result = answer(ref, self.name, again=submit)
            except (ShardUnavailable, SearchContextMissing) as exc:
                shard = snapshot.shard
                raise ShardFailed(exc, message.shard_index, shard.remote.index.name, shard.shard_id) from None
            if message.context is None and context is not None:
                snapshot.pin(context)
            return result

        return wait

    def dfs(self, request: ShardDfs) -> DfsStats:
        return self.send("dfs", request)()

    def query(self, query: ShardQuery) -> ShardTopDocs:
        return self.send("query", query)()

    def fetch(self, fetch: ShardFetch) -> ShardFetchResult:
        return self.send("fetch", fetch)()


def _last_phase(phase: str, message: Any) -> bool:
    """Whether a message is the search's last phase on its shard: a fetch so marked, or a query
    that runs such a fetch with it."""
    if phase == "fetch":
        return bool(message.last_phase)
    return phase == "query" and message.fetch is not None and message.fetch.last_phase
