"""`completion` fields and the `suggest` section over HTTP with the official client: completion
options equal a brute-force computation over the inputs (several shards, deletes), fuzzy, regex
and category contexts, the term suggester, bad inputs as 400s, and suggestions after merges and
a restart and with writers busy at the same time."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

import orjson
import pytest
from conftest import running_server
from elasticsearch import BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from tests.concurrency import readers_beside_writers

WORDS = ["nirvana", "nickelback", "nine", "nina", "nevermind", "metallica", "megadeth", "muse", "madness"]


def options(found: dict, name: str = "s") -> list[tuple[str, str, float]]:
    return [(o["_id"], o["text"], o["_score"]) for o in found["suggest"][name][0]["options"]]


def simple(text: str) -> str:
    return " ".join(re.findall(r"[^\W\d_]+", text.lower()))


def expected(docs: dict[str, list[tuple[str, int]]], prefix: str, size: int) -> list[tuple[str, str, float]]:
    """Brute force: each document's best input whose analysed form (the `simple` analyzer's:
    lowercased runs of letters) starts with the prefix's, best weight first."""
    best = {}
    for doc_id, inputs in docs.items():
        matching = [(w, text) for text, w in inputs if simple(text).startswith(simple(prefix))]
        if matching:
            w, text = max(matching, key=lambda m: (m[0], [-ord(c) for c in m[1]]))
            best[doc_id] = (doc_id, text, float(w))
    return sorted(best.values(), key=lambda o: (-o[2], o[1]))[:size]


def test_prefix_options_equal_a_brute_force_computation(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(
        settings={"number_of_shards": 3}, mappings={"properties": {"s": {"type": "completion"}}}
    )
    rng = random.Random(3)
    weights = rng.sample(range(1, 10_000), 600)
    docs: dict[str, list[tuple[str, int]]] = {}
    actions = []
    for i in range(200):
        inputs = [
            (f"{rng.choice(WORDS).capitalize()}{rng.randrange(100)}", weights[3 * i + k]) for k in range(2)
        ]
        docs[str(i)] = inputs
        body = [{"input": [text], "weight": w} for text, w in inputs]
        actions.append({"_index": index, "_id": str(i), "s": body})
    bulk(es, actions, refresh=True)
    for gone in ("3", "50", "150"):
        es.delete(index=index, id=gone, refresh=True)
        del docs[gone]
    for prefix in ("n", "Ni", "nirvana1", "me", "zz", "MUSE", "nine n"):
        found = es.search(
            index=index, suggest={"s": {"prefix": prefix, "completion": {"field": "s", "size": 7}}}
        )
        assert options(found) == expected(docs, prefix, 7), prefix
        entry = found["suggest"]["s"][0]
        assert (entry["text"], entry["offset"], entry["length"]) == (prefix, 0, len(prefix))


def test_sources_duplicates_and_the_global_text(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"s": {"type": "completion"}, "n": {"type": "long"}}})
    es.index(index=index, id="1", document={"s": {"input": "Nirvana", "weight": 5}, "n": 1})
    es.index(index=index, id="2", document={"s": {"input": "Nirvana", "weight": 3}, "n": 2})
    es.index(index=index, id="3", document={"s": ["Nine Inch Nails"], "n": 3}, refresh=True)
    found = es.search(
        index=index,
        suggest={"text": "ni", "s": {"completion": {"field": "s", "skip_duplicates": True}}},
        source_includes=["n"],
    )
    assert options(found) == [("1", "Nirvana", 5.0), ("3", "Nine Inch Nails", 1.0)]
    assert found["suggest"]["s"][0]["options"][0]["_source"] == {"n": 1}
    assert found["suggest"]["s"][0]["options"][0]["_index"] == index
    every = es.search(index=index, suggest={"s": {"prefix": "nine i", "completion": {"field": "s"}}})
    assert options(every) == [("3", "Nine Inch Nails", 1.0)]


def test_fuzzy_and_regex(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"s": {"type": "completion"}}})
    for i, word in enumerate(["nirvana", "nevermind", "metallica"]):
        es.index(index=index, id=str(i), document={"s": {"input": word, "weight": 10 + i}})
    es.indices.refresh(index=index)
    fuzzy = es.search(
        index=index, suggest={"s": {"prefix": "nirv", "completion": {"field": "s", "fuzzy": {}}}}
    )
    assert options(fuzzy) == [("0", "nirvana", 40.0)]  # the weight times the exact common prefix's length
    typo = es.search(
        index=index,
        suggest={"s": {"prefix": "nrva", "completion": {"field": "s", "fuzzy": {"fuzziness": 1}}}},
    )
    assert options(typo) == [("0", "nirvana", 10.0)]  # one leading character in common
    exact = es.search(index=index, suggest={"s": {"prefix": "nrva", "completion": {"field": "s"}}})
    assert options(exact) == []
    regex = es.search(index=index, suggest={"s": {"regex": "n[ie]", "completion": {"field": "s"}}})
    assert options(regex) == [("1", "nevermind", 11.0), ("0", "nirvana", 10.0)]
    anything = es.search(index=index, suggest={"s": {"regex": "@", "completion": {"field": "s"}}})
    assert len(options(anything)) == 3  # `@` is any string, with the ANYSTRING flag
    plain = {"regex": {"flags": "NONE"}, "field": "s"}
    assert options(es.search(index=index, suggest={"s": {"regex": "@", "completion": plain}})) == []


def test_category_contexts(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(
        mappings={
            "properties": {
                "s": {
                    "type": "completion",
                    "contexts": [
                        {"name": "genre", "type": "category"},
                        {"name": "place", "type": "category", "path": "city"},
                    ],
                },
                "city": {"type": "keyword"},
            }
        }
    )
    es.index(
        index=index,
        id="1",
        document={
            "s": {"input": "Nirvana", "weight": 10, "contexts": {"genre": ["rock", "grunge"]}},
            "city": "seattle",
        },
    )
    es.index(
        index=index,
        id="2",
        document={
            "s": {"input": "Nina Simone", "weight": 20, "contexts": {"genre": "jazz"}},
            "city": "tryon",
        },
        refresh=True,
    )
    assert [
        o[0]
        for o in options(es.search(index=index, suggest={"s": {"prefix": "n", "completion": {"field": "s"}}}))
    ] == ["2", "1"]
    rock = es.search(
        index=index,
        suggest={"s": {"prefix": "n", "completion": {"field": "s", "contexts": {"genre": "rock"}}}},
    )
    assert options(rock) == [("1", "Nirvana", 10.0)]
    assert rock["suggest"]["s"][0]["options"][0]["contexts"] == {"genre": ["rock"]}
    boosted = es.search(
        index=index,
        suggest={
            "s": {
                "prefix": "n",
                "completion": {
                    "field": "s",
                    "contexts": {"genre": [{"context": "grunge", "boost": 3}, "jazz"]},
                },
            }
        },
    )
    assert options(boosted) == [("1", "Nirvana", 30.0), ("2", "Nina Simone", 20.0)]
    prefixed = es.search(
        index=index,
        suggest={
            "s": {
                "prefix": "n",
                "completion": {"field": "s", "contexts": {"genre": [{"context": "ja", "prefix": True}]}},
            }
        },
    )
    assert [o[0] for o in options(prefixed)] == ["2"]
    by_path = es.search(
        index=index,
        suggest={"s": {"prefix": "n", "completion": {"field": "s", "contexts": {"place": "seattle"}}}},
    )
    assert [o[0] for o in options(by_path)] == ["1"]


def test_mapping_and_field_caps(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"s": {"type": "completion", "analyzer": "standard"}}})
    assert es.indices.get_mapping(index=index)[index]["mappings"]["properties"]["s"] == {
        "type": "completion",
        "analyzer": "standard",
        "preserve_separators": True,
        "preserve_position_increments": True,
        "max_input_length": 50,
    }
    assert set(es.field_caps(index=index, fields=["s"])["fields"]["s"]) == {"completion"}
    with pytest.raises(BadRequestError) as e:
        es.indices.create(
            index=f"{index}-bad", mappings={"properties": {"s": {"type": "completion", "analyzer": "nope"}}}
        )
    assert "analyzer [nope] has not been configured in mappings" in str(e.value.info)


@pytest.mark.parametrize(
    ("document", "cause"),
    [
        ({"s": {"input": "a", "weight": -1}}, "weight must be in the interval [0..2147483647], but was [-1]"),
        ({"s": {"input": "a", "weight": 1.5}}, "weight must be an integer, but was [1.5]"),
        ({"s": {"input": "a\u001fb"}}, "Illegal input [\\u001f] reserved character found in input"),
        (
            {"s": {"input": "a", "other": 1}},
            "unknown field name [other], must be one of [input, weight, contexts]",
        ),
        ({"s": {"input": [1]}}, "input array must have string values"),
    ],
)
def test_bad_inputs_are_refused(es: Elasticsearch, new_index: Callable[..., str], document, cause) -> None:
    index = new_index(mappings={"properties": {"s": {"type": "completion"}}})
    with pytest.raises(BadRequestError) as e:
        es.index(index=index, id="1", document=document, refresh=True)
    assert e.value.info["error"]["type"] == "document_parsing_exception"
    assert cause in e.value.info["error"]["caused_by"]["reason"]
    assert es.count(index=index)["count"] == 0


def test_bad_suggestions_are_refused(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"s": {"type": "completion"}, "t": {"type": "text"}}})
    es.index(index=index, id="1", document={"s": "x", "t": "x"}, refresh=True)
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, suggest={"s": {"prefix": "x", "completion": {"field": "t"}}})
    assert "Field [t] is not a completion suggest field" in str(e.value.info)
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, suggest={"s": {"prefix": "x", "completion": {"size": 3}}})
    assert "the required field option [field] is missing" in str(e.value.info)
    with pytest.raises(BadRequestError) as e:
        es.search(
            index=index,
            suggest={"s": {"prefix": "x", "completion": {"field": "s", "contexts": {"genre": "rock"}}}},
        )
    assert "context [genre] is not defined" in str(e.value.info)


def test_term_suggester(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"t": {"type": "text"}}})
    docs = ["the quick brown fox", "quick thinking", "a brown bear", "brownie points"]
    bulk(es, [{"_index": index, "_id": str(i), "t": d} for i, d in enumerate(docs)], refresh=True)
    found = es.search(index=index, suggest={"t": {"text": "quikc brwn fox", "term": {"field": "t"}}})
    entries = found["suggest"]["t"]
    assert [(e["text"], e["offset"], e["length"]) for e in entries] == [
        ("quikc", 0, 5),
        ("brwn", 6, 4),
        ("fox", 11, 3),
    ]
    assert entries[0]["options"][0] == {"text": "quick", "score": pytest.approx(0.8), "freq": 2}
    assert entries[1]["options"][0]["text"] == "brown"
    assert entries[2]["options"] == []  # present in the index, too short besides
    strict = es.search(index=index, suggest={"t": {"text": "brwn", "term": {"field": "t", "accuracy": 0.8}}})
    assert strict["suggest"]["t"][0]["options"] == []  # brown: 1 - 1/4 = 0.75


def test_suggestions_survive_merges_deletes_and_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = leafsearch.Node(data, background=False)
    admin.create_index(node, "c", {"mappings": {"properties": {"s": {"type": "completion"}}}})
    for part in range(12):
        lines = [
            orjson.dumps(x)
            for i in range(part * 10, part * 10 + 10)
            for x in ({"index": {"_id": str(i)}}, {"s": {"input": f"item{i:03d}", "weight": i}})
        ]
        node.bulk(b"\n".join(lines) + b"\n", index="c", refresh="true")
    node.delete_doc("c", "119")
    node.indices["c"].refresh()
    shard = node.indices["c"].shards[0]
    merged = False
    while shard.maybe_merge():
        merged = True
    assert merged, "the merge policy did not merge"
    node.indices["c"].refresh()
    body = {"suggest": {"s": {"prefix": "item1", "completion": {"field": "s", "size": 3}}}}
    want = [("118", "item118", 118.0), ("117", "item117", 117.0), ("116", "item116", 116.0)]
    assert options(search(node, "c", body)) == want
    node.close()
    with running_server(data) as (url, _):
        assert options(Elasticsearch(url).search(index="c", **body)) == want


def test_concurrent_writers_and_suggest_readers(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """Writers index inputs in refreshed batches while readers ask for suggestions on a PIT:
    every answer is the best of the documents the snapshot holds."""
    index = new_index(mappings={"properties": {"s": {"type": "completion"}}})

    def write(part: int) -> None:
        for start in range(part * 100, part * 100 + 100, 10):
            bulk(
                es,
                [
                    {"_index": index, "_id": str(i), "s": {"input": f"w{i}", "weight": i}}
                    for i in range(start, start + 10)
                ],
                refresh=True,
            )

    def read() -> None:
        pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
        try:
            found = es.search(
                pit={"id": pit},
                suggest={"s": {"prefix": "w", "completion": {"field": "s", "size": 5}}},
            )
            held = es.search(pit={"id": pit}, size=1000, _source=False)
        finally:
            es.close_point_in_time(id=pit)
        ids = sorted((int(h["_id"]) for h in held["hits"]["hits"]), reverse=True)[:5]
        assert [int(o[0]) for o in options(found)] == ids

    readers_beside_writers([partial(write, part) for part in range(4)], read)
    found = es.search(index=index, suggest={"s": {"prefix": "w39", "completion": {"field": "s"}}})
    assert [o[0] for o in options(found)] == ["399", "398", "397", "396", "395"]


def test_url_parameters_and_the_phrase_suggester(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"t": {"type": "text"}}})
    es.index(index=index, id="1", document={"t": "quick brown fox"}, refresh=True)
    found = es.search(index=index, suggest_field="t", suggest_text="quikc", suggest_size=1)
    assert found["suggest"]["t"][0]["options"] == [{"text": "quick", "score": pytest.approx(0.8), "freq": 1}]
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, suggest={"p": {"text": "x", "phrase": {"field": "t"}}})
    assert "the [phrase] suggester is not supported by leafsearch" in str(e.value.info)


def test_dynamic_templates_and_analyze(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """Dynamic templates may map the new types, as Elasticsearch allows; `_analyze` on a completion
    field uses its analyzer."""
    index = new_index(
        mappings={
            "dynamic_templates": [
                {"feature": {"match": "pr_*", "mapping": {"type": "rank_feature"}}},
                {
                    "topics": {
                        "match": "t_*",
                        "match_mapping_type": "object",
                        "mapping": {"type": "rank_features"},
                    }
                },
                {"suggest": {"match": "sug_*", "mapping": {"type": "completion"}}},
                {"blob": {"match": "bin_*", "mapping": {"type": "binary"}}},
            ]
        }
    )
    es.index(
        index=index,
        id="1",
        document={"pr_a": 3.5, "t_x": {"b": 2}, "sug_x": "Hello", "bin_b": "aGk="},
        refresh=True,
    )
    properties = es.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    assert {k: v["type"] for k, v in properties.items()} == {
        "pr_a": "rank_feature",
        "t_x": "rank_features",
        "sug_x": "completion",
        "bin_b": "binary",
    }
    linear = es.search(index=index, query={"rank_feature": {"field": "t_x.b", "linear": {}}})
    assert linear["hits"]["hits"][0]["_score"] == 2.0
    found = es.search(index=index, suggest={"s": {"prefix": "he", "completion": {"field": "sug_x"}}})
    assert options(found) == [("1", "Hello", 1.0)]
    tokens = es.indices.analyze(index=index, field="sug_x", text="Hello World 42")["tokens"]
    assert [t["token"] for t in tokens] == ["hello", "world"]


def test_typed_keys_name_the_suggester(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings={"properties": {"s": {"type": "completion"}, "t": {"type": "text"}}})
    es.index(index=index, id="1", document={"s": "nirvana", "t": "nirvana"}, refresh=True)
    found = es.search(
        index=index,
        typed_keys=True,
        suggest={
            "a": {"prefix": "ni", "completion": {"field": "s"}},
            "b": {"text": "nirvan", "term": {"field": "t"}},
        },
    )
    assert set(found["suggest"]) == {"completion#a", "term#b"}


def test_a_scroll_answers_its_suggestions_with_its_first_batch(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings={"properties": {"s": {"type": "completion"}}})
    bulk(es, [{"_index": index, "_id": str(i), "s": f"item{i}"} for i in range(3)], refresh=True)
    first = es.search(
        index=index, scroll="1m", size=1, suggest={"a": {"prefix": "it", "completion": {"field": "s"}}}
    )
    assert len(first["suggest"]["a"][0]["options"]) == 3
    try:
        second = es.scroll(scroll_id=first["_scroll_id"], scroll="1m")
        assert len(second["hits"]["hits"]) == 1
        assert "suggest" not in second
    finally:
        es.clear_scroll(scroll_id=first["_scroll_id"])
