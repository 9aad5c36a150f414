"""What the per-shard listings (`_cat/shards`, `_cat/segments`, `_stats?level=shards`) read of a
shard: one picklable value, computed where the shard is.

Why one value: a shard of a Ray-backed index lives in an actor on another machine (ray_backend/),
so a listing that read its attributes one by one would make a call per attribute. The actor
computes its `ShardListing` with the same function as this process does for its own shards
(`of_shard`) and answers it in one call; the coordinator asks every actor at once
(`RemoteIndex.listings`). A shard that cannot answer is listed from the error instead
(`_cat/shards` shows it UNASSIGNED, as Elasticsearch shows a primary without a node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from leafsearch.errors import ElasticError
from leafsearch.index.shard import folder_size

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.index.shard import Shard


@dataclass(frozen=True, slots=True)
class SegmentListing:
    """A segment of the shard's published snapshot."""

    name: str
    live_count: int
    max_doc: int
    size_bytes: int
    memory_bytes: int  # its live-documents bitmap, what a segment holds in memory


@dataclass(frozen=True, slots=True)
class ShardListing:
    shard_id: int
    docs: int
    store_bytes: int
    max_seq_no: int
    index_total: int
    flush_total: int
    segment_count: int  # every segment, merges' sources included until they go
    segments: tuple[SegmentListing, ...]  # those the published snapshot reads
    #: The Ray node the shard's actor runs on: (node id, ip); None: this process's shard.
    node: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class ShardMissing:
    """A shard that could not be listed (its actor is down): why, and whether its node is gone."""

    shard_id: int
    error: ElasticError
    node_left: bool


@dataclass(frozen=True, slots=True)
class CopyListing:
    """A copy of a shard, as `_cat/shards` and the health read it: primary or replica, its state
    (`STARTED`, `INITIALIZING`: recovering, not yet in sync; `UNASSIGNED`: no machine serves it),
    its listing when it was asked for and answered, the node it is on, and why it is unassigned
    (Elasticsearch's `unassigned.reason`)."""

    shard_id: int
    primary: bool
    state: str
    listing: ShardListing | None = None
    node: tuple[str, str] | None = None
    reason: str | None = None


def of_shard(shard: Shard, node: tuple[str, str] | None = None) -> ShardListing:
    """The listing of a shard of this process (in a shard actor: `node` is the actor's)."""
    counters = shard.stats.snapshot()
    segments = tuple(
        SegmentListing(
            view.segment.name,
            view.live_count,
            view.max_doc,
            folder_size(view.segment.folder),
            view.live.nbytes if view.live is not None else 0,
        )
        for view in shard.published_views()
    )
    return ShardListing(
        shard.shard_id,
        shard.doc_count(),
        shard.store_size_bytes(),
        shard.max_seq_no,
        counters["index_total"],
        counters["flush_total"],
        len(shard.segments),
        segments,
        node,
    )


def listings(index: Index) -> list[ShardListing | ShardMissing]:
    """Every shard's listing, in shard order (an open index)."""
    if index.remote is not None:
        return index.remote.listings()
    return [of_shard(shard) for shard in list(index.shards)]
