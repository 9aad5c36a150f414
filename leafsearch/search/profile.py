"""`profile: true`: where one search's time went, per shard, in Elasticsearch's profile shape.

leafsearch runs a query a segment at a time as whole-array operations, not Lucene's document at a
time iterators, so the timings mean this engine's work: a query node's `time_in_nanos` is the time
spent computing its matches and scores over every segment of the shard (its children included),
reported in the breakdown as `build_scorer` with `build_scorer_count` the segments it ran on;
Lucene's per-document phases (`next_doc`, `advance`, `score`, ...) are 0, since nothing here
runs per document. The collector is the selection of the shard's best hits (and the sort), each
aggregation is timed (a sub-aggregation as a child of its parent) and named by the aggregator
class Elasticsearch would run, and the fetch is the rendering of the shard's
hits of the page. Everything in a `ShardProfile` is plain data: it crosses the shard interface.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from leafsearch.search.query.join_queries import JoinPlan
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
    ScoredTerm,
    TermRange,
    ValueSet,
)

#: Lucene's breakdown keys, each with its `_count`, as Elasticsearch renders them.
_BREAKDOWN_KEYS = (
    "set_min_competitive_score",
    "match",
    "shallow_advance",
    "next_doc",
    "score",
    "compute_max_score",
    "advance",
    "build_scorer",
    "create_weight",
    "count_weight",
)


#: Elasticsearch's aggregation timing types (AggregationTimingType), each with its `_count`.
_AGG_TIMINGS = (
    "initialize",
    "build_leaf_collector",
    "collect",
    "post_collection",
    "build_aggregation",
    "reduce",
)

#: The aggregator Elasticsearch runs for each aggregation type (its class's simple name, which
#: the profile prints as `type`); `terms` depends on its field (see `aggregator_type`).
_AGGREGATORS = {
    "histogram": "NumericHistogramAggregator",
    "date_histogram": "DateHistogramAggregator",
    "range": "RangeAggregator",
    "date_range": "RangeAggregator",
    "filter": "FilterAggregator",
    "filters": "FiltersAggregator",
    "children": "ParentToChildrenAggregator",
    "parent": "ChildrenToParentAggregator",
    "composite": "CompositeAggregator",
    "cardinality": "CardinalityAggregator",
    "min": "MinAggregator",
    "max": "MaxAggregator",
    "sum": "SumAggregator",
    "avg": "AvgAggregator",
    "value_count": "ValueCountAggregator",
    "stats": "StatsAggregator",
    "extended_stats": "ExtendedStatsAggregator",
}


def aggregator_type(agg: Any) -> str:
    """The aggregator class name Elasticsearch profiles `agg` as: `terms` over keywords is
    `GlobalOrdinalsStringTermsAggregator`, over numbers `NumericTermsAggregator`."""
    name = agg.type_name
    if name == "terms":
        family = getattr(getattr(agg, "field", None), "family", None)
        return (
            "GlobalOrdinalsStringTermsAggregator" if family in ("keyword", None) else "NumericTermsAggregator"
        )
    return _AGGREGATORS.get(name, type(agg).__name__)


@dataclass
class AggTiming:
    """One aggregation's collection on one shard: the time its collect calls took over the
    shard's segments (its sub-aggregations' included, as they collect within it), how many
    segments, and its sub-aggregations' timings by name."""

    type: str
    nanos: int = 0
    segments: int = 0
    children: dict[str, AggTiming] = field(default_factory=dict)

    def render(self, name: str) -> dict[str, Any]:
        """Elasticsearch's aggregation profile node: collection is this engine's whole-array work
        per segment (`collect`, counted per segment); the other phases are part of it here (0)."""
        breakdown = {key: 0 for timing in _AGG_TIMINGS for key in (timing, f"{timing}_count")}
        breakdown.update(
            collect=self.nanos,
            collect_count=self.segments,
            build_leaf_collector_count=self.segments,
            initialize_count=1,
            post_collection_count=1,
            build_aggregation_count=1,
        )
        node: dict[str, Any] = {
            "type": self.type,
            "description": name,
            "time_in_nanos": self.nanos,
            "breakdown": breakdown,
        }
        if self.children:
            node["children"] = [child.render(sub) for sub, child in self.children.items()]
        return node


class QueryProfiler:
    """Inclusive time and segment count of each plan node of one shard's query."""

    def __init__(self) -> None:
        self._times: dict[int, list[int]] = {}

    def run(self, plan: Any, execute: Any) -> Any:
        """`execute()` (the node's work over one segment), timed for `plan`."""
        started = time.perf_counter_ns()
        try:
            return execute()
        finally:
            entry = self._times.setdefault(id(plan), [0, 0])
            entry[0] += time.perf_counter_ns() - started
            entry[1] += 1

    def tree(self, plan: Any) -> dict[str, Any]:
        """The profile node of `plan` and its children."""
        nanos, count = self._times.get(id(plan), (0, 0))
        breakdown = {key: 0 for name in _BREAKDOWN_KEYS for key in (name, f"{name}_count")}
        breakdown["build_scorer"] = nanos
        breakdown["build_scorer_count"] = count
        breakdown["create_weight_count"] = 1
        node: dict[str, Any] = {
            "type": _lucene_type(plan),
            "description": describe(plan),
            "time_in_nanos": nanos,
            "breakdown": breakdown,
        }
        children = [self.tree(child) for child in _children(plan)]
        if children:
            node["children"] = children
        return node


@dataclass
class ShardProfile:
    """The profile of one shard's part of a search (plain data)."""

    profiler: QueryProfiler = field(default_factory=QueryProfiler)
    query: list[dict[str, Any]] = field(default_factory=list)
    rewrite_nanos: int = 0
    collector_nanos: int = 0
    collector_name: str = "SimpleTopScoreDocCollector"
    aggregations: dict[str, AggTiming] = field(default_factory=dict)  # top level, by name
    fetch_nanos: int = 0
    fetched: int = 0
    #: The aggregations being collected now, outermost first (sub-aggregations collect inside
    #: their parent's call, one segment at a time).
    _collecting: list[AggTiming] = field(default_factory=list)

    def time_aggregation(self, agg: Any, collect: Any) -> Any:
        """`collect()` of one aggregation over a segment, timed under its parent's timing when
        called within the parent's collection."""
        level = self._collecting[-1].children if self._collecting else self.aggregations
        timing = level.get(agg.name)
        if timing is None:
            timing = level[agg.name] = AggTiming(aggregator_type(agg))
        self._collecting.append(timing)
        started = time.perf_counter_ns()
        try:
            return collect()
        finally:
            timing.nanos += time.perf_counter_ns() - started
            timing.segments += 1
            self._collecting.pop()

    def measured_nanos(self) -> int:
        """Time already attributed to the query, its rewrite and the aggregations."""
        query = sum(node["time_in_nanos"] for node in self.query)
        return query + self.rewrite_nanos + sum(t.nanos for t in self.aggregations.values())

    def render(self, node_id: str, index: str, shard_id: int) -> dict[str, Any]:
        collector: dict[str, Any] = {
            "name": "QueryPhaseCollector",
            "reason": "search_query_phase",
            "time_in_nanos": self.collector_nanos,
            "children": [
                {
                    "name": self.collector_name,
                    "reason": "search_top_hits",
                    "time_in_nanos": self.collector_nanos,
                }
            ],
        }
        aggregations = [timing.render(name) for name, timing in self.aggregations.items()]
        return {
            "id": f"[{node_id}][{index}][{shard_id}]",
            "node_id": node_id,
            "shard_id": shard_id,
            "index": index,
            "cluster": "(local)",
            "searches": [{"query": self.query, "rewrite_time": self.rewrite_nanos, "collector": [collector]}],
            "aggregations": aggregations,
            "fetch": {
                "type": "fetch",
                "description": "",
                "time_in_nanos": self.fetch_nanos,
                "breakdown": {
                    "load_stored_fields": self.fetch_nanos,
                    "load_stored_fields_count": self.fetched,
                    "next_reader": 0,
                    "next_reader_count": 0,
                    "load_source": 0,
                    "load_source_count": 0,
                },
                "debug": {"stored_fields": ["_id", "_routing", "_source"]},
            },
        }


def _lucene_type(plan: Any) -> str:
    if isinstance(plan, PatternPlan):
        return {"prefix": "PrefixQuery", "wildcard": "WildcardQuery"}.get(plan.mode, "RegexpQuery")
    if isinstance(plan, ValueSet):
        return "TermQuery" if len(plan.values) == 1 else "TermInSetQuery"
    return _TYPES.get(type(plan), type(plan).__name__)


_TYPES = {
    AllDocs: "MatchAllDocsQuery",
    NoDocs: "MatchNoDocsQuery",
    BoolPlan: "BooleanQuery",
    ConstPlan: "ConstantScoreQuery",
    DisMaxPlan: "DisjunctionMaxQuery",
    ExistsPlan: "FieldExistsQuery",
    IdsPlan: "TermInSetQuery",
    NumRange: "IndexOrDocValuesQuery",
    TermRange: "TermRangeQuery",
    ScoredTerm: "TermQuery",
    Phrase: "PhraseQuery",
    JoinPlan: "GlobalOrdinalsQuery",
}


def _children(plan: Any) -> list[Any]:
    if isinstance(plan, BoolPlan):
        return [*plan.must, *plan.should, *plan.filter, *plan.must_not]
    if isinstance(plan, DisMaxPlan):
        return list(plan.queries)
    if isinstance(plan, ConstPlan):
        return [plan.inner]
    return []


def describe(plan: Any) -> str:
    """A Lucene-style description of a plan node (`+a:x -b:y`, `n:[1 TO 5]`, `*:*`)."""
    if isinstance(plan, AllDocs):
        return "*:*"
    if isinstance(plan, NoDocs):
        return "MatchNoDocsQuery"
    if isinstance(plan, BoolPlan):
        parts = [f"+{describe(c)}" for c in plan.must] + [describe(c) for c in plan.should]
        parts += [f"#{describe(c)}" for c in plan.filter] + [f"-{describe(c)}" for c in plan.must_not]
        return " ".join(parts)
    if isinstance(plan, ConstPlan):
        return f"ConstantScore({describe(plan.inner)})"
    if isinstance(plan, DisMaxPlan):
        return "(" + " | ".join(describe(c) for c in plan.queries) + ")"
    if isinstance(plan, ScoredTerm):
        return f"{plan.field}:{plan.term}"
    if isinstance(plan, ValueSet):
        return f"{plan.field}:" + " ".join(str(v) for v in plan.values)
    if isinstance(plan, NumRange):
        lo = "*" if plan.lo is None else plan.lo
        hi = "*" if plan.hi is None else plan.hi
        return f"{plan.field}:[{lo} TO {hi}]"
    if isinstance(plan, TermRange):
        lo = "*" if plan.lo is None else plan.lo.decode(errors="replace")
        hi = "*" if plan.hi is None else plan.hi.decode(errors="replace")
        return f"{plan.field}:{'[' if plan.include_lo else '{'}{lo} TO {hi}{']' if plan.include_hi else '}'}"
    if isinstance(plan, PatternPlan):
        return f"{plan.field}:{plan.pattern}"
    if isinstance(plan, ExistsPlan):
        return "FieldExistsQuery [field=" + ",".join(plan.fields) + "]"
    if isinstance(plan, IdsPlan):
        return "_id:(" + " ".join(plan.ids) + ")"
    if isinstance(plan, Phrase):
        return f'{plan.field}:"' + " ".join("|".join(slot) for slot in plan.slots) + '"'
    return type(plan).__name__
