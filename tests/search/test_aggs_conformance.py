"""Aggregation behaviours checked against Elasticsearch's (issue 11): metadata fields, range
bounds in the field's own units and precision, unmapped fields, parameter checks."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx


def _bulk(http: httpx.Client, name: str, docs: list[dict]) -> None:
    lines = []
    for doc in docs:
        lines += [json.dumps({"index": {"_index": name}}), json.dumps(doc)]
    response = http.post(
        "/_bulk?refresh=true",
        content="\n".join(lines) + "\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and not response.json()["errors"], response.text


def _aggs(http: httpx.Client, target: str, aggs: dict, query: dict | None = None) -> httpx.Response:
    body: dict = {"size": 0, "aggs": aggs}
    if query is not None:
        body["query"] = query
    return http.post(f"/{target}/_search", json=body)


def test_terms_on_index_counts_documents_per_index(http: httpx.Client, new_index: Callable[..., str]) -> None:
    first = new_index(mappings={"properties": {"n": {"type": "long"}}}, suffix="-a")
    second = new_index(mappings={"properties": {"n": {"type": "long"}}}, suffix="-b")
    _bulk(http, first, [{"n": 1}, {"n": 2}, {"n": 3}])
    _bulk(http, second, [{"n": 4}])
    response = _aggs(http, f"{first},{second}", {"idx": {"terms": {"field": "_index"}}})
    assert response.status_code == 200, response.text
    assert response.json()["aggregations"]["idx"]["buckets"] == [
        {"key": first, "doc_count": 3},
        {"key": second, "doc_count": 1},
    ]
    # Under a query and with a sub-aggregation, each index's bucket holds its own matches.
    response = _aggs(
        http,
        f"{first},{second}",
        {
            "idx": {
                "terms": {"field": "_index", "order": {"_key": "desc"}},
                "aggs": {"top": {"max": {"field": "n"}}},
            }
        },
        query={"range": {"n": {"gte": 2}}},
    )
    assert response.json()["aggregations"]["idx"]["buckets"] == [
        {"key": second, "doc_count": 1, "top": {"value": 4.0}},
        {"key": first, "doc_count": 2, "top": {"value": 3.0}},
    ]


def test_date_range_numeric_bounds_are_read_in_the_fields_format(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index(mappings={"properties": {"date": {"type": "date", "format": "epoch_second"}}})
    _bulk(http, name, [{"date": 1000}, {"date": 2000}, {"date": 3000}])
    response = _aggs(
        http,
        name,
        {
            "r": {
                "date_range": {
                    "field": "date",
                    "ranges": [{"from": 1000, "to": 3000}, {"from": 3000, "to": 4000}],
                }
            }
        },
    )
    assert response.status_code == 200, response.text
    buckets = response.json()["aggregations"]["r"]["buckets"]
    assert [(b["key"], b["from"], b["to"], b["doc_count"]) for b in buckets] == [
        ("1000-3000", 1000000, 3000000, 2),
        ("3000-4000", 3000000, 4000000, 1),
    ]


def test_range_bounds_in_any_of_the_fields_date_formats(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index(
        mappings={"properties": {"d": {"type": "date", "format": "strict_date_time||strict_date"}}}
    )
    _bulk(http, name, [{"d": "2021-04-30T23:59:59Z"}, {"d": "2021-05-01T00:00:00Z"}, {"d": "2021-06-01"}])
    response = _aggs(
        http,
        name,
        {
            "r": {
                "range": {
                    "field": "d",
                    "ranges": [{"to": "2021-05-01T00:00:00Z"}, {"from": "2021-05-01T00:00:00Z"}],
                }
            }
        },
    )
    assert response.status_code == 200, response.text
    assert [b["doc_count"] for b in response.json()["aggregations"]["r"]["buckets"]] == [1, 2]


def test_float_ranges_compare_at_the_fields_precision(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index(mappings={"properties": {"f": {"type": "float"}, "h": {"type": "half_float"}}})
    _bulk(http, name, [{"f": 0.04, "h": 0.04}, {"f": 0.01, "h": 0.01}])
    for field in ("f", "h"):
        response = _aggs(
            http,
            name,
            {"r": {"range": {"field": field, "ranges": [{"from": 0, "to": 0.04}, {"from": 0.04}]}}},
        )
        assert response.status_code == 200, response.text
        # The stored 0.04 equals the bound 0.04 at the field's precision: it starts the second range.
        buckets = response.json()["aggregations"]["r"]["buckets"]
        assert [b["doc_count"] for b in buckets] == [1, 1], field
        # ... and the buckets print the request's numbers, not the float widened to a double.
        assert [(b["key"], b.get("from"), b.get("to")) for b in buckets] == [
            ("0.0-0.04", 0.0, 0.04),
            ("0.04-*", 0.04, None),
        ], field
    _bulk(http, name, [{"f": 10}, {"f": 5.5}, {"f": 6.7}, {"f": 10.6}])
    response = _aggs(
        http,
        name,
        {
            "r": {
                "range": {
                    "field": "f",
                    "keyed": True,
                    "ranges": [{"from": 5, "to": 6}, {"from": 6, "to": 10.6}],
                }
            }
        },
    )
    assert response.json()["aggregations"]["r"]["buckets"] == {
        "5.0-6.0": {"from": 5.0, "to": 6.0, "doc_count": 1},
        "6.0-10.6": {"from": 6.0, "to": 10.6, "doc_count": 2},
    }


def test_date_range_with_sub_aggregation_on_an_unmapped_field(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index()
    response = _aggs(
        http,
        name,
        {
            "r": {
                "date_range": {"field": "date", "ranges": [{"from": "2020-01-01T00:00:00Z"}]},
                "aggs": {"sounds": {"cardinality": {"field": "sound.keyword"}}},
            }
        },
        query={"terms": {"animal": []}},
    )
    assert response.status_code == 200, response.text
    assert response.json()["aggregations"]["r"]["buckets"] == [
        {
            "key": "2020-01-01T00:00:00.000Z-*",
            "from": 1577836800000.0,
            "from_as_string": "2020-01-01T00:00:00.000Z",
            "doc_count": 0,
            "sounds": {"value": 0},
        }
    ]


def test_cardinality_of_an_unmapped_field_with_missing(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index(mappings={"properties": {"n": {"type": "long"}}})
    _bulk(http, name, [{"n": 1}, {"n": 2}])
    response = _aggs(http, name, {"c": {"cardinality": {"field": "nope", "missing": "anything"}}})
    assert response.status_code == 200, response.text
    assert response.json()["aggregations"]["c"] == {"value": 1}


def test_negative_precision_threshold_is_refused(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index(mappings={"properties": {"n": {"type": "long"}}})
    response = _aggs(http, name, {"c": {"cardinality": {"field": "n", "precision_threshold": -1}}})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "x_content_parse_exception"
    assert error["reason"] == "[cardinality] failed to parse field [precision_threshold]"
    assert error["caused_by"] == {
        "type": "illegal_argument_exception",
        "reason": "[precisionThreshold] must be greater than or equal to 0. Found [-1] in [c]",
    }
