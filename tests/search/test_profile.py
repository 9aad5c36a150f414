"""`profile: true` through the official client: Elasticsearch's profile section per shard (query
tree with this engine's timings, collector, aggregations, fetch), the same hits as without it,
on one-page searches and on PIT walks, with other clients searching at the same time."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from elasticsearch import BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk

QUERY = {"bool": {"must": [{"match": {"t": "red"}}], "filter": [{"range": {"n": {"gte": 10}}}]}}


@pytest.fixture
def logs(es: Elasticsearch, new_index: Callable[..., str]) -> str:
    name = new_index(
        settings={"number_of_shards": 2},
        mappings={"properties": {"t": {"type": "text"}, "k": {"type": "keyword"}, "n": {"type": "long"}}},
    )
    actions = (
        {"_index": name, "_id": str(i), "t": "red blue" if i % 2 else "green", "k": "ab"[i % 2], "n": i}
        for i in range(300)
    )
    bulk(es, actions, refresh=True)
    return name


def _ids(response: Any) -> list[str]:
    return [hit["_id"] for hit in response["hits"]["hits"]]


def test_every_shard_reports_its_query_tree_collector_aggregations_and_fetch(
    es: Elasticsearch, logs: str
) -> None:
    plain = es.search(index=logs, query=QUERY, size=20, sort=[{"n": "desc"}])
    profiled = es.search(
        index=logs,
        query=QUERY,
        size=20,
        sort=[{"n": "desc"}],
        profile=True,
        aggs={"ks": {"terms": {"field": "k"}}},
    )
    assert _ids(profiled) == _ids(plain)
    shards = profiled["profile"]["shards"]
    assert sorted(s["shard_id"] for s in shards) == [0, 1]
    node_id = next(iter(es.nodes.info()["nodes"]))
    fetched = 0
    for shard in shards:
        assert shard["id"] == f"[{node_id}][{logs}][{shard['shard_id']}]" and shard["index"] == logs
        (search,) = shard["searches"]
        (root,) = search["query"]
        assert root["type"] == "BooleanQuery" and root["description"] == "+t:red #n:[10 TO *]"
        assert [c["type"] for c in root["children"]] == ["TermQuery", "IndexOrDocValuesQuery"]
        assert root["time_in_nanos"] > 0 and root["breakdown"]["build_scorer"] == root["time_in_nanos"]
        assert root["breakdown"]["build_scorer_count"] >= 1
        assert all(0 < c["time_in_nanos"] <= root["time_in_nanos"] for c in root["children"])
        assert search["rewrite_time"] > 0
        (collector,) = search["collector"]
        assert collector["reason"] == "search_query_phase" and collector["time_in_nanos"] > 0
        assert collector["children"][0]["name"] == "SimpleFieldCollector"
        (agg,) = shard["aggregations"]
        assert agg["description"] == "ks" and agg["time_in_nanos"] > 0
        assert shard["fetch"]["type"] == "fetch"
        fetched += shard["fetch"]["breakdown"]["load_stored_fields_count"]
    assert fetched == 20  # each shard fetched its own hits of the page


AGG_BREAKDOWN = {
    f"{timing}{suffix}"
    for timing in (
        "initialize",
        "build_leaf_collector",
        "collect",
        "post_collection",
        "build_aggregation",
        "reduce",
    )
    for suffix in ("", "_count")
}


def test_aggregations_are_profiled_with_elasticsearchs_aggregator_names(es: Elasticsearch, logs: str) -> None:
    """Each aggregation is a node named by Elasticsearch's aggregator class, with its breakdown
    keys; a sub-aggregation is its parent's child; the answer is the unprofiled one's."""
    aggs = {
        "histo": {
            "histogram": {"field": "n", "interval": 50},
            "aggs": {"tags": {"terms": {"field": "k"}, "aggs": {"mean": {"avg": {"field": "n"}}}}},
        },
        "nums": {"terms": {"field": "n", "size": 3}},
        "dates": {"range": {"field": "n", "ranges": [{"to": 100}]}},
        "top": {"max": {"field": "n"}},
    }
    plain = es.search(index=logs, size=0, aggs=aggs)
    profiled = es.search(index=logs, size=0, aggs=aggs, profile=True)
    assert profiled["aggregations"] == plain["aggregations"]
    for shard in profiled["profile"]["shards"]:
        by_name = {agg["description"]: agg for agg in shard["aggregations"]}
        assert [(name, agg["type"]) for name, agg in by_name.items()] == [
            ("histo", "NumericHistogramAggregator"),
            ("nums", "NumericTermsAggregator"),
            ("dates", "RangeAggregator"),
            ("top", "MaxAggregator"),
        ]
        histo = by_name["histo"]
        (tags,) = histo["children"]
        assert (tags["type"], tags["description"]) == ("GlobalOrdinalsStringTermsAggregator", "tags")
        (mean,) = tags["children"]
        assert (mean["type"], mean["description"]) == ("AvgAggregator", "mean")
        assert "children" not in mean
        for node in (histo, tags, mean, by_name["top"]):
            assert set(node["breakdown"]) == AGG_BREAKDOWN
            assert node["time_in_nanos"] > 0
            assert node["breakdown"]["collect"] == node["time_in_nanos"]
            assert node["breakdown"]["collect_count"] >= 1 and node["breakdown"]["reduce"] == 0
        assert histo["time_in_nanos"] >= tags["time_in_nanos"] >= mean["time_in_nanos"]


def test_a_post_filter_is_a_second_query_and_a_pit_walk_is_profiled_too(es: Elasticsearch, logs: str) -> None:
    response = es.search(index=logs, query={"match_all": {}}, post_filter={"term": {"k": "a"}}, profile=True)
    for shard in response["profile"]["shards"]:
        assert [q["type"] for q in shard["searches"][0]["query"]] == ["MatchAllDocsQuery", "TermQuery"]
    pit = es.open_point_in_time(index=logs, keep_alive="1m")["id"]
    try:
        body = {"pit": {"id": pit}, "query": QUERY, "sort": [{"n": "asc"}], "size": 7}
        plain = es.search(**body)
        profiled = es.search(**body, profile=True)
        assert _ids(profiled) == _ids(plain)
        shards = profiled["profile"]["shards"]
        assert len(shards) == 2
        assert all(s["searches"][0]["query"][0]["time_in_nanos"] > 0 for s in shards)
        assert sum(s["fetch"]["breakdown"]["load_stored_fields_count"] for s in shards) == 7
    finally:
        es.close_point_in_time(id=pit)


def test_without_profile_there_is_no_section_and_a_bad_value_is_refused(es: Elasticsearch, logs: str) -> None:
    assert "profile" not in es.search(index=logs, query=QUERY, profile=False)
    with pytest.raises(BadRequestError):
        es.search(index=logs, body={"profile": "sometimes"})


def test_profiled_and_plain_searches_at_once_answer_the_same_pages(es: Elasticsearch, logs: str) -> None:
    """The profile is the request's own: concurrent plain searches never carry one, and every
    search answers the page a lone search answers."""
    queries = [{"range": {"n": {"gte": lo, "lt": lo + 90}}} for lo in range(0, 200, 10)]
    expected = [_ids(es.search(index=logs, query=q, sort=[{"n": "desc"}], size=15)) for q in queries]

    def run(i: int) -> tuple[list[str], bool]:
        response = es.search(
            index=logs, query=queries[i % len(queries)], sort=[{"n": "desc"}], size=15, profile=i % 2 == 0
        )
        return _ids(response), "profile" in response

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(run, range(60)))
    for i, (ids, has_profile) in enumerate(results):
        assert ids == expected[i % len(queries)]
        assert has_profile == (i % 2 == 0)
