"""`dense_vector` fields and kNN search over HTTP with the official client: results equal a
brute-force numpy computation, with filters, beside a query, paged with a PIT, after merges and
restarts, with writers busy at the same time."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from conftest import running_server
from elasticsearch import ApiError, BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from tests.concurrency import readers_beside_writers

DIMS = 8
N = 300
SIMILARITIES = ("cosine", "dot_product", "l2_norm", "max_inner_product")


def vectors(n: int = N, dims: int = DIMS, seed: int = 7, unit: bool = False) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dims)).astype(np.float32)
    if unit:
        v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def expected_scores(stored: np.ndarray, query: np.ndarray, similarity: str) -> np.ndarray:
    """Elasticsearch's `_score` of each stored vector, computed here by brute force."""
    s, q = stored.astype(np.float64), np.asarray(query, dtype=np.float32).astype(np.float64)
    dots = s @ q
    if similarity == "cosine":
        return (1 + dots / (np.linalg.norm(s, axis=1) * np.linalg.norm(q))) / 2
    if similarity == "dot_product":
        return (1 + dots) / 2
    if similarity == "l2_norm":
        return 1 / (1 + np.sum((s - q) ** 2, axis=1))
    return np.where(dots < 0, 1 / (1 - dots), dots + 1)


def vector_index(
    es: Elasticsearch,
    new_index: Callable[..., str],
    similarity: str,
    stored: np.ndarray,
    suffix: str = "",
    **mapping: Any,
) -> str:
    index = new_index(
        suffix=suffix,
        mappings={
            "properties": {
                "v": {"type": "dense_vector", "dims": stored.shape[1], "similarity": similarity, **mapping},
                "group": {"type": "keyword"},
                "n": {"type": "long"},
                "text": {"type": "text"},
            }
        },
    )
    actions = [
        {
            "_index": index,
            "_id": str(i),
            "v": row.tolist(),
            "group": "even" if i % 2 == 0 else "odd",
            "n": i,
            "text": "red fox" if i % 5 == 0 else "blue whale",
        }
        for i, row in enumerate(stored)
    ]
    bulk(es, actions, refresh=True)
    return index


def top(scores: np.ndarray, k: int, candidates: np.ndarray | None = None) -> list[str]:
    ids = np.arange(len(scores)) if candidates is None else candidates
    order = sorted(ids.tolist(), key=lambda i: (-scores[i], i))
    return [str(i) for i in order[:k]]


def hit_ids(response: Any) -> list[str]:
    return [h["_id"] for h in response["hits"]["hits"]]


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_top_level_knn_equals_brute_force(
    es: Elasticsearch, new_index: Callable[..., str], similarity: str
) -> None:
    stored = vectors(unit=similarity == "dot_product")
    index = vector_index(es, new_index, similarity, stored)
    query = vectors(1, seed=99, unit=similarity == "dot_product")[0]
    found = es.search(
        index=index,
        knn={"field": "v", "query_vector": query.tolist(), "k": 10, "num_candidates": 50},
        size=10,
    )
    scores = expected_scores(stored, query, similarity)
    assert hit_ids(found) == top(scores, 10)
    assert found["hits"]["total"]["value"] == 10
    got = [h["_score"] for h in found["hits"]["hits"]]
    assert np.allclose(got, [scores[int(i)] for i in hit_ids(found)], rtol=1e-5)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.lists(st.floats(-10, 10, width=32), min_size=DIMS, max_size=DIMS).filter(
        lambda q: np.linalg.norm(q) > 1e-3
    ),
    k=st.integers(1, 40),
)
def test_any_query_vector_finds_the_exact_neighbours(
    es: Elasticsearch, l2_index: tuple[str, np.ndarray], query: list[float], k: int
) -> None:
    index, stored = l2_index
    found = es.search(
        index=index, knn={"field": "v", "query_vector": query, "k": k, "num_candidates": 100}, size=k
    )
    assert hit_ids(found) == top(expected_scores(stored, np.array(query), "l2_norm"), k)


@pytest.fixture
def l2_index(es: Elasticsearch, new_index: Callable[..., str]) -> tuple[str, np.ndarray]:
    stored = vectors()
    return vector_index(es, new_index, "l2_norm", stored), stored


def test_filter_and_similarity_restrict_the_candidates(
    es: Elasticsearch, l2_index: tuple[str, np.ndarray]
) -> None:
    index, stored = l2_index
    query = vectors(1, seed=3)[0]
    scores = expected_scores(stored, query, "l2_norm")
    knn = {"field": "v", "query_vector": query.tolist(), "k": 5, "num_candidates": 20}
    found = es.search(index=index, knn={**knn, "filter": {"term": {"group": "odd"}}})
    assert hit_ids(found) == top(scores, 5, np.arange(1, N, 2))
    distances = np.sqrt(1 / scores - 1)
    limit = float(np.sort(distances)[2])
    found = es.search(index=index, knn={**knn, "similarity": limit})
    assert hit_ids(found) == top(scores, 3)


def test_knn_with_a_query_sums_scores_over_the_union(
    es: Elasticsearch, l2_index: tuple[str, np.ndarray]
) -> None:
    index, stored = l2_index
    query = vectors(1, seed=4)[0]
    knn = {"field": "v", "query_vector": query.tolist(), "k": 5, "num_candidates": 10, "boost": 2.0}
    text = {"match": {"text": "fox"}}
    both = es.search(index=index, knn=knn, query=text, size=100)
    alone = es.search(index=index, query=text, size=100)
    vec = es.search(index=index, knn=knn, size=100)
    text_scores = {h["_id"]: h["_score"] for h in alone["hits"]["hits"]}
    vec_scores = {h["_id"]: h["_score"] for h in vec["hits"]["hits"]}
    expected = {i: text_scores.get(i, 0) + vec_scores.get(i, 0) for i in {*text_scores, *vec_scores}}
    got = {h["_id"]: h["_score"] for h in both["hits"]["hits"]}
    assert got.keys() == expected.keys()
    assert all(abs(got[i] - expected[i]) < 1e-4 for i in got)
    raw = es.search(index=index, knn={**knn, "boost": 1.0}, size=100)
    assert [h["_score"] * 2 for h in raw["hits"]["hits"]] == pytest.approx(
        [h["_score"] for h in vec["hits"]["hits"]]
    )


def test_the_knn_query_in_a_bool(es: Elasticsearch, l2_index: tuple[str, np.ndarray]) -> None:
    index, stored = l2_index
    query = vectors(1, seed=5)[0]
    found = es.search(
        index=index,
        query={
            "bool": {
                "must": [{"knn": {"field": "v", "query_vector": query.tolist(), "k": 7}}],
                "filter": [{"range": {"n": {"lt": 100}}}],
            }
        },  # fmt: skip
    )
    top7 = top(expected_scores(stored, query, "l2_norm"), 7)
    assert hit_ids(found) == [i for i in top7 if int(i) < 100]


def test_paging_a_knn_result_with_a_pit_is_stable(
    es: Elasticsearch, l2_index: tuple[str, np.ndarray]
) -> None:
    index, stored = l2_index
    query = vectors(1, seed=6)[0]
    knn = {"field": "v", "query_vector": query.tolist(), "k": 30, "num_candidates": 60}
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    try:
        # Writers change the index between pages: the PIT's pages do not see them.
        es.index(index=index, id="near", document={"v": query.tolist()}, refresh=True)
        es.delete(index=index, id=top(expected_scores(stored, query, "l2_norm"), 1)[0], refresh=True)
        seen: list[str] = []
        after = None
        while True:
            extra = {"search_after": after} if after else {}
            page = es.search(
                knn=knn, pit={"id": pit}, size=7, sort=[{"_score": "desc"}, {"_shard_doc": "asc"}], **extra
            )
            hits = page["hits"]["hits"]
            if not hits:
                break
            seen += [h["_id"] for h in hits]
            after = hits[-1]["sort"]
        assert seen == top(expected_scores(stored, query, "l2_norm"), 30)
    finally:
        es.close_point_in_time(id=pit)


def test_vectors_survive_merges_deletes_and_a_restart(tmp_path: Path) -> None:
    """Twelve small segments merged by the merge policy (in process, where the test drives the
    merges), a delete among them; then a server on the same data answers the same."""
    stored = vectors(120, seed=11)
    query = vectors(1, seed=12)[0]
    data = tmp_path / "data"
    node = leafsearch.Node(data, background=False)
    mapping = {"properties": {"v": {"type": "dense_vector", "dims": DIMS, "similarity": "l2_norm"}}}
    admin.create_index(node, "vec", {"mappings": mapping})
    for part in range(12):
        rows = range(part * 10, part * 10 + 10)
        lines = [
            orjson.dumps(x) for i in rows for x in ({"index": {"_id": str(i)}}, {"v": stored[i].tolist()})
        ]
        node.bulk(b"\n".join(lines) + b"\n", index="vec", refresh="true")
    node.delete_doc("vec", "5")
    node.indices["vec"].refresh()
    shard = node.indices["vec"].shards[0]
    merged = False
    while shard.maybe_merge():
        merged = True
    assert merged, "the merge policy did not merge"
    node.indices["vec"].refresh()
    alive = np.array([i for i in range(120) if i != 5])
    expected = top(expected_scores(stored, query, "l2_norm"), 10, alive)
    knn = {"field": "v", "query_vector": query.tolist(), "k": 10, "num_candidates": 10}
    assert hit_ids(search(node, "vec", {"knn": knn})) == expected
    node.close()
    with running_server(data) as (url, _):
        es = Elasticsearch(url)
        assert hit_ids(es.search(index="vec", knn=knn)) == expected
        assert es.get(index="vec", id="7")["_source"]["v"] == stored[7].tolist()


def test_vectors_are_returned_as_sent(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(
        mappings={"properties": {"v": {"type": "dense_vector", "dims": 3, "similarity": "l2_norm"}}}
    )
    es.index(index=index, id="1", document={"v": [1, 0.5, 1e-3]}, refresh=True)
    assert es.get(index=index, id="1")["_source"] == {"v": [1, 0.5, 1e-3]}
    found = es.search(
        index=index, knn={"field": "v", "query_vector": [1, 0.5, 0], "k": 1}, _source_excludes=[]
    )
    assert found["hits"]["hits"][0]["_source"] == {"v": [1, 0.5, 1e-3]}


def test_byte_vectors(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    stored = np.random.default_rng(1).integers(-128, 128, size=(60, 4)).astype(np.int8)
    index = vector_index(es, new_index, "l2_norm", stored.astype(np.float32), element_type="byte")
    found = es.search(index=index, knn={"field": "v", "query_vector": [3, -7, 100, 0], "k": 5})
    assert hit_ids(found) == top(expected_scores(stored, np.array([3, -7, 100, 0]), "l2_norm"), 5)
    dot_index = vector_index(
        es, new_index, "dot_product", stored.astype(np.float32), "dot", element_type="byte"
    )
    found = es.search(index=dot_index, knn={"field": "v", "query_vector": [3, -7, 100, 0], "k": 3})
    dots = stored.astype(np.float64) @ np.array([3, -7, 100, 0])
    expected = 0.5 + dots / (4 * 2**15)  # Elasticsearch's score of a byte dot product
    assert hit_ids(found) == top(expected, 3)
    assert [h["_score"] for h in found["hits"]["hits"]] == pytest.approx(sorted(expected)[::-1][:3], rel=1e-6)
    with pytest.raises(BadRequestError) as e:
        es.index(index=index, id="x", document={"v": [1, 2, 300, 4]})
    assert e.value.error == "document_parsing_exception"
    assert "[-128, 127]" in str(e.value.info)


@pytest.mark.parametrize(
    ("mapping", "reason"),
    [
        ({"dims": 0}, "The number of dimensions for field [v] should be in the range [1, 4096] but was [0]"),
        ({"dims": 4097}, "should be in the range [1, 4096] but was [4097]"),
        ({"dims": 3, "similarity": "hamming"}, "Unknown value [hamming] for field [similarity]"),
        ({"dims": 3, "element_type": "double"}, "Unknown value [double] for field [element_type]"),
        (
            {"dims": 3, "doc_values": True},
            "unknown parameter [doc_values] on mapper [v] of type [dense_vector]",
        ),
        ({"dims": 3, "index": False, "similarity": "cosine"}, "Field [similarity] can only be specified"),
        ({}, "is not supported by leafsearch"),
    ],
)
def test_mapping_validation(es: Elasticsearch, index_name: str, mapping: dict, reason: str) -> None:
    with pytest.raises(BadRequestError) as e:
        es.indices.create(
            index=index_name, mappings={"properties": {"v": {"type": "dense_vector", **mapping}}}
        )
    assert e.value.error == "mapper_parsing_exception"
    assert reason in str(e.value.info)
    assert not es.indices.exists(index=index_name)


def test_mapping_shows_the_defaults(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """As Elasticsearch 8.14+ shows them: `index`, `similarity` and, for an indexed float field,
    `index_options` (`int8_hnsw`, `m` and `ef_construction` filled in); none for byte vectors or
    a field that is not indexed."""
    properties = {
        "v": {"type": "dense_vector", "dims": 3},
        "b": {"type": "dense_vector", "dims": 3, "element_type": "byte"},
        "off": {"type": "dense_vector", "dims": 3, "index": False},
        "h": {"type": "dense_vector", "dims": 4, "index_options": {"type": "hnsw", "m": 8}},
        "f": {"type": "dense_vector", "dims": 4, "index_options": {"type": "int8_flat"}},
    }
    index = new_index(mappings={"properties": properties})
    mapping = es.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    default = {"type": "int8_hnsw", "m": 16, "ef_construction": 100}
    assert mapping["v"] == {
        "type": "dense_vector", "dims": 3, "index": True, "similarity": "cosine", "index_options": default
    }  # fmt: skip
    assert mapping["b"] == {"type": "dense_vector", "dims": 3, "element_type": "byte", "index": True,
                            "similarity": "cosine"}  # fmt: skip
    assert mapping["off"] == {"type": "dense_vector", "dims": 3, "index": False}
    assert mapping["h"]["index_options"] == {"type": "hnsw", "m": 8, "ef_construction": 100}
    assert mapping["f"]["index_options"] == {"type": "int8_flat"}
    # The same definition again, and the mapping as shown, are no change.
    es.indices.put_mapping(index=index, properties=properties)
    es.indices.put_mapping(index=index, properties=mapping)
    assert es.indices.get_mapping(index=index)[index]["mappings"]["properties"] == mapping


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([1.0, 2.0], "has a different number of dimensions [2] than defined in the mapping [3]"),
        ([0, 0, 0], "The [cosine] similarity does not support vectors with zero magnitude"),
        ("abc", "failed to parse field [v] of type [dense_vector]"),
        ([1, "x", 2], "failed to parse field [v] of type [dense_vector]"),
        ([1e39, 1, 1], "only support finite floating point values"),
    ],
)
def test_bad_vectors_are_refused_and_change_nothing(
    es: Elasticsearch, new_index: Callable[..., str], value: Any, reason: str
) -> None:
    index = new_index(mappings={"properties": {"v": {"type": "dense_vector", "dims": 3}}})
    with pytest.raises(BadRequestError) as e:
        es.index(index=index, id="1", document={"v": value}, refresh=True)
    assert e.value.error == "document_parsing_exception"
    assert reason in str(e.value.info)
    assert es.count(index=index)["count"] == 0


def test_dot_product_needs_unit_vectors(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(
        mappings={"properties": {"v": {"type": "dense_vector", "dims": 2, "similarity": "dot_product"}}}
    )
    es.index(index=index, id="1", document={"v": [0.6, 0.8]})
    with pytest.raises(BadRequestError) as e:
        es.index(index=index, id="2", document={"v": [1.0, 1.0]})
    assert "can only be used with unit-length vectors" in str(e.value.info)


Q = [1] * DIMS


@pytest.mark.parametrize(
    ("knn", "reason"),
    [
        (
            {"query_vector": [1, 2], "k": 3},
            "different number of dimensions [2] than the document vectors [8]",
        ),
        ({"field": "group", "query_vector": Q}, "[knn] queries are only supported on [dense_vector] fields"),
        ({"query_vector": Q, "k": 0}, "[k] must be greater than 0"),
        ({"query_vector": Q, "k": 10001}, "[k] cannot exceed [10000]"),
        ({"query_vector": Q, "k": 5, "num_candidates": 3}, "[num_candidates] cannot be less than [k]"),
        ({"query_vector": Q, "k": 5, "num_candidates": 10001}, "[num_candidates] cannot exceed [10000]"),
        ({"k": 5}, "[query_vector]"),
        ({"query_vector_builder": {}, "k": 5}, "is not supported by leafsearch"),
        ({"query_vector": Q, "inner_hits": {}}, "is not supported by leafsearch"),
        ({"query_vector": ["a"] * DIMS}, "[knn] failed to parse field [query_vector]"),
    ],
)
def test_bad_knn_requests_are_400(
    es: Elasticsearch, l2_index: tuple[str, np.ndarray], knn: dict, reason: str
) -> None:
    index, _ = l2_index
    with pytest.raises(ApiError) as e:
        es.search(index=index, knn={"field": "v"} | knn)
    assert e.value.meta.status == 400
    assert reason in str(e.value.info)


def test_several_shards_find_the_k_nearest_overall(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """A top-level `knn` keeps the `k` nearest over all shards, also beside a query; a `knn`
    query keeps each shard's `k` nearest, as in Elasticsearch."""
    stored = vectors(200, seed=31)
    mapping = {"properties": {"v": {"type": "dense_vector", "dims": DIMS, "similarity": "l2_norm"}}}
    index = new_index(settings={"number_of_shards": 3}, mappings=mapping)
    bulk(
        es,
        [{"_index": index, "_id": str(i), "v": row.tolist()} for i, row in enumerate(stored)],
        refresh=True,
    )
    query = vectors(1, seed=32)[0]
    found = es.search(index=index, knn={"field": "v", "query_vector": query.tolist(), "k": 5}, size=5)
    scores = expected_scores(stored, query, "l2_norm")
    assert hit_ids(found) == top(scores, 5)
    assert found["hits"]["total"]["value"] == 5
    knn = {"field": "v", "query_vector": query.tolist(), "k": 5}
    both = es.search(index=index, knn=knn, query={"ids": {"values": ["0", "1"]}}, size=20)
    assert set(hit_ids(both)) == {*top(scores, 5), "0", "1"}
    found = es.msearch(searches=[{"index": index}, {"knn": knn, "size": 20}])["responses"][0]
    assert hit_ids(found) == top(scores, 5)
    page = es.search(index=index, knn=knn, scroll="1m", size=3)
    try:
        rest = es.scroll(scroll_id=page["_scroll_id"], scroll="1m")
        assert hit_ids(page) + hit_ids(rest) == top(scores, 5)
    finally:
        es.clear_scroll(scroll_id=page["_scroll_id"])
    per_shard = es.search(index=index, query={"knn": knn}, size=20)
    assert hit_ids(per_shard)[:5] == top(scores, 5)
    assert per_shard["hits"]["total"]["value"] == 15


def test_mapping_updates_field_caps_and_partial_updates(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings={"properties": {"n": {"type": "long"}}})
    es.indices.put_mapping(
        index=index, properties={"v": {"type": "dense_vector", "dims": 2, "similarity": "l2_norm"}}
    )
    with pytest.raises(BadRequestError) as e:
        es.indices.put_mapping(index=index, properties={"v": {"type": "dense_vector", "dims": 3}})
    assert "Cannot update parameter [dims] from [2] to [3]" in str(e.value.info)
    caps = es.field_caps(index=index, fields="v")["fields"]["v"]["dense_vector"]
    assert (caps["searchable"], caps["aggregatable"]) == (True, False)
    es.index(index=index, id="a", document={"v": [0, 0], "n": 1})
    es.index(index=index, id="b", document={"v": [5, 5], "n": 2}, refresh=True)
    knn = {"field": "v", "query_vector": [5, 5], "k": 1}
    assert hit_ids(es.search(index=index, knn=knn)) == ["b"]
    es.update(index=index, id="a", doc={"v": [5, 5.5]}, refresh=True)
    es.update(index=index, id="b", doc={"v": None}, refresh=True)
    assert hit_ids(es.search(index=index, knn={**knn, "k": 5})) == ["a"]


def test_other_queries_on_a_vector_field(es: Elasticsearch, l2_index: tuple[str, np.ndarray]) -> None:
    index, _ = l2_index
    es.index(index=index, id="none", document={"text": "red fox"}, refresh=True)
    assert es.count(index=index, query={"exists": {"field": "v"}})["count"] == N
    # A query over every field skips the vectors.
    assert es.count(index=index, query={"query_string": {"query": "fox"}})["count"] == N // 5 + 1
    for query, kind in (({"term": {"v": 1}}, "term"), ({"range": {"v": {"gt": 1}}}, "range")):
        with pytest.raises(BadRequestError) as e:
            es.search(index=index, query=query)
        assert f"Field [v] of type [dense_vector] doesn't support {kind} queries" in str(e.value.info)


def test_concurrent_writers_and_knn_readers(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """Writers index vectors in small refreshed batches (the server merges them as they pile up)
    while readers search: every answer is the exact top k of the snapshot it was computed on,
    which a PIT pins so that the reader can list the documents it held."""
    mapping = {"properties": {"v": {"type": "dense_vector", "dims": DIMS, "similarity": "l2_norm"}}}
    index = new_index(mappings=mapping)
    stored = vectors(400, seed=21)
    query = vectors(1, seed=22)[0]
    scores = expected_scores(stored, query, "l2_norm")
    knn = {"field": "v", "query_vector": query.tolist(), "k": 5}

    def write(part: int) -> None:
        for start in range(part * 100, part * 100 + 100, 10):
            docs = [
                {"_index": index, "_id": str(i), "v": stored[i].tolist()} for i in range(start, start + 10)
            ]
            bulk(es, docs, refresh=True)

    def read() -> None:
        pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
        try:
            found = es.search(knn=knn, pit={"id": pit})
            held = es.search(pit={"id": pit}, size=1000, _source=False)
        finally:
            es.close_point_in_time(id=pit)
        visible = np.array([int(h["_id"]) for h in held["hits"]["hits"]], dtype=np.int64)
        assert hit_ids(found) == top(scores, 5, visible)

    readers_beside_writers([partial(write, part) for part in range(4)], read)
    found = es.search(index=index, knn={**knn, "k": 10})
    assert hit_ids(found) == top(scores, 10)
    assert es.count(index=index)["count"] == 400


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            "cosineSimilarity(params.q, 'v') + 1.0",
            lambda s, q: s @ q / np.linalg.norm(s, axis=1) / np.linalg.norm(q) + 1,
        ),
        ("dotProduct(params.q, doc['v']) + 100", lambda s, q: s @ q + 100),
        ("1 / (1 + l1norm(params.q, 'v'))", lambda s, q: 1 / (1 + np.abs(s - q).sum(axis=1))),
        ("1 / (1 + l2norm(params.q, 'v'))", lambda s, q: 1 / (1 + np.linalg.norm(s - q, axis=1))),
        ("doc['v'].magnitude + doc['v'].vectorValue[0] * 0", lambda s, q: np.linalg.norm(s, axis=1)),
    ],
)
def test_script_score_vector_functions(
    es: Elasticsearch, l2_index: tuple[str, np.ndarray], script: str, expected: Callable[..., np.ndarray]
) -> None:
    index, stored = l2_index
    query = vectors(1, seed=21)[0]
    found = es.search(
        index=index,
        query={
            "script_score": {
                "query": {"term": {"group": "even"}},
                "script": {"source": script, "params": {"q": query.tolist()}},
            }
        },
        size=10,
    )
    scores = expected(stored.astype(np.float64), query.astype(np.float64))
    even = np.arange(0, len(stored), 2)
    assert hit_ids(found) == top(scores, 10, even)
    got = [h["_score"] for h in found["hits"]["hits"]]
    assert got == pytest.approx([scores[int(i)] for i in hit_ids(found)], rel=1e-5)


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (
            "dotProduct(params.q, 'v')",
            "The query vector has a different number of dimensions [2] than the document vectors [8].",
        ),
        ("dotProduct(params.q, 'missing')", "No field found for [missing] in mapping"),
        ("hamming(params.q, 'v')", "different number of dimensions"),
    ],
)
def test_script_score_vector_function_errors(
    es: Elasticsearch, l2_index: tuple[str, np.ndarray], script: str, reason: str
) -> None:
    index, _ = l2_index
    with pytest.raises(BadRequestError) as e:
        es.search(
            index=index,
            query={
                "script_score": {
                    "query": {"match_all": {}},
                    "script": {"source": script, "params": {"q": [1, 2]}},
                }
            },
        )
    assert reason in str(e.value.info)


def test_a_document_without_a_vector_fails_a_vector_function(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(
        mappings={"properties": {"v": {"type": "dense_vector", "dims": 2, "similarity": "l2_norm"}}}
    )
    es.index(index=index, id="1", document={"v": [1, 2]})
    es.index(index=index, id="2", document={"other": 1}, refresh=True)
    script = {"source": "dotProduct(params.q, 'v')", "params": {"q": [1, 1]}}
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, query={"script_score": {"query": {"match_all": {}}, "script": script}})
    assert "A document doesn't have a value for a vector field!" in str(e.value.info)
    found = es.search(
        index=index, query={"script_score": {"query": {"exists": {"field": "v"}}, "script": script}}
    )
    assert [(h["_id"], h["_score"]) for h in found["hits"]["hits"]] == [("1", 3.0)]


def test_several_knn_clauses_sum_over_their_union(
    es: Elasticsearch, l2_index: tuple[str, np.ndarray]
) -> None:
    index, stored = l2_index
    first, second = vectors(2, seed=31)
    clauses = [
        {"field": "v", "query_vector": first.tolist(), "k": 6, "num_candidates": 20},
        {"field": "v", "query_vector": second.tolist(), "k": 4, "num_candidates": 20, "boost": 0.5},
    ]
    found = {h["_id"]: h["_score"] for h in es.search(index=index, knn=clauses, size=100)["hits"]["hits"]}
    expected: dict[str, float] = {}
    for q, k, boost in ((first, 6, 1.0), (second, 4, 0.5)):
        scores = expected_scores(stored, q, "l2_norm")
        for i in top(scores, k):
            expected[i] = expected.get(i, 0.0) + boost * scores[int(i)]
    assert found.keys() == expected.keys()
    assert all(found[i] == pytest.approx(expected[i], rel=1e-5) for i in found)
