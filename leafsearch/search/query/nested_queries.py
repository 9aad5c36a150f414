"""Planning and running the `nested` query: its inner query over the child documents of a
`nested` path (`Segment.nested`), joined to their parents.

A segment keeps each nested path's child documents in a segment of their own inside its folder,
with the parent doc of every child (ascending). The inner query is planned against a snapshot of
those child segments (`NestedLevel`: their statistics, their live documents being their parents'),
run over a child segment like any query over a segment, and its matches joined to the parents by
the parents array: a parent matches when any child does, scored by `score_mode` over its matching
children, all as whole-array operations. A nested query below another joins one level; a deeper
path named from the root joins through the levels between.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.index.searcher import Searcher, SegmentView
from leafsearch.index.segment import Segment
from leafsearch.request.query_dsl import Nested
from leafsearch.search.query.context import QueryContext, shard_error
from leafsearch.search.query.masks import Result, empty
from leafsearch.search.query.plans import NoDocs

_F32 = np.float32


@dataclass(eq=False)
class NestedLevel:
    """The child documents of one nested path below a context's level, in one shard snapshot:
    per segment of that level, the view of its children and the parent doc of each child."""

    path: str
    ctx: QueryContext
    children: dict[Segment, tuple[SegmentView, np.ndarray]]


@dataclass(frozen=True, slots=True, eq=False)
class NestedPlan:
    level: NestedLevel
    inner: Any
    score_mode: str
    boost: float


def nested_level(ctx: QueryContext, path: str) -> NestedLevel:
    """The level of `path` below the context's own (cached in the context for its snapshot)."""
    level = ctx.nested_levels.get(path)
    if level is None:
        chain = _chain(ctx, path)
        children: dict[Segment, tuple[SegmentView, np.ndarray]] = {}
        for view in ctx.searcher.views:
            found = child_view(view, chain)
            if found is not None:
                children[view.segment] = found
        searcher = Searcher(-1, [v for v, _ in children.values()], generation=0)  # statistics only
        child_ctx = dataclasses.replace(
            ctx, searcher=searcher, nested_path=path, nested_levels={}, _plans={}, _weights={}
        )
        level = ctx.nested_levels[path] = NestedLevel(path, child_ctx, children)
    return level


def _chain(ctx: QueryContext, path: str) -> list[str]:
    """The nested paths from below the context's level down to `path`, outermost first."""
    above = ctx.nested_path
    nested = ctx.mapping.nested_paths
    return sorted(
        (
            p
            for p in nested
            if (path == p or path.startswith(p + ".")) and (above is None or p.startswith(above + "."))
        ),
        key=len,
    )


def child_view(view: SegmentView, chain: list[str]) -> tuple[SegmentView, np.ndarray] | None:
    """The view of a segment's children along `chain` (live when their parent is) and the doc of
    `view`'s segment each belongs to; None when the segment holds none."""
    segment, live, parents = view.segment, view.live, None
    for path in chain:
        found = segment.nested(path)
        if found is None:
            return None
        segment, step = found
        live = None if live is None else live[step]
        parents = step if parents is None else parents[step]
    if parents is None:
        return None
    count = segment.max_doc if live is None else int(np.count_nonzero(live))
    return SegmentView(segment, live, 0, count), parents


def plan_nested(q: Nested, ctx: QueryContext) -> NestedPlan | NoDocs:
    from leafsearch.search.query import planner  # it imports this module

    check_nested_path(ctx, q.path, q.ignore_unmapped)
    if q.path not in ctx.mapping.nested_paths:
        return NoDocs()
    if ctx.nested_path is not None and not q.path.startswith(ctx.nested_path + "."):
        return NoDocs()  # not below the enclosing level: no child of it is there
    level = nested_level(ctx, q.path)
    return NestedPlan(level, planner.plan(q.query, level.ctx), q.score_mode, q.boost)


def check_nested_path(ctx: QueryContext, path: str, ignore_unmapped: bool) -> None:
    """Elasticsearch's refusals of a nested path: not an object at all (unless `ignore_unmapped`),
    or an object that is not `nested`."""
    if path in ctx.mapping.nested_paths:
        return
    if is_object(ctx.mapping, path):
        raise shard_error(ctx, f"[nested] nested object under path [{path}] is not of nested type")
    if not ignore_unmapped:
        raise shard_error(ctx, f"[nested] failed to find nested object under path [{path}]")


def is_object(mapping: Any, path: str) -> bool:
    mapper = mapping.root
    for name in path.split("."):
        mapper = mapper.children.get(name) if not mapper.leaf else None
        if mapper is None:
            return False
    return not mapper.leaf


def exec_nested(
    plan: NestedPlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    from leafsearch.search.query import executor  # it imports this module

    found = plan.level.children.get(view.segment)
    if found is None:
        return empty(view, scoring)
    children, parents = found
    child_scoring = scoring and plan.score_mode != "none"
    mask, scores = executor.run(plan.inner, children, plan.level.ctx, child_scoring, 1.0)
    matched = np.flatnonzero(mask)
    of = parents[matched]
    n = view.max_doc
    out = np.zeros(n, dtype=bool)
    out[of] = True
    if not scoring:
        return out, None
    total = np.zeros(n, dtype=_F32)
    if child_scoring and len(matched):
        total[:] = join_scores(of, scores[matched], plan.score_mode, n)
    total *= _F32(boost * plan.boost)
    return out, total


def join_scores(of: np.ndarray, scores: np.ndarray, mode: str, n: int) -> np.ndarray:
    """Each parent's score from its matching children's (`of`: their parents, ascending)."""
    if mode in ("sum", "avg"):
        total = np.bincount(of, weights=scores, minlength=n)
        if mode == "avg":
            total /= np.maximum(np.bincount(of, minlength=n), 1)
        return total.astype(_F32)
    starts = np.flatnonzero(np.r_[True, of[1:] != of[:-1]])
    reduce = np.maximum if mode == "max" else np.minimum
    out = np.zeros(n, dtype=_F32)
    out[of[starts]] = reduce.reduceat(scores.astype(_F32), starts)
    return out
