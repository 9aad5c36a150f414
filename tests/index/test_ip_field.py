"""`ip` fields (issue 11): IPv4 and IPv6 addresses indexed, matched by term, terms, CIDR and range
queries, sorted (search_after included), aggregated by `terms` and shown as doc values, in the
address order and the printed forms Elasticsearch uses."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from conftest import bulk_index, search_ok

# id -> address, in address order (IPv4 addresses sort as IPv4-mapped IPv6, below 2001:db8::).
ADDRESSES = {
    "v6-low": "::1",
    "a": "10.0.0.1",
    "b": "10.0.0.20",
    "c": "10.1.0.1",
    "d": "192.168.1.1",
    "e": "255.255.255.255",
    "v6": "2001:db8::ff00:42:8329",
}


@pytest.fixture
def ips(http: httpx.Client, new_index: Callable[..., str]) -> str:
    name = new_index(mappings={"properties": {"addr": {"type": "ip"}}})
    docs = {
        doc_id: {} if address is None else {"addr": address}
        for doc_id, address in [*ADDRESSES.items(), ("none", None)]
    }
    bulk_index(http, name, docs)
    return name


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        ({"term": {"addr": "10.0.0.20"}}, {"b"}),
        ({"term": {"addr": "2001:db8:0:0:0:ff00:42:8329"}}, {"v6"}),  # any spelling of the address
        ({"term": {"addr": "10.0.0.0/8"}}, {"a", "b", "c"}),
        ({"term": {"addr": "10.0.0.0/24"}}, {"a", "b"}),
        ({"terms": {"addr": ["192.168.1.1", "10.1.0.0/16"]}}, {"c", "d"}),
        ({"range": {"addr": {"gte": "10.0.0.2", "lt": "192.168.1.1"}}}, {"b", "c"}),
        ({"range": {"addr": {"gt": "255.255.255.255"}}}, {"v6"}),
        ({"match": {"addr": "::1"}}, {"v6-low"}),
        ({"exists": {"field": "addr"}}, set(ADDRESSES)),
    ],
)
def test_queries(http: httpx.Client, ips: str, query: dict, ids: set[str]) -> None:
    hits = search_ok(http, ips, {"query": query, "size": 20})["hits"]["hits"]
    assert {h["_id"] for h in hits} == ids


def test_sort_and_search_after_in_address_order(http: httpx.Client, ips: str) -> None:
    hits = search_ok(http, ips, {"sort": [{"addr": "asc"}]})["hits"]["hits"]
    assert [(h["_id"], h["sort"]) for h in hits] == [(i, [a]) for i, a in ADDRESSES.items()] + [
        ("none", [None])
    ]
    desc = search_ok(http, ips, {"sort": [{"addr": "desc"}], "query": {"exists": {"field": "addr"}}})["hits"][
        "hits"
    ]
    assert [h["_id"] for h in desc] == list(reversed(ADDRESSES))
    after = search_ok(http, ips, {"sort": [{"addr": "asc"}], "search_after": ["10.0.0.20"], "size": 2})
    assert [h["_id"] for h in after["hits"]["hits"]] == ["c", "d"]
    # A `missing` address places the document where that address sorts, and shows it.
    hits = search_ok(http, ips, {"sort": [{"addr": {"missing": "10.0.0.5"}}], "size": 4})["hits"]["hits"]
    assert [(h["_id"], h["sort"]) for h in hits] == [
        ("v6-low", ["::1"]),
        ("a", ["10.0.0.1"]),
        ("none", ["10.0.0.5"]),
        ("b", ["10.0.0.20"]),
    ]


def test_terms_aggregation_and_doc_values(http: httpx.Client, ips: str) -> None:
    body = {
        "query": {"term": {"addr": "10.0.0.0/8"}},
        "sort": [{"addr": "asc"}],
        "docvalue_fields": ["addr"],
        "aggs": {"by_addr": {"terms": {"field": "addr", "order": {"_key": "asc"}}}},
    }
    result = search_ok(http, ips, body)
    assert [h["fields"]["addr"] for h in result["hits"]["hits"]] == [
        ["10.0.0.1"],
        ["10.0.0.20"],
        ["10.1.0.1"],
    ]
    assert result["aggregations"]["by_addr"]["buckets"] == [
        {"key": "10.0.0.1", "doc_count": 1},
        {"key": "10.0.0.20", "doc_count": 1},
        {"key": "10.1.0.1", "doc_count": 1},
    ]


def test_malformed_addresses_are_refused(http: httpx.Client, ips: str) -> None:
    response = http.put(f"/{ips}/_doc/bad", json={"addr": "999.1.1.1"})
    assert response.status_code == 400
    assert response.json()["error"]["caused_by"] == {
        "type": "illegal_argument_exception",
        "reason": "'999.1.1.1' is not an IP string literal.",
    }
    query = http.post(f"/{ips}/_search", json={"query": {"term": {"addr": "nope"}}})
    assert query.status_code == 400
    assert (
        query.json()["error"]["root_cause"][0]["reason"]
        == "failed to create query: 'nope' is not an IP string literal."
    )


def test_pattern_queries_are_refused(http: httpx.Client, ips: str) -> None:
    response = http.post(f"/{ips}/_search", json={"query": {"prefix": {"addr": "10."}}})
    assert response.status_code == 400
    assert response.json()["error"]["root_cause"][0]["reason"] == (
        "Can only use prefix queries on keyword, text and wildcard fields - not on [addr] "
        "which is of type [ip]"
    )
