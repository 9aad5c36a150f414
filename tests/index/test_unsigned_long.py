"""`unsigned_long` fields (issue 11): values from 0 to 2^64-1 indexed, sorted, paged with
search_after, matched by term and range queries, aggregated and shown as doc values, as
Elasticsearch 8 does; a sort across an unsigned_long index and another numeric type is refused."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from conftest import bulk_index, search_ok

MAX = 2**64 - 1
VALUES = {"zero": 0, "one": 1, "mid": 2**63 - 1, "high": 2**63, "top": MAX, "text": "18000000000000000000"}


@pytest.fixture
def ul(http: httpx.Client, new_index: Callable[..., str]) -> str:
    name = new_index(mappings={"properties": {"u": {"type": "unsigned_long"}, "n": {"type": "long"}}})
    docs = {
        doc_id: {} if value is None else {"u": value} for doc_id, value in [*VALUES.items(), ("none", None)]
    }
    bulk_index(http, name, docs)
    return name


ASCENDING = [
    ("zero", 0),
    ("one", 1),
    ("mid", 2**63 - 1),
    ("high", 2**63),
    ("text", 18000000000000000000),
    ("top", MAX),
]


def test_sort_both_ways_with_missing_documents(http: httpx.Client, ul: str) -> None:
    hits = search_ok(http, ul, {"sort": [{"u": "asc"}]})["hits"]["hits"]
    assert [(h["_id"], h["sort"]) for h in hits] == [(i, [v]) for i, v in ASCENDING] + [("none", [MAX])]
    hits = search_ok(http, ul, {"sort": [{"u": {"order": "desc"}}]})["hits"]["hits"]
    assert [h["_id"] for h in hits] == [i for i, _ in reversed(ASCENDING)] + ["none"]
    assert hits[-1]["sort"] == [0]
    # `_first` puts it at the stored long's minimum, which is 0's: it ties with 0, as in Elasticsearch.
    hits = search_ok(http, ul, {"sort": [{"u": {"order": "asc", "missing": "_first"}}]})["hits"]["hits"]
    assert {(h["_id"], h["sort"][0]) for h in hits[:2]} == {("none", 0), ("zero", 0)}


def test_search_after_walks_every_value(http: httpx.Client, ul: str) -> None:
    seen, after = [], None
    while True:
        body: dict = {"sort": [{"u": "asc"}], "size": 2, "query": {"exists": {"field": "u"}}}
        if after is not None:
            body["search_after"] = after
        hits = search_ok(http, ul, body)["hits"]["hits"]
        if not hits:
            break
        seen += [h["_id"] for h in hits]
        after = hits[-1]["sort"]
    assert seen == [i for i, _ in ASCENDING]
    # A cursor given as a string, beyond 2^63, as clients that keep big numbers as text send it.
    hits = search_ok(
        http, ul, {"sort": [{"u": "asc"}], "search_after": [str(2**63)], "query": {"exists": {"field": "u"}}}
    )
    assert [h["_id"] for h in hits["hits"]["hits"]] == ["text", "top"]


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        ({"term": {"u": MAX}}, {"top"}),
        ({"term": {"u": str(2**63)}}, {"high"}),
        ({"term": {"u": -1}}, set()),
        ({"terms": {"u": [0, 1, 2.5, MAX]}}, {"zero", "one", "top"}),
        ({"range": {"u": {"gte": 2**63}}}, {"high", "text", "top"}),
        ({"range": {"u": {"gt": -5, "lt": 2}}}, {"zero", "one"}),
        ({"range": {"u": {"gt": MAX}}}, set()),
        ({"range": {"u": {"gt": "1.8e19"}}}, {"top"}),
    ],
)
def test_queries(http: httpx.Client, ul: str, query: dict, ids: set[str]) -> None:
    hits = search_ok(http, ul, {"query": query, "size": 20})["hits"]["hits"]
    assert {h["_id"] for h in hits} == ids


def test_doc_values_and_aggregations(http: httpx.Client, ul: str) -> None:
    body = {
        "query": {"ids": {"values": ["top", "high"]}},
        "sort": [{"u": "asc"}],
        "docvalue_fields": ["u"],
        "aggs": {"keys": {"terms": {"field": "u"}}, "biggest": {"max": {"field": "u"}}},
    }
    result = search_ok(http, ul, body)
    assert [h["fields"]["u"] for h in result["hits"]["hits"]] == [[2**63], [MAX]]
    assert [(b["key"], b["doc_count"]) for b in result["aggregations"]["keys"]["buckets"]] == [
        (2**63, 1),
        (MAX, 1),
    ]
    assert result["aggregations"]["biggest"]["value"] == float(MAX)


def test_values_out_of_range_are_refused(http: httpx.Client, ul: str) -> None:
    for value, reason in [
        (-1, "Value [-1] is out of range for unsigned long."),
        ("-1", "Value [-1] is out of range for unsigned long"),
        (10.5, "For input string: [10.5]."),
        ("10.5", 'Value "10.5" has a decimal part'),
        ("x", 'For input string: "x"'),
    ]:
        response = http.put(f"/{ul}/_doc/bad", json={"u": value})
        assert response.status_code == 400, value
        assert response.json()["error"]["caused_by"]["reason"] == reason


def test_sort_across_unsigned_long_and_long_is_refused(
    http: httpx.Client, ul: str, new_index: Callable[..., str]
) -> None:
    other = new_index(mappings={"properties": {"u": {"type": "long"}}}, suffix="-long")
    http.put(f"/{other}/_doc/1?refresh=true", json={"u": 5})
    response = http.post(f"/{ul},{other}/_search", json={"sort": [{"u": "asc"}]})
    assert response.status_code == 400
    assert "Can't do sort across indices, as a field has [unsigned_long] type in one index" in response.text
    # Queries across both still mix them: each index matches by its own values.
    hits = search_ok(http, f"{ul},{other}", {"query": {"range": {"u": {"gte": 1, "lte": 5}}}})["hits"]["hits"]
    assert {h["_id"] for h in hits} == {"one", "1"}
