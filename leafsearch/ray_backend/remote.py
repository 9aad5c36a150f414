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
"""

from __future__ import annotations

import contextlib
import pickle
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
from leafsearch.ray_backend.actor import Refusal, ShardCall, ShardKey
from leafsearch.ray_backend.channel import ChannelBroken, Channels, ChannelTimeout, Pending
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
#: How often a call waiting for its machine's answer checks that the machine is still there.
PRESENCE_SECONDS = 1.0
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
        self._message = pickle.dumps(calls, protocol=pickle.HIGHEST_PROTOCOL)
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
            while self._answers is None:
                if self._pending is not None:
                    pending, self._pending = self._pending, None
                    try:
                        self._answers = pickle.loads(pending.answer(self._deadline))
                        break
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
            return self._answers


class _RayTask:
    """A machine call sent as a Ray task (`MachineCall`)."""

    def __init__(self, machine: Machine, message: bytes) -> None:
        self.machine = machine
        self.ref = machine.actor.batch.options(max_task_retries=0).remote(message)

    def answer(self, deadline: float) -> bytes:
        return until_gone(self.machine, self.ref, deadline)


def until_gone(machine: Machine, ref: Any, deadline: float) -> Any:
    """What the Ray call `ref` to `machine`'s actor answers by `deadline`, checking every
    `PRESENCE_SECONDS` that the machine is there: Ray holds a call to an actor not yet scheduled
    until the machine returns (its node restarted), and the shard must fail now instead. The call
    is cancelled: unsent, it would otherwise run, for no one, once the machine returns."""
    while True:
        left = max(0.0, deadline - time.monotonic())
        try:
            return ray.get(ref, timeout=min(left, PRESENCE_SECONDS))
        except GetTimeoutError:
            if time.monotonic() >= deadline:
                raise
            if not machine.present():
                with contextlib.suppress(Exception):  # (already sent, or answered since)
                    ray.cancel(ref)
                raise MachineGone(machine.name) from None


def send_calls(
    channels: Channels | None,
    calls: list[tuple[Machine, ShardCall, str]],
    *,
    again: bool = False,
    deadline: float | None = None,
) -> list[Callable[[], Any]]:
    """Send shards' calls, one call per machine actor carrying all of its shards' (each given as
    (machine, shard call, shard name)); per call the function that waits for its answer:
    the shard's answer, its `Refusal` raised, the machine's failure as the shard's
    `ShardUnavailable`."""
    by_machine: dict[Machine, list[int]] = {}
    for i, (machine, _, _) in enumerate(calls):
        by_machine.setdefault(machine, []).append(i)
    waits: list[Callable[[], Any]] = [None] * len(calls)  # type: ignore[list-item]
    for machine, positions in by_machine.items():
        call = MachineCall(channels, machine, [calls[i][1] for i in positions], again, deadline)
        for j, i in enumerate(positions):
            waits[i] = _waiter(call, j, calls[i][2])
    return waits


def _waiter(call: MachineCall, j: int, shard: str) -> Callable[[], Any]:
    def wait() -> Any:
        try:
            answers = call.answers()
        except UNAVAILABLE as exc:
            raise ShardUnavailable(f"{shard} is unavailable: {type(exc).__name__}") from None
        return unwrap(answers[j])

    return wait


class RemoteIndex:
    """An index's shards on their machine actors (see the module's docstring)."""

    def __init__(self, backend: RayBackend, index: Index, placement: list[dict[str, str]]) -> None:
        self.backend = backend
        self.index = index
        self.placement = placement
        names = backend.machines_of(placement)
        machines = {name: backend.machine(name) for name in sorted(set(names))}
        #: Per shard, its machine.
        self.machines = [machines[name] for name in names]
        self.shards = [RemoteShard(self, i) for i in range(len(placement))]
        self._lock = threading.Lock()
        #: Per shard, the version of the index state it acknowledged (None: not yet).
        self._sent: list[tuple[int, int] | None] = [None] * len(placement)
        self.push_state(range(len(placement)))

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
        """Send the index's state to those shards that have not acknowledged its current version
        (each keeps it before answering; a machine opens a shard it does not hold from its
        folder); per shard that could not take it, why. A shard is sent a write only once it
        holds the state the write was parsed with: replaying its translog, it parses with that
        state."""
        with self._lock:
            version = self._version()
            stale = [i for i in shard_ids if self._sent[i] != version]
            if not stale:
                return {}
            state = self.state()
            order = self.index.shared_version
            waits = self.calls("put_index", [(i, (self.placement[i]["folder"], state, order)) for i in stale])
            failed: dict[int, ElasticError] = {}
            for shard_id, wait in zip(stale, waits, strict=True):
                try:
                    wait()
                    self._sent[shard_id] = version
                except ElasticError as exc:
                    failed[shard_id] = exc
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
        failed = self.push_state(w.shard_id for w in writes)
        ready = [i for i, w in enumerate(writes) if w.shard_id not in failed]
        sent = self.calls("write", [(writes[i].shard_id, (writes[i],)) for i in ready])
        waits = dict(zip(ready, sent, strict=True))

        def results() -> list[ShardWriteOutcome | ElasticError]:
            out: list[ShardWriteOutcome | ElasticError] = []
            for i, write in enumerate(writes):
                try:
                    if i not in waits:
                        raise failed[write.shard_id]
                    out.append(waits[i]())
                except ShardUnavailable as exc:
                    if self.index.closed:  # the shard ended with the index's close
                        out.append(IndexClosed(self.index.name, self.index.uuid))
                    else:
                        out.append(unavailable_for_write(self.index, write.shard_id, len(write.ops), exc))
                except ElasticError as exc:
                    out.append(exc)
            return out

        return results

    def get(self, shard_id: int, doc_id: str, realtime: bool) -> DocRead | None:
        return self.call(shard_id, "get", doc_id, realtime)

    def inactive_shards(self) -> list[int]:
        """The shards that do not answer now (their machine actor, or the shard in it): the
        primaries Elasticsearch would list unassigned. Why a call rather than Ray's actor
        states: those are readable without a call only through Ray's state API, which needs the
        dashboard a cluster may run without; and an answer is what a search needs of the shard.
        One call per machine, all at once, as Ray tasks (Ray's view of the actors, `MachineCall`),
        waited for `HEALTH_TIMEOUT_SECONDS` in all."""
        deadline = time.monotonic() + HEALTH_TIMEOUT_SECONDS
        waits = self.calls(
            "where", [(i, ()) for i in range(len(self.shards))], deadline=deadline, through_ray=True
        )
        inactive = []
        for shard_id, wait in enumerate(waits):
            try:
                wait()
            except ShardUnavailable:
                inactive.append(shard_id)
        return inactive

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
                out.append(ShardMissing(shard_id, exc, not self.machines[shard_id].present()))
        return out

    def refresh(self) -> None:
        for wait in self.each("refresh"):
            wait()

    def close(self) -> None:
        """`_close`: each shard flushes (every acknowledged write into a committed segment) and
        its machine lets it go (a restarted machine does not reopen it): a closed index holds
        nothing. A shard that cannot answer (its machine is down) still has every acknowledged
        write in its translog, which the open replays."""
        self._end("close_shard")

    def destroy(self) -> None:
        """Delete every shard's folder; its machine lets it go (a dead machine's folder is left
        behind)."""
        self._end("destroy")

    def _end(self, method: str) -> None:
        for wait in self.each(method):
            with contextlib.suppress(ElasticError):
                wait()


class RemoteShard:
    """A shard of a Ray-backed index as the node sees it (an entry of `Index.shards`)."""

    segments: tuple = ()  # merges are the machine's own

    def __init__(self, remote: RemoteIndex, shard_id: int) -> None:
        self.remote = remote
        self.shard_id = shard_id
        self.search_stats = SearchStats()

    def call(self, method: str, *args: Any) -> Any:
        return self.remote.call(self.shard_id, method, *args)

    def tell(self, method: str, *args: Any) -> None:
        """`method` sent and not waited for."""
        self.remote.machines[self.shard_id].actor.call.remote(self.remote.key(self.shard_id), method, *args)

    def acquire_searcher(self) -> RemoteSnapshot:
        return RemoteSnapshot(self)

    def refresh(self) -> None:
        self.call("refresh")

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
            self.shard.tell("free_context", context)

    def pin(self, context: ShardContextId) -> ShardContextId:
        """Keep the context the first phase pinned; a second one (two phases raced) is freed."""
        with self._lock:
            if self.context is None and self._refs > 0:
                self.context = context
                return context
            kept = self.context
        self.shard.tell("free_context", context)
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
        self.route = shard.remote.machines[shard.shard_id]

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
        channels = self.snapshot.shard.remote.backend.channels
        for shard, args in calls:
            remote = shard.snapshot.shard
            shard_args = (shard.alias_filter, *args) if method == "open_context" else args
            sent.append((shard.route, (remote.remote.key(remote.shard_id), method, shard_args), shard.name))
        return send_calls(channels, sent)

    def send_all(self, phase: str, sends: list[tuple[RayShard, Any]]) -> list[Callable[[], Any]]:
        """Send a phase ("dfs", "query", "fetch") to shards of this shard's machine, one message
        each, in one call; per message the function that waits for its answer. A message naming
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
            prepared, args = shard._prepare(phase, message)
            remote = shard.snapshot.shard.remote
            calls.append((shard.route, (remote.key(shard.snapshot.shard.shard_id), phase, args), shard.name))
            sent.append((shard, prepared))
        waits = send_calls(self.snapshot.shard.remote.backend.channels, calls, again=True)
        return [shard._finish(message, wait) for (shard, message), wait in zip(sent, waits, strict=True)]

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

    def _finish(self, message: Any, wait: Callable[[], Any]) -> Callable[[], Any]:
        snapshot = self.snapshot

        def finish() -> Any:
            try:
                context, result = wait()
            except (ShardUnavailable, SearchContextMissing) as exc:
                shard = snapshot.shard
                raise ShardFailed(exc, message.shard_index, shard.remote.index.name, shard.shard_id) from None
            if message.context is None and context is not None:
                snapshot.pin(context)
            return result

        return finish

    def send(self, phase: str, message: Any) -> Callable[[], Any]:
        (wait,) = self.send_all(phase, [(self, message)])
        return wait

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
