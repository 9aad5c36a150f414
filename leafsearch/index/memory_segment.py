"""A segment held in memory: a few documents indexed by the engine's own code (mapping, buffer,
segment arrays) and read through the ordinary `Segment` interface, so the query executor runs on
it unchanged. The `percolate` query (search/query/percolate_queries.py) builds one from the
documents it is given, as Elasticsearch builds a Lucene MemoryIndex.

Nothing touches the disk: the arrays a `SegmentWriter` would write stay in a dict. It lives as
long as the request that built it (no cache keys it, and it holds no file).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.searcher import Searcher, SegmentView
from leafsearch.index.segment import Segment, source_arrays, source_meta
from leafsearch.index.segment_build import writer_from_buffer

_NUMBERS = itertools.count()


class MemorySegment(Segment):
    """A `Segment` whose arrays and sources are in memory."""

    def __init__(self, buffer: IndexBuffer) -> None:
        writer = writer_from_buffer(buffer)
        sources = writer.sources
        name = f"_memory_{next(_NUMBERS)}"
        meta = {"max_doc": writer.max_doc, "fields": writer.fields, "source_block_docs": sources.block_docs}
        meta.update(source_meta(sources))
        self._setup(Path(name), name, meta, sources.dictionary)  # the folder is never read
        self._source_data = b"".join(sources.chunks)
        self._arrays = {**writer.arrays, **source_arrays(sources)}

    def _load(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def _has(self, name: str) -> bool:
        return name in self._arrays


def memory_searcher(mapping: object, sources: list[bytes]) -> Searcher:
    """A snapshot of one memory segment holding `sources` parsed by `mapping` (which may add
    dynamic fields to itself: give it a copy of the index's), documents numbered in order."""
    buffer = IndexBuffer()
    for i, source in enumerate(sources):
        buffer.add(str(i), mapping.parse_document(source, str(i)), i, 1, None)  # type: ignore[attr-defined]
    segment = MemorySegment(buffer)
    return Searcher(0, [SegmentView(segment, None, 0, segment.max_doc)], 0)
