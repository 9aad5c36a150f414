"""Running phrase plans over one segment: candidates from the postings of every slot, then exact or
sloppy phrase frequencies from positions, scored with BM25 on the summed idf of the terms.

Approximation, knowingly: sloppy phrases whose terms repeat are scored as if the repeats were
different terms.
"""

from __future__ import annotations

import numpy as np

from leafsearch.index.columns import TextColumn
from leafsearch.index.searcher import SegmentView
from leafsearch.search import bm25
from leafsearch.search.query.context import QueryContext
from leafsearch.search.query.masks import Result, empty, mask_of, postings_union
from leafsearch.search.query.plans import Phrase
from leafsearch.search.query.term_exec import norm_table

_F32 = np.float32
_STRIDE = np.int64(1 << 32)


def _slot_occurrences(col: TextColumn, terms: tuple[str, ...], candidates: np.ndarray):
    """(doc, position) of every occurrence of a slot's terms in candidate documents."""
    docs_parts, pos_parts = [], []
    for term in terms:
        docs, positions = col.term_positions(term)
        keep = candidates[docs]
        docs_parts.append(np.asarray(docs, dtype=np.int64)[keep])
        pos_parts.append(np.asarray(positions, dtype=np.int64)[keep])
    return np.concatenate(docs_parts), np.concatenate(pos_parts)


def _exact_phrase(slots_occ: list, offsets: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(docs, phrase frequencies): starts where every slot holds its term at start + offset."""
    keys = None
    order = sorted(range(len(slots_occ)), key=lambda i: len(slots_occ[i][0]))
    for i in order:
        docs, positions = slots_occ[i]
        start = positions - offsets[i]
        ok = start >= 0
        slot_keys = np.unique(docs[ok] * _STRIDE + start[ok])
        keys = slot_keys if keys is None else keys[np.isin(keys, slot_keys, assume_unique=True)]
        if len(keys) == 0:
            break
    docs, freqs = np.unique(keys // _STRIDE, return_counts=True)
    return docs, freqs.astype(_F32)


def _sloppy_phrase(slots_occ: list, offsets: tuple[int, ...], slop: int) -> tuple[np.ndarray, np.ndarray]:
    """(docs, sloppy frequencies) as Lucene's SloppyPhraseMatcher counts them, vectorized.

    Occurrences are merged in (doc, position - offset) order. Lucene pops the smallest phrase
    position, advances that term while it stays the smallest, and scores the window from the last
    of those occurrences to the largest current position of the other terms: `1 / (1 + length)`
    when the length is within the slop. It stops after the run holding the first "last occurrence"
    of any term. Each run's window only needs the next occurrence of every other term after it.
    """
    k = len(slots_occ)
    d = np.concatenate([occ[0] for occ in slots_occ])
    p = np.concatenate([occ[1] - offsets[i] for i, occ in enumerate(slots_occ)])
    t = np.concatenate([np.full(len(occ[0]), i, dtype=np.int64) for i, occ in enumerate(slots_occ)])
    order = np.lexsort((t, p, d))
    d, p, t = d[order], p[order], t[order]
    n = len(d)
    idx = np.arange(n)
    # For each slot u: position of its first occurrence strictly after j in the same document.
    next_pos = np.full((k, n), np.iinfo(np.int64).max, dtype=np.int64)
    for u in range(k):
        nxt = np.minimum.accumulate(np.where(t == u, idx, n)[::-1])[::-1]
        after = np.append(nxt[1:], n)
        ok = after < n
        ok[ok] = d[after[ok]] == d[ok]
        next_pos[u, ok] = p[after[ok]]
    missing = np.iinfo(np.int64).max
    is_last = next_pos[t, idx] == missing
    run_end = np.ones(n, dtype=bool)
    run_end[:-1] = (t[1:] != t[:-1]) | (d[1:] != d[:-1])
    doc_starts = np.flatnonzero(np.concatenate(([True], d[1:] != d[:-1])))
    first_last = np.minimum.reduceat(np.where(is_last, idx, n), doc_starts)
    limit = np.repeat(first_last, np.diff(np.append(doc_starts, n)))
    counted = run_end & (idx <= limit)
    others = np.where(np.arange(k)[:, None] == t[None, :], np.iinfo(np.int64).min, next_pos)
    window_end = others.max(axis=0)
    length = window_end - p
    good = counted & (length <= slop) & (window_end != missing)
    weights = (_F32(1) / (_F32(1) + length[good].astype(_F32))).astype(np.float64)
    freqs = np.bincount(d[good], weights=weights)
    docs = np.flatnonzero(freqs)
    return docs, freqs[docs].astype(_F32)


def exec_phrase(plan: Phrase, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    n = view.max_doc
    col = view.segment.column(plan.field)
    if not isinstance(col, TextColumn):
        return empty(view, scoring)
    candidates = np.ones(n, dtype=bool)
    for slot in plan.slots:
        ids = np.array([i for i in (col.lookup(t) for t in slot) if i >= 0], dtype=np.int64)
        candidates &= postings_union(col, ids, n)
    if not candidates.any():
        return empty(view, scoring)
    occurrences = [_slot_occurrences(col, slot, candidates) for slot in plan.slots]
    if plan.slop == 0:
        docs, freqs = _exact_phrase(occurrences, plan.positions)
    else:
        docs, freqs = _sloppy_phrase(occurrences, plan.positions, plan.slop)
    mask = mask_of(docs, n)
    if not scoring:
        return mask, None
    scores = np.zeros(n, dtype=_F32)
    if len(docs):
        w, table = _phrase_weight(plan, ctx, boost * plan.boost)
        scores[docs] = bm25.score(freqs, np.asarray(col.norms)[docs], w, table)
    return mask, scores


def _phrase_weight(plan: Phrase, ctx: QueryContext, boost: float) -> tuple[np.float32, np.ndarray]:
    key = ("phrase", plan.field, plan.slots, boost)
    cached = ctx._weights.get(key)
    if cached is None:
        doc_count, total = ctx.searcher.text_stats(plan.field)
        dfs = [bm25.text_doc_freq(ctx.searcher, plan.field, t) for slot in plan.slots for t in slot]
        table = norm_table(ctx, plan.field, "text", doc_count, total)
        cached = ctx._weights[key] = (bm25.weight(boost, bm25.idf_sum(dfs, doc_count)), table)
    return cached
