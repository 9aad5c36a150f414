"""What index administration reads and changes of the node that owns the indices.

The Node (node/node.py) is the one implementation; this package names only this protocol, so that
it depends on the layers below it (the engine, search's contexts and counters) and not on the node.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from leafsearch.common.settings import ClusterSettings
    from leafsearch.index.index import Index
    from leafsearch.index.mapping import Mapping
    from leafsearch.indices.aliases import AliasTable
    from leafsearch.indices.data_streams import DataStreams
    from leafsearch.indices.snapshots import Repositories
    from leafsearch.indices.templates import TemplateStore
    from leafsearch.request.search_types import SearchRequest
    from leafsearch.search.contexts import ContextRegistry
    from leafsearch.search.request_cache import RequestCache
    from leafsearch.search.stats import SearchStats


class IndicesOwner(Protocol):
    node_id: str
    cluster_name: str
    #: The data folder.
    path: Path
    #: Held while indices are created, deleted, opened or closed.
    lock: threading.RLock
    #: The live table of indices by name.
    indices: dict[str, Index]
    aliases: AliasTable
    cluster_settings: ClusterSettings
    #: Index templates (`templates.py`), data streams (`data_streams.py`) and snapshot
    #: repositories (`snapshots.py`), each a durable table of the node's.
    templates: TemplateStore
    data_streams: DataStreams
    repositories: Repositories
    #: The open point-in-time and scroll contexts (freed with their index).
    contexts: ContextRegistry
    search_stats: SearchStats
    #: The request cache, whose counters are per shard (`request_cache` of `_stats`).
    request_cache: RequestCache

    def fielddata_memory(self) -> dict[str, int]:
        """Bytes of fielddata held by the node's processes, per shard folder (index/fielddata.py)."""
        ...

    def clear_fielddata(self, shards: set[str]) -> None:
        """The node's processes drop the fielddata they hold of these shard folders."""
        ...

    def resolve_indices(
        self,
        expr: str | None,
        *,
        ignore_unavailable: bool = False,
        allow_no_indices: bool = True,
        expand_wildcards: str = "open",
        forbid_closed: bool = True,
    ) -> list[str]: ...

    def create_index(
        self, name: str, settings: dict[str, str], mapping: Mapping, *, data_stream: str | None = None
    ) -> Index: ...

    def drop_index(self, name: str, *, keep_aliases: bool = False) -> None: ...

    def count(
        self, request: SearchRequest, *, cancelled: threading.Event | None = None
    ) -> dict[str, Any]: ...

    def search(
        self, request: SearchRequest, *, raw_hits: bool = False, cancelled: threading.Event | None = None
    ) -> dict[str, Any]: ...
