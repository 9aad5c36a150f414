"""Running a plan over one segment: leaves by the term and phrase executors, compound plans here
(bool sums of must and should scores, dis_max's best plus tie-breaker, constant_score), all as
whole-array numpy operations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from leafsearch.index.searcher import SegmentView
from leafsearch.search.query import (
    conjunction,
    feature_queries,
    geo_queries,
    join_queries,
    nested_queries,
    percolate_queries,
    phrase_exec,
    script_exec,
    term_exec,
    vector_queries,
)
from leafsearch.search.query.context import QueryContext, shard_error
from leafsearch.search.query.masks import Result, constant, empty, mask_of
from leafsearch.search.query.plans import (
    AllDocs,
    BoolPlan,
    ConstPlan,
    DisMaxPlan,
    ExistsPlan,
    IdsPlan,
    NoDocs,
    NumRange,
    PatternPlan,
    Phrase,
    RangeFieldPlan,
    ScoredTerm,
    ScriptPlan,
    TermRange,
    ValueSet,
)

_F32 = np.float32


def run(plan: Any, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    """(mask, scores or None) of a plan over one segment; `boost` comes down from the parents.
    A profiled search times every node (search/profile.py)."""
    executor = _EXECUTORS[type(plan)]
    if ctx.profile is None:
        return executor(plan, view, ctx, scoring, boost)
    return ctx.profile.profiler.run(plan, lambda: executor(plan, view, ctx, scoring, boost))


def _exec_all(plan: AllDocs, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    n = view.max_doc
    return np.ones(n, dtype=bool), (np.full(n, _F32(boost * plan.boost), dtype=_F32) if scoring else None)


def _exec_nothing(plan: NoDocs, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    return empty(view, scoring)


def _exec_bool(plan: BoolPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    n = view.max_doc
    inner = boost * plan.boost
    if len(plan.must) == 1 and not (plan.should or plan.filter or plan.must_not):
        return run(plan.must[0], view, ctx, scoring, inner)
    leading = _led_conjunction(plan, view, ctx, scoring)
    if leading is not None:
        return leading
    required = plan.min_should if (plan.must or plan.filter or plan.min_should) else 1
    scored = _sparse_clauses(plan, view, ctx, scoring, inner, required)
    if scored is None:
        scored = _dense_clauses(plan, view, ctx, scoring, inner, required)
    mask, total = scored
    for clause in plan.filter:
        m, _ = run(clause, view, ctx, False, 1.0)
        mask = m.copy() if mask is None else np.logical_and(mask, m, out=mask)
    if mask is None:
        mask = np.ones(n, dtype=bool)
    for clause in plan.must_not:
        m, _ = run(clause, view, ctx, False, 1.0)
        mask &= ~m
    if not scoring:
        return mask, None
    if total is None:
        return mask, np.zeros(n, dtype=_F32)
    return mask, np.where(mask, total, 0).astype(_F32)


def matching_docs(plan: Any, view: SegmentView, ctx: QueryContext) -> np.ndarray | None:
    """The documents (ascending) a plan that scores nothing matches, when they are computed
    without a mask over the segment: a bool of required clauses led by a selective term and
    nothing excluded (conjunction.py); None otherwise (the caller runs the plan for its mask).
    Why: a selective filtered query matches a few hundred of a million documents, and a mask
    costs as many passes over the segment as its readers make (building, counting, listing)."""
    if not isinstance(plan, BoolPlan) or plan.must_not or ctx.needs_scores:
        return None
    return _conjunction_docs(plan, view, ctx, False)


def _conjunction_docs(
    plan: BoolPlan, view: SegmentView, ctx: QueryContext, scoring: bool
) -> np.ndarray | None:
    clauses = [*plan.must, *plan.filter]
    if plan.should or (scoring and plan.must) or ctx.profile is not None or len(clauses) < 2:
        return None
    return conjunction.conjunction_docs(clauses, view, lambda c: run(c, view, ctx, False, 1.0)[0])


def _led_conjunction(plan: BoolPlan, view: SegmentView, ctx: QueryContext, scoring: bool) -> Result | None:
    """A bool of required clauses that score nothing, led by its most selective term
    (conjunction.py): O(that term's matches) instead of a mask per clause; None when it does not
    apply (the dense path runs). A profiled search runs the dense path, which times every clause."""
    docs = _conjunction_docs(plan, view, ctx, scoring)
    if docs is None:
        return None
    mask = mask_of(docs, view.max_doc)
    for clause in plan.must_not:
        m, _ = run(clause, view, ctx, False, 1.0)
        mask &= ~m
    return mask, (np.zeros(view.max_doc, dtype=_F32) if scoring else None)


def _dense_clauses(
    plan: BoolPlan, view: SegmentView, ctx: QueryContext, scoring: bool, inner: float, required: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(mask of the must and should clauses or None when there are none, summed scores). Scores
    are added clause by clause into one array, so memory does not grow with the clause count."""
    n = view.max_doc
    mask: np.ndarray | None = None
    summed = _ScoreSum()
    for clause in plan.must:
        m, s = run(clause, view, ctx, scoring, inner)
        mask = m.copy() if mask is None else np.logical_and(mask, m, out=mask)
        if scoring:
            summed.add(s)
    if plan.should:
        counts = np.zeros(n, dtype=np.int32) if required > 1 else None
        any_should = np.zeros(n, dtype=bool) if required == 1 else None
        for clause in plan.should:
            m, s = run(clause, view, ctx, scoring, inner)
            if counts is not None:
                counts += m
            elif any_should is not None:
                any_should |= m
            if scoring:
                summed.add(s)
        should_mask = counts >= required if counts is not None else any_should
        if should_mask is not None:
            mask = should_mask if mask is None else np.logical_and(mask, should_mask, out=mask)
    return mask, summed.total


class _ScoreSum:
    """Clause scores summed in order: a single clause's float32 scores as they are, several
    summed in double."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total: np.ndarray | None = None

    def add(self, scores: np.ndarray) -> None:
        if self.total is None:
            self.total = scores
        elif self.total.dtype != np.float64:
            self.total = self.total.astype(np.float64) + scores
        else:
            self.total += scores


def _sparse_clauses(
    plan: BoolPlan, view: SegmentView, ctx: QueryContext, scoring: bool, inner: float, required: int
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """The common `match` shape (only must or only should clauses, all text terms) summed straight
    from the postings, term by term into one count and one score array: memory stays two arrays
    of the segment's size however many terms the query has. A term's postings hold each document
    once, so the scattered additions never collide; each document's score is summed in clause
    order, in double, as before."""
    clauses = plan.must or plan.should
    if (plan.must and plan.should) or len(clauses) < 2:
        return None
    if not all(isinstance(c, ScoredTerm) and c.kind == "text" for c in clauses):
        return None
    n = view.max_doc
    counts = np.zeros(n, dtype=np.int32)
    total = np.zeros(n, dtype=np.float64) if scoring else None
    for clause in clauses:
        docs, term_scores = term_exec.term_postings(clause, view, ctx, scoring, inner)
        docs = np.asarray(docs, dtype=np.intp)
        counts[docs] += 1
        if total is not None:
            total[docs] += term_scores
    mask = counts >= (len(clauses) if plan.must else required)
    return mask, total


def _exec_dis_max(
    plan: DisMaxPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    inner = boost * plan.boost
    mask = np.zeros(view.max_doc, dtype=bool)
    best = np.zeros(view.max_doc, dtype=_F32) if scoring else None
    total = np.zeros(view.max_doc, dtype=np.float64) if scoring else None
    for clause in plan.queries:
        m, s = run(clause, view, ctx, scoring, inner)
        mask |= m
        if scoring:
            np.maximum(best, s, out=best)
            total += s
    if not scoring:
        return mask, None
    tie = np.float64(_F32(plan.tie_breaker))
    scores = (best.astype(np.float64) + (total - best) * tie).astype(_F32)
    return mask, np.where(mask, scores, _F32(0))


def _exec_const(plan: ConstPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float) -> Result:
    mask, _ = run(plan.inner, view, ctx, False, 1.0)
    return constant(mask, scoring, boost * plan.boost)


def _exec_script(
    plan: ScriptPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    """A `script` query keeps the live documents its script returns true for; a `script_score`
    scores its inner query's matches with the script (`_score` their score), dropping those
    below `min_score`. Scripts run on live documents only."""
    if plan.inner is None:
        mask, inner_scores = np.ones(view.max_doc, dtype=bool), None
    else:
        mask, inner_scores = run(plan.inner, view, ctx, True, 1.0)
    if view.live is not None:
        mask = mask & view.live
    docs = np.flatnonzero(mask)
    scores = None if inner_scores is None else inner_scores[docs]
    values = script_exec.evaluate(plan.source, plan.params_json, view, ctx, docs, scores)
    if plan.inner is None:
        if not (isinstance(values, np.ndarray) and values.dtype.kind == "b"):
            values = values.tolist() if isinstance(values, np.ndarray) else values
            for bad in values:
                if type(bad) is not bool:
                    raise shard_error(ctx, f"script query must return a boolean, got [{bad!r}]")
        keep = np.zeros(view.max_doc, dtype=bool)
        keep[docs[np.asarray(values, dtype=bool)]] = True
        return constant(keep, scoring, boost * plan.boost)
    if not (isinstance(values, np.ndarray) and values.dtype.kind in "iuf" and not np.isnan(values).any()):
        values = values.tolist() if isinstance(values, np.ndarray) else values
        for bad in values:
            if type(bad) not in (int, float) or bad != bad:
                raise shard_error(
                    ctx, f"script_score script returned an invalid score [{bad!r}]: it must be a number"
                )
    found = np.asarray(values, dtype=np.float64)
    if (found < 0).any():
        raise shard_error(ctx, "script score function must not produce negative scores, but got: "
                          f"[{found[found < 0][0]}]")  # fmt: skip
    keep = np.zeros(view.max_doc, dtype=bool)
    scores = np.zeros(view.max_doc, dtype=_F32)
    chosen = found >= plan.min_score if plan.min_score is not None else np.ones(len(docs), dtype=bool)
    keep[docs[chosen]] = True
    scores[docs[chosen]] = (found[chosen] * boost * plan.boost).astype(_F32)
    return keep, scores if scoring else None


_EXECUTORS: dict[type, Callable[..., Result]] = {
    AllDocs: _exec_all,
    NoDocs: _exec_nothing,
    ScoredTerm: term_exec.exec_scored_term,
    ValueSet: term_exec.exec_value_set,
    NumRange: term_exec.exec_num_range,
    RangeFieldPlan: term_exec.exec_range_field,
    TermRange: term_exec.exec_term_range,
    PatternPlan: term_exec.exec_pattern,
    ExistsPlan: term_exec.exec_exists,
    IdsPlan: term_exec.exec_ids,
    Phrase: phrase_exec.exec_phrase,
    BoolPlan: _exec_bool,
    DisMaxPlan: _exec_dis_max,
    ConstPlan: _exec_const,
    ScriptPlan: _exec_script,
    vector_queries.KnnPlan: vector_queries.exec_knn,
    join_queries.JoinPlan: join_queries.exec_join,
    feature_queries.FeaturePlan: feature_queries.exec_rank_feature,
    percolate_queries.PercolatePlan: percolate_queries.exec_percolate,
    nested_queries.NestedPlan: nested_queries.exec_nested,
    geo_queries.GeoPlan: geo_queries.exec_geo,
}
