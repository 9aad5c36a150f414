"""`dense_vector` values: the checks a vector passes before it is indexed, and the exact
similarity of a query vector to every vector of a segment column, as Elasticsearch turns it into
a `_score`.

A segment keeps a vector field as one (n, dims) array (float32, or int8 for `element_type: byte`)
of the documents holding a vector, beside their doc numbers (columns.VectorColumn). Scoring is one
matrix-vector product over that array: exact, with no per-document Python work.
"""

from __future__ import annotations

import math

import numpy as np

MAX_DIMS = 4096
ELEMENT_TYPES = ("float", "byte")
SIMILARITIES = ("l2_norm", "dot_product", "cosine", "max_inner_product")
#: How far from 1 a `dot_product` float vector's length may be (Elasticsearch's tolerance).
_UNIT_EPSILON = 1e-4


def dtype_of(element_type: str) -> type:
    return np.int8 if element_type == "byte" else np.float32


def preview(values: list) -> str:
    """A vector as Elasticsearch previews it in errors: its first ten values as Java floats."""
    shown = ", ".join(_java_float(v) for v in values[:10])
    return f"[{shown}{', ...' if len(values) > 10 else ''}]"


def _java_float(v: float) -> str:
    f = float(np.float32(v))
    return repr(f) if math.isfinite(f) else ("NaN" if f != f else ("Infinity" if f > 0 else "-Infinity"))


def vector_problem(values: list, element_type: str, similarity: str | None) -> str | None:
    """Why Elasticsearch refuses a vector of numbers (right length already checked), or None."""
    if element_type == "byte":
        for i, v in enumerate(values):
            if type(v) is float and not v.is_integer() or not -128 <= v <= 127:
                return (
                    f"element_type [byte] vectors only support integers between [-128, 127] but found "
                    f"[{v}] at dim [{i}]; Preview of invalid vector: {preview(values)}"
                )
        arr = np.asarray(values, dtype=np.float32)
    else:
        arr = np.asarray(values, dtype=np.float32)
        if not np.isfinite(arr).all():
            i = int(np.flatnonzero(~np.isfinite(arr))[0])
            return (
                f"element_type [float] vectors only support finite floating point values, but got "
                f"[{_java_float(values[i])}] at dim [{i}]; Preview of invalid vector: {preview(values)}"
            )
    norm2 = float(np.dot(arr.astype(np.float64), arr.astype(np.float64)))
    if similarity == "cosine" and norm2 == 0.0:
        return (
            "The [cosine] similarity does not support vectors with zero magnitude. "
            f"Preview of invalid vector: {preview(values)}"
        )
    if similarity == "dot_product" and element_type == "float" and abs(norm2 - 1.0) > _UNIT_EPSILON:
        return (
            "The [dot_product] similarity can only be used with unit-length vectors. "
            f"Preview of invalid vector: {preview(values)}"
        )
    return None


#: Rows of a segment's vectors scored at a time: the float64 copy of a block is what a kNN search
#: allocates beside its answer (8,192 rows of 4,096 dims: 256 MiB at most, 24 MiB at 384 dims).
BLOCK_ROWS = 8192


def similarities(stored: np.ndarray, rows: np.ndarray, query: np.ndarray, similarity: str) -> np.ndarray:
    """`raw_similarity` of the `rows` of a segment's (memory-mapped) vectors, block by block."""
    out = np.empty(len(rows), dtype=np.float64)
    for start in range(0, len(rows), BLOCK_ROWS):
        block = np.asarray(stored[rows[start : start + BLOCK_ROWS]], dtype=np.float64)
        out[start : start + len(block)] = raw_similarity(block, query, similarity)
    return out


def raw_similarity(vectors: np.ndarray, query: np.ndarray, similarity: str) -> np.ndarray:
    """The similarity of `query` (float64, (dims,)) to each row of `vectors` (float64): the
    cosine, the dot product, or for `l2_norm` the euclidean distance."""
    if similarity == "l2_norm":
        diff = vectors - query
        return np.sqrt(np.einsum("ij,ij->i", diff, diff))
    dots = vectors @ query
    if similarity == "cosine":
        norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors)) * math.sqrt(float(query @ query))
        return dots / norms
    return dots


def to_score(raw: np.ndarray, similarity: str, element_type: str, dims: int) -> np.ndarray:
    """Elasticsearch's `_score` of a raw similarity (always positive, higher is nearer)."""
    if similarity == "l2_norm":
        return 1.0 / (1.0 + raw * raw)
    if similarity == "cosine":
        return (1.0 + raw) / 2.0
    if similarity == "dot_product":
        if element_type == "byte":
            return 0.5 + raw / (dims * float(1 << 15))
        return (1.0 + raw) / 2.0
    return np.where(raw < 0, 1.0 / (1.0 - np.minimum(raw, 0)), raw + 1.0)  # max_inner_product


def passes(raw: np.ndarray, similarity: str, threshold: float) -> np.ndarray:
    """kNN's `similarity` option: a largest distance for `l2_norm`, a least similarity otherwise."""
    return raw <= threshold if similarity == "l2_norm" else raw >= threshold
