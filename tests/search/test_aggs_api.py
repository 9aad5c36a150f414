"""Aggregations through the HTTP API and the official client: each aggregation type's response
shape and values on a small two-shard corpus, `size: 0` searches, and a composite walk with
`after` / `after_key` that must yield every bucket exactly once.

Expected values are computed in the test from the documents with plain Python.
"""

from __future__ import annotations

import math
import statistics
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from conftest import error_of
from elasticsearch import BadRequestError, Elasticsearch, helpers

MAPPINGS = {
    "properties": {
        "cat": {"type": "keyword"},
        "price": {"type": "double"},
        "qty": {"type": "long"},
        "ts": {"type": "date"},
        "tags": {"type": "keyword"},
        "note": {"type": "text"},
    }
}
DOCS: list[dict[str, Any]] = [
    {"cat": "a", "price": 5.0, "qty": 1, "ts": "2024-01-05T10:00:00Z", "tags": ["x", "y"], "note": "one"},
    {"cat": "a", "price": 15.5, "qty": 7, "ts": "2024-01-20T00:00:00Z", "tags": ["x"]},
    {"cat": "b", "price": 50.0, "qty": 12, "ts": "2024-02-02T00:00:00Z", "tags": ["y", "z"]},
    {"cat": "b", "price": 49.99, "qty": 3, "ts": "2024-03-15T08:30:00Z"},
    {"cat": "c", "price": 100.0, "qty": 20, "ts": "2024-03-31T23:59:59Z", "tags": ["z"]},
    {"cat": "a", "qty": 4, "ts": "2024-01-01T00:00:00Z"},
    {"cat": "d", "price": 0.5, "qty": 15, "ts": "2024-04-01T00:00:00Z", "tags": ["x", "z"]},
    {"price": 20.0, "qty": 8},
    {"cat": "b", "price": 10.0, "qty": 10, "ts": "2024-02-29T12:00:00Z", "tags": ["w"]},
    {"cat": "c", "price": 75.25, "qty": 2, "ts": "2024-02-10T00:00:00Z"},
]
PRICES = [d["price"] for d in DOCS if "price" in d]


def millis(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


@pytest.fixture(scope="module")
def shop(es: Elasticsearch, http: httpx.Client) -> Iterator[str]:
    name = f"aggs-api-{uuid.uuid4().hex[:8]}"
    es.indices.create(index=name, settings={"number_of_shards": 2}, mappings=MAPPINGS)
    helpers.bulk(
        es, ({"_index": name, "_id": str(i), "_source": d} for i, d in enumerate(DOCS)), refresh=True
    )
    yield name
    http.delete(f"/{name}")


def aggs_of(es: Elasticsearch, index: str, aggs: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    response = es.search(index=index, size=0, aggs=aggs, **kwargs)
    assert response["hits"]["hits"] == []
    return response["aggregations"]


def test_size_zero_search_returns_totals_and_aggregations(es: Elasticsearch, shop: str) -> None:
    response = es.search(index=shop, size=0, aggs={"n": {"value_count": {"field": "qty"}}})
    assert response["hits"]["total"] == {"value": len(DOCS), "relation": "eq"}
    assert response["hits"]["hits"] == []
    assert response["aggregations"] == {"n": {"value": len(DOCS)}}
    assert response["_shards"]["total"] == 2


def test_terms(es: Elasticsearch, shop: str) -> None:
    result = aggs_of(es, shop, {"cats": {"terms": {"field": "cat"}}})["cats"]
    assert result == {
        "doc_count_error_upper_bound": 0,
        "sum_other_doc_count": 0,
        "buckets": [
            {"key": "a", "doc_count": 3},
            {"key": "b", "doc_count": 3},
            {"key": "c", "doc_count": 2},
            {"key": "d", "doc_count": 1},
        ],
    }
    top = aggs_of(es, shop, {"cats": {"terms": {"field": "cat", "size": 2}}})["cats"]
    assert [b["key"] for b in top["buckets"]] == ["a", "b"]
    assert top["sum_other_doc_count"] == 3
    by_key = aggs_of(es, shop, {"cats": {"terms": {"field": "cat", "order": {"_key": "desc"}}}})["cats"]
    assert [b["key"] for b in by_key["buckets"]] == ["d", "c", "b", "a"]
    by_metric = aggs_of(
        es,
        shop,
        {
            "cats": {
                "terms": {"field": "cat", "order": {"avg_price": "asc"}},
                "aggs": {"avg_price": {"avg": {"field": "price"}}},
            }
        },
    )["cats"]
    assert [(b["key"], b["avg_price"]["value"]) for b in by_metric["buckets"]] == [
        ("d", 0.5),
        ("a", 10.25),
        ("b", pytest.approx((50.0 + 49.99 + 10.0) / 3)),
        ("c", 87.625),
    ]
    tags = aggs_of(es, shop, {"tags": {"terms": {"field": "tags", "min_doc_count": 2}}})["tags"]
    counts = Counter(t for d in DOCS for t in d.get("tags", []))
    assert [(b["key"], b["doc_count"]) for b in tags["buckets"]] == [("x", 3), ("z", 3), ("y", 2)]
    assert counts["w"] == 1
    numeric = aggs_of(es, shop, {"q": {"terms": {"field": "qty", "size": 1, "order": {"_key": "asc"}}}})["q"]
    assert numeric["buckets"] == [{"key": 1, "doc_count": 1}]


def test_metrics(es: Elasticsearch, shop: str) -> None:
    aggs = {
        "min": {"min": {"field": "price"}},
        "max": {"max": {"field": "price"}},
        "avg": {"avg": {"field": "price"}},
        "sum": {"sum": {"field": "price"}},
        "count": {"value_count": {"field": "price"}},
        "tag_values": {"value_count": {"field": "tags"}},
        "distinct": {"cardinality": {"field": "cat"}},
        "distinct_tags": {"cardinality": {"field": "tags"}},
        "stats": {"stats": {"field": "price"}},
        "first_ts": {"min": {"field": "ts"}},
    }
    result = aggs_of(es, shop, aggs)
    assert result["min"] == {"value": min(PRICES)}
    assert result["max"] == {"value": max(PRICES)}
    assert result["avg"]["value"] == pytest.approx(statistics.fmean(PRICES))
    assert result["sum"]["value"] == pytest.approx(math.fsum(PRICES))
    assert result["count"] == {"value": len(PRICES)}
    assert result["tag_values"] == {"value": sum(len(d.get("tags", [])) for d in DOCS)}
    assert result["distinct"] == {"value": 4}
    assert result["distinct_tags"] == {"value": 4}
    assert result["stats"] == {
        "count": len(PRICES),
        "min": min(PRICES),
        "max": max(PRICES),
        "avg": pytest.approx(statistics.fmean(PRICES)),
        "sum": pytest.approx(math.fsum(PRICES)),
    }
    assert result["first_ts"] == {
        "value": float(millis("2024-01-01T00:00:00")),
        "value_as_string": "2024-01-01T00:00:00.000Z",
    }


def test_metrics_over_no_values(es: Elasticsearch, shop: str) -> None:
    aggs = {
        "min": {"min": {"field": "price"}},
        "avg": {"avg": {"field": "price"}},
        "sum": {"sum": {"field": "price"}},
        "count": {"value_count": {"field": "price"}},
        "distinct": {"cardinality": {"field": "cat"}},
        "stats": {"stats": {"field": "price"}},
    }
    result = aggs_of(es, shop, aggs, query={"match_none": {}})
    assert result == {
        "min": {"value": None},
        "avg": {"value": None},
        "sum": {"value": 0.0},
        "count": {"value": 0},
        "distinct": {"value": 0},
        "stats": {"count": 0, "min": None, "max": None, "avg": None, "sum": 0.0},
    }


def test_histogram(es: Elasticsearch, shop: str) -> None:
    result = aggs_of(es, shop, {"h": {"histogram": {"field": "qty", "interval": 4}}})["h"]
    qty = [d["qty"] for d in DOCS]
    expected = Counter(q // 4 * 4 for q in qty)
    assert result["buckets"] == [{"key": float(k), "doc_count": expected[k]} for k in range(0, 24, 4)]
    assert {"key": 16.0, "doc_count": 0} in result["buckets"]  # gaps are filled (min_doc_count 0)
    dense = aggs_of(es, shop, {"h": {"histogram": {"field": "qty", "interval": 4, "min_doc_count": 1}}})["h"]
    assert [b["key"] for b in dense["buckets"]] == [0.0, 4.0, 8.0, 12.0, 20.0]
    with_sub = aggs_of(
        es,
        shop,
        {"h": {"histogram": {"field": "price", "interval": 50}, "aggs": {"n": {"sum": {"field": "qty"}}}}},
    )["h"]
    assert [(b["key"], b["doc_count"], b["n"]["value"]) for b in with_sub["buckets"]] == [
        (0.0, 6, 1 + 7 + 3 + 15 + 8 + 10),
        (50.0, 2, 12 + 2),
        (100.0, 1, 20),
    ]


def test_date_histogram(es: Elasticsearch, shop: str) -> None:
    monthly = aggs_of(es, shop, {"m": {"date_histogram": {"field": "ts", "calendar_interval": "month"}}})["m"]
    assert monthly["buckets"] == [
        {
            "key_as_string": f"2024-0{m}-01T00:00:00.000Z",
            "key": millis(f"2024-0{m}-01T00:00:00"),
            "doc_count": c,
        }
        for m, c in ((1, 3), (2, 3), (3, 2), (4, 1))
    ]
    formatted = aggs_of(
        es,
        shop,
        {"q": {"date_histogram": {"field": "ts", "calendar_interval": "quarter", "format": "yyyy-MM"}}},
    )["q"]
    assert [(b["key_as_string"], b["doc_count"]) for b in formatted["buckets"]] == [
        ("2024-01", 8),
        ("2024-04", 1),
    ]
    zoned = aggs_of(
        es, shop, {"m": {"date_histogram": {"field": "ts", "calendar_interval": "1M", "time_zone": "+01:00"}}}
    )["m"]
    assert zoned["buckets"][0]["key"] == millis("2023-12-31T23:00:00")
    assert zoned["buckets"][0]["key_as_string"] == "2024-01-01T00:00:00.000+01:00"
    # 2024-03-31T23:59:59Z is already April at +01:00.
    assert [b["doc_count"] for b in zoned["buckets"]] == [3, 3, 1, 2]
    daily = aggs_of(
        es,
        shop,
        {"d": {"date_histogram": {"field": "ts", "fixed_interval": "1d"}}},
        query={"range": {"ts": {"lt": "2024-02-01"}}},
    )["d"]
    assert len(daily["buckets"]) == 20
    assert [i for i, b in enumerate(daily["buckets"]) if b["doc_count"]] == [0, 4, 19]


def test_range(es: Elasticsearch, shop: str) -> None:
    ranges = [{"to": 10}, {"from": 10, "to": 50}, {"from": 50}]
    result = aggs_of(es, shop, {"r": {"range": {"field": "price", "ranges": ranges}}})["r"]
    assert result["buckets"] == [
        {"key": "*-10.0", "to": 10.0, "doc_count": 2},
        {"key": "10.0-50.0", "from": 10.0, "to": 50.0, "doc_count": 4},
        {"key": "50.0-*", "from": 50.0, "doc_count": 3},
    ]
    keyed = aggs_of(
        es,
        shop,
        {
            "r": {
                "range": {
                    "field": "price",
                    "keyed": True,
                    "ranges": [{"key": "cheap", "to": 10}, {"from": 10}],
                }
            }
        },
    )["r"]
    assert keyed["buckets"] == {
        "cheap": {"to": 10.0, "doc_count": 2},
        "10.0-*": {"from": 10.0, "doc_count": 7},
    }


def test_filter_and_filters(es: Elasticsearch, shop: str) -> None:
    one = aggs_of(
        es, shop, {"f": {"filter": {"term": {"cat": "a"}}, "aggs": {"avg": {"avg": {"field": "price"}}}}}
    )["f"]
    assert one == {"doc_count": 3, "avg": {"value": 10.25}}
    named = aggs_of(
        es,
        shop,
        {
            "f": {
                "filters": {
                    "filters": {"cheap": {"range": {"price": {"lt": 10}}}, "b": {"term": {"cat": "b"}}},
                    "other_bucket_key": "rest",
                }
            }
        },
    )["f"]
    assert named["buckets"] == {"b": {"doc_count": 3}, "cheap": {"doc_count": 2}, "rest": {"doc_count": 5}}
    anonymous = aggs_of(
        es, shop, {"f": {"filters": {"filters": [{"term": {"cat": "a"}}, {"term": {"cat": "zz"}}]}}}
    )
    assert anonymous["f"]["buckets"] == [{"doc_count": 3}, {"doc_count": 0}]


def test_aggregations_follow_the_query_but_not_the_post_filter(es: Elasticsearch, shop: str) -> None:
    response = es.search(
        index=shop,
        query={"range": {"qty": {"gte": 5}}},
        post_filter={"term": {"cat": "b"}},
        aggs={"cats": {"terms": {"field": "cat"}}},
    )
    assert {h["_source"]["cat"] for h in response["hits"]["hits"]} == {"b"}
    expected = Counter(d["cat"] for d in DOCS if d["qty"] >= 5 and "cat" in d)
    assert {b["key"]: b["doc_count"] for b in response["aggregations"]["cats"]["buckets"]} == expected


def _composite_walk(
    es: Elasticsearch, index: str, sources: list[dict[str, Any]], size: int
) -> list[dict[str, Any]]:
    buckets: list[dict[str, Any]] = []
    after = None
    for _ in range(100):
        body: dict[str, Any] = {"sources": sources, "size": size}
        if after is not None:
            body["after"] = after
        result = aggs_of(es, index, {"c": {"composite": body}})["c"]
        if not result["buckets"]:
            assert "after_key" not in result
            return buckets
        assert len(result["buckets"]) <= size
        assert result["after_key"] == result["buckets"][-1]["key"]
        buckets.extend(result["buckets"])
        after = result["after_key"]
    raise AssertionError("the composite walk did not end")


@pytest.mark.parametrize("size", [1, 2, 3, 100])
def test_composite_walk_yields_every_bucket_once(es: Elasticsearch, shop: str, size: int) -> None:
    sources = [{"cat": {"terms": {"field": "cat"}}}, {"q": {"histogram": {"field": "qty", "interval": 5}}}]
    walked = _composite_walk(es, shop, sources, size)
    expected = Counter((d["cat"], float(d["qty"] // 5 * 5)) for d in DOCS if "cat" in d)
    assert [((b["key"]["cat"], b["key"]["q"]), b["doc_count"]) for b in walked] == sorted(expected.items())


def test_composite_order_missing_bucket_and_dates(es: Elasticsearch, shop: str) -> None:
    sources = [
        {"cat": {"terms": {"field": "cat", "order": "desc", "missing_bucket": True}}},
        {"month": {"date_histogram": {"field": "ts", "calendar_interval": "month", "format": "yyyy-MM"}}},
    ]
    walked = _composite_walk(es, shop, sources, 2)
    expected = Counter((d["cat"], d["ts"][:7]) for d in DOCS if "cat" in d and "ts" in d)
    by_month = sorted(expected.items(), key=lambda kv: kv[0][1])
    assert [((b["key"]["cat"], b["key"]["month"]), b["doc_count"]) for b in walked] == sorted(
        by_month, key=lambda kv: kv[0][0], reverse=True
    )
    nulls = _composite_walk(es, shop, [{"cat": {"terms": {"field": "cat", "missing_bucket": True}}}], 2)
    assert nulls[0] == {"key": {"cat": None}, "doc_count": 1}
    assert sum(b["doc_count"] for b in nulls) == len(DOCS)


def test_typed_keys(http: httpx.Client, shop: str) -> None:
    response = http.post(
        f"/{shop}/_search",
        params={"typed_keys": "true"},
        json={"size": 0, "aggs": {"cats": {"terms": {"field": "cat"}}, "top": {"max": {"field": "qty"}}}},
    ).json()
    assert set(response["aggregations"]) == {"sterms#cats", "max#top"}


def test_aggregation_refusals(es: Elasticsearch, http: httpx.Client, shop: str) -> None:
    unknown = http.post(f"/{shop}/_search", json={"aggs": {"x": {"bogus": {"field": "cat"}}}})
    assert unknown.status_code == 400
    assert error_of(unknown)["type"] == "parsing_exception"
    assert error_of(unknown)["reason"] == "Unknown aggregation type [bogus]"
    assert error_of(unknown)["caused_by"]["type"] == "named_object_not_found_exception"
    with pytest.raises(BadRequestError) as info:
        es.search(index=shop, size=0, aggs={"x": {"terms": {"field": "note"}}})
    error = info.value.body["error"]
    assert error["type"] == "search_phase_execution_exception"
    assert error["root_cause"][0]["type"] == "illegal_argument_exception"
    assert error["root_cause"][0]["reason"] == (
        f"Fielddata is disabled on [note] in [{shop}]. Text fields are not optimised for operations that "
        "require per-document field data like aggregations and sorting, so these operations are disabled by "
        "default. Please use a keyword field instead. Alternatively, set fielddata=true on [note] in order "
        "to load field data by uninverting the inverted index. Note that this can use significant memory."
    )


@pytest.mark.parametrize(
    ("agg", "expected"),
    [
        ({"histogram": {"field": "x", "interval": 5}}, {"buckets": []}),
        ({"date_histogram": {"field": "x", "fixed_interval": "1d"}}, {"buckets": []}),
        (
            {"histogram": {"field": "x", "interval": 5, "extended_bounds": {"min": 0, "max": 12}}},
            {"buckets": [{"key": k, "doc_count": 0} for k in (0.0, 5.0, 10.0)]},
        ),
        (
            {
                "date_range": {"field": "unmapped", "ranges": [{"to": 1000}]},
                "aggs": {"m": {"max": {"field": "x"}}},
            },
            {
                "buckets": [
                    {
                        # A number is read as text in the format, as Elasticsearch's date_range
                        # reads it: "1000" is the year 1000 in strict_date_optional_time.
                        "key": "*-1000-01-01T00:00:00.000Z",
                        "to": -30610224000000.0,
                        "to_as_string": "1000-01-01T00:00:00.000Z",
                        "doc_count": 0,
                        "m": {"value": None},
                    }
                ]
            },
        ),
        (
            {
                "date_histogram": {"field": "unmapped", "calendar_interval": "day"},
                "aggs": {"m": {"max": {"field": "x"}}},
            },
            {"buckets": []},
        ),
        ({"filters": {"filters": {"all": {"match_all": {}}}}}, {"buckets": {"all": {"doc_count": 0}}}),
        ({"composite": {"sources": [{"x": {"terms": {"field": "x"}}}]}}, {"buckets": []}),
    ],
)
def test_bucket_aggregations_on_an_index_without_documents(
    http: httpx.Client, new_index: Any, agg: dict[str, Any], expected: dict[str, Any]
) -> None:
    index = new_index(mappings={"properties": {"x": {"type": "long"}}})
    response = http.post(f"/{index}/_search", json={"size": 0, "aggs": {"a": agg}})
    assert response.status_code == 200, response.text
    assert response.json()["aggregations"]["a"] == expected
