"""The indexable form of one document, produced by the mapping and consumed by the indexing buffer.

Parsing (mapping rules, analysis, date formats) happens once, when the write is accepted, so that a
value that does not fit its field is refused before anything is logged; the buffer then only
appends these lists and a refresh turns them into numpy columns. (The texts of a `ParsedBatch`,
which the `standard` analyzer cannot refuse, are analysed when the segment is built.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from leafsearch.index.vector_graph import GraphSpec

# Position gap between the values of a multi-valued text field, as Lucene's default
# `position_increment_gap`, so that a phrase never matches across two array elements.
POSITION_INCREMENT_GAP = 100


@dataclass(slots=True)
class ParsedDoc:
    """Field values of one document, grouped by storage kind and keyed by the full dotted path.

    - `text`: path -> (tokens, positions: a list, or a range for one plain value); the field length
      for norms is `len(tokens)`.
    - `keyword`: path -> string values (after `ignore_above`, which drops values).
    - `long`: path -> integer values: long/integer/short/byte, scaled_float (scaled),
      date (epoch millis), date_nanos (epoch nanos), boolean (0/1).
    - `double`: path -> float values: double/float/half_float.
    - `vector`: path -> the one vector of a `dense_vector` field, (dims,) float32 or int8;
      `graphs`: path -> how an indexed one's segment graph is built (None: no such field).
    - `nested`: path of a `nested` object -> its objects, each parsed as a hidden child document
      (its `source` the object's JSON) stored beside this one (index/segment.py: `Segment.nested`).
    """

    source: bytes
    text: dict[str, tuple[list[str], list[int] | range]] = field(default_factory=dict)
    keyword: dict[str, list[str]] = field(default_factory=dict)
    long: dict[str, list[int]] = field(default_factory=dict)
    double: dict[str, list[float]] = field(default_factory=dict)
    vector: dict[str, np.ndarray] = field(default_factory=dict)
    nested: dict[str, list[ParsedDoc]] = field(default_factory=dict)
    graphs: dict[str, GraphSpec] | None = None


#: Rows of a batch column: the position in the batch of each value, None when every document
#: has exactly one value (the common case, which then needs no list at all).
Rows = list[int] | None


@dataclass(slots=True)
class ParsedBatch:
    """Field values of a batch of documents, column by column (`Mapping.parse_batch`).

    The same values `ParsedDoc` holds for each document, for documents that each have at most one
    value per field: path -> (rows, values), except that `text` values are each document's text,
    not yet analysed: a batch's text fields all use the `standard` analyzer, which refuses no
    value, so its tokens are made where the segment is built (`FieldBuffer.tokens`, in a search
    worker), not in the process that orders the writes.
    """

    sources: list[bytes]
    text: dict[str, tuple[Rows, list[str]]] = field(default_factory=dict)
    keyword: dict[str, tuple[Rows, list[str]]] = field(default_factory=dict)
    long: dict[str, tuple[Rows, list[int]]] = field(default_factory=dict)
    double: dict[str, tuple[Rows, list[float]]] = field(default_factory=dict)
