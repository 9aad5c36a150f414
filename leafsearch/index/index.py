"""An index: its settings, mapping and shards, persisted under `<data>/indices/<uuid>/`.

The index's metadata (`meta.json`: name, uuid, settings, mapping, creation date) is rewritten
atomically whenever the mapping or settings change, before the write that changed them is
acknowledged, so a restart finds the same fields with the same types. `state` is `close` for a
closed index: its files stay, no shard is opened (at start either) until it is opened again.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.durable import FOLDER_MODE, fsync_dir, private
from leafsearch.common.settings import index_setting
from leafsearch.errors import DocumentParsing, ElasticError, IndexClosed
from leafsearch.index.analyzers import analysis_of
from leafsearch.index.index_sort import IndexSort, index_sort_of
from leafsearch.index.mapping import Mapping
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.parsed import ParsedBatch
from leafsearch.index.routing import default_routing_num_shards, shard_for
from leafsearch.index.shard import Shard
from leafsearch.index.shard_services import ShardServices
from leafsearch.index.source_blocks import codec_of

if TYPE_CHECKING:
    from leafsearch.index.backend import RemoteShards, ShardBackend
    from leafsearch.index.shared_meta import SharedIndexMeta


class Index:
    def __init__(
        self, folder: Path, meta: dict, services: ShardServices, backend: ShardBackend | None = None
    ) -> None:
        """`services`: what the node gives its shards (shard_services.py); `backend`: the node's
        Ray cluster, which serves the shards of an index whose metadata has a shard map
        (`placement`) as actors."""
        self.folder = folder
        self.name: str = meta["name"]
        self.uuid: str = meta["uuid"]
        self.creation_date: int = meta["creation_date"]
        self.settings: dict[str, str] = meta["settings"]
        self.mapping: Mapping = Mapping.from_body(meta.get("mappings"), analysis_of(meta["settings"]))
        apply_mapping_limits(self.mapping, self.settings)
        #: Guards the mapping (dynamic updates) and settings; shards have their own locks.
        self.lock = threading.RLock()
        self.num_shards: int = int(index_setting(self.settings, "index.number_of_shards"))
        routing = self.settings.get("index.number_of_routing_shards")
        self.routing_num_shards = int(routing) if routing else default_routing_num_shards(self.num_shards)
        self._persisted_mapping_version = self.mapping.version
        #: The order every segment is written in (`index.sort.*`; fixed at creation).
        self.sort: IndexSort | None = index_sort_of(self.settings, self.mapping, self.name)
        self.mapping.index_sorted = self.sort is not None
        self._services = services
        self.closed: bool = meta.get("state") == "close"
        #: The data stream this index backs (its documents need an `@timestamp`), else None.
        self.data_stream: str | None = meta.get("data_stream")
        #: Where each shard lives when the shards are Ray actors (machine and folder), else None.
        self.placement: list[dict[str, str]] | None = meta.get("placement")
        #: The shard actors (ray_backend/remote.py) of a Ray-backed index, else None.
        self.remote: RemoteShards | None = None
        self._backend = backend
        #: The cluster's metadata when several coordinators share it (index/shared_meta.py), the
        #: version of this index's entry there and the metadata it holds.
        self.shared: SharedIndexMeta | None = backend.metadata if backend is not None else None
        self.shared_version: int = meta.get("shared_version", 0)
        self.shared_meta: dict | None = {k: v for k, v in meta.items() if k != "shared_version"}
        self.shards: list[Any] = []
        if self.placement is not None:
            if backend is None:
                raise RuntimeError(
                    f"index [{self.name}] has its shards on a Ray cluster: start the node with --ray"
                )
            if not self.closed:  # a closed index has no shard actors until it is opened
                self._attach()
        elif not self.closed:
            self.shards = self._open_shards()
        self._persist_if_mapping_changed()
        self.last_search = time.monotonic()

    def _open_shards(self) -> list[Shard]:
        # What new segments' sources are compressed with: `index.codec`, static (set at creation,
        # or while the index is closed: read when it opens), each segment's own recorded in it.
        codec = codec_of(index_setting(self.settings, "index.codec"))
        shards = [
            Shard(self.folder / str(i), i, self._parse_for_recovery, self.sort, self._services, codec)
            for i in range(self.num_shards)
        ]
        for shard in shards:
            shard.index_ref = (self.name, self.uuid)
        return shards

    def _attach(self) -> None:
        """The shard actors of a Ray-backed index: found by name, or created from their folders."""
        assert self._backend is not None and self.placement is not None
        self.remote = self._backend.attach(self, self.placement)
        self.shards = self.remote.shards

    def reattach(self) -> None:
        """Opened by another coordinator: the shard actors it started, found by name."""
        with self.lock:
            self._attach()
            self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise IndexClosed(self.name, self.uuid)

    def close_index(self) -> None:
        """`_close`: refuse new requests, flush every shard (acknowledged writes go into committed
        segments, the translog is emptied) and let the in-memory state go; then record the state.
        A request that found a shard before it closed either finished first (the shard lock) or
        gets `index_closed_exception` from the shard. A Ray-backed index's shard actors flush and
        end (ray_backend/remote.py `RemoteIndex.close`): the index then holds no process, as it
        holds no memory here."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        if self.remote is not None:
            remote, self.remote, self.shards = self.remote, None, []
            remote.close()
        try:
            self.close()
        finally:  # a shard whose flush failed is closed too, its operations in its translog
            with self.lock:
                self.persist_meta()

    def open_index(self) -> None:
        """`_open`: recover the shards from their commits, as at start."""
        with self.lock:
            if not self.closed:
                return
            if self.placement is not None:
                self._attach()  # the shard actors again, on their nodes, recovering from their folders
            else:
                self.shards = self._open_shards()
                for shard in self.shards:  # closing the index freed its contexts
                    shard.drop_restored()
            self.closed = False
            self.persist_meta()

    @classmethod
    def create(
        cls,
        folder: Path,
        name: str,
        settings: dict[str, str],
        mapping: Mapping,
        services: ShardServices,
        backend: ShardBackend | None = None,
        *,
        data_stream: str | None = None,
    ) -> Index:
        settings = dict(settings)
        settings.setdefault("index.number_of_shards", "1")
        settings.setdefault("index.number_of_replicas", "1")
        uuid = uuidlib.uuid4().hex[:22]
        meta = {
            "name": name,
            "uuid": uuid,
            "creation_date": int(time.time() * 1000),
            "settings": settings,
            "mappings": mapping.to_body(),
        }
        if data_stream is not None:
            meta["data_stream"] = data_stream
        if backend is not None:
            shards, replicas = (
                int(index_setting(settings, f"index.number_of_{k}")) for k in ("shards", "replicas")
            )
            meta["placement"] = backend.place(uuid, shards, replicas)
            if backend.metadata is not None:  # the name is the cluster's: claimed before any shard starts
                meta["shared_version"] = backend.metadata.claim(meta)
        path = folder / uuid
        path.mkdir(mode=FOLDER_MODE, parents=True)
        write_json(path / "meta.json", meta)
        index = cls(path, meta, services, backend)
        # The folders just created (the shards', the index's) survive a power loss only once the
        # folders holding them are synced too.
        fsync_dir(path)
        fsync_dir(folder)
        return index

    @classmethod
    def open(cls, path: Path, services: ShardServices, backend: ShardBackend | None = None) -> Index:
        return cls(path, orjson.loads((path / "meta.json").read_bytes()), services, backend)

    def setting(self, key: str):
        return index_setting(self.settings, key)

    def persist_meta(self) -> None:
        """Write the metadata (`meta.json`), published first to the cluster's metadata when
        coordinators share it (index/shared_meta.py: merged there with a concurrent change)."""
        meta = self.meta_body()
        if self.shared is not None:
            self.shared.publish(self, meta)
            meta = self.meta_body()
        self.write_meta(meta)

    def write_meta(self, meta: dict) -> None:
        """Write `meta` as this coordinator's copy (`meta.json`), with its cluster version."""
        write_json(self.folder / "meta.json", {**meta, "shared_version": self.shared_version})
        self._persisted_mapping_version = self.mapping.version

    def meta_body(self) -> dict:
        """The index's metadata as `meta.json` holds it."""
        meta = {
            "name": self.name,
            "uuid": self.uuid,
            "creation_date": self.creation_date,
            "settings": self.settings,
            "mappings": self.mapping.to_body(),
            "state": "close" if self.closed else "open",
        }
        if self.data_stream is not None:
            meta["data_stream"] = self.data_stream
        if self.placement is not None:
            meta["placement"] = self.placement
        return meta

    def adopt_mapping(self, body: dict) -> None:
        """Take `body` as the mapping (another coordinator's, from the cluster's metadata), its
        version moved on so the shard actors are sent it."""
        mapping = Mapping.from_body(body, analysis_of(self.settings))
        apply_mapping_limits(mapping, self.settings)
        mapping.index_sorted = self.sort is not None
        mapping.version = self.mapping.version + 1
        self.mapping = mapping

    def _persist_if_mapping_changed(self) -> None:
        if self.mapping.version != self._persisted_mapping_version:
            self.persist_meta()

    def _parse_for_recovery(self, source: bytes, doc_id: str):
        return self.mapping.parse_document(source, doc_id)

    def parse(self, source: bytes, doc_id: str | None, *, routed: bool = True):
        """Parse a document under the mapping lock; persists dynamic mapping additions. `routed`:
        whether the write gave a routing (a `join` child needs one)."""
        with self.lock:
            parsed = self.mapping.parse_document(source, doc_id, routed=routed)
            self._persist_if_mapping_changed()
        if self.data_stream is not None and not parsed.long.get(TIMESTAMP):
            raise DocumentParsing(f"data stream timestamp field [{TIMESTAMP}] is missing")
        return parsed

    def parse_batch(self, sources: list[bytes]) -> ParsedBatch | None:
        """Parse many documents at once under the mapping lock; None: parse them one by one (so
        a backing index of a data stream refuses each document without `@timestamp` alone)."""
        with self.lock:
            batch = parse_batch(self.mapping, sources)
        if batch is not None and self.data_stream is not None:
            rows, values = batch.long.get(TIMESTAMP, ([], []))
            if rows is not None or len(values) != len(sources):
                return None
        return batch

    def update_settings(self, flat: dict[str, str | None]) -> None:
        """Apply settings; 400 (and nothing changes) if the mapping refuses them, as when a
        field names an analyzer the new analysis lacks."""
        with self.lock:
            updated = dict(self.settings)
            for key, value in flat.items():
                if value is None:
                    updated.pop(key, None)
                else:
                    updated[key] = value
            apply_mapping_limits(self.mapping, updated)
            self.settings.clear()
            self.settings.update(updated)
            self.persist_meta()

    def shard_of(self, doc_id: str, routing: str | None) -> Shard:
        if self.num_shards == 1:
            return self.shards[0]
        return self.shards[
            shard_for(routing if routing is not None else doc_id, self.num_shards, self.routing_num_shards)
        ]

    def refresh(self) -> None:
        """Refresh every shard; a shard whose refresh fails fails alone (the others refresh),
        its error raised after."""
        if self.remote is not None:
            self.remote.refresh()  # every shard at once
            return
        _each(self.shards, lambda shard: shard.refresh())

    def search_idle(self) -> bool:
        """Elasticsearch's search-idle shards: without an explicit `refresh_interval`, an index
        not searched for `index.search.idle.after` skips scheduled refreshes (bulk indexing then
        builds fewer, larger segments); the next search refreshes it first."""
        if "index.refresh_interval" in self.settings or self.remote is not None:
            return False  # (shard actors refresh on their own)
        return time.monotonic() - self.last_search > self.setting("index.search.idle.after")

    def before_search(self) -> None:
        """Called as a search acquires this index's snapshots."""
        self.check_open()
        idle = self.search_idle()
        self.last_search = time.monotonic()
        if idle:
            self.refresh()

    def refresh_interval_seconds(self) -> float | None:
        """None when periodic refresh is disabled (`-1`)."""
        value = self.setting("index.refresh_interval")
        return None if value is None or value < 0 else value

    def doc_count(self) -> int:
        return sum(s.doc_count() for s in self.shards)

    def lucene_doc_count(self) -> int:
        """Live documents with the hidden ones of `nested` objects, as `_cat/indices` counts."""
        return sum(s.lucene_doc_count() for s in self.shards)

    def deleted_count(self) -> int:
        return sum(s.deleted_count() for s in self.shards)

    def store_size_bytes(self) -> int:
        return sum(s.store_size_bytes() for s in self.shards)

    def close(self) -> None:
        """Close every shard, even after one fails to flush (it closes all the same); the first
        failure is raised after."""
        _each(self.shards, lambda shard: shard.close())

    def destroy(self) -> None:
        """Close and delete. The folder is first renamed away in one atomic step, so a crash in
        the middle of the deletion never leaves a half-deleted index that a restart would open."""
        with suppress(ElasticError):  # a flush that failed: its shard closed all the same, and
            self.close()  # what it would have written is being deleted
        if self.remote is None and self.placement is not None:
            self._attach()  # a closed index's actors, only to delete their folders on their nodes
        if self.remote is not None:
            self.remote.destroy()
        if self.shared is not None:
            self.shared.remove(self)
        doomed = self.folder.with_name(DELETED_PREFIX + self.folder.name)
        os.replace(self.folder, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        self._services.events.files_deleted(self.folder)


#: Folders of indices being deleted; a restart finishes deleting them.
DELETED_PREFIX = ".deleted-"


def _each(shards: list[Any], step: Callable[[Any], object]) -> None:
    """`step` on every shard, whichever fail; the first failure is raised after the last shard."""
    failure: ElasticError | None = None
    for shard in shards:
        try:
            step(shard)
        except ElasticError as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


#: The field every document of a data stream must have, a date (`data_streams.py`).
TIMESTAMP = "@timestamp"


def apply_mapping_limits(mapping: Mapping, settings: dict[str, str]) -> None:
    """The `index.mapping.*.limit` settings, as the mapping checks them on every addition, and
    the analysis (`index.analysis.*`) its text fields use."""
    mapping.set_analysis(analysis_of(settings))
    mapping.set_limits(
        index_setting(settings, "index.mapping.total_fields.limit"),
        index_setting(settings, "index.mapping.depth.limit"),
        index_setting(settings, "index.mapping.field_name_length.limit"),
        index_setting(settings, "index.mapping.nested_fields.limit"),
        index_setting(settings, "index.mapping.nested_objects.limit"),
    )


def write_json(path: Path, data: dict) -> None:
    """Replace `path` with `data` as JSON, durably: a temporary file fsynced, renamed into place,
    and the folder fsynced so the rename survives a crash too."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb", opener=private) as fh:
        fh.write(orjson.dumps(data))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
