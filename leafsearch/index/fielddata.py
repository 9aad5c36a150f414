"""The uninverted text fields (`fielddata: true`) one process holds, under its fielddata breaker.

A `terms` aggregation or a sort on a text field with `fielddata: true` reads per document the
ordinals of its terms, which the segment does not store: they are built from the postings
(`TextColumn.uninvert`) the first time a search asks, in the process that searches (the server
or a search worker), and kept for the segment's life. Each build is charged to the process's
fielddata breaker before it allocates (its size is known from the postings' counts), so a field
too large for `indices.breaker.fielddata.limit` fails the search with Elasticsearch's
`[fielddata] Data too large` instead of taking the memory. `clear` (`POST _cache/clear?
fielddata=true`) drops what is held, and a segment merged away gives its bytes back when it goes.
What is held is counted per shard folder, for `_stats` and `_nodes/stats`."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from leafsearch.index.columns import KeywordColumn, TextColumn


class FielddataBreaker(Protocol):
    def charge_fielddata(self, size: int, field: str) -> None: ...

    def release_fielddata(self, size: int) -> None: ...


class Fielddata:
    """This process's fielddata: each uninverted column, the shard folder it belongs to and its
    bytes (charged to `breaker`)."""

    def __init__(self, breaker: FielddataBreaker) -> None:
        self.breaker = breaker
        self._lock = threading.Lock()  # one build at a time: two searches never build one field twice
        self._held: dict[int, tuple[weakref.ref, str, int]] = {}

    def load(self, column: TextColumn, shard: str, field: str) -> KeywordColumn:
        """`column`'s fielddata: the one held, else built now if the breaker allows its bytes."""
        built = column.built_fielddata
        if built is not None:
            return built
        with self._lock:
            if column.built_fielddata is not None:
                return column.built_fielddata
            size = column.fielddata_nbytes()
            self.breaker.charge_fielddata(size, field)
            try:
                built = column.uninvert()
            except BaseException:
                self.breaker.release_fielddata(size)
                raise
            column.built_fielddata = built
            key = id(column)
            self._held[key] = (weakref.ref(column), shard, size)
            weakref.finalize(column, self._forget, key, size)
        return built

    def _forget(self, key: int, size: int) -> None:
        """A held column went with its segment: its bytes go back."""
        with self._lock:
            entry = self._held.get(key)
            if entry is None or entry[2] != size or entry[0]() is not None:
                return
            del self._held[key]
        self.breaker.release_fielddata(size)

    def clear(self, shards: set[str] | None = None) -> None:
        """Drop what is held (of these shard folders only, when given); searches already reading
        a column keep their own reference until they end."""
        with self._lock:
            for key, (ref, shard, size) in list(self._held.items()):
                if shards is not None and shard not in shards:
                    continue
                column = ref()
                if column is not None:
                    column.built_fielddata = None
                del self._held[key]
                self.breaker.release_fielddata(size)

    def memory(self) -> dict[str, int]:
        """Bytes held per shard folder."""
        out: dict[str, int] = {}
        with self._lock:
            for _, shard, size in self._held.values():
                out[shard] = out.get(shard, 0) + size
        return out
