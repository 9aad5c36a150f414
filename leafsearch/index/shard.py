"""One shard: translog, indexing buffer, segments, live docs, published Searchers, merges.

Writes go to the translog and the buffer under the shard lock. A refresh writes the buffer as a
segment, applies pending deletes to copies of the live-docs arrays (a published Searcher keeps
the arrays it was given), commits, and publishes a new Searcher. A commit is decided under the
shard lock and written after it (`commits.py`). The files of a segment are deleted only when
neither the shard nor any Searcher holds it.

A buffer that fills up between refreshes is written as a segment on a flush thread while the
next buffer fills, so a bulk request does not wait for it (up to `MAX_FLUSHING` buffers at once,
their segments installed in write order): its documents stay readable from the buffer (realtime
gets, version checks) until the segment is installed, and the translog keeps their operations
until a commit covers that segment.

Every background step (writing a segment, installing it, applying deletes, deciding and writing a
commit, publishing, installing a merge) changes the shard all at once or not at all: what can
fail (memory, the disk) is computed aside first, and the shard takes the result in assignments
that cannot. A step that fails leaves the buffer with its documents, the translog with every
acknowledged operation and searches on the previous snapshot, deletes what it wrote, and raises
once; the next attempt starts from the same state and can succeed.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from leafsearch.common.durable import FOLDER_MODE
from leafsearch.errors import ElasticError, FlushFailed, IndexClosed, RefreshFailed, TranslogFailed, cause_of
from leafsearch.index import array_files, derived_files, source_blocks
from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.buffer_wire import BuildJob, BuildUnavailable, PackedBuffer
from leafsearch.index.commits import CommitPlan, Commits
from leafsearch.index.index_sort import IndexSort
from leafsearch.index.merge_policy import find_merge
from leafsearch.index.parsed import ParsedBatch, ParsedDoc
from leafsearch.index.pins import PINS, PinnedSnapshot, pins_size, read_pins, remove_pin, write_pin
from leafsearch.index.searcher import Searcher, SegmentView
from leafsearch.index.segment import Segment, discard_unfinished, remove_segment_folder, to_term_array
from leafsearch.index.segment_build import segment_from_buffer
from leafsearch.index.shard_services import ShardServices
from leafsearch.index.shard_stats import ShardStats
from leafsearch.index.translog import (
    OP_DELETE,
    OP_INDEX,
    Translog,
    TranslogOp,
    encode_index_ops,
    encode_op,
)
from leafsearch.search.stats import SearchStats

_log = logging.getLogger("leafsearch")

PRIMARY_TERM = 1

#: The buffer is written as a (not yet published) segment past this many documents or source
#: bytes, so memory stays bounded when refreshes are disabled or rare.
BUFFER_MAX_DOCS = 25_000
BUFFER_MAX_BYTES = 16 * 1024 * 1024
#: A full buffer keeps taking writes while the previous one is still being written, up to this
#: multiple of the limits, and is then handed over too, while fewer than `MAX_FLUSHING` are (each
#: built by a search worker: two builds of one shard overlap). A write thus waits for a segment's
#: disk writes and fsyncs (under the shard lock, every other write waiting behind it) only when
#: flushing falls that far behind, and segments stay as large as when one build at a time stalled
#: writes at twice the limits (smaller ones cost more CPU in builds and merges).
BUFFER_STALL_FACTOR = 2
MAX_FLUSHING = 2
#: How long a delete's version is remembered (Elasticsearch's `index.gc_deletes`): re-creating the
#: id within it continues the version sequence instead of starting again at 1.
GC_DELETES_SECONDS = 60.0
#: A refresh hands its buffer over, and then what arrived while a worker wrote it (if a worker
#: writes that too), at most this many times; what remains is written under the shard lock.
REFRESH_HAND_OVERS = 4
#: The doc part of a version-map entry `buffer.tag + doc` (`Shard.buffered_state`).
_DOC_MASK = (1 << 32) - 1


@dataclass(slots=True)
class DocState:
    """Where the current copy of an id lives: a buffer (segment None) or a segment."""

    version: int
    seq_no: int
    deleted: bool
    segment: Segment | None = None
    doc: int = -1
    routing: str | None = None
    buffer: IndexBuffer | None = None  # the buffer holding it, the current one or one being flushed


@dataclass(slots=True)
class _Flushing:
    """A buffer being written as a segment on the flush thread."""

    buffer: IndexBuffer
    folder: Path  # where the segment is written
    built: Future[Segment]
    generation: int  # the first translog generation holding the buffer's operations
    #: The version map of the buffer's time (`Shard.version_map` when it was current), let go
    #: with the buffer once its segment is installed: its ids then resolve from the segments.
    versions: dict[str, DocState | int]


@dataclass(slots=True)
class SyncPoint:
    """A position in a translog: the operations logged before it are durable after `Shard.sync`.
    It names the translog object, so a write logged into a translog that failed (and was then
    replaced by a recovery) is never taken as durable."""

    translog: Translog
    position: int


class _Applying:
    """`with shard.applying:` around logging operations and applying them to memory (the buffer,
    the version map, pending deletes). When that fails half way (memory), the shard no longer
    matches its translog, so the translog fails and the shard reopens from disk before it serves
    anything else (`Shard.recover_if_failed`): the request gets the error, no acknowledged write
    is lost. (An object, not a generator: it is entered once per document of a bulk.)"""

    __slots__ = ("shard",)

    def __init__(self, shard: Shard) -> None:
        self.shard = shard

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            self.shard.translog.fail(cause_of(exc))


class IndexBatch:
    """The operations of `Shard.index_batch`, staged until the block ends."""

    __slots__ = ("shard", "parsed", "rows", "ids", "seq_nos", "versions", "routings", "started")

    def __init__(self, shard: Shard, parsed: ParsedBatch) -> None:
        self.shard, self.parsed = shard, parsed
        self.rows: list[int] = []
        self.ids: list[str] = []
        self.seq_nos: list[int] = []
        self.versions: list[int] = []
        self.routings: list[str | None] = []
        self.started = time.perf_counter_ns()

    def index(self, row: int, doc_id: str, routing: str | None, prior: DocState | None, version: int) -> int:
        """`Shard.index` for the document at `row` of the batch, whose checks passed; its seq_no."""
        shard = self.shard
        with shard.applying:
            shard.max_seq_no += 1
            seq_no = shard.max_seq_no
            shard._retire(prior)
            if shard.tombstones:
                shard.tombstones.pop(doc_id, None)
            doc = len(shard.buffer) + len(self.rows)
            shard.version_map[doc_id] = DocState(version, seq_no, False, None, doc, routing, shard.buffer)
            self.rows.append(row)
            self.ids.append(doc_id)
            self.seq_nos.append(seq_no)
            self.versions.append(version)
            self.routings.append(routing)
        return seq_no

    def finish(self) -> None:
        if not self.rows:
            return
        shard, sources = self.shard, self.parsed.sources
        with shard.applying:
            records = encode_index_ops(
                self.ids, self.seq_nos, self.versions, self.routings, [sources[r] for r in self.rows]
            )
            shard.translog.append(records, len(self.rows))
            shard.buffer.add_batch(
                self.parsed, self.rows, self.ids, self.seq_nos, self.versions, self.routings
            )
            shard._changes += 1
        shard._flush_if_full()
        shard.stats.add(index_total=len(self.rows), index_time=time.perf_counter_ns() - self.started)


class Shard:
    def __init__(
        self,
        folder: Path,
        shard_id: int,
        parse,
        index_sort: IndexSort | None = None,
        services: ShardServices | None = None,
        codec: str = source_blocks.ZSTD,
    ) -> None:
        """`parse(source, doc_id) -> ParsedDoc` comes from the index's mapping (used in recovery);
        `index_sort`, the order every segment is written in (None: arrival order); `services`,
        what the shard's owner gives its shards (its block cache, event listeners, flush thread,
        merge worker; None: a shard alone keeps its own, ended with it); `codec`, the one its new
        segments' sources are compressed with (source_blocks.py, the index's `index.codec`)."""
        self.folder = folder
        self.codec = codec
        #: The primary term its writes answer (higher on a Ray replica promoted: ray_backend/actor.py).
        self.primary_term = PRIMARY_TERM
        self.shard_id = shard_id
        self.index_sort = index_sort
        self.lock = threading.RLock()  # writes, refresh, merge installation
        # Searches only swap in/acquire the published Searcher and count segment references;
        # these small locks keep them from waiting behind a bulk request holding `lock`.
        self._searcher_lock = threading.Lock()
        self._refs_lock = threading.Lock()
        self._parse = parse
        self._own_services = services is None
        self.services = services if services is not None else ShardServices()
        self.blocks = self.services.blocks
        self.applying = _Applying(self)
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        self.segments: list[Segment] = []
        self._seg_refs: dict[str, int] = {}
        self._seg_gen = 0
        self._live_gen = 0
        self._searcher: Searcher | None = None
        self.merging = False
        self.closed = False
        #: (index name, index uuid) for the errors of a closed index; the Index sets it.
        self.index_ref: tuple[str, str] = ("", "")
        self.stats = ShardStats()
        self.search_stats = SearchStats()
        self.commits = Commits(folder, self.stats)
        self._changes = 0
        self._published_changes = 0
        #: Durable pins of reader contexts (pins.py), by name: the segments each holds a reference on.
        self._pins: dict[str, list[Segment]] = {}
        self._buffer_tag = 0  # the last buffer's tag (`IndexBuffer.tag`)
        #: Snapshots of pins found at start, until the node's contexts take them (`take_restored`).
        self._restored: dict[str, Searcher] = {}
        self._load()
        self._restore_pins()
        self._remove_orphans()
        self.refresh()

    def _load(self) -> None:
        """(Re)open the shard from what is on disk: the committed segments and live docs, then
        the translog generations the commit does not cover, replayed into a new buffer.

        At start-up, and again in place when the translog has failed (`recover_if_failed`):
        then every segment the shard already holds and the commit names is kept as it is, so
        Searchers taken before (a PIT, a scroll) keep their files; the others are released."""
        commit = self.commits.reopen()
        held = {s.name: s for s in self.segments}
        segments = [held.pop(name, None) or self._open_segment(name) for name in commit.get("segments", [])]
        live_files: dict[str, str] = dict(commit.get("live", {}))
        live = {
            seg.name: array_files.load(self.folder / live_files[seg.name]) if seg.name in live_files else None
            for seg in segments
        }
        translog_gen = commit.get("translog_gen", 1)
        replay = list(Translog.recover(self.folder / "translog", translog_gen))
        translog = Translog(self.folder / "translog", translog_gen)
        # Nothing below can fail: the shard's state changes all at once.
        for seg in segments:
            if seg.name not in self._seg_refs:
                self._seg_refs[seg.name] = 1
        for seg in held.values():
            self._unref(seg)
        self.segments = segments
        self.live = live
        self._live_files = live_files
        self._live_saved: dict[str, np.ndarray] = {name: arr for name, arr in live.items() if arr is not None}
        # Names never go back: folders of a failed shard's uncommitted segments may still exist.
        self._seg_gen = max(self._seg_gen, commit.get("segment_gen", 0))
        self._live_gen = max(self._live_gen, commit.get("live_gen", 0))
        self.max_seq_no = max((int(s.seq_nos.max()) for s in self.segments if s.max_doc), default=-1)
        self.max_seq_no = max(self.max_seq_no, commit.get("max_seq_no", -1))
        self.buffer = self._new_buffer()
        #: id -> its latest state since the current buffer began: a `DocState`, or `buffer.tag +
        #: doc` for a document of the current buffer (written so by `shard_write.index_columns`).
        #: Older states are in the maps of the buffers being flushed (`entries`), as Lucene's
        #: LiveVersionMap keeps an old map until its refresh is done.
        self.version_map: dict[str, DocState | int] = {}
        #: Buffers being written as segments, oldest first (at most `MAX_FLUSHING`).
        self._flushing: list[_Flushing] = []
        self.tombstones: dict[str, tuple[DocState, float]] = {}  # id -> (delete state, when)
        self.pending_deletes: dict[str, set[int]] = {}
        self.translog = translog
        self._buffer_gen = translog_gen  # the first translog generation holding the buffer's operations
        with self.applying:  # a replay cut short (memory) is done again by the next request
            for op in replay:
                self.replay(op)
        # The replayed operations are in generations from the commit's on: counted there, they
        # go when a commit drops that generation.
        translog.operations_by_generation[translog_gen] = len(replay)
        self._changes += 1  # publish what was replayed, even when it is nothing new

    def recover_if_failed(self) -> None:
        """After a translog write or fsync failed, reopen the shard from disk before it serves
        anything else (caller holds `self.lock`).

        Operations whose records were queued but never written are in memory only: the failed
        writes were not acknowledged, so the shard drops its buffer and version map and replays
        the translog, which was cut back to its last whole record. This happens in place, without
        a node restart, on the first request that finds the translog failed. If the disk still
        fails, the request gets the error and the next one tries again."""
        if not self.translog.failed:
            return
        for flushing in self._flushing:
            # Its buffer's operations were all written before the hand-over; the segment is
            # not in the commit, so it goes (once the flush thread is done with it), and the
            # replay rebuilds its documents.
            flushing.built.exception()
            discard_unfinished(flushing.folder)
        self._flushing = []
        try:
            self._load()
            self.refresh()
        except Exception as exc:  # the disk, memory: the next request tries again
            raise TranslogFailed(
                f"shard [{self.shard_id}] failed and could not recover yet: {cause_of(exc)}"
            ) from exc

    @contextmanager
    def writing(self) -> Iterator[SyncPoint]:
        """Hold the shard lock for writes. The yielded `SyncPoint` names, once the block ends,
        the translog position of everything the block logged: `sync(point)` makes it durable."""
        with self.lock:
            self.check_open()
            self.recover_if_failed()
            point = SyncPoint(self.translog, self.translog.position)
            yield point
            point.translog, point.position = self.translog, self.translog.position

    # ---- durable pins of reader contexts (pins.py) -------------------------------------

    def _restore_pins(self) -> None:
        """At start: each pin on disk becomes a Searcher of the snapshot it names (taken by the
        node's contexts, `take_restored`), and holds its segments. A pin naming a segment that is
        gone or changed (it cannot be the snapshot any more) is deleted."""
        opened = {s.name: s for s in self.segments}
        for name, snap in read_pins(self.folder).items():
            try:
                segments = [opened.get(n) or self._open_segment(n) for n in snap.segments]
            except (OSError, ValueError):
                remove_pin(self.folder, name)
                continue
            pairs = zip(segments, snap.live, strict=True)
            if any(live is not None and len(live) != seg.max_doc for seg, live in pairs):
                remove_pin(self.folder, name)
                continue
            views: list[SegmentView] = []
            base = 0
            for seg, live in zip(segments, snap.live, strict=True):
                opened[seg.name] = seg
                count = seg.max_doc if live is None else int(np.count_nonzero(live))
                views.append(SegmentView(seg, live, base, count))
                base += seg.max_doc
            for seg in segments:  # one reference for the pin, one for its Searcher
                self._seg_refs[seg.name] = self._seg_refs.get(seg.name, 0) + 2
            self._pins[name] = segments
            # A restored snapshot's generation is negative and its own: caches key snapshots by it.
            self._restored[name] = Searcher(
                self.shard_id, views, -len(self._restored) - 1, on_close=self._searcher_closed
            )

    def pin(self, name: str, searcher: Searcher) -> None:
        """Keep `searcher`'s snapshot on disk under `name` until `unpin` (its segments stay,
        whatever merges and restarts do). Durable when this returns. Caller holds a reference on
        `searcher`, so its segments are referenced."""
        segments = searcher.segments
        with self._refs_lock:
            for seg in segments:
                self._seg_refs[seg.name] += 1
        try:
            write_pin(
                self.folder,
                name,
                PinnedSnapshot(tuple(s.name for s in segments), tuple(v.live for v in searcher.views)),
            )
        except BaseException:
            for seg in segments:
                self._unref(seg)
            raise
        with self._refs_lock:
            self._pins[name] = segments

    def unpin(self, name: str) -> bool:
        """Delete a pin (durably) and let its segments go; False when there was none."""
        with self._refs_lock:
            segments = self._pins.pop(name, None)
        if segments is None:
            return False
        remove_pin(self.folder, name)
        for seg in segments:
            self._unref(seg)
        return True

    def take_restored(self, name: str) -> Searcher | None:
        """The snapshot of a pin found at start (the caller owns its reference), or None."""
        with self._refs_lock:
            return self._restored.pop(name, None)

    def restored_names(self) -> list[str]:
        """The pins found at start that no context took yet."""
        with self._refs_lock:
            return list(self._restored)

    def drop_restored(self) -> None:
        """Delete the pins found at start that no context took (their context ended, or its
        record never became durable, before the node stopped)."""
        with self._refs_lock:
            restored, self._restored = self._restored, {}
        for name, searcher in restored.items():
            self.unpin(name)
            searcher.release()

    def pinned_store_bytes(self) -> int:
        """The disk that pins hold beyond the shard's own files: segments only pins still
        reference (merged away since), and the pin files."""
        with self._refs_lock:
            pinned = {s.name: s for segs in self._pins.values() for s in segs}
        return self.store_bytes_beyond(pinned.values()) + pins_size(self.folder)

    def store_bytes_beyond(self, segments: Iterable[Segment]) -> int:
        """The bytes of those of `segments` the shard no longer reads (a snapshot's, merged away)."""
        current = {s.name for s in self.segments}
        return sum(folder_size(s.folder) for s in segments if s.name not in current)

    # ---- persistence -------------------------------------------------------------------

    def _remove_orphans(self) -> None:
        """Segment folders or live files not named by the commit are leftovers of a crash."""
        keep = set(self._seg_refs) | set(self._live_files.values()) | {"commit.json", "translog", PINS}
        for entry in self.folder.iterdir():
            if entry.name not in keep:
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                    self.services.events.files_deleted(entry)
                else:
                    entry.unlink(missing_ok=True)

    def _commit(
        self,
        *,
        roll: bool = False,
        state: tuple[list[Segment], dict[str, np.ndarray | None]] | None = None,
        after: list[Callable[[], None]] | None = None,
    ) -> None:
        """Decide a commit of the segment list and live docs and queue it (caller holds the lock);
        `self.commits.write()` writes it, without the lock (see `commits.py`), and then drops the
        translog it covers: all of it when `roll` (the buffer is empty and nothing is being
        flushed: a new generation starts now, before any later append), else the generations
        before the oldest buffer not yet in an installed segment: the oldest on the flush threads,
        or the current one. `state`: the segments and live docs the caller installs once this
        returns (default: the shard's); `after`: what to run once the commit is written.

        All or nothing: when this raises, nothing is queued and the shard's records of which
        live-docs files hold what are unchanged (with `roll`, a new translog generation may have
        started, which changes no answer: the buffer is empty and begins in it)."""
        started = time.perf_counter_ns()
        segments, live_of = state if state is not None else (self.segments, self.live)
        if roll:
            keep_from = self._buffer_gen = self.translog.start_generation()
        else:
            keep_from = self._flushing[0].generation if self._flushing else self._buffer_gen
        live_gen = self._live_gen
        live_files: dict[str, str] = {}
        new_live: dict[str, np.ndarray] = {}
        saved: dict[str, np.ndarray] = {}
        for seg in segments:
            live = live_of[seg.name]
            if live is None:
                continue
            existing = self._live_files.get(seg.name)
            if existing is not None and self._live_saved.get(seg.name) is live:
                live_files[seg.name] = existing
                continue
            live_gen += 1
            name = f"live_{seg.name}_{live_gen}.npy"
            new_live[name] = live
            live_files[seg.name] = name
            saved[seg.name] = live
        body = {
            "segments": [s.name for s in segments],
            "live": live_files,
            "max_seq_no": self.max_seq_no,
            "segment_gen": self._seg_gen,
            "live_gen": live_gen,
            "translog_gen": keep_from,
        }
        logged = self.translog.position
        self.commits.add(CommitPlan(body, new_live, self.translog, keep_from, logged, started, after or []))
        # Nothing below can fail: the shard records the decision once it is queued.
        self._live_gen = live_gen
        self._live_files = live_files
        self._live_saved.update(saved)

    # ---- lookups -----------------------------------------------------------------------

    def _find_in_segments(self, doc_id: str) -> DocState | None:
        key = to_term_array([doc_id])
        for seg in reversed(self.segments):
            lo, hi = seg.lookup_ids(key)
            for i in range(int(lo[0]), int(hi[0])):
                doc = int(seg.id_docs[i])
                live = self.live[seg.name]
                if (live is None or live[doc]) and doc not in self._pending_set(seg.name):
                    return self._segment_state(seg, doc)
        return None

    def _segment_state(self, seg: Segment, doc: int) -> DocState:
        """The state of a live document of a segment."""
        return DocState(
            int(seg.versions[doc]), int(seg.seq_nos[doc]), False, seg, doc, seg.routings([doc])[0]
        )

    def _pending_set(self, name: str) -> set[int]:
        return self.pending_deletes.get(name) or set()

    def current(self, doc_id: str) -> DocState | None:
        """The latest state of an id, realtime (buffer, then segments); None if never seen."""
        state = self.entries([doc_id])[0]
        if state is not None:
            return self.buffered_state(state) if type(state) is int else state
        tombstone = self.tombstone(doc_id)
        if tombstone is not None:
            return tombstone
        return self._find_in_segments(doc_id)

    def entries(self, doc_ids: list[str]) -> list[DocState | int | None]:
        """The version-map entry of each id, the newest first: the current buffer's map, then
        those of the buffers being flushed; None where no map holds it. Ids all new (a log's)
        cost one `dict.get` per map, in C."""
        found = list(map(self.version_map.get, doc_ids))
        for flushing in reversed(self._flushing):
            older = flushing.versions
            missing = found.count(None)
            if not missing:
                break
            if not older:
                continue
            if missing == len(found):
                found = list(map(older.get, doc_ids))
            else:
                get = older.get
                pairs = zip(found, doc_ids, strict=True)
                found = [get(doc_id) if entry is None else entry for entry, doc_id in pairs]
        return found

    def buffered_state(self, entry: int) -> DocState:
        """The state a version-map entry `buffer.tag + doc` stands for: the current buffer's
        document or that of a buffer being flushed (installed ones' maps are let go)."""
        doc = entry & _DOC_MASK
        buffer = self.buffer
        if buffer.tag != entry - doc:
            buffer = next(f.buffer for f in self._flushing if f.buffer.tag == entry - doc)
        routing = buffer.routings[doc]
        return DocState(buffer.versions[doc], buffer.seq_nos[doc], False, None, doc, routing, buffer)

    def _new_buffer(self) -> IndexBuffer:
        self._buffer_tag += _DOC_MASK + 1
        return IndexBuffer(self._buffer_tag)

    def tombstone(self, doc_id: str) -> DocState | None:
        entry = self.tombstones.get(doc_id)
        if entry is None or time.monotonic() - entry[1] > GC_DELETES_SECONDS:
            return None
        return entry[0]

    def prefetch(self, doc_ids: list[str]) -> None:
        """Load the segment state of many ids at once into the version map (bulk fast path)."""
        distinct = list(dict.fromkeys(doc_ids))
        pairs = zip(distinct, self.entries(distinct), strict=True)
        todo = [doc_id for doc_id, entry in pairs if entry is None]
        if self.tombstones:
            todo = [i for i in todo if self.tombstone(i) is None]
        if not todo:
            return
        # Also with no segment yet: every id is then new, and remembered as such, so the writes
        # that follow do not look each one up again.
        found = self.segment_states(todo)
        for doc_id in todo:
            state = found.get(doc_id)
            # A miss is remembered as a tombstone-free "absent" marker to skip later lookups.
            self.version_map[doc_id] = state if state is not None else DocState(0, -1, True)

    def segment_states(self, doc_ids: list[str]) -> dict[str, DocState]:
        """The live segment documents of these (distinct) ids, one vectorized lookup per segment:
        only the ids within the segment's first and last id are searched for, and the end of a
        match's range only for those found (a bulk of new ids, as a log's, mostly skips them).
        A segment whose ids all lie beside the batch's least and greatest is skipped before any
        comparison per id (a log's older segments: 37 us a segment for 5,000 ids otherwise)."""
        found: dict[str, DocState] = {}
        if not self.segments or not doc_ids:
            return found
        keys = to_term_array(doc_ids)
        least, greatest = keys[keys.argmin()], keys[keys.argmax()]
        for seg in self.segments:
            terms = seg.id_terms
            if not len(terms) or greatest < terms[0] or least > terms[-1]:
                continue
            inside = np.flatnonzero((keys >= terms[0]) & (keys <= terms[-1]))
            if not len(inside):
                continue
            lo = np.searchsorted(terms, keys[inside], side="left")  # < len(terms): inside
            matched = terms[lo] == keys[inside]
            hits, lo = inside[matched], lo[matched]
            if not len(hits):
                continue
            hi = np.searchsorted(terms, keys[hits], side="right")
            live = self.live[seg.name]
            pending = self._pending_set(seg.name)
            for h, first, end in zip(hits.tolist(), lo.tolist(), hi.tolist(), strict=True):
                for i in range(first, end):
                    doc = int(seg.id_docs[i])
                    if (live is None or live[doc]) and doc not in pending:
                        found[doc_ids[h]] = self._segment_state(seg, doc)
        return found

    def get_source(self, state: DocState) -> bytes:
        if state.segment is None:
            assert state.buffer is not None
            return state.buffer.sources[state.doc]
        return state.segment.sources([state.doc])[0]

    # ---- writes (caller holds `writing()`; caller syncs its SyncPoint before acknowledging) ----

    def _retire(self, state: DocState | None) -> None:
        if state is None or state.deleted:
            return
        if state.segment is None:
            assert state.buffer is not None
            state.buffer.deleted.add(state.doc)
        else:
            self.pending_deletes.setdefault(state.segment.name, set()).add(state.doc)

    def index(
        self, doc_id: str, parsed: ParsedDoc, routing: str | None, prior: DocState | None, version: int
    ) -> int:
        """Apply an index operation whose checks passed; returns its seq_no."""
        with self.stats.timed("index"):
            with self.applying:
                self.max_seq_no += 1
                seq_no = self.max_seq_no
                self.translog.append(
                    encode_op(TranslogOp(OP_INDEX, doc_id, seq_no, version, routing, parsed.source))
                )
                self._apply_index(doc_id, parsed, routing, prior, version, seq_no)
            self._flush_if_full()
            return seq_no

    def _flush_if_full(self) -> None:
        """After a write: install a segment the flush thread has finished, and hand over the
        buffer once it is full. (Not during recovery: a commit then would drop translog files
        whose operations are not all replayed yet.)

        A failure here fails no write: the write's operation is already logged and buffered, and
        each step leaves the shard as it was. It is logged, and the next write or refresh tries
        again (a refresh reports a segment that still cannot be written)."""
        try:
            if self._flushing and self._written(self._flushing[0]):
                while self._flushing and self._written(self._flushing[0]):
                    self._install_flushed()
                self._apply_pending_deletes()
                self._commit()
            flushing = self._flushing
            idle = not flushing or flushing[0].built.done()
            if (idle and self._buffer_over(1)) or self._buffer_over(BUFFER_STALL_FACTOR):
                # Written and committed, not yet published: searches see it at the next refresh,
                # and the translog a crash would replay stays short.
                self._hand_over()
                self._commit()
        except Exception:
            _log.warning("shard [%d]: handing over a full buffer failed", self.shard_id, exc_info=True)

    @staticmethod
    def _written(flushing: _Flushing) -> bool:
        return flushing.built.done() and flushing.built.exception() is None

    def _buffer_over(self, factor: int) -> bool:
        """Whether the buffer holds `factor` times its document or source-byte limit."""
        buffer = self.buffer
        return len(buffer) >= factor * BUFFER_MAX_DOCS or buffer.source_bytes >= factor * BUFFER_MAX_BYTES

    def _hand_over(self) -> None:
        """Give the buffer to the flush thread and start a new one (and a translog generation, so
        that a commit can drop what precedes the new buffer), with a version map of its own.
        Buffers on the flush thread are installed oldest first (segments keep write order): those
        done, and the oldest while `MAX_FLUSHING` are (waiting for it)."""
        flushing = self._flushing
        while flushing and (len(flushing) >= MAX_FLUSHING or flushing[0].built.done()):
            self._install_flushed()
            flushing = self._flushing
        self._apply_pending_deletes()
        generation = self.translog.start_generation()  # first: if it fails, the buffer stays
        fresh = self._new_buffer()
        handed = self._flush_in_background(self.buffer, self._buffer_gen, self.version_map)
        flushing = [*flushing, handed]
        # Nothing below can fail. (If the above did after the new generation started, the
        # buffer's operations are in the two generations from `_buffer_gen` on, which the
        # commits keep.)
        self.buffer, self._buffer_gen, self._flushing, self.version_map = fresh, generation, flushing, {}

    def _flush_in_background(
        self, buffer: IndexBuffer, generation: int, versions: dict[str, DocState | int]
    ) -> _Flushing:
        folder = self.folder / self._next_segment_name()
        built = self.services.flusher().submit(self._build_segment, buffer, folder)
        return _Flushing(buffer, folder, built, generation, versions)

    def _build_segment(self, buffer: IndexBuffer, folder: Path) -> Segment:
        """Write a handed-over buffer as the segment `folder` (on the flush thread): a large one
        in a search worker when the owner has them (buffer_wire.py), else here."""
        builder = self.services.builder
        segment = None
        if builder is not None and self._worker_builds(buffer):
            try:
                job = BuildJob(PackedBuffer.pack(buffer), str(folder), self.index_sort, self.codec)
                segment_docs = builder(job)
            except BuildUnavailable:
                discard_unfinished(folder)  # whatever a worker that died left
            else:
                buffer.segment_docs = segment_docs
                segment = Segment(folder)
        if segment is None:
            segment = segment_from_buffer(buffer, folder, self.index_sort, self.codec)
        segment.prepare_sources()
        return segment

    def _worker_builds(self, buffer: IndexBuffer) -> bool:
        """Whether a search worker writes this buffer's segment (buffer_wire.py)."""
        services = self.services
        return services.builder is not None and len(buffer) >= services.builder_min_docs

    def _install_flushed(self) -> None:
        """Add the segment of the oldest buffer on the flush thread (waiting for it), not yet
        published.

        Its documents now resolve from the segment, and its version map goes: the newer maps
        hold every later write (other deletes resolve from tombstones, other ids from the
        segments). Why a map per buffer: rebuilding one map of the current buffer's ids at each
        install cost the ordered part of a bulk about 0.25 us a document.

        When the segment could not be written (a full disk, memory), what the write left is
        deleted, the buffer goes to the flush thread again under a new folder name, and this
        raises `FlushFailed`: the failure is reported once, and the next install waits for the
        new attempt. When installing fails, nothing changed and the next install tries again."""
        if not self._flushing:
            return
        flushing, rest = self._flushing[0], self._flushing[1:]
        try:
            seg = flushing.built.result()
        except Exception as exc:
            discard_unfinished(flushing.folder)
            again = self._flush_in_background(flushing.buffer, flushing.generation, flushing.versions)
            self._flushing = [again, *rest]
            raise self._segment_failed(exc) from exc
        live = _buffer_live(seg, flushing.buffer)
        # Nothing below can fail.
        self._flushing = rest
        self._add_segment(seg, live)

    def _segment_failed(self, exc: Exception) -> FlushFailed:
        return FlushFailed(f"failed to write a segment of shard [{self.shard_id}]: {cause_of(exc)}")

    def _open_segment(self, name: str) -> Segment:
        seg = Segment(self.folder / name)
        derived_files.remove_partial_files(seg.folder)  # a crash's, never read (derived_files.py)
        seg.blocks = self.blocks
        seg.fielddata = self.services.fielddata
        return seg

    def _add_segment(self, seg: Segment, live: np.ndarray | None) -> None:
        """Append a segment written from a buffer, with its live docs (`_buffer_live`)."""
        seg.blocks = self.blocks
        seg.fielddata = self.services.fielddata
        self.segments.append(seg)
        with self._refs_lock:
            self._seg_refs[seg.name] = 1
        self.live[seg.name] = live

    @contextmanager
    def index_batch(self, parsed: ParsedBatch) -> Iterator[IndexBatch]:
        """Index operations on the documents of a parsed batch (caller holds self.lock).

        Each accepted operation takes its seq_no and version-map entry at once, so the next
        operation on the same id sees it; the values, sources and translog records join the buffer
        and the translog together when the block ends, even if it ends with an exception.
        """
        batch = IndexBatch(self, parsed)
        try:
            yield batch
        finally:
            batch.finish()

    def _apply_index(
        self,
        doc_id: str,
        parsed: ParsedDoc,
        routing: str | None,
        prior: DocState | None,
        version: int,
        seq_no: int,
    ) -> None:
        self._retire(prior)
        if self.tombstones:
            self.tombstones.pop(doc_id, None)
        doc = self.buffer.add(doc_id, parsed, seq_no, version, routing)
        self.version_map[doc_id] = DocState(version, seq_no, False, None, doc, routing, self.buffer)
        self._changes += 1

    def delete(self, doc_id: str, prior: DocState, version: int) -> int:
        with self.stats.timed("delete"), self.applying:
            self.max_seq_no += 1
            seq_no = self.max_seq_no
            self.translog.append(encode_op(TranslogOp(OP_DELETE, doc_id, seq_no, version, None, None)))
            self._apply_delete(doc_id, prior, version, seq_no)
            return seq_no

    def _apply_delete(self, doc_id: str, prior: DocState | None, version: int, seq_no: int) -> None:
        self._retire(prior)
        state = DocState(version, seq_no, True)
        self.version_map[doc_id] = state
        self.tombstones[doc_id] = (state, time.monotonic())
        self._changes += 1

    def replay(self, op: TranslogOp) -> None:
        """Apply a logged operation with its seq_no and version; one older than the document's
        current state is already superseded (a replica receives its primary's writes in any
        order, Elasticsearch's rule: the higher seq_no of an id wins)."""
        prior = self.current(op.doc_id)
        if prior is not None and prior.seq_no >= op.seq_no:
            self.max_seq_no = max(self.max_seq_no, op.seq_no)
            return
        if op.op == OP_INDEX:
            parsed = self._parse(op.source, op.doc_id)
            self._apply_index(op.doc_id, parsed, op.routing, prior, op.version, op.seq_no)
        else:
            self._apply_delete(op.doc_id, prior, op.version, op.seq_no)
        self.max_seq_no = max(self.max_seq_no, op.seq_no)

    def sync(self, point: SyncPoint) -> None:
        """Make the operations logged before `point` durable (one fsync shared with every
        concurrent request). If the translog fails, the shard recovers from disk before this
        raises, so what it serves next is durable."""
        try:
            point.translog.sync(point.position)
        except TranslogFailed:
            with self.lock:
                self.recover_if_failed()
            raise
        # A commit a write decided (a buffer handed over or installed) is written here, outside
        # the shard lock and the node's indexing slot; a thread already writing one takes it. A
        # failure fails no write (acknowledgement depends on the translog only): the commit stays
        # queued for the next writer, and a refresh reports it if it fails again.
        try:
            self._write_commits(wait=False)
        except FlushFailed:
            _log.warning("shard [%d]: a commit could not be written yet", self.shard_id, exc_info=True)

    def _write_commits(self, *, wait: bool = True) -> None:
        """Write the commits decided so far (`Commits.write`); a failure as `FlushFailed`."""
        try:
            self.commits.write(wait=wait)
        except Exception as exc:
            raise FlushFailed(f"failed to commit shard [{self.shard_id}]: {cause_of(exc)}") from exc

    # ---- refresh, commit, merge ------------------------------------------------------------

    def _next_segment_name(self) -> str:
        self._seg_gen += 1
        return f"seg_{self._seg_gen:06d}"

    def _flush_buffer(self, *, in_worker: bool = False) -> None:
        """Write the buffer as a segment (not yet visible to searches) and apply pending deletes;
        `in_worker`: a large one in a search worker, as the flush thread does (a refresh's: this
        process meanwhile parses the next bulk requests instead of waiting on the shard lock).

        Buffers still on the flush thread are installed first, so segments keep write order. A
        segment that cannot be written leaves nothing behind, its documents in the buffer."""
        while self._flushing:
            self._install_flushed()
        if len(self.buffer):
            buffer, fresh = self.buffer, self._new_buffer()
            folder = self.folder / self._next_segment_name()
            try:
                if in_worker:
                    seg = self._build_segment(buffer, folder)
                else:
                    seg = segment_from_buffer(buffer, folder, self.index_sort, self.codec)
                live = _buffer_live(seg, buffer)
            except Exception as exc:
                discard_unfinished(folder)
                raise self._segment_failed(exc) from exc
            self._add_segment(seg, live)
            self.buffer = fresh
        # Every id now resolves from the segments, their live docs and pending deletes (deletes:
        # from tombstones); reset with the buffer's swap, before anything more can fail.
        self.version_map = {}
        self._apply_pending_deletes()
        self._forget_old_tombstones()

    def _forget_old_tombstones(self) -> None:
        now = time.monotonic()
        self.tombstones = {k: v for k, v in self.tombstones.items() if now - v[1] <= GC_DELETES_SECONDS}

    def _apply_pending_deletes(self) -> None:
        """Deletes of segment documents go into copies of their live-docs arrays (all of them, or,
        when a copy cannot be made, none)."""
        updated: dict[str, np.ndarray] = {}
        for name, docs in self.pending_deletes.items():
            current = self.live.get(name)
            seg = next(s for s in self.segments if s.name == name)
            live = np.ones(seg.max_doc, dtype=bool) if current is None else current.copy()
            live[list(docs)] = False
            updated[name] = live
        self.live.update(updated)
        self.pending_deletes = {}

    def refresh(self) -> bool:
        """Make every write accepted before the call visible to new searches. Returns whether
        anything changed.

        The buffer is written as a segment on the flush thread while the shard lock is free, so
        writes go on meanwhile (into the next buffer). A buffer a write handed over earlier is
        waited for first, also without the lock: the hand-over below would otherwise wait for it
        holding the lock, and every write with it. What was written meanwhile is published too,
        built under the lock: a snapshot must never hold a document's delete without the write
        that replaced it.

        A failure fails this refresh only, raised once as an `ElasticError`
        (`flush_failed_engine_exception` when a segment or the commit could not be written,
        else `refresh_failed_engine_exception`): searches keep the previous snapshot, the buffer
        its documents, the translog every acknowledged operation, and the next refresh can
        succeed."""
        started = time.perf_counter_ns()
        try:
            if not self._refresh():
                return False
        except ElasticError:
            raise
        except Exception as exc:
            raise RefreshFailed(f"failed to refresh shard [{self.shard_id}]: {cause_of(exc)}") from exc
        elapsed = time.perf_counter_ns() - started
        self.stats.add(
            refresh_total=1, refresh_time=elapsed, refresh_external_total=1, refresh_external_time=elapsed
        )
        return True

    def _refresh(self) -> bool:
        """`refresh`'s steps (see there); False when there was nothing to publish."""
        with self.lock:
            if self.closed:
                return False
            self.recover_if_failed()  # never publish what the translog may not hold
            unchanged = self._changes == self._published_changes and self._searcher is not None
            earlier = self._flushing
        if unchanged:
            self._write_commits(wait=False)  # a commit that failed before is tried again
            return False
        for each in earlier:
            each.built.exception()  # waits; a failure is raised by the install below
        with self.lock:
            if self.closed:
                return False
            covered = self._changes
            if len(self.buffer):
                self._hand_over()
            flushing = self._flushing
        for round_ in range(1, REFRESH_HAND_OVERS + 1):
            for each in flushing:
                each.built.exception()  # waits; a failure is raised by the install below
            with self.lock:
                if self.closed:
                    return False
                while self._flushing and self._flushing[0].built.done():
                    self._install_flushed()
                if round_ < REFRESH_HAND_OVERS and (self._flushing or self._worker_builds(self.buffer)):
                    # Many writes arrived while a worker wrote the segment: theirs too is
                    # written without the lock, rather than under it below; and a buffer a
                    # write handed over meanwhile is waited for without it.
                    if self._worker_builds(self.buffer):
                        self._hand_over()
                    flushing = self._flushing
                    continue
                if len(self.buffer) or self._flushing:
                    # Writes arrived while the lock was free: an overwrite among them retired its
                    # previous version, which may be in a segment this refresh publishes, while
                    # its new version is in the buffer (or one a write handed over). Publishing
                    # the one without the other would hide the document, so their (few)
                    # documents become a segment now, under the lock.
                    self._flush_buffer(in_worker=True)
                self._apply_pending_deletes()
                self._forget_old_tombstones()
                self._commit()
                self._publish()
                self._published_changes = max(self._published_changes, covered)
            break
        self._write_commits()  # durable before the refresh returns, but without the lock
        return True

    def _publish(self) -> None:
        """Make the segments and live docs the snapshot new searches take (caller holds the
        lock); the Searcher is built before anything changes."""
        views: list[SegmentView] = []
        base = 0
        for seg in self.segments:
            live = self.live[seg.name]
            count = seg.max_doc if live is None else int(np.count_nonzero(live))
            views.append(SegmentView(seg, live, base, count))
            base += seg.max_doc
        old = self._searcher  # replaced only under the shard lock
        searcher = Searcher(
            self.shard_id, views, (old.generation + 1) if old else 1, on_close=self._searcher_closed
        )
        # Nothing below can fail.
        with self._refs_lock:
            for v in views:
                self._seg_refs[v.segment.name] += 1
        with self._searcher_lock:
            self._searcher = searcher
        if old is not None:
            old.release()

    def _searcher_closed(self, searcher: Searcher) -> None:
        self.services.events.snapshot_closed(searcher)
        for v in searcher.views:
            self._unref(v.segment)

    def _unref(self, seg: Segment) -> None:
        """Drop one reference; the last one deletes the segment's files."""
        with self._refs_lock:
            self._seg_refs[seg.name] -= 1
            last = self._seg_refs[seg.name] == 0
            if last:
                del self._seg_refs[seg.name]
        if last:
            remove_segment_folder(seg.folder)
            self.services.events.files_deleted(seg.folder)

    def acquire_searcher(self) -> Searcher:
        with self._searcher_lock:
            if self._searcher is None:
                raise IndexClosed(*self.index_ref)
            return self._searcher.acquire()

    def check_open(self) -> None:
        """Refuse a request reaching a shard whose index was closed after the request found it."""
        if self.closed:
            raise IndexClosed(*self.index_ref)

    def maybe_merge(self) -> bool:
        """Run one merge the policy asks for. Heavy work happens outside the shard lock.

        A merge that fails (the worker, memory, the disk) installs nothing and leaves no folder:
        the shard is as it was, and a later merge tries again. Only writing its commit may fail
        after it is installed: that commit is then written by the next writer of commits."""
        with self.lock:
            if self.merging or self.closed:
                return False
            candidates = [(s, self.live[s.name]) for s in self.segments if s.name not in self.pending_deletes]
            chosen = find_merge(candidates)
            if not chosen:
                return False
            self.merging = True
            parts = [(s, self.live[s.name]) for s in chosen]
            name = self._next_segment_name()
        folder = self.folder / name
        try:
            docs = sum(seg.max_doc if live is None else int(np.count_nonzero(live)) for seg, live in parts)
            with self.stats.merging(docs, sum(folder_size(seg.folder) for seg, _ in parts)):
                try:
                    sources = [(seg.folder, live) for seg, live in parts]
                    origin = self.services.merges.merge(sources, folder, self.index_sort, self.codec)
                    merged = self._open_segment(name)
                    merged.prepare_sources()
                    for each in self._flushing:  # installed first: waited for without the lock
                        each.built.exception()
                    with self.lock:
                        installed = not self.closed
                        if installed:
                            self._install_merge(parts, merged, origin)
                except BaseException:
                    discard_unfinished(folder)
                    raise
                if not installed:
                    discard_unfinished(folder)
                    return False
                self._write_commits()
            return True
        finally:
            self.merging = False

    def _install_merge(
        self, parts: list[tuple[Segment, np.ndarray | None]], merged: Segment, origin: np.ndarray | None
    ) -> None:
        """Swap merged segments for the new one, carrying over deletes that happened meanwhile.
        `origin` (an index-sorted merge) gives each merged document's position among the parts'
        live documents in order; None: they are in that order.

        Buffers on the flush thread are installed first and pending deletes applied (the
        merged segments' deletes must be in their live docs); the current buffer stays, and the
        commit below keeps the translog from its generation on, as a hand-over's does. Why not
        write it as a segment here: that happened under the shard lock, in this process, with
        every write waiting (at 50,000 documents, most of a second). The new segment list, live
        docs and version map are built aside and that commit decided before the shard takes
        them, so a failure before installs nothing. The merged segments are let go once the
        commit is written (`CommitPlan.after`): the commit on disk until then names them.
        """
        while self._flushing:
            self._install_flushed()
        self._apply_pending_deletes()
        names = {s.name for s, _ in parts}
        new_live = self._merged_live(parts, merged, origin)
        first = self.segments.index(parts[0][0])
        segments = [s for s in self.segments if s.name not in names]
        live = {name: arr for name, arr in self.live.items() if name not in names}
        # Segments whose documents were all deleted merge into nothing: no empty segment is kept
        # (each would be one more view for every search to skip, and one more for the policy to
        # merge again), as Lucene drops fully deleted segments.
        if merged.max_doc:
            segments.insert(first, merged)
            live[merged.name] = None if new_live.all() else new_live
        version_map = {
            k: v
            for k, v in self.version_map.items()
            if type(v) is int or v.segment is None or v.segment.name not in names
        }
        pending = {name: docs for name, docs in self.pending_deletes.items() if name not in names}
        self._commit(state=(segments, live), after=[partial(self._unref, seg) for seg, _ in parts])
        # Nothing below can fail: the shard takes the merge all at once.
        if merged.max_doc:
            with self._refs_lock:
                self._seg_refs[merged.name] = 1
        self.segments, self.live, self.version_map = segments, live, version_map
        self.pending_deletes = pending
        self._changes += 1
        if not merged.max_doc:
            remove_segment_folder(merged.folder)
            self.services.events.files_deleted(merged.folder)

    def _merged_live(
        self, parts: list[tuple[Segment, np.ndarray | None]], merged: Segment, origin: np.ndarray | None
    ) -> np.ndarray:
        """The live docs of the merged segment: the parts' documents deleted since the merge
        began (applied or pending) are deleted in it too."""
        new_live = np.ones(merged.max_doc, dtype=bool)
        base = 0
        for seg, old_live in parts:
            keep = np.arange(seg.max_doc) if old_live is None else np.flatnonzero(old_live)
            now = self.live[seg.name]
            now_mask = np.ones(seg.max_doc, dtype=bool) if now is None else now.copy()
            pending = self.pending_deletes.get(seg.name)
            if pending:
                now_mask[list(pending)] = False
            new_live[base : base + len(keep)] = now_mask[keep]
            base += len(keep)
        return new_live if origin is None else new_live[origin]

    def close(self) -> None:
        """Flush and close: every acknowledged write is in a committed segment, the translog is
        written out, and the in-memory state (buffer, version map, segments) is let go. Requests
        that hold a Searcher finish with it; its segments' files stay (they are the index's).

        A flush that fails is raised once the shard is closed all the same: every acknowledged
        operation is in the translog, which the next open replays."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            try:
                if len(self.buffer) or self.pending_deletes or self._flushing:
                    self._flush_buffer()
                    self._commit(roll=True)
                self._write_commits()
            finally:
                self._close_files()
                if self._own_services:
                    self.services.close()

    def _close_files(self) -> None:
        """`close`'s end, whether its flush succeeded or not (caller holds the lock)."""
        for flushing in self._flushing:  # left on the flush thread by a flush that failed
            flushing.built.exception()
            discard_unfinished(flushing.folder)
        self._flushing = []
        self.translog.close()
        with self._searcher_lock:
            old, self._searcher = self._searcher, None
        if old is not None:
            old.release()
        self.buffer = IndexBuffer()
        self.version_map = {}
        self.tombstones = {}
        self.segments = []
        self.live = {}

    # ---- stats ---------------------------------------------------------------------------

    def published_views(self) -> list[SegmentView]:
        """The segments the published snapshot reads (none once closed), for statistics."""
        searcher = self._searcher
        return list(searcher.views) if searcher is not None else []

    def doc_count(self) -> int:
        searcher = self._searcher
        return searcher.live_count if searcher else 0

    def lucene_doc_count(self) -> int:
        """Live documents with the hidden ones of `nested` objects, as Lucene and `_stats` count."""
        searcher = self._searcher
        return searcher.live_count + searcher.nested_live_count if searcher else 0

    def segment_count(self) -> int:
        return len(self.segments)

    def deleted_count(self) -> int:
        searcher = self._searcher
        return (searcher.max_doc - searcher.live_count) if searcher else 0

    def store_size_bytes(self) -> int:
        return folder_size(self.folder)


def _buffer_live(seg: Segment, buffer: IndexBuffer) -> np.ndarray | None:
    """The live docs of the segment written from `buffer`: its deleted documents masked (None:
    every one is live)."""
    if not buffer.deleted:
        return None
    live = np.ones(seg.max_doc, dtype=bool)
    deleted = np.fromiter(buffer.deleted, dtype=np.int64, count=len(buffer.deleted))
    # Buffer doc numbers are arrival order; a sorted segment holds them elsewhere.
    live[deleted if buffer.segment_docs is None else buffer.segment_docs[deleted]] = False
    return live


def file_sizes(folder: Path) -> Iterator[tuple[str, int]]:
    """(name, bytes) of each file under `folder`. Segments are written, renamed and deleted
    meanwhile (by the flush thread and merges): a file or folder gone before it is read is skipped."""
    for root, _, files in os.walk(folder):
        for name in files:
            with suppress(FileNotFoundError):
                yield name, os.stat(os.path.join(root, name)).st_size


def folder_size(folder: Path) -> int:
    return sum(size for _, size in file_sizes(folder))
