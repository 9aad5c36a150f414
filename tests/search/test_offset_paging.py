"""Offset paging through the HTTP API (SPEC 4.1 rules 1, 2, 15, 16; SPEC 8): the defaults, the
result window and its refusal, negative values, the window changed live, and the total-hits
threshold that goes with a 10,000-hit window.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import error_of
from elasticsearch import BadRequestError, Elasticsearch

BIG = 10_001


def window_message(limit: int, asked: int) -> str:
    return (
        f"Result window is too large, from + size must be less than or equal to: [{limit}] but was "
        f"[{asked}]. See the scroll api for a more efficient way to request large data sets. This limit can "
        "be set by changing the [index.max_result_window] index level setting."
    )


@pytest.fixture(scope="module")
def big(http: httpx.Client) -> Iterator[str]:
    """10,001 documents with `k` = 0..10,000 over two shards: one more than the default window."""
    name = f"offset-big-{uuid.uuid4().hex[:8]}"
    assert (
        http.put(
            f"/{name}",
            json={"settings": {"number_of_shards": 2}, "mappings": {"properties": {"k": {"type": "long"}}}},
        ).status_code
        == 200
    )
    lines = "".join(f'{{"index":{{"_id":"{i}"}}}}\n{{"k":{i}}}\n' for i in range(BIG))
    response = http.post(
        f"/{name}/_bulk",
        content=lines,
        headers={"content-type": "application/x-ndjson"},
        params={"refresh": "true"},
    )
    assert response.status_code == 200 and response.json()["errors"] is False
    yield name
    http.delete(f"/{name}")


def keys(response: Any) -> list[int]:
    return [hit["_source"]["k"] for hit in response["hits"]["hits"]]


def test_defaults_are_the_first_ten_hits(es: Elasticsearch, big: str) -> None:
    response = es.search(index=big, sort=[{"k": "asc"}])
    assert keys(response) == list(range(10))
    assert keys(es.search(index=big, sort=[{"k": "asc"}], from_=0, size=10)) == list(range(10))
    relevance = es.search(index=big)
    assert len(relevance["hits"]["hits"]) == 10


def test_pages_follow_from_and_size(es: Elasticsearch, http: httpx.Client, big: str) -> None:
    assert keys(es.search(index=big, sort=[{"k": "desc"}], from_=5, size=3)) == [9995, 9994, 9993]
    by_url = http.get(f"/{big}/_search", params={"sort": "k", "from": "20", "size": "4"}).json()
    assert keys(by_url) == [20, 21, 22, 23]
    # The last page the default window reaches, by body and by URL.
    last = es.search(index=big, sort=[{"k": "asc"}], from_=9990, size=10)
    assert keys(last) == list(range(9990, 10_000))
    assert keys(http.get(f"/{big}/_search", params={"sort": "k", "from": "9999", "size": "1"}).json()) == [
        9999
    ]


def test_size_zero_and_pages_past_the_end(es: Elasticsearch, big: str) -> None:
    counted = es.search(index=big, size=0, query={"range": {"k": {"lt": 25}}})
    assert counted["hits"]["hits"] == []
    assert counted["hits"]["total"] == {"value": 25, "relation": "eq"}
    past = es.search(index=big, from_=30, size=10, query={"range": {"k": {"lt": 25}}}, sort=["k"])
    assert past["hits"]["hits"] == []
    assert past["hits"]["total"] == {"value": 25, "relation": "eq"}
    partial = es.search(index=big, from_=20, size=10, query={"range": {"k": {"lt": 25}}}, sort=["k"])
    assert keys(partial) == [20, 21, 22, 23, 24]


@pytest.mark.parametrize(("from_", "size"), [(9991, 10), (0, 10_001), (10_000, 1), (5000, 5001)])
def test_window_overflow_is_refused(es: Elasticsearch, big: str, from_: int, size: int) -> None:
    with pytest.raises(BadRequestError) as info:
        es.search(index=big, from_=from_, size=size)
    error = info.value.body["error"]
    assert info.value.meta.status == 400
    assert error["type"] == "search_phase_execution_exception"
    assert error["root_cause"][0]["type"] == "illegal_argument_exception"
    assert error["root_cause"][0]["reason"] == window_message(10_000, from_ + size)
    assert error["caused_by"]["type"] == "illegal_argument_exception"
    assert error["caused_by"]["reason"] == window_message(10_000, from_ + size)


def test_window_overflow_by_url_and_on_an_empty_index(http: httpx.Client, new_index) -> None:
    empty = new_index()
    response = http.get(f"/{empty}/_search", params={"from": "9999", "size": "11"})
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == 400
    assert body["error"]["root_cause"][0] == {
        "type": "illegal_argument_exception",
        "reason": window_message(10_000, 10_010),
    }
    # Exactly at the window is allowed, whatever the number of hits.
    assert http.get(f"/{empty}/_search", params={"from": "9990", "size": "10"}).status_code == 200


@pytest.mark.parametrize(
    ("body", "params", "reason"),
    [
        ({"from": -2}, {}, "[from] parameter cannot be negative but was [-2]"),
        ({"size": -1}, {}, "[size] parameter cannot be negative, found [-1]"),
        ({}, {"from": "-5"}, "[from] parameter cannot be negative but was [-5]"),
        ({}, {"size": "-3"}, "[size] parameter cannot be negative, found [-3]"),
    ],
)
def test_negative_from_and_size_are_refused(http: httpx.Client, big: str, body, params, reason) -> None:
    response = http.post(f"/{big}/_search", json=body, params=params)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "illegal_argument_exception"
    assert error["reason"] == reason


def test_size_minus_one_in_the_url_is_refused(http: httpx.Client, big: str) -> None:
    """Elasticsearch 8 reads `?size=-1` as a negative size (7.x read it as "not given")."""
    response = http.get(f"/{big}/_search", params={"size": "-1"})
    assert response.status_code == 400
    assert error_of(response)["reason"] == "[size] parameter cannot be negative, found [-1]"


def test_negative_values_through_the_client(es: Elasticsearch, big: str) -> None:
    with pytest.raises(BadRequestError) as info:
        es.search(index=big, size=-1)
    assert info.value.body["error"]["root_cause"][0]["type"] == "illegal_argument_exception"


def test_window_is_updated_live(es: Elasticsearch, new_index) -> None:
    index = new_index(settings={"number_of_shards": 1})
    es.index(index=index, id="1", document={"k": 1}, refresh=True)
    assert es.search(index=index, from_=15, size=10)["hits"]["hits"] == []
    es.indices.put_settings(index=index, settings={"index": {"max_result_window": 20}})
    assert es.indices.get_settings(index=index)[index]["settings"]["index"]["max_result_window"] == "20"
    with pytest.raises(BadRequestError) as info:
        es.search(index=index, from_=15, size=10)
    assert info.value.body["error"]["root_cause"][0]["reason"] == window_message(20, 25)
    assert es.search(index=index, from_=10, size=10)["hits"]["total"]["value"] == 1
    es.indices.put_settings(index=index, settings={"index.max_result_window": 30})
    assert es.search(index=index, from_=15, size=10)["hits"]["hits"] == []
    # Back to the default when the setting is reset.
    es.indices.put_settings(index=index, settings={"index.max_result_window": None})
    assert es.search(index=index, from_=9990, size=10)["hits"]["hits"] == []
    with pytest.raises(BadRequestError):
        es.search(index=index, from_=9991, size=10)


def test_each_index_applies_its_own_window(es: Elasticsearch, new_index) -> None:
    small = new_index(settings={"index.max_result_window": 5}, suffix="-small")
    large = new_index(suffix="-large")
    with pytest.raises(BadRequestError) as info:
        es.search(index=f"{small},{large}", from_=3, size=3)
    assert info.value.body["error"]["root_cause"][0]["reason"] == window_message(5, 6)
    assert es.search(index=large, from_=3, size=3)["hits"]["hits"] == []


def test_total_hits_are_exact_up_to_ten_thousand(es: Elasticsearch, http: httpx.Client, big: str) -> None:
    assert es.search(index=big, size=0)["hits"]["total"] == {"value": 10_000, "relation": "gte"}
    exact = es.search(index=big, size=0, query={"range": {"k": {"lt": 10_000}}})
    assert exact["hits"]["total"] == {"value": 10_000, "relation": "eq"}
    assert es.search(index=big, size=0, track_total_hits=True)["hits"]["total"] == {
        "value": BIG,
        "relation": "eq",
    }
    assert es.search(index=big, size=0, track_total_hits=20_000)["hits"]["total"] == {
        "value": BIG,
        "relation": "eq",
    }
    assert es.search(index=big, size=0, track_total_hits=100)["hits"]["total"] == {
        "value": 100,
        "relation": "gte",
    }
    assert "total" not in es.search(index=big, size=1, track_total_hits=False)["hits"]
    as_int = http.get(f"/{big}/_search", params={"rest_total_hits_as_int": "true", "size": "0"}).json()
    assert as_int["hits"]["total"] == BIG
    assert es.count(index=big)["count"] == BIG


def test_track_total_hits_refusals(http: httpx.Client, big: str) -> None:
    negative = http.post(f"/{big}/_search", json={"track_total_hits": -5})
    assert negative.status_code == 400
    assert (
        error_of(negative)["reason"]
        == "[track_total_hits] parameter must be positive or equals to -1, got -5"
    )
    with_int = http.get(
        f"/{big}/_search", params={"rest_total_hits_as_int": "true", "track_total_hits": "100"}
    )
    assert with_int.status_code == 400
    assert error_of(with_int)["type"] == "illegal_argument_exception"
    assert error_of(with_int)["reason"] == (
        "[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got 100"
    )
