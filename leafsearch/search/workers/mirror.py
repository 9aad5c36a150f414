"""The snapshots a search worker reads, as the server process publishes them.

The server process (pool.py) names each shard snapshot it sends a task about by its Searcher's
`uid`, and sends with the task whatever of it the worker does not know yet:

- `IndexState`: an index's name, uuid, settings and mapping (as its body), again whenever the
  mapping's version or the settings change;
- `SnapshotState`: a snapshot's segment folders with their live documents (bit-packed) and doc
  bases; segments are immutable, so the worker opens each folder once (memory-mapped: the
  operating system shares the pages with the server process and the other workers) and every
  snapshot holding it shares it.

When the server process releases a snapshot for good it tells the workers, which drop it. A
segment stays open after the last snapshot holding it goes, until the server process deletes
its files (merged away, its index deleted) and says so: a refresh releases the old snapshot
before the next search names the new one, and reopening every segment (and building its sort
orders again) on every refresh cost a worker 40 ms per new snapshot. Then the worker closes its
maps, so the disk space comes back. The Targets a worker rebuilds are real `Target`s over real
`Searcher`s, so the search code runs unchanged and its caches forget a snapshot when it goes.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from leafsearch.common.settings import index_setting
from leafsearch.index.analyzers import analysis_of
from leafsearch.index.block_cache import BlockCache
from leafsearch.index.events import ShardEvents
from leafsearch.index.fielddata import Fielddata
from leafsearch.index.index import apply_mapping_limits
from leafsearch.index.index_sort import IndexSort, index_sort_of
from leafsearch.index.mapping import Mapping
from leafsearch.index.searcher import Searcher, SegmentView
from leafsearch.index.segment import Segment
from leafsearch.index.source_blocks import codec_of
from leafsearch.request.query_dsl import Query
from leafsearch.search.stats import SearchStats
from leafsearch.search.targets import Target


@dataclass(frozen=True, slots=True)
class IndexState:
    uuid: str
    name: str
    settings: dict[str, str]
    mapping: dict[str, Any]  # the mapping's body (`Mapping.to_body`)
    num_shards: int
    mapping_version: int  # the server process's `Mapping.version` of that body


@dataclass(frozen=True, slots=True)
class SegmentState:
    folder: str
    live: bytes | None  # np.packbits of the live-docs bools; None: every doc is live
    doc_base: int
    live_count: int


@dataclass(frozen=True, slots=True)
class SnapshotState:
    uid: int
    index_uuid: str
    shard_id: int
    generation: int
    segments: tuple[SegmentState, ...]


@dataclass(frozen=True, slots=True)
class TargetRef:
    """A Target as it crosses to a worker: its index, its snapshot's uid, its alias filter."""

    index_uuid: str
    shard_id: int
    snapshot: int
    alias_filter: Query | None


def snapshot_state(index_uuid: str, searcher: Searcher) -> SnapshotState:
    segments = tuple(
        SegmentState(
            str(view.segment.folder),
            None if view.live is None else np.packbits(view.live).tobytes(),
            view.doc_base,
            view.live_count,
        )
        for view in searcher.views
    )
    return SnapshotState(searcher.uid, index_uuid, searcher.shard_id, searcher.generation, segments)


class ShardMirror:
    """What the search code reads of a shard beside its snapshot: its search counters (the
    worker's own; the server process counts the phases the worker reports)."""

    def __init__(self, shard_id: int) -> None:
        self.shard_id = shard_id
        self.search_stats = SearchStats()


class IndexMirror:
    """An index as the search code reads it: name, uuid, settings, mapping, sort, shards."""

    def __init__(self, state: IndexState) -> None:
        self.name = state.name
        self.uuid = state.uuid
        self.settings = state.settings
        self.mapping = Mapping.from_body(state.mapping, analysis_of(state.settings))
        self.mapping_version = state.mapping_version
        apply_mapping_limits(self.mapping, self.settings)
        self.sort: IndexSort | None = index_sort_of(self.settings, self.mapping, self.name)
        #: what new segments' sources are compressed with (`index.codec`, source_blocks.py)
        self.codec = codec_of(self.setting("index.codec"))
        self.num_shards = state.num_shards
        self.shards = [ShardMirror(i) for i in range(state.num_shards)]
        self.last_search = 0.0

    def setting(self, key: str) -> Any:
        return index_setting(self.settings, key)


class Mirror:
    """A worker's indices, snapshots and open segments."""

    def __init__(self, blocks: BlockCache, events: ShardEvents, fielddata: Fielddata) -> None:
        """`events`: the worker's, told of each snapshot released (its caches forget it);
        `fielddata`: the worker's uninverted text fields."""
        self._blocks = blocks
        self._fielddata = fielddata
        self._events = events
        self._lock = threading.Lock()
        self.indices: dict[str, IndexMirror] = {}
        self.snapshots: dict[int, Searcher] = {}
        #: folder -> (segment, snapshots holding it); 0: kept open until its files are deleted
        self._segments: dict[str, tuple[Segment, int]] = {}
        self._deleted: set[str] = set()  # folders deleted while a snapshot here still held them
        self.segments_opened = 0  # segment folders opened, reopenings included

    def apply_index(self, state: IndexState) -> None:
        self.indices[state.uuid] = IndexMirror(state)

    def add_snapshot(self, state: SnapshotState) -> None:
        views = []
        with self._lock:
            for seg in state.segments:
                segment, refs = self._segments.get(seg.folder, (None, 0))
                if segment is None:
                    segment = Segment(Path(seg.folder))
                    segment.blocks = self._blocks
                    segment.fielddata = self._fielddata
                    self.segments_opened += 1
                self._segments[seg.folder] = (segment, refs + 1)
                live = None
                if seg.live is not None:
                    bits = np.unpackbits(np.frombuffer(seg.live, np.uint8), count=segment.max_doc)
                    live = bits.astype(bool)
                views.append(SegmentView(segment, live, seg.doc_base, seg.live_count))
        self.snapshots[state.uid] = Searcher(state.shard_id, views, state.generation, on_close=self._closed)

    def _closed(self, searcher: Searcher) -> None:
        self._events.snapshot_closed(searcher)
        with self._lock:
            for view in searcher.views:
                folder = str(view.segment.folder)
                segment, refs = self._segments[folder]
                if refs == 1 and folder in self._deleted:
                    del self._segments[folder]
                    self._deleted.discard(folder)
                else:
                    self._segments[folder] = (segment, refs - 1)

    def files_deleted(self, folder: str) -> None:
        """The server process deleted the segment files under `folder` (a segment's, or an
        index's): close the segments there once no snapshot here holds them."""
        with self._lock:
            for path in [p for p in self._segments if p == folder or p.startswith(folder + os.sep)]:
                if self._segments[path][1] == 0:
                    del self._segments[path]
                else:
                    self._deleted.add(path)

    def release(self, uids: list[int]) -> None:
        """The server process released these snapshots: none of its tasks reads them any more."""
        for uid in uids:
            searcher = self.snapshots.pop(uid, None)
            if searcher is not None:
                searcher.release()

    def targets(self, refs: list[TargetRef]) -> list[Target]:
        return [
            Target(self.indices[r.index_uuid], r.shard_id, self.snapshots[r.snapshot], r.alias_filter)  # type: ignore[arg-type]
            for r in refs
        ]

    def open_segments(self) -> int:
        with self._lock:
            return len(self._segments)
