"""The indexing buffer: documents accepted since the last refresh, kept as flat per-field lists.

Appending to Python lists is the cheapest thing a write can do; the refresh then converts each list
to a numpy array in one call and builds postings and ordinals with vectorized sorts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, compress

import numpy as np

from leafsearch.index.analysis import analyze_flat
from leafsearch.index.interning import Spans
from leafsearch.index.parsed import ParsedBatch, ParsedDoc, Rows
from leafsearch.index.vector_graph import GraphSpec


@dataclass(slots=True)
class FieldBuffer:
    """(doc, value) pairs of one field in arrival order; text also keeps positions and lengths.

    A text field's documents added by `add_batch` keep their text as it is (`texts`: chunks of
    (docs, one value each)), analysed by `tokens` when the segment is built: that is where the
    tokens are needed, in a search worker (buffer_wire.py), and the process that orders the
    writes neither analyses them nor holds a Python string per token.

    A keyword or number field's docs that `add_batch` appended stay arrays (`doc_runs`): turned
    into a list of ints here and back into an array when packed, they cost the server process
    about 35 ns a document and field, and the cycle collector a visit each."""

    docs: list[int] = field(default_factory=list)
    values: list = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    length_docs: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    texts: list[tuple[np.ndarray, list[str]]] = field(default_factory=list)
    #: The docs of the values before those of `docs` (`add_batch`'s), in order.
    doc_runs: list[np.ndarray] = field(default_factory=list)

    def add_docs(self, docs: np.ndarray) -> None:
        """Append the docs of values appended to `values` (`add_batch`)."""
        if self.docs:  # (`add`'s, which came first)
            self.doc_runs.append(int_array(self.docs))
            self.docs = []
        self.doc_runs.append(docs)

    def all_docs(self) -> np.ndarray:
        """The doc of each of `values`, as int64."""
        if not self.doc_runs:
            return int_array(self.docs)
        return np.concatenate([*self.doc_runs, int_array(self.docs)])

    def tokens(self) -> tuple[Spans | list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every token of a text field: (the tokens, as spans of one buffer, or a list when a
        token holds a NUL; the doc and position of each; the docs with their field lengths), the
        documents `add` appended first, then the chunks of `texts` analysed with the `standard`
        analyzer (the only one `add_batch` is given)."""
        tokens: list[Spans] = []
        docs, positions = [int_array(self.docs)], [int_array(self.positions)]
        length_docs, lengths = [int_array(self.length_docs)], [int_array(self.lengths)]
        for text_docs, texts in self.texts:
            flat, counts = analyze_flat(texts)
            starts = np.cumsum(counts) - counts
            tokens.append(flat)
            docs.append(np.repeat(text_docs, counts))
            positions.append(np.arange(len(flat), dtype=np.int64) - np.repeat(starts, counts))
            length_docs.append(text_docs)
            lengths.append(counts)
        added = Spans.of(self.values)  # None: a token of another analyzer holds a NUL
        every: Spans | list[str]
        if added is None:
            every = list(chain(self.values, *(spans.strings() for spans in tokens)))
        else:  # one part that has tokens is taken as it is, not copied (a worker's buffer: `texts`)
            held = [spans for spans in (added, *tokens) if len(spans)]
            every = Spans.concat(held) if held else added
        return every, *(np.concatenate(parts) for parts in (docs, positions, length_docs, lengths))  # type: ignore[return-value]


def int_array(values: list[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


class IndexBuffer:
    """Documents of one shard not yet in a segment. Doc numbers are positions in `ids`.

    `tag`: a multiple of 2**32 the shard gives each of its buffers; its version map names a
    document of this buffer as `tag + doc` (`Shard.current`)."""

    def __init__(self, tag: int = 0) -> None:
        self.tag = tag
        self.ids: list[str] = []
        self.sources: list[bytes] = []
        self.seq_nos: list[int] = []
        self.versions: list[int] = []
        self.routings: list[str | None] = []
        self.deleted: set[int] = set()
        self.text: dict[str, FieldBuffer] = {}
        self.keyword: dict[str, FieldBuffer] = {}
        self.long: dict[str, FieldBuffer] = {}
        self.double: dict[str, FieldBuffer] = {}
        self.vector: dict[str, FieldBuffer] = {}
        #: path -> how a vector field's segment graph is built (vector_graph.py), from the mapping
        self.graphs: dict[str, GraphSpec] = {}
        self.source_bytes = 0
        #: Set when the buffer is written in index-sort order: the segment doc of each buffer doc.
        self.segment_docs: np.ndarray | None = None
        #: `nested` path -> the child documents of its objects, and the parent doc of each.
        self.nested: dict[str, tuple[IndexBuffer, list[int]]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, doc_id: str, parsed: ParsedDoc, seq_no: int, version: int, routing: str | None) -> int:
        doc = len(self.ids)
        self.ids.append(doc_id)
        self.sources.append(parsed.source)
        self.source_bytes += len(parsed.source)
        self.seq_nos.append(seq_no)
        self.versions.append(version)
        self.routings.append(routing)
        for path, (tokens, positions) in parsed.text.items():
            fb = self.text.get(path)
            if fb is None:
                fb = self.text[path] = FieldBuffer()
            n = len(tokens)
            fb.docs.extend([doc] * n)
            fb.values.extend(tokens)
            fb.positions.extend(positions)
            fb.length_docs.append(doc)
            fb.lengths.append(n)
        for kind, target in (
            (parsed.keyword, self.keyword),
            (parsed.long, self.long),
            (parsed.double, self.double),
        ):
            for path, values in kind.items():
                fb = target.get(path)
                if fb is None:
                    fb = target[path] = FieldBuffer()
                if len(values) == 1:
                    fb.docs.append(doc)
                    fb.values.append(values[0])
                else:
                    fb.docs.extend([doc] * len(values))
                    fb.values.extend(values)
        for path, vector in parsed.vector.items():
            fb = self.vector.get(path)
            if fb is None:
                fb = self.vector[path] = FieldBuffer()
            fb.docs.append(doc)
            fb.values.append(vector)
        for path, children in parsed.nested.items():
            entry = self.nested.get(path)
            if entry is None:
                entry = self.nested[path] = (IndexBuffer(), [])
            before = entry[0].source_bytes
            for child in children:
                entry[0].add("", child, 0, 0, None)
            entry[1].extend([doc] * len(children))
            self.source_bytes += entry[0].source_bytes - before  # the buffer's size counts them
        if parsed.graphs:
            self.graphs.update(parsed.graphs)
        return doc

    def add_batch(
        self,
        batch: ParsedBatch,
        rows: list[int],
        ids: list[str],
        seq_nos: list[int],
        versions: list[int],
        routings: list[str | None],
    ) -> None:
        """Append the documents at `rows` of a parsed batch (in that order), column by column."""
        base = len(self.ids)
        self.ids.extend(ids)
        sources = batch.sources if len(rows) == len(batch.sources) else [batch.sources[r] for r in rows]
        self.sources.extend(sources)
        self.source_bytes += sum(map(len, sources))
        self.seq_nos.extend(seq_nos)
        self.versions.extend(versions)
        self.routings.extend(routings)
        doc_of = np.full(len(batch.sources), -1, dtype=np.int64)
        doc_of[rows] = np.arange(base, base + len(rows))
        for path, (col_rows, texts) in batch.text.items():
            docs, texts = _docs_of(doc_of, col_rows, texts)
            if len(docs):
                fb = self.text.get(path)
                if fb is None:
                    fb = self.text[path] = FieldBuffer()
                fb.texts.append((docs, texts))
        for columns, target in (
            (batch.keyword, self.keyword),
            (batch.long, self.long),
            (batch.double, self.double),
        ):
            for path, (col_rows, values) in columns.items():
                docs, values = _docs_of(doc_of, col_rows, values)
                if len(docs):
                    fb = target.get(path)
                    if fb is None:
                        fb = target[path] = FieldBuffer()
                    fb.add_docs(docs)
                    fb.values.extend(values)


def _docs_of(doc_of: np.ndarray, rows: Rows, values: list) -> tuple[np.ndarray, list]:
    """Buffer doc numbers of a batch column's values, and the values, without rows not added."""
    docs = doc_of if rows is None else doc_of[rows]
    kept = docs >= 0
    if kept.all():
        return docs, values
    return docs[kept], list(compress(values, kept.tolist()))
