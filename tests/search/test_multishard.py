"""Several shards searched as one: the same documents in a 1-shard and a 5-shard index give the same
hits in the same order for every sort with a unique key, the same totals, counts and aggregations,
and ties break the same way on every request (shard index, then doc id).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from elasticsearch import Elasticsearch, helpers

N = 300
WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma"]
MAPPINGS = {
    "properties": {
        "k": {"type": "long"},
        "g": {"type": "keyword"},
        "v": {"type": "double"},
        "body": {"type": "text"},
        "ts": {"type": "date"},
    }
}


def _docs() -> list[dict[str, Any]]:
    rng = random.Random(7)
    docs = []
    for k in rng.sample(range(10 * N), N):
        doc: dict[str, Any] = {"k": k, "body": " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))}
        if rng.random() < 0.9:
            doc["g"] = f"g{rng.randint(0, 9)}"
        if rng.random() < 0.8:
            doc["v"] = rng.randint(0, 20) / 4
        doc["ts"] = f"2024-01-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z"
        docs.append(doc)
    return docs


@pytest.fixture(scope="module")
def pair(es: Elasticsearch, http: httpx.Client) -> Iterator[tuple[str, str]]:
    """(1-shard index, 5-shard index) holding the same documents."""
    stem = f"multishard-{uuid.uuid4().hex[:8]}"
    names = (f"{stem}-one", f"{stem}-five")
    docs = _docs()
    for name, shards in zip(names, (1, 5), strict=True):
        es.indices.create(index=name, settings={"number_of_shards": shards}, mappings=MAPPINGS)
        helpers.bulk(es, ({"_index": name, "_id": str(d["k"]), "_source": d} for d in docs), refresh=True)
    yield names
    for name in names:
        http.delete(f"/{name}")


SORTS = [
    [{"k": "asc"}],
    [{"k": "desc"}],
    [{"g": "asc"}, {"k": "desc"}],
    [{"v": {"order": "desc", "missing": "_first"}}, {"k": "asc"}],
    [{"g": {"order": "desc", "missing": "_first"}}, {"v": "asc"}, "k"],
    [{"ts": "desc"}, {"g": "asc"}, {"k": "asc"}],
]
QUERIES = [
    {"match_all": {}},
    {"range": {"k": {"gte": 500, "lt": 2500}}},
    {"term": {"g": "g3"}},
    {"match": {"body": "alpha omega"}},
    {"bool": {"must_not": {"exists": {"field": "v"}}}},
]


def _hits(response: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    return [(h["_id"], h["sort"]) for h in response["hits"]["hits"]]


@pytest.mark.parametrize("query", QUERIES, ids=str)
@pytest.mark.parametrize("sort", SORTS, ids=str)
def test_one_and_five_shards_agree(es: Elasticsearch, pair: tuple[str, str], sort, query) -> None:
    one, five = (es.search(index=name, query=query, sort=sort, size=N) for name in pair)
    assert one["_shards"]["total"] == 1 and five["_shards"]["total"] == 5
    assert five["_shards"]["successful"] == 5 and five["_shards"]["failed"] == 0
    assert five["hits"]["total"] == one["hits"]["total"]
    assert _hits(five) == _hits(one)
    assert len(_hits(one)) == one["hits"]["total"]["value"] > 0


@pytest.mark.parametrize("size", [1, 7, 50])
def test_pages_over_five_shards_join_to_the_one_shard_order(
    es: Elasticsearch, pair: tuple[str, str], size
) -> None:
    one, five = pair
    sort = [{"g": "asc"}, {"v": "desc"}, {"k": "asc"}]
    expected = [h["_id"] for h in es.search(index=one, sort=sort, size=N)["hits"]["hits"]]
    walked: list[str] = []
    for start in range(0, N, size):
        walked.extend(
            h["_id"] for h in es.search(index=five, sort=sort, from_=start, size=size)["hits"]["hits"]
        )
    assert walked == expected


def test_counts_and_aggregations_agree(es: Elasticsearch, pair: tuple[str, str]) -> None:
    aggs = {
        "groups": {"terms": {"field": "g", "size": 20}},
        "v": {"stats": {"field": "v"}},
        "distinct": {"cardinality": {"field": "g"}},
        "days": {"date_histogram": {"field": "ts", "calendar_interval": "week"}},
    }
    one, five = (es.search(index=name, size=0, aggs=aggs, query={"match": {"body": "beta"}}) for name in pair)
    assert five["aggregations"] == one["aggregations"]
    assert sum(b["doc_count"] for b in one["aggregations"]["groups"]["buckets"]) > 0
    for query in QUERIES:
        assert es.count(index=pair[1], query=query)["count"] == es.count(index=pair[0], query=query)["count"]


def test_ties_break_the_same_way_on_every_request(
    es: Elasticsearch, http: httpx.Client, pair: tuple[str, str]
) -> None:
    five = pair[1]
    sort = [{"g": "asc"}]  # about 30 documents share each value
    first = [h["_id"] for h in es.search(index=five, sort=sort, size=N)["hits"]["hits"]]
    for _ in range(3):
        assert [h["_id"] for h in es.search(index=five, sort=sort, size=N)["hits"]["hits"]] == first
    paged: list[str] = []
    for start in range(0, N, 13):
        paged.extend(h["_id"] for h in es.search(index=five, sort=sort, from_=start, size=13)["hits"]["hits"])
    assert paged == first
    # The order within ties is shard index, then doc id: what a PIT's implicit `_shard_doc` tiebreaker gives.
    pit = http.post(f"/{five}/_pit", params={"keep_alive": "1m"}).json()["id"]
    try:
        with_pit = http.post("/_search", json={"pit": {"id": pit}, "sort": sort, "size": N}).json()
        shard_docs = [h["sort"][1] for h in with_pit["hits"]["hits"]]
        assert [h["_id"] for h in with_pit["hits"]["hits"]] == first
        groups = [h["sort"][0] for h in with_pit["hits"]["hits"]]
        for i in range(1, len(groups)):
            if groups[i] == groups[i - 1]:
                assert shard_docs[i] > shard_docs[i - 1]
        assert len({sd >> 32 for sd in shard_docs}) == 5
    finally:
        http.request("DELETE", "/_pit", json={"id": pit})


def test_doc_order_over_shards(es: Elasticsearch, pair: tuple[str, str]) -> None:
    """`_doc` values are per-shard doc ids: equal ones across shards come in shard order every time."""
    five = pair[1]
    hits = es.search(index=five, sort=["_doc"], size=N)["hits"]["hits"]
    values = [h["sort"][0] for h in hits]
    assert values == sorted(values)
    assert values.count(0) == 5
    assert len({h["_id"] for h in hits}) == N
    assert [h["_id"] for h in es.search(index=five, sort=["_doc"], size=N)["hits"]["hits"]] == [
        h["_id"] for h in hits
    ]
