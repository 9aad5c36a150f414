"""`rank_feature` / `rank_features` fields and the `rank_feature` query over HTTP with the official
client: scores equal Lucene's FeatureField formulas computed here by brute force, bad values and
queries are Elasticsearch's 400s, and the features survive merges, restarts and busy writers."""

from __future__ import annotations

import math
import struct
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import orjson
import pytest
from conftest import running_server
from elasticsearch import BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from tests.concurrency import readers_beside_writers

MAPPING = {
    "properties": {
        "pagerank": {"type": "rank_feature"},
        "url_length": {"type": "rank_feature", "positive_score_impact": False},
        "topics": {"type": "rank_features"},
        "title": {"type": "text"},
    }
}


def lucene_value(v: float) -> float:
    """A feature as FeatureField keeps it: the float's top 16 bits (Java's arithmetic, by hand)."""
    bits = struct.unpack("<i", struct.pack("<f", v))[0] >> 15 << 15
    return struct.unpack("<f", struct.pack("<i", bits))[0]


def freq(v: float) -> int:
    return struct.unpack("<i", struct.pack("<f", v))[0] >> 15


def saturation(f: float, pivot: float) -> float:
    """Lucene's saturation, in Java float arithmetic: 1 - pivot / (f + pivot)."""
    return float(np.float32(1) - np.float32(pivot) / (np.float32(f) + np.float32(pivot)))


def values(n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(np.float32(x)) for x in rng.uniform(0.5, 500.0, size=n)]


def feature_index(es: Elasticsearch, new_index: Callable[..., str], n: int = 60) -> tuple[str, list[float]]:
    index = new_index(mappings=MAPPING)
    ranks = values(n, 1)
    docs = [
        {
            "_index": index,
            "_id": str(i),
            "pagerank": ranks[i],
            "url_length": 10 + i,
            "topics": {"politics": ranks[i] / 2, **({"sports": 3.0} if i % 3 == 0 else {})},
            "title": "news",
        }
        for i in range(n)
    ]
    bulk(es, docs, refresh=True)
    return index, ranks


def scores_by_id(found: dict) -> dict[str, float]:
    return {h["_id"]: h["_score"] for h in found["hits"]["hits"]}


def test_saturation_with_default_pivot_is_lucenes_geometric_mean(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index, ranks = feature_index(es, new_index)
    found = es.search(index=index, query={"rank_feature": {"field": "pagerank"}}, size=100)
    mean_freq = int(np.float32(sum(freq(np.float32(r)) for r in ranks) / len(ranks)))
    pivot = struct.unpack("<f", struct.pack("<i", mean_freq << 15))[0]
    expected = {str(i): saturation(lucene_value(r), pivot) for i, r in enumerate(ranks)}
    got = scores_by_id(found)
    assert got.keys() == expected.keys()
    for doc_id, score in got.items():
        assert score == pytest.approx(expected[doc_id], rel=1e-6)
    assert [h["_id"] for h in found["hits"]["hits"]][0] == str(int(np.argmax(ranks)))


@pytest.mark.parametrize(
    ("function", "formula"),
    [
        ({"saturation": {"pivot": 20}}, lambda f: f / (f + 20)),
        ({"log": {"scaling_factor": 4}}, lambda f: math.log(4 + f)),
        ({"sigmoid": {"pivot": 20, "exponent": 0.6}}, lambda f: f**0.6 / (f**0.6 + 20**0.6)),
        ({"linear": {}}, lambda f: f),
    ],
)
def test_functions_and_boost(es: Elasticsearch, new_index: Callable[..., str], function, formula) -> None:
    index, ranks = feature_index(es, new_index)
    found = es.search(
        index=index, query={"rank_feature": {"field": "pagerank", "boost": 2.5, **function}}, size=100
    )
    got = scores_by_id(found)
    assert len(got) == len(ranks)
    for i, r in enumerate(ranks):
        assert got[str(i)] == pytest.approx(2.5 * formula(lucene_value(r)), rel=1e-5)


def test_negative_impact_and_rank_features(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index, ranks = feature_index(es, new_index)
    shortest = es.search(index=index, query={"rank_feature": {"field": "url_length", "linear": {}}}, size=3)
    assert [h["_id"] for h in shortest["hits"]["hits"]] == ["0", "1", "2"]
    assert shortest["hits"]["hits"][0]["_score"] == pytest.approx(
        lucene_value(np.float32(1) / np.float32(10))
    )
    sports = es.search(
        index=index, query={"rank_feature": {"field": "topics.sports", "linear": {}}}, size=100
    )
    assert sorted(int(h["_id"]) for h in sports["hits"]["hits"]) == list(range(0, 60, 3))
    politics = es.search(
        index=index,
        query={
            "bool": {
                "must": {"match": {"title": "news"}},
                "should": {"rank_feature": {"field": "topics.politics", "linear": {}}},
            }
        },
        size=1,
    )
    assert politics["hits"]["hits"][0]["_id"] == str(int(np.argmax(ranks)))
    unmapped = es.search(index=index, query={"rank_feature": {"field": "topics.nothing"}})
    assert unmapped["hits"]["total"]["value"] == 0
    assert es.get(index=index, id="3")["_source"]["topics"] == {"politics": ranks[3] / 2, "sports": 3.0}


def test_mapping_and_field_caps(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=MAPPING)
    assert es.indices.get_mapping(index=index)[index]["mappings"]["properties"]["url_length"] == {
        "type": "rank_feature",
        "positive_score_impact": False,
    }
    caps = es.field_caps(index=index, fields=["pagerank", "topics"])["fields"]
    assert set(caps["pagerank"]) == {"rank_feature"}
    assert set(caps["topics"]) == {"rank_features"}
    with pytest.raises(BadRequestError) as e:
        es.indices.put_mapping(index=index, properties={"url_length": {"type": "rank_feature"}})
    assert "Cannot update parameter [positive_score_impact] from [false] to [true]" in str(e.value.info)


@pytest.mark.parametrize(
    ("document", "cause"),
    [
        ({"pagerank": -1}, "featureValue must be a positive normal float, got: -1.0 for feature pagerank"),
        ({"pagerank": 0}, "featureValue must be a positive normal float, got: 0.0"),
        (
            {"pagerank": [1, 2]},
            "[rank_feature] fields do not support indexing multiple values for the same field [pagerank]",
        ),
        ({"pagerank": "abc"}, 'For input string: "abc"'),
        ({"pagerank": True}, "Current token (VALUE_TRUE) not numeric"),
        (
            {"topics": 3},
            "[rank_features] fields must be json objects, expected a START_OBJECT but got: VALUE_NUMBER",
        ),
        (
            {"topics": {"a": -2}},
            "featureValue must be a positive normal float, got: -2.0 for feature a on field topics",
        ),
        ({"topics": {"a": [1]}}, "strictly positive float, but got unexpected token START_ARRAY"),
    ],
)
def test_bad_values_are_refused(es: Elasticsearch, new_index: Callable[..., str], document, cause) -> None:
    index = new_index(mappings=MAPPING)
    with pytest.raises(BadRequestError) as e:
        es.index(index=index, id="1", document=document, refresh=True)
    assert e.value.info["error"]["type"] == "document_parsing_exception"
    assert cause in str(e.value.info["error"]["caused_by"]["reason"])
    assert es.count(index=index)["count"] == 0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"term": {"pagerank": 3}}, "Queries on [rank_feature] fields are not supported"),
        (
            {"rank_feature": {"field": "title"}},
            "[rank_feature] query only works on [rank_feature] fields and features of [rank_features] "
            "fields, not [text]",
        ),
        (
            {"rank_feature": {"field": "url_length", "log": {"scaling_factor": 1}}},
            "Cannot use the [log] function with a field that has a negative score impact",
        ),
        (
            {"rank_feature": {"field": "pagerank", "log": {"scaling_factor": 1}, "linear": {}}},
            "Can only specify one of [log], [saturation], [sigmoid] and [linear]",
        ),
        ({"rank_feature": {"field": "pagerank", "sigmoid": {"pivot": 1}}}, "Required [exponent]"),
        ({"rank_feature": {"pivot": 1}}, "[feature] unknown field [pivot]"),
        ({"exists": {"field": "topics"}}, "[rank_features] fields do not support [exists] queries"),
    ],
)
def test_bad_queries_are_refused(es: Elasticsearch, new_index: Callable[..., str], query, message) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"pagerank": 3}, refresh=True)
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, query=query)
    assert message in str(e.value.info)


def test_sorting_or_aggregating_is_refused(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"pagerank": 3}, refresh=True)
    message = "[rank_feature] fields do not support sorting, scripting or aggregating"
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, sort=[{"pagerank": "desc"}])
    assert message in str(e.value.info)
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, aggs={"m": {"max": {"field": "pagerank"}}})
    assert message in str(e.value.info)


def test_features_survive_merges_deletes_and_a_restart(tmp_path: Path) -> None:
    """Twelve small segments merged by the merge policy, a delete among them; the scores (the
    default pivot counts every indexed value, as Lucene's term statistics do) stay; a server on
    the same data answers the same."""
    ranks = values(120, 5)
    data = tmp_path / "data"
    node = leafsearch.Node(data, background=False)
    admin.create_index(node, "feat", {"mappings": MAPPING})
    for part in range(12):
        lines = [
            orjson.dumps(x)
            for i in range(part * 10, part * 10 + 10)
            for x in ({"index": {"_id": str(i)}}, {"pagerank": ranks[i], "topics": {"t": ranks[i]}})
        ]
        node.bulk(b"\n".join(lines) + b"\n", index="feat", refresh="true")
    node.delete_doc("feat", "5")
    node.indices["feat"].refresh()
    shard = node.indices["feat"].shards[0]
    merged = False
    while shard.maybe_merge():
        merged = True
    assert merged, "the merge policy did not merge"
    node.indices["feat"].refresh()
    query = {"query": {"rank_feature": {"field": "topics.t", "saturation": {"pivot": 50}}}, "size": 200}
    expected = {str(i): saturation(lucene_value(r), 50) for i, r in enumerate(ranks) if i != 5}
    before = {h["_id"]: h["_score"] for h in search(node, "feat", query)["hits"]["hits"]}
    assert before.keys() == expected.keys()
    assert all(before[k] == pytest.approx(v, rel=1e-6) for k, v in expected.items())
    node.close()
    with running_server(data) as (url, _):
        es = Elasticsearch(url)
        assert scores_by_id(es.search(index="feat", **query)) == before


def test_concurrent_writers_and_feature_readers(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """Writers index features in small refreshed batches (merged as they pile up) while readers
    search a PIT: every answer holds exactly the documents of the snapshot, each scored by its
    own value."""
    index = new_index(mappings=MAPPING)
    ranks = values(400, 9)
    query = {"rank_feature": {"field": "pagerank", "linear": {}}}

    def write(part: int) -> None:
        for start in range(part * 100, part * 100 + 100, 10):
            bulk(
                es,
                [{"_index": index, "_id": str(i), "pagerank": ranks[i]} for i in range(start, start + 10)],
                refresh=True,
            )

    def read() -> None:
        pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
        try:
            found = es.search(query=query, pit={"id": pit}, size=1000)
            held = es.search(pit={"id": pit}, size=1000, _source=False)
        finally:
            es.close_point_in_time(id=pit)
        assert {h["_id"] for h in found["hits"]["hits"]} == {h["_id"] for h in held["hits"]["hits"]}
        for h in found["hits"]["hits"]:
            assert h["_score"] == pytest.approx(lucene_value(ranks[int(h["_id"])]), rel=1e-6)

    readers_beside_writers([partial(write, part) for part in range(4)], read)
    assert es.count(index=index, query=query)["count"] == 400


def test_a_pit_walk_of_feature_scores_is_exactly_once_with_writers_beside(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    """Pages of a `rank_feature` query on a PIT, `search_after` its scores, while a writer adds
    documents: the pages joined are the PIT's matches, each once, in score order."""
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPING)
    ranks = values(300, 13)
    bulk(es, [{"_index": index, "_id": str(i), "pagerank": ranks[i]} for i in range(200)], refresh=True)
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    stop = threading.Event()

    def write() -> None:
        for i in range(200, 300):
            if stop.is_set():
                return
            es.index(index=index, id=str(i), document={"pagerank": ranks[i]}, refresh=True)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        seen: list[str] = []
        after = None
        while True:
            page = es.search(
                pit={"id": pit},
                query={"rank_feature": {"field": "pagerank", "linear": {}}},
                sort=["_score", "_shard_doc"],
                size=17,
                **({"search_after": after} if after else {}),
            )["hits"]["hits"]
            if not page:
                break
            seen += [h["_id"] for h in page]
            after = page[-1]["sort"]
    finally:
        stop.set()
        writer.join()
        es.close_point_in_time(id=pit)
    assert sorted(seen, key=int) == [str(i) for i in range(200)]
    assert seen == sorted(seen, key=lambda i: (-lucene_value(ranks[int(i)]), seen.index(i)))
