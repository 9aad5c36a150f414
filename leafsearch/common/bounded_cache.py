"""A thread-safe map whose entries leave, least recently used first, once their bytes pass a bound.

Every cache of a node (hit lists, global ordinals, sort orders per segment, decompressed source
blocks) is one of these under a setting: what differs between them is what they key on and when
an entry dies early (its snapshot released, its segment gone), not how they are bounded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    def __init__(
        self,
        max_bytes: int,
        sizeof: Callable[[V], int],
        on_remove: Callable[[K, V, bool], None] | None = None,
    ) -> None:
        """`on_remove(key, value, evicted)`, when given, is told of each entry that leaves (pushed
        out by the bound, dropped by `discard_where` or `clear`, replaced by `put`), under the
        cache's lock: it must be quick and must not call the cache."""
        self.max_bytes = max_bytes
        self._sizeof = sizeof
        self._on_remove = on_remove
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions = 0

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def get_many(self, keys: list[K]) -> list[V | None]:
        """`get` of several keys under one lock (a page's source blocks)."""
        with self._lock:
            found = [self._entries.get(key) for key in keys]
            for key, value in zip(keys, found, strict=True):
                if value is not None:
                    self._entries.move_to_end(key)
            return found

    def put_many(self, items: list[tuple[K, V]]) -> None:
        """`put` of several entries under one lock."""
        with self._lock:
            for key, value in items:
                self._put(key, value)

    def put(self, key: K, value: V) -> bool:
        """Keep `value` (replacing the key's old one); a value larger than the whole bound is not
        kept (False), so it never pushes out everything else first."""
        with self._lock:
            return self._put(key, value)

    def _put(self, key: K, value: V) -> bool:
        size = self._sizeof(value)
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= self._sizeof(old)
            self._removed(key, old, False)
        if size > self.max_bytes:
            return False
        self._entries[key] = value
        self._bytes += size
        self._evict()
        return True

    def resize(self, max_bytes: int) -> None:
        """Set the bound (from its setting); entries that no longer fit go."""
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()

    def discard_where(self, doomed: Callable[[K, V], bool]) -> None:
        """Drop every entry for which `doomed(key, value)` holds (what it describes is gone)."""
        with self._lock:
            for key in [k for k, v in self._entries.items() if doomed(k, v)]:
                value = self._entries.pop(key)
                self._bytes -= self._sizeof(value)
                self._removed(key, value, False)

    def clear(self) -> None:
        with self._lock:
            if self._on_remove is not None:
                for key, value in self._entries.items():
                    self._on_remove(key, value, False)
            self._entries.clear()
            self._bytes = 0

    def values(self) -> list[V]:
        with self._lock:
            return list(self._entries.values())

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._entries:
            key, old = self._entries.popitem(last=False)
            self._bytes -= self._sizeof(old)
            self.evictions += 1
            self._removed(key, old, True)

    def _removed(self, key: K, value: V, evicted: bool) -> None:
        if self._on_remove is not None:
            self._on_remove(key, value, evicted)
