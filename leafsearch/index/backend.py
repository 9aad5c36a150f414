"""What an index needs of a cluster that holds its shards elsewhere (the Ray backend,
`ray_backend/`): to place a new index's shards and to reach them. The engine names only these
protocols, so `index/` does not depend on the backend that implements them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from leafsearch.errors import ElasticError
    from leafsearch.index.index import Index
    from leafsearch.index.shard_listing import CopyListing, ShardListing, ShardMissing
    from leafsearch.index.shard_write import DocRead, ShardWrite, ShardWriteOutcome
    from leafsearch.index.shared_meta import SharedIndexMeta


class RemoteShards(Protocol):
    """The shards of one index, held by the cluster (`ray_backend/remote.py` `RemoteIndex`)."""

    #: One handle per shard, in shard order, used where a local `Shard` would be.
    shards: list[Any]
    #: The replicas' recoveries from their primaries, by (shard, allocation id): `_cat/recovery`.
    recoveries: dict[tuple[int, str], dict[str, Any]]

    def describe(self, shard_id: int) -> str: ...

    def write(self, writes: list[ShardWrite]) -> list[ShardWriteOutcome | ElasticError]: ...

    def send(self, writes: list[ShardWrite]) -> Callable[[], list[ShardWriteOutcome | ElasticError]]: ...

    def get(self, shard_id: int, doc_id: str, realtime: bool) -> DocRead | None: ...

    def retain_contexts(self, names: list[set[str]]) -> None:
        """Per shard, the names of the durable contexts the coordinator holds; others of before
        are freed."""
        ...

    def listings(self) -> list[ShardListing | ShardMissing]: ...

    def copies(self, listed: bool) -> list[CopyListing]:
        """Every copy of every shard, its state (and with `listed` its listing)."""
        ...

    def adopt_map(self, version: int, raw: bytes | None) -> None:
        """The shard map (copies, primaries, in-sync sets) as another coordinator changed it."""
        ...

    def reconcile(self) -> None:
        """Replicas placed or removed as the index asks, and those not in sync recovering."""
        ...

    def refresh(self) -> None: ...

    def close(self) -> None: ...

    def destroy(self) -> None: ...


class ShardBackend(Protocol):
    """A cluster that holds indices' shards (`ray_backend/cluster.py` `RayBackend`)."""

    #: The cluster's metadata, shared by its coordinators (index/shared_meta.py).
    metadata: SharedIndexMeta | None

    def place(self, index_uuid: str, num_shards: int, replicas: int = 0) -> list[dict[str, Any]]:
        """Where each shard of a new index lives, its replicas' copies included."""
        ...

    def attach(self, index: Index, placement: list[dict[str, str]]) -> RemoteShards:
        """The shards of an index, found where `placement` put them or started from their folders."""
        ...
