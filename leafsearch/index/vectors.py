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


def preview(values: list) -> str:
    """A vector as Elasticsearch previews it in errors: its first ten values as Java floats."""
    shown = ", ".join(_java_float(v) for v in values[:10])
    return f"[{shown}{', ...' if len(values) > 10 else ''}]"


def _java_float(v: float) -> str:
    f = float(np.float32(v))
    return repr(f) if math.isfinite(f) else ("NaN" if f != f else ("Infinity" if f > 0 else "-Infinity"))


def vector_problem(
    values: list, element_type: str, similarity: str | None, array: np.ndarray | None = None
) -> str | None:
    """Why Elasticsearch refuses a vector of numbers (right length already checked), or None;
    `array`: the values as float32 when the caller has them."""
    if element_type == "byte":
        exact = np.asarray(values, dtype=np.float64)
        bad = (exact != np.round(exact)) | (exact < -128) | (exact > 127)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return (
                f"element_type [byte] vectors only support integers between [-128, 127] but found "
                f"[{values[i]}] at dim [{i}]; Preview of invalid vector: {preview(values)}"
            )
        arr = exact.astype(np.float32)
    else:
        arr = np.asarray(values, dtype=np.float32) if array is None else array
        if not np.isfinite(arr).all():
            i = int(np.flatnonzero(~np.isfinite(arr))[0])
            return (
                f"element_type [float] vectors only support finite floating point values, but got "
                f"[{_java_float(values[i])}] at dim [{i}]; Preview of invalid vector: {preview(values)}"
            )
    if similarity not in ("cosine", "dot_product"):
        return None
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


#: Rows of a segment's vectors scored at a time: what a kNN search allocates beside its answer is
#: a block's float32 copy (a byte field's, a filtered search's rows) and temporaries of its size:
#: 8,192 rows of 4,096 dims is 128 MiB at most, 12 MiB at 384 dims.
BLOCK_ROWS = 8192


def similarities(stored: np.ndarray, rows: np.ndarray, query: np.ndarray, similarity: str) -> np.ndarray:
    """The raw similarity (the cosine, the dot product, or for `l2_norm` the euclidean distance)
    of `query` (float32, (dims,)) to the `rows` of a segment's memory-mapped vectors, block by
    block, in float32 as Elasticsearch computes it; float64 out."""
    out = np.empty(len(rows), dtype=np.float64)
    every_row = len(rows) == len(stored)
    q_norm = float(np.sqrt(query @ query))
    for start in range(0, len(rows), BLOCK_ROWS):
        end = min(start + BLOCK_ROWS, len(rows))
        block = stored[start:end] if every_row else stored[rows[start:end]]
        block = np.asarray(block, dtype=np.float32)
        if similarity == "l2_norm":
            diff = block - query
            out[start:end] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
            continue
        dots = block @ query
        if similarity == "cosine":
            dots = dots / (np.sqrt(np.einsum("ij,ij->i", block, block)) * np.float32(q_norm))
        out[start:end] = dots
    return out


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
