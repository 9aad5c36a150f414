"""`terms` counted straight from ordinals (`TermsAgg._ordinal_counts`): the counts equal the
documents a client would count itself, with deletes and without, every document matched or some,
include/exclude, in-process and through search workers while other clients write and refresh.

The expected counts are computed here from the documents written (a Counter of each live
document's distinct values), not by the engine, so the fast path and the general path (a
multi-valued field, `missing`, sub-aggregations) are both checked against the same truth.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import orjson
import pytest

from leafsearch.indices import admin
from leafsearch.node.node import Node
from tests.inprocess import search

TAGS = [f"t{i:02d}" for i in range(23)]


def _doc(rng: random.Random, i: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"n": i}
    if rng.random() < 0.9:  # some documents lack the single-valued field
        doc["tag"] = rng.choice(TAGS)
    doc["tags"] = rng.sample(TAGS, rng.randint(0, 3)) + ([TAGS[0]] if rng.random() < 0.1 else [])
    return doc


class Corpus:
    """The live documents as the client wrote them."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def counts(self, field: str, keep: Any = lambda d: True) -> dict[str, int]:
        with self.lock:
            docs = list(self.docs.values())
        counted: Counter[str] = Counter()
        for doc in docs:
            if keep(doc):
                value = doc.get(field)
                counted.update(set(value) if isinstance(value, list) else ([value] if value else []))
        return dict(counted)


def _write(node: Node, corpus: Corpus, rng: random.Random, ids: range, refresh: str = "true") -> None:
    lines = []
    docs = {}
    for i in ids:
        docs[str(i)] = _doc(rng, i)
        lines.append(b'{"index":{"_id":"%d"}}\n' % i)
        lines.append(orjson.dumps(docs[str(i)]) + b"\n")
    node.bulk(b"".join(lines), index="t", refresh=refresh)
    with corpus.lock:
        corpus.docs.update(docs)


def _delete(node: Node, corpus: Corpus, ids: list[int]) -> None:
    lines = b"".join(b'{"delete":{"_id":"%d"}}\n' % i for i in ids)
    node.bulk(lines, index="t", refresh="true")
    with corpus.lock:
        for i in ids:
            corpus.docs.pop(str(i), None)


def _buckets(response: dict[str, Any], name: str = "a") -> dict[str, int]:
    agg = response["aggregations"][name] if "aggregations" in response else response[name]
    return {b["key"]: b["doc_count"] for b in agg["buckets"]}


def _terms(field: str, **options: Any) -> dict[str, Any]:
    return {"size": 0, "aggs": {"a": {"terms": {"field": field, "size": len(TAGS) + 1, **options}}}}


@pytest.fixture(params=[0, 2], ids=["in-process", "workers"])
def node(tmp_path: Path, request: pytest.FixtureRequest, worker_processes: BaseContext) -> Iterator[Node]:
    with Node(
        tmp_path / "node", background=False, search_workers=request.param, worker_processes=worker_processes
    ) as n:
        admin.create_index(
            n,
            "t",
            {
                "settings": {"number_of_shards": 2},
                "mappings": {"properties": {"tag": {"type": "keyword"}, "tags": {"type": "keyword"}}},
            },
        )
        if n.search_workers is not None:
            assert n.search_workers.wait_ready(60)
        yield n


@pytest.mark.parametrize("seed", range(4))
def test_terms_counts_equal_the_documents_with_and_without_deletes(node: Node, seed: int) -> None:
    rng = random.Random(seed)
    print("seed", seed)
    corpus = Corpus()
    for start in range(0, 1200, 400):  # several segments per shard
        _write(node, corpus, rng, range(start, start + 400))
    for deleted in (False, True):
        if deleted:
            _delete(node, corpus, rng.sample(range(1200), 150))
        for field in ("tag", "tags"):
            assert _buckets(search(node, "t", _terms(field))) == corpus.counts(field), (field, deleted)
            some = {"range": {"n": {"gte": 100, "lt": 1000}}}
            got = _buckets(search(node, "t", {**_terms(field), "query": some}))
            assert got == corpus.counts(field, lambda d: 100 <= d["n"] < 1000), (field, deleted)
            include = TAGS[3:9]
            got = _buckets(search(node, "t", _terms(field, include=include, exclude=[TAGS[4]])))
            want = {k: v for k, v in corpus.counts(field).items() if k in include and k != TAGS[4]}
            assert got == want
            got = _buckets(search(node, "t", _terms(field, include="t0.*")))
            assert got == {k: v for k, v in corpus.counts(field).items() if k.startswith("t0")}
        # `missing` takes the general path: the same counts plus the documents without a value.
        with_missing = _buckets(search(node, "t", _terms("tag", missing="none")))
        lacking = sum(1 for d in corpus.docs.values() if "tag" not in d)
        assert with_missing == {**corpus.counts("tag"), **({"none": lacking} if lacking else {})}
        # Under a parent bucket (the general path), each bucket's counts are its documents'.
        parents = {"terms": {"field": "tags", "size": 30}, "aggs": _terms("tag")["aggs"]}
        nested = search(node, "t", {"size": 0, "aggs": {"p": parents}})
        for bucket in nested["aggregations"]["p"]["buckets"]:
            parent = bucket["key"]
            want = corpus.counts("tag", lambda d, p=parent: p in d["tags"])
            assert _buckets(bucket) == want


def test_terms_counts_hold_under_concurrent_writes_refreshes_and_merges(node: Node) -> None:
    """Readers count while writers add and delete documents and refreshes and merges run: every
    answer counts one snapshot (its buckets sum to the values a `value_count` finds in the same
    answer); checked exactly against the corpus once the writers stop."""
    rng = random.Random(7)
    corpus = Corpus()
    for start in range(0, 1000, 250):
        _write(node, corpus, rng, range(start, start + 250))
    stop = threading.Event()
    failures: list[BaseException] = []
    done: list[int] = []

    def writer(seed: int) -> None:
        wrng = random.Random(seed)
        base = 10_000 * seed
        try:
            for round_ in range(12):
                _write(node, corpus, wrng, range(base + 40 * round_, base + 40 * round_ + 40))
                _delete(node, corpus, [base + 40 * round_ + j for j in range(0, 40, 5)])
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)
        finally:
            done.append(seed)
            if len(done) == 2:
                stop.set()

    def reader() -> None:
        try:
            while not stop.is_set():
                body = _terms("tag")
                body["aggs"]["values"] = {"value_count": {"field": "tag"}}
                response = search(node, "t", body)
                totals = _buckets(response)
                assert set(totals) <= set(TAGS)
                # One snapshot: the buckets hold every value the snapshot's documents hold.
                assert sum(totals.values()) == response["aggregations"]["values"]["value"]
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    # Merges from this thread (the merge worker process dies with the thread that started it).
    while not stop.is_set():
        if not any([shard.maybe_merge() for shard in node.indices["t"].shards]):
            stop.wait(0.005)  # nothing to merge yet: wait for the writers' next segments
    for t in threads:
        t.join()
    assert not failures, failures
    node.indices["t"].refresh()
    for field in ("tag", "tags"):
        assert _buckets(search(node, "t", _terms(field))) == corpus.counts(field)
