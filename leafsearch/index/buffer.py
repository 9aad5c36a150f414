"""The indexing buffer: documents accepted since the last refresh, kept as flat per-field lists.

Appending to Python lists is the cheapest thing a write can do; the refresh then converts each list
to a numpy array in one call and builds postings and ordinals with vectorized sorts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leafsearch.index.parsed import ParsedDoc


@dataclass(slots=True)
class FieldBuffer:
    """(doc, value) pairs of one field in arrival order; text also keeps positions and lengths."""

    docs: list[int] = field(default_factory=list)
    values: list = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    length_docs: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)


class IndexBuffer:
    """Documents of one shard not yet in a segment. Doc numbers are positions in `ids`."""

    def __init__(self) -> None:
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
        self.source_bytes = 0

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
        return doc
