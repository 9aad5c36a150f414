"""Painless's vector functions of a score script: `cosineSimilarity`, `dotProduct`, `l1norm`,
`l2norm` and `hamming` of a query vector and a document's `dense_vector` (named by a string, or
`doc['field']`), and `doc['field'].vectorValue` / `.magnitude`, as Elasticsearch computes them:
the document's vector as stored (float32, or bytes), the query vector as float32."""

from __future__ import annotations

from typing import Any

import numpy as np

from leafsearch.scripts.runtime import Doc, DocValues, ScriptError

MISSING = "A document doesn't have a value for a vector field!"
NAMES = frozenset({"cosineSimilarity", "dotProduct", "l1norm", "l2norm", "hamming"})


def _fail(source: str, offset: int, reason: str) -> ScriptError:
    return ScriptError("runtime error", source, offset, "illegal_argument_exception", reason)


def stored_vector(values: DocValues, source: str, offset: int) -> np.ndarray:
    """The document's vector of a `doc['field']` (its only value)."""
    if not values.values or not isinstance(values.values[0], np.ndarray):
        raise _fail(source, offset, MISSING)
    return values.values[0]


def call(name: str, arguments: list[Any], doc: Any, source: str, offset: int) -> float:
    """`name(queryVector, field)` for the current document of `doc`."""
    if len(arguments) != 2:
        raise _fail(source, offset, f"Unknown call [{name}] with [{len(arguments)}] arguments.")
    query_value, field = arguments
    if isinstance(field, str):
        if not isinstance(doc, Doc):
            raise _fail(source, offset, f"[{name}] needs a document's vector")
        values = doc.lookup(field)
        if values is None:
            raise _fail(source, offset, f"No field found for [{field}] in mapping")
    elif isinstance(field, DocValues):
        values = field
    else:
        raise _fail(source, offset, f"[{name}] expects a field name or doc['field'] as its second argument")
    stored = stored_vector(values, source, offset)
    try:
        query = np.asarray(query_value, dtype=np.float32)
    except (TypeError, ValueError):
        raise _fail(source, offset, "The query vector must be a list of numbers") from None
    if query.ndim != 1 or len(query) != len(stored):
        raise _fail(
            source,
            offset,
            f"The query vector has a different number of dimensions [{query.size}] than the document "
            f"vectors [{len(stored)}].",
        )
    if name == "hamming":
        if stored.dtype != np.int8:
            raise _fail(source, offset, "hamming distance is only supported for byte or bit vectors")
        bits = np.bitwise_xor(stored.view(np.uint8), query.astype(np.int8).view(np.uint8))
        return int(np.unpackbits(bits).sum())
    vector = stored.astype(np.float32)
    if name == "dotProduct":
        return float(vector @ query)
    if name == "cosineSimilarity":
        return float((vector @ query) / (np.linalg.norm(vector) * np.linalg.norm(query)))
    diff = np.abs(vector - query)
    return float(diff.sum() if name == "l1norm" else np.sqrt(diff @ diff))


def member(values: DocValues, name: str, source: str, offset: int) -> Any:
    """`doc['field'].vectorValue` (a list of floats) or `.magnitude`."""
    vector = stored_vector(values, source, offset).astype(np.float32)
    if name == "vectorValue":
        return vector.tolist()
    return float(np.linalg.norm(vector))
