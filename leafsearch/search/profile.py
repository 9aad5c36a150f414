"""`profile: true`: where one search's time went, per shard, in Elasticsearch's profile shape.

leafsearch runs a query a segment at a time as whole-array operations, not Lucene's document at a
time iterators, so the timings mean this engine's work: a query node's `time_in_nanos` is the time
spent computing its matches and scores over every segment of the shard (its children included),
reported in the breakdown as `build_scorer` with `build_scorer_count` the segments it ran on;
Lucene's per-document phases (`next_doc`, `advance`, `score`, ...) are 0, since nothing here
runs per document. The collector is the selection of the shard's best hits (and the sort), the
aggregations are timed per top-level aggregation, and the fetch is the rendering of the shard's
hits of the page. Everything in a `ShardProfile` is plain data: it crosses the shard interface.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

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
    aggregations: dict[str, int] = field(default_factory=dict)  # top-level name -> nanos
    aggregation_types: dict[str, str] = field(default_factory=dict)
    fetch_nanos: int = 0
    fetched: int = 0

    def time_aggregation(self, agg: Any, collect: Any) -> Any:
        """`collect()` of one top-level aggregation over a segment, timed."""
        started = time.perf_counter_ns()
        try:
            return collect()
        finally:
            spent = time.perf_counter_ns() - started
            self.aggregations[agg.name] = self.aggregations.get(agg.name, 0) + spent
            self.aggregation_types[agg.name] = type(agg).__name__

    def measured_nanos(self) -> int:
        """Time already attributed to the query, its rewrite and the aggregations."""
        query = sum(node["time_in_nanos"] for node in self.query)
        return query + self.rewrite_nanos + sum(self.aggregations.values())

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
        aggregations = [
            {
                "type": self.aggregation_types.get(name, "Aggregator"),
                "description": name,
                "time_in_nanos": nanos,
                "breakdown": {"collect": nanos, "collect_count": 1},
            }
            for name, nanos in self.aggregations.items()
        ]
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
