"""The `rank_feature` query: documents holding a feature, scored as Lucene's FeatureField scores
them (index/feature_fields.py keeps the values).

Lucene keeps a feature as a term frequency holding the top 16 bits of its float (9 significant
bits), so scores are computed from the value rounded so. Saturation's default pivot is the
shard's approximate geometric mean: the mean of those frequencies (over every document that has
the feature, deleted ones included, as Lucene's term statistics count them) read back as a float.
Cost: one pass over the segment's values, O(documents holding the feature), vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leafsearch.index.columns import NumericColumn
from leafsearch.index.feature_fields import RankFeatureField, RankFeaturesField
from leafsearch.index.searcher import SegmentView
from leafsearch.request.query_dsl import RankFeature
from leafsearch.search.query.context import QueryContext, failed
from leafsearch.search.query.fields import field_type, type_of
from leafsearch.search.query.masks import Result, empty, mask_of
from leafsearch.search.query.plans import NoDocs

_F32 = np.float32
#: FeatureField's term frequency of a value: its float bits without the low 15.
_SHIFT = 15


@dataclass(frozen=True, slots=True)
class FeaturePlan:
    """The documents of one feature column, scored by `function`."""

    column: str
    function: str
    pivot: float
    scaling_factor: float
    exponent: float
    boost: float = 1.0


def plan_rank_feature(q: RankFeature, ctx: QueryContext) -> FeaturePlan | NoDocs:
    ft = field_type(ctx, q.field)
    if isinstance(ft, RankFeatureField):
        positive = ft.positive_score_impact
    elif ft is None:
        parent = field_type(ctx, q.field.rpartition(".")[0]) if "." in q.field else None
        if not isinstance(parent, RankFeaturesField):
            return NoDocs()  # unmapped
        positive = True  # a negative feature was inverted when indexed
    else:
        raise failed(
            ctx,
            "illegal_argument_exception",
            "[rank_feature] query only works on [rank_feature] fields and features of [rank_features] "
            f"fields, not [{type_of(ft)}]",
        )
    if q.function == "log" and not positive:
        raise failed(
            ctx,
            "illegal_argument_exception",
            "Cannot use the [log] function with a field that has a negative score impact as it would "
            "trigger negative scores",
        )
    pivot = q.pivot
    if pivot is None and q.function == "saturation":
        pivot = _default_pivot(ctx, q.field)
    return FeaturePlan(q.field, q.function, pivot or 0.0, q.scaling_factor, q.exponent, q.boost)


def _frequencies(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=_F32).view(np.int32) >> _SHIFT


def _decoded(freqs: np.ndarray) -> np.ndarray:
    return (freqs.astype(np.int32) << _SHIFT).view(_F32)


def _default_pivot(ctx: QueryContext, column: str) -> float:
    """Lucene's `computePivotFeatureValue` over the shard's segments."""
    total, count = 0, 0
    for view in ctx.searcher.views:
        col = view.segment.column(column)
        if isinstance(col, NumericColumn):
            _, values = col.doc_values.flat
            total += int(_frequencies(values).astype(np.int64).sum())
            count += len(values)
    if count == 0:
        return 1.0
    average = int(_F32(total / count))  # Lucene: (int) of the float mean
    return float(_decoded(np.array([average]))[0])


def unit_scores(values: np.ndarray, plan: FeaturePlan) -> np.ndarray:
    """Each value's score at weight 1, in the float arithmetic Lucene uses (float32 out)."""
    f = _decoded(_frequencies(values))
    if plan.function == "saturation":
        pivot = _F32(plan.pivot)
        return _F32(1) - pivot / (f + pivot)
    if plan.function == "log":
        return np.log((_F32(plan.scaling_factor) + f).astype(np.float64)).astype(_F32)
    if plan.function == "sigmoid":
        exponent = float(_F32(plan.exponent))
        pivot_pa = float(_F32(plan.pivot)) ** exponent
        powered = np.power(f.astype(np.float64), exponent)
        return (1 - pivot_pa / (powered + pivot_pa)).astype(_F32)
    return f  # linear


def exec_rank_feature(
    plan: FeaturePlan, view: SegmentView, ctx: QueryContext, scoring: bool, boost: float
) -> Result:
    col = view.segment.column(plan.column)
    if not isinstance(col, NumericColumn):
        return empty(view, scoring)
    docs, values = col.doc_values.flat
    mask = mask_of(docs, view.max_doc)
    if not scoring:
        return mask, None
    out = np.zeros(view.max_doc, dtype=_F32)
    out[docs] = unit_scores(values, plan) * _F32(boost * plan.boost)
    return mask, out
