"""kNN through a segment's HNSW graph (index/vector_graph.py), over HTTP with the official client:
recall against an exact numpy search, filters and deletes applied, a PIT walk stable, merges and a
restart keep the graph, writers busy beside readers; `index_options` checked as Elasticsearch does.

Each index here holds one segment of `N` vectors (at least `MIN_GRAPH_ROWS`, so it has a graph)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from conftest import running_server
from elasticsearch import BadRequestError, Elasticsearch
from inprocess import search

import leafsearch
from leafsearch.index.vector_graph import MIN_GRAPH_ROWS
from leafsearch.indices import admin

DIMS = 16
N = MIN_GRAPH_ROWS + 2_000
QUERIES = 20


def random_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


STORED = random_vectors(N, 1)
QUERY_VECTORS = random_vectors(QUERIES, 2)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hnsw") / "data"


@pytest.fixture(scope="module")
def es(data: Path) -> Iterator[Elasticsearch]:
    with running_server(data) as (url, _):
        client = Elasticsearch(url, request_timeout=120)
        yield client
        client.close()


def bulk_lines(rows: range, stored: np.ndarray) -> bytes:
    lines = []
    for i in rows:
        lines.append(orjson.dumps({"index": {"_id": str(i)}}))
        lines.append(
            orjson.dumps({"v": stored[i].tolist(), "group": "even" if i % 2 == 0 else "odd", "n": i})
        )
    return b"\n".join(lines) + b"\n"


def create(es: Elasticsearch, name: str, similarity: str = "cosine", **options: Any) -> str:
    """An index of one shard whose `N` vectors are one segment (no refresh until all are in)."""
    field = {"type": "dense_vector", "dims": DIMS, "similarity": similarity, **options}
    es.indices.create(
        index=name,
        settings={"number_of_shards": 1, "refresh_interval": -1},
        mappings={"properties": {"v": field, "group": {"type": "keyword"}, "n": {"type": "long"}}},
    )
    response = es.bulk(index=name, operations=bulk_lines(range(N), STORED))
    assert not response["errors"]
    es.indices.refresh(index=name)
    return name


def graph_files(data: Path) -> list[Path]:
    return list(data.rglob("*.usearch"))


def exact(query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[str]:
    scores = STORED @ query
    rows = np.arange(N) if allowed is None else allowed
    best = rows[np.argsort(-scores[rows], kind="stable")[:k]]
    return [str(i) for i in best]


def knn_ids(es: Elasticsearch, index: str, query: np.ndarray, k: int = 10, **extra: Any) -> list[str]:
    knn = {"field": "v", "query_vector": query.tolist(), "k": k, "num_candidates": 100, **extra}
    return [h["_id"] for h in es.search(index=index, knn=knn, size=k, source=False)["hits"]["hits"]]


def recall(found: list[list[str]], expected: list[list[str]]) -> float:
    return sum(len(set(f) & set(e)) for f, e in zip(found, expected, strict=True)) / sum(map(len, expected))


@pytest.fixture(scope="module")
def graph_index(es: Elasticsearch, data: Path) -> str:
    before = set(graph_files(data))
    index = create(es, "hnsw")
    assert set(graph_files(data)) - before, "the segment has no graph"
    return index


def test_recall_against_exact_search(es: Elasticsearch, graph_index: str) -> None:
    found = [knn_ids(es, graph_index, q) for q in QUERY_VECTORS]
    assert recall(found, [exact(q, 10) for q in QUERY_VECTORS]) >= 0.9
    hit = es.search(index=graph_index, knn={"field": "v", "query_vector": QUERY_VECTORS[0].tolist(), "k": 1})
    top = hit["hits"]["hits"][0]
    cosine = float(STORED[int(top["_id"])] @ QUERY_VECTORS[0])
    assert top["_score"] == pytest.approx((1 + cosine) / 2, rel=1e-5)  # scored exactly


@pytest.mark.parametrize(
    ("filter_", "keep"),
    [
        ({"range": {"n": {"gte": N // 4}}}, lambda i: i >= N // 4),  # the graph, widened
        ({"term": {"group": "even"}}, lambda i: i % 2 == 0),  # exact: cheaper than 2x candidates
        ({"range": {"n": {"lt": 300}}}, lambda i: i < 300),  # few left: exact
    ],
)
def test_filtered_knn(es: Elasticsearch, graph_index: str, filter_: dict, keep: Any) -> None:
    allowed = np.array([i for i in range(N) if keep(i)])
    found = [knn_ids(es, graph_index, q, filter=filter_) for q in QUERY_VECTORS]
    assert all(keep(int(i)) for ids in found for i in ids)
    assert all(len(ids) == 10 for ids in found)
    assert recall(found, [exact(q, 10, allowed) for q in QUERY_VECTORS]) >= 0.9


def test_deletes_are_respected(es: Elasticsearch, data: Path) -> None:
    index = create(es, "hnsw-deletes", "dot_product")
    query = QUERY_VECTORS[3]
    gone = exact(query, 50)
    es.bulk(index=index, operations=[{"delete": {"_id": i}} for i in gone], refresh=True)
    alive = np.array(sorted(set(range(N)) - {int(i) for i in gone}))
    found = [knn_ids(es, index, q) for q in QUERY_VECTORS]
    assert not set(gone) & {i for ids in found for i in ids}
    assert recall(found, [exact(q, 10, alive) for q in QUERY_VECTORS]) >= 0.9
    es.indices.delete(index=index)


def test_a_pit_walk_is_stable_with_writers_beside(es: Elasticsearch, graph_index: str) -> None:
    pit = es.open_point_in_time(index=graph_index, keep_alive="1m")["id"]
    knn = {"field": "v", "query_vector": QUERY_VECTORS[5].tolist(), "k": 40, "num_candidates": 100}
    whole = es.search(pit={"id": pit}, knn=knn, size=40, source=False)["hits"]["hits"]
    stop = threading.Event()

    def write() -> None:  # deletes and re-adds the nearest documents while the walk runs
        writer = Elasticsearch(es.transport.node_pool.get().base_url, request_timeout=60)
        i = 0
        while not stop.is_set():
            doc = whole[i % len(whole)]["_id"]
            writer.delete(index=graph_index, id=doc, refresh=True)
            writer.index(index=graph_index, id=doc, document={"v": STORED[int(doc)].tolist()}, refresh=True)
            i += 1
        writer.close()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        pages = []
        for start in range(0, 40, 8):
            page = es.search(pit={"id": pit}, knn=knn, size=8, from_=start, source=False)["hits"]["hits"]
            pages.extend(page)
    finally:
        stop.set()
        thread.join()
    es.close_point_in_time(id=pit)
    assert [(h["_id"], h["_score"]) for h in pages] == [(h["_id"], h["_score"]) for h in whole]


def test_concurrent_writers_and_readers(es: Elasticsearch) -> None:
    index = create(es, "hnsw-busy", "l2_norm")
    extra = random_vectors(600, 9)
    errors: list[BaseException] = []

    def write(part: int) -> None:
        try:
            client = Elasticsearch(es.transport.node_pool.get().base_url, request_timeout=60)
            for i in range(part, 600, 3):
                client.index(index=index, id=f"x{i}", document={"v": extra[i].tolist(), "n": -1})
                if i % 30 == 0:
                    client.indices.refresh(index=index)
            client.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def read() -> None:
        try:
            client = Elasticsearch(es.transport.node_pool.get().base_url, request_timeout=60)
            for q in QUERY_VECTORS:
                hits = client.search(
                    index=index, knn={"field": "v", "query_vector": q.tolist(), "k": 10}, size=10
                )["hits"]["hits"]
                assert len(hits) == 10
                scores = [h["_score"] for h in hits]
                assert scores == sorted(scores, reverse=True)
            client.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in range(3)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    es.indices.refresh(index=index)
    assert es.count(index=index)["count"] == N + 600
    everything = np.concatenate([STORED, extra])
    for q in QUERY_VECTORS[:5]:
        distances = np.linalg.norm(everything - q, axis=1)
        expected = [str(i) if i < N else f"x{i - N}" for i in np.argsort(distances, kind="stable")[:10]]
        assert len(set(knn_ids(es, index, q)) & set(expected)) >= 8
    es.indices.delete(index=index)


@pytest.mark.parametrize("options", [{"type": "flat"}, {"type": "int8_flat"}])
def test_flat_index_options_search_exactly(es: Elasticsearch, data: Path, options: dict) -> None:
    before = set(graph_files(data))
    index = create(es, f"flat-{options['type'].replace('_', '-')}", index_options=options)
    assert set(graph_files(data)) == before
    found = [knn_ids(es, index, q, num_candidates=10) for q in QUERY_VECTORS[:5]]
    assert found == [exact(q, 10) for q in QUERY_VECTORS[:5]]
    es.indices.delete(index=index)


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({}, "[index_options] requires field [type] to be configured"),
        ({"type": "ivf"}, "Unknown vector index options type [ivf] for field [v]"),
        ({"type": "hnsw", "m": 0}, "maxConn must be positive and less than or equal to 512; maxConn=0"),
        (
            {"type": "hnsw", "ef_construction": 5000},
            "beamWidth must be positive and less than or equal to 3200",
        ),
        ({"type": "hnsw", "m": "many"}, "is not an integer"),
        ({"type": "flat", "m": 16}, "Mapping definition for [v] has unsupported parameters:  [m : 16]"),
        ({"type": "hnsw", "nlist": 4}, "has unsupported parameters:  [nlist : 4]"),
    ],
)
def test_bad_index_options_are_refused(es: Elasticsearch, options: dict, reason: str) -> None:
    field = {"type": "dense_vector", "dims": 4, "similarity": "l2_norm", "index_options": options}
    with pytest.raises(BadRequestError) as e:
        es.indices.create(index="bad-options", mappings={"properties": {"v": field}})
    assert e.value.error == "mapper_parsing_exception"
    assert reason in str(e.value.info)
    assert not es.indices.exists(index="bad-options")


def test_int8_options_need_float_vectors(es: Elasticsearch) -> None:
    field = {
        "type": "dense_vector",
        "dims": 4,
        "element_type": "byte",
        "index_options": {"type": "int8_hnsw"},
    }
    with pytest.raises(BadRequestError) as e:
        es.indices.create(index="bad-options", mappings={"properties": {"v": field}})
    assert "[element_type] cannot be [byte] when using index type [int8_hnsw]" in str(e.value.info)


def test_merges_rebuild_the_graph_and_a_restart_keeps_it(tmp_path: Path) -> None:
    """A segment with a third of its documents deleted is merged (in process, where the test
    drives merges): the merged rows get a new graph; a server on the same data answers the same."""
    data = tmp_path / "data"
    node = leafsearch.Node(data, background=False)
    field = {"type": "dense_vector", "dims": DIMS, "similarity": "l2_norm", "index_options": {"type": "hnsw"}}
    admin.create_index(node, "vec", {"mappings": {"properties": {"v": field, "n": {"type": "long"}}}})
    total = N + 6_000
    stored = np.concatenate([STORED, random_vectors(6_000, 5)])
    node.bulk(bulk_lines(range(total), stored), index="vec", refresh="true")
    gone = range(0, total, 3)
    node.bulk(b"".join(orjson.dumps({"delete": {"_id": str(i)}}) + b"\n" for i in gone), index="vec")
    node.indices["vec"].refresh()
    graphs_before = set(graph_files(data))
    shard = node.indices["vec"].shards[0]
    merged = False
    while shard.maybe_merge():
        merged = True
    assert merged, "the merge policy did not merge"
    node.indices["vec"].refresh()
    graphs_after = set(graph_files(data))
    assert graphs_after and graphs_after != graphs_before
    alive = np.array([i for i in range(total) if i % 3])
    expected = []
    for q in QUERY_VECTORS:
        distances = np.linalg.norm(stored[alive] - q, axis=1)
        expected.append([str(i) for i in alive[np.argsort(distances, kind="stable")[:10]]])
    knn = [{"field": "v", "query_vector": q.tolist(), "k": 10, "num_candidates": 100} for q in QUERY_VECTORS]
    found = [[h["_id"] for h in search(node, "vec", {"knn": k})["hits"]["hits"]] for k in knn]
    assert recall(found, expected) >= 0.9
    node.close()
    with running_server(data) as (url, _):
        client = Elasticsearch(url, request_timeout=60)
        again = [[h["_id"] for h in client.search(index="vec", knn=k)["hits"]["hits"]] for k in knn]
        client.close()
    assert again == found
