"""Dense per-segment results built in bulk: a match mask (one bool per document) and scores (one
float32 per document, None when the search needs none), from postings or doc values."""

from __future__ import annotations

import numpy as np

from leafsearch.index.columns import DocValues, KeywordColumn, TextColumn
from leafsearch.index.searcher import SegmentView

Result = tuple[np.ndarray, np.ndarray | None]


def empty(view: SegmentView, scoring: bool) -> Result:
    n = view.max_doc
    return np.zeros(n, dtype=bool), (np.zeros(n, dtype=np.float32) if scoring else None)


def constant(mask: np.ndarray, scoring: bool, boost: float) -> Result:
    if not scoring:
        return mask, None
    return mask, mask.astype(np.float32) * np.float32(boost)


def mask_of(docs: np.ndarray, n: int) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[docs] = True
    return mask


def found_docs(
    found: tuple[np.ndarray, np.ndarray | None] | None, view: SegmentView, scoring: bool, factor: float
) -> Result:
    """A segment's result from the documents a plan found for it beforehand (a kNN's, a join's)
    and their scores (None: each scores 1), scaled by `factor`; `found` None: no document."""
    if found is None:
        return empty(view, scoring)
    docs, scores = found
    mask = mask_of(docs, view.max_doc)
    if not scoring:
        return mask, None
    out = np.zeros(view.max_doc, dtype=np.float32)
    out[docs] = np.float32(factor) if scores is None else scores * np.float32(factor)
    return mask, out


def dv_mask(dv: DocValues, test, stored: bool = False) -> np.ndarray:
    """Documents with at least one value passing a vectorized test (`stored`: on the values as
    the segment stores them, which a test of a keyword's ordinals takes as they are)."""
    if dv.is_single:
        return test(np.asarray(dv.stored if stored else dv.values)) & dv.present
    docs, values = dv.flat
    return mask_of(docs[test(np.asarray(values))], dv.max_doc)


#: Ordinals held by fewer than one document in this many are matched from the keyword postings
#: (a scatter of their documents), more by comparing every document's ordinal: a scatter costs
#: about 25 comparisons per document (measured at 1M documents).
POSTINGS_FRACTION = 32


def ordinal_mask(col: KeywordColumn, selected: np.ndarray) -> np.ndarray:
    """Documents holding any selected ordinal (`selected`: one bool per term)."""
    return ordinals_mask(col, np.flatnonzero(selected))


def ordinals_mask(col: KeywordColumn, hits: np.ndarray) -> np.ndarray:
    """Documents holding any of the ordinals `hits` (ascending): from the postings when they are
    few (O(matches)), else one comparison per document (O(n))."""
    n = col.ords.max_doc
    if len(hits) == 0:
        return np.zeros(n, dtype=bool)
    lo, hi = int(hits[0]), int(hits[-1]) + 1
    contiguous = hi - lo == len(hits)
    docs, starts = col.postings
    if contiguous:
        if col.doc_count(lo, hi) * POSTINGS_FRACTION <= n:
            return mask_of(col.docs_of(lo, hi), n)
    elif int((starts[hits + 1] - starts[hits]).sum()) * POSTINGS_FRACTION <= n:
        return mask_of(docs[ranges(starts[hits], starts[hits + 1])], n)
    if len(hits) == 1:
        return dv_mask(col.ords, lambda v: v == lo, stored=True)
    if contiguous:
        return dv_mask(col.ords, lambda v: (v >= lo) & (v < hi), stored=True)
    selected = np.zeros(len(col.terms), dtype=bool)
    selected[hits] = True
    return dv_mask(col.ords, lambda v: selected[v], stored=True)


def postings_union(col: TextColumn, term_ids: np.ndarray, n: int) -> np.ndarray:
    """Documents holding any of the terms: one gather over the terms' posting slices."""
    mask = np.zeros(n, dtype=bool)
    if len(term_ids) == 0:
        return mask
    offsets = np.asarray(col.post_offsets, dtype=np.int64)
    starts, ends = offsets[term_ids], offsets[term_ids + 1]
    if len(term_ids) == int(term_ids[-1]) - int(term_ids[0]) + 1:
        mask[np.asarray(col.post_docs[int(starts[0]) : int(ends[-1])])] = True
        return mask
    mask[np.asarray(col.post_docs)[ranges(starts, ends)]] = True
    return mask


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenated aranges [start, end) without a Python loop."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return offsets + np.arange(total, dtype=np.int64)
