"""Reader contexts shared by the coordinators of a Ray cluster (several `serve --ray ADDRESS`).

A PIT or scroll opened through one coordinator pages on through any other, and outlives the
coordinator that opened it (`kill -9` included), because:

- **its record lives in the cluster's metadata** (ray_backend/metadata.py, `ContextStore`), not
  in the coordinator's folder: written before the response naming the id (opening, each scroll
  batch, each release that moves its expiry past what the record says, `RECORD_SLACK_SECONDS`),
  read by the coordinator serving a request unless its copy is the record as of the contexts'
  version the request began with (a version the store moves with each record written or
  removed, asked with the cluster version before every request: `SharedRecords.unchanged_since`),
  so a coordinator serving a context another one moved on or closed takes the record's cursor,
  position and keep-alive, or its end (`SharedRecords.fetch`); its shards' pins are in the shard
  actors, named by the context's key, which any coordinator sends;
- **its id is authenticated with the cluster's secret**: the id's token is an HMAC of the
  context's kind and key under the secret the metadata holds (`token`), so any coordinator checks
  an id before reading anything, and no id can be made without the secret; the record still
  names its opener, and another user's id is refused as on one node;
- **the open-context limits count the cluster's contexts**: a new context is reserved in the
  store, which refuses it past the limit atomically (`ctx_reserve`);
- **clearing every scroll** (`DELETE /_search/scroll/_all`) takes every coordinator's scrolls
  the caller may use from the store (`ctx_keys`) before freeing them;
- **no context is left behind by a lost coordinator**: each coordinator's reaper asks the store
  for contexts past their expiry (`ctx_expired`) and frees them as their own, the store's
  `ctx_remove` deciding which coordinator frees the shards' pins.

The record is pickled, as on disk: only coordinators of the cluster write the store.
"""

from __future__ import annotations

import hashlib
import hmac
import pickle
from collections import OrderedDict
from typing import Any, Protocol

from leafsearch.search.context_records import ContextRecords

#: Seconds past its expiry before a context no coordinator freed is freed by any (its own
#: coordinator, alive, frees it first).
ORPHAN_GRACE_SECONDS = 5.0
#: Seconds a shared PIT's record says it lives past its keep-alive: its pages within that
#: second after the record was written write none (an export's slices page tens of times a
#: second, each page was a metadata-actor call). The coordinator serving a PIT holds its exact
#: expiry; another one, or the reaper of a lost coordinator's, may find it alive that much longer.
RECORD_SLACK_SECONDS = 1.0
#: The kinds of contexts shared (an `_export`'s own context is its request's alone).
SHARED_KINDS = ("pit", "scroll")


class ContextStore(Protocol):
    """Where the cluster keeps reader contexts' records (`MetadataClient`)."""

    def secret(self) -> bytes: ...

    def ctx_reserve(self, key: str, kind: str, limit: int) -> bool: ...

    def ctx_put(self, key: str, kind: str, expires: float, record: bytes) -> int: ...

    def ctx_get(self, key: str) -> tuple[bytes | None, int]: ...

    def contexts_seen(self) -> int | None: ...

    def ctx_remove(self, key: str) -> bool: ...

    def ctx_keys(self, kind: str) -> list[str]: ...

    def ctx_expired(self, now: float, grace: float) -> list[str]: ...


class SharedRecords:
    """`ContextRecords`' interface over the cluster's store; the log of ended contexts (which
    only words a 404) stays in the node's folder."""

    def __init__(self, store: ContextStore, local: ContextRecords) -> None:
        self.store = store
        self._local = local
        self._secret = store.secret()

    def token(self, kind: str, key: str) -> str:
        """The id token of a context: 128 bits of an HMAC under the cluster's secret."""
        return hmac.new(self._secret, f"{kind}:{key}".encode(), hashlib.sha256).hexdigest()[:32]

    def write(self, key: str, record: dict[str, Any]) -> int:
        """The contexts' version of the record written."""
        return self.store.ctx_put(key, record["kind"], record["expires_wall"], pickle.dumps(record))

    def remove(self, key: str) -> bool:
        """Whether this call ended it (False: another coordinator did)."""
        return self.store.ctx_remove(key)

    def fetch(self, key: str) -> tuple[dict[str, Any] | None, int]:
        """A context's record (None: ended) and the contexts' version it is the record of."""
        raw, version = self.store.ctx_get(key)
        return (None if raw is None else pickle.loads(raw)), version

    def unchanged_since(self, version: int) -> bool:
        """Whether no record was written or removed after the contexts' version `version` when
        the current request began (`ContextStore.contexts_seen`): a copy of a record as of
        `version` is the cluster's (no metadata call)."""
        seen = self.store.contexts_seen()
        return seen is not None and seen <= version

    def load(self) -> dict[str, dict[str, Any]]:
        """Nothing at start: a context is taken from the store by the request that names it."""
        return {}

    def ended(self, keep: int) -> OrderedDict[str, tuple[str, float, str]]:
        return self._local.ended(keep)

    def add_ended(self, key: str, ended: OrderedDict[str, tuple[str, float, str]]) -> None:
        self._local.add_ended(key, ended)
