"""The Node: one data folder, its indices, cluster settings, reader contexts and background work.

Everything the REST layer does goes through a Node method, so the same behaviour is available
in-process (`leafsearch.Node(path)`) for embedding and for tests.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.durable import FOLDER_MODE, fsync_dir, private
from leafsearch.common.settings import ClusterSettings
from leafsearch.errors import ElasticError, IndexNotFound, ResourceAlreadyExists
from leafsearch.index.block_cache import BlockCache
from leafsearch.index.buffer_wire import MIN_DOCS_SETTING, BuildJob, BuildUnavailable
from leafsearch.index.fielddata import Fielddata
from leafsearch.index.index import DELETED_PREFIX, Index, write_json
from leafsearch.index.mapping import Mapping
from leafsearch.index.shard_services import ShardServices
from leafsearch.indices.admin import (
    IndicesOptions,
    auto_create_index,
    resolve_index_expression,
    resolve_names,
)
from leafsearch.indices.aliases import AliasTable, search_scopes
from leafsearch.indices.data_streams import DataStreams
from leafsearch.indices.snapshots import Repositories
from leafsearch.indices.templates import TemplateStore
from leafsearch.node.cluster_sync import ClusterSync
from leafsearch.node.stats import node_header
from leafsearch.rest.connections import HttpConnections
from leafsearch.scripts.service import StoredScripts
from leafsearch.search import coordinator, scroll_pit
from leafsearch.search.contexts import ContextRegistry
from leafsearch.search.hitlist import HitListCache
from leafsearch.search.msearch import DEFAULT_MAX_CONCURRENT
from leafsearch.search.request_cache import RequestCache
from leafsearch.search.segment_orders import SegmentOrders
from leafsearch.search.services import CoordinatorServices
from leafsearch.search.shard_contexts import ShardContexts
from leafsearch.search.socket_sink import Lend, Written
from leafsearch.search.sort_keys import GlobalOrdinals
from leafsearch.search.stats import SearchStats
from leafsearch.search.walks import MAX_MEMORY as MAX_WALK_MEMORY
from leafsearch.search.workers.pool import WorkerPool, WorkerUnavailable
from leafsearch.security.store import SecurityStore
from leafsearch.services import memory
from leafsearch.services.breaker import Breakers
from leafsearch.services.idle_cpu import IdleCpu
from leafsearch.services.tasks import TaskManager
from leafsearch.write import by_query, documents
from leafsearch.write.doc_status import DocStatusCounter, counting_bulk, counting_single
from leafsearch.write.services import WriteServices

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

    from leafsearch.ray_backend.cluster import RayBackend
    from leafsearch.request.search_types import SearchRequest
    from leafsearch.search.shared_contexts import ContextStore
    from leafsearch.search.targets import IndexScope

_log = logging.getLogger("leafsearch")
#: Seconds between the rounds of a Ray cluster's allocation (`Node.allocate`): how soon a
#: returning machine's copies start recovering with no request (Elasticsearch reroutes at once on
#: a node's join; a round with nothing to do costs a version read of the cluster's metadata).
ALLOCATION_SECONDS = 1.0


class NodeLocked(RuntimeError):
    """Another node holds the data folder."""


class RayUnavailable(RuntimeError):
    """`ray=` was given but Ray is not installed (the `leafsearch[ray]` extra), or no Ray cluster
    runs where it points."""


class Node:
    def __init__(
        self,
        path: str | Path,
        *,
        background: bool = True,
        clock: Callable[[], float] = time.monotonic,
        search_workers: int = 0,
        defer_workers: bool = False,
        ray: str | None = None,
        path_repo: list[str | Path] | None = None,
        worker_processes: BaseContext | None = None,
    ) -> None:
        """`background`: run the refresh, reaper and merge threads (off, a caller drives them).
        `clock`: the monotonic seconds that search timeouts and reader-context keep-alives are
        measured on; a test passes a clock it advances, so neither needs sleeping.
        `search_workers`: processes that run searches (search/workers/); 0 runs them in the
        caller's threads; `defer_workers`: they start only when `search_workers.start()` is called
        (`leafsearch serve` starts them once it has answered its first request). `ray`: a Ray
        cluster's address (`auto`, `local`, `host:port`): new
        indices keep their shards in Ray actors (ray_backend/) and this node coordinates them;
        search workers are then not used (the shard actors run the searches). `path_repo`: the
        folders snapshot repositories may be registered in (Elasticsearch's `path.repo`).
        `worker_processes`: how search workers and the merge worker start (search/workers/zygote.py);
        None: spawned."""
        memory.tune_allocator()
        self.clock = clock
        self.started = time.monotonic()  # for uptimes
        self.path = Path(path).absolute()
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.path.stat().st_uid == os.getuid():
            os.chmod(self.path, 0o700)  # the data is the owner's alone, whatever is inside
        self._lock_file = open(self.path / "node.lock", "a+", opener=private)  # noqa: SIM115 - held for the node's life
        try:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self._lock_file.close()
            raise NodeLocked(
                f"data folder {self.path} is in use by another leafsearch node (lock file "
                f"{self.path / 'node.lock'}); stop it or choose another --data folder"
            ) from exc
        self._lock_file.truncate(0)
        self._lock_file.write(str(os.getpid()))
        self._lock_file.flush()
        identity = self._identity()
        self.node_id: str = identity["node_id"]
        self.cluster_uuid: str = identity["cluster_uuid"]
        self.name: str = identity["name"]
        self.cluster_name = "leafsearch"
        self.lock = threading.RLock()
        self.cluster_settings = ClusterSettings(self.path / "cluster_settings.json")
        self.breakers = Breakers(self.cluster_settings)
        # The search caches are the node's, each bounded by its setting (`_bound_caches`).
        settings = self.cluster_settings
        self.source_blocks = BlockCache(settings.get("indices.cache.source_blocks.size"))
        #: What this node's shards are given: the block cache, their events' listeners, the flush
        #: thread and the merge worker, all this node's own (ended in `close`).
        #: The uninverted text fields (`fielddata: true`) this process holds, under its breaker.
        self.fielddata = Fielddata(self.breakers)
        self.shard_services = ShardServices(
            self.source_blocks, fielddata=self.fielddata, processes=worker_processes
        )
        self.global_ordinals = GlobalOrdinals(settings.get("indices.fielddata.cache.size"))
        self.hitlists = HitListCache(
            settings.get("indices.cache.hitlist.size"), self.global_ordinals, self.shard_services.events
        )
        self.sort_orders = SegmentOrders(settings.get("indices.cache.sort_orders.size"))
        self.request_cache = RequestCache(
            settings.get("indices.requests.cache.size"), self.shard_services.events, settings
        )
        self.indices: dict[str, Index] = {}
        #: The Ray cluster whose actors hold this node's new shards (None: they are local).
        self.ray: RayBackend | None = None
        if ray is not None:
            try:
                from leafsearch.ray_backend.cluster import RayBackend  # Ray is imported only here
                from leafsearch.ray_backend.fault_detection import follower_check
            except ModuleNotFoundError as exc:
                if exc.name != "ray":
                    raise
                self._lock_file.close()
                raise RayUnavailable('the Ray backend needs Ray: pip install "leafsearch[ray]"') from None
            try:
                self.ray = RayBackend(ray, self.path / "ray-shards", partial(follower_check, settings))
            except ConnectionError as exc:  # no cluster there (`NoRayCluster` says what to run)
                self._lock_file.close()
                raise RayUnavailable(str(exc)) from None
            search_workers = 0
        indices_dir = self.path / "indices"
        if not indices_dir.exists():
            indices_dir.mkdir(mode=FOLDER_MODE)
            fsync_dir(self.path)  # a folder created is there after a power loss once its parent is synced
        #: The cluster's metadata shared with the other coordinators of the Ray cluster
        #: (node/cluster_sync.py), None without Ray.
        self.cluster_sync: ClusterSync | None = None
        first_coordinator = False
        shared_contexts: ContextStore | None = None  # (PITs and scrolls: search/shared_contexts.py)
        if self.ray is not None:
            from leafsearch.ray_backend.cluster import NAMESPACE
            from leafsearch.ray_backend.metadata import MetadataClient

            shared_contexts = metadata = MetadataClient(NAMESPACE)
            self.cluster_sync = ClusterSync(metadata)
            self.ray.metadata = self.cluster_sync.index_meta
            first_coordinator = self.cluster_sync.prepare(self.path)
        for folder in sorted(indices_dir.iterdir()):
            if (folder / "meta.json").exists() and not folder.name.startswith(DELETED_PREFIX):
                index = Index.open(folder, self.shard_services, self.ray)
                self.indices[index.name] = index
            else:  # a deletion or a creation that a crash interrupted
                shutil.rmtree(folder, ignore_errors=True)
        #: Every alias (`aliases.py`): replaced whole on each change, so a reader sees one version.
        self.aliases = AliasTable(self.path / "aliases.json", self.indices)
        #: Index templates, data streams and snapshot repositories (indices/templates.py,
        #: data_streams.py, snapshots.py): durable tables changed under `lock`.
        self.templates = TemplateStore(self.path / "templates.json")
        self.data_streams = DataStreams(self.path / "data_streams.json", self.indices)
        self.aliases.set_streams(self.data_streams.as_aliases())
        self.repositories = Repositories(self.path / "repositories.json", [Path(p) for p in path_repo or []])
        self.search_stats = SearchStats()
        #: HTTP connections of the server serving this node (`rest/connections.py` counts them).
        self.http_connections = HttpConnections()
        # `_msearch` runs its searches here (threads start on first use, end with the node).
        self.msearch_pool = ThreadPoolExecutor(
            DEFAULT_MAX_CONCURRENT, thread_name_prefix="leafsearch-msearch"
        )
        # The shards of one search run their query phase here at once (search/top_hits.py), as
        # Elasticsearch's `search` pool: about 1.5 threads per core.
        self.shard_pool = ThreadPoolExecutor(
            (os.cpu_count() or 1) * 3 // 2 + 1, thread_name_prefix="leafsearch-shard"
        )
        #: Snapshots this node's shards pinned for reader contexts (the shard interface's side).
        self.shard_contexts = ShardContexts()
        #: What search/ is given instead of the node (search/services.py).
        self.search_services = CoordinatorServices(
            node_id=self.node_id,
            clock=clock,
            cluster_settings=self.cluster_settings,
            breakers=self.breakers,
            search_stats=self.search_stats,
            hitlists=self.hitlists,
            sort_orders=self.sort_orders,
            shard_pool=self.shard_pool,
            shard_contexts=self.shard_contexts,
            reach=self._reach,
            msearch_pool=self.msearch_pool,
            request_cache=self.request_cache,
        )
        self.contexts = self.search_services.contexts = ContextRegistry(
            self.search_services,
            self.path / "contexts",
            clock,
            shared=shared_contexts,
            indices=lambda: {index.uuid: index for index in self.indices.values()},
        )
        # PITs and scrolls open when the node stopped go on (their shards kept the snapshots).
        self.contexts.restore({index.uuid: index for index in self.indices.values()})
        for index in self.indices.values():
            if index.remote is None:
                for shard in index.shards:
                    shard.drop_restored()
        # by-query operations and reindex run as tasks (`_tasks`); finished results kept bounded
        self.tasks = TaskManager(self.node_id, clock, node_header(self.name))
        #: What write/ is given instead of the node (write/services.py).
        self.scripts = StoredScripts(self.path)
        self.write_services = WriteServices(
            indices=self.indices,
            aliases=self.aliases,
            cluster_settings=self.cluster_settings,
            indexing=threading.Lock(),
            idle_cpu=IdleCpu(),
            auto_create=self._auto_create_index,
            search=self.search_services,
            tasks=self.tasks,
            scripts=self.scripts,
        )
        # The document API (write/documents.py) and the by-query operations (write/by_query.py),
        # with the signatures written there.
        # Each write's answer counts in `indices.indexing.doc_status` (write/doc_status.py).
        self.doc_status = DocStatusCounter()
        self.index_doc = counting_single(partial(documents.index_doc, self.write_services), self.doc_status)
        self.get_doc = partial(documents.get_doc, self.write_services)
        self.search_services.get_document = self.get_doc
        self.search_services.stored_script = self.scripts.get
        self.delete_doc = counting_single(partial(documents.delete_doc, self.write_services), self.doc_status)
        self.update_doc = counting_single(partial(documents.update_doc, self.write_services), self.doc_status)
        self.bulk = counting_bulk(partial(documents.bulk, self.write_services), self.doc_status)
        #: `_delete_by_query`, `_update_by_query`, `_reindex`
        self.bulk_by_query = partial(by_query.execute, self.write_services)
        self.security = SecurityStore(self.path / "security")
        if self.cluster_sync is not None:
            self.cluster_sync.attach(self)
            if first_coordinator:
                self.cluster_sync.publish_all(self)
        self._bound_caches()
        self.cluster_settings.listeners.append(self._bound_caches)
        if search_workers > 0:
            self.search_services.workers = WorkerPool(
                self.search_services,
                search_workers,
                self.shard_services.events,
                defer_start=defer_workers,
                processes=worker_processes,
            )
            # A PIT walk's connection may stay with its worker (search/workers/parking.py).
            pool = self.search_services.workers
            self.http_connections.security_stamp = partial(
                pool.security_stamp, str(self.security.users_file.path)
            )
            self.http_connections.unpark = pool.unpark
            pool.connections = self.http_connections
            self.security.changed = pool.security_changed
            # Full buffers are written as segments there too (index/buffer_wire.py).
            self.shard_services.builder = partial(_build_in_workers, self.search_services.workers)
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        if background:
            loops = [("leafsearch-refresh", self._refresh_loop), ("leafsearch-merge", self._merge_loop)]
            if self.ray is not None:
                loops.append(("leafsearch-allocation", self._allocation_loop))
            for name, target in loops:
                thread = threading.Thread(target=target, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)

    @property
    def search_workers(self) -> WorkerPool | None:
        """The search worker processes (search/workers/pool.py), started in the background; None
        when searches run in this process."""
        return self.search_services.workers

    def _bound_caches(self) -> None:
        """Apply the cache size settings, and the smallest buffer a search worker writes (at start
        and on every cluster settings update)."""
        settings = self.cluster_settings
        self.hitlists.resize(settings.get("indices.cache.hitlist.size"))
        self.request_cache.resize(settings.get("indices.requests.cache.size"))
        self.sort_orders.resize(settings.get("indices.cache.sort_orders.size"))
        self.global_ordinals.resize(settings.get("indices.fielddata.cache.size"))
        self.source_blocks.resize(settings.get("indices.cache.source_blocks.size"))
        self.contexts.read_ahead.max_pages = settings.get("search.read_ahead.max_pages")
        self.contexts.walks.max_bytes = int(settings.get(MAX_WALK_MEMORY))
        self.shard_services.builder_min_docs = settings.get(MIN_DOCS_SETTING)

    def _identity(self) -> dict:
        path = self.path / "node.json"
        if path.exists():
            return orjson.loads(path.read_bytes())
        ident = {
            "node_id": uuidlib.uuid4().hex[:22],
            "cluster_uuid": uuidlib.uuid4().hex[:22],
            "name": os.uname().nodename or "leafsearch",
        }
        write_json(path, ident)
        return ident

    # ---- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for thread in self._threads:
            thread.join(timeout=60)
        self.msearch_pool.shutdown(wait=True)
        self.shard_pool.shutdown(wait=True)
        if self.search_workers is not None:
            self.search_workers.close()
        self.tasks.close()
        if self.ray is not None:
            self.ray.close()
        self.repositories.close()
        self.contexts.close_all()
        self.shard_contexts.close_all()
        self.hitlists.close()
        self.request_cache.close()
        try:
            with self.lock:
                for index in self.indices.values():
                    try:
                        index.close()
                    except ElasticError:  # a flush failed: its shards closed all the same
                        _log.exception("closing [%s] failed", index.name)
            self.shard_services.close()
        finally:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
            self._lock_file.close()

    def __enter__(self) -> Node:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refresh_loop(self) -> None:
        """Periodic refresh per `index.refresh_interval`, and the reader-context reaper."""
        last_refresh: dict[str, float] = {}
        while not self._closed.wait(0.05):
            try:
                self.contexts.reap()
            except Exception:  # pragma: no cover - keep the node alive; the next tick retries
                _log.exception("reaping reader contexts failed")
            self.refresh_due(last_refresh, time.monotonic())

    def refresh_due(self, last_refresh: dict[str, float], now: float) -> None:
        """One tick of the periodic refresh: each index whose `index.refresh_interval` has passed
        since `last_refresh[uuid]` (updated). An index whose refresh fails fails alone: it is left
        as it was (Shard.refresh), the others refresh, and its next interval tries again."""
        for index in list(self.indices.values()):
            interval = index.refresh_interval_seconds()
            if index.remote is not None or interval is None or index.search_idle():
                continue
            if now - last_refresh.get(index.uuid, 0) >= interval:
                last_refresh[index.uuid] = now
                try:
                    index.refresh()
                except Exception:
                    _log.exception("periodic refresh of [%s] failed", index.name)

    def _merge_loop(self) -> None:
        """Background merges, one at a time, beside searches and writes (merge_worker.py says
        why they do not wait for a quiet index). A merge runs in the worker process at a lower
        CPU priority and only its installation takes the shard lock, briefly."""
        while not self._closed.wait(0.5):
            self.merge_due()

    def _allocation_loop(self) -> None:
        """Every `ALLOCATION_SECONDS`, `allocate`."""
        while not self._closed.wait(ALLOCATION_SECONDS):
            self.allocate()

    def allocate(self) -> None:
        """One round of a Ray cluster's allocation, as Elasticsearch's runs in the background:
        the cluster's metadata applied (`before_request`), then each index's replicas placed and
        those not in sync recovering (ray_backend/remote.py `reconcile`: every coordinator runs
        it; a recovery claimed by one is left alone by the others). An index whose round fails
        fails alone."""
        try:
            self.before_request()
        except ElasticError as exc:  # (the metadata unreachable: the next round tries again)
            _log.warning("allocation: the cluster's metadata could not be read: %s", exc)
            return
        for index in list(self.indices.values()):
            remote = index.remote
            if remote is None or index.closed:
                continue
            try:
                remote.reconcile()
            except Exception:
                _log.exception("allocating the copies of [%s] failed", index.name)

    def merge_due(self) -> None:
        """One round of background merges: every merge each shard's policy asks for. A shard
        whose merge fails fails alone: it is left as it was (Shard.maybe_merge), the other
        shards merge, and the next round tries again."""
        for index in list(self.indices.values()):
            for shard in index.shards:
                try:
                    while not self._closed.is_set() and shard.maybe_merge():
                        pass
                except Exception:
                    _log.exception("background merge of [%s][%d] failed", index.name, shard.shard_id)

    # ---- indices -----------------------------------------------------------------------

    def resolve_indices(
        self,
        expr: str | None,
        *,
        ignore_unavailable: bool = False,
        allow_no_indices: bool = True,
        expand_wildcards: str = "open",
        forbid_closed: bool = True,
    ) -> list[str]:
        """Concrete index names of an expression, alias names resolved to their indices; closed
        indices refused unless `forbid_closed` is false (as Elasticsearch's search refuses them)."""
        return resolve_index_expression(
            self.indices,
            expr,
            ignore_unavailable=ignore_unavailable,
            allow_no_indices=allow_no_indices,
            expand_wildcards=expand_wildcards,
            aliases=self.aliases.resolving,
            forbid_closed=forbid_closed,
        )

    def resolve_names(
        self,
        expr: str | None,
        *,
        ignore_unavailable: bool = False,
        allow_no_indices: bool = True,
        expand_wildcards: str = "open",
        forbid_closed: bool = True,
    ) -> list[str]:
        """The index and alias names of an expression (aliases not yet resolved)."""
        return resolve_names(
            self.indices,
            expr,
            ignore_unavailable=ignore_unavailable,
            allow_no_indices=allow_no_indices,
            expand_wildcards=expand_wildcards,
            aliases=self.aliases.resolving,
            forbid_closed=forbid_closed,
        )

    def _reach(
        self, expr: str | None, options: IndicesOptions, routing: str | None
    ) -> tuple[list[Index], dict[str, IndexScope]]:
        """What a search of `expr` reads (`CoordinatorServices.reach`)."""
        names = self.resolve_names(
            expr,
            ignore_unavailable=options.ignore_unavailable,
            allow_no_indices=options.allow_no_indices,
            expand_wildcards=options.expand_wildcards,
        )
        scopes = search_scopes(self.aliases.resolving, names, routing)
        return [self.indices[name] for name in sorted(scopes)], scopes

    def get_index(self, name: str) -> Index:
        index = self.indices.get(name)
        if index is None:
            raise IndexNotFound(name)
        return index

    def create_index(
        self, name: str, settings: dict[str, str], mapping: Mapping, *, data_stream: str | None = None
    ) -> Index:
        with self.lock:
            folder = self.path / "indices"
            index = Index.create(
                folder, name, settings, mapping, self.shard_services, self.ray, data_stream=data_stream
            )
            self.indices[name] = index
            return index

    def _auto_create_index(self, name: str) -> Index:
        try:
            return auto_create_index(self, name)
        except ResourceAlreadyExists:  # another coordinator created it meanwhile
            self.before_request()
            return self.get_index(name)

    def before_request(self) -> None:
        """Called before each request is served: the changes other coordinators made to the
        cluster's metadata are applied first (node/cluster_sync.py)."""
        if self.cluster_sync is not None:
            self.cluster_sync.sync(self)

    def forget_index(self, name: str) -> None:
        """Another coordinator deleted the index (or replaced it by one of the same name): this
        node's copy goes, its contexts freed; its shards went with the deleting coordinator."""
        index = self.indices.pop(name)
        self.contexts.drop_index(index)
        doomed = index.folder.with_name(DELETED_PREFIX + index.folder.name)
        with contextlib.suppress(FileNotFoundError):
            os.replace(index.folder, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        if self.aliases.of_index(name):
            self.aliases.set_current(self.aliases.without_index(name))

    def drop_index(self, name: str, *, keep_aliases: bool = False) -> None:
        """Delete an index and its aliases (`keep_aliases`: the caller publishes the table)."""
        with self.lock:
            index = self.indices.pop(name)
            self.contexts.drop_index(index)
            index.destroy()
            if not keep_aliases and self.aliases.of_index(name):
                self.aliases.publish(self.aliases.without_index(name), self.indices)

    # ---- search (see search/coordinator.py) ---------------------------------------------------

    def search(
        self,
        request: SearchRequest,
        *,
        raw_hits: bool = False,
        cancelled: threading.Event | None = None,
        lend: Lend | None = None,
    ) -> dict[str, Any] | Written:
        return coordinator.search(
            self.search_services, request, raw_hits=raw_hits, cancelled=cancelled, lend=lend
        )

    def fielddata_memory(self) -> dict[str, int]:
        held = self.fielddata.memory()
        for worker in self.search_workers.stats()["workers"] if self.search_workers is not None else ():
            for shard, size in worker.get("fielddata", {}).items():
                held[shard] = held.get(shard, 0) + size
        return held

    def clear_fielddata(self, shards: set[str]) -> None:
        self.fielddata.clear(shards)
        if self.search_workers is not None:
            self.search_workers.clear_fielddata(shards)

    def count(self, request: SearchRequest, *, cancelled: threading.Event | None = None) -> dict[str, Any]:
        return coordinator.count(self.search_services, request, cancelled=cancelled)

    def scroll(
        self, scroll_id: str, keep_alive: str | None, *, raw_hits: bool = False, lend: Lend | None = None
    ) -> dict[str, Any] | Written:
        return scroll_pit.scroll(self.search_services, scroll_id, keep_alive, raw_hits=raw_hits, lend=lend)

    def clear_scroll(self, scroll_ids: list[str]) -> dict[str, Any]:
        return scroll_pit.clear_scroll(self.search_services, scroll_ids)

    def open_pit(
        self,
        index_expr: str,
        keep_alive: str | None,
        options: IndicesOptions | None = None,
        routing: str | None = None,
    ) -> dict[str, Any]:
        return scroll_pit.open_pit(self.search_services, index_expr, keep_alive, options, routing)

    def close_pit(self, pit_id: str) -> dict[str, Any]:
        return scroll_pit.close_pit(self.search_services, pit_id)

    def search_contexts(self) -> list[dict]:
        return self.contexts.describe()

    # ---- node info and stats -------------------------------------------------------------

    def nodes_info(self) -> dict:
        from leafsearch.node.stats import nodes_info

        return nodes_info(self)

    def nodes_stats(self, metric_path: list[str], *, level: str = "node", file_sizes: bool = False) -> dict:
        from leafsearch.node.stats import nodes_stats

        return nodes_stats(self, metric_path, level=level, file_sizes=file_sizes)


def _build_in_workers(pool: WorkerPool, job: BuildJob) -> Any:
    """A segment written by a search worker (`ShardServices.builder`)."""
    try:
        return pool.run_job(job)
    except WorkerUnavailable:
        raise BuildUnavailable from None
