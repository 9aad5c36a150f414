"""The cluster's metadata in one place, for every coordinator of a Ray cluster (`serve --ray`).

`MetadataActor` is one named, detached actor (`leafsearch/metadata`) that every coordinator finds
by name. It serialises every change (one call at a time) and keeps what it holds in Ray's
internal key-value store (the GCS), so:

- **one version**: each change of an entry (an index's metadata, the aliases, the users file, an
  API key) takes the next cluster version, also written to the store's `version` key; before
  each request a coordinator asks it (`MetadataClient.version`: of the actor on its channel,
  0.02 ms of CPU; of the GCS, 0.1 to 0.15 ms, while the actor does not answer) and, when it
  moved, asks the actor for the entries changed since its own (`changes`);
- **atomic changes**: `put` with `expect` is a compare-and-set on the entry's version (`ABSENT`: the
  name must be free, which makes two concurrent creations of one index end with one winner);
- **survives any coordinator** (they hold only mirrors), and the actor's own loss: Ray restarts it
  on any node (`max_restarts=-1`, not pinned) and it reads the store again. The GCS lives as long
  as the cluster does (on disk with Ray's GCS fault tolerance, where the shard actors' names live
  too). A cluster started anew gets its indices back from the first coordinator's folder
  (node/cluster_sync.py `publish_all`); the PITs and scrolls open before do not survive that.

Reader contexts (PIT and scroll records, search/context_records.py) are kept here too, outside the
versioned entries (a scroll's page changes its record: no coordinator needs to hear of it until it
serves that context): `ctx_*`, each record opaque bytes with its kind and wall-clock expiry, so the
open-context limits count every coordinator's contexts (`ctx_reserve`, atomic) and an expired
record whose coordinator died is found (`ctx_expired`). The records are kept in the actor's memory
too (a read is no GCS call), and a contexts' version moves with each written or removed, answered
with the cluster version (`versions`): a coordinator whose copy of a record is as of that version
reads none (search/contexts.py; an export's page was a record read each). The cluster's secret
(`secret`) is made once, here: context ids are authenticated with it (search/contexts.py).
"""

from __future__ import annotations

import pickle
import secrets
import struct
import threading
import time
from collections import Counter
from typing import Any

import orjson

from leafsearch.index.shared_meta import ABSENT
from leafsearch.ray_backend.channel import Address, Channels, ChannelServer, address_from_ray

#: The name and namespace every coordinator finds the actor by.
ACTOR_NAME = "metadata"
#: The internal key-value store's namespace, and its keys' prefixes.
KV_NAMESPACE = "leafsearch"
_ENTRY = "meta/"
_CONTEXT = "ctx/"
SECRET_KEY = "secret"
#: The cluster version, also kept apart: a coordinator reads it from the GCS while the actor
#: does not answer (it restarts), and asks the actor for the changes only when it moved.
VERSION_KEY = "version"
#: How long a coordinator waits for the actor's version before it reads the GCS's.
VERSION_SECONDS = 2.0
#: Seconds a reserved context (its shards being pinned) counts before its record is written.
RESERVATION_SECONDS = 120.0
_HEADER = struct.Struct("<qB")  # an entry's version, and whether it holds a value


def _kv() -> Any:
    from ray.experimental import internal_kv

    return internal_kv


def cluster_secret() -> bytes:
    """The cluster's secret, made by the first process of the cluster that asks (a coordinator's
    metadata actor, a machine actor's channel: channel.py), the same for every one after."""
    kv = _kv()
    secret = kv._internal_kv_get(SECRET_KEY, namespace=KV_NAMESPACE)
    if secret is None:
        kv._internal_kv_put(SECRET_KEY, secrets.token_bytes(32), overwrite=False, namespace=KV_NAMESPACE)
        secret = kv._internal_kv_get(SECRET_KEY, namespace=KV_NAMESPACE)
    return secret


#: The methods a coordinator calls on the actor's channel (`MetadataActor.serve`).
CALLS = frozenset(
    {
        "versions",
        "changes",
        "get",
        "put",
        "secret",
        "ctx_reserve",
        "ctx_put",
        "ctx_get",
        "ctx_remove",
        "ctx_keys",
        "ctx_expired",
    }
)


class MetadataActor:
    """See the module's docstring. Every method runs alone: the coordinators' calls come on its
    channel (channel.py, opened when Ray is first asked where it is: `channel`), one at a time
    under `_serial`. Why not Ray tasks: each cost the caller about 0.35 ms of CPU, and a PIT page
    asks for its record and writes it back."""

    def __init__(self) -> None:
        self._serial = threading.Lock()
        self._channel: ChannelServer | None = None
        #: The calls served on the channel, by method (`stats`: the bench's calls per operation).
        self._calls: Counter[str] = Counter()
        kv = _kv()
        self._entries: dict[str, tuple[int, bytes | None]] = {}
        for key in kv._internal_kv_list(_ENTRY, namespace=KV_NAMESPACE):
            raw = kv._internal_kv_get(key, namespace=KV_NAMESPACE)
            if raw is None:
                continue
            version, present = _HEADER.unpack_from(raw)
            self._entries[key.decode()[len(_ENTRY) :]] = (version, raw[_HEADER.size :] if present else None)
        self.version = max((v for v, _ in self._entries.values()), default=0)
        #: context key -> (kind, wall-clock expiry, its record: None while only reserved), the
        #: records kept here as in the store, so a read is no GCS call
        self._contexts: dict[str, tuple[str, float, bytes | None]] = {}
        for key in kv._internal_kv_list(_CONTEXT, namespace=KV_NAMESPACE):
            raw = kv._internal_kv_get(key, namespace=KV_NAMESPACE)
            if raw is not None:
                head = raw.index(b"\n")
                kind, expires = orjson.loads(raw[:head])
                self._contexts[key.decode()[len(_CONTEXT) :]] = (kind, expires, raw[head + 1 :])
        #: The contexts' version: one more with each record written or removed, from this start's
        #: wall clock in nanoseconds (above any version a start before this one handed out).
        self.contexts_version = time.time_ns()
        self._secret = cluster_secret()

    def channel(self) -> Address:
        """Where coordinators send their calls (`serve`): new with each start of the actor."""
        with self._serial:
            if self._channel is None:
                import ray

                self._channel = ChannelServer(ray.util.get_node_ip_address(), self._secret, self.serve)
            return self._channel.address

    def serve(self, message: bytes) -> bytes:
        """A coordinator's call (method, arguments), pickled: (True, its answer), or (False, why
        it failed)."""
        method, args = pickle.loads(message)
        if method not in CALLS:
            return pickle.dumps((False, f"[{method}] is not a metadata call"))
        with self._serial:
            self._calls[method] += 1
            try:
                answer = (True, getattr(self, method)(*args))
            except Exception as exc:  # the call's alone: the actor serves the next
                answer = (False, f"{type(exc).__name__}: {exc}")
        return pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)

    def stats(self) -> dict[str, dict[str, int]]:
        """The calls served so far, by method (a Ray call: not on the channel)."""
        with self._serial:
            return {"calls": dict(self._calls)}

    # ---- versioned entries -------------------------------------------------------------

    def versions(self) -> tuple[int, int]:
        """The cluster version (the store's `version` key's) and the contexts' version."""
        return self.version, self.contexts_version

    def changes(self, since: int) -> tuple[int, dict[str, tuple[int, bytes | None]]]:
        """The cluster version and every entry changed after `since`: its version and value
        (None: removed)."""
        if since >= self.version:
            return self.version, {}
        return self.version, {k: entry for k, entry in self._entries.items() if entry[0] > since}

    def get(self, key: str) -> tuple[int, bytes | None]:
        """An entry's version and value (None: absent)."""
        return self._entries.get(key, (0, None))

    def put(self, key: str, value: bytes | None, expect: int | None) -> tuple[bool, int, bytes | None]:
        """Set (or remove, `value` None) an entry, when its version is `expect` (`ABSENT`: it must
        not hold a value; None: whatever it holds). (done, the entry's version, its value) after."""
        version, current = self._entries.get(key, (0, None))
        if (current is not None) if expect == ABSENT else (expect is not None and version != expect):
            return False, version, current
        self.version += 1
        raw = _HEADER.pack(self.version, value is not None) + (value or b"")
        _kv()._internal_kv_put(_ENTRY + key, raw, namespace=KV_NAMESPACE)
        self._entries[key] = (self.version, value)
        _kv()._internal_kv_put(VERSION_KEY, str(self.version).encode(), namespace=KV_NAMESPACE)
        return True, self.version, value

    def secret(self) -> bytes:
        return self._secret

    # ---- reader contexts -----------------------------------------------------------------

    def ctx_reserve(self, key: str, kind: str, limit: int) -> bool:
        """Count a new context of `kind` if fewer than `limit` are open in the cluster."""
        if sum(1 for k, _, _ in self._contexts.values() if k == kind) >= limit:
            return False
        self._contexts[key] = (kind, time.time() + RESERVATION_SECONDS, None)
        return True

    def ctx_put(self, key: str, kind: str, expires: float, record: bytes) -> int:
        """Write a context's record; the contexts' version it is the record of."""
        head = orjson.dumps([kind, expires]) + b"\n"
        _kv()._internal_kv_put(_CONTEXT + key, head + record, namespace=KV_NAMESPACE)
        self._contexts[key] = (kind, expires, record)
        self.contexts_version += 1
        return self.contexts_version

    def ctx_get(self, key: str) -> tuple[bytes | None, int]:
        """A context's record (None: none written, or ended) and the contexts' version it is
        the record of."""
        entry = self._contexts.get(key)
        return (None if entry is None else entry[2]), self.contexts_version

    def ctx_remove(self, key: str) -> bool:
        """Forget a context; False when it was not there (another coordinator ended it)."""
        entry = self._contexts.pop(key, None)
        if entry is not None and entry[2] is not None:
            _kv()._internal_kv_del(_CONTEXT + key, namespace=KV_NAMESPACE)
            self.contexts_version += 1
        return entry is not None

    def ctx_keys(self, kind: str) -> list[str]:
        """The contexts of `kind` whose record is written."""
        return [key for key, (k, _, record) in self._contexts.items() if k == kind and record is not None]

    def ctx_expired(self, now: float, grace: float) -> list[str]:
        """The contexts past their expiry by `grace` seconds (their coordinator is gone, or
        forgot them); reservations never written are dropped here."""
        late = [k for k, (_, e, _w) in self._contexts.items() if e + grace < now]
        for key in [k for k in late if self._contexts[k][2] is None]:
            del self._contexts[key]
        return [k for k in late if k in self._contexts]


#: How long a coordinator waits for the metadata actor (restarting, or its node lost).
CALL_TIMEOUT_SECONDS = 30.0


class MetadataClient:
    """A coordinator's handle on the metadata actor, found by name or started (the first
    coordinator of a cluster starts it). Its failure to answer is Elasticsearch's
    `master_not_discovered_exception` (503): the one place that decides is unreachable."""

    def __init__(self, namespace: str) -> None:
        import ray

        self._ray = ray
        self._actor = (
            ray.remote(MetadataActor)
            .options(
                name=ACTOR_NAME,
                namespace=namespace,
                lifetime="detached",
                get_if_exists=True,
                max_restarts=-1,
                # A call caught by a restart is sent again: `put` is a compare-and-set, and a
                # coordinator that finds its own value in place counts it as done.
                max_task_retries=-1,
                max_concurrency=1,
                num_cpus=0,
            )
            .remote()
        )
        self._channels = Channels(cluster_secret(), address_from_ray)
        self._seen_lock = threading.Lock()
        #: The latest contexts' version the actor answered a request's `version` with (None: the
        #: last one was not the actor's: `contexts_seen`).
        self._contexts_seen: int | None = None

    def _call(self, method: str, *args: Any) -> Any:
        """On the actor's channel, sent again when it broke (every call may be: see above)."""
        from leafsearch.errors import ElasticError
        from leafsearch.ray_backend.remote import UNAVAILABLE

        try:
            done, answer = self._ask(method, args, again=True, seconds=CALL_TIMEOUT_SECONDS)
        except UNAVAILABLE as exc:
            raise ElasticError(
                f"the cluster's metadata did not answer: {type(exc).__name__}",
                status=503,
                error_type="master_not_discovered_exception",
            ) from None
        if not done:
            raise ElasticError(f"the cluster's metadata failed [{method}]: {answer}")
        return answer

    def _ask(self, method: str, args: tuple, *, again: bool, seconds: float) -> tuple[bool, Any]:
        """A call on the actor's channel (remote.py `MachineCall`; `again`: sent again when the
        channel broke): (True, its answer) or (False, why it failed)."""
        from leafsearch.ray_backend.remote import MachineCall

        deadline = time.monotonic() + seconds
        return MachineCall(self._channels, self._actor, (method, args), again, deadline).answers()

    def version(self) -> int:
        """The cluster version: the actor's, asked on its channel once (not again: a request
        does not wait for the actor's restart), else the store's. The contexts' version comes
        with the actor's (`contexts_seen`)."""
        from leafsearch.ray_backend.remote import UNAVAILABLE

        try:
            done, answer = self._ask("versions", (), again=False, seconds=VERSION_SECONDS)
            if done:
                version, contexts = answer
                with self._seen_lock:
                    self._contexts_seen = max(contexts, self._contexts_seen or 0)
                return version
        except UNAVAILABLE:
            pass
        with self._seen_lock:
            self._contexts_seen = None
        raw = _kv()._internal_kv_get(VERSION_KEY, namespace=KV_NAMESPACE)
        return 0 if raw is None else int(raw)

    def contexts_seen(self) -> int | None:
        """The newest contexts' version the actor answered a request's `version` with, so at
        least the one when the request calling this began (each request asks `version` first:
        node/cluster_sync.py); None when the last request could not ask the actor."""
        with self._seen_lock:
            return self._contexts_seen

    def changes(self, since: int) -> tuple[int, dict[str, tuple[int, bytes | None]]]:
        return self._call("changes", since)

    def get(self, key: str) -> tuple[int, bytes | None]:
        return self._call("get", key)

    def put(self, key: str, value: bytes | None, expect: int | None) -> tuple[bool, int, bytes | None]:
        return self._call("put", key, value, expect)

    def secret(self) -> bytes:
        return self._call("secret")

    def ctx_reserve(self, key: str, kind: str, limit: int) -> bool:
        return self._call("ctx_reserve", key, kind, limit)

    def ctx_put(self, key: str, kind: str, expires: float, record: bytes) -> int:
        return self._call("ctx_put", key, kind, expires, record)

    def ctx_get(self, key: str) -> tuple[bytes | None, int]:
        return self._call("ctx_get", key)

    def ctx_remove(self, key: str) -> bool:
        return self._call("ctx_remove", key)

    def ctx_keys(self, kind: str) -> list[str]:
        return self._call("ctx_keys", kind)

    def ctx_expired(self, now: float, grace: float) -> list[str]:
        return self._call("ctx_expired", now, grace)
