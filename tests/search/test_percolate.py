"""`percolator` fields and the `percolate` query over HTTP with the official client: matches equal
a brute-force evaluation of the stored queries, slots, indexed documents, bad queries as
Elasticsearch's 400s, and stored queries surviving merges, a restart and busy writers."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path

import orjson
import pytest
from conftest import running_server
from elasticsearch import BadRequestError, ConflictError, Elasticsearch, NotFoundError
from elasticsearch.helpers import bulk
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from tests.concurrency import readers_beside_writers

MAPPING = {
    "properties": {
        "query": {"type": "percolator"},
        "tag": {"type": "keyword"},
        "n": {"type": "long"},
        "msg": {"type": "text"},
    }
}
TAGS = ["red", "green", "blue"]
WORDS = ["alpha", "beta", "gamma", "delta"]


def random_query(rng: random.Random) -> tuple[dict, Callable[[dict], bool]]:
    """A stored query and the same test written in Python."""
    kind = rng.choice(["term", "range", "match", "bool"])
    if kind == "term":
        tag = rng.choice(TAGS)
        return {"term": {"tag": tag}}, lambda d: d.get("tag") == tag
    if kind == "range":
        lo = rng.randrange(10)
        return {"range": {"n": {"gte": lo}}}, lambda d: "n" in d and d["n"] >= lo
    if kind == "match":
        word = rng.choice(WORDS)
        return {"match": {"msg": word}}, lambda d: word in d.get("msg", "").split()
    tag, lo = rng.choice(TAGS), rng.randrange(10)
    query = {"bool": {"must": [{"term": {"tag": tag}}], "must_not": [{"range": {"n": {"lt": lo}}}]}}
    return query, lambda d: d.get("tag") == tag and not ("n" in d and d["n"] < lo)


def random_doc(rng: random.Random) -> dict:
    doc: dict = {"msg": " ".join(rng.sample(WORDS, 2))}
    if rng.random() < 0.8:
        doc["tag"] = rng.choice(TAGS)
    if rng.random() < 0.8:
        doc["n"] = rng.randrange(12)
    return doc


def ids(found: dict) -> set[str]:
    return {h["_id"] for h in found["hits"]["hits"]}


def test_matches_equal_a_brute_force_evaluation(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPING)
    rng = random.Random(5)
    stored = [random_query(rng) for _ in range(80)]
    bulk(es, [{"_index": index, "_id": str(i), "query": q} for i, (q, _) in enumerate(stored)], refresh=True)
    es.delete(index=index, id="7", refresh=True)
    alive = {str(i): test for i, (_, test) in enumerate(stored) if i != 7}
    for _ in range(15):
        docs = [random_doc(rng) for _ in range(rng.randrange(1, 4))]
        found = es.search(index=index, query={"percolate": {"field": "query", "documents": docs}}, size=100)
        want = {i for i, test in alive.items() if any(test(d) for d in docs)}
        assert ids(found) == want, docs
        for hit in found["hits"]["hits"]:
            slots = [s for s, d in enumerate(docs) if alive[hit["_id"]](d)]
            assert hit["fields"]["_percolator_document_slot"] == slots


def test_scores_are_the_stored_querys_on_the_document(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="q", document={"query": {"match": {"msg": "alpha beta"}}}, refresh=True)
    docs = new_index(suffix="-docs", mappings={"properties": {"msg": {"type": "text"}}})
    es.index(index=docs, id="1", document={"msg": "alpha gamma delta"}, refresh=True)
    alone = es.search(index=docs, query={"match": {"msg": "alpha beta"}})["hits"]["hits"][0]["_score"]
    found = es.search(
        index=index, query={"percolate": {"field": "query", "document": {"msg": "alpha gamma delta"}}}
    )
    assert found["hits"]["hits"][0]["_score"] == pytest.approx(alone)
    filtered = es.search(
        index=index,
        query={"constant_score": {"filter": {"percolate": {"field": "query", "document": {"msg": "alpha"}}}}},
    )
    assert filtered["hits"]["hits"][0]["_score"] == 1.0


def test_an_indexed_document_and_named_queries(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="big", document={"query": {"range": {"n": {"gte": 5}}}})
    es.index(index=index, id="red", document={"query": {"term": {"tag": "red"}}}, refresh=True)
    docs = new_index(
        suffix="-docs", mappings={"properties": {"tag": {"type": "keyword"}, "n": {"type": "long"}}}
    )
    es.index(index=docs, id="d", document={"tag": "red", "n": 2}, refresh=True)
    found = es.search(index=index, query={"percolate": {"field": "query", "index": docs, "id": "d"}})
    assert ids(found) == {"red"}
    es.index(index=docs, id="d", document={"tag": "blue", "n": 9})  # realtime: no refresh needed
    assert ids(es.search(index=index, query={"percolate": {"field": "query", "index": docs, "id": "d"}})) == {
        "big"
    }
    with pytest.raises(NotFoundError) as e:
        es.search(index=index, query={"percolate": {"field": "query", "index": docs, "id": "nope"}})
    assert f"indexed document [{docs}/nope] couldn't be found" in str(e.value.info)
    with pytest.raises(ConflictError):
        es.search(
            index=index, query={"percolate": {"field": "query", "index": docs, "id": "d", "version": 1}}
        )
    named = es.search(
        index=index,
        query={
            "bool": {
                "should": [
                    {"percolate": {"field": "query", "document": {"n": 7}, "name": "seven"}},
                    {"percolate": {"field": "query", "documents": [{"n": 1}, {"tag": "red"}], "name": "two"}},
                ]
            }
        },
    )
    fields = {h["_id"]: h["fields"] for h in named["hits"]["hits"]}
    assert fields == {
        "big": {"_percolator_document_slot_seven": [0]},
        "red": {"_percolator_document_slot_two": [1]},
    }


def test_the_documents_fields_stay_out_of_the_mapping(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"query": {"match_all": {}}}, refresh=True)
    found = es.search(index=index, query={"percolate": {"field": "query", "document": {"brand_new": "x"}}})
    assert ids(found) == {"1"}
    assert "brand_new" not in es.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    caps = es.field_caps(index=index, fields=["query"])["fields"]["query"]
    assert set(caps) == {"percolator"}
    assert (caps["percolator"]["searchable"], caps["percolator"]["aggregatable"]) == (False, False)


@pytest.mark.parametrize(
    ("query", "cause_type", "cause"),
    [
        (
            {"match": {"nope": "x"}},
            "query_shard_exception",
            "No field mapping can be found for the field with name [nope]",
        ),
        ({"bogus": {}}, "parsing_exception", "unknown query [bogus]"),
        (
            [{"match_all": {}}],
            "illegal_argument_exception",
            "a document can only contain one percolator query",
        ),
    ],
)
def test_bad_stored_queries_are_refused(
    es: Elasticsearch, new_index: Callable[..., str], query, cause_type: str, cause: str
) -> None:
    index = new_index(mappings=MAPPING)
    with pytest.raises(BadRequestError) as e:
        es.index(index=index, id="1", document={"query": query})
    assert e.value.info["error"]["type"] == "document_parsing_exception"
    assert "failed to parse field [query] of type [percolator]" in e.value.info["error"]["reason"]
    assert e.value.info["error"]["caused_by"] == {"type": cause_type, "reason": cause}
    assert es.count(index=index)["count"] == 0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            {"percolate": {"field": "tag", "document": {}}},
            "expected field [tag] to be of type [percolator], but is of type [keyword]",
        ),
        ({"percolate": {"field": "nope", "document": {}}}, "field [nope] does not exist"),
        ({"percolate": {"document": {}}}, "Required [field]"),
        (
            {"percolate": {"field": "query"}},
            "Required one of fields [document, documents, id], but none were specified.",
        ),
        (
            {"percolate": {"field": "query", "document": {}, "documents": [{}]}},
            "The following fields are not allowed together: [document, documents]",
        ),
        (
            {"term": {"query": "x"}},
            "Percolator fields are not searchable directly, use a percolate query instead",
        ),
    ],
)
def test_bad_percolate_queries_are_refused(
    es: Elasticsearch, new_index: Callable[..., str], query, message
) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"query": {"match_all": {}}}, refresh=True)
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, query=query)
    assert message in str(e.value.info)


def test_stored_queries_survive_merges_deletes_and_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = leafsearch.Node(data, background=False)
    admin.create_index(node, "p", {"mappings": MAPPING})
    for part in range(12):
        lines = [
            orjson.dumps(x)
            for i in range(part * 10, part * 10 + 10)
            for x in ({"index": {"_id": str(i)}}, {"query": {"range": {"n": {"gte": i}}}})
        ]
        node.bulk(b"\n".join(lines) + b"\n", index="p", refresh="true")
    node.delete_doc("p", "3")
    node.indices["p"].refresh()
    shard = node.indices["p"].shards[0]
    merged = False
    while shard.maybe_merge():
        merged = True
    assert merged, "the merge policy did not merge"
    node.indices["p"].refresh()
    body = {"query": {"percolate": {"field": "query", "document": {"n": 5}}}, "size": 50}
    want = {"0", "1", "2", "4", "5"}
    assert ids(search(node, "p", body)) == want
    node.close()
    with running_server(data) as (url, _):
        assert ids(Elasticsearch(url).search(index="p", **body)) == want


def test_concurrent_writers_and_percolators(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """Writers store queries in refreshed batches while readers percolate on a PIT: each answer
    holds exactly the stored queries of the snapshot that match."""
    index = new_index(mappings=MAPPING)
    percolate = {"percolate": {"field": "query", "document": {"n": 150}}}

    def write(part: int) -> None:
        for start in range(part * 100, part * 100 + 100, 10):
            bulk(
                es,
                [
                    {"_index": index, "_id": str(i), "query": {"range": {"n": {"lte": i}}}}
                    for i in range(start, start + 10)
                ],
                refresh=True,
            )

    def read() -> None:
        pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
        try:
            found = es.search(pit={"id": pit}, query=percolate, size=1000)
            held = es.search(pit={"id": pit}, size=1000, _source=False)
        finally:
            es.close_point_in_time(id=pit)
        assert ids(found) == {h["_id"] for h in held["hits"]["hits"] if int(h["_id"]) >= 150}

    readers_beside_writers([partial(write, part) for part in range(4)], read)
    assert es.count(index=index, query=percolate)["count"] == 250


def test_highlighting_shows_the_percolated_documents(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    """As Elasticsearch's percolator highlighting: each hit highlights the given documents its
    stored query matched, keyed by the document's slot when several were given."""
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"query": {"match": {"msg": "brown fox"}}}, refresh=True)
    one = es.search(
        index=index,
        query={"percolate": {"field": "query", "document": {"msg": "The quick brown fox"}}},
        highlight={"fields": {"msg": {}}},
    )
    assert one["hits"]["hits"][0]["highlight"] == {"msg": ["The quick <em>brown</em> <em>fox</em>"]}
    several = es.search(
        index=index,
        query={
            "percolate": {
                "field": "query",
                "documents": [{"msg": "a red fox"}, {"msg": "no"}, {"msg": "brown bear"}],
            }
        },
        highlight={"fields": {"msg": {}}},
    )
    assert several["hits"]["hits"][0]["highlight"] == {
        "0_msg": ["a red <em>fox</em>"],
        "2_msg": ["<em>brown</em> bear"],
    }
