"""Which shards a search reads, and in what order, through the real HTTP API.

- `?routing=` on `_search` and `_count` reads only the shards its values route to (every
  document of those shards, whatever routed it there), as Elasticsearch's OperationRouting does.
- Shard requests are ordered as Elasticsearch's ShardId orders them (shard number, then index
  name): that order is the high half of `_shard_doc` and breaks ties between shards.
- `dfs_query_then_fetch` scores with the statistics of every shard, so a document scores the same
  however the index is split; `query_then_fetch` scores with the shard's own.

Where documents land is worked out with `leafsearch.index.routing`, whose hash and placement are
checked against Elasticsearch's own test vectors in test_node_inprocess.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from elasticsearch import Elasticsearch, helpers

from leafsearch.index.routing import default_routing_num_shards, shard_for

MAPPINGS = {"properties": {"g": {"type": "keyword"}, "n": {"type": "integer"}, "body": {"type": "text"}}}


def shard_of(value: str, shards: int) -> int:
    return shard_for(value, shards, default_routing_num_shards(shards))


def load(es: Elasticsearch, index: str, docs: list[dict[str, Any]]) -> None:
    """Bulk-index `{"_id", "_source", "_routing"?}` actions, then refresh."""
    ok, errors = helpers.bulk(es, ({"_index": index, **d} for d in docs), refresh=True)
    assert ok == len(docs) and not errors


def ids(response: Any) -> set[str]:
    return {hit["_id"] for hit in response["hits"]["hits"]}


# ---------------------------------------------------------------------------------------------
# ?routing= restricts the shards


@pytest.fixture
def routed(es: Elasticsearch, new_index: Callable[..., str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A 4-shard index: three documents for each routing value of `values` and 40 routed by id.

    `values` holds a routing value per shard ("A" on one, "B" on another, ...) and "A2", another
    value on A's shard; `shard` maps each document id to the shard it is stored on.
    """
    index = new_index(settings={"number_of_shards": 4}, mappings=MAPPINGS)
    candidates = [f"r{i}" for i in range(200)]
    by_shard: dict[int, list[str]] = {}
    for value in candidates:
        by_shard.setdefault(shard_of(value, 4), []).append(value)
    assert sorted(by_shard) == [0, 1, 2, 3]
    values = {name: by_shard[s][0] for name, s in zip("ABCD", (2, 0, 3, 1), strict=True)}
    values["A2"] = by_shard[2][1]
    docs: list[dict[str, Any]] = []
    shard: dict[str, int] = {}
    for name, value in values.items():
        for i in range(3):
            doc_id = f"{name}-{i}"
            docs.append({"_id": doc_id, "_routing": value, "_source": {"g": name, "n": i}})
            shard[doc_id] = shard_of(value, 4)
    for i in range(40):
        docs.append({"_id": f"d{i}", "_source": {"g": "plain", "n": i}})
        shard[f"d{i}"] = shard_of(f"d{i}", 4)
    assert {shard[f"d{i}"] for i in range(40)} == {0, 1, 2, 3}
    load(es, index, docs)
    yield index, {"values": values, "shard": shard}


def on_shards(shard: dict[str, int], shards: set[int]) -> set[str]:
    return {doc_id for doc_id, s in shard.items() if s in shards}


def test_routing_restricts_search_and_count_to_its_shard(
    es: Elasticsearch, routed: tuple[str, dict[str, Any]]
) -> None:
    index, layout = routed
    values, shard = layout["values"], layout["shard"]
    assert es.count(index=index)["count"] == len(shard)
    for name, number in (("A", 2), ("B", 0), ("C", 3), ("D", 1)):
        expected = on_shards(shard, {number})
        response = es.search(index=index, routing=values[name], size=100)
        # Every document of the shard: the value's own, another value's on the same shard, and
        # those routed there by their id; nothing from the other shards.
        assert ids(response) == expected
        assert {f"{name}-0", f"{name}-1", f"{name}-2"} <= expected
        assert response["_shards"] == {"total": 1, "successful": 1, "skipped": 0, "failed": 0}
        assert response["hits"]["total"] == {"value": len(expected), "relation": "eq"}
        counted = es.count(index=index, routing=values[name])
        assert counted["count"] == len(expected)
        assert counted["_shards"]["total"] == 1
    a_shard = on_shards(shard, {2})
    assert {"A2-0", "A2-1", "A2-2"} <= a_shard
    routed_a2 = es.search(index=index, routing=values["A2"], query={"term": {"g": "A"}}, size=100)
    assert ids(routed_a2) == {"A-0", "A-1", "A-2"}  # a query still filters the shard's documents


def test_a_comma_list_of_routing_values_reads_the_union_of_their_shards(
    es: Elasticsearch, routed: tuple[str, dict[str, Any]]
) -> None:
    index, layout = routed
    values, shard = layout["values"], layout["shard"]
    both = f"{values['A']},{values['B']}"
    response = es.search(index=index, routing=both, size=100)
    assert ids(response) == on_shards(shard, {2, 0})
    assert response["_shards"]["total"] == 2
    assert es.count(index=index, routing=both)["count"] == len(on_shards(shard, {2, 0}))
    # Two values on one shard read it once.
    same = es.search(index=index, routing=f"{values['A']},{values['A2']}", size=100)
    assert ids(same) == on_shards(shard, {2}) and same["_shards"]["total"] == 1
    counted = es.count(index=index, routing=f"{values['A']},{values['A2']}")
    assert counted == {
        "count": len(on_shards(shard, {2})),
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
    }


# ---------------------------------------------------------------------------------------------
# shard request order: shard number first, then index name


@pytest.fixture
def two_indices(
    es: Elasticsearch, new_index: Callable[..., str]
) -> Iterator[tuple[str, str, dict[str, int]]]:
    """Two 2-shard indices ("-a" sorts before "-b"), 20 documents each, all with `g: same`."""
    first = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS, suffix="-a")
    second = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS, suffix="-b")
    shard: dict[str, int] = {}
    for index, prefix in ((first, "a"), (second, "b")):
        docs = [{"_id": f"{prefix}{i}", "_source": {"g": "same", "n": i}} for i in range(20)]
        load(es, index, docs)
        shard.update({d["_id"]: shard_of(d["_id"], 2) for d in docs})
    assert set(shard.values()) == {0, 1}
    yield first, second, shard


def request_order(first: str, second: str) -> list[tuple[int, str]]:
    return [(0, first), (0, second), (1, first), (1, second)]


def test_shard_doc_follows_shard_number_then_index_name(
    es: Elasticsearch, two_indices: tuple[str, str, dict[str, int]]
) -> None:
    first, second, shard = two_indices
    order = request_order(first, second)
    # The expression names the indices in the other order: the request order does not follow it.
    pit = es.open_point_in_time(index=f"{second},{first}", keep_alive="1m")["id"]
    try:
        hits = es.search(pit={"id": pit}, sort=["_shard_doc"], size=100)["hits"]["hits"]
    finally:
        es.close_point_in_time(id=pit)
    assert len(hits) == 40
    groups = [(shard[h["_id"]], h["_index"]) for h in hits]
    assert groups == sorted(groups, key=order.index)  # shard 0 of both indices before shard 1 of either
    for hit, group in zip(hits, groups, strict=True):
        assert hit["sort"][0] >> 32 == order.index(group)
    values = [h["sort"][0] for h in hits]
    assert values == sorted(values) and len(set(values)) == 40


def test_ties_break_in_shard_request_order(
    es: Elasticsearch, two_indices: tuple[str, str, dict[str, int]]
) -> None:
    first, second, shard = two_indices
    order = request_order(first, second)
    pit = es.open_point_in_time(index=f"{second},{first}", keep_alive="1m")["id"]
    try:
        tied = es.search(pit={"id": pit}, sort=[{"g": "asc"}], size=100)["hits"]["hits"]
        by_shard_doc = es.search(pit={"id": pit}, sort=["_shard_doc"], size=100)["hits"]["hits"]
    finally:
        es.close_point_in_time(id=pit)
    # The PIT's implicit `_shard_doc` tiebreaker: equal sort values come out in `_shard_doc` order.
    assert [h["_id"] for h in tied] == [h["_id"] for h in by_shard_doc]
    assert [h["sort"] for h in tied] == [["same", s["sort"][0]] for s in by_shard_doc]
    # Without a PIT the coordinator merges ties by shard request order, then doc, the same way.
    plain = es.search(index=f"{second},{first}", sort=[{"g": "asc"}], size=100)["hits"]["hits"]
    assert [h["_id"] for h in plain] == [h["_id"] for h in by_shard_doc]
    groups = [(shard[h["_id"]], h["_index"]) for h in plain]
    assert groups == sorted(groups, key=order.index)


# ---------------------------------------------------------------------------------------------
# dfs_query_then_fetch: statistics of every shard


WORDS = ["apple", "berry", "cherry", "date", "elder", "fig", "grape"]


def _bodies() -> dict[str, str]:
    """Documents whose terms are spread unevenly, so each shard's statistics differ from the whole's."""
    bodies = {}
    for i in range(36):
        words = [WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 5)]
        if i % 3 == 0:
            words.append("apple")
        bodies[f"doc{i}"] = " ".join(words)
    return bodies


@pytest.fixture
def split_two_ways(es: Elasticsearch, new_index: Callable[..., str]) -> tuple[str, str]:
    """The same documents in a 1-shard and a 3-shard index."""
    single = new_index(settings={"number_of_shards": 1}, mappings=MAPPINGS, suffix="-one")
    sharded = new_index(settings={"number_of_shards": 3}, mappings=MAPPINGS, suffix="-three")
    for index in (single, sharded):
        load(es, index, [{"_id": k, "_source": {"body": v}} for k, v in _bodies().items()])
    return single, sharded


def scores(es: Elasticsearch, index: str, search_type: str) -> dict[str, float]:
    response = es.search(
        index=index, query={"match": {"body": "apple grape"}}, size=100, search_type=search_type
    )
    return {h["_id"]: h["_score"] for h in response["hits"]["hits"]}


def test_dfs_scores_do_not_depend_on_the_number_of_shards(
    es: Elasticsearch, split_two_ways: tuple[str, str]
) -> None:
    single, sharded = split_two_ways
    whole = scores(es, single, "query_then_fetch")
    assert len(whole) > 10
    # One shard holds every statistic: both search types score alike there.
    assert scores(es, single, "dfs_query_then_fetch") == whole
    assert scores(es, sharded, "dfs_query_then_fetch") == whole
    per_shard = scores(es, sharded, "query_then_fetch")
    assert per_shard.keys() == whole.keys()
    differ = [d for d in whole if per_shard[d] != pytest.approx(whole[d], rel=1e-4)]
    assert len(differ) > len(whole) // 2, (per_shard, whole)
