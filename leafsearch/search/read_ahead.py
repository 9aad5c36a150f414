"""Read-ahead for walks over a reader context: the page after the one just served is rendered in
the background while the client reads, so the walk's next request finds its hits ready.

Why: a scroll or a PIT walk alternates between the server rendering a page and the client
parsing it, and on a small machine each side would otherwise wait for the other. Only pages the
REST layer renders to bytes are read ahead, and only the page the next request of the same walk
will ask for: a scroll's next batch, or a PIT page whose `search_after` is the last hit of the
page just served (same hit list, same page shape). A page read ahead is the same bytes the
request would have rendered; a request that finds none, or a different one, renders its own.

Only a sequential walk is read ahead: a page is rendered ahead after a request that continued
the page before it, so a client that asks for the same page again, or jumps around, costs no
speculative work.

Memory stays bounded: at most `max_pages` pages are held node-wide (the oldest are dropped), and
a context's pages go when the context ends. A render holds references on its snapshots, so a
context freed meanwhile cannot lose the segments being read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from leafsearch.common.rawjson import RawJSON
from leafsearch.search.targets import Target, release_targets

#: Walks whose next page is remembered (a PIT searched with many queries starts many walks).
_MAX_WALKS = 4096


class ReadAhead:
    """The node's pages read ahead, keyed by context and page; see the module docstring."""

    def __init__(self, max_pages: int = 32) -> None:
        self.max_pages = max_pages
        self._lock = threading.Lock()
        # (context id, walk key) -> (what the key's identity parts refer to, the page being rendered)
        self._pages: OrderedDict[tuple[int, Hashable], tuple[Any, Future[RawJSON]]] = OrderedDict()
        # (context id, anchor id) -> the key that would continue that walk (a PIT can carry
        # several walks at once, one per slice or query)
        self._next: OrderedDict[tuple[int, int], Hashable] = OrderedDict()
        self._pool: ThreadPoolExecutor | None = None

    def continue_walk(
        self,
        ctx_id: int,
        served: Hashable,
        following: Hashable,
        anchor: Any,
        targets: list[Target],
        render: Callable[[], RawJSON],
    ) -> None:
        """After serving page `served` of a context: `following` is the page that would continue
        the walk, rendered ahead (by `render`) if `served` itself continued the previous page.
        `anchor` is the object whose identity the keys name (a hit list, a scroll context): it is
        held so that its id cannot be reused by another while the page waits."""
        with self._lock:
            walk = (ctx_id, id(anchor))
            sequential = self._next.pop(walk, None) == served
            self._next[walk] = following
            if len(self._next) > _MAX_WALKS:
                self._next.popitem(last=False)
            if not sequential:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="leafsearch-read-ahead")
            replaced = self._pages.pop((ctx_id, following), None)
            if replaced is not None:
                replaced[1].cancel()
            self._pages[(ctx_id, following)] = (anchor, self._pool.submit(_render_held, targets, render))
            while len(self._pages) > self.max_pages:
                self._pages.popitem(last=False)[1][1].cancel()

    def take(self, ctx_id: int, key: Hashable, anchor: Any) -> RawJSON | None:
        """The page read ahead for this key, waiting for it if it is being rendered; None when there
        is none, or it has not started yet (rendering it in the caller's thread is then quicker),
        or its rendering failed (the caller's own rendering reports the error)."""
        with self._lock:
            entry = self._pages.pop((ctx_id, key), None)
        if entry is None or entry[0] is not anchor:
            return None
        future = entry[1]
        if future.cancel():
            return None
        try:
            return future.result()
        except Exception:
            return None

    def held(self) -> int:
        """Pages held now, rendered or being rendered."""
        with self._lock:
            return len(self._pages)

    def forget(self, ctx_id: int) -> None:
        """Drop a context's pages: it has ended."""
        with self._lock:
            for walk in [w for w in self._next if w[0] == ctx_id]:
                del self._next[walk]
            for key in [k for k in self._pages if k[0] == ctx_id]:
                self._pages.pop(key)[1].cancel()

    def close(self) -> None:
        with self._lock:
            for _, future in self._pages.values():
                future.cancel()
            self._pages.clear()
            self._next.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def _render_held(targets: list[Target], render: Callable[[], RawJSON]) -> RawJSON:
    held: list[Target] = []
    try:
        for target in targets:
            target.searcher.acquire()  # raises once the snapshot is gone: nothing to read ahead then
            held.append(target)
        return render()
    finally:
        release_targets(held)
