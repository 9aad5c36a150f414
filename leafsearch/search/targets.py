"""Shard targets of a search: which shard snapshots a request reads, in a fixed order.

The position of a target in the list is its "shard index" in the request: it orders ties (shard
index, then doc) and is the high half of `_shard_doc`. A PIT or scroll context stores its targets,
so that position and the snapshot stay the same for the context's whole life.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from leafsearch.errors import ElasticError
from leafsearch.index.searcher import Searcher

if TYPE_CHECKING:
    from leafsearch.index.index import Index


@dataclass(eq=False)
class Target:
    index: Index
    shard_id: int
    searcher: Searcher

    @property
    def mapping(self):
        return self.index.mapping


def acquire_targets(indices: list[Index], routing: str | None = None) -> list[Target]:
    """The current snapshot of every shard of the indices, acquired (callers release them).

    Ordered as Elasticsearch orders shard requests (shard number, then index name), so shard
    indices and tie order match its. A `routing` parameter (comma-separated values) restricts each
    index to the shards those values route to.
    """
    values = [v for v in routing.split(",") if v] if routing else []
    targets: list[Target] = []
    try:
        for index in indices:
            index.before_search()
            wanted = {index.shard_of(v, v).shard_id for v in values} if values else None
            for shard in index.shards:
                if wanted is None or shard.shard_id in wanted:
                    targets.append(Target(index, shard.shard_id, shard.acquire_searcher()))
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
    return tuple((t.index.uuid, t.shard_id, t.searcher.generation) for t in targets)
