"""A search worker process: it runs search tasks (search/execution.py) sent by the server process,
and jobs (bulk_offload.py: pure work on the data they carry, bound to the index states read before
them).

Its task threads take turns reading the connection (`main`): the reader applies snapshot and
index updates in the order they were sent (so a task always finds the snapshots it names), runs
the task it read while the next thread reads, and a cancel sets the task's `cancelled` event,
which the running search checks (guard.py). The reply carries the response body, or the error
(ElasticErrors cross intact; anything else with the worker's traceback), and the phases the task
timed, which the server process counts in its statistics and slow log.

`WorkerState` holds the worker's `SearchServices` (search/services.py): its own settings, caches,
breakers, counters and pools, the caches bounded by the node's settings divided between the
workers. When the connection closes (the server process ended, or closed
the pool) the worker exits.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import Any

# numpy imports `numpy.ma` on the first `np.unique` of a process (15 ms): imported here, while the
# worker starts, so its first search does not pay it.
import numpy.ma  # noqa: F401

from leafsearch.common.settings import ClusterSettings
from leafsearch.errors import ElasticError, release_frames
from leafsearch.index.block_cache import BlockCache
from leafsearch.index.events import ShardEvents
from leafsearch.index.fielddata import Fielddata
from leafsearch.search import execution
from leafsearch.search.execution import PitTask
from leafsearch.search.hitlist import HitListCache
from leafsearch.search.read_ahead import ReadAhead, after_reply
from leafsearch.search.segment_orders import SegmentOrders
from leafsearch.search.services import SearchServices
from leafsearch.search.sort_keys import GlobalOrdinals
from leafsearch.search.stats import TIMED, SearchStats
from leafsearch.search.walks import MAX_MEMORY as MAX_WALK_MEMORY
from leafsearch.search.walks import WalkMemory, walk_stats
from leafsearch.search.workers.mirror import IndexState, Mirror
from leafsearch.search.workers.parking import Parking
from leafsearch.search.workers.wire import receive
from leafsearch.services import memory
from leafsearch.services.breaker import Breakers

#: Cache settings a worker bounds its own caches by: its share of each.
CACHE_SETTINGS = (
    "indices.cache.hitlist.size",
    "indices.cache.sort_orders.size",
    "indices.fielddata.cache.size",
    "indices.cache.source_blocks.size",
)


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    node_id: str
    workers: int  # how many share the node's cache budgets
    threads: int  # tasks run at once in this worker
    persistent: dict[str, Any]
    transient: dict[str, Any]


class _PhaseRecorder(SearchStats):
    """Counts nothing itself: each phase's time goes back to the server process with the reply."""

    @contextmanager
    def phase(self, name: str, targets: Any = ()) -> Any:
        started = time.perf_counter()
        try:
            yield
        finally:
            phases = TIMED.get()
            if phases is not None:
                phases.append((name, time.perf_counter() - started))


class WorkerContexts:
    """What a worker keeps of the walks it serves: pages read ahead and the lists of every match
    of walks sorted by `_score` (search/walks.py), within its share of `search.walks.max_memory`."""

    def __init__(self, max_walk_bytes: int) -> None:
        self.read_ahead = ReadAhead()
        self.walks = WalkMemory(max_walk_bytes)

    def forget(self, ctx_id: int) -> None:
        self.walks.forget(ctx_id)
        self.read_ahead.forget(ctx_id)


class WorkerState:
    """What a worker process holds: the search services its tasks run with (its caches bounded by
    its share of the node's settings) and the mirror of the server's snapshots."""

    def __init__(self, config: WorkerConfig) -> None:
        self.workers = config.workers
        settings = ClusterSettings(None)
        settings.persistent = dict(config.persistent)
        settings.transient = dict(config.transient)
        self.source_blocks = BlockCache(self._share(settings, "indices.cache.source_blocks.size"))
        self.global_ordinals = GlobalOrdinals(self._share(settings, "indices.fielddata.cache.size"))
        self.contexts = WorkerContexts(self._share(settings, MAX_WALK_MEMORY))
        #: What the snapshots of this process are heard by (its caches; a shard actor's shard too).
        self.events = ShardEvents()
        self.services = SearchServices(
            node_id=config.node_id,
            clock=time.monotonic,
            cluster_settings=settings,
            breakers=Breakers(settings),
            search_stats=_PhaseRecorder(),
            hitlists=HitListCache(
                self._share(settings, "indices.cache.hitlist.size"), self.global_ordinals, self.events
            ),
            sort_orders=SegmentOrders(self._share(settings, "indices.cache.sort_orders.size")),
            shard_pool=ThreadPoolExecutor((os.cpu_count() or 1) + 1, thread_name_prefix="leafsearch-shard"),
            contexts=self.contexts,
        )
        self.fielddata = Fielddata(self.services.breakers)
        self.mirror = Mirror(self.source_blocks, self.events, self.fielddata)

    def _share(self, settings: ClusterSettings, key: str) -> int:
        return max(1, int(settings.get(key)) // self.workers)

    def apply_settings(self, persistent: dict[str, Any], transient: dict[str, Any]) -> None:
        services = self.services
        settings = services.cluster_settings
        settings.persistent = dict(persistent)
        settings.transient = dict(transient)
        services.hitlists.resize(self._share(settings, "indices.cache.hitlist.size"))
        services.sort_orders.resize(self._share(settings, "indices.cache.sort_orders.size"))
        self.global_ordinals.resize(self._share(settings, "indices.fielddata.cache.size"))
        self.source_blocks.resize(self._share(settings, "indices.cache.source_blocks.size"))
        self.contexts.read_ahead.max_pages = settings.get("search.read_ahead.max_pages")
        self.contexts.walks.max_bytes = self._share(settings, MAX_WALK_MEMORY)


def main(conn: Connection, config: WorkerConfig, security: Any = None) -> None:
    """The worker's life: announce readiness, then serve the connection until it closes.

    `config.threads + 1` threads take turns reading the connection: the one that reads a task
    runs it at once while the next one reads (no hand-off on a request's way), so a cancel or
    a second task is read while a task runs. `security`: the server's security generation
    (a shared value), which a parked connection's continuation must still find (parking.py)."""
    memory.tune_allocator(memory.WORKER_MMAP_THRESHOLD)  # services/memory.py
    trimmer = memory.Trimmer()
    state = WorkerState(config)
    read_lock = threading.Lock()
    send_lock = threading.Lock()
    running: dict[int, threading.Event] = {}
    gates: dict[int, list[Any]] = {}  # call id -> [event, answer]: a rendered response awaiting "go"
    pending: deque[tuple[int, Callable[[], Any]]] = deque()  # tasks read while draining
    writers = _Writers()
    finished = threading.Event()

    def execute(task: Any, park: execution.Park, confirm: Any, phases: list[tuple[str, float]]) -> Any:
        TIMED.set(phases)
        return execution.run(state.services, task, None, confirm, park)

    def when_ready(task: PitTask, key: bytes, call: Callable[[int | None], None]) -> bool:
        return state.services.contexts.read_ahead.when_ready(task.ctx_id, task.walk, key, call)

    parking = Parking(execute, writers.start, lambda message: reply(message), security, when_ready=when_ready)

    def reply(message: tuple, buffers: list[pickle.PickleBuffer] = ()) -> None:  # type: ignore[assignment]
        """Send a message, then each out-of-band buffer of its payload as it is (a rendered page:
        no copy of it is made in this process). A server process that is gone: the readers end."""
        with send_lock, contextlib.suppress(OSError, ValueError):
            conn.send(message)
            for buffer in buffers:
                conn.send_bytes(buffer.raw())

    def run(call_id: int, work: Callable[[], Any], inline: bool = False) -> None:
        """Run a task and reply; the pages it reads ahead are prepared once the reply is sent
        (the server process reads the client's next request only after it), by this thread
        when `inline` (a scroll batch written to the client's socket: its next batch, which
        this worker serves on the connection it keeps, workers/parking.py)."""
        phases: list[tuple[str, float]] = []
        TIMED.set(phases)
        buffers: list[pickle.PickleBuffer] = []
        with after_reply(inline=inline):
            try:
                kind, payload = "done", pickle.dumps(work(), protocol=5, buffer_callback=buffers.append)
            except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller
                kind, payload = "error", _pickled_error(exc)
                buffers = []
                release_frames(exc)  # sent: the task's frames must not stay in a cycle with it
            finally:
                running.pop(call_id, None)
            reply((kind, call_id, payload, phases, len(buffers)), buffers)
        trimmer.after_request()  # a task that left the heap much bigger (a bulk's parse) hands it back

    def confirming(call_id: int, cancelled: threading.Event, ask: bool) -> Callable[[Any], bool]:
        """Tell the server process before writing a rendered response to the client's socket
        (so that a death of this process meanwhile cuts the connection rather than answering an
        error); with `ask`, wait for its answer (socket_sink.Confirm). A cancelled task writes
        nothing."""

        def tell(summary: Any) -> bool:
            reply(("writing", call_id))
            return True

        def confirm(summary: Any) -> bool:
            gate: list[Any] = [threading.Event(), False]
            gates[call_id] = gate
            try:
                reply(("rendered", call_id, summary))
                while not gate[0].wait(0.1):
                    if cancelled.is_set():
                        return False
                return gate[1]
            finally:
                gates.pop(call_id, None)

        return confirm if ask else tell

    def handle(message: tuple) -> tuple[int, Callable[[], Any]] | None:
        """Apply a message; a task or job comes back ready to run. A job (bulk_offload.py)
        takes the index states it names here, as read, so a later update does not change what
        it parses against."""
        kind = message[0]
        if kind in ("task", "job"):
            _, call_id, updates, task = message
            cancelled = threading.Event()
            try:
                for update in updates:
                    _apply(state, update)
                if kind == "task":
                    sink = getattr(task, "sink", None)
                    if sink is not None:  # the client's socket follows the task (socket_sink.py)
                        sink = replace(sink, fd=reduction.recv_handle(conn))
                        task = replace(task, sink=sink)
                    task = replace(task, targets=state.mirror.targets(task.targets))
                    confirm = None if sink is None else confirming(call_id, cancelled, sink.confirm)
                    park = None if sink is None or sink.park is None else parking.park
                    work = partial(execution.run, state.services, task, cancelled, confirm, park)
                    if sink is not None:
                        # It writes as fast as its client reads (an export, until it ends): on a
                        # thread of its own, not one that serves the other tasks; the socket is
                        # closed when it returns.
                        running[call_id] = cancelled
                        inline = isinstance(task, execution.ScrollTask)
                        writers.start(partial(run, call_id, partial(_closing, sink.fd, work), inline))
                        return None
                else:
                    work = task.bind(state.mirror)
            except Exception as exc:  # noqa: BLE001 - the task fails, the reader goes on
                reply(("error", call_id, _pickled_error(exc), [], 0))
                release_frames(exc)
                return None
            running[call_id] = cancelled
            return call_id, work
        if kind == "cancel":
            event = running.get(message[1])
            if event is not None:
                event.set()
        elif kind == "go":
            gate = gates.get(message[1])
            if gate is not None:
                gate[1] = message[2]
                gate[0].set()
        elif kind == "release":
            state.mirror.release(message[1])
        elif kind == "deleted":
            state.mirror.files_deleted(message[1])
        elif kind == "forget":
            state.contexts.forget(message[1])
            parking.forget(message[1])
        elif kind == "unpark":
            parking.drop(message[1])
        elif kind == "extended":
            parking.extended(message[1], message[2])
        elif kind == "security":
            parking.handback_all()
        elif kind == "stats":
            parking.tell_all()  # the batches served on kept connections are counted first
            reply(("stats", message[1], _stats(state, len(running), parking.count())))
        elif kind == "tell":
            parking.tell_all()
            reply(("told", message[1], None))
        elif kind == "settings":
            state.apply_settings(message[1], message[2])
        elif kind == "clear_fielddata":
            state.fielddata.clear(message[1])
        elif kind == "stop":
            raise _Stop
        return None

    def next_task() -> tuple[int, Callable[[], Any]]:
        """Read until a task comes (the caller holds `read_lock`). Messages already sent after
        it are read first: a cancel that is there stops the task before it starts."""
        while not pending:
            task = handle(receive(conn))
            if task is not None:
                pending.append(task)
                while conn.poll(0):
                    more = handle(receive(conn))
                    if more is not None:
                        pending.append(more)
        return pending.popleft()

    def serve() -> None:
        try:
            while True:
                with read_lock:
                    call_id, work = next_task()
                run(call_id, work)
                del work  # (its task's objects go now, not when the next task arrives: as `_Writers`)
        except (EOFError, OSError, _Stop):
            finished.set()

    reply(("ready", os.getpid()))
    for i in range(config.threads + 1):
        threading.Thread(target=serve, name=f"leafsearch-worker-{i}", daemon=True).start()
    finished.wait()
    parking.close()


class _Writers:
    """The threads of the tasks that write to a client's socket, one each while it runs: an idle
    one takes the next task, else another starts; one idle for `idle_seconds` ends. Why: starting
    a thread per page (it waits until the thread runs) was a tenth of a worker's CPU per task of
    a PIT walk or scroll."""

    def __init__(self, idle_seconds: float = 60.0) -> None:
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._idle = 0
        self._tasks: queue.SimpleQueue[Callable[[], Any]] = queue.SimpleQueue()

    def start(self, work: Callable[[], Any]) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._tasks.put(work)
                return
        name = "leafsearch-worker-writer"
        threading.Thread(target=self._serve, args=(work,), name=name, daemon=True).start()

    def _serve(self, work: Callable[[], Any]) -> None:
        while True:
            work()
            del work  # (its task's objects go now, not when the next arrives)
            with self._lock:
                self._idle += 1
            try:
                work = self._tasks.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self._lock:
                    try:  # one given to this thread as it timed out
                        work = self._tasks.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return


def _closing(fd: int, work: Callable[[], Any]) -> Any:
    try:
        return work()
    finally:
        os.close(fd)


class _Stop(Exception):
    """The server process closes the pool."""


def _apply(state: WorkerState, update: Any) -> None:
    if isinstance(update, IndexState):
        state.mirror.apply_index(update)
    else:
        state.mirror.add_snapshot(update)


def _pickled_error(exc: BaseException) -> bytes:
    """The error as the server process can unpickle it: ElasticErrors as they are, anything
    else as a RuntimeError naming it (its class may hold what does not pickle) with the worker's
    traceback, which the server process logs with the 500 (the body never shows it)."""
    if isinstance(exc, ElasticError):
        try:
            return pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an extra that does not pickle: its reason goes
            exc = RuntimeError(f"{exc.error_type}: {exc.reason}")
    where = "".join(traceback.format_exception(exc))
    return pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}\nin the search worker:\n{where}"))


def _stats(state: WorkerState, running: int, parked: int) -> dict[str, Any]:
    """What a worker holds, for `_nodes/stats` (a leak shows here)."""
    return {
        "snapshots": len(state.mirror.snapshots),
        "open_segments": state.mirror.open_segments(),
        "segments_opened": state.mirror.segments_opened,
        "pages_read_ahead": state.contexts.read_ahead.held(),
        "walk_memory": walk_stats(state.contexts),
        "tasks_running": running,
        "parked_connections": parked,
        "breakers": state.services.breakers.counts(),
        "fielddata": state.fielddata.memory(),
        "sort_orders": state.services.sort_orders.stats(),
    }
