"""A full indexing buffer packed to cross to another process, where its segment is written.

Why: writing a buffer as a segment (interning terms, postings, doc values, the sources compressed
in blocks) cost the server process about 7 us a bench document, on the flush thread, holding
the interpreter the request threads need; nothing in it depends on order (the buffer is handed
over whole, and only installing the segment is ordered). So a buffer of
`indices.segments.worker_build_min_docs` (500) documents or more is written by a search worker
process (`BuildJob`, through the owner's `ShardServices.builder`), on the other core, and the
shard opens the folder it wrote.

The buffer crosses packed, not pickled as it is: pickling its lists of strings and ints cost
3.9 us a document (one memo entry per object); here each list of strings is one joined string and
an array of lengths, each list of numbers a numpy array, which costs the server process about a
tenth of that (bench/RESULTS.md, "Segments written in the search workers"). The worker unpacks
it into an `IndexBuffer` and runs the very `segment_from_buffer` the server would, so the segment
is the same either way. No worker (none configured, none ready, one that died or failed) means
the flush thread writes it here as before: a job changes nothing but its folder, which is
discarded first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import accumulate, chain
from pathlib import Path
from typing import Any

import numpy as np

from leafsearch.index.buffer import FieldBuffer, IndexBuffer, int_array
from leafsearch.index.index_sort import IndexSort
from leafsearch.index.interning import Spans
from leafsearch.index.segment import fixed_width_terms
from leafsearch.index.segment_build import segment_from_buffer
from leafsearch.index.source_blocks import ZSTD, InMemory, Joined
from leafsearch.index.vector_graph import GraphSpec
from leafsearch.services.memory import trim

#: The cluster setting of the smallest buffer a worker writes (default 500 documents): a
#: smaller one is written by the flush thread, since a worker's round trip would cost more than
#: the build (a refresh of a few documents).
MIN_DOCS_SETTING = "indices.segments.worker_build_min_docs"


class BuildUnavailable(Exception):
    """No worker wrote the segment: the caller writes it itself."""


#: Runs a `BuildJob` in another process and answers its result, or raises `BuildUnavailable`.
Builder = Callable[["BuildJob"], "np.ndarray | None"]


@dataclass(frozen=True, slots=True)
class PackedStrings:
    """A list of str (or of bytes) as one value: joined by NUL when no item holds one (split
    again in one call), else joined with each item's length; a list that mixes types (never one
    the buffer builds) travels as it is."""

    joined: str | bytes | list
    lengths: np.ndarray | None = None
    split: bool = False

    @staticmethod
    def pack(values: list) -> PackedStrings:
        kind = type(values[0]) if values else None
        if kind is not str and kind is not bytes:
            return PackedStrings(values)
        nul: str | bytes = "\x00" if kind is str else b"\x00"
        try:
            joined = nul.join(values)  # type: ignore[arg-type]
        except TypeError:
            return PackedStrings(values)
        if joined.count(nul) == len(values) - 1:
            return PackedStrings(joined, split=True)
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        return PackedStrings(kind().join(values), lengths)

    def unpack(self) -> list:
        joined = self.joined
        if self.split:
            return joined.split("\x00" if type(joined) is str else b"\x00")  # type: ignore[arg-type,union-attr]
        if self.lengths is None:
            return joined  # type: ignore[return-value]
        ends = list(accumulate(self.lengths.tolist()))
        return [joined[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]  # type: ignore[index]

    def terms(self, count: int) -> np.ndarray | list:
        """The `count` values as `segment.to_term_array` makes them when they crossed as ASCII
        strings of one width joined by NUL (a log's ids: no string an id, split only to be
        joined and encoded again), else `unpack`."""
        joined = self.joined
        fixed = fixed_width_terms(joined, count) if self.split and type(joined) is str else None
        return self.unpack() if fixed is None else fixed

    def spans(self, count: int) -> Spans | list:
        """The `count` values as `interning.Spans` of their UTF-8 encoding when they crossed as
        strings joined by NUL (what `intern` makes of a list: it joins and encodes them), so a
        keyword column is not split into a string a value only to be joined again; else `unpack`."""
        joined = self.joined
        spans = Spans.joined(joined.encode(), count) if self.split and type(joined) is str else None
        return self.unpack() if spans is None else spans


#: A text field: (token docs, token positions, tokens, length docs, lengths) of the documents
#: `add` appended, then the docs and texts of those `add_batch` appended (analysed by the worker).
PackedText = tuple[np.ndarray, np.ndarray, PackedStrings, np.ndarray, np.ndarray, np.ndarray, PackedStrings]


@dataclass(frozen=True, slots=True)
class PackedBuffer:
    """What `segment_from_buffer` reads of an `IndexBuffer` (deleted documents included: the
    shard masks them with the live docs it computes itself)."""

    ids: PackedStrings
    #: Joined as the segment compresses them: unpacked, they are not split into a bytes object
    #: each only to be joined again for compression (`writer_from_buffer`).
    sources: Joined
    seq_nos: np.ndarray
    versions: np.ndarray
    routings: list[str | None] | None  # None: no document has one
    text: dict[str, PackedText]
    keyword: dict[str, tuple[np.ndarray, PackedStrings]]
    long: dict[str, tuple[np.ndarray, np.ndarray]]
    double: dict[str, tuple[np.ndarray, np.ndarray]]
    #: path -> (docs, (n, dims) vectors, float32 or int8)
    vector: dict[str, tuple[np.ndarray, np.ndarray]]
    #: `nested` path -> (its child documents, the parent doc of each)
    nested: dict[str, tuple[PackedBuffer, np.ndarray]]
    graphs: dict[str, GraphSpec]

    @staticmethod
    def pack(buffer: IndexBuffer) -> PackedBuffer:
        routed = buffer.routings.count(None) != len(buffer.routings)
        return PackedBuffer(
            PackedStrings.pack(buffer.ids),
            Joined.of(buffer.sources),
            int_array(buffer.seq_nos),
            int_array(buffer.versions),
            list(buffer.routings) if routed else None,
            {path: _pack_text(fb) for path, fb in buffer.text.items()},
            {path: (fb.all_docs(), PackedStrings.pack(fb.values)) for path, fb in buffer.keyword.items()},
            {path: (fb.all_docs(), int_array(fb.values)) for path, fb in buffer.long.items()},
            {
                path: (fb.all_docs(), np.asarray(fb.values, dtype=np.float64))
                for path, fb in buffer.double.items()
            },
            {path: (int_array(fb.docs), np.stack(fb.values)) for path, fb in buffer.vector.items()},
            {
                path: (PackedBuffer.pack(children), int_array(parents))
                for path, (children, parents) in buffer.nested.items()
            },
            dict(buffer.graphs),
        )

    def unpack(self) -> IndexBuffer:
        """An `IndexBuffer` whose columns of numbers are the arrays (`segment_from_buffer` reads
        them with `np.asarray`), whose sources are still joined (`InMemory`) and whose keyword
        values are spans where they can be (`PackedStrings.spans`: `intern` reads nothing else)
        and whose ids the 'S' array of the segment's where they can be (`PackedStrings.terms`)."""
        buffer = IndexBuffer()
        buffer.ids = self.ids.terms(len(self.seq_nos))  # type: ignore[assignment]
        buffer.sources = InMemory(self.sources)  # type: ignore[assignment]
        buffer.seq_nos = self.seq_nos  # type: ignore[assignment]
        buffer.versions = self.versions  # type: ignore[assignment]
        buffer.routings = self.routings if self.routings is not None else [None] * len(buffer.ids)
        for path, (docs, positions, tokens, length_docs, lengths, text_docs, texts) in self.text.items():
            buffer.text[path] = FieldBuffer(
                docs,  # type: ignore[arg-type]
                tokens.unpack(),
                positions,  # type: ignore[arg-type]
                length_docs,  # type: ignore[arg-type]
                lengths,  # type: ignore[arg-type]
                [(text_docs, texts.unpack())] if len(text_docs) else [],
            )
        for path, (docs, values) in self.keyword.items():
            buffer.keyword[path] = FieldBuffer(docs, values.spans(len(docs)))  # type: ignore[arg-type]
        for target, columns in ((buffer.long, self.long), (buffer.double, self.double)):
            for path, (docs, numbers) in columns.items():
                target[path] = FieldBuffer(docs, numbers)  # type: ignore[arg-type]
        for path, (docs, vectors) in self.vector.items():
            buffer.vector[path] = FieldBuffer(docs, vectors)  # type: ignore[arg-type]
        for path, (children, parents) in self.nested.items():
            buffer.nested[path] = (children.unpack(), parents)  # type: ignore[assignment]
        buffer.graphs = dict(self.graphs)
        return buffer


def _pack_text(fb: FieldBuffer) -> PackedText:
    texts = list(chain.from_iterable(texts for _, texts in fb.texts))
    return (
        int_array(fb.docs),
        int_array(fb.positions),
        PackedStrings.pack(fb.values),
        int_array(fb.length_docs),
        int_array(fb.lengths),
        np.concatenate([docs for docs, _ in fb.texts]) if fb.texts else int_array([]),
        PackedStrings.pack(texts),
    )


def build_packed(
    packed: PackedBuffer, folder: str, index_sort: IndexSort | None, codec: str = ZSTD
) -> np.ndarray | None:
    """The worker's side: write the segment; where each buffer document went (`segment_docs`).
    What the build held (about 3 KB a bench document, unpacked lists and arrays) goes back to
    the system at once, rather than staying in the worker's heap until its next build. The
    packed strings go once unpacked when the caller holds no other reference (`BuildJob.bind`)."""
    buffer = packed.unpack()
    del packed
    segment_from_buffer(buffer, Path(folder), index_sort, codec)
    segment_docs = buffer.segment_docs
    del buffer
    trim()
    return segment_docs


@dataclass(frozen=True, slots=True)
class BuildJob:
    """A buffer to write as the segment `folder` (a search worker job: `bind` takes the worker's
    mirror of the indices, which the build does not need)."""

    packed: PackedBuffer
    folder: str
    index_sort: IndexSort | None
    codec: str = ZSTD  # the sources' (source_blocks.py)

    def bind(self, mirror: Any) -> Callable[[], np.ndarray | None]:
        return partial(_build_held, [self.packed], self.folder, self.index_sort, self.codec)


def _build_held(
    held: list[PackedBuffer], folder: str, index_sort: IndexSort | None, codec: str
) -> np.ndarray | None:
    """`build_packed` of the one buffer `held` gives up: the job (a task's callable, which its
    worker thread holds while it runs) keeps no reference to the packed strings, so they go
    as soon as they are unpacked (ids, tokens and keywords: ~0.4 of a packed bench buffer)."""
    return build_packed(held.pop(), folder, index_sort, codec)
