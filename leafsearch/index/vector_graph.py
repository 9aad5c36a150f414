"""The approximate (HNSW) index of a `dense_vector` field in one segment, built with usearch.

A segment whose vector column holds at least `MIN_GRAPH_ROWS` vectors gets a graph beside its
arrays (`f<number>.hnsw.usearch`), written with the segment (by the flush thread or the search
worker that builds a buffer's segment, by the merge worker for a merge: a merge rebuilds it from
the merged rows) and memory-mapped (`Index.restore(view=True)`) when a search first opens the
column. The graph's keys are the column's rows, so a search's candidates index `VectorColumn.docs`
and `vectors` directly; every candidate is then scored exactly from the float32/int8 rows
(index/vectors.py), so a `_score` is always Elasticsearch's, whatever precision the graph keeps.

`index_options` (Elasticsearch 8's) choose the graph: `hnsw` keeps float32 vectors (byte vectors
as float16, which holds every int8 exactly), `int8_hnsw` (Elasticsearch's default for float
vectors) int8 ones for the unit-length similarities (`cosine` rows normalised first,
`dot_product`), float32 otherwise; `int4_hnsw` and `bbq_hnsw` are built as `int8_hnsw`. `m` is
usearch's connectivity, `ef_construction` its expansion when adding. The `flat` types keep no
graph: search stays exact. Why usearch: see bench/RESULTS.md "Vectors".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Index option types that build a graph, and those that keep search exact.
GRAPH_TYPES = ("hnsw", "int8_hnsw", "int4_hnsw", "bbq_hnsw")
FLAT_TYPES = ("flat", "int8_flat", "int4_flat", "bbq_flat")
#: Lucene's defaults and bounds for `m` (maxConn) and `ef_construction` (beamWidth).
DEFAULT_M = 16
DEFAULT_EF_CONSTRUCTION = 100
MAX_M = 512
MAX_EF_CONSTRUCTION = 3200
#: A column with fewer vectors gets no graph: an exact pass over it costs less than the graph's
#: build, and about what a graph search costs (bench/RESULTS.md, "Vectors").
MIN_GRAPH_ROWS = 10_000
#: Rows an exact pass scores for the cost of one graph candidate (measured, RESULTS.md): a
#: segment whose filter keeps fewer than this many rows per candidate wanted is scored exactly.
ROWS_PER_CANDIDATE = 32
#: How many times a filtered graph search widens (doubling) before the exact pass takes over.
_WIDENINGS = 4


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """How a field's graph is built: usearch's metric and stored precision, `m`, `ef_construction`."""

    metric: str  # "cos", "ip" or "l2sq"
    dtype: str  # "f32", "f16" or "i8"
    m: int
    ef_construction: int
    normalize: bool = False  # rows (and queries) made unit-length first: `cosine` stored as int8

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_meta(meta: dict[str, Any]) -> GraphSpec:
        return GraphSpec(**meta)


def spec_of(similarity: str, element_type: str, options: dict[str, Any] | None) -> GraphSpec | None:
    """The graph of a mapped, indexed field (None: a `flat` type, exact search)."""
    kind = (options or {}).get("type", "int8_hnsw" if element_type == "float" else "hnsw")
    if kind in FLAT_TYPES:
        return None
    m = int((options or {}).get("m", DEFAULT_M))  # checked by `options_problem`
    ef = int((options or {}).get("ef_construction", DEFAULT_EF_CONSTRUCTION))
    metric = {"l2_norm": "l2sq", "cosine": "cos"}.get(similarity, "ip")
    if element_type == "byte":
        return GraphSpec(metric, "f16", m, ef)
    if kind != "hnsw" and similarity in ("cosine", "dot_product"):
        return GraphSpec("ip", "i8", m, ef, normalize=similarity == "cosine")
    return GraphSpec(metric, "f32", m, ef)


def options_problem(options: dict[str, Any], name: str, dims: int, element_type: str) -> str | None:
    """Why Elasticsearch 8 refuses a field's `index_options`, or None."""
    if "type" not in options or options["type"] is None:
        return "[index_options] requires field [type] to be configured"
    kind = options["type"]
    if kind not in GRAPH_TYPES + FLAT_TYPES:
        return f"Unknown vector index options type [{kind}] for field [{name}]"
    known = {"type"} | ({"m", "ef_construction"} if kind in GRAPH_TYPES else set())
    if kind.startswith(("int8_", "int4_")):
        known.add("confidence_interval")
    unknown = [f"[{k} : {_java_text(v)}]" for k, v in options.items() if k not in known]
    if unknown:
        return f"Mapping definition for [{name}] has unsupported parameters:  {' '.join(unknown)}"
    bounds = (("m", "maxConn", MAX_M), ("ef_construction", "beamWidth", MAX_EF_CONSTRUCTION))
    for key, lucene, bound in bounds:
        value = options.get(key, 1)
        number = type(value) is float and abs(value) < 2**31
        if number or type(value) is str and value.strip().lstrip("+-").isdigit():
            value = int(value)  # as Elasticsearch's nodeIntegerValue: a number's int value
        if type(value) is not int:
            return f"[{key}] of [index_options] on field [{name}]: [{value}] is not an integer"
        if not 0 < value <= bound:
            return f"{lucene} must be positive and less than or equal to {bound}; {lucene}={value}"
    if element_type != "float" and kind not in ("hnsw", "flat"):
        return f"[element_type] cannot be [{element_type}] when using index type [{kind}]"
    if kind.startswith("int4_") and dims % 2 or kind.startswith("bbq_") and dims < 64:
        return f"{kind} only supports even dimensions; provided={dims}"
    return None


def shown_options(options: dict[str, Any] | None, element_type: str) -> dict[str, Any] | None:
    """A field's `index_options` as Elasticsearch 8 keeps and shows them: a graph type's `m` and
    `ef_construction` filled in with their defaults, and `int8_hnsw` for an indexed float field
    that names none (Elasticsearch's default since 8.14); None for a byte field naming none.
    `options` passed `options_problem`."""
    if options is None:
        if element_type != "float":
            return None
        options = {"type": "int8_hnsw"}
    shown = dict(options)
    if shown["type"] in GRAPH_TYPES:
        shown["m"] = int(shown.get("m", DEFAULT_M))
        shown["ef_construction"] = int(shown.get("ef_construction", DEFAULT_EF_CONSTRUCTION))
    return shown


def _java_text(value: Any) -> str:
    return str(value).lower() if type(value) is bool else "null" if value is None else str(value)


def _prepared(vectors: np.ndarray, spec: GraphSpec) -> np.ndarray:
    rows = np.asarray(vectors, dtype=np.float32)
    if spec.normalize:
        rows = rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), np.float32(1e-30))
    return rows


def build(vectors: np.ndarray, spec: GraphSpec, path: Path) -> None:
    """Write the graph of `vectors` (keys: their rows) to `path`."""
    from usearch.index import Index

    graph = Index(
        ndim=vectors.shape[1],
        metric=spec.metric,
        dtype=spec.dtype,
        connectivity=spec.m,
        expansion_add=spec.ef_construction,
        enable_key_lookups=False,
    )
    keys = np.arange(len(vectors), dtype=np.uint64)
    block = 65_536  # a float32 copy of this many rows at a time, not of the whole column
    for start in range(0, len(vectors), block):
        graph.add(keys[start : start + block], _prepared(vectors[start : start + block], spec), threads=0)
    graph.save(str(path))


class Graph:
    """A segment column's graph, memory-mapped."""

    def __init__(self, path: Path, spec: GraphSpec) -> None:
        from usearch.index import Index

        self.spec = spec
        self._index = Index.restore(str(path), view=True)
        if self._index is None:
            raise OSError(f"unreadable vector graph [{path}]")
        self.size = len(self._index)

    def rows(self, query: np.ndarray, count: int) -> np.ndarray:
        """The rows of the about `count` nearest vectors to `query`, nearest first. usearch's
        beam is `count` wide (its `expansion_search`, never changed here, is smaller), so the
        answer depends on nothing else: the same on every page of a PIT, whatever threads run."""
        count = min(count, self.size)
        found = self._index.search(_prepared(query, self.spec), count, threads=1)
        return np.asarray(found.keys, dtype=np.int64)


def candidate_rows(
    graph: Graph, query: np.ndarray, wanted: int, allowed: np.ndarray, n_allowed: int
) -> np.ndarray | None:
    """The graph's `wanted` nearest rows among the `allowed` ones (a bool per row), or None when
    an exact pass over the allowed rows costs less: the graph is searched for `wanted` divided by
    the fraction of rows allowed, widened until enough allowed rows come back."""
    wanted = min(wanted, n_allowed)
    count = int(np.ceil(wanted * len(allowed) / max(n_allowed, 1)))
    for _ in range(_WIDENINGS):
        if count * ROWS_PER_CANDIDATE > n_allowed:
            return None
        rows = graph.rows(query, count)
        rows = rows[allowed[rows]]
        if len(rows) >= wanted or count >= graph.size:
            return rows[:wanted]
        count *= 2
    return None
