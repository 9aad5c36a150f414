"""Collapsed walks whose keys were shown from one shard while another shard holds them after the
cursor (collapse_shards.py): those keys fill the second shard's first candidates, and must not
stop its later keys from coming, nor come again themselves.

The index: 2 shards; keys `k00`..`k29` each with a post on shard 0 at `n = i` and one on shard
1 at `n = 100 + i`; `late` on shard 1 alone at `n = 200`, `lone` on shard 0 alone at `n = 300`;
so walked by `n` ascending, the page after `k29` finds shard 1's thirty shown keys before `late`.
Through HTTP and the official client; tests/ray_backend/suite runs it on shard actors too.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from conftest import search_ok
from elasticsearch import Elasticsearch

from leafsearch.index.routing import default_routing_num_shards, shard_for

SHARDS = 2
MAPPINGS = {"properties": {"user": {"type": "keyword"}, "g": {"type": "long"}, "n": {"type": "long"}}}
KEYS = [f"k{i:02}" for i in range(30)]


def routing_to(shard: int) -> str:
    """A routing value that sends documents to `shard` of a `SHARDS`-shard index."""
    return next(
        value
        for value in (f"r{i}" for i in range(1000))
        if shard_for(value, SHARDS, default_routing_num_shards(SHARDS)) == shard
    )


def crowded(http: httpx.Client, new_index: Any) -> str:
    name = new_index(settings={"number_of_shards": SHARDS}, mappings=MAPPINGS)
    posts: list[tuple[str, int, dict[str, Any]]] = []
    for i, key in enumerate(KEYS):
        posts += [
            (f"a{i}", 0, {"user": key, "g": i, "n": i}),
            (f"b{i}", 1, {"user": key, "g": i, "n": 100 + i}),
        ]
    posts += [
        ("late", 1, {"user": "late", "g": 1000, "n": 200}),
        ("lone", 0, {"user": "lone", "g": 2000, "n": 300}),
    ]
    lines = []
    for doc_id, shard, source in posts:
        action = {"index": {"_index": name, "_id": doc_id, "routing": routing_to(shard)}}
        lines += [orjson.dumps(action), orjson.dumps(source)]
    response = http.post(
        "/_bulk?refresh=true",
        content=b"\n".join(lines) + b"\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and not response.json()["errors"], response.text
    return name


def walk(http: httpx.Client, target: str, body: dict[str, Any], size: int) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    for _ in range(100):
        request = {**body, "size": size}
        if hits:
            request["search_after"] = hits[-1]["sort"]
        page = search_ok(http, target, request)["hits"]["hits"]
        if not page:
            return hits
        hits += page
    raise AssertionError("the walk did not end")


@pytest.mark.parametrize("field", ["user", "g"])
@pytest.mark.parametrize("size", [1, 4, 13])
def test_keys_shown_from_one_shard_do_not_crowd_out_another_shards(
    http: httpx.Client, new_index: Any, field: str, size: int
) -> None:
    name = crowded(http, new_index)
    collapse = {"field": field}
    ascending = walk(http, name, {"sort": ["n"], "collapse": collapse}, size)
    assert [h["_id"] for h in ascending] == [f"a{i}" for i in range(30)] + ["late", "lone"]
    descending = walk(http, name, {"sort": [{"n": "desc"}], "collapse": collapse}, size)
    assert [h["_id"] for h in descending] == ["lone", "late"] + [f"b{i}" for i in range(29, -1, -1)]
    # by offset too: the same groups
    paged = search_ok(http, name, {"sort": ["n"], "collapse": collapse, "from": 29, "size": 2})["hits"][
        "hits"
    ]
    assert [h["_id"] for h in paged] == ["a29", "late"]


def test_a_pit_walk_with_inner_hits_of_both_shards(
    es: Elasticsearch, http: httpx.Client, new_index: Any
) -> None:
    name = crowded(http, new_index)
    pit = es.open_point_in_time(index=name, keep_alive="1m")["id"]
    try:
        hits: list[dict[str, Any]] = []
        while True:
            extra = {} if not hits else {"search_after": hits[-1]["sort"]}
            page = es.search(
                pit={"id": pit},
                size=3,
                sort=[{"n": "asc"}],
                collapse={"field": "user", "inner_hits": {"name": "all", "size": 5, "sort": [{"n": "desc"}]}},
                **extra,
            )["hits"]["hits"]
            if not page:
                break
            hits += page
    finally:
        es.close_point_in_time(id=pit)
    assert [h["fields"]["user"][0] for h in hits] == [*KEYS, "late", "lone"]
    for i, hit in enumerate(hits[:30]):
        inner = hit["inner_hits"]["all"]["hits"]
        assert inner["total"] == {"value": 2, "relation": "eq"}
        assert [h["_id"] for h in inner["hits"]] == [f"b{i}", f"a{i}"]
    assert [h["_id"] for h in hits[30]["inner_hits"]["all"]["hits"]["hits"]] == ["late"]


def test_the_rounds_reserve_what_they_ask_for(
    http: httpx.Client, new_index: Any, cluster_setting: Any
) -> None:
    """What a page's rounds bring to the coordinator is reserved on its request breaker before it
    is asked for: a page of 5,000 groups past a limit the plain page fits in is a 429, which
    holds nothing after it."""
    name = crowded(http, new_index)
    cluster_setting("indices.breaker.request.limit", "200kb")
    body = {"sort": ["n"], "size": 5000}
    assert search_ok(http, name, body)["hits"]["total"]["value"] == 62
    response = http.post(f"/{name}/_search", json={**body, "collapse": {"field": "user"}})
    assert response.status_code == 429, response.text
    assert response.json()["error"]["type"] == "circuit_breaking_exception"
    breaker = next(iter(http.get("/_nodes/stats/breaker").json()["nodes"].values()))["breakers"]["request"]
    assert breaker["estimated_size_in_bytes"] == 0
    cluster_setting("indices.breaker.request.limit", None)
    hits = search_ok(http, name, {**body, "collapse": {"field": "user"}})["hits"]["hits"]
    assert len(hits) == 32
