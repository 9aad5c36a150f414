"""Elasticsearch's per-search limits through the HTTP API: `search.max_buckets`,
`search.aggs.max_nested_depth`, `index.max_docvalue_fields_search`, `index.max_script_fields` and
`index.max_rescore_window`, and leafsearch's own `search.max_aggregations` and
`search.max_sort_keys`. Each is checked at its boundary (the limit passes, one more fails with
Elasticsearch's error type, status and message) and, where it is dynamic, after a live change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from conftest import error_of

TOO_MANY_BUCKETS = (
    "Trying to create too many buckets. Must be less than or equal to: [{}] but this number of buckets was "
    "exceeded. This limit can be set by changing the [search.max_buckets] cluster level setting."
)


@pytest.fixture
def numbers(http: httpx.Client, new_index: Callable[..., str]) -> str:
    """Two documents: v = 0 and v = 1000, t three years apart, tag a and b."""
    properties = {"v": {"type": "double"}, "t": {"type": "date"}, "tag": {"type": "keyword"}}
    index = new_index(mappings={"properties": properties})
    docs = [
        {"v": 0, "t": "2020-01-01T00:00:00Z", "tag": "a"},
        {"v": 1000, "t": "2023-01-01T00:00:00Z", "tag": "b"},
    ]
    for i, doc in enumerate(docs):
        assert http.put(f"/{index}/_doc/{i}", json=doc).status_code == 201
    http.post(f"/{index}/_refresh")
    return index


def search_aggs(http: httpx.Client, index: str, aggs: dict[str, Any]) -> httpx.Response:
    return http.post(f"/{index}/_search", json={"size": 0, "aggs": aggs})


def assert_too_many_buckets(response: httpx.Response, limit: int) -> None:
    """The coordinator's final reduce fails: no shard failed, so no root cause and an empty reason."""
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["status"] == 400
    error = body["error"]
    assert error["type"] == "search_phase_execution_exception"
    assert error["reason"] == ""
    assert error["root_cause"] == []
    assert error["caused_by"] == {
        "type": "too_many_buckets_exception",
        "reason": TOO_MANY_BUCKETS.format(limit),
        "max_buckets": limit,
    }


# ---- search.max_buckets ---------------------------------------------------------------------


def test_histogram_buckets_at_the_default_limit(http: httpx.Client, numbers: str) -> None:
    def histogram(max_bound: int) -> dict[str, Any]:
        bounds = {"min": 0, "max": max_bound}
        return {"h": {"histogram": {"field": "v", "interval": 1, "extended_bounds": bounds}}}

    response = search_aggs(http, numbers, histogram(65535))
    assert response.status_code == 200, response.text
    buckets = response.json()["aggregations"]["h"]["buckets"]
    assert len(buckets) == 65536
    assert [(b["key"], b["doc_count"]) for b in buckets if b["doc_count"]] == [(0.0, 1), (1000.0, 1)]
    one_more = histogram(65536)
    assert_too_many_buckets(search_aggs(http, numbers, one_more), 65536)


@pytest.mark.parametrize(
    "agg",
    [
        {"histogram": {"field": "v", "interval": 5e-10}},
        {"histogram": {"field": "v", "interval": 1e-300, "extended_bounds": {"min": -1e300, "max": 1e300}}},
        {"date_histogram": {"field": "t", "fixed_interval": "1s"}},
        {"date_histogram": {"field": "t", "fixed_interval": "1ms", "time_zone": "Europe/Paris"}},
        {
            "date_histogram": {
                "field": "t",
                "calendar_interval": "day",
                "extended_bounds": {"min": "1000-01-01", "max": "9000-01-01"},
            }
        },
        {
            "terms": {"field": "tag"},
            "aggs": {
                "h": {
                    "histogram": {"field": "v", "interval": 1e-6, "extended_bounds": {"min": 0, "max": 1e3}}
                }
            },
        },
    ],
)
def test_histograms_too_fine_for_their_range_are_refused(
    http: httpx.Client, numbers: str, agg: dict[str, Any]
) -> None:
    """Billions of empty buckets between the bounds: refused from their count, never built."""
    assert_too_many_buckets(search_aggs(http, numbers, {"h": agg}), 65536)
    assert http.get("/").status_code == 200


def test_hard_bounds_limit_the_buckets_counted(http: httpx.Client, numbers: str) -> None:
    agg = {
        "date_histogram": {
            "field": "t",
            "fixed_interval": "1s",
            "hard_bounds": {"min": "2020-01-01T00:00:00Z", "max": "2020-01-01T00:00:09Z"},
            "extended_bounds": {"min": "2010-01-01", "max": "2030-01-01"},
        }
    }
    response = search_aggs(http, numbers, {"h": agg})
    assert response.status_code == 200, response.text
    buckets = response.json()["aggregations"]["h"]["buckets"]
    assert [b["doc_count"] for b in buckets] == [1] + [0] * 9


def test_buckets_of_sub_aggregations_count_with_their_parents(
    http: httpx.Client, numbers: str, cluster_setting: Callable[[str, Any], None]
) -> None:
    """terms (2 buckets) x histogram (4 buckets each: 0..750 and 250..1000 with extended bounds)."""
    cluster_setting("search.max_buckets", 10)

    def nested(max_bound: int) -> dict[str, Any]:
        sub = {"histogram": {"field": "v", "interval": 250, "extended_bounds": {"min": 0, "max": max_bound}}}
        return {"t": {"terms": {"field": "tag"}, "aggs": {"h": sub}}}

    # tag a: keys 0, 250, 500, 750; tag b: keys 0 .. 1000 -> 5; 2 + 4 + 5 = 11 > 10
    assert_too_many_buckets(search_aggs(http, numbers, nested(750)), 10)
    # with max 500: tag a 0..500 (3), tag b 0..1000 (5): 2 + 3 + 5 = 10
    response = search_aggs(http, numbers, nested(500))
    assert response.status_code == 200, response.text
    terms = response.json()["aggregations"]["t"]["buckets"]
    assert [len(b["h"]["buckets"]) for b in terms] == [3, 5]


@pytest.mark.parametrize(
    ("aggs", "count"),
    [
        ({"r": {"range": {"field": "v", "ranges": [{"to": 10}, {"from": 10}, {"from": 5, "to": 6}]}}}, 3),
        ({"f": {"filters": {"filters": {"x": {"match_all": {}}, "y": {"term": {"tag": "a"}}}}}}, 2),
        ({"f": {"filters": {"filters": [{"match_all": {}}], "other_bucket": True}}}, 2),
        (
            {
                "c": {"composite": {"size": 1, "sources": [{"tag": {"terms": {"field": "tag"}}}]}},
                "t": {"terms": {"field": "tag"}},
            },
            3,
        ),
        ({"t": {"terms": {"field": "tag"}}, "u": {"terms": {"field": "v"}}}, 4),
    ],
)
def test_every_multi_bucket_aggregation_counts_its_buckets(
    http: httpx.Client,
    numbers: str,
    cluster_setting: Callable[[str, Any], None],
    aggs: dict[str, Any],
    count: int,
) -> None:
    cluster_setting("search.max_buckets", count)
    assert search_aggs(http, numbers, aggs).status_code == 200
    cluster_setting("search.max_buckets", count - 1)
    assert_too_many_buckets(search_aggs(http, numbers, aggs), count - 1)


# ---- search.aggs.max_nested_depth ---------------------------------------------------------------


def nested_terms(depth: int) -> dict[str, Any]:
    aggs: dict[str, Any] = {f"a{depth - 1}": {"terms": {"field": "tag"}}}
    for level in range(depth - 2, -1, -1):
        aggs = {f"a{level}": {"terms": {"field": "tag"}, "aggs": aggs}}
    return aggs


def too_deep(limit: int) -> str:
    return (
        "The nested depth of the aggregations exceeds the maximum nested depth for aggregations of "
        f"[{limit}] set in [search.aggs.max_nested_depth]"
    )


def test_aggregations_nested_deeper_than_the_limit_are_refused(http: httpx.Client, numbers: str) -> None:
    response = search_aggs(http, numbers, nested_terms(50))
    assert response.status_code == 200, response.text
    for depth in (51, 300):
        response = search_aggs(http, numbers, nested_terms(depth))
        assert response.status_code == 400, response.text
        error = error_of(response)
        assert (error["type"], error["reason"]) == ("parsing_exception", too_deep(50))


def test_nested_depth_limit_is_dynamic(
    http: httpx.Client, numbers: str, cluster_setting: Callable[[str, Any], None]
) -> None:
    cluster_setting("search.aggs.max_nested_depth", 3)
    assert search_aggs(http, numbers, nested_terms(3)).status_code == 200
    error = error_of(search_aggs(http, numbers, nested_terms(4)))
    assert (error["type"], error["reason"]) == ("parsing_exception", too_deep(3))


# ---- search.max_aggregations, search.max_sort_keys (leafsearch limits) ---------------------------


def too_many_aggregations(limit: int, count: int) -> str:
    return (
        f"Trying to create too many aggregations. Must be less than or equal to: [{limit}] but was "
        f"[{count}]. This limit can be set by changing the [search.max_aggregations] cluster level setting."
    )


def maxes(count: int) -> dict[str, Any]:
    return {f"m{i}": {"max": {"field": "v"}} for i in range(count)}


def test_aggregations_past_the_limit_are_refused_before_they_are_built(
    http: httpx.Client, numbers: str
) -> None:
    """`search.max_aggregations` (1,000) counts the definitions at every level, the whole request's."""
    response = search_aggs(http, numbers, maxes(1000))
    assert response.status_code == 200, response.text
    assert response.json()["aggregations"]["m999"] == {"value": 1000.0}
    for count in (1001, 100_000):
        response = search_aggs(http, numbers, maxes(count))
        assert response.status_code == 400, response.text
        error = error_of(response)
        assert (error["type"], error["reason"]) == (
            "illegal_argument_exception",
            too_many_aggregations(1000, count),
        )
    # 10 terms aggregations holding 100 maxes each: 1,010 definitions
    nested = {f"t{i}": {"terms": {"field": "tag"}, "aggs": maxes(100)} for i in range(10)}
    error = error_of(search_aggs(http, numbers, nested))
    assert error["reason"] == too_many_aggregations(1000, 1010)


def test_the_aggregations_limit_is_dynamic(
    http: httpx.Client, numbers: str, cluster_setting: Callable[[str, Any], None]
) -> None:
    cluster_setting("search.max_aggregations", 2)
    assert search_aggs(http, numbers, {"t": {"terms": {"field": "tag"}, "aggs": maxes(1)}}).status_code == 200
    error = error_of(search_aggs(http, numbers, {"t": {"terms": {"field": "tag"}, "aggs": maxes(2)}}))
    assert error["reason"] == too_many_aggregations(2, 3)


def too_many_sort_keys(limit: int, count: int) -> str:
    return (
        f"Trying to sort by too many keys. Must be less than or equal to: [{limit}] but was [{count}]. "
        "This limit can be set by changing the [search.max_sort_keys] cluster level setting."
    )


def test_sort_keys_past_the_limit_are_refused(
    http: httpx.Client, numbers: str, cluster_setting: Callable[[str, Any], None]
) -> None:
    """`search.max_sort_keys` (100): the body's keys and the URL's `sort` together."""
    keys = [{"v": "desc"}, {"t": "asc"}] * 50
    response = http.post(f"/{numbers}/_search", json={"sort": keys})
    assert response.status_code == 200, response.text
    assert [hit["_id"] for hit in response.json()["hits"]["hits"]] == ["1", "0"]
    for body, params in (({"sort": [*keys, "_doc"]}, {}), ({"sort": keys}, {"sort": "tag"})):
        response = http.post(f"/{numbers}/_search", json=body, params=params)
        assert response.status_code == 400, response.text
        error = error_of(response)
        assert (error["type"], error["reason"]) == (
            "illegal_argument_exception",
            too_many_sort_keys(100, 101),
        )
    error = error_of(http.post(f"/{numbers}/_search", json={"sort": ["v"] * 100_000}))
    assert error["reason"] == too_many_sort_keys(100, 100_000)
    cluster_setting("search.max_sort_keys", 1)
    assert http.post(f"/{numbers}/_search", json={"sort": ["v"]}).status_code == 200
    error = error_of(http.post(f"/{numbers}/_search", json={"sort": ["v", "tag"]}))
    assert error["reason"] == too_many_sort_keys(1, 2)


def test_composite_size_above_max_buckets_is_refused(http: httpx.Client, numbers: str) -> None:
    """A shard refuses to build a composite aggregation asking for more buckets than the limit."""

    def composite(size: int) -> dict[str, Any]:
        return {"c": {"composite": {"size": size, "sources": [{"tag": {"terms": {"field": "tag"}}}]}}}

    assert search_aggs(http, numbers, composite(65536)).status_code == 200
    response = search_aggs(http, numbers, composite(65537))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["root_cause"] == [error["caused_by"]]
    assert (error["type"], error["reason"]) == ("search_phase_execution_exception", "all shards failed")
    assert error["caused_by"] == {
        "type": "too_many_buckets_exception",
        "reason": "Trying to create too many buckets. Must be less than or equal to: [65536] "
        "but was [65537]. This limit can be set by changing the [search.max_buckets] cluster level setting.",
        "max_buckets": 65536,
    }


# ---- index.max_docvalue_fields_search, index.max_script_fields ----------------------------------


def shard_refusal(response: httpx.Response) -> dict[str, Any]:
    """The cause of a search every shard refused (`all shards failed`), after checking the shape."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["type"], error["reason"]) == ("search_phase_execution_exception", "all shards failed")
    assert error["root_cause"] == [error["caused_by"]]
    return error["caused_by"]


def too_many(what: str, limit: int, count: int, key: str) -> dict[str, str]:
    return {
        "type": "illegal_argument_exception",
        "reason": f"Trying to retrieve too many {what}. Must be less than or equal to: [{limit}] but was "
        f"[{count}]. This limit can be set by changing the [{key}] index level setting.",
    }


def test_docvalue_fields_limit(http: httpx.Client, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {f"f{i}": {"type": "long"} for i in range(101)}})
    http.put(f"/{index}/_doc/1?refresh=true", json={"f0": 1})
    key = "index.max_docvalue_fields_search"
    fields = [f"f{i}" for i in range(100)]
    response = http.post(f"/{index}/_search", json={"docvalue_fields": [*fields, "unmapped"]})
    assert response.status_code == 200, response.text
    assert response.json()["hits"]["hits"][0]["fields"] == {"f0": [1]}
    response = http.post(f"/{index}/_search", json={"docvalue_fields": [*fields, "f100"]})
    assert shard_refusal(response) == too_many("docvalue_fields", 100, 101, key)
    # patterns count the mapped fields they name, each once
    response = http.post(f"/{index}/_search", json={"docvalue_fields": ["f*", "f1"]})
    assert shard_refusal(response) == too_many("docvalue_fields", 100, 101, key)
    assert http.put(f"/{index}/_settings", json={key: 101}).status_code == 200
    assert http.post(f"/{index}/_search", json={"docvalue_fields": ["f*"]}).status_code == 200


def test_script_fields_are_counted_against_their_limit(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    key = "index.max_script_fields"

    def script_fields(count: int) -> dict[str, Any]:
        return {"script_fields": {f"s{i}": {"script": {"source": "1"}} for i in range(count)}}

    assert http.post(f"/{index}/_search", json=script_fields(32)).status_code == 200
    response = http.post(f"/{index}/_search", json=script_fields(33))
    assert shard_refusal(response) == too_many("script_fields", 32, 33, key)
    assert http.put(f"/{index}/_settings", json={key: 1}).status_code == 200
    response = http.post(f"/{index}/_search", json=script_fields(2))
    assert shard_refusal(response) == too_many("script_fields", 1, 2, key)
    assert http.post(f"/{index}/_search", json={"script_fields": {}}).status_code == 200


# ---- rescore ----------------------------------------------------------------------------------


def score_is_n() -> dict[str, Any]:
    """A first-pass query whose score is the document's `n` (1 .. 6)."""
    clauses = [{"constant_score": {"filter": {"range": {"n": {"gte": k}}}}} for k in range(1, 7)]
    return {"bool": {"should": clauses}}


def boosted(values: list[int], boost: float) -> dict[str, Any]:
    return {"constant_score": {"filter": {"terms": {"n": values}}, "boost": boost}}


@pytest.fixture
def six(http: httpx.Client, new_index: Callable[..., str]) -> str:
    index = new_index(settings={"number_of_shards": 1}, mappings={"properties": {"n": {"type": "long"}}})
    for n in range(1, 7):
        http.put(f"/{index}/_doc/{n}", json={"n": n})
    http.post(f"/{index}/_refresh")
    return index


def ranked(response: httpx.Response) -> list[tuple[str, float]]:
    assert response.status_code == 200, response.text
    return [(hit["_id"], hit["_score"]) for hit in response.json()["hits"]["hits"]]


@pytest.mark.parametrize(
    ("mode", "doc5"),
    [("total", 22.5), ("multiply", 50.0), ("avg", 11.25), ("max", 20.0), ("min", 2.5)],
)
def test_rescore_combines_scores_in_the_window(http: httpx.Client, six: str, mode: str, doc5: float) -> None:
    """Window 3 = docs 6, 5, 4 (scores 6, 5, 4); the rescore query matches 5 and 1 (score 10)."""
    rescorer = {
        "window_size": 3,
        "query": {
            "rescore_query": boosted([5, 1], 10),
            "query_weight": 0.5,
            "rescore_query_weight": 2,
            "score_mode": mode,
        },
    }
    response = http.post(f"/{six}/_search", json={"query": score_is_n(), "rescore": rescorer})
    # doc 5: mode(5 * 0.5, 10 * 2); the others, matched or beyond the window: score * 0.5
    expected = sorted(
        [("5", doc5), ("6", 3.0), ("4", 2.0), ("3", 1.5), ("2", 1.0), ("1", 0.5)], key=lambda h: -h[1]
    )
    assert ranked(response) == expected
    assert response.json()["hits"]["max_score"] == expected[0][1]


def test_rescorers_apply_in_order_and_pages_come_from_the_rescored_list(http: httpx.Client, six: str) -> None:
    rescore = [
        {"window_size": 3, "query": {"rescore_query": boosted([5], 10), "rescore_query_weight": 2}},
        {"window_size": 2, "query": {"rescore_query": boosted([6], 100), "score_mode": "max"}},
    ]
    body = {"query": score_is_n(), "rescore": rescore}
    # first: 5 -> 25, others unchanged; second (window 5, 6): 6 -> max(6, 100)
    everything = [("6", 100.0), ("5", 25.0), ("4", 4.0), ("3", 3.0), ("2", 2.0), ("1", 1.0)]
    assert ranked(http.post(f"/{six}/_search", json=body)) == everything
    page = http.post(f"/{six}/_search", json={**body, "from": 1, "size": 2})
    assert ranked(page) == everything[1:3]
    assert page.json()["hits"]["total"] == {"value": 6, "relation": "eq"}


def test_rescore_window_is_per_shard(http: httpx.Client, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings={"properties": {"n": {"type": "long"}}})
    for n in (1, 2, 3):
        http.put(f"/{index}/_doc/{n}", params={"routing": "a"}, json={"n": n})
    other = next(
        r for r in "bcdefghijk" if http.post(f"/{index}/_count", params={"routing": r}).json()["count"] == 0
    )
    for n in (4, 5, 6):
        http.put(f"/{index}/_doc/{n}", params={"routing": other}, json={"n": n})
    http.post(f"/{index}/_refresh")
    everything = {"constant_score": {"filter": {"match_all": {}}, "boost": 10}}
    rescorer = {"window_size": 1, "query": {"rescore_query": everything}}
    response = http.post(f"/{index}/_search", json={"query": score_is_n(), "rescore": rescorer})
    # each shard's top hit (3 and 6) gets + 10
    assert ranked(response) == [("6", 16.0), ("3", 13.0), ("5", 5.0), ("4", 4.0), ("2", 2.0), ("1", 1.0)]


def test_rescore_refusals(http: httpx.Client, six: str) -> None:
    rescorer = {"query": {"rescore_query": {"match_all": {}}}}
    response = http.post(f"/{six}/_search", json={"sort": ["n"], "rescore": rescorer})
    assert shard_refusal(response) == {
        "type": "illegal_argument_exception",
        "reason": "Cannot use [sort] option in conjunction with [rescore].",
    }
    response = http.post(f"/{six}/_search", params={"scroll": "1m"}, json={"rescore": rescorer})
    error = error_of(response)
    assert error["type"] == "action_request_validation_exception"
    assert error["reason"] == "Validation Failed: 1: using [rescore] is not allowed in a scroll context;"


def rescore_window_error(window: int, limit: int) -> dict[str, str]:
    return {
        "type": "illegal_argument_exception",
        "reason": f"Rescore window [{window}] is too large. It must be less than [{limit}]. This prevents "
        "allocating massive heaps for storing the results to be rescored. This limit can be set by changing "
        "the [index.max_rescore_window] index level setting.",
    }


def test_rescore_window_limit(http: httpx.Client, six: str) -> None:
    def search(window: int) -> httpx.Response:
        rescorer = {"window_size": window, "query": {"rescore_query": {"match_all": {}}}}
        return http.post(f"/{six}/_search", json={"rescore": rescorer})

    assert search(10000).status_code == 200
    assert shard_refusal(search(10001)) == rescore_window_error(10001, 10000)
    # unset, it follows index.max_result_window
    assert http.put(f"/{six}/_settings", json={"index.max_result_window": 50}).status_code == 200
    assert search(50).status_code == 200
    assert shard_refusal(search(51)) == rescore_window_error(51, 50)
    assert http.put(f"/{six}/_settings", json={"index.max_rescore_window": 60}).status_code == 200
    assert search(60).status_code == 200
    assert shard_refusal(search(61)) == rescore_window_error(61, 60)


def test_ids_query_above_the_result_window_is_refused_before_the_window(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    """An `ids` query naming more ids than `index.max_result_window` fails while the shard builds
    it, so its error comes first even when the page itself is past the window (size 10 > 2)."""
    index = new_index(
        settings={"index.max_result_window": 2}, mappings={"properties": {"k": {"type": "keyword"}}}
    )
    http.put(f"/{index}/_doc/1?refresh=true", json={"k": "v"})
    ok = http.post(f"/{index}/_search", json={"size": 2, "query": {"ids": {"values": [1, 2]}}})
    assert len(ok.json()["hits"]["hits"]) == 1
    for body in (
        {"query": {"ids": {"values": [1, 2, 3]}}},
        {"size": 1, "query": {"bool": {"filter": [{"ids": {"values": ["1", "2", "3"]}}]}}},
    ):
        response = http.post(f"/{index}/_search", json=body)
        assert response.status_code == 400
        cause = response.json()["error"]["root_cause"][0]
        assert cause["type"] == "query_shard_exception"
        assert (
            cause["reason"]
            == "failed to create query: Too many ids specified, allowed max result window is [2]"
        )
    counted = http.post(f"/{index}/_count", json={"query": {"ids": {"values": [1, 2, 3]}}})
    assert counted.status_code == 400
    assert counted.json()["error"]["root_cause"][0]["type"] == "query_shard_exception"


def test_query_string_regex_length_is_checked_before_its_fields(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    """A `/regex/` of `query_string` longer than `index.max_regex_length` is refused even over the
    default `*` fields, which are otherwise lenient."""
    index = new_index(
        settings={"index.max_regex_length": 5}, mappings={"properties": {"k": {"type": "keyword"}}}
    )
    http.put(f"/{index}/_doc/1?refresh=true", json={"k": "abcde"})
    assert (
        http.post(f"/{index}/_search", json={"query": {"query_string": {"query": "/abcde/"}}}).json()["hits"][
            "total"
        ]["value"]
        == 1
    )
    response = http.post(f"/{index}/_search", json={"query": {"query_string": {"query": "/abcdef/"}}})
    assert response.status_code == 400
    cause = response.json()["error"]["root_cause"][0]
    assert cause["type"] == "query_shard_exception"
    assert cause["reason"] == (
        "failed to create query: The length of regex [6] used in the [query_string] has exceeded the "
        "allowed maximum of [5]. This maximum can be set by changing the [index.max_regex_length] index "
        "level setting."
    )
