"""Keyword postings and conjunctions led by a term's postings (search/query/conjunction.py) match
exactly the documents the dense path (one mask per clause over every document) matches: on random
data with missing and multi-valued fields, over segments with deletes, through refresh, merge and
deletes of a node, and while a writer refreshes new segments under concurrent readers."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import orjson
import pytest
from inprocess import search

import leafsearch
from leafsearch.index.columns import DocValues, KeywordColumn
from leafsearch.index.mapping import Mapping
from leafsearch.indices import admin
from leafsearch.search.query import conjunction, masks
from tests.search.test_matching import build_shard, run

MAPPING = {
    "properties": {
        "svc": {"type": "keyword"},
        "tags": {"type": "keyword"},
        "ts": {"type": "long"},
        "multi": {"type": "long"},
        "msg": {"type": "text"},
    }
}
SERVICES = [f"s{i}" for i in range(12)]
WORDS = ["alpha", "beta", "gamma", "delta", "omega"]


def random_doc(rng: random.Random) -> dict:
    """Skewed services (rare ones lead a conjunction, common ones do not), some fields missing or
    multi-valued."""
    doc: dict = {"msg": " ".join(rng.choices(WORDS, weights=[8, 4, 2, 1, 0.2], k=rng.randint(1, 4)))}
    if rng.random() < 0.9:
        doc["svc"] = SERVICES[min(int(rng.expovariate(0.5)), len(SERVICES) - 1)]
    if rng.random() < 0.7:
        doc["tags"] = rng.sample(SERVICES, rng.randint(1, 3))
    if rng.random() < 0.9:
        doc["ts"] = rng.randint(0, 1000)
    if rng.random() < 0.8:
        doc["multi"] = [rng.randint(0, 100) for _ in range(rng.randint(1, 3))]
    return doc


def random_clause(rng: random.Random) -> dict:
    kind = rng.choice(["svc", "tags", "ts", "multi", "msg", "absent", "exists"])
    if kind in ("svc", "tags"):
        return {"term": {kind: rng.choice([*SERVICES, "nope"])}}
    if kind == "ts":
        lo = rng.choice([-20, 0, rng.randint(-50, 1000)])  # missing values are stored as 0
        return {"range": {"ts": {"gte": lo, "lt": lo + rng.choice([1, 30, 400, 2000])}}}
    if kind == "multi":
        lo = rng.randint(0, 100)
        return {"range": {"multi": {"gte": lo, "lte": lo + rng.randint(0, 40)}}}
    if kind == "msg":
        return {"match": {"msg": rng.choice(WORDS)}}
    if kind == "absent":
        return {"term": {"nowhere": "x"}}
    return {"exists": {"field": rng.choice(["svc", "ts", "multi"])}}


def random_bool(rng: random.Random) -> dict:
    clauses = [random_clause(rng) for _ in range(rng.randint(2, 4))]
    clauses[0] = {"term": {"svc": rng.choice(SERVICES)}}  # most queries have a term to lead
    rng.shuffle(clauses)
    cut = rng.randint(0, len(clauses))
    body: dict = {"filter": clauses[:cut], "must": clauses[cut:]}
    if rng.random() < 0.3:
        body["must_not"] = [random_clause(rng)]
    return {"bool": body}


def always_lead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conjunction, "LEAD_FRACTION", 0)
    monkeypatch.setattr(masks, "POSTINGS_FRACTION", 0)


def never_lead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conjunction, "LEAD_FRACTION", 10**12)
    monkeypatch.setattr(masks, "POSTINGS_FRACTION", 10**12)


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory):
    rng = random.Random(11)
    mapping = Mapping.from_body(MAPPING)
    segments = [[random_doc(rng) for _ in range(size)] for size in (700, 1, 300, 90)]
    deleted = frozenset(str(i) for i in rng.sample(range(1091), 150))
    return build_shard(tmp_path_factory.mktemp("conj"), mapping, segments, deleted), mapping


@pytest.mark.parametrize("seed", range(150))
def test_led_conjunction_equals_the_dense_masks(shard, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    searcher, mapping = shard
    rng = random.Random(seed)
    query = random_bool(rng) if seed % 10 else random_clause(rng)
    scoring = rng.random() < 0.5
    with monkeypatch.context() as patch:
        never_lead(patch)
        dense = run(searcher, mapping, query, needs_scores=scoring)
    always_lead(monkeypatch)
    led = run(searcher, mapping, query, needs_scores=scoring)
    assert led == dense, query


@pytest.mark.parametrize("seed", range(20))
def test_keyword_postings_list_each_terms_documents(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, terms = int(rng.integers(1, 400)), int(rng.integers(1, 30))
    term_array = np.array([f"t{i:03d}".encode() for i in range(terms)])
    if seed % 2:  # single-valued, some documents without a value
        values = rng.integers(0, terms, n)
        present = rng.random(n) < 0.8
        col = KeywordColumn(term_array, DocValues(np.where(present, values, 0), n, present=present))
        held = [{int(values[d])} if present[d] else set() for d in range(n)]
    else:  # multi-valued: sorted distinct ordinals per document
        held = [set(rng.choice(terms, int(rng.integers(0, 4))).tolist()) for _ in range(n)]
        flat = [o for doc in held for o in sorted(doc)]
        offsets = np.cumsum([0, *(len(doc) for doc in held)])
        col = KeywordColumn(term_array, DocValues(np.array(flat, dtype=np.int64), n, offsets=offsets))
    for t in range(terms):
        want = [d for d in range(n) if t in held[d]]
        assert col.docs_of(t, t + 1).tolist() == want
        assert col.doc_count(t, t + 1) == len(want)
    assert col.doc_count(0, terms) == sum(len(doc) for doc in held)


def _expected(docs: dict[str, dict], service: str, lo: int, hi: int) -> list[str]:
    """The ids a `term` + `range` filter matches, sorted by ts desc then id (the test's sort)."""
    hits = [(d["ts"], i) for i, d in docs.items() if d.get("svc") == service and lo <= d.get("ts", hi) < hi]
    return [i for _, i in sorted(hits, key=lambda h: (-h[0], h[1]))]


def _page(node: leafsearch.Node, service: str, lo: int, hi: int) -> tuple[list[str], int]:
    body = {
        "size": 1000,
        "query": {"bool": {"filter": [{"term": {"svc": service}}, {"range": {"ts": {"gte": lo, "lt": hi}}}]}},
        "sort": [{"ts": "desc"}, {"id": "asc"}],
    }
    response = search(node, "docs", body)
    return [h["_id"] for h in response["hits"]["hits"]], response["hits"]["total"]["value"]


def _put(node: leafsearch.Node, docs: dict[str, dict], doc_id: str, doc: dict) -> None:
    docs[doc_id] = {**doc, "id": doc_id}
    node.index_doc("docs", doc_id, orjson.dumps(docs[doc_id]))


def test_through_refresh_deletes_and_merge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    always_lead(monkeypatch)
    rng = random.Random(5)
    docs: dict[str, dict] = {}
    mapping = {"properties": {**MAPPING["properties"], "id": {"type": "keyword"}}}
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "docs", {"mappings": mapping})
        shard = node.indices["docs"].shards[0]

        def check() -> None:
            for _ in range(15):
                service, lo = rng.choice(SERVICES), rng.randint(0, 1000)
                hi = lo + rng.choice([5, 100, 1000])
                want = _expected(docs, service, lo, hi)
                assert _page(node, service, lo, hi) == (want, len(want))

        for batch in range(12):  # twelve segments: the policy merges them
            for i in range(40):
                _put(node, docs, f"{batch}-{i}", random_doc(rng))
            node.indices["docs"].refresh()
        check()
        for doc_id in rng.sample(sorted(docs), 120):
            node.delete_doc("docs", doc_id)
            del docs[doc_id]
        for doc_id in rng.sample(sorted(docs), 30):  # updates: the old version is deleted
            _put(node, docs, doc_id, random_doc(rng))
        node.indices["docs"].refresh()
        check()
        merged = False
        while shard.maybe_merge():
            merged = True
            node.indices["docs"].refresh()
        assert merged
        check()


def test_readers_during_writes_and_refreshes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers build the postings of segments that refreshes keep adding, all at once: a writer
    adds documents of a service the readers' query does not match, so every answer is the same."""
    always_lead(monkeypatch)
    rng = random.Random(9)
    docs: dict[str, dict] = {}
    mapping = {"properties": {**MAPPING["properties"], "id": {"type": "keyword"}}}
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "docs", {"mappings": mapping})
        for batch in range(3):
            for i in range(100):
                _put(node, docs, f"{batch}-{i}", {**random_doc(rng), "svc": rng.choice(SERVICES[:3])})
            node.indices["docs"].refresh()
        want = _expected(docs, "s1", 100, 900)
        done = threading.Event()
        failures: list[object] = []

        def read() -> None:
            while not done.is_set():
                got = _page(node, "s1", 100, 900)
                if got != (want, len(want)):
                    failures.append(got)
                    return

        readers = [threading.Thread(target=read) for _ in range(3)]
        for reader in readers:
            reader.start()
        try:
            for batch in range(8):
                for i in range(25):
                    other = {**random_doc(rng), "svc": "s9"}
                    node.index_doc("docs", f"w{batch}-{i}", orjson.dumps(other))
                node.indices["docs"].refresh()
        finally:
            done.set()
            for reader in readers:
                reader.join()
        assert failures == []


@pytest.fixture(scope="module")
def node_with_deletes(tmp_path_factory: pytest.TempPathFactory):
    """A node whose index holds several segments, some with deleted documents."""
    rng = random.Random(21)
    mapping = {"properties": {**MAPPING["properties"], "id": {"type": "keyword"}}}
    with leafsearch.Node(tmp_path_factory.mktemp("sparse") / "node", background=False) as node:
        admin.create_index(node, "docs", {"settings": {"number_of_shards": 2}, "mappings": mapping})
        docs: dict[str, dict] = {}
        for batch in range(5):
            for i in range(rng.randint(50, 300)):
                _put(node, docs, f"{batch}-{i}", random_doc(rng))
            node.indices["docs"].refresh()
        for doc_id in rng.sample(sorted(docs), 150):
            node.delete_doc("docs", doc_id)
        node.indices["docs"].refresh()
        yield node


@pytest.mark.parametrize("seed", range(60))
def test_matches_given_as_documents_answer_as_the_masks(
    node_with_deletes: leafsearch.Node, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filtered conjunction led by a term gives its matches as documents, with no mask
    (`matching.execute_docs`): totals, pages, aggregations and `search_after` answer as from the
    masks, over segments with deletes."""
    rng = random.Random(seed)
    clauses = [
        {"term": {"svc": rng.choice(SERVICES)}},
        *(random_clause(rng) for _ in range(rng.randint(1, 2))),
    ]
    body: dict = {
        "query": {"bool": {"filter": clauses}},
        "size": rng.choice([0, 3, 40]),
        "track_total_hits": rng.choice([True, 5]),
        "aggs": {"tags": {"terms": {"field": "tags"}}, "ts": {"stats": {"field": "ts"}}},
    }
    if rng.random() < 0.7:
        body["sort"] = [{"ts": rng.choice(["asc", "desc"])}, {"id": "asc"}]
        if rng.random() < 0.4:
            body["search_after"] = [rng.randint(0, 1000), "2-"]
    with monkeypatch.context() as patch:
        never_lead(patch)
        dense = search(node_with_deletes, "docs", body)
    always_lead(monkeypatch)
    led = search(node_with_deletes, "docs", body)
    for response in (dense, led):
        response.pop("took")
    assert led == dense, body
