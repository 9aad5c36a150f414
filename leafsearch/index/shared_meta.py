"""An index's metadata kept in the cluster's one place (several coordinators of a Ray cluster).

Every change of an index's metadata (`meta.json`: mapping, settings, state, shard map) is a
compare-and-set of its entry `index/<name>` on the cluster's version (`MetadataStore.put`,
ray_backend/metadata.py), made under the index's lock before the change is used, as
Elasticsearch's master publishes a mapping update before the write that needed it goes on:

- a creation claims the name (`claim`): of two coordinators creating one index, one wins and the
  other gets `resource_already_exists_exception`, before either starts a shard;
- an update found stale (another coordinator changed the index since) is merged and tried again:
  the other's mapping merged into this one's (fields added on both sides both stay; the same field
  mapped two ways is the put-mapping conflict, `illegal_argument_exception`, and this coordinator
  takes the other's mapping), the other's settings with the keys this change set;
- a deletion removes the entry; other coordinators drop the index at their next request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import orjson

from leafsearch.errors import ElasticError, IndexNotFound, ResourceAlreadyExists

if TYPE_CHECKING:
    from leafsearch.index.index import Index

#: `MetadataStore.put`'s `expect` for a name that must be free.
ABSENT = -1
#: Compare-and-set rounds before a change gives up (each lost round means another change won).
MAX_ROUNDS = 20


class MetadataStore(Protocol):
    """The cluster's versioned metadata entries (ray_backend/metadata.py `MetadataClient`)."""

    def version(self) -> int:
        """The cluster version, cheaply (read where the metadata is kept)."""
        ...

    def changes(self, since: int) -> tuple[int, dict[str, tuple[int, bytes | None]]]:
        """The cluster version, and each entry changed since `since`: its version and value."""
        ...

    def put(self, key: str, value: bytes | None, expect: int | None) -> tuple[bool, int, bytes | None]:
        """Set or remove (None) an entry if its version is `expect` (`ABSENT`: no value; None: any):
        (done, its version, its value) after."""
        ...


def index_key(name: str) -> str:
    return f"index/{name}"


class SharedIndexMeta:
    """The index side of the cluster's metadata (see the module's docstring)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def claim(self, meta: dict[str, Any]) -> int:
        """Publish a new index's metadata; its entry's version. `resource_already_exists_exception`
        when the name is taken in the cluster."""
        done, version, current = self.store.put(index_key(meta["name"]), orjson.dumps(meta), ABSENT)
        if not done:
            uuid = orjson.loads(current)["uuid"] if current else "_na_"
            raise ResourceAlreadyExists(
                f"index [{meta['name']}/{uuid}] already exists",
                extra={"index_uuid": uuid, "index": meta["name"]},
            )
        return version

    def publish(self, index: Index, meta: dict[str, Any]) -> None:
        """Publish `meta`, the index's metadata after a change (the caller holds `index.lock`);
        merged first with changes another coordinator made meanwhile (then adopted by `index`)."""
        key = index_key(index.name)
        for _ in range(MAX_ROUNDS):
            done, version, current = self.store.put(key, orjson.dumps(meta), index.shared_version)
            theirs = None if current is None else orjson.loads(current)
            if done or theirs == meta:  # (the same value: our own put, sent again after a restart)
                index.shared_version, index.shared_meta = version, meta
                return
            if theirs is None or theirs["uuid"] != index.uuid:
                raise IndexNotFound(index.name)
            meta = _merged(index, theirs, meta)
            index.shared_version = version
        raise ElasticError(
            f"[{index.name}] metadata changed by other coordinators {MAX_ROUNDS} times while this one "
            "updated it",
            status=503,
            error_type="process_cluster_event_timeout_exception",
        )

    def remove(self, index: Index) -> None:
        """Remove the index's entry, unless another index of the name replaced it."""
        key, expect = index_key(index.name), index.shared_version
        for _ in range(MAX_ROUNDS):
            done, version, current = self.store.put(key, None, expect)
            if done or current is None or orjson.loads(current)["uuid"] != index.uuid:
                return
            expect = version


def _merged(index: Index, theirs: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    """`mine` after `theirs` won the race: their mapping merged into the index's, their settings
    with the keys this change set, their state unless this change set it. The index adopts the
    mapping and settings."""
    base = index.shared_meta or theirs
    try:
        index.mapping.merge(theirs["mappings"])
    except ElasticError:
        index.adopt_mapping(theirs["mappings"])  # theirs decided: this change's fields conflict
        raise
    settings = dict(theirs["settings"])
    for key in set(base["settings"]) | set(mine["settings"]):
        if base["settings"].get(key) != mine["settings"].get(key):
            if key in mine["settings"]:
                settings[key] = mine["settings"][key]
            else:
                settings.pop(key, None)
    index.settings.clear()
    index.settings.update(settings)
    merged = index.meta_body()
    # (their close or open: the next sync applies it)
    if mine.get("state", "open") == base.get("state", "open"):
        merged["state"] = theirs.get("state", "open")
    return merged
