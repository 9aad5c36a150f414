"""Sort orders per segment: every document of a segment in the order of a sort, computed once.

A segment never changes, so the order of its documents by a sort (fields, orders, `missing`,
`mode`, `numeric_type`) holds for the segment's whole life: every query, every snapshot holding
the segment and every page reuse it, and a refresh only orders its new segment. A sorted query
then walks each segment's order under its match mask and stops once it has a page's worth of
hits (`first_matches`), and `search_after` without a point in time binary-searches the
segment's sorted keys (`SegmentOrder.start_after`), so neither sorts the matches nor depends on
the depth.

Cost: building an order is one `lexsort` of the segment (O(n log n), n = its documents); it holds
4 bytes per document for the order, 4 for its inverse (each document's rank, which lets a query
with few matches rank them instead of walking) and 8 per key column and document. `SegmentOrders`, owned by
the Node, bounds their total (`indices.cache.sort_orders.size`), least recently used first, and
forgets a segment's orders when the segment object goes. The order of a large segment is built
once for all processes: the first writes it to a file beside the segment (order_files.py), the
others, and any process after a restart, map it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.common.bounded_cache import BoundedCache
from leafsearch.index import derived_files, order_files
from leafsearch.index.order_files import StoredOrder
from leafsearch.index.segment import Segment
from leafsearch.request.search_types import SortSpec
from leafsearch.search.sort_keys import SortColumn

if TYPE_CHECKING:
    from leafsearch.search.hitlist import SegmentMatches

_log = logging.getLogger("leafsearch")

#: A walk reads a segment's order in chunks that grow by this factor, from a few pages' worth.
_GROWTH = 4
_FIRST_CHUNK = 4096
#: A query whose matches number fewer than sqrt(k * n / this) ranks them instead of walking.
_RANK_FACTOR = 4


@dataclass(eq=False)
class SegmentOrder:
    """One segment's documents sorted by one sort: ties in doc order."""

    order: np.ndarray  # local doc numbers in sort order
    keys: list[np.ndarray]  # the comparable key columns, in that order (ascending)
    columns: list[SortColumn]  # per sort spec, the segment's column without its values
    rank: np.ndarray  # the position of each local doc in `order` (its inverse)
    mapped: bool = False  # its arrays are a file's, memory-mapped (order_files.py)
    #: This order with a doc tiebreaker (`with_doc_tiebreaker`), by the tiebreaker's sort.
    _tiebroken: dict[SortSpec, SegmentOrder] = field(default_factory=dict, init=False, repr=False)

    @property
    def nbytes(self) -> int:
        return self.order.nbytes + self.rank.nbytes + sum(k.nbytes for k in self.keys)

    def __len__(self) -> int:
        return len(self.order)

    def with_doc_tiebreaker(self, template: SortColumn) -> SegmentOrder:
        """This order for the same sort followed by an ascending `_doc` or `_shard_doc`
        (`template`: its column over no documents): the same order, since ties are already in
        doc order, with the local doc numbers as its last key. Shares every array: a PIT's sort
        (which ends with `_shard_doc`) reads the order the same sort without a PIT built. Made
        once per order and tiebreaker (every page of a walk asks for it)."""
        found = self._tiebroken.get(template.spec)
        if found is None:
            found = replace(self, keys=[*self.keys, self.order], columns=[*self.columns, template])
            self._tiebroken[template.spec] = found
        return found

    def stored(self, templates: list[SortColumn]) -> StoredOrder:
        """What a file keeps of this order: the arrays, and how each column differs from
        `templates` (the segment's columns as `OrderFile.templates` rebuilds them without the
        order: a flag for missing values, and a keyword column's own terms when its `missing`
        added one)."""
        terms = []
        for column, template in zip(self.columns, templates, strict=True):
            own = column.terms is not None and (
                template.terms is None or len(template.terms) != len(column.terms)
            )
            terms.append(np.asarray(column.terms) if own else None)
        flagged = [c.present is not None for c in self.columns]
        return StoredOrder(self.order, self.rank, self.keys, flagged, terms)

    @staticmethod
    def from_stored(stored: StoredOrder, templates: list[SortColumn]) -> SegmentOrder:
        """The order a file holds, its columns rebuilt from `templates`."""
        columns = [
            replace(
                template,
                present=np.zeros(1, dtype=bool) if flagged else None,
                terms=template.terms if terms is None else terms,
            )
            for template, flagged, terms in zip(templates, stored.flagged, stored.terms, strict=True)
        ]
        return SegmentOrder(stored.order, stored.keys, columns, stored.rank, mapped=True)

    def first(
        self, matches: SegmentMatches, start: int, k: int, count: int, end: int | None = None
    ) -> np.ndarray:
        """The first `k` documents in positions [`start`, `end`) among the segment's `matches`
        (`count` of them in the whole segment), in order.

        A walk of the order reads about `k * n / count` entries before it has `k` matches; when
        the matches are fewer than that, ranking them is cheaper: their positions in the order
        (`rank`), the `k` smallest from `start` on. Either way O(min(walk, n)) and no sort of
        every match."""
        n = len(self.order)
        end = n if end is None else end
        if count * count * _RANK_FACTOR >= k * n:
            # A first chunk of about what uniformly spread matches need (a quarter more), at
            # most the usual 4 pages: a query matching everything reads little past `k`.
            chunk = max(_FIRST_CHUNK, min(4 * k, 5 * k * n // (4 * count)))
            return first_matches(self.order, matches.dense(), start, k, end, chunk)
        ranks = self.rank[matches.docs()]
        if start or end < n:
            ranks = ranks[(ranks >= start) & (ranks < end)]
        if len(ranks) > k:
            ranks = np.partition(ranks, k - 1)[:k]
        return self.order[np.sort(ranks)]

    def end_at(self, bound: Any) -> int:
        """Position in `order` after the last document whose first key is at most `bound`: a
        page that already has `k` hits keyed at most `bound` needs nothing past it. O(log n)."""
        return int(np.searchsorted(self.keys[0], bound, side="right"))

    def first_keys(self, docs: np.ndarray) -> np.ndarray:
        """The first key of each of the segment's `docs`. O(len(docs))."""
        return self.keys[0][self.rank[docs]]

    def start_after(self, after: list[Any], shard_index: int, doc_base: int) -> int:
        """Position in `order` of the first document strictly after the `search_after` values
        (already converted to each sort's domain), for the segment at `doc_base` of the shard at
        `shard_index` of the request. O(log n).

        `_doc` and `_shard_doc` keys are stored segment-local (the base of a segment changes when
        segments before it are merged), so a cursor's values are made local first."""
        from leafsearch.search.hitlist import position_after

        keys: list[Any] = []
        for column, value in zip(self.columns, after, strict=True):
            if value is not None and column.kind == "doc":
                value -= doc_base
            elif value is not None and column.kind == "shard_doc":
                value -= (shard_index << 32) + doc_base
            keys.extend(column.after_key(value))
        return position_after(self.keys, keys, len(self.order))


@dataclass(frozen=True, eq=False)
class DocOrder:
    """A segment's documents in doc order, or its reverse: the order of a sort led by
    `_shard_doc`, or by `_doc` alone or then `_shard_doc` (a scroll's or a PIT's `_doc` walk),
    whose first key is unique per document of a shard, so no later key orders a shard's
    documents. It needs no arrays: position `p` is doc `p` (ascending) or doc `max_doc - 1 - p`
    (descending), and a page reads the matches from the cursor on.

    Why not a built order: it would be the identity (or its reverse) at 16 bytes per document,
    and a file per segment, for what a subtraction gives."""

    max_doc: int
    descending: bool
    shard_doc: bool  # the key is `_shard_doc` (shard index << 32 | doc), else `_doc` (doc)
    #: After `_doc`, the order of a `_shard_doc` tiebreaker (True: ascending), which orders the
    #: documents of equal `_doc` on different shards; None: there is none.
    then_ascending: bool | None = None

    def __len__(self) -> int:
        return self.max_doc

    def first(
        self, matches: SegmentMatches, start: int, k: int, count: int, end: int | None = None
    ) -> np.ndarray:
        """The first `k` of the segment's `matches` in positions [`start`, `end`), ascending
        (doc order: what a leading `_shard_doc` key sorts by, `hitlist.sort_order`). O(the
        matches read from the cursor on), at most O(max_doc)."""
        end = self.max_doc if end is None else end
        lo, hi = (start, end) if not self.descending else (self.max_doc - end, self.max_doc - start)
        if hi <= lo or k <= 0:
            return np.empty(0, np.int64)
        if matches.matched is not None:
            docs = matches.matched
            part = docs[int(np.searchsorted(docs, lo)) : int(np.searchsorted(docs, hi))]
            return part[:k] if not self.descending else part[max(len(part) - k, 0) :]
        return _first_set(matches.dense(), lo, hi, k, self.descending)

    def start_after(self, after: list[Any], shard_index: int, doc_base: int) -> int:
        """Position of the first document strictly after the cursor (its first value is this
        sort's first key; a `null` one sorts past every document). O(1)."""
        value = after[0]
        if value is None:
            return self.max_doc
        local = int(value) - doc_base - ((shard_index << 32) if self.shard_doc else 0)
        # The document of this shard with the cursor's `_doc` comes after it when the cursor's
        # `_shard_doc` names an earlier shard (a later one, descending).
        tie = self.then_ascending is not None and after[1] is not None and 0 <= local < self.max_doc
        if tie:
            cursor_shard = int(after[1]) >> 32
            tie = shard_index > cursor_shard if self.then_ascending else shard_index < cursor_shard
        position = self.max_doc - local - tie if self.descending else local + 1 - tie
        return min(max(position, 0), self.max_doc)


#: What a page walks a segment in (see `top_hits.shard_orders`).
Order = SegmentOrder | DocOrder


def _first_set(mask: np.ndarray, lo: int, hi: int, k: int, from_end: bool) -> np.ndarray:
    """The first `k` set positions of `mask` in [lo, hi) (the last `k`, `from_end`), ascending,
    read in growing chunks from where the walk starts."""
    found: list[np.ndarray] = []
    need, step = k, max(_FIRST_CHUNK, 4 * k)
    while need > 0 and hi > lo:
        if from_end:
            a, b = max(lo, hi - step), hi
            part = np.flatnonzero(mask[a:b]) + a
            part = part[max(len(part) - need, 0) :]
            hi = a
        else:
            a, b = lo, min(hi, lo + step)
            part = np.flatnonzero(mask[a:b])[:need] + a
            lo = b
        found.append(part)
        need -= len(part)
        step *= _GROWTH
    if from_end:
        found.reverse()
    return np.concatenate(found) if found else np.empty(0, np.int64)


def first_matches(
    order: np.ndarray, mask: np.ndarray, start: int, k: int, end: int | None = None, chunk: int | None = None
) -> np.ndarray:
    """The first `k` documents of `order` in positions [`start`, `end`) whose `mask` is set, in
    order.

    Reads the order in growing chunks (the first of `chunk` entries, default four pages' worth),
    so a query that matches much stops after one chunk and a selective one reads
    O(k / selectivity) entries, at most the whole segment."""
    found: list[np.ndarray] = []
    need = k
    pos = start
    step = chunk or max(_FIRST_CHUNK, 4 * k)
    end = len(order) if end is None else end
    while need > 0 and pos < end:
        part = order[pos : min(pos + step, end)]
        hits = part[mask[part]][:need]
        found.append(hits)
        need -= len(hits)
        pos += step
        step *= _GROWTH
    return np.concatenate(found) if found else np.empty(0, dtype=order.dtype)


def build_order(columns: list[SortColumn], *, presorted: bool = False) -> SegmentOrder:
    """The order of a segment from its sort columns over every one of its documents.

    `presorted`: the segment is stored in this order (an index sort covers the sort, see
    index/index_sort.py), so the order is the identity and the keys need no sort."""
    keys: list[np.ndarray] = []
    for column in columns:
        keys.extend(column.key_columns())
    n = len(columns[0].values) if columns else 0
    dtype = np.int32 if n < 2**31 else np.int64
    order = np.arange(n, dtype=dtype) if presorted else np.lexsort(keys[::-1]).astype(dtype)
    rank = np.empty(n, dtype=dtype)
    rank[order] = np.arange(n, dtype=dtype)
    templates = [
        SortColumn(
            c.spec,
            c.kind,
            c.values[:0],
            None if c.present is None or c.present.all() else np.zeros(1, dtype=bool),
            c.terms,
            c.field_types,
            c.missing_key,
        )
        for c in columns
    ]
    return SegmentOrder(order, keys if presorted else [k[order] for k in keys], templates, rank)


@dataclass(frozen=True)
class OrderFile:
    """Where an order of a segment is kept on disk (`name`, in the segment's folder; see
    order_files.py), and how to rebuild its columns without sorting (`templates`: the segment's
    sort columns over no documents)."""

    name: str
    templates: Callable[[], list[SortColumn]]


class SegmentOrders(BoundedCache[tuple[int, Any], SegmentOrder]):
    """The Node's sort orders of segments, bounded in bytes (`indices.cache.sort_orders.size`).

    An order of a segment of `derived_files.MIN_DOCS` documents or more is also kept as a file in
    the segment's folder (order_files.py): the first process that needs it sorts and writes it, every
    other process, and this one after a restart, maps it. Mapped orders count against the bound
    like built ones (they occupy the page cache and the address space); evicting one only unmaps
    it."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes, lambda order: order.nbytes)
        self._watched: set[int] = set()
        self._watch_lock = threading.Lock()
        self._counts = {"built": 0, "files_written": 0, "files_mapped": 0, "files_rejected": 0}

    def order(
        self,
        segment: Segment,
        signature: Any,
        build: Callable[[], SegmentOrder],
        file: Callable[[], OrderFile | None] = lambda: None,
    ) -> SegmentOrder | None:
        """The segment's order for `signature` (mapped from its file, else built now), or None
        when one order alone would not fit the cache (the caller then selects without it).
        `file`: where the order is kept on disk (None: only in memory), asked on a miss only."""
        key = (id(segment), signature)
        found = self.get(key)
        if found is not None:
            return found
        if segment.max_doc * 12 > self.max_bytes:
            return None
        stored = file() if segment.max_doc >= derived_files.MIN_DOCS else None
        result = self._map(segment, stored) if stored is not None else None
        if result is None:
            result = build()
            self._count("built")
            if stored is not None:
                result = self._write(segment, stored, result)
        with self._watch_lock:
            if id(segment) not in self._watched:
                self._watched.add(id(segment))
                weakref.finalize(segment, self._forget, id(segment))
        self.put(key, result)
        return result

    def _map(self, segment: Segment, file: OrderFile) -> SegmentOrder | None:
        """The order from its file, or None (no whole file: it is built and written again)."""
        path = segment.folder / file.name
        stored = order_files.read(path)
        if stored is None:
            if path.exists():
                self._count("files_rejected")
            return None
        if len(stored.order) != segment.max_doc or len(stored.flagged) != len(templates := file.templates()):
            self._count("files_rejected")
            return None
        self._count("files_mapped")
        return SegmentOrder.from_stored(stored, templates)

    def _write(self, segment: Segment, file: OrderFile, built: SegmentOrder) -> SegmentOrder:
        """Write a built order to its file and use the file's mapping instead (the page cache
        then holds the only copy); the built order when the file cannot be written (a full disk,
        the segment deleted meanwhile, no memory for the file's buffers): the search it was built
        for goes on with it, rather than failing and leaving the next one to sort again."""
        templates = file.templates()
        path = segment.folder / file.name
        try:
            order_files.write(path, built.stored(templates))
        except derived_files.UNWRITTEN as exc:
            _log.debug("sort order %s not written: %s", path, exc)
            return built
        self._count("files_written")
        stored = order_files.read(path)
        return built if stored is None else SegmentOrder.from_stored(stored, templates)

    def _count(self, what: str) -> None:
        with self._watch_lock:
            self._counts[what] += 1

    def _forget(self, segment_id: int) -> None:
        """A segment is gone (no snapshot holds it): its orders go with it."""
        with self._watch_lock:
            self._watched.discard(segment_id)
        self.discard_where(lambda key, _: key[0] == segment_id)

    def stats(self) -> dict[str, int]:
        """Held orders (`mapped_*`: those mapped from files), and since start how many were
        built, written to files, mapped from them, and found torn or foreign (rebuilt)."""
        held = self.values()
        mapped = [o for o in held if o.mapped]
        with self._watch_lock:
            counts = dict(self._counts)
        return {
            "memory_size_in_bytes": sum(o.nbytes for o in held),
            "count": len(held),
            "evictions": self.evictions,
            "mapped_size_in_bytes": sum(o.nbytes for o in mapped),
            "mapped_count": len(mapped),
            **counts,
        }
