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
