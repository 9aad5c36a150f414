"""The `top_hits` aggregation through the official client and HTTP: best hits per bucket by score
and by fields, `from`/`size`, `_source` filtering, totals and max_score as Elasticsearch renders
them, several shards and segments, concurrent writers, and the limits and refusals."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import orjson
import pytest
from conftest import error_of, search_ok
from elasticsearch import Elasticsearch

MAPPINGS = {
    "properties": {
        "msg": {"type": "text"},
        "tag": {"type": "keyword"},
        "n": {"type": "long"},
        "d": {"type": "date"},
    }
}


def _docs(count: int) -> list[dict]:
    return [{"msg": "fox", "tag": "ab"[i % 2], "n": i, "d": f"2024-0{1 + i % 2}-01"} for i in range(count)]


@pytest.fixture
def index(http: httpx.Client, new_index: Callable) -> str:
    name = new_index(settings={"number_of_shards": 3}, mappings=MAPPINGS)
    lines = []
    for i, doc in enumerate(_docs(30)):
        lines += [orjson.dumps({"index": {"_id": str(i)}}).decode(), orjson.dumps(doc).decode()]
        if i == 14:  # two bulks: two segments on each shard
            _bulk(http, name, lines)
            lines = []
    _bulk(http, name, lines)
    return name


def _bulk(http: httpx.Client, index: str, lines: list[str]) -> None:
    response = http.post(
        f"/{index}/_bulk?refresh=true",
        content="\n".join(lines) + "\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and not response.json()["errors"]


def _aggs(http: httpx.Client, index: str, aggs: dict, query: dict | None = None) -> dict:
    body = {"size": 0, "aggs": aggs, "query": query or {"match_all": {}}}
    return search_ok(http, index, body)["aggregations"]


def test_by_field_inside_terms_through_the_client(es: Elasticsearch, index: str) -> None:
    response = es.search(
        index=index,
        size=0,
        aggs={
            "tags": {
                "terms": {"field": "tag"},
                "aggs": {"best": {"top_hits": {"size": 2, "sort": [{"n": "desc"}], "_source": ["n"]}}},
            }
        },
    )
    buckets = {b["key"]: b["best"]["hits"] for b in response["aggregations"]["tags"]["buckets"]}
    assert buckets["a"] == {
        "total": {"value": 15, "relation": "eq"},
        "max_score": None,
        "hits": [
            {"_index": index, "_id": "28", "_score": None, "_source": {"n": 28}, "sort": [28]},
            {"_index": index, "_id": "26", "_score": None, "_source": {"n": 26}, "sort": [26]},
        ],
    }
    assert [h["_id"] for h in buckets["b"]["hits"]] == ["29", "27"]


def test_default_is_three_hits_by_score_with_max_score(http: httpx.Client, index: str) -> None:
    http.put(f"/{index}/_doc/best?refresh=true", json={"msg": "fox fox fox fox", "tag": "a", "n": 99})
    hits = _aggs(http, index, {"top": {"top_hits": {}}}, {"match": {"msg": "fox"}})["top"]["hits"]
    assert hits["total"] == {"value": 31, "relation": "eq"}
    assert len(hits["hits"]) == 3
    scores = [h["_score"] for h in hits["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert hits["max_score"] == scores[0]
    assert hits["hits"][0]["_id"] == "best"


def test_from_size_and_sort_by_two_fields(http: httpx.Client, index: str) -> None:
    top = {"top_hits": {"from": 2, "size": 3, "sort": [{"tag": "desc"}, {"n": "asc"}], "_source": False}}
    hits = _aggs(http, index, {"top": top})["top"]["hits"]["hits"]
    assert [(h["_id"], h["sort"]) for h in hits] == [("5", ["b", 5]), ("7", ["b", 7]), ("9", ["b", 9])]
    assert all("_source" not in h for h in hits)


def test_inside_date_histogram(http: httpx.Client, index: str) -> None:
    aggs = {
        "months": {
            "date_histogram": {"field": "d", "calendar_interval": "month"},
            "aggs": {"first": {"top_hits": {"size": 1, "sort": [{"n": "asc"}]}}},
        }
    }
    buckets = _aggs(http, index, aggs)["months"]["buckets"]
    assert [(b["doc_count"], b["first"]["hits"]["hits"][0]["_id"]) for b in buckets] == [(15, "0"), (15, "1")]


def test_concurrent_writers(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS)
    errors: list[str] = []

    def write(worker: int) -> None:
        for i in range(20):
            doc = {"msg": "fox", "tag": f"w{worker}", "n": i}
            if http.put(f"/{index}/_doc/{worker}-{i}", json=doc).status_code != 201:
                errors.append("write")
            if i % 5 == 0:
                http.post(f"/{index}/_refresh")

    def read() -> None:
        for _ in range(15):
            body = {
                "size": 0,
                "aggs": {
                    "t": {
                        "terms": {"field": "tag"},
                        "aggs": {"h": {"top_hits": {"size": 1, "sort": [{"n": "desc"}]}}},
                    }
                },
            }
            r = http.post(f"/{index}/_search", json=body)
            if r.status_code != 200:
                errors.append(r.text)
                continue
            for bucket in r.json()["aggregations"]["t"]["buckets"]:
                hit = bucket["h"]["hits"]["hits"][0]
                if bucket["h"]["hits"]["total"]["value"] != bucket["doc_count"] or not hit["_id"].startswith(
                    bucket["key"][1:]
                ):
                    errors.append(str(bucket))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(2)] + [
        threading.Thread(target=read) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    http.post(f"/{index}/_refresh")
    buckets = _aggs(
        http,
        index,
        {"t": {"terms": {"field": "tag"}, "aggs": {"h": {"top_hits": {"size": 1, "sort": [{"n": "desc"}]}}}}},
    )["t"]["buckets"]
    assert sorted((b["key"], b["h"]["hits"]["hits"][0]["_id"]) for b in buckets) == [
        ("w0", "0-19"),
        ("w1", "1-19"),
    ]


def test_window_limit_follows_the_index_setting(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings={"max_inner_result_window": 5}, mappings=MAPPINGS)
    response = http.post(
        f"/{index}/_search", json={"size": 0, "aggs": {"top": {"top_hits": {"from": 3, "size": 3}}}}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "search_phase_execution_exception"
    assert error["root_cause"][0]["reason"] == (
        "Top hits result window is too large, the top hits aggregator [top]'s from + size must be less "
        "than or equal to: [5] but was [6]. This limit can be set by changing the "
        "[index.max_inner_result_window] index level setting."
    )


@pytest.mark.parametrize(
    ("top_hits", "reason"),
    [
        ({"size": -1}, "[size] parameter cannot be negative, found [-1]"),
        ({"from": -2}, "[from] parameter cannot be negative but was [-2]"),
        ({"bogus": 1}, "[top_hits] unknown field [bogus]"),
        ({"size": "many"}, "[top_hits] failed to parse field [size]"),
    ],
)
def test_malformed_top_hits_is_refused(http: httpx.Client, index: str, top_hits: dict, reason: str) -> None:
    response = http.post(f"/{index}/_search", json={"size": 0, "aggs": {"top": {"top_hits": top_hits}}})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert reason in (error["reason"], error["root_cause"][0]["reason"])


def test_top_hits_takes_no_sub_aggregations(http: httpx.Client, index: str) -> None:
    body = {"size": 0, "aggs": {"top": {"top_hits": {}, "aggs": {"m": {"max": {"field": "n"}}}}}}
    response = http.post(f"/{index}/_search", json=body)
    assert response.status_code == 400
    assert (
        error_of(response)["reason"] == "Aggregator [top] of type [top_hits] cannot accept sub-aggregations"
    )
