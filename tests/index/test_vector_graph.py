"""A segment column's HNSW graph (index/vector_graph.py): which graph `index_options` choose, and
how a filtered search takes its candidates from the graph or leaves them to an exact pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from leafsearch.index import vector_graph
from leafsearch.index.vector_graph import Graph, GraphSpec, candidate_rows, spec_of


@pytest.mark.parametrize(
    ("similarity", "element_type", "options", "expected"),
    [
        ("cosine", "float", None, GraphSpec("ip", "i8", 16, 100, normalize=True)),
        ("dot_product", "float", {"type": "int8_hnsw", "m": 8}, GraphSpec("ip", "i8", 8, 100)),
        ("l2_norm", "float", {"type": "int8_hnsw"}, GraphSpec("l2sq", "f32", 16, 100)),
        ("cosine", "float", {"type": "hnsw", "ef_construction": 50}, GraphSpec("cos", "f32", 16, 50)),
        ("l2_norm", "byte", None, GraphSpec("l2sq", "f16", 16, 100)),
        ("max_inner_product", "float", {"type": "hnsw"}, GraphSpec("ip", "f32", 16, 100)),
        ("cosine", "float", {"type": "flat"}, None),
        ("cosine", "float", {"type": "int8_flat"}, None),
    ],
)
def test_index_options_choose_the_graph(
    similarity: str, element_type: str, options: dict | None, expected: GraphSpec | None
) -> None:
    assert spec_of(similarity, element_type, options) == expected


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Graph, np.ndarray]:
    rows = np.random.default_rng(3).normal(size=(vector_graph.MIN_GRAPH_ROWS, 16)).astype(np.float32)
    spec = GraphSpec("l2sq", "f32", 16, 100)
    path = Path(tmp_path_factory.mktemp("graph")) / "g.usearch"
    vector_graph.build(rows, spec, path)
    return Graph(path, spec), rows


def test_a_filtered_search_widens_until_enough_allowed_rows_come_back(
    graph: tuple[Graph, np.ndarray],
) -> None:
    g, rows = graph
    allowed = np.arange(len(rows)) % 4 != 0  # three quarters
    query = rows[7] + 0.01
    found = candidate_rows(g, query, 100, allowed, int(allowed.sum()))
    assert found is not None and len(found) == 100
    assert allowed[found].all()
    exact = np.flatnonzero(allowed)[np.argsort(np.linalg.norm(rows[allowed] - query, axis=1))[:10]]
    assert len(set(found[:10].tolist()) & set(exact.tolist())) >= 9


def test_a_selective_filter_is_left_to_the_exact_pass(graph: tuple[Graph, np.ndarray]) -> None:
    g, rows = graph
    allowed = np.zeros(len(rows), dtype=bool)
    allowed[:500] = True
    assert candidate_rows(g, rows[0], 100, allowed, 500) is None
