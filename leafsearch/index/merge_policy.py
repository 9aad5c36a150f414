"""Which segments to merge: a tiered policy in the spirit of Lucene's TieredMergePolicy.

Segments are grouped in tiers by live size (powers of ten); when a tier holds `MERGE_FACTOR`
segments, the smallest of them are merged. Segments that are mostly deleted are merged early
to give their space back. A merged segment never exceeds `MAX_MERGED_DOCS` (as Lucene's
`max_merged_segment`, by documents here), which bounds the memory a merge needs: about 1 KB per
merged bench document in the merge worker, so the node's processes together stay near 1 GB while
1,000,000 documents are loaded (bench/RESULTS.md, "Bulk by column").
"""

from __future__ import annotations

import math

import numpy as np

from leafsearch.index.segment import Segment

MERGE_FACTOR = 10
MAX_MERGED_DOCS = 200_000
FLOOR_DOCS = 1_000
DELETES_PCT_TRIGGER = 0.33


def _live(seg: Segment, live: np.ndarray | None) -> int:
    return seg.max_doc if live is None else int(np.count_nonzero(live))


def find_merge(segments: list[tuple[Segment, np.ndarray | None]]) -> list[Segment]:
    """The segments to merge next, or an empty list."""
    sized = sorted(((_live(s, live), s) for s, live in segments), key=lambda x: x[0])
    tiers: dict[int, list[tuple[int, Segment]]] = {}
    for size, seg in sized:
        tier = int(math.log10(max(size, FLOOR_DOCS)))
        tiers.setdefault(tier, []).append((size, seg))
    for tier in sorted(tiers):
        members = tiers[tier]
        if len(members) >= MERGE_FACTOR:
            chosen, total = [], 0
            for size, seg in members[:MERGE_FACTOR]:
                if total + size > MAX_MERGED_DOCS and chosen:
                    break
                chosen.append(seg)
                total += size
            if len(chosen) > 1:
                return chosen
    for seg, live in segments:
        if seg.max_doc and 1 - _live(seg, live) / seg.max_doc >= DELETES_PCT_TRIGGER:
            return [seg]
    return []
