"""Relevance through the HTTP API, checked against BM25 computed here from first principles.

The reference below re-derives what Lucene 9's BM25Similarity (k1 1.2, b 0.75) gives Elasticsearch
8: idf = ln(1 + (N - n + 0.5) / (n + 0.5)) from the shard's document counts, the average field
length over the shard, and each document's length as stored in its one-byte norm
(SmallFloat.intToByte4: exact up to 24 terms, then 4 significant bits), all in float32. It does not
import the product's similarity code, so a wrong statistic, a missing quantization or a float32
slip in the product shows up as a score difference. Documents are long enough (up to 160 terms)
for the norm quantization to matter.
"""

from __future__ import annotations

import json
import math
import random
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest
from elasticsearch import Elasticsearch

K1 = np.float32(1.2)
B = np.float32(0.75)
TOLERANCE = 1e-5

VOCABULARY = [
    "fox",
    "quick",
    "brown",
    "dog",
    "lazy",
    "jumps",
    "river",
    "stone",
    "moon",
    "night",
    "red",
    "blue",
]
WEIGHTS = [6, 8, 5, 7, 3, 2, 2, 1, 1, 1, 4, 4]


def _corpus() -> list[dict[str, str]]:
    rng = random.Random(20240601)
    docs = []
    for i, length in enumerate([1, 2, 3, 5, 8, 13, 21, 24, 25, 30, 41, 45, 57, 64, 99, 100, 130, 160, 7, 11]):
        words = rng.choices(VOCABULARY, weights=WEIGHTS, k=length)
        # Filler words that no query asks for still count in the field length.
        body = " ".join(w if rng.random() < 0.6 else f"w{rng.randint(0, 50)}" for w in words)
        title = " ".join(rng.choices(VOCABULARY[:6], k=1 + i % 4))
        docs.append({"body": body.capitalize() + ".", "title": title})
    return docs


# ---------------------------------------------------------------------------------------------
# The reference: Lucene's norm encoding and BM25, written out independently.


def _long_to_int4(i: int) -> int:
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_FREE = 255 - _long_to_int4(2**31 - 1)  # 24 lengths are stored exactly


def int_to_byte4(length: int) -> int:
    return length if length < _FREE else _FREE + _long_to_int4(length - _FREE)


def byte4_to_int(norm: int) -> int:
    return norm if norm < _FREE else _FREE + _int4_to_long(norm - _FREE)


def tokens(text: str) -> list[str]:
    """The standard analyzer on this corpus' plain ASCII text: lowercase alphanumeric runs."""
    return re.findall(r"[a-z0-9]+", text.lower())


@dataclass
class FieldStats:
    """One shard's statistics of one field, and each of its documents' terms and norm."""

    docs: dict[str, list[str]]  # id -> tokens

    @property
    def doc_count(self) -> int:
        return sum(1 for t in self.docs.values() if t)

    def avgdl(self) -> np.float32:
        return np.float32(sum(len(t) for t in self.docs.values()) / self.doc_count)

    def idf(self, term: str) -> np.float32:
        n = sum(1 for t in self.docs.values() if term in t)
        return np.float32(math.log(1 + (self.doc_count - n + 0.5) / (n + 0.5)))

    def _bm25(self, doc_id: str, freq: int, weight: np.float32) -> np.float32:
        length = np.float32(byte4_to_int(int_to_byte4(len(self.docs[doc_id]))))
        norm_inverse = np.float32(1) / (K1 * ((np.float32(1) - B) + B * length / self.avgdl()))
        return weight - weight / (np.float32(1) + np.float32(freq) * norm_inverse)

    def term_scores(self, term: str, boost: float = 1.0) -> dict[str, np.float32]:
        weight = np.float32(boost) * self.idf(term)
        return {d: self._bm25(d, t.count(term), weight) for d, t in self.docs.items() if term in t}

    def phrase_scores(self, phrase: list[str]) -> dict[str, np.float32]:
        weight = np.float32(sum(float(self.idf(t)) for t in phrase))
        out = {}
        for d, t in self.docs.items():
            freq = sum(1 for i in range(len(t) - len(phrase) + 1) if t[i : i + len(phrase)] == phrase)
            if freq:
                out[d] = self._bm25(d, freq, weight)
        return out


def summed(*parts: dict[str, np.float32]) -> dict[str, float]:
    """Lucene's disjunction: clause scores added in double, the sum rounded to float."""
    total: dict[str, float] = {}
    for part in parts:
        for d, s in part.items():
            total[d] = total.get(d, 0.0) + float(s)
    return {d: float(np.float32(s)) for d, s in total.items()}


# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(http: httpx.Client) -> Iterator[tuple[str, dict[str, dict[str, str]]]]:
    """One shard, one bulk: statistics are the whole corpus' and doc ids follow indexing order."""
    name = f"relevance-{uuid.uuid4().hex[:8]}"
    docs = {str(i): d for i, d in enumerate(_corpus())}
    mappings = {"properties": {"body": {"type": "text"}, "title": {"type": "text"}}}
    assert (
        http.put(f"/{name}", json={"settings": {"number_of_shards": 1}, "mappings": mappings}).status_code
        == 200
    )
    lines = "".join(json.dumps({"index": {"_id": i}}) + "\n" + json.dumps(d) + "\n" for i, d in docs.items())
    response = http.post(
        f"/{name}/_bulk",
        content=lines,
        headers={"content-type": "application/x-ndjson"},
        params={"refresh": "true"},
    )
    assert not response.json()["errors"]
    yield name, docs
    http.delete(f"/{name}")


def stats_of(docs: dict[str, dict[str, str]], field: str) -> FieldStats:
    return FieldStats({d: tokens(doc.get(field, "")) for d, doc in docs.items()})


def check(response: dict[str, Any], expected: dict[str, float], doc_order: list[str]) -> None:
    """Same hits, each score within tolerance, and exactly the order score-then-doc gives."""
    hits = response["hits"]["hits"]
    got = {h["_id"]: h["_score"] for h in hits}
    assert set(got) == set(expected)
    for doc_id, score in expected.items():
        assert got[doc_id] == pytest.approx(score, abs=TOLERANCE), doc_id
    rank = {d: i for i, d in enumerate(doc_order)}
    assert [h["_id"] for h in hits] == sorted(expected, key=lambda d: (-expected[d], rank[d]))
    assert response["hits"]["max_score"] == pytest.approx(max(expected.values()), abs=TOLERANCE)


def test_the_reference_norm_encoding() -> None:
    """Spot values of SmallFloat.intToByte4 / byte4ToInt, so the reference itself is pinned."""
    assert [byte4_to_int(int_to_byte4(n)) for n in (0, 1, 23, 24, 25, 40, 41, 42, 100, 130, 160)] == [
        0,
        1,
        23,
        24,
        25,
        40,
        40,
        42,
        96,
        128,
        152,
    ]
    assert all(byte4_to_int(int_to_byte4(n)) <= n for n in range(2000))
    assert int_to_byte4(2**31 - 1) == 255


@pytest.mark.parametrize("text", ["fox", "quick", "moon", "stone", "w7"])
def test_single_term(es: Elasticsearch, corpus, text: str) -> None:
    name, docs = corpus
    expected = {d: float(s) for d, s in stats_of(docs, "body").term_scores(text).items()}
    assert expected, "the corpus must hold the term"
    check(es.search(index=name, query={"match": {"body": text}}, size=50), expected, list(docs))
    check(es.search(index=name, query={"term": {"body": text}}, size=50), expected, list(docs))


@pytest.mark.parametrize("text", ["quick fox", "lazy dog jumps", "red blue river night"])
def test_several_terms_add_up(es: Elasticsearch, corpus, text: str) -> None:
    name, docs = corpus
    body = stats_of(docs, "body")
    expected = summed(*(body.term_scores(t) for t in text.split()))
    check(es.search(index=name, query={"match": {"body": text}}, size=50), expected, list(docs))
    should = {"bool": {"should": [{"term": {"body": t}} for t in text.split()]}}
    check(es.search(index=name, query=should, size=50), expected, list(docs))


def test_operator_and_restricts_without_changing_scores(es: Elasticsearch, corpus) -> None:
    name, docs = corpus
    body = stats_of(docs, "body")
    both = summed(body.term_scores("quick"), body.term_scores("fox"))
    expected = {d: s for d, s in both.items() if "quick" in body.docs[d] and "fox" in body.docs[d]}
    query = {"match": {"body": {"query": "quick fox", "operator": "and"}}}
    check(es.search(index=name, query=query, size=50), expected, list(docs))


def test_boost_multiplies_the_weight(es: Elasticsearch, corpus) -> None:
    name, docs = corpus
    expected = {d: float(s) for d, s in stats_of(docs, "body").term_scores("dog", boost=2.5).items()}
    query = {"match": {"body": {"query": "dog", "boost": 2.5}}}
    check(es.search(index=name, query=query, size=50), expected, list(docs))


@pytest.mark.parametrize("phrase", ["quick fox", "brown dog", "dog blue dog", "quick red red"])
def test_phrase_scores_use_phrase_frequency_and_summed_idf(es: Elasticsearch, corpus, phrase: str) -> None:
    name, docs = corpus
    expected = {d: float(s) for d, s in stats_of(docs, "body").phrase_scores(phrase.split()).items()}
    assert expected
    check(es.search(index=name, query={"match_phrase": {"body": phrase}}, size=50), expected, list(docs))


def test_fields_keep_their_own_statistics(es: Elasticsearch, corpus) -> None:
    name, docs = corpus
    title, body = stats_of(docs, "title").term_scores("lazy"), stats_of(docs, "body").term_scores("lazy")
    best = {
        d: float(max(title.get(d, np.float32(0)), body.get(d, np.float32(0)))) for d in set(title) | set(body)
    }
    best_fields = {"multi_match": {"query": "lazy", "fields": ["title", "body"]}}
    check(es.search(index=name, query=best_fields, size=50), best, list(docs))
    most_fields = {"multi_match": {"query": "lazy", "fields": ["title", "body"], "type": "most_fields"}}
    check(es.search(index=name, query=most_fields, size=50), summed(title, body), list(docs))


def test_filters_do_not_score(es: Elasticsearch, corpus) -> None:
    name, docs = corpus
    body = stats_of(docs, "body")
    expected = {d: float(s) for d, s in body.term_scores("fox").items() if "dog" in body.docs[d]}
    query = {"bool": {"must": {"match": {"body": "fox"}}, "filter": {"match": {"body": "dog"}}}}
    check(es.search(index=name, query=query, size=50), expected, list(docs))


@pytest.fixture(scope="module")
def sharded(http: httpx.Client, corpus) -> Iterator[tuple[str, dict[str, tuple[int, int]]]]:
    """The corpus over three shards, with each document's (shard, doc) read from a PIT's `_shard_doc`."""
    _, docs = corpus
    name = f"relevance-sharded-{uuid.uuid4().hex[:8]}"
    assert http.put(f"/{name}", json={"settings": {"number_of_shards": 3}}).status_code == 200
    lines = "".join(json.dumps({"index": {"_id": i}}) + "\n" + json.dumps(d) + "\n" for i, d in docs.items())
    http.post(
        f"/{name}/_bulk",
        content=lines,
        headers={"content-type": "application/x-ndjson"},
        params={"refresh": "true"},
    )
    pit = http.post(f"/{name}/_pit", params={"keep_alive": "1m"}).json()["id"]
    try:
        response = http.post("/_search", json={"pit": {"id": pit}, "sort": ["_shard_doc"], "size": 100})
        assert response.status_code == 200, response.text
        hits = response.json()
    finally:
        http.request("DELETE", "/_pit", json={"id": pit})
    where = {h["_id"]: (h["sort"][0] >> 32, h["sort"][0] & 0xFFFFFFFF) for h in hits["hits"]["hits"]}
    assert len(where) == len(docs) and len({s for s, _ in where.values()}) == 3
    yield name, where
    http.delete(f"/{name}")


def test_each_shard_scores_with_its_own_statistics(es: Elasticsearch, corpus, sharded) -> None:
    """query_then_fetch: idf and avgdl are the shard's; ties merge by shard index, then doc."""
    _, docs = corpus
    name, where = sharded
    expected: dict[str, float] = {}
    for shard in range(3):
        local = {d: doc for d, doc in docs.items() if where[d][0] == shard}
        body = stats_of(local, "body")
        expected.update(summed(body.term_scores("quick"), body.term_scores("moon")))
    order = sorted(docs, key=lambda d: where[d])
    check(es.search(index=name, query={"match": {"body": "quick moon"}}, size=50), expected, order)


def test_dfs_query_then_fetch_scores_with_global_statistics(es: Elasticsearch, corpus, sharded) -> None:
    _, docs = corpus
    name, where = sharded
    body = stats_of(docs, "body")
    expected = summed(body.term_scores("quick"), body.term_scores("moon"))
    response = es.search(
        index=name, query={"match": {"body": "quick moon"}}, size=50, search_type="dfs_query_then_fetch"
    )
    check(response, expected, sorted(docs, key=lambda d: where[d]))
