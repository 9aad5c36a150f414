"""Shard targets of a search: which shard snapshots a request reads, in a fixed order.

The position of a target in the list is its "shard index" in the request: it orders ties (shard
index, then doc) and is the high half of `_shard_doc`. A PIT or scroll context stores its targets,
so that position and the snapshot stay the same for the context's whole life.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from leafsearch.errors import ElasticError
from leafsearch.index.searcher import Searcher
from leafsearch.request.query_dsl import Bool, Query, query_key

if TYPE_CHECKING:
    from leafsearch.index.index import Index


@dataclass(eq=False)
class Target:
    index: Index
    shard_id: int
    searcher: Searcher
    #: The filter of the aliases the search reached this index through (ANDed into its query).
    alias_filter: Query | None = None

    @property
    def mapping(self):
        return self.index.mapping

    @property
    def remote(self) -> bool:
        """Whether the snapshot is a shard actor's (only the shard interface reaches it)."""
        return self.searcher.remote

    def query(self, query: Query) -> Query:
        """The query as this shard runs it: within the alias filter, which does not score."""
        if self.alias_filter is None:
            return query
        return Bool(must=(query,), filter=(self.alias_filter,))


@dataclass(frozen=True, slots=True)
class IndexScope:
    """What a search reads of one index: every document, or those of the filters of the aliases
    it was reached through (any of them); every shard, or those of `routing`."""

    filter: Query | None = None
    routing: frozenset[str] | None = None


def acquire_targets(indices: list[Index], scopes: Mapping[str, IndexScope] | None = None) -> list[Target]:
    """The current snapshot of every shard of the indices, acquired (callers release them).

    Ordered as Elasticsearch orders shard requests (shard number, then index name), so shard
    indices and tie order match its. An index's scope (`aliases.search_scopes`) restricts it to
    the shards its routing values route to, and gives its alias filter (none: every shard, no filter).
    """
    targets: list[Target] = []
    try:
        for index in indices:
            scope = scopes.get(index.name) if scopes else None
            index.before_search()
            values = scope.routing if scope is not None else None
            alias_filter = scope.filter if scope is not None else None
            wanted = {index.shard_of(v, v).shard_id for v in values} if values is not None else None
            for shard in index.shards:
                if wanted is None or shard.shard_id in wanted:
                    targets.append(Target(index, shard.shard_id, shard.acquire_searcher(), alias_filter))
    except ElasticError:  # an index closed meanwhile: what was acquired goes back
        release_targets(targets)
        raise
    targets.sort(key=lambda t: (t.shard_id, t.index.name))
    return targets


def release_targets(targets: list[Target]) -> None:
    for t in targets:
        t.searcher.release()


def snapshot_key(targets: list[Target]) -> tuple:
    """Identity of a set of snapshots: equal keys read exactly the same documents."""
    return tuple(
        (t.index.uuid, t.shard_id, t.searcher.generation, t.alias_filter and query_key(t.alias_filter))
        for t in targets
    )
