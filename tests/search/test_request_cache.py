"""The request cache through the HTTP API and the official client: what is cached, its counters in
`_stats` and `_nodes/stats`, invalidation by refresh, its bound, and readers beside writers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from elasticsearch import Elasticsearch

from tests import web

AGGS = {"size": 0, "aggs": {"tags": {"terms": {"field": "tag"}}, "top": {"max": {"field": "n"}}}}


@pytest.fixture
def tagged(es: Elasticsearch, new_index: Callable[..., str]) -> str:
    name = new_index(
        settings={"number_of_shards": 2},
        mappings={"properties": {"tag": {"type": "keyword"}, "n": {"type": "long"}, "d": {"type": "date"}}},
    )
    for i in range(20):
        es.index(index=name, id=str(i), document={"tag": f"t{i % 3}", "n": i})
    es.indices.refresh(index=name)
    return name


def cache_stats(http: httpx.Client, index: str) -> dict[str, int]:
    body = http.get(f"/{index}/_stats/request_cache").json()
    return body["indices"][index]["total"]["request_cache"]


def without_took(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "took"}


def test_size_zero_searches_are_answered_from_the_cache(
    es: Elasticsearch, http: httpx.Client, tagged: str
) -> None:
    first = http.post(f"/{tagged}/_search", json=AGGS).json()
    assert cache_stats(http, tagged) | {"memory_size_in_bytes": 0} == {
        "memory_size_in_bytes": 0,
        "evictions": 0,
        "hit_count": 0,
        "miss_count": 2,  # one per shard
    }
    assert cache_stats(http, tagged)["memory_size_in_bytes"] > 0
    second = http.post(f"/{tagged}/_search", json=AGGS).json()
    assert without_took(second) == without_took(first)
    assert cache_stats(http, tagged)["hit_count"] == 2
    # The node's stats sum its shards' counters.
    node = next(iter(es.nodes.stats(metric="indices", index_metric="request_cache")["nodes"].values()))
    assert node["indices"]["request_cache"]["hit_count"] >= 2
    # A count is a size-0 request too.
    assert es.count(index=tagged)["count"] == 20
    assert es.count(index=tagged)["count"] == 20
    assert cache_stats(http, tagged)["hit_count"] == 4


def test_a_refresh_makes_the_next_request_a_miss(es: Elasticsearch, http: httpx.Client, tagged: str) -> None:
    http.post(f"/{tagged}/_search", json=AGGS)
    es.index(index=tagged, id="new", document={"tag": "t9", "n": 100})
    # Not refreshed: the snapshot is unchanged and so is the cached answer.
    before = http.post(f"/{tagged}/_search", json=AGGS).json()
    assert before["hits"]["total"]["value"] == 20
    assert cache_stats(http, tagged)["hit_count"] == 2
    es.indices.refresh(index=tagged)
    after = http.post(f"/{tagged}/_search", json=AGGS).json()
    assert after["hits"]["total"]["value"] == 21
    assert after["aggregations"]["top"]["value"] == 100
    assert cache_stats(http, tagged)["miss_count"] == 4


def test_what_is_cached(es: Elasticsearch, http: httpx.Client, tagged: str) -> None:
    def misses_after(body: dict[str, Any], params: dict[str, str] | None = None, times: int = 2) -> int:
        before = cache_stats(http, tagged)
        for _ in range(times):
            response = http.post(f"/{tagged}/_search", json=body, params=params)
            assert response.status_code == 200, response.text
        after = cache_stats(http, tagged)
        assert after["hit_count"] + after["miss_count"] - before["hit_count"] - before["miss_count"] in (
            0,
            2 * times,
        )
        return after["hit_count"] - before["hit_count"]

    hits = {"query": {"term": {"tag": "t1"}}}
    assert misses_after(hits) == 0  # size 10: not cached by default
    assert misses_after(hits, {"request_cache": "true"}) == 2  # cached whatever its size
    assert misses_after(AGGS, {"request_cache": "false"}) == 0
    assert misses_after({**AGGS, "profile": True}) == 0
    now = {"size": 0, "query": {"range": {"d": {"lte": "now"}}}}
    assert misses_after(now) == 0  # depends on the clock
    # The index setting is dynamic; `request_cache=true` overrides it.
    es.indices.put_settings(index=tagged, settings={"index.requests.cache.enable": False})
    assert misses_after({**AGGS, "size": 0, "query": {"term": {"tag": "t2"}}}) == 0
    assert misses_after({"size": 0, "query": {"term": {"tag": "t0"}}}, {"request_cache": "true"}) == 2
    es.indices.put_settings(index=tagged, settings={"index.requests.cache.enable": True})
    assert misses_after({"size": 0, "query": {"term": {"tag": "t2"}}}) == 2
    refused = http.post(f"/{tagged}/_search", params={"scroll": "1m", "request_cache": "true"}, json={})
    assert refused.status_code == 400


def test_the_cache_is_bounded_and_counts_evictions(
    http: httpx.Client, tagged: str, cluster_setting: Callable[[str, Any], None]
) -> None:
    http.post(f"/{tagged}/_search", json=AGGS)
    one_entry = cache_stats(http, tagged)["memory_size_in_bytes"]
    cluster_setting("indices.requests.cache.size", f"{one_entry + one_entry // 2}b")
    for tag in ("t0", "t1", "t2"):
        http.post(f"/{tagged}/_search", json={**AGGS, "query": {"term": {"tag": tag}}})
    stats = cache_stats(http, tagged)
    assert stats["evictions"] >= 2 * 2  # each entry pushed out counts on both shards
    assert stats["memory_size_in_bytes"] <= one_entry + one_entry // 2 + 200


def test_cached_answers_beside_writers_and_refreshes(
    es: Elasticsearch, http: httpx.Client, tagged: str
) -> None:
    """Readers repeat one size-0 request while a writer adds documents and refreshes: totals never
    go back (no answer of an older snapshot after a newer one was seen by that reader), and once
    the writer is done the answer is the exact total."""
    stop = threading.Event()
    errors: list[str] = []

    def writer() -> None:
        for i in range(60):
            es.index(index=tagged, id=f"w{i}", document={"tag": "w", "n": 1000 + i}, refresh=i % 5 == 0)
        es.indices.refresh(index=tagged)
        stop.set()

    def reader() -> None:
        with web.Client(base_url=str(http.base_url)) as own:
            last = 0
            while not stop.is_set():
                total = own.post(f"/{tagged}/_search", json=AGGS).json()["hits"]["total"]["value"]
                if total < last:
                    errors.append(f"{total} after {last}")
                last = total

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    final = http.post(f"/{tagged}/_search", json=AGGS).json()
    assert final["hits"]["total"]["value"] == 80
    assert final["aggregations"]["top"]["value"] == 1059
    assert cache_stats(http, tagged)["hit_count"] > 0
