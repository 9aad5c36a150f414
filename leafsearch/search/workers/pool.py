"""The server process's side of the search workers: start them, send them tasks, replace the dead.

Why processes: one Python interpreter runs one thread of Python at a time, so a server process
alone uses one core however many clients it has. The search work (query, fetch, rendering) runs
in `count` worker processes instead, each with its own interpreter, over the same immutable,
memory-mapped segment files. Writes, refreshes, merges and reader contexts (their lifetime,
keep-alive, a scroll's position) stay in the server process, which resolves each request's
snapshots and sends the task (search/execution.py) with the snapshots' manifests the worker does
not know yet (mirror.py).

- **Which worker**: a request that is no walk goes to the worker with the fewest tasks in
  flight. The requests of one walk (a scroll, or one slice of a PIT walk) go to the process that
  served it first, where its hit list and pages read ahead are; different walks are spread, so
  the slices of one export run in different processes at once. A walk that starts while no
  other search runs stays in the server process (`search.workers.lone_walks_in_server`): alone
  it gains nothing from another process, and relaying its pages costs the server more than
  rendering them; it moves to a worker once other walks run beside it. Likewise a one-shot
  request that arrives while nothing else runs (`search.workers.lone_requests_in_server`): it is
  spared the round trip.
- **Start-up**: workers start in the background; until one is ready, tasks run in the server
  process, so the server answers at once. `leafsearch serve` passes `defer_start` and
  calls `start()` once it has answered its first request: the workers' own start-up (each
  interpreter imports the engine) then does not take the cores from the server's. A worker
  ignores SIGINT and imports every module it can run before it reports itself ready (entry.py). A
  worker that exits while starting because the pool closes is no error.
- **Faults**: a worker that dies is replaced. Its tasks in flight fail with a 500
  (`node_disconnected_exception` inside `search_phase_execution_exception`), never a hang; the
  walks it served go on in its replacement, which rebuilds their matches from the snapshots the
  contexts still pin (a scroll's position is the server process's), so nothing is missed or
  served twice. A request whose client goes away cancels its task in the worker.
- **Memory**: each worker bounds its caches by its share of the node's cache settings; the
  segment files are shared through the page cache.
- **Jobs** (`run_job`): pure work the server process hands over while the workers would idle
  (`bulk_offload.py`: a bulk body split, an index's documents parsed), with the index states it
  needs. A job changes nothing, so when no worker can take it the caller does it itself.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import pickle
import queue
import signal
import threading
from dataclasses import asdict, dataclass, replace
from functools import partial
from multiprocessing import reduction
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leafsearch.errors import ElasticError, SearchPhaseExecution
from leafsearch.index.events import ShardEvents
from leafsearch.index.searcher import Searcher
from leafsearch.search import execution
from leafsearch.search.scroll_pit import extend_record
from leafsearch.search.socket_sink import (
    SCROLL_SLOTS,
    Confirm,
    ParkedConnections,
    ResponseCut,
    Written,
    security_stamp,
)
from leafsearch.search.targets import Target
from leafsearch.search.workers import entry
from leafsearch.search.workers.mirror import IndexState, TargetRef, snapshot_state
from leafsearch.search.workers.records_ahead import RecordsAhead
from leafsearch.search.workers.wire import receive

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.search.services import CoordinatorServices

log = logging.getLogger("leafsearch.search_workers")

#: Tasks one worker runs at once: a second keeps a cheap request from waiting behind a slow one.
THREADS_PER_WORKER = 2
#: How often a task's waiter looks whether its client went away.
_CANCEL_POLL_SECONDS = 0.05
#: Walks whose worker is remembered (an open context has at most a few: one per slice).
_MAX_WALKS = 65_536
#: How long a scroll's request waits for the worker keeping its connection to tell its batches.
_TOLD_WAIT_SECONDS = 10.0
#: The cluster setting that lets a walk started alone run in the server process (`_choose`).
LONE_WALKS_IN_SERVER = "search.workers.lone_walks_in_server"
#: The cluster setting that lets a one-shot request run in the server process when nothing else
#: runs (`_take_here`).
LONE_REQUESTS_IN_SERVER = "search.workers.lone_requests_in_server"


@dataclass(slots=True)
class _ParkedWalk:
    """A PIT walk's or scroll's connection a worker may keep (workers/parking.py): what the
    server process does for each page it serves there (the context's keep-alive, the search
    stats, a scroll's position)."""

    pid: int | None
    public_id: str
    keep_alive: float
    targets: list[Target]
    kind: str = "pit"
    ctx_id: int = -1


class _WorkerGone(Exception):
    """The chosen worker died before the task was sent."""


class WorkerUnavailable(Exception):
    """No worker ran the job (none ready, or it died first); the caller runs it itself."""


class _Call:
    """One task in flight: its reply arrives from the worker's reader thread, and before it, for
    a response the worker writes to the client's socket once confirmed, what it rendered."""

    __slots__ = ("done", "reply", "rendered", "writing")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: tuple[str, Any, list] | None = None
        self.rendered: Any = None
        #: The worker said it writes to the client's socket: if it dies now, what reached the
        #: client is unknown (before, nothing did: its death is an error response).
        self.writing = False

    def finish(self, kind: str, payload: Any, phases: list) -> None:
        self.reply = (kind, payload, phases)
        self.done.set()

    def render(self, summary: Any) -> None:
        self.rendered = summary
        self.writing = True
        self.done.set()

    def take_rendered(self) -> Any:
        """What the worker rendered and waits to write, once (None: nothing waits)."""
        summary, self.rendered = self.rendered, None
        if summary is not None:
            self.done.clear()
            if self.reply is not None:  # a reply (the worker died) came meanwhile
                self.done.set()
        return summary


class _Worker:
    """A running worker process and what the server process has told it."""

    def __init__(self, pool: WorkerPool, slot: int, proc: BaseProcess, conn: Connection) -> None:
        self.pool = pool
        self.slot = slot
        self.process = proc
        self.conn = conn
        self.lock = threading.Lock()
        self.alive = True
        self.inflight: dict[int, _Call] = {}
        self.indices: dict[str, tuple] = {}  # uuid -> (mapping version, settings) it has
        self.snapshots: set[int] = set()  # snapshot uids it has
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._write_lock = threading.Lock()
        self._reaping = threading.Lock()
        self.sent = 0  # messages written to the connection
        for name, target in (("reader", self._read), ("sender", self._send)):
            threading.Thread(
                target=target, name=f"leafsearch-search-worker-{slot}-{name}", daemon=True
            ).start()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def submit(self, call_id: int, task: execution.Task) -> _Call:
        """Send a task with the updates the worker needs first, from the caller's thread (a
        hand-off to the sender thread would cost a thread switch on every request).

        The write lock is held from the choice of updates to the write: a task that only names a
        snapshot must not overtake the message that carries its manifest."""
        call = _Call()
        with self._write_lock:
            with self.lock:
                if not self.alive:
                    raise _WorkerGone
                updates, refs = self._describe(task.targets)
                self.inflight[call_id] = call
            self._write_call(call_id, ("task", call_id, updates, replace(task, targets=refs)), updates)
        return call

    def submit_job(self, call_id: int, job: Any, indices: list[Index]) -> _Call:
        """Send a job (`bulk_offload.py`) with the states of `indices` the worker lacks, as
        `submit` sends a task."""
        call = _Call()
        with self._write_lock:
            with self.lock:
                if not self.alive:
                    raise _WorkerGone
                updates = [state for state in map(self._index_update, indices) if state is not None]
                self.inflight[call_id] = call
            self._write_call(call_id, ("job", call_id, updates, job), updates)
        return call

    def _write_call(self, call_id: int, message: tuple, updates: list[Any]) -> None:
        """Write a task or job (the caller holds the write lock); one that does not pickle fails
        alone."""
        try:
            data = pickle.dumps(message, protocol=5)
        except Exception as exc:  # noqa: BLE001 - a task that does not pickle fails alone
            self._forget_sent(updates)
            self._finish(call_id, "error", (pickle.dumps(RuntimeError(f"cannot send the task: {exc}")), []))
            return
        with contextlib.suppress(OSError, ValueError):  # the worker is gone: the reader fails the call
            self.conn.send_bytes(data)
            self.sent += 1
            sink = getattr(message[-1], "sink", None)
            if sink is not None:  # the client's socket (socket_sink.py), read by the worker right after
                reduction.send_handle(self.conn, sink.fd, self.pid)

    def _write(self, message: tuple) -> None:
        """Pickle and write one message (the sender thread's; tasks are written by `submit`)."""
        data = pickle.dumps(message, protocol=5)
        with self._write_lock:
            self.conn.send_bytes(data)
            self.sent += 1

    def post(self, message: tuple) -> None:
        with self.lock:
            if self.alive:
                self._outbox.put(message)

    def tell(self, message: tuple) -> None:
        """Write a message from the caller's thread, not the sender's: it reaches the worker
        before any task submitted once this returns (tasks are written by `submit`, not queued
        behind `post`'s messages). A worker gone meanwhile: its reader sees it."""
        with contextlib.suppress(OSError, ValueError):
            self._write(message)

    def answer(self, call_id: int, allowed: bool) -> None:
        """Tell the worker whether to write the response it rendered (`Confirm`): the worker
        waits for it, and a hand-off to the sender thread put a thread switch in every scroll
        batch's way. A worker gone meanwhile: its reader fails the call."""
        self.tell(("go", call_id, allowed))

    def _describe(self, targets: list[Target]) -> tuple[list[Any], list[TargetRef]]:
        """The index states and snapshot manifests the worker lacks, and the targets as refs."""
        updates: list[Any] = []
        refs: list[TargetRef] = []
        for target in targets:
            state = self._index_update(target.index)  # type: ignore[arg-type]
            if state is not None:
                updates.append(state)
            index = target.index
            searcher = target.searcher
            if searcher.uid not in self.snapshots:
                updates.append(snapshot_state(index.uuid, searcher))
                self.snapshots.add(searcher.uid)
            refs.append(TargetRef(index.uuid, target.shard_id, searcher.uid, target.alias_filter))
        return updates, refs

    def _index_update(self, index: Index) -> IndexState | None:
        """The index's state when the worker lacks it (caller holds `self.lock`). The mapping's
        version and body are read together under the index lock, so the version a worker reports
        (a parsed bulk batch names it) is the version of the mapping it holds."""
        settings = dict(index.settings)
        if self.indices.get(index.uuid) == (index.mapping.version, tuple(sorted(settings.items()))):
            return None
        with index.lock:  # the mapping is not changed while it is written out
            version = index.mapping.version
            body = index.mapping.to_body()
        self.indices[index.uuid] = (version, tuple(sorted(settings.items())))
        return IndexState(index.uuid, index.name, settings, body, index.num_shards, version)

    def _forget_sent(self, updates: list[Any]) -> None:
        """Updates that were never written: the worker still lacks them."""
        with self.lock:
            for update in updates:
                if isinstance(update, IndexState):
                    self.indices.pop(update.uuid, None)
                else:
                    self.snapshots.discard(update.uid)

    def snapshot_closed(self, uid: int) -> None:
        with self.lock:
            if uid in self.snapshots:
                self.snapshots.discard(uid)
                if self.alive:
                    self._outbox.put(("release", [uid]))

    def _send(self) -> None:
        while True:
            message = self._outbox.get()
            if message is None:
                return
            try:
                self._write(message)
            except (OSError, ValueError):
                return  # the reader sees the worker gone

    def _read(self) -> None:
        while True:
            try:
                message = receive(self.conn)
            except (EOFError, OSError):
                break
            if message[0] in ("done", "error"):
                _, call_id, payload, phases, count = message
                # The payload's out-of-band buffers (rendered pages) follow it, each as it was
                # written: the unpickled result holds them without another copy.
                buffers = [self.conn.recv_bytes() for _ in range(count)]
                self._finish(call_id, message[0], (payload, buffers), phases)
            elif message[0] in ("rendered", "writing"):
                with self.lock:
                    call = self.inflight.get(message[1])
                if call is None:
                    pass
                elif message[0] == "rendered":
                    call.render(message[2])
                else:
                    call.writing = True
            elif message[0] in ("stats", "told"):
                self._finish(message[1], "done", message[2])
            elif message[0] == "served":
                self.pool._parked_served(self, message[1], message[2])
            elif message[0] == "handback":
                self.pool._handed_back(message[1], message[2])
            elif message[0] == "extend":
                self.pool._extend(self, *message[1:])
        self._died()

    def _finish(self, call_id: int, kind: str, payload: Any, phases: list | None = None) -> None:
        with self.lock:
            call = self.inflight.pop(call_id, None)
        if call is not None:
            call.finish(kind, payload, phases or [])

    def _died(self) -> None:
        with self.lock:
            self.alive = False
            calls = list(self.inflight.values())
            self.inflight.clear()
            self.snapshots.clear()
        self._outbox.put(None)
        code = self.ended(timeout=5)
        lost = SearchPhaseExecution(
            ElasticError(
                f"search worker {self.slot} (pid {self.pid}) exited (code {code}) while running the request",
                status=500,
                error_type="node_disconnected_exception",
            )
        )
        for call in calls:
            call.finish("lost", lost, [])
        self.pool._parks_lost(self.pid)
        self.pool._worker_died(self)

    def stop(self) -> None:
        self.post(("stop",))
        self._outbox.put(None)

    def ended(self, timeout: float | None, kill: bool = False) -> int | None:
        """The process's exit code once it ended (None: not within `timeout`; `kill`: killed
        then). One thread at a time reaps it: two waiting at once (this reader's `_died`, the
        pool's `close`) can each see it alive after the other reaped it."""
        with self._reaping:
            self.process.join(timeout)
            if kill and self.process.exitcode is None:
                self.process.kill()
                self.process.join()
            return self.process.exitcode


class WorkerPool:
    """`count` search worker processes; see the module docstring."""

    def __init__(
        self,
        services: CoordinatorServices,
        count: int,
        events: ShardEvents,
        *,
        defer_start: bool = False,
        processes: BaseContext | None = None,
    ) -> None:
        """`events`: the node's shards' (released snapshots and deleted files go to the workers).
        `defer_start`: the workers start only when `start()` is called (`leafsearch serve` calls it
        once it has answered its first request); else at once. `processes`: how a worker process
        starts (`leafsearch serve`: forked from its zygote, zygote.py); None: spawned."""
        self._services = services
        self._processes = processes or multiprocessing.get_context("spawn")
        self._events = events
        self.count = count
        self._slots: list[_Worker | None] = [None] * count
        self._here = count  # the slot number of walks run in this process (see `_choose`)
        self._here_busy = 0  # one-shot requests running in this process (see `_take_here`)
        self.served_here = 0  # one-shot requests this process served while workers were ready
        self._walk_counts = [0] * (count + 1)
        self._walks: dict[tuple, int] = {}  # affinity key -> slot
        self._lock = threading.Lock()
        self._closed = False
        self._calls = itertools.count(1)
        self._next = 0
        self.started = 0  # processes started, replacements included
        self.lost = 0  # workers that died and were replaced
        self.jobs = 0  # jobs (bulk_offload.py) a worker answered
        self.socket_writes = 0  # tasks a worker ran writing to the client's socket (socket_sink.py)
        self._ready = threading.Condition(self._lock)
        self._launched = False  # `start()` was called
        self._starting: dict[int, BaseProcess] = {}  # slot -> a process not ready yet
        #: Connections a worker may have kept after a PIT page or scroll batch (park id -> its walk).
        self._parks: dict[int, _ParkedWalk] = {}
        #: The HTTP layer's parked connections (set by the node); None: nothing is parked.
        self.connections: ParkedConnections | None = None
        #: Generations shared with the workers, which a parked connection's next request must
        #: still find (workers/parking.py): [0] moves on every change to users, roles or API
        #: keys, [1] on every reader context freed (a PIT deleted answers 404 at once).
        #: [2:] count the batches the general path served of each scroll (`scroll_moved`).
        self.security = multiprocessing.get_context("spawn").RawArray("q", 2 + SCROLL_SLOTS)
        self.parked_pages = 0  # pages a worker served on a connection it kept
        #: Writes the records of scrolls kept by workers further ahead (`_extend`).
        self._records_ahead = RecordsAhead()
        events.on_snapshot_closed(self._snapshot_closed)
        events.on_files_deleted(self._files_deleted)
        services.cluster_settings.listeners.append(self._settings_changed)
        if not defer_start:
            self.start()

    # ---- life -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers in the background (once; nothing after `close()`)."""
        with self._lock:
            if self._launched or self._closed:
                return
            self._launched = True
        for slot in range(self.count):
            self._start_in_background(slot)

    def _start_in_background(self, slot: int) -> None:
        threading.Thread(
            target=self._start, args=(slot,), name="leafsearch-worker-start", daemon=True
        ).start()

    def _start(self, slot: int) -> None:
        from leafsearch.search.workers import process

        settings = self._services.cluster_settings
        config = process.WorkerConfig(
            self._services.node_id,
            self.count,
            THREADS_PER_WORKER,
            dict(settings.persistent),
            dict(settings.transient),
        )
        parent, child = self._processes.Pipe()
        proc = self._processes.Process(
            target=entry.main,  # light to import: the worker ignores SIGINT before it imports the engine
            args=(child, asdict(config), self.security),
            name=f"leafsearch-search-worker-{slot}",
            daemon=True,
        )
        with self._lock:
            if self._closed:
                child.close()
                parent.close()
                return
            proc.start()
            self.started += 1
            self._starting[slot] = proc
        child.close()
        try:
            parent.recv()  # ("ready", pid)
        except (EOFError, OSError):
            with self._lock:  # closed: `close()` ended it and joins it (one thread reaps a process)
                self._starting.pop(slot, None)
                closing = self._closed
            if closing:
                log.debug("search worker %d stopped while starting (the pool closed)", slot)
            else:
                self._start_failed(slot, proc)
            return
        with self._lock:  # starting until in its slot: `close()` sees it in one of the two
            self._starting.pop(slot, None)
            closing = self._closed
            if not closing:
                worker = self._slots[slot] = _Worker(self, slot, proc, parent)
                self._ready.notify_all()
        if closing:  # `close()` ended the process and joins it: no reader thread to reap it too
            parent.close()
            return
        log.debug("search worker %d ready (pid %s)", slot, proc.pid)
        worker.tell(("settings", dict(settings.persistent), dict(settings.transient)))

    def _start_failed(self, slot: int, proc: BaseProcess) -> None:
        """A worker exited before it was ready, the pool open, and its slot stays empty (the
        server process runs what it would have run). No error when SIGINT ended it (a Ctrl-C in a
        terminal reaches the whole process group before the worker ignores it; the server stops
        too); a warning for SIGTERM (sent from outside: a service manager may signal the group);
        an error otherwise."""
        proc.join(timeout=5)
        code = proc.exitcode
        if code == -signal.SIGINT:
            log.debug("search worker %d stopped while starting (code %s)", slot, code)
        elif code == -signal.SIGTERM:
            log.warning("search worker %d was terminated (SIGTERM) while starting", slot)
        else:
            log.error("search worker %d exited while starting (code %s)", slot, code)

    def _worker_died(self, worker: _Worker) -> None:
        with self._lock:
            if self._slots[worker.slot] is not worker:
                return
            self._slots[worker.slot] = None
            if self._closed:
                return
            self.lost += 1
        log.warning("search worker %d (pid %s) died; starting another", worker.slot, worker.pid)
        self._start_in_background(worker.slot)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every worker is ready (tests, benchmarks); False on timeout."""
        with self._lock:
            return self._ready.wait_for(lambda: all(self._slots) or self._closed, timeout)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = [w for w in self._slots if w is not None]
            starting = list(self._starting.values())
            self._slots = [None] * self.count
            self._ready.notify_all()
        for proc in starting:  # still importing: nothing to finish, so no reason to wait for it
            proc.terminate()
        self._records_ahead.close()
        self._events.remove(self._snapshot_closed)
        self._events.remove(self._files_deleted)
        for worker in workers:
            worker.stop()
        for worker in workers:
            worker.ended(timeout=10, kill=True)
        for proc in starting:
            proc.join(timeout=10)

    # ---- tasks ------------------------------------------------------------------------------

    def run(
        self,
        task: execution.Task,
        *,
        cancelled: threading.Event | None,
        affinity: Any,
        relayed: bool = True,
        confirm: Confirm | None = None,
    ) -> Any:
        """Run a task in a worker (here when none is ready) and return its result; `relayed`: see
        `execution.dispatch` (False: no walk stays here for being alone); `confirm`: called here
        with what the worker rendered before it writes it to the client's socket (its answer
        goes back: write or not)."""
        if affinity is None and self._take_here():
            try:
                return execution.run(self._services, task, cancelled, confirm)
            finally:
                with self._lock:
                    self._here_busy -= 1
        worker = self._choose(affinity, relayed)
        call_id = next(self._calls)
        sink = getattr(task, "sink", None)
        park = None if sink is None or worker is None else sink.park
        if park is not None:
            # Known before the task goes: the worker may serve the walk's next page on the
            # connection it keeps, and tell of it, before this thread reads the reply.
            assert isinstance(task, execution.PitTask | execution.ScrollTask) and worker is not None
            kind = "pit" if isinstance(task, execution.PitTask) else "scroll"
            with self._lock:
                self._parks[park.park_id] = _ParkedWalk(
                    worker.pid, task.public_id, park.keep_alive, task.targets, kind, task.ctx_id
                )
        try:
            if worker is None:
                raise _WorkerGone
            call = worker.submit(call_id, task)
        except _WorkerGone:
            if park is not None:
                with self._lock:
                    self._parks.pop(park.park_id, None)
            return execution.run(self._services, task, cancelled, confirm)
        if sink is not None:
            with self._lock:
                self.socket_writes += 1
        self._wait(worker, call_id, call, cancelled)
        while (summary := call.take_rendered()) is not None:
            assert confirm is not None
            try:
                allowed = confirm(summary)
            except BaseException:
                worker.answer(call_id, False)
                call.done.wait()
                raise
            worker.answer(call_id, allowed)
            self._wait(worker, call_id, call, cancelled)
        assert call.reply is not None
        kind, payload, phases = call.reply
        for name, seconds in phases:
            self._services.search_stats.record(name, seconds, task.targets)
        if kind == "lost":
            if park is not None:
                with self._lock:
                    self._parks.pop(park.park_id, None)
            if call.writing:  # it may have written part of the response
                raise ResponseCut(str(payload))
            raise payload
        result = pickle.loads(payload[0], buffers=payload[1])
        written = result[0] if isinstance(result, tuple) else result  # (a scroll batch's)
        if park is not None and not (isinstance(written, Written) and written.parked is not None):
            with self._lock:
                self._parks.pop(park.park_id, None)
        if kind == "error":
            raise result
        return result

    def run_job(self, job: Any, indices: list[Index] | None = None) -> Any:
        """Run a job (`bulk_offload.py`: pure work on data the job carries, with the states of
        `indices`) in the least busy worker and return its result, or raise its ElasticError.
        `WorkerUnavailable` when no worker is ready, or the worker died or failed otherwise than
        with an ElasticError: a job changes nothing, so the caller does the work itself."""
        worker = self._choose(None)
        if worker is None:
            raise WorkerUnavailable
        call_id = next(self._calls)
        try:
            call = worker.submit_job(call_id, job, indices or [])
        except _WorkerGone:
            raise WorkerUnavailable from None
        call.done.wait()
        assert call.reply is not None
        kind, payload, _ = call.reply
        if kind == "lost":
            raise WorkerUnavailable
        result = pickle.loads(payload[0], buffers=payload[1])
        if kind == "error" and not isinstance(result, ElasticError):
            # A fault of the worker, not of the request: the caller does the work itself.
            log.error("search worker %d failed a job: %s", worker.slot, result)
            raise WorkerUnavailable
        with self._lock:
            self.jobs += 1
        if kind == "error":
            raise result
        return result

    def _wait(self, worker: _Worker, call_id: int, call: _Call, cancelled: threading.Event | None) -> None:
        """Wait for the reply; a client that goes away cancels the task in the worker."""
        if cancelled is not None:
            while not cancelled.is_set():
                if call.done.wait(_CANCEL_POLL_SECONDS):
                    return
            worker.post(("cancel", call_id))
        call.done.wait()

    def _take_here(self) -> bool:
        """Whether a one-shot request runs in this process: when nothing else runs anywhere
        (no task on a worker, no other one-shot request or walk here) and
        `search.workers.lone_requests_in_server` allows it. Why: a request alone has nothing to
        run beside, and a worker's round trip (pickling, the pipe, two thread hand-offs in each
        process) cost it 2 ms at the median over HTTP (W6 at 1M documents, 1 client: p50 4.48 ms
        in a worker against 2.52 here); requests that arrive meanwhile go to the workers, so a
        slow one here delays only their HTTP handling, which shares this interpreter."""
        if not self._services.cluster_settings.get(LONE_REQUESTS_IN_SERVER):
            return False
        with self._lock:
            if self._here_busy or self._walk_counts[self._here]:
                return False  # a request or a walk runs here already
            if not any(w is not None and w.alive for w in self._slots):
                return False
            if any(w.inflight for w in self._slots if w is not None):
                return False
            self._here_busy += 1
            self.served_here += 1
            return True

    def _choose(self, affinity: Any, relayed: bool = True) -> _Worker | None:
        """The worker to run a task, or None to run it in this process."""
        lone_walks_here = relayed and self._services.cluster_settings.get(LONE_WALKS_IN_SERVER)
        with self._lock:
            ready = [w for w in self._slots if w is not None and w.alive]
            if not ready:
                return None
            if affinity is None:
                worker = min(ready, key=lambda w: (len(w.inflight), (w.slot - self._next) % self.count))
                self._next = (worker.slot + 1) % self.count
                return worker
            slot = self._walks.get(affinity)
            if slot == self._here and (not lone_walks_here or self._accompanied(ready)):
                # A walk served here while it was alone goes to a worker once others run beside
                # it: this process would otherwise render its pages and relay the others'.
                self._walk_counts[slot] -= 1
                del self._walks[affinity]
                slot = None
            if slot == self._here:
                return None
            if slot is not None:
                held = self._slots[slot]
                if held is not None and held.alive:
                    return held
                self._walk_counts[slot] -= 1
            alone = not self._here_busy and not any(w.inflight for w in ready)
            if lone_walks_here and self._walk_counts[self._here] == 0 and alone:
                # A walk that starts while nothing else runs is served here: alone, it would gain
                # nothing from another process, and relaying its large pages costs the server more
                # than rendering them (see "Search worker processes" in ARCHITECTURE.md). Walks
                # that start beside it, or beside other searches, go to the workers.
                return self._assign(affinity, self._here)
            # A new walk (or one whose worker is being replaced): the worker with the fewest walks.
            worker = min(
                ready,
                key=lambda w: (
                    self._walk_counts[w.slot],
                    len(w.inflight),
                    (w.slot - self._next) % self.count,
                ),
            )
            self._next = (worker.slot + 1) % self.count
            return self._assign(affinity, worker.slot)

    def _accompanied(self, ready: list[_Worker]) -> bool:
        """Whether other walks run beside the walk served here (caller holds the lock): another
        is open and a worker has tasks in flight (an open walk that reads nothing meanwhile does
        not move it)."""
        return sum(self._walk_counts) > 1 and any(w.inflight for w in ready)

    def _assign(self, affinity: Any, slot: int) -> _Worker | None:
        """Remember where a walk runs (caller holds the lock); its worker, None for this process."""
        if len(self._walks) >= _MAX_WALKS:
            oldest = next(iter(self._walks))
            self._walk_counts[self._walks.pop(oldest)] -= 1
        self._walks[affinity] = slot
        self._walk_counts[slot] += 1
        return None if slot == self._here else self._slots[slot]

    def forget_context(self, ctx_id: int) -> None:
        """A reader context ended: its walks' state goes from the workers that kept it."""
        with self._lock:
            keys = [key for key in self._walks if key[0] == ctx_id]
            slots = set()
            for key in keys:
                slot = self._walks.pop(key)
                self._walk_counts[slot] -= 1
                if slot != self._here:  # this process's own caches go with the context
                    slots.add(slot)
            workers = [self._slots[s] for s in slots]
        for worker in workers:
            if worker is not None:
                worker.post(("forget", ctx_id))

    def _snapshot_closed(self, searcher: Searcher) -> None:
        with self._lock:
            workers = [w for w in self._slots if w is not None]
        for worker in workers:
            worker.snapshot_closed(searcher.uid)

    def _files_deleted(self, folder: Path) -> None:
        # After the release of the snapshots that held them: both go through each sender, in order.
        with self._lock:
            workers = [w for w in self._slots if w is not None]
        for worker in workers:
            worker.post(("deleted", str(folder)))

    def _settings_changed(self) -> None:
        """Each worker has the cluster's new settings before the next task it reads: a search
        answered after the change (a lowered `search.max_buckets`) is held to it. Posted behind
        the sender thread's queue, the change could reach a worker after a task submitted
        once the settings request was answered."""
        settings = self._services.cluster_settings
        with self._lock:
            workers = [w for w in self._slots if w is not None]
        for worker in workers:
            worker.tell(("settings", dict(settings.persistent), dict(settings.transient)))

    # ---- parked connections (workers/parking.py) --------------------------------------------

    def security_stamp(self, users_file: str) -> tuple[tuple[int, int, tuple[int, int] | None], str]:
        """The security state now (a request authorized after this may be parked under it)."""
        return security_stamp(self.security, users_file), users_file

    def security_changed(self) -> None:
        """Users, roles or API keys changed: no parked connection is served under the old state
        (the workers compare the shared generation before each page), and they go back."""
        with self._lock:
            self.security[0] += 1
            workers = [w for w in self._slots if w is not None]
        for worker in workers:
            worker.tell(("security",))

    def context_freed(self, ctx_id: int) -> None:
        """A reader context ended: no parked walk serves another page without the server
        process looking (a continuation of a walk on it is the general path's 404). A kept
        scroll looks at its own generation only (`scroll_moved`): a scan that clears its scroll
        does not send the others' connections back."""
        with self._lock:
            self.security[1] += 1
            self.security[2 + ctx_id % SCROLL_SLOTS] += 1

    def scroll_moved(self, ctx_id: int) -> None:
        """This process serves a batch of a scroll: a connection a worker kept with it answers
        no batch from the position it knew (workers/parking.py)."""
        with self._lock:
            self.security[2 + ctx_id % SCROLL_SLOTS] += 1

    def unpark(self, park_id: int) -> None:
        """The HTTP layer closed a parked connection: its worker drops its descriptor."""
        with self._lock:
            walk = self._parks.pop(park_id, None)
            worker = None if walk is None else self._worker_of(walk.pid)
        if worker is not None:
            worker.post(("unpark", park_id))

    def _worker_of(self, pid: int | None) -> _Worker | None:
        """(lock held)"""
        return next((w for w in self._slots if w is not None and w.pid == pid), None)

    def _call(self, worker: _Worker) -> tuple[int, _Call] | None:
        """A call to `worker` its reader thread completes with the answer (None: it is gone)."""
        call_id = next(self._calls)
        call = _Call()
        with worker.lock:
            if not worker.alive:
                return None
            worker.inflight[call_id] = call
        return call_id, call

    def scroll_told(self, ctx_id: int) -> None:
        """Before the general path serves a request of scroll `ctx_id`: a worker keeping a
        connection of it tells the batches it served there and did not tell yet (parking.py),
        and this waits for its answer, which follows their notes. Why: their notes go together,
        after the batches (a scroll's keep-alive and position lag there by at most a few)."""
        with self._lock:
            pids = {w.pid for w in self._parks.values() if w.kind == "scroll" and w.ctx_id == ctx_id}
            workers = [w for w in self._slots if w is not None and w.pid in pids]
        for worker in workers:
            asked = self._call(worker)
            if asked is not None:
                worker.tell(("tell", asked[0]))
                asked[1].done.wait(_TOLD_WAIT_SECONDS)

    def _parked_served(self, worker: _Worker, park_id: int, note: dict[str, Any]) -> None:
        """A worker served pages on a connection it kept (`requests` of them, told together
        after them, parking.py `_Notes`): the context's keep-alive counts from now, a scroll
        moves past its batches, and each page is counted as a search (a reader thread's)."""
        requests, batches = note["requests"], note["scroll"]
        with self._lock:
            walk = self._parks.get(park_id)
            self.parked_pages += requests
        if walk is None or self.connections is None:  # closed meanwhile: drop it there too
            worker.post(("unpark", park_id))
            if batches:  # its client received them: the scroll is past them all the same
                self._noted(batches[-1][1], "scroll", None, batches)
            return
        self._noted(walk.public_id, walk.kind, walk.keep_alive, batches)
        for name, seconds in note["phases"]:
            self._services.search_stats.record(name, seconds, walk.targets)
        self.connections.served(park_id, note["request_bytes"], requests)

    def _noted(self, public_id: str, kind: str, keep_alive: float | None, batches: list | None) -> None:
        """The context of pages served on a kept connection: its keep-alive counts from now (as
        `keep_alive` when given), a scroll moves past its batches (`ReaderContext.note`)."""
        contexts = self._services.contexts
        with contextlib.suppress(ElasticError):
            ctx = contexts.acquire(public_id, kind)
            try:
                if batches:
                    ctx.note(batches)
            finally:
                contexts.release(ctx, keep_alive)

    def _extend(self, worker: _Worker, park_id: int, seq: int, end: list | None, ends: list[list]) -> None:
        """A worker serving a scroll on the connection it kept asks for the scroll's record to
        name the batches after position `seq` too (`scroll_pit.extend_record`): written on the
        records' thread, its answer (the ends and their ids, or None) told to the worker."""
        with self._lock:
            walk = self._parks.get(park_id)
        if walk is None or walk.kind != "scroll":  # handed back or closed meanwhile
            worker.tell(("extended", park_id, None))
            return
        services = self._services
        self._records_ahead.ask(
            walk.ctx_id,
            partial(extend_record, services, walk.public_id, seq, end, ends),
            lambda ahead: worker.tell(("extended", park_id, ahead)),
        )

    def _handed_back(self, park_id: int, reason: str) -> None:
        with self._lock:
            self._parks.pop(park_id, None)
        if self.connections is not None:
            self.connections.handed_back(park_id, reason)

    def _parks_lost(self, pid: int | None) -> None:
        """A worker died: the connections it kept are closed (what it wrote is unknown), and a
        scroll it kept may be past the batches it told (`ReaderContext.untold`)."""
        with self._lock:
            lost = [(park_id, walk) for park_id, walk in self._parks.items() if walk.pid == pid]
            for park_id, _ in lost:
                del self._parks[park_id]
        for park_id, walk in lost:
            if walk.kind == "scroll":
                with contextlib.suppress(ElasticError):
                    self._services.contexts.get(walk.public_id, "scroll").untold()
            if self.connections is not None:
                self.connections.handed_back(park_id, "cut")

    # ---- reporting --------------------------------------------------------------------------

    def clear_fielddata(self, shards: set[str] | None) -> None:
        """Each worker drops the fielddata it holds of these shard folders (all: None); a worker
        reads it before any later message, a stats request included."""
        with self._lock:
            workers = [w for w in self._slots if w is not None]
        for worker in workers:
            worker.post(("clear_fielddata", shards))

    def stats(self) -> dict[str, Any]:
        """`search_workers` of `_nodes/stats`: each worker's pid and what it holds."""
        with self._lock:
            workers = [w for w in self._slots if w is not None]
        described = []
        for worker in workers:
            asked = self._call(worker)
            if asked is None:
                continue
            call_id, call = asked
            worker.post(("stats", call_id))
            if call.done.wait(10) and call.reply is not None and call.reply[0] == "done":
                described.append({"slot": worker.slot, "pid": worker.pid, **call.reply[1]})
        with self._lock:
            walks = list(self._walk_counts)
        for worker in described:
            worker["walks"] = walks[worker["slot"]]
        return {
            "count": self.count,
            "ready": len(described),
            "started": self.started,
            "lost": self.lost,
            "walks_in_server_process": walks[self._here],
            "requests_in_server_process": self.served_here,
            "jobs": self.jobs,
            "socket_writes": self.socket_writes,
            "parked_pages": self.parked_pages,
            "scroll_records_ahead": self._records_ahead.written,
            "workers": described,
        }
