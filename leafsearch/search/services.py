"""What a search uses beside its request: the caches, pools, settings and registries it reads,
handed in by whoever owns them, so that nothing in `search/` knows the Node.

Two owners build them: the Node in the server process (`CoordinatorServices`: everything, including
the indices a request names, the reader contexts and the search worker pool) and each search worker
process (`SearchServices`: what the query and fetch phases of a task need, bounded by the worker's
share of the node's cache settings). The phases take a `SearchServices` and run the same in both;
the coordinator's entry points (search, count, PIT, scroll, `_msearch`) take a
`CoordinatorServices`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from leafsearch.search.stats import ExportStats

if TYPE_CHECKING:
    from leafsearch.common.settings import ClusterSettings
    from leafsearch.index.index import Index
    from leafsearch.request.indices_options import IndicesOptions
    from leafsearch.search.contexts import ContextRegistry
    from leafsearch.search.hitlist import HitListCache
    from leafsearch.search.read_ahead import ReadAhead
    from leafsearch.search.request_cache import RequestCache
    from leafsearch.search.segment_orders import SegmentOrders
    from leafsearch.search.shard_contexts import ShardContexts
    from leafsearch.search.stats import SearchStats
    from leafsearch.search.targets import IndexScope
    from leafsearch.search.walks import WalkMemory
    from leafsearch.search.workers.pool import WorkerPool
    from leafsearch.services.breaker import Breakers


class WalkState(Protocol):
    """What a process keeps of the walks it serves: pages read ahead and the lists of every match
    of walks sorted by `_score` (walks.py)."""

    read_ahead: ReadAhead
    walks: WalkMemory


@dataclass(kw_only=True, eq=False)
class SearchServices:
    """What the query and fetch phases read, in the server process or a search worker."""

    node_id: str
    #: Monotonic seconds for timeouts and keep-alives (a test's node passes a clock it advances).
    clock: Callable[[], float]
    cluster_settings: ClusterSettings
    breakers: Breakers
    search_stats: SearchStats
    hitlists: HitListCache
    sort_orders: SegmentOrders
    #: The shards of one search run their query phase here at once.
    shard_pool: ThreadPoolExecutor
    contexts: WalkState
    #: Snapshots pinned for reader contexts by id: the server process's (None in a worker, which
    #: is given its snapshots with each task).
    shard_contexts: ShardContexts | None = None


@dataclass(kw_only=True, eq=False)
class CoordinatorServices(SearchServices):
    """The server process's: what an index expression reaches (a request's targets), its reader
    contexts, `_msearch`'s pool and the search worker pool. The Node builds it and sets `contexts`
    and `workers`, which are built from it, right after."""

    #: The indices an index expression reaches (index and alias names, wildcards, as `options`
    #: allow) and what a search reads of each (its aliases' filters and routing, with the
    #: request's `routing`): the node's index and alias tables (indices/admin.py, aliases.py).
    reach: Callable[[str | None, IndicesOptions, str | None], tuple[list[Index], Mapping[str, IndexScope]]]
    msearch_pool: ThreadPoolExecutor
    #: Whole answers of repeated cacheable searches (search/request_cache.py).
    request_cache: RequestCache
    contexts: ContextRegistry = field(init=False)
    #: A document as the get API answers it (realtime; None when absent): what a terms lookup
    #: reads (search/terms_lookup.py). The Node sets it once its write side exists.
    get_document: Callable[..., dict[str, Any] | None] = field(init=False)
    #: A stored script by id (`{"lang", "source"}`; None when absent): what a search's scripts
    #: given by `id` run (search/stored_scripts.py). The Node sets it with its stored scripts.
    stored_script: Callable[[str], dict[str, Any] | None] = field(init=False)
    #: The search worker processes (None: searches run in this process).
    workers: WorkerPool | None = field(init=False, default=None)
    #: What the node's streaming exports do (export.py).
    exports: ExportStats = field(init=False, default_factory=ExportStats)


def _export_stats() -> ExportStats:

    return ExportStats()
