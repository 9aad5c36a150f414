"""A coordinator's mirror of the cluster's metadata, when several coordinators serve one Ray
cluster (`serve --ray ADDRESS` started several times; ray_backend/metadata.py holds the metadata).

What is shared, each an entry of the cluster's versioned metadata: every Ray-backed index's
`meta.json` (`index/<name>`: mapping, settings, state, placement) and shard map (`shards/<uuid>`:
its copies, primaries, in-sync sets and terms, ray_backend/replication.py), the node's tables
(`TABLES`: aliases, index templates, data streams, stored scripts, cluster settings), the users
file (`security/users`) and each API key (`api_key/<id>`). The node's data folder keeps its copy,
so the node's code reads what it always read:

- **at start** (`prepare`, before the node loads its folder) the folder is made the cluster's
  copy: indices created elsewhere written in, indices deleted elsewhere dropped (their shard
  actors are the deleting coordinator's to end), aliases and security files replaced. A node that
  finds the cluster's metadata empty publishes what its folder holds (`publish_all`: the first
  coordinator of a cluster, or one started on an existing folder);
- **before every request** (`sync`, from the REST dispatcher and `Client`) the cluster version is
  read and, when it moved, the entries changed since this node's are applied under `Node.lock`:
  so a change made through any coordinator is seen by the next request through any other;
- **changes made here** are published before they are used: an index's metadata by the index
  (index/shared_meta.py), the tables and API keys by their owners' `shared` hooks, and the users
  file (written by `leafsearch users` into this node's folder) by `sync` when it changed.

A table changed through two coordinators from the same version keeps both changes: each entry
(an alias of an index, a template of a kind, a stream, a script, a setting of a scope) is taken
from the change that made one (`merge3`), as Elasticsearch's master applies both tasks in turn.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.durable import FOLDER_MODE, write_private
from leafsearch.errors import ElasticError, ResourceAlreadyExists
from leafsearch.index.index import Index, write_json
from leafsearch.index.shared_meta import ABSENT, MAX_ROUNDS, MetadataStore, SharedIndexMeta, index_key

if TYPE_CHECKING:
    from leafsearch.node.node import Node

ALIASES = "aliases"
TEMPLATES = "templates"
DATA_STREAMS = "data_streams"
SCRIPTS = "scripts"
CLUSTER_SETTINGS = "cluster_settings"
#: Each shared table of the node, and the depth of its entries: the aliases by index uuid, then
#: alias; templates by kind, then name; streams by name; scripts under "scripts", by id; cluster
#: settings by scope (persistent, transient), then key.
TABLES = {ALIASES: 2, TEMPLATES: 2, DATA_STREAMS: 1, SCRIPTS: 2, CLUSTER_SETTINGS: 2}
USERS = "security/users"
API_KEY = "api_key/"
SHARD_MAP = "shards/"  # (ray_backend/replication.py's, not imported: Ray stays out of node/)
_INDEX = index_key("")


def merge3(base: Any, mine: Any, theirs: Any, depth: int) -> Any:
    """`mine` and `theirs`, two changes of `base`: each entry `depth` levels down from the change
    that made one (`mine` where both did), entries removed by either gone."""
    if depth == 0:
        return mine if mine != base else theirs
    absent = {} if depth > 1 else None
    merged = {}
    for key in {**base, **mine, **theirs}:
        value = merge3(base.get(key, absent), mine.get(key, absent), theirs.get(key, absent), depth - 1)
        if value is not None and (depth == 1 or value):
            merged[key] = value
    return merged


def _order(key: str) -> int:
    """Indices before the aliases naming them."""
    return 0 if key.startswith(_INDEX) else 1


class ClusterSync:
    """See the module's docstring."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.index_meta = SharedIndexMeta(store)
        #: The cluster version this node's copy is at.
        self.version = 0
        self._lock = threading.Lock()
        self._users_stamp: tuple[int, int] | None = None
        self._users: bytes | None = None  # the users file as last published or adopted
        #: Each table's entry (`TABLES`) as last published or adopted: its version and value.
        self._tables: dict[str, tuple[int, Any]] = {}
        #: The tables the cluster held at start, adopted once the node has its owners (`attach`).
        self._initial: dict[str, tuple[int, bytes]] = {}

    # ---- start ---------------------------------------------------------------------------

    def prepare(self, data: Path) -> bool:
        """Make the data folder `data` the cluster's copy (see the module's docstring); whether
        the cluster's metadata was empty (the node then calls `publish_all` once loaded)."""
        version, entries = self.store.changes(0)
        if version == 0:
            return True
        shared = {}
        for key, (entry_version, value) in entries.items():
            if key.startswith(_INDEX) and value is not None:
                meta = orjson.loads(value)
                shared[meta["uuid"]] = {**meta, "shared_version": entry_version}
        indices = data / "indices"
        for folder in indices.iterdir():
            with contextlib.suppress(FileNotFoundError, orjson.JSONDecodeError):
                local = orjson.loads((folder / "meta.json").read_bytes())
                if "placement" in local and local["uuid"] not in shared:  # deleted while this node was down
                    shutil.rmtree(folder, ignore_errors=True)
        for uuid, meta in shared.items():
            (indices / uuid).mkdir(mode=FOLDER_MODE, exist_ok=True)
            write_json(indices / uuid / "meta.json", meta)
        values = {key: value for key, (_, value) in entries.items() if value is not None}
        keys = {k[len(API_KEY) :]: orjson.loads(v) for k, v in values.items() if k.startswith(API_KEY)}
        if keys:
            write_private(data / "security" / "api_keys.json", orjson.dumps({"api_keys": keys}))
        if USERS in values:
            self._users = values[USERS]
            write_private(data / "security" / "users.json", values[USERS])
        self._initial = {key: (entries[key][0], value) for key, value in values.items() if key in TABLES}
        self.version = version
        return False

    def attach(self, node: Node) -> None:
        """Adopt the tables the cluster held at start; publish this node's changes of its tables
        and API keys as they are made."""
        for key, (version, value) in self._initial.items():
            self._apply(node, key, version, value)
        self._initial = {}
        for key, owner in _owners(node).items():
            owner.shared = partial(self._publish, key)
        node.security.shared = lambda key_id, record: self._put(API_KEY + key_id, record)

    def publish_all(self, node: Node) -> None:
        """The first coordinator of a cluster publishes what its folder holds."""
        for index in node.indices.values():
            if index.placement is not None:
                with contextlib.suppress(ResourceAlreadyExists):  # (another coordinator's of the name won)
                    index.shared_version = self.index_meta.claim(index.meta_body())
        for key, owner in _owners(node).items():
            if owner.path.exists():
                self._publish(key, owner.path.read_bytes())
        for key_id, record in node.security.api_keys():
            self._put(API_KEY + key_id, orjson.dumps(record))

    def _put(self, key: str, value: bytes) -> None:
        self.store.put(key, value, None)

    def _publish(self, key: str, data: bytes) -> bytes:
        """Publish the table `key` as `data`, made from the one at its last version here; when
        another coordinator changed it since, the two changes are merged (`merge3`) and published
        again. The table as published."""
        version, base = self._tables.get(key, (0, {}))
        mine = orjson.loads(data)
        for _ in range(MAX_ROUNDS):
            done, now, current = self.store.put(key, data, version if version else ABSENT)
            if done or current == data:
                self._tables[key] = (now, mine)
                return data
            theirs = orjson.loads(current) if current else {}
            mine = merge3(base, mine, theirs, TABLES[key])
            version, base, data = now, theirs, orjson.dumps(mine)
        raise ElasticError(
            f"the {key} changed through other coordinators {MAX_ROUNDS} times while this one changed them",
            status=503,
            error_type="process_cluster_event_timeout_exception",
        )

    # ---- every request -------------------------------------------------------------------

    def sync(self, node: Node) -> None:
        """Apply every change made through other coordinators (see the module's docstring)."""
        with self._lock:
            self._share_users(node)
            if self.store.version() == self.version:
                return
            version, changed = self.store.changes(self.version)
            if changed:
                with node.lock:
                    for key in sorted(changed, key=_order):
                        self._apply(node, key, *changed[key])
            self.version = version

    def _share_users(self, node: Node) -> None:
        path = node.security.users_file.path
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._users_stamp:
            return
        self._users_stamp = stamp
        data = path.read_bytes()
        if data != self._users:
            self._users = data
            self.store.put(USERS, data, None)

    def _apply(self, node: Node, key: str, version: int, value: bytes | None) -> None:
        if key.startswith(_INDEX):
            self._apply_index(node, key[len(_INDEX) :], value, version)
        elif key in TABLES and value is not None:
            if self._tables.get(key, (0,))[0] >= version:  # this node's own change
                return
            self._tables[key] = (version, orjson.loads(value))
            if key == ALIASES:
                node.aliases.write(value)
                node.aliases.adopt(value, node.indices)
            elif key == DATA_STREAMS:
                node.data_streams.adopt(value, node.indices)
                node.aliases.set_streams(node.data_streams.as_aliases())
            else:
                _owners(node)[key].adopt(value)
        elif key == USERS and value is not None and value != self._users:
            self._users = value
            node.security.adopt_users(value)
        elif key.startswith(API_KEY) and value is not None:
            node.security.adopt_key(key[len(API_KEY) :], value)
        elif key.startswith(SHARD_MAP):
            uuid = key[len(SHARD_MAP) :]
            for index in node.indices.values():
                if index.uuid == uuid and index.remote is not None:
                    index.remote.adopt_map(version, value)

    def _apply_index(self, node: Node, name: str, value: bytes | None, version: int) -> None:
        """An index's entry as another coordinator left it: created, changed, closed, opened or
        (None) deleted. Entries of this node's own changes are at its index's version already."""
        index = node.indices.get(name)
        meta = None if value is None else orjson.loads(value)
        if index is not None and (meta is None or meta["uuid"] != index.uuid):
            node.forget_index(name)
            index = None
        if meta is None:
            return
        if index is None:
            folder = node.path / "indices" / meta["uuid"]
            folder.mkdir(mode=FOLDER_MODE, exist_ok=True)
            write_json(folder / "meta.json", {**meta, "shared_version": version})
            node.indices[name] = Index.open(folder, node.shard_services, node.ray)
            return
        if version <= index.shared_version:
            return
        with index.lock:
            settings_changed = meta["settings"] != index.settings
            if settings_changed:
                index.settings.clear()
                index.settings.update(meta["settings"])
            if settings_changed or meta["mappings"] != index.mapping.to_body():
                index.adopt_mapping(meta["mappings"])
            index.shared_version, index.shared_meta = version, meta
            index.write_meta(meta)
            closed = meta.get("state") == "close"
            change = closed != index.closed
        if change and closed:  # closed elsewhere: its actors ended there
            node.contexts.drop_index(index, "closed")
            index.closed, index.remote, index.shards = True, None, []
        elif change:  # opened elsewhere: its actors started there, found by name
            index.reattach()


def _owners(node: Node) -> dict[str, Any]:
    """The owner of each shared table: its file (`path`) and its `shared` hook."""
    return {
        ALIASES: node.aliases,
        TEMPLATES: node.templates,
        DATA_STREAMS: node.data_streams,
        SCRIPTS: node.scripts,
        CLUSTER_SETTINGS: node.cluster_settings,
    }
