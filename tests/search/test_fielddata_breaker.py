"""The fielddata breaker over HTTP with the official client: the uninverted tokens of a
`fielddata: true` text field show in `_stats` and `_nodes/stats` once a terms aggregation built
them, `_cache/clear?fielddata=true` frees them, a limit below them fails the search with
Elasticsearch's `[fielddata] Data too large` and holds nothing, and clients aggregating beside
writers, refreshes and clears leave the breaker's count equal to what is held."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from elasticsearch import ApiError, Elasticsearch

from tests import web
from tests.concurrency import readers_beside_a_writer

MAPPINGS = {"properties": {"msg": {"type": "text", "fielddata": True}}}


def fill(http: httpx.Client, index: str, start: int, count: int) -> None:
    lines = b"".join(
        orjson.dumps({"index": {"_index": index, "_id": str(i)}})
        + b"\n"
        + orjson.dumps({"msg": f"word{i % 11} common token{i % 97}"})
        + b"\n"
        for i in range(start, start + count)
    )
    response = http.post(
        "/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert not response.json()["errors"]


def held(es: Elasticsearch, index: str) -> int:
    return es.indices.stats(index=index, metric="fielddata")["_all"]["total"]["fielddata"][
        "memory_size_in_bytes"
    ]


def breaker(es: Elasticsearch) -> dict[str, Any]:
    return next(iter(es.nodes.stats(metric="breaker")["nodes"].values()))["breakers"]["fielddata"]


def terms(es: Elasticsearch, index: str) -> dict[str, int]:
    answer = es.search(index=index, size=0, aggs={"w": {"terms": {"field": "msg", "size": 5}}})
    return {b["key"]: b["doc_count"] for b in answer["aggregations"]["w"]["buckets"]}


def test_fielddata_is_counted_freed_and_refused_over_the_limit(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str], cluster_setting: Callable
) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS)
    fill(http, index, 0, 300)
    assert held(es, index) == 0
    before = breaker(es)["estimated_size_in_bytes"]
    assert terms(es, index)["common"] == 300
    memory = held(es, index)
    assert memory > 0
    assert breaker(es)["estimated_size_in_bytes"] >= before + memory
    assert terms(es, index)["common"] == 300  # built once: the second search holds no more
    assert held(es, index) == memory
    cleared = es.indices.clear_cache(index=index, fielddata=True)
    assert cleared["_shards"]["failed"] == 0
    assert held(es, index) == 0
    assert breaker(es)["estimated_size_in_bytes"] == before
    tripped = breaker(es)["tripped"]
    cluster_setting("indices.breaker.fielddata.limit", "100b")
    with pytest.raises(ApiError) as refused:
        terms(es, index)
    assert refused.value.meta.status == 429
    error = refused.value.body["error"]
    assert error["root_cause"][0]["type"] == "circuit_breaking_exception"
    assert error["root_cause"][0]["reason"].startswith(
        "[fielddata] Data too large, data for [msg] would be ["
    )
    assert error["root_cause"][0]["durability"] == "PERMANENT"
    assert held(es, index) == 0 and breaker(es)["tripped"] > tripped
    assert breaker(es)["limit_size_in_bytes"] == 100


def test_clients_aggregate_beside_writers_and_clears_and_the_count_stays_true(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS)
    fill(http, index, 0, 200)
    before = breaker(es)["estimated_size_in_bytes"]
    stop = threading.Event()
    failures: list[str] = []

    def write() -> None:
        with web.Client(base_url=str(http.base_url)) as own:
            start = 200
            while not stop.is_set():
                fill(own, index, start, 25)
                own.post(f"/{index}/_cache/clear?fielddata=true")
                start += 25

    def read() -> None:
        with web.Client(base_url=str(http.base_url)) as own:
            for _ in range(8):
                body = {"size": 0, "aggs": {"w": {"terms": {"field": "msg", "size": 3}}}}
                answer = own.post(f"/{index}/_search", json=body)
                if answer.status_code != 200:
                    failures.append(answer.text)
                    continue
                top = answer.json()["aggregations"]["w"]["buckets"][0]
                if top["key"] != "common" or top["doc_count"] != answer.json()["hits"]["total"]["value"]:
                    failures.append(str(top))

    readers_beside_a_writer(write, [read] * 3, stop)
    assert not failures, failures[:2]
    es.indices.clear_cache(index=index, fielddata=True)
    assert held(es, index) == 0
    assert breaker(es)["estimated_size_in_bytes"] == before
