"""The cluster's metadata store (ray_backend/metadata.py `MetadataActor`) and what coordinators do
with it (node/cluster_sync.py, index/shared_meta.py), without Ray: the actor's class runs over an
in-memory stand-in of Ray's internal key-value store, as Ray would run it over the GCS.

- compare-and-set: a name is claimed once; a change based on an older version is refused, with
  what holds now; a store read again (the actor restarted) has every entry and the version;
- the open-context count is atomic and orphaned reservations go;
- two coordinators changing the aliases from the same version: both changes stay (three-way
  merge), a removal by one is not undone by the other's later change.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from leafsearch.errors import ResourceAlreadyExists
from leafsearch.index.shared_meta import ABSENT, SharedIndexMeta
from leafsearch.node.cluster_sync import ALIASES, CLUSTER_SETTINGS, DATA_STREAMS, TEMPLATES, ClusterSync
from leafsearch.ray_backend import metadata


def _text(key: str | bytes) -> str:
    return key.decode() if isinstance(key, bytes) else key


class FakeKV:
    """Ray's internal KV as the actor uses it: bytes by key (given as text or bytes), listed by
    prefix (as bytes)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def _internal_kv_put(
        self, key: str | bytes, value: bytes, overwrite: bool = True, *, namespace: str
    ) -> bool:
        existed = _text(key) in self.data
        if overwrite or not existed:
            self.data[_text(key)] = value
        return existed

    def _internal_kv_get(self, key: str | bytes, *, namespace: str) -> bytes | None:
        return self.data.get(_text(key))

    def _internal_kv_del(self, key: str | bytes, *, namespace: str) -> None:
        self.data.pop(_text(key), None)

    def _internal_kv_list(self, prefix: str, *, namespace: str) -> list[bytes]:
        return [key.encode() for key in self.data if key.startswith(prefix)]


class Store:
    """`MetadataClient`'s interface over an actor object called in-process."""

    def __init__(self, actor: metadata.MetadataActor, kv: FakeKV) -> None:
        self.actor, self.kv = actor, kv

    def version(self) -> int:
        return int(self.kv.data.get(metadata.VERSION_KEY, b"0"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.actor, name)


@pytest.fixture
def kv(monkeypatch: pytest.MonkeyPatch) -> FakeKV:
    fake = FakeKV()
    monkeypatch.setattr(metadata, "_kv", lambda: fake)
    return fake


def test_entries_are_compare_and_set_on_one_version_and_survive_a_restart(kv: FakeKV) -> None:
    actor = metadata.MetadataActor()
    assert actor.put("index/a", b"1", ABSENT) == (True, 1, b"1")
    assert actor.put("index/a", b"2", ABSENT) == (False, 1, b"1")  # the name is taken
    assert actor.put("index/a", b"2", 0) == (False, 1, b"1")  # changed since
    assert actor.put("index/a", b"2", 1) == (True, 2, b"2")
    assert actor.put("aliases", b"{}", None)[0]
    assert actor.changes(1) == (3, {"index/a": (2, b"2"), "aliases": (3, b"{}")})
    assert actor.changes(3) == (3, {})
    assert actor.put("index/a", None, 2) == (True, 4, None)  # removed: the name is free again
    assert actor.put("index/a", b"new", ABSENT) == (True, 5, b"new")
    secret = actor.secret()
    again = metadata.MetadataActor()  # restarted: everything read back from the store
    assert again.version == 5 and again.secret() == secret and len(secret) == 32
    assert again.changes(0) == (5, {"index/a": (5, b"new"), "aliases": (3, b"{}")})
    assert Store(again, kv).version() == 5


def test_context_reservations_count_atomically_and_orphans_go(kv: FakeKV) -> None:
    actor = metadata.MetadataActor()
    assert actor.ctx_reserve("k1", "pit", 2) and actor.ctx_reserve("k2", "pit", 2)
    assert not actor.ctx_reserve("k3", "pit", 2)
    assert actor.ctx_reserve("s1", "scroll", 1)  # each kind its own limit
    written = actor.ctx_put("k1", "pit", 1000.0, b"record")
    assert actor.ctx_get("k1") == (b"record", written)
    assert actor.ctx_get("k2") == (None, written)  # (not written yet)
    assert actor.ctx_keys("pit") == ["k1"]
    # Past its expiry and the grace: the written one is listed, the reservations dropped.
    assert actor.ctx_expired(1e12, 5.0) == ["k1"]
    assert actor.ctx_reserve("k3", "pit", 2)
    again = metadata.MetadataActor()  # restarted: the record kept, the contexts' version above
    assert again.ctx_get("k1") == (b"record", again.versions()[1]) and again.versions()[1] > written
    assert actor.ctx_remove("k1") and not actor.ctx_remove("k1")  # one coordinator ends it


def test_the_contexts_version_moves_with_every_record_written_or_removed_only(kv: FakeKV) -> None:
    """A coordinator's copy of a record as of a contexts' version is the cluster's while the
    version has not moved (search/contexts.py reads no record then): every write and removal of
    a record moves it, a reservation or a read does not."""
    actor = metadata.MetadataActor()
    start = actor.versions()[1]
    assert actor.ctx_reserve("k1", "pit", 5) and actor.versions()[1] == start
    first = actor.ctx_put("k1", "pit", 1000.0, b"one")
    assert first > start and actor.versions()[1] == first
    assert actor.ctx_get("k1") == (b"one", first) and actor.versions()[1] == first
    second = actor.ctx_put("k1", "pit", 1001.0, b"two")
    assert second > first and actor.ctx_get("k1") == (b"two", second)
    assert actor.ctx_reserve("k2", "pit", 5) and actor.ctx_remove("k2")  # never written: no change
    assert actor.versions()[1] == second
    assert actor.ctx_remove("k1") and actor.versions()[1] > second
    assert actor.ctx_get("k1") == (None, actor.versions()[1])


def test_a_name_claimed_by_one_coordinator_is_refused_to_the_other(kv: FakeKV) -> None:
    store = Store(metadata.MetadataActor(), kv)
    first, second = SharedIndexMeta(store), SharedIndexMeta(store)
    first.claim({"name": "logs", "uuid": "u1"})
    with pytest.raises(ResourceAlreadyExists, match=r"index \[logs/u1\] already exists"):
        second.claim({"name": "logs", "uuid": "u2"})


def test_alias_changes_from_the_same_version_through_two_coordinators_both_stay(kv: FakeKV) -> None:
    store = Store(metadata.MetadataActor(), kv)
    one, two = ClusterSync(store), ClusterSync(store)
    one._publish(ALIASES, orjson.dumps({"u1": {"x": {}}}))
    # The other coordinator had not seen it: its change is merged with it, not over it.
    merged = two._publish(ALIASES, orjson.dumps({"u1": {"y": {"is_write_index": True}}}))
    assert orjson.loads(merged) == {"u1": {"x": {}, "y": {"is_write_index": True}}}
    # The first removes x from what it knew (x only); the other's y stays.
    merged = one._publish(ALIASES, orjson.dumps({}))
    assert orjson.loads(merged) == {"u1": {"y": {"is_write_index": True}}}
    assert orjson.loads(store.changes(0)[1][ALIASES][1]) == {"u1": {"y": {"is_write_index": True}}}


def test_every_shared_table_merges_two_changes_made_from_one_version(kv: FakeKV) -> None:
    store = Store(metadata.MetadataActor(), kv)
    one, two = ClusterSync(store), ClusterSync(store)
    one._publish(TEMPLATES, orjson.dumps({"index_template": {"a": {"index_patterns": ["a-*"]}}}))
    merged = two._publish(TEMPLATES, orjson.dumps({"component_template": {"c": {"template": {}}}}))
    assert orjson.loads(merged) == {
        "index_template": {"a": {"index_patterns": ["a-*"]}},
        "component_template": {"c": {"template": {}}},
    }
    # Cluster settings by scope then key: a key set by each stays; one removed by one stays removed.
    one._publish(CLUSTER_SETTINGS, orjson.dumps({"persistent": {"x": "1", "y": "2"}}))
    merged = two._publish(CLUSTER_SETTINGS, orjson.dumps({"transient": {"z": "3"}}))
    assert orjson.loads(merged) == {"persistent": {"x": "1", "y": "2"}, "transient": {"z": "3"}}
    merged = one._publish(CLUSTER_SETTINGS, orjson.dumps({"persistent": {"x": "1"}}))
    assert orjson.loads(merged) == {"persistent": {"x": "1"}, "transient": {"z": "3"}}
    # Data streams by name (one level): a stream each, and a change of one stream by one.
    stream = {"template": "t", "indices": [".ds-a-1"], "generation": 1}
    one._publish(DATA_STREAMS, orjson.dumps({"a": stream}))
    merged = two._publish(DATA_STREAMS, orjson.dumps({"b": stream}))
    assert set(orjson.loads(merged)) == {"a", "b"}
    rolled = {**stream, "indices": [".ds-a-1", ".ds-a-2"], "generation": 2}
    merged = one._publish(DATA_STREAMS, orjson.dumps({"a": rolled}))
    assert orjson.loads(merged) == {"a": rolled, "b": stream}
