"""Read-ahead for walks over a reader context: the page after the one just served is found and
rendered in the background while the client reads, so the walk's next request finds it ready.

Why: a scroll or a PIT walk alternates between the server finding and rendering a page and the
client parsing it, and on a small machine each side would otherwise wait for the other. Only
pages the REST layer renders to bytes are read ahead, and only the page the next request of the
same walk will ask for: the page after the cursor the page just served ends at (a scroll's next
batch, or a PIT page whose `search_after` is the last hit of the page just served, with the same
request otherwise). A page's bytes depend only on the context's pinned snapshot, the walk's
request and its cursor, so a page read ahead is the bytes the request would have rendered; a
request that finds none renders its own.

Only a sequential walk is read ahead: a page is prepared after a request that continued
the page before it, so a client that asks for the same page again, or jumps around, costs no
speculative work.

A page's preparation starts once the response that asked for it went out when the caller says
so (`after_reply`: a search worker's task, whose reply the server process waits for before it
reads the client's next request). Why: started before, the render competes for the process's
interpreter with the page's write and its reply, which the client's next request waits for
(bench/RESULTS.md, "Walks").

Memory stays bounded: at most `max_pages` pages are held node-wide (the oldest are dropped), and
a context's pages go when the context ends. A render holds references on its snapshots, so a
context freed meanwhile cannot lose the segments being read.
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Protocol

from leafsearch.search.stats import TIMED
from leafsearch.search.targets import Target, release_targets

#: Walks whose next page is remembered (a PIT searched with many queries starts many walks).
_MAX_WALKS = 4096
#: Within `after_reply`: the preparations to start when it ends.
_DEFERRED: contextvars.ContextVar[list[Callable[[], None]] | None] = contextvars.ContextVar(
    "leafsearch_read_ahead_deferred", default=None
)
#: While an `after_reply(inline=True)` block's preparations start: they run in that thread.
_INLINE: contextvars.ContextVar[bool] = contextvars.ContextVar("leafsearch_read_ahead_inline", default=False)


@contextmanager
def after_reply(inline: bool = False) -> Iterator[None]:
    """Pages read ahead while the block runs (its task and the reply that answers it) start
    being prepared when it ends, not at once (see the module docstring); `inline`: prepared in
    this thread then, not the read-ahead thread (a kept scroll's next batch, rendered by the
    thread that wrote the last one: workers/parking.py)."""
    held: list[Callable[[], None]] = []
    token = _DEFERRED.set(held)
    try:
        yield
    finally:
        _DEFERRED.reset(token)
        inlined = _INLINE.set(inline)
        try:
            for start in held:
                start()
        finally:
            _INLINE.reset(inlined)


class Prepared(Protocol):
    """A page found and rendered ahead."""

    def nbytes(self) -> int: ...


class ReadAhead:
    """The node's pages read ahead, keyed by context, walk and cursor; see the module docstring."""

    def __init__(self, max_pages: int = 32) -> None:
        self.max_pages = max_pages
        self._lock = threading.Lock()
        # (context id, walk, page key) -> the page being prepared, and the phases it timed
        self._pages: OrderedDict[tuple[int, Hashable, Hashable], Future[_Page]] = OrderedDict()
        # (context id, walk) -> the key of the page that would continue it (a PIT can carry
        # several walks at once, one per slice or query)
        self._next: OrderedDict[tuple[int, Hashable], Hashable] = OrderedDict()
        self._pool: ThreadPoolExecutor | None = None

    def continue_walk(
        self,
        ctx_id: int,
        walk: Hashable,
        served: Hashable,
        following: Hashable,
        targets: list[Target],
        prepare: Callable[[], Prepared],
    ) -> None:
        """After serving page `served` of walk `walk` of a context: `following` is the page that
        would continue the walk, prepared ahead (by `prepare`) if `served` itself continued the
        previous page."""
        with self._lock:
            sequential = self._next.pop((ctx_id, walk), None) == served
            self._next[(ctx_id, walk)] = following
            if len(self._next) > _MAX_WALKS:
                self._next.popitem(last=False)
            if not sequential:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="leafsearch-read-ahead")
            key = (ctx_id, walk, following)
            replaced = self._pages.pop(key, None)
            if replaced is not None:
                replaced.cancel()
            future: Future[_Page] = Future()
            self._pages[key] = future
            while len(self._pages) > self.max_pages:
                self._pages.popitem(last=False)[1].cancel()
            pool = self._pool
        after_block(partial(_start, pool, future, targets, prepare))

    def take(self, ctx_id: int, walk: Hashable, key: Hashable) -> Prepared | None:
        """The page read ahead for this key, waiting for it if it is being prepared; None when
        there is none, or it has not started yet (preparing it in the caller's thread is then
        quicker), or its preparation failed (the caller's own reports the error). The phases the
        page's preparation timed for another process to count (`stats.TIMED`) are the caller's."""
        with self._lock:
            future = self._pages.pop((ctx_id, walk, key), None)
        if future is None or future.cancel():
            return None
        try:
            page, phases = future.result()
        except Exception:
            return None
        timed = TIMED.get()
        if timed is not None:
            timed.extend(phases)
        return page

    def when_ready(
        self, ctx_id: int, walk: Hashable, key: Hashable, call: Callable[[int | None], None]
    ) -> bool:
        """Call `call` with the bytes of the page read ahead for this key once it is prepared
        (None: its preparation failed or was dropped): at once when it is, else in the thread
        that prepares it, as it ends. False, and no call: no page is being prepared for this key
        (none, or not started: a request renders its own then, as in `take`)."""
        with self._lock:
            future = self._pages.get((ctx_id, walk, key))
        if future is None or not (future.running() or future.done()):
            return False

        def ended(done: Future[_Page]) -> None:
            ok = not done.cancelled() and done.exception() is None
            call(done.result()[0].nbytes() if ok else None)

        future.add_done_callback(ended)
        return True

    def held(self) -> int:
        """Pages held now, prepared or being prepared."""
        with self._lock:
            return len(self._pages)

    def held_bytes(self) -> dict[int, int]:
        """Bytes of the pages prepared so far, by context number."""
        with self._lock:
            done = [(key[0], future) for key, future in self._pages.items() if future.done()]
        held: dict[int, int] = {}
        for ctx_id, future in done:
            if not future.cancelled() and future.exception() is None:
                held[ctx_id] = held.get(ctx_id, 0) + future.result()[0].nbytes()
        return held

    def forget(self, ctx_id: int) -> None:
        """Drop a context's pages: it has ended."""
        with self._lock:
            for walk in [w for w in self._next if w[0] == ctx_id]:
                del self._next[walk]
            for key in [k for k in self._pages if k[0] == ctx_id]:
                self._pages.pop(key).cancel()

    def close(self) -> None:
        with self._lock:
            for future in self._pages.values():
                future.cancel()
            self._pages.clear()
            self._next.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


#: A page read ahead, and the phases its preparation timed for another process to count.
_Page = tuple[Prepared, list[tuple[str, float]]]


def _start(
    pool: ThreadPoolExecutor, future: Future[_Page], targets: list[Target], prepare: Callable[[], Prepared]
) -> None:
    if _INLINE.get():
        _prepare(future, targets, prepare)
        return
    try:
        pool.submit(_prepare, future, targets, prepare)
    except RuntimeError:  # the node closed meanwhile
        future.cancel()


def _prepare(future: Future[_Page], targets: list[Target], prepare: Callable[[], Prepared]) -> None:
    """Prepare a page into `future`, unless it was cancelled (taken, dropped or replaced) first."""
    if not future.set_running_or_notify_cancel():
        return
    phases: list[tuple[str, float]] = []
    token = TIMED.set(phases)
    try:
        future.set_result((_render_held(targets, prepare), phases))
    except BaseException as exc:  # noqa: BLE001 - the taker renders its own and reports it
        future.set_exception(exc)
    finally:
        TIMED.reset(token)


def _render_held(targets: list[Target], prepare: Callable[[], Prepared]) -> Prepared:
    held: list[Target] = []
    try:
        for target in targets:
            target.searcher.acquire()  # raises once the snapshot is gone: nothing to read ahead then
            held.append(target)
        return prepare()
    finally:
        release_targets(held)


def after_block(start: Callable[[], None]) -> None:
    """Call `start` when the enclosing `after_reply` block ends (at once outside one)."""
    deferred = _DEFERRED.get()
    if deferred is None:
        start()
    else:
        deferred.append(start)
