"""A shard as a coordinator in another process sees it: every message to it and every answer from
it goes through pickle, so a test searching through it shows what crosses the shard interface is
plain data, and that nothing else is needed."""

from __future__ import annotations

import pickle
from typing import Any

from leafsearch.search.dfs import DfsStats
from leafsearch.search.shard_api import (
    ShardContextId,
    ShardDfs,
    ShardFetch,
    ShardFetchResult,
    ShardQuery,
    ShardSearch,
    ShardSuggest,
    ShardTopDocs,
)


def _crossed(value: Any) -> Any:
    return pickle.loads(pickle.dumps(value))


class PickledShard:
    """`ShardSearch` over another one, with each call's message and answer pickled; `calls` counts
    the calls by method."""

    def __init__(self, inner: ShardSearch) -> None:
        self.inner = inner
        self.calls: dict[str, int] = {}

    def _count(self, method: str) -> None:
        self.calls[method] = self.calls.get(method, 0) + 1

    def open_context(self) -> ShardContextId:
        self._count("open_context")
        return _crossed(self.inner.open_context())

    def free_context(self, context: ShardContextId) -> bool:
        self._count("free_context")
        return _crossed(self.inner.free_context(_crossed(context)))

    def dfs(self, request: ShardDfs) -> DfsStats:
        self._count("dfs")
        return _crossed(self.inner.dfs(_crossed(request)))

    def query(self, query: ShardQuery) -> ShardTopDocs:
        self._count("query")
        return _crossed(self.inner.query(_crossed(query)))

    def fetch(self, fetch: ShardFetch) -> ShardFetchResult:
        self._count("fetch")
        return _crossed(self.inner.fetch(_crossed(fetch)))

    def suggest(self, message: ShardSuggest) -> list[Any]:
        self._count("suggest")
        return _crossed(self.inner.suggest(_crossed(message)))
