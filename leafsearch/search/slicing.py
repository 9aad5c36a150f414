"""Sliced scroll and sliced point in time: which documents of each segment belong to a slice.

Scroll follows Elasticsearch exactly: slices are first assigned to shards (slice `id % shards`),
then split inside a shard by murmur3 of the encoded `_id` (seed 7919) or, with `field`, by a
mix of the field's numeric doc value. With a point in time, slices are contiguous ranges of the
snapshot's documents taken over all shards together, so they come out even however routing
spread the documents, and cost no hashing at all.
"""

from __future__ import annotations

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.index.columns import NumericColumn
from leafsearch.request.search_types import SliceSpec
from leafsearch.search.targets import Target


def _mix64(values: np.ndarray) -> np.ndarray:
    """HPPC BitMixer.mix64 (what DocValuesSliceQuery hashes numeric values with), as int32."""
    z = values.astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(32))) * np.uint64(0x4CD6944C5CC20B6D)
        z = (z ^ (z >> np.uint64(29))) * np.uint64(0xFC12C5B19D3259E9)
        z = z ^ (z >> np.uint64(32))
    return z.astype(np.uint32).view(np.int32)


def _field_hashes(view, field: str) -> tuple[np.ndarray, np.ndarray]:
    col = view.segment.column(field)
    if not isinstance(col, NumericColumn):
        n = view.max_doc
        return np.zeros(n, np.int32), np.zeros(n, bool)
    docs, values = col.doc_values.flat
    first = np.ones(len(docs), dtype=bool)
    first[1:] = docs[1:] != docs[:-1]
    hashes = np.zeros(view.max_doc, dtype=np.int32)
    hashes[docs[first]] = _mix64(np.asarray(values)[first])
    return hashes, col.doc_values.present


def _hash_slice(view, field: str | None, slice_id: int, max_slices: int) -> np.ndarray:
    if field is None:
        return np.mod(np.asarray(view.segment.slice_hashes, dtype=np.int64), max_slices) == slice_id
    hashes, present = _field_hashes(view, field)
    return (np.mod(hashes.astype(np.int64), max_slices) == slice_id) & present


def check_slice_field(targets: list[Target], field: str) -> None:
    for t in targets:
        ft = t.mapping.field(field)
        if ft is None:
            continue
        if ft.kind not in ("long", "double") or not ft.doc_values:
            raise IllegalArgument(
                f"cannot load numeric doc values on field [{field}]: slicing requires a numeric field with "
                "doc values"
            )


def _scroll_masks(spec: SliceSpec, target: Target, shard_index: int, num_shards: int) -> list[np.ndarray]:
    views = target.searcher.views
    none = [np.zeros(v.max_doc, bool) for v in views]
    every = [np.ones(v.max_doc, bool) for v in views]
    slice_id, max_slices = spec.id, spec.max
    if num_shards == 1:
        return [_hash_slice(v, spec.field, slice_id, max_slices) for v in views]
    if max_slices >= num_shards:
        if slice_id % num_shards != shard_index:
            return none
        in_shard = max_slices // num_shards + (1 if max_slices % num_shards > shard_index else 0)
        if in_shard == 1:
            return every
        return [_hash_slice(v, spec.field, slice_id // num_shards, in_shard) for v in views]
    return every if shard_index % max_slices == slice_id else none


def pit_slice_range(spec: SliceSpec, total: int) -> tuple[int, int]:
    """Positions [start, end) of a PIT slice among the `total` live documents in `_shard_doc` order."""
    return total * spec.id // spec.max, total * (spec.id + 1) // spec.max


def _pit_masks(spec: SliceSpec, targets: list[Target], ti: int) -> list[np.ndarray]:
    """Contiguous ranges of the snapshot's live documents, counted over every target together."""
    counts = [t.searcher.live_count for t in targets]
    start, end = pit_slice_range(spec, sum(counts))
    before = sum(counts[:ti])
    masks = []
    for view in targets[ti].searcher.views:
        lo = max(start - before, 0)
        hi = min(end - before, view.live_count)
        mask = np.zeros(view.max_doc, dtype=bool)
        if hi > lo:
            mask[view.live_docs[lo:hi]] = True
        masks.append(mask)
        before += view.live_count
    return masks


def slice_masks(spec: SliceSpec, targets: list[Target], ti: int, *, pit: bool) -> list[np.ndarray]:
    """Per view of target `ti`, the documents that belong to the slice."""
    if pit:
        if spec.field is None:
            return _pit_masks(spec, targets, ti)
        return [_hash_slice(v, spec.field, spec.id, spec.max) for v in targets[ti].searcher.views]
    return _scroll_masks(spec, targets[ti], ti, len(targets))
