"""Running the leaf plans over one segment: BM25-scored terms from postings (text) or doc values
(keyword, boolean), and the constant-scored value sets, ranges, patterns, exists and ids. Term
weights and norm tables come from shard statistics and are cached on the context."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from leafsearch.index.columns import KeywordColumn, NumericColumn, TextColumn, VectorColumn
from leafsearch.index.range_fields import matching_terms
from leafsearch.index.searcher import SegmentView
from leafsearch.search import bm25
from leafsearch.search.query.context import QueryContext
from leafsearch.search.query.masks import (
    Result,
    constant,
    dv_mask,
    empty,
    mask_of,
    ordinal_mask,
    ordinals_mask,
    postings_union,
    ranges,
)
from leafsearch.search.query.plans import (
    ExistsPlan,
    IdsPlan,
    NumRange,
    PatternPlan,
    RangeFieldPlan,
    ScoredTerm,
    TermRange,
    ValueSet,
)
from leafsearch.search.query.term_selection import (
    literal_prefix,
    select_terms,
    term_pattern,
    terms_matching,
)

_F32 = np.float32
_PRECISION_DTYPES = {None: None, "float": np.float32, "half_float": np.float16}


def _term_weight(plan: ScoredTerm, ctx: QueryContext, boost: float) -> tuple[np.float32, np.ndarray]:
    """(weight, norm table) of a scored term from shard statistics, cached per context."""
    key = (plan.field, plan.kind, plan.term, boost, plan.doc_freq)
    cached = ctx._weights.get(key)
    if cached is not None:
        return cached
    searcher = ctx.searcher
    if plan.kind == "text":
        doc_count, total = searcher.text_stats(plan.field)
        df = (
            plan.doc_freq
            if plan.doc_freq is not None
            else bm25.text_doc_freq(searcher, plan.field, plan.term)
        )
    elif plan.kind == "keyword":
        doc_count, total = bm25.keyword_field_stats(searcher, plan.field)
        df = bm25.keyword_doc_freq(searcher, plan.field, str(plan.term))
    else:
        doc_count, total, df = bm25.boolean_stats(searcher, plan.field, int(plan.term))
    table = norm_table(ctx, plan.field, plan.kind, doc_count, total)
    result = (bm25.weight(boost, bm25.idf(df, doc_count)), table)
    ctx._weights[key] = result
    return result


def norm_table(ctx: QueryContext, name: str, kind: str, doc_count: int, total: int) -> np.ndarray:
    key = ("norms", name, kind)
    table = ctx._weights.get(key)
    if table is None:
        table = ctx._weights[key] = bm25.norm_table(bm25.avg_field_length(total, doc_count))
    return table


def term_postings(plan: ScoredTerm, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float):
    """(docs, scores or None) of a text term in one segment, straight from its postings."""
    col = view.segment.column(plan.field)
    if not isinstance(col, TextColumn):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=_F32)
    docs, freqs = col.postings(plan.term)
    if not scoring or len(docs) == 0:
        return docs, np.empty(0, dtype=_F32) if scoring else None
    w, table = _term_weight(plan, ctx, boost * plan.boost)
    return docs, bm25.score(freqs, np.asarray(col.norms)[docs], w, table)


def exec_scored_term(
    plan: ScoredTerm, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    n = view.max_doc
    if plan.kind == "text":
        docs, term_scores = term_postings(plan, view, ctx, scoring, boost)
        mask = mask_of(docs, n)
        if not scoring:
            return mask, None
        scores = np.zeros(n, dtype=_F32)
        scores[docs] = term_scores
        return mask, scores
    col = view.segment.column(plan.field)
    if plan.kind == "keyword":
        if not isinstance(col, KeywordColumn):
            return empty(view, scoring)
        ordinal = col.lookup(str(plan.term))
        if ordinal < 0:
            return empty(view, scoring)
        mask = ordinals_mask(col, np.array([ordinal]))
    else:
        if not isinstance(col, NumericColumn):
            return empty(view, scoring)
        value = int(plan.term)
        mask = dv_mask(col.doc_values, lambda v: v == value)
    if not scoring:
        return mask, None
    w, table = _term_weight(plan, ctx, boost * plan.boost)
    return mask, mask.astype(_F32) * bm25.constant_score(w, table)


def exec_value_set(
    plan: ValueSet, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    col = view.segment.column(plan.field)
    n = view.max_doc
    if plan.kind == "text":
        if not isinstance(col, TextColumn):
            return empty(view, scoring)
        selected = terms_matching(col.terms, plan.values, plan.case_insensitive)
        mask = postings_union(col, np.flatnonzero(selected), n)
    elif plan.kind == "keyword":
        if not isinstance(col, KeywordColumn):
            return empty(view, scoring)
        mask = ordinal_mask(col, terms_matching(col.terms, plan.values, plan.case_insensitive))
    else:
        if not isinstance(col, NumericColumn) or not plan.values:
            return empty(view, scoring)
        dtype = _PRECISION_DTYPES[plan.precision]
        if dtype is not None:
            wanted = np.asarray(plan.values, dtype=dtype)
            mask = dv_mask(col.doc_values, lambda v: np.isin(v.astype(dtype), wanted))
        elif len(plan.values) == 1:
            target = plan.values[0]
            mask = dv_mask(col.doc_values, lambda v: v == target)
        else:
            wanted = np.asarray(plan.values)
            mask = dv_mask(col.doc_values, lambda v: np.isin(v, wanted))
    return constant(mask, scoring, boost * plan.boost)


def exec_num_range(
    plan: NumRange, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    test = range_test(plan, view)
    if test is False:
        return empty(view, scoring)
    doc_values = view.segment.column(plan.field).doc_values  # type: ignore[union-attr]
    if test is True:
        return constant(doc_values.present.copy(), scoring, boost * plan.boost)
    return constant(dv_mask(doc_values, test), scoring, boost * plan.boost)


#: A `long` column's bounds (`np.iinfo` builds an object at each call: once per segment here).
_LONG_MIN, _LONG_MAX = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)


def range_test(plan: NumRange, view: SegmentView) -> Callable[[np.ndarray], np.ndarray] | bool:
    """The vectorized test of a numeric range over one segment's values; False when no document
    of the segment can match, True when every valued document does. The segment's bounds decide
    alone when the range covers or misses them (no pass over the values)."""
    col = view.segment.column(plan.field)
    if not isinstance(col, NumericColumn):
        return False
    lo, hi = plan.lo, plan.hi
    dtype = _PRECISION_DTYPES[plan.precision]
    if col.kind == "long":
        if (lo is not None and lo > _LONG_MAX) or (hi is not None and hi < _LONG_MIN):
            return False
        lo = None if lo is None or lo <= _LONG_MIN else lo
        hi = None if hi is None or hi >= _LONG_MAX else hi
    if dtype is None:
        bounds = col.doc_values.bounds
        if bounds is None:
            return False
        low, high = bounds
        if (lo is None or low >= lo) and (hi is None or high <= hi):
            return True
        if (lo is not None and high < lo) or (hi is not None and low > hi):
            return False

    def test(values: np.ndarray) -> np.ndarray:
        if dtype is not None:
            values = values.astype(dtype)
        if lo is not None and hi is not None:
            return (values >= lo) & (values <= hi)
        if lo is not None:
            return values >= lo
        if hi is not None:
            return values <= hi
        return np.ones(len(values), dtype=bool)

    return test


def exec_term_range(
    plan: TermRange, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    col = view.segment.column(plan.field)
    if not isinstance(col, TextColumn | KeywordColumn):
        return empty(view, scoring)
    terms = col.terms
    lo = (
        0
        if plan.lo is None
        else int(np.searchsorted(terms, plan.lo, side="left" if plan.include_lo else "right"))
    )
    hi = (
        len(terms)
        if plan.hi is None
        else int(np.searchsorted(terms, plan.hi, side="right" if plan.include_hi else "left"))
    )
    if hi <= lo:
        return empty(view, scoring)
    if isinstance(col, TextColumn):
        mask = postings_union(col, np.arange(lo, hi), view.max_doc)
    else:
        mask = ordinals_mask(col, np.arange(lo, hi))
    return constant(mask, scoring, boost * plan.boost)


def exec_pattern(
    plan: PatternPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    n = view.max_doc
    ci = plan.case_insensitive
    plain_prefix = plan.mode == "prefix" and not ci
    pattern = None if plain_prefix else term_pattern(plan.mode, plan.pattern, ci, plan.flags, plan.max_states)
    literal = "" if ci else literal_prefix(plan.mode, plan.pattern)
    if plan.kind == "_id":
        segment = view.segment
        selected = select_terms(segment.id_terms, plan.mode, pattern, ci, literal)
        mask = mask_of(np.asarray(segment.id_docs)[selected], n)
        return constant(mask, scoring, boost * plan.boost)
    col = view.segment.column(plan.field)
    if isinstance(col, TextColumn):
        selected = select_terms(col.terms, plan.mode, pattern, ci, literal)
        mask = postings_union(col, np.flatnonzero(selected), n)
    elif isinstance(col, KeywordColumn):
        mask = ordinal_mask(col, select_terms(col.terms, plan.mode, pattern, ci, literal))
    else:
        return empty(view, scoring)
    return constant(mask, scoring, boost * plan.boost)


def exec_exists(
    plan: ExistsPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    mask = np.zeros(view.max_doc, dtype=bool)
    for name in plan.fields:
        col = view.segment.column(name)
        if isinstance(col, TextColumn):
            mask |= col.present
        elif isinstance(col, KeywordColumn):
            mask |= col.ords.present
        elif isinstance(col, NumericColumn):
            mask |= col.doc_values.present
        elif isinstance(col, VectorColumn):
            mask |= col.present
    return constant(mask, scoring, boost * plan.boost)


def exec_ids(plan: IdsPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    segment = view.segment
    width = segment.id_terms.dtype.itemsize  # a longer id is in no segment: no key array is wider
    keys = np.array([k for i in plan.ids if len(k := i.encode()) <= width], dtype=bytes)
    if len(keys) == 0:
        return empty(view, scoring)
    lo, hi = segment.lookup_ids(keys)
    docs = np.asarray(segment.id_docs)[ranges(lo.astype(np.int64), hi.astype(np.int64))]
    return constant(mask_of(docs, view.max_doc), scoring, boost * plan.boost)


def exec_range_field(
    plan: RangeFieldPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    """The documents of the segment's distinct intervals that meet the query's: one numpy pass
    over the keyword column's terms, then their ordinals' documents."""
    col = view.segment.column(plan.field)
    if not isinstance(col, KeywordColumn):
        return empty(view, scoring)
    selected = matching_terms(col.terms, plan.type, plan.lo, plan.hi, plan.relation)
    return constant(ordinal_mask(col, selected), scoring, boost * plan.boost)
