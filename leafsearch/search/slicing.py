"""Sliced scroll and sliced point in time: which documents of each segment belong to a slice.

Slices are first assigned to shards, as Elasticsearch's SliceBuilder does: shards are numbered in
the order Elasticsearch numbers a request's shards (shard number, then index name), and with at
least as many slices as shards slice `id` goes to shard `id % shards` and is split further inside
it; with fewer slices, shard `i` goes whole to slice `i % max`. Inside a shard a document belongs
to slice floorMod(hash, n): without `field` (or with `_id`) the hash is murmur3 (seed 7919) of
the encoded `_id` (TermsSliceQuery); with `field` it is HPPC's `BitMixer.mix` of the field's
doc value in Lucene's sortable-long form (DocValuesSliceQuery), a document without a value
counting as hash 0. A multi-valued field slices by its first (smallest) value, so slices stay
disjoint (SPEC 4.2 r6; Elasticsearch's query would put such a document in each of its values'
slices).

A segment's partition into `n` slices is computed once and kept while the segment lives, so a
sliced request costs no hashing: only its own slice's documents. By `_id` (a sliced scroll's
default), it is also kept as a file beside the segment, `slices-<n>.order` (derived_files.py):
the first process that needs it hashes every id and writes it, every other search worker, and
every process after a restart, maps it (hashing a million ids cost each worker ~0.4 s of CPU on
its first sliced scroll: most of what a 2-slice scroll's workers spent beyond one stream's;
bench/RESULTS.md, session 16). A segment whose sources are in the hash layout gives 2 or 4
slices with no hashing (`Segment.id_slices`). Point-in-time slices without a field are
contiguous ranges of the snapshot's live documents over all shards together (see
`pit_slice_range`), so they come out even however routing spread the documents.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.index import derived_files
from leafsearch.index.columns import NumericColumn
from leafsearch.request.search_types import SliceSpec
from leafsearch.search.targets import Target

if TYPE_CHECKING:
    from leafsearch.index.segment import Segment

_ID = "_id"
_PARTITIONS_PER_SEGMENT = 4
_partitions: weakref.WeakKeyDictionary[Segment, OrderedDict[tuple, _Partition]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _mix(values: np.ndarray) -> np.ndarray:
    """HPPC `BitMixer.mix(long)`: `(int) mix64(value)`, David Stafford's variant 9 finalizer."""
    z = values.astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(32))) * np.uint64(0x4CD6944C5CC20B6D)
        z = (z ^ (z >> np.uint64(29))) * np.uint64(0xFC12C5B19D3259E9)
        z = z ^ (z >> np.uint64(32))
    return z.astype(np.uint32).view(np.int32)


def _sortable_longs(values: np.ndarray, field_type: str) -> np.ndarray:
    """The long Lucene keeps in a numeric field's doc values (what DocValuesSliceQuery hashes)."""
    if field_type == "double":
        bits = np.asarray(values, dtype=np.float64).view(np.int64)
        return bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))
    if field_type == "float":
        bits32 = np.asarray(values, dtype=np.float64).astype(np.float32).view(np.int32)
        return (bits32 ^ ((bits32 >> 31) & np.int32(0x7FFFFFFF))).astype(np.int64)
    if field_type == "half_float":
        bits16 = np.asarray(values, dtype=np.float64).astype(np.float16).view(np.int16)
        return (bits16 ^ ((bits16 >> 15) & np.int16(0x7FFF))).astype(np.int64)
    return np.asarray(values).astype(np.int64)  # long kinds: integers, dates, scaled floats, booleans


def _hashes(segment: Segment, field: str | None, field_type: str | None) -> np.ndarray:
    """The slicing hash of every document of a segment (int64 holding a Java int)."""
    if field is None or field == _ID:
        return np.asarray(segment.slice_hashes, dtype=np.int64)
    hashes = np.zeros(segment.max_doc, dtype=np.int64)
    col = segment.column(field)
    if isinstance(col, NumericColumn):
        first, present = col.doc_values.per_doc("min")
        docs = np.flatnonzero(present)
        hashes[docs] = _mix(_sortable_longs(np.asarray(first)[docs], field_type or "long"))
    return hashes


class _Partition:
    """A segment's documents grouped by slice (ascending inside each), and masks built on demand."""

    def __init__(self, order: np.ndarray, bounds: np.ndarray) -> None:
        self.order = order
        self.bounds = bounds
        self.max_doc = len(order)
        self._masks: dict[int, np.ndarray] = {}

    @classmethod
    def of(cls, slices: np.ndarray, count: int) -> _Partition:
        """The partition of documents whose slices are `slices`."""
        order = np.argsort(slices, kind="stable").astype(np.int64)
        return cls(
            order, np.concatenate(([0], np.cumsum(np.bincount(slices, minlength=count)))).astype(np.int64)
        )

    def docs(self, slice_id: int) -> np.ndarray:
        return self.order[self.bounds[slice_id] : self.bounds[slice_id + 1]]

    def mask(self, slice_id: int) -> np.ndarray:
        mask = self._masks.get(slice_id)
        if mask is None:
            mask = np.zeros(self.max_doc, dtype=bool)
            mask[self.docs(slice_id)] = True
            mask.setflags(write=False)
            self._masks[slice_id] = mask
        return mask


def _partition(segment: Segment, field: str | None, field_type: str | None, count: int) -> _Partition:
    key = (None if field == _ID else field, field_type, count)
    with _lock:
        cached = _partitions.setdefault(segment, OrderedDict())
        part = cached.get(key)
        if part is not None:
            cached.move_to_end(key)
            return part
    part = _stored(segment, count) if key[0] is None else None
    if part is None:
        slices = segment.id_slices(count) if key[0] is None else None
        if slices is None:
            slices = np.mod(_hashes(segment, key[0], field_type), count)
        part = _Partition.of(slices.astype(np.int64), count)
        if key[0] is None and segment.max_doc >= derived_files.MIN_DOCS:
            part = _store(segment, count, part)
    with _lock:
        cached[key] = part
        while len(cached) > _PARTITIONS_PER_SEGMENT:
            cached.popitem(last=False)
    return part


_FILE_FORMAT = 1


def _file(segment: Segment, count: int) -> Path:
    return segment.folder / f"slices-{count}.order"


def _stored(segment: Segment, count: int) -> _Partition | None:
    """The `_id` partition into `count` slices from its file (None: no whole file, or a small
    segment, which derives it faster than a file opens)."""
    if segment.max_doc < derived_files.MIN_DOCS:
        return None
    found = derived_files.read(_file(segment, count))
    if found is None or found.meta.get("slices_format") != _FILE_FORMAT:
        return None
    order, bounds = found.arrays.get("order"), found.arrays.get("bounds")
    if order is None or bounds is None or len(order) != segment.max_doc or len(bounds) != count + 1:
        return None
    return _Partition(order, bounds)


def _store(segment: Segment, count: int, part: _Partition) -> _Partition:
    """Write the partition's file and use its mapping (the page cache then holds the only copy);
    the partition as built when the file cannot be written (the request goes on with it)."""
    arrays = {"order": part.order, "bounds": part.bounds}
    try:
        derived_files.write(_file(segment, count), arrays, {"slices_format": _FILE_FORMAT})
    except derived_files.UNWRITTEN:
        return part
    return _stored(segment, count) or part


# ---- shard assignment ------------------------------------------------------------------------


def _assignment(spec: SliceSpec, shard_index: int, num_shards: int) -> bool | tuple[int, int]:
    """SliceBuilder.toFilter: False (no document), True (every document) or (id, max) in the shard."""
    if num_shards == 1:
        return spec.id, spec.max
    if spec.max >= num_shards:
        if spec.id % num_shards != shard_index:
            return False
        in_shard = spec.max // num_shards + (1 if spec.max % num_shards > shard_index else 0)
        return True if in_shard == 1 else (spec.id // num_shards, in_shard)
    return shard_index % spec.max == spec.id


def shard_in_slice(spec: SliceSpec, shard_index: int, num_shards: int) -> bool:
    """Whether a shard holds any document of the slice (slices go to shards first): a shard
    outside it needs not be asked, it would match nothing."""
    return _assignment(spec, shard_index, num_shards) is not False


def check_slice_field(targets: list[Target], spec: SliceSpec, *, pit: bool) -> None:
    """Refuse what SliceBuilder refuses on the shards that build a slice query, with its messages."""
    # Targets come in Elasticsearch's shard request order, so a target's position is its index.
    for rank, target in enumerate(targets):
        if not isinstance(_assignment(spec, rank, len(targets)), tuple):
            continue
        if spec.field == _ID:
            if pit:
                raise IllegalArgument("cannot slice on [_id] when using [point-in-time]")
            continue
        if spec.field is None:
            continue
        ft = target.mapping.field(spec.field)
        if ft is None:
            raise IllegalArgument(f"field {spec.field} not found")
        if ft.kind not in ("long", "double") or not ft.doc_values:
            raise IllegalArgument(f"cannot load numeric doc values on {spec.field}")


def _field_type(target: Target, field: str | None) -> str | None:
    if field is None or field == _ID:
        return None
    ft = target.mapping.field(field)
    return ft.type if ft is not None else None


# ---- what a slice holds ----------------------------------------------------------------------


def scroll_selection(spec: SliceSpec, targets: list[Target]) -> list[np.ndarray | None]:
    """Per segment view of every target in order: the live local docs of the slice, ascending.

    None stands for all live documents of the view (a shard given whole to the slice). A target's
    part is kept by its snapshot (`_Selections`): a sliced scroll asks for every batch.
    """
    selection: list[np.ndarray | None] = []
    for rank, target in enumerate(targets):
        assigned = _assignment(spec, rank, len(targets))
        views = target.searcher.views
        if assigned is True:
            selection += [None] * len(views)
        elif assigned is False:
            selection += [np.empty(0, np.int64)] * len(views)
        else:
            kept = target.searcher.cached(_Selections, _Selections)
            selection += kept.of(target, spec.field, assigned)
    return selection


#: Slices' selections a snapshot keeps (`_Selections`).
_SELECTIONS_PER_SNAPSHOT = 4


class _Selections:
    """A snapshot's selections of the last `_SELECTIONS_PER_SNAPSHOT` slices asked for: per view,
    the slice's live documents of its segment. Why: a sliced scroll's batch looked each
    segment's partition up (14 us a batch over 12 segments, 3.5 times a whole walk's `LiveDocs`)
    and, in a segment with deletes, gathered its live documents of the slice again (2.5 ms a
    batch over 1,000,000 documents with 1% deleted; bench/RESULTS.md "A sliced scroll's blocks
    in one read (session 24, `slices12`)" and "A sliced scroll's selection and blocks (session
    25, `slices13`)"). Kept by the snapshot, they go with it. A view without deletes holds a
    slice of its partition only; one with deletes the slice's live documents, so the 4 hold at
    most twice what a whole walk of the snapshot keeps (`SegmentView.live_docs`)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple, list[np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, target: Target, field: str | None, assigned: tuple[int, int]) -> list[np.ndarray]:
        ftype = _field_type(target, field)
        key = (None if field == _ID else field, ftype, assigned)
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
        slice_id, count = assigned
        found = []
        for view in target.searcher.views:
            docs = _partition(view.segment, field, ftype, count).docs(slice_id)
            found.append(docs if view.live is None else docs[view.live[docs]])
        with self._lock:
            self._kept[key] = found
            while len(self._kept) > _SELECTIONS_PER_SNAPSHOT:
                self._kept.popitem(last=False)
        return found


def pit_slice_range(spec: SliceSpec, total: int) -> tuple[int, int]:
    """Positions [start, end) of a PIT slice among the `total` live documents in `_shard_doc` order."""
    return total * spec.id // spec.max, total * (spec.id + 1) // spec.max


def pit_slice_windows(spec: SliceSpec, targets: list[Target]) -> list[tuple[int, int]]:
    """Per target, the positions [start, end) of its live documents (in doc order) that belong
    to a PIT slice without a field: the slice's contiguous range over every target together."""
    counts = [t.searcher.live_count for t in targets]
    start, end = pit_slice_range(spec, sum(counts))
    windows = []
    before = 0
    for count in counts:
        windows.append((min(max(start - before, 0), count), min(max(end - before, 0), count)))
        before += count
    return windows


def _window_masks(target: Target, window: tuple[int, int]) -> list[np.ndarray]:
    """Per view of `target`, the documents among its live documents at positions [start, end)."""
    start, end = window
    masks = []
    before = 0
    for view in target.searcher.views:
        lo = max(start - before, 0)
        hi = min(end - before, view.live_count)
        mask = np.zeros(view.max_doc, dtype=bool)
        if hi > lo:
            mask[view.live_docs[lo:hi]] = True
        masks.append(mask)
        before += view.live_count
    return masks


def slice_masks(
    spec: SliceSpec,
    targets: list[Target],
    ti: int,
    *,
    pit: bool,
    position: tuple[int, int] | None = None,
    window: tuple[int, int] | None = None,
) -> list[np.ndarray]:
    """Per view of target `ti`, the documents that belong to the slice (read-only masks).

    `position`: (shard index, shard count) of a shard that sees only its own target (the shard
    interface): slices go to shards first, as a sliced scroll's do; within the shard, a PIT
    slice without a field is a contiguous range of its live documents. `window`: the range of
    the target's live documents a PIT slice without a field holds, as `pit_slice_windows` gives
    it over every shard of the request (so a shard seeing only its own target slices as a search
    seeing them all does)."""
    target = targets[ti]
    if window is not None:
        return _window_masks(target, window)
    if position is not None:
        assigned = _assignment(spec, *position)
        if isinstance(assigned, tuple) and pit and spec.field is None:
            sub = SliceSpec(assigned[0], assigned[1])
            return _window_masks(target, pit_slice_windows(sub, [target])[0])
    elif pit and spec.field is None:
        return _window_masks(target, pit_slice_windows(spec, targets)[ti])
    else:
        assigned = _assignment(spec, ti, len(targets))
    if not isinstance(assigned, tuple):
        return [np.full(v.max_doc, assigned, dtype=bool) for v in target.searcher.views]
    ftype = _field_type(target, spec.field)
    return [
        _partition(v.segment, spec.field, ftype, assigned[1]).mask(assigned[0]) for v in target.searcher.views
    ]
