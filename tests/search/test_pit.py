"""Point in time through the official client (SPEC 3.1 PIT lifecycle, 4.1 r3-r7 and r12, 4.2 r5,
4.3, 4.4): opening and closing, the frozen snapshot, retention, the implicit `_shard_doc`
tiebreaker, sliced PITs, and the refusals Elasticsearch gives.

Every expectation is Elasticsearch's: statuses, error types and messages are the ones its
`SearchRequest.validate`, `SearchService` and `SliceBuilder` produce.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from conftest import ClockedNode, error_of
from elasticsearch import BadRequestError, Elasticsearch, NotFoundError, helpers
from elasticsearch_dsl import Search

MAPPINGS = {"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}, "grp": {"type": "keyword"}}}
N_DOCS = 40


def index_docs(es: Elasticsearch, index: str, docs: dict[str, dict[str, Any]], **bulk: Any) -> None:
    actions = ({"_index": index, "_id": i, "_source": src} for i, src in docs.items())
    helpers.bulk(es, actions, refresh=True, **bulk)


def corpus_docs(n: int = N_DOCS) -> dict[str, dict[str, Any]]:
    return {str(i): {"n": i % 7, "k": f"k{i:03d}", "grp": "even" if i % 2 == 0 else "odd"} for i in range(n)}


@pytest.fixture
def corpus(es: Elasticsearch, new_index: Callable[..., str]) -> str:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS)
    index_docs(es, index, corpus_docs())
    return index


@pytest.fixture
def pit(es: Elasticsearch, corpus: str) -> Iterator[str]:
    pit_id = es.open_point_in_time(index=corpus, keep_alive="5m")["id"]
    yield pit_id
    es.options(ignore_status=404).close_point_in_time(id=pit_id)


def walk(es: Elasticsearch, pit_id: str, sort: list[Any], size: int, **body: Any) -> list[dict[str, Any]]:
    """Every hit of a PIT, page by page with `search_after` (the previous page's last sort values)."""
    hits: list[dict[str, Any]] = []
    after = None
    for _ in range(10_000):
        extra = {"search_after": after} if after is not None else {}
        page = es.search(pit={"id": pit_id}, sort=sort, size=size, **extra, **body)
        assert page["pit_id"] == pit_id
        if not page["hits"]["hits"]:
            return hits
        hits.extend(page["hits"]["hits"])
        after = page["hits"]["hits"][-1]["sort"]
    raise AssertionError("the walk did not end")


def ids(hits: list[dict[str, Any]]) -> list[str]:
    return [h["_id"] for h in hits]


def root_cause(error: Any) -> dict[str, Any]:
    return error.body["error"]["root_cause"][0]


def open_contexts(es: Elasticsearch) -> int:
    stats = es.nodes.stats(metric="indices", index_metric="search")
    return sum(node["indices"]["search"]["open_contexts"] for node in stats["nodes"].values())


# ---------------------------------------------------------------------------------------------
# open and close


def test_open_returns_an_opaque_url_safe_id(es: Elasticsearch, corpus: str) -> None:
    opened = es.open_point_in_time(index=corpus, keep_alive="1m")
    assert re.fullmatch(r"[A-Za-z0-9_\-=]+", opened["id"])
    assert opened["_shards"] == {"total": 2, "successful": 2, "skipped": 0, "failed": 0}
    closed = es.close_point_in_time(id=opened["id"])
    assert closed.body == {"succeeded": True, "num_freed": 1}


def test_comma_lists_wildcards_and_the_index_parameter_form(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    first = new_index(mappings=MAPPINGS, suffix="-a")
    second = new_index(mappings=MAPPINGS, suffix="-b")
    index_docs(es, first, {"a1": {"n": 1}, "a2": {"n": 2}})
    index_docs(es, second, {"b1": {"n": 3}})
    stem = first[: -len("-a")]
    for expression in (f"{first},{second}", f"{stem}-*"):
        pit_id = es.open_point_in_time(index=expression, keep_alive="1m")["id"]
        hits = es.search(pit={"id": pit_id}, sort=["n"])["hits"]["hits"]
        assert ids(hits) == ["a1", "a2", "b1"]
        es.close_point_in_time(id=pit_id)
    response = http.post("/_pit", params={"index": first, "keep_alive": "1m"})
    assert response.status_code == 200, response.text
    pit_id = response.json()["id"]
    assert es.search(pit={"id": pit_id})["hits"]["total"]["value"] == 2
    es.close_point_in_time(id=pit_id)


def test_keep_alive_is_required(http: httpx.Client, corpus: str) -> None:
    response = http.post(f"/{corpus}/_pit")
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "action_request_validation_exception"
    assert error["reason"] == "Validation Failed: 1: [keep_alive] is not specified;"


def test_keep_alive_over_the_dynamic_maximum_is_refused(es: Elasticsearch, corpus: str) -> None:
    with pytest.raises(BadRequestError) as info:
        es.open_point_in_time(index=corpus, keep_alive="2d")
    assert root_cause(info.value)["type"] == "illegal_argument_exception"
    assert root_cause(info.value)["reason"] == (
        "Keep alive for request (2d) is too large. It must be less than (1d). "
        "This limit can be set by changing the [search.max_keep_alive] cluster level setting."
    )
    with pytest.raises(BadRequestError) as info:
        es.open_point_in_time(index=corpus, keep_alive="25h")  # TimeValue prints 1.04d as 1d
    assert root_cause(info.value)["reason"].startswith(
        "Keep alive for request (1d) is too large. It must be less than (1d)."
    )
    es.cluster.put_settings(persistent={"search.max_keep_alive": "10m"})
    try:
        with pytest.raises(BadRequestError) as info:
            es.open_point_in_time(index=corpus, keep_alive="1h")
        assert (
            "Keep alive for request (1h) is too large. It must be less than (10m)."
            in root_cause(info.value)["reason"]
        )
        pit_id = es.open_point_in_time(index=corpus, keep_alive="10m")["id"]
        # The same limit applies to the keep-alive a PIT search asks for.
        with pytest.raises(BadRequestError) as info:
            es.search(pit={"id": pit_id, "keep_alive": "11m"})
        assert root_cause(info.value)["reason"].startswith("Keep alive for request (11m) is too large.")
        es.close_point_in_time(id=pit_id)
    finally:
        es.cluster.put_settings(persistent={"search.max_keep_alive": None})


def test_closing_twice_finds_nothing_the_second_time(es: Elasticsearch, corpus: str) -> None:
    pit_id = es.open_point_in_time(index=corpus, keep_alive="1m")["id"]
    assert es.close_point_in_time(id=pit_id).body == {"succeeded": True, "num_freed": 1}
    with pytest.raises(NotFoundError) as info:
        es.close_point_in_time(id=pit_id)
    assert info.value.body == {"succeeded": True, "num_freed": 0}


def test_open_pits_count_in_node_stats(es: Elasticsearch, corpus: str) -> None:
    before = open_contexts(es)
    first = es.open_point_in_time(index=corpus, keep_alive="1m")["id"]
    second = es.open_point_in_time(index=corpus, keep_alive="1m")["id"]
    assert open_contexts(es) == before + 2
    es.close_point_in_time(id=first)
    assert open_contexts(es) == before + 1
    es.close_point_in_time(id=second)
    assert open_contexts(es) == before


# ---------------------------------------------------------------------------------------------
# searching a PIT


def test_every_response_carries_the_id_that_opened_the_pit(es: Elasticsearch, pit: str) -> None:
    for body in ({}, {"sort": ["n"]}, {"size": 0, "aggs": {"g": {"terms": {"field": "grp"}}}}):
        response = es.search(pit={"id": pit, "keep_alive": "1m"}, **body)
        assert response["pit_id"] == pit
    assert len(walk(es, pit, ["n"], 7)) == N_DOCS


def test_an_index_in_the_path_is_refused_with_the_other_pit_refusals(
    es: Elasticsearch, http: httpx.Client, corpus: str, pit: str
) -> None:
    with pytest.raises(BadRequestError) as info:
        es.search(index=corpus, pit={"id": pit})
    assert info.value.body["error"]["type"] == "action_request_validation_exception"
    assert info.value.body["error"]["reason"] == (
        "Validation Failed: 1: [indices] cannot be used with point in time. "
        "Do not specify any index with point in time.;"
    )
    response = http.post(f"/{corpus}/_search", params={"routing": "x"}, json={"pit": {"id": pit}})
    assert response.status_code == 400
    assert error_of(response)["reason"] == (
        "Validation Failed: 1: [indices] cannot be used with point in time. "
        "Do not specify any index with point in time.;2: [routing] cannot be used with point in time;"
    )


def test_the_pit_is_a_frozen_snapshot(es: Elasticsearch, corpus: str, pit: str) -> None:
    before = walk(es, pit, ["n", "k"], 6)
    assert len(before) == N_DOCS
    es.index(index=corpus, id="new", document={"n": 0, "k": "k-new"})
    es.index(index=corpus, id="3", document={"n": 99, "k": "changed"})
    es.delete(index=corpus, id="4")
    helpers.bulk(es, ({"_op_type": "delete", "_index": corpus, "_id": str(i)} for i in range(20, 30)))
    for i in range(12):  # many small segments, which the node merges in the background
        es.index(index=corpus, id=f"seg{i}", document={"n": i}, refresh=True)
    es.indices.refresh(index=corpus)
    assert es.count(index=corpus)["count"] == N_DOCS + 1 + 12 - 11
    after = walk(es, pit, ["n", "k"], 6)
    assert [(h["_id"], h["_source"], h["sort"]) for h in after] == [
        (h["_id"], h["_source"], h["sort"]) for h in before
    ]


def test_keep_alive_keeps_the_larger_retention_and_expiry_is_404(clocked: ClockedNode) -> None:
    http, clock = clocked.http, clocked.clock
    assert http.put("/corpus", json={"mappings": MAPPINGS}).status_code == 200
    assert http.put("/corpus/_doc/1", params={"refresh": "true"}, json={"n": 1}).status_code == 201
    short, extended = (http.post("/corpus/_pit", params={"keep_alive": "1s"}).json()["id"] for _ in range(2))

    def search(pit: dict[str, str]) -> httpx.Response:
        return http.post("/_search", json={"pit": pit, "size": 0})

    assert search({"id": extended, "keep_alive": "1m"}).status_code == 200
    # A smaller keep-alive later does not shorten the retention: the larger one is kept.
    assert search({"id": extended, "keep_alive": "1s"}).status_code == 200
    clock.advance(30.0)
    assert search({"id": extended}).json()["hits"]["total"]["value"] == 1
    expired = search({"id": short})
    assert expired.status_code == expired.json()["status"] == 404
    error = expired.json()["error"]
    assert error["type"] == "search_phase_execution_exception"
    assert error["root_cause"][0]["type"] == "search_context_missing_exception"
    assert "expired" in error["root_cause"][0]["reason"]
    assert http.request("DELETE", "/_pit", json={"id": extended}).json()["num_freed"] == 1


def test_closed_and_unknown_pits_are_404_saying_why(es: Elasticsearch, corpus: str) -> None:
    pit_id = es.open_point_in_time(index=corpus, keep_alive="1m")["id"]
    es.close_point_in_time(id=pit_id)
    with pytest.raises(NotFoundError) as info:
        es.search(pit={"id": pit_id})
    assert root_cause(info.value)["type"] == "search_context_missing_exception"
    assert "expired" not in root_cause(info.value)["reason"]
    with pytest.raises(NotFoundError) as info:
        es.search(pit={"id": "bm90LWEtcGl0"})
    assert root_cause(info.value)["type"] == "search_context_missing_exception"
    assert "never" in root_cause(info.value)["reason"] or "not opened" in root_cause(info.value)["reason"]


# ---------------------------------------------------------------------------------------------
# the implicit tiebreaker


def test_a_sorted_pit_search_gets_an_ascending_shard_doc_tiebreaker(es: Elasticsearch, pit: str) -> None:
    hits = es.search(pit={"id": pit}, sort=[{"grp": "asc"}], size=N_DOCS)["hits"]["hits"]
    assert all(len(h["sort"]) == 2 for h in hits)
    for group in ("even", "odd"):
        tiebreakers = [h["sort"][1] for h in hits if h["sort"][0] == group]
        assert tiebreakers == sorted(tiebreakers) and len(set(tiebreakers)) == len(tiebreakers)
    # No sort: relevance order, and no sort values at all.
    assert "sort" not in es.search(pit={"id": pit})["hits"]["hits"][0]


def test_when_the_tiebreaker_is_not_added(es: Elasticsearch, pit: str) -> None:
    explicit = es.search(pit={"id": pit}, sort=[{"n": "asc"}, {"_shard_doc": "desc"}], size=N_DOCS)
    assert all(len(h["sort"]) == 2 for h in explicit["hits"]["hits"])
    # A cursor with exactly one value per given sort: Elasticsearch adds no tiebreaker.
    old_cursor = es.search(pit={"id": pit}, sort=[{"n": "asc"}], search_after=[3], size=N_DOCS)
    hits = old_cursor["hits"]["hits"]
    assert all(len(h["sort"]) == 1 for h in hits)
    assert sorted(h["sort"][0] for h in hits) == [n for n in sorted(i % 7 for i in range(N_DOCS)) if n > 3]


def test_explicit_shard_doc_in_either_order(es: Elasticsearch, pit: str) -> None:
    ascending = walk(es, pit, ["_shard_doc"], 9)
    descending = walk(es, pit, [{"_shard_doc": "desc"}], 9)
    assert len(ascending) == N_DOCS and set(ids(ascending)) == {str(i) for i in range(N_DOCS)}
    assert ids(descending) == ids(ascending)[::-1]
    values = [h["sort"][0] for h in ascending]
    assert values == sorted(values)


def test_shard_doc_needs_a_pit(es: Elasticsearch, corpus: str) -> None:
    with pytest.raises(BadRequestError) as info:
        es.search(index=corpus, sort=["_shard_doc"])
    assert info.value.body["error"]["type"] == "action_request_validation_exception"
    assert info.value.body["error"]["reason"] == (
        "Validation Failed: 1: [_shard_doc] sort field cannot be used without [point in time];"
    )


def test_shard_doc_is_the_shard_index_and_the_doc_within_its_snapshot(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    first = new_index(mappings=MAPPINGS, suffix="-a")
    second = new_index(mappings=MAPPINGS, suffix="-b")
    index_docs(es, first, {f"a{i}": {"n": i} for i in range(5)})
    index_docs(es, second, {f"b{i}": {"n": i} for i in range(3)})
    pit_id = es.open_point_in_time(index=f"{first},{second}", keep_alive="1m")["id"]
    hits = walk(es, pit_id, ["_shard_doc"], 3)
    es.close_point_in_time(id=pit_id)
    by_index: dict[str, list[int]] = {first: [], second: []}
    for hit in hits:
        value = hit["sort"][0]
        assert value >> 32 == (0 if hit["_index"] == first else 1)
        by_index[hit["_index"]].append(value & 0xFFFFFFFF)
    assert by_index == {first: [0, 1, 2, 3, 4], second: [0, 1, 2]}


# ---------------------------------------------------------------------------------------------
# sliced PIT, counting, clients


def test_slices_partition_the_walk(es: Elasticsearch, pit: str) -> None:
    everything = ids(walk(es, pit, ["_shard_doc"], 8))
    for slices in (2, 3, 5):
        parts = [ids(walk(es, pit, ["_shard_doc"], 4, slice={"id": i, "max": slices})) for i in range(slices)]
        assert sorted(sum(parts, [])) == sorted(everything)
        assert len(set(sum(parts, []))) == N_DOCS
        # Contiguous ranges of the snapshot: in `_shard_doc` order the slices follow one another.
        assert sum(parts, []) == everything
    by_field = [ids(walk(es, pit, ["n", "k"], 5, slice={"id": i, "max": 3, "field": "n"})) for i in range(3)]
    assert sorted(sum(by_field, [])) == sorted(everything)


def test_too_many_slices_are_refused(es: Elasticsearch, corpus: str) -> None:
    es.indices.put_settings(index=corpus, settings={"index.max_slices_per_scroll": 3})
    pit_id = es.open_point_in_time(index=corpus, keep_alive="1m")["id"]
    try:
        assert es.search(pit={"id": pit_id}, slice={"id": 0, "max": 3}, size=0)["_shards"]["failed"] == 0
        with pytest.raises(BadRequestError) as info:
            es.search(pit={"id": pit_id}, slice={"id": 0, "max": 4})
        assert info.value.body["error"]["type"] == "search_phase_execution_exception"
        assert root_cause(info.value)["reason"] == (
            "The number of slices [4] is too large. It must be less than [3]. This limit can be set by "
            "changing the [index.max_slices_per_scroll] index level setting."
        )
    finally:
        es.close_point_in_time(id=pit_id)


def test_slices_come_out_even_when_routing_skews_the_shards(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 3}, mappings=MAPPINGS)
    docs = ({"_index": index, "_id": str(i), "_routing": "hot", "_source": {"n": i}} for i in range(950))
    helpers.bulk(es, docs, refresh=True)
    index_docs(es, index, {f"c{i}": {"n": i} for i in range(50)})
    pit_id = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    try:
        sizes = [
            es.search(pit={"id": pit_id}, slice={"id": i, "max": 4}, size=0, track_total_hits=True)["hits"][
                "total"
            ]["value"]
            for i in range(4)
        ]
    finally:
        es.close_point_in_time(id=pit_id)
    assert sum(sizes) == 1000
    assert all(abs(size - 250) <= 2.5 for size in sizes), sizes


def test_track_total_hits_false_walk_equals_the_counted_walk(es: Elasticsearch, pit: str) -> None:
    fast = walk(es, pit, ["_shard_doc"], 7, track_total_hits=False)
    counted = walk(es, pit, ["_shard_doc"], 7, track_total_hits=True)
    assert [(h["_id"], h["sort"]) for h in fast] == [(h["_id"], h["sort"]) for h in counted]
    page = es.search(pit={"id": pit}, sort=["_shard_doc"], track_total_hits=False, size=3)
    assert "total" not in page["hits"] and page["hits"]["max_score"] is None
    backwards = walk(es, pit, [{"_shard_doc": "desc"}], 7, track_total_hits=False)
    assert ids(backwards) == ids(fast)[::-1]
    sliced = [
        ids(walk(es, pit, ["_shard_doc"], 4, track_total_hits=False, slice={"id": i, "max": 3}))
        for i in range(3)
    ]
    assert sum(sliced, []) == ids(fast)
    offset = es.search(pit={"id": pit}, sort=["_shard_doc"], track_total_hits=False, from_=5, size=4)
    assert ids(offset["hits"]["hits"]) == ids(fast)[5:9]
    for counted in (False, True):  # a null cursor sorts past every document, as a missing value
        past = es.search(pit={"id": pit}, sort=["_shard_doc"], track_total_hits=counted, search_after=[None])
        assert past["hits"]["hits"] == []


def test_dsl_iterate_walks_the_whole_index_and_closes_its_pit(es: Elasticsearch, corpus: str) -> None:
    before = open_contexts(es)
    seen = [hit.meta.id for hit in Search(using=es, index=corpus).extra(size=6).iterate(keep_alive="1m")]
    assert sorted(seen) == sorted(str(i) for i in range(N_DOCS))
    assert len(seen) == len(set(seen))
    assert open_contexts(es) == before
