"""Searchers: one shard's frozen snapshot of segments and their live documents.

A Searcher is what a point in time or a scroll holds. It pins the segments (their files are
deleted only when the last Searcher holding them is released) and the live-docs arrays as they were
when it was taken, so writes, refreshes and merges after that moment never change what it returns.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from leafsearch.index.columns import TextColumn
from leafsearch.index.segment import Segment


@dataclass(frozen=True, eq=False)
class SegmentView:
    """A segment as one snapshot sees it: its live documents and its place in the shard."""

    segment: Segment
    live: np.ndarray | None  # bool per doc; None when every doc is live
    doc_base: int
    live_count: int

    @property
    def max_doc(self) -> int:
        return self.segment.max_doc

    @cached_property
    def live_docs(self) -> np.ndarray:
        """Live doc numbers, ascending (cached: the view never changes)."""
        if self.live is None:
            return np.arange(self.segment.max_doc, dtype=np.int64)
        return np.flatnonzero(self.live)


_UIDS = itertools.count(1)


class Searcher:
    """A reference-counted snapshot of one shard.

    `on_close` runs when the last reference is released: the owner (a shard, a search worker's
    mirror) tells its `ShardEvents` (caches keyed by snapshots forget it) and deletes the files of
    segments that no Searcher holds any more.
    """

    #: A snapshot of this process (a shard actor's lease, ray_backend/remote.py, says True).
    remote = False

    def __init__(
        self,
        shard_id: int,
        views: list[SegmentView],
        generation: int,
        on_close: Callable[[Searcher], None] | None = None,
    ) -> None:
        self.shard_id = shard_id
        #: Unique in this process: how a search worker names the snapshot (search/workers/).
        self.uid = next(_UIDS)
        self.views = views
        self.generation = generation
        self.max_doc = sum(v.max_doc for v in views)
        self.live_count = sum(v.live_count for v in views)
        self._refs = 1
        self._lock = threading.Lock()
        self._on_close = on_close
        self.closed = False

    def acquire(self) -> Searcher:
        with self._lock:
            if self._refs <= 0:
                raise RuntimeError("searcher already closed")
            self._refs += 1
        return self

    def release(self) -> None:
        with self._lock:
            self._refs -= 1
            last = self._refs == 0
        if last:
            self.closed = True
            if self._on_close is not None:
                self._on_close(self)

    @cached_property
    def nested_live_count(self) -> int:
        """Live hidden documents of `nested` objects, which Lucene's document counts include."""
        return sum(_nested_live(v.segment, v.live) for v in self.views)

    @property
    def segments(self) -> list[Segment]:
        return [v.segment for v in self.views]

    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """What `build` computes from this snapshot, computed once for its life (a join's global
        ordinals: Elasticsearch's `eager_global_ordinals`, built on first use)."""
        cache = self.__dict__.setdefault("_cached", {})
        if key not in cache:
            cache[key] = build()
        return cache[key]

    def text_stats(self, field: str) -> tuple[int, int]:
        """(doc_count, sum_total_term_freq) of a text field over the whole shard."""
        cache = self.__dict__.setdefault("_text_stats", {})
        if field not in cache:
            doc_count = total = 0
            for view in self.views:
                col = view.segment.column(field)
                if isinstance(col, TextColumn):
                    doc_count += col.doc_count
                    total += col.sum_total_term_freq
            cache[field] = (doc_count, total)
        return cache[field]

    def doc_freq(self, field: str, term: str) -> int:
        """Documents of the shard holding a term (deleted ones included, as Lucene counts)."""
        total = 0
        for view in self.views:
            col = view.segment.column(field)
            if isinstance(col, TextColumn):
                total += col.doc_freq(term)
        return total


def _nested_live(segment: Segment, live: np.ndarray | None) -> int:
    total = 0
    for path in segment.nested_paths:
        found = segment.nested(path)
        assert found is not None
        child, parents = found
        child_live = None if live is None else live[parents]
        total += child.max_doc if child_live is None else int(np.count_nonzero(child_live))
        total += _nested_live(child, child_live)
    return total
