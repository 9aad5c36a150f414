"""Reader contexts: points in time and scrolls, each holding shard snapshots until freed.

A context pins the Searchers it was opened on, one shard context per shard (`ShardSearch.
open_context`, shard_contexts.py); freeing it (close, clear, expiry, a scroll request
without `scroll`, deletion of its index) releases them, which lets the shard delete segment files
that nothing else holds. As in Elasticsearch, a context is marked in use while a request reads it:
its keep-alive counts from the end of the last request, the reaper never takes a context in use,
and a context freed while a request reads it keeps its snapshots until that request ends.
Expiry is checked on every access and by the node's reaper (every 50 ms), so an expired context
never serves a request and its resources go promptly.

Contexts survive a restart, `kill -9` included: each shard keeps the context's snapshot on disk
(a pin, index/pins.py) and the node a record of the context (context_records.py), both fsynced
before the response that names the id. At start the node restores every record whose pins it
finds, under the same id and owner; a restart counts as a use (each restored context has its whole
keep-alive from the moment the node is back: time while the node is down does not count). The
open-context limits count restored contexts. On shard actors (Ray) the same: each actor keeps
the pins in its folder and serves a context by its name after Ray restarts it; a restarted
coordinator sends the shard context ids it recorded, and tells each actor which contexts it still
holds (`RemoteShards.retain_contexts`). A pin whose actor could not answer its free is freed
again by the reaper until it answers.

Ids are opaque and URL-safe, and name this node and a random key of the context. Each carries
128 random bits checked on every use, so no id can be derived from another; a context also records
who opened it (the authenticated caller, see `security/subject.py`) and is unknown (404) to anyone
else but a superuser. A scroll's id names the position after each batch (`seq`): the latest id
asks for the next batch, the one before it replays the last batch byte for byte (scroll_pit.py).
Ended contexts are remembered (across restarts too) so that a 404 can say whether an id expired,
was cleared, or never existed on this node. On a Ray cluster with several coordinators, records
and ids are the cluster's instead (shared_contexts.py).
"""

from __future__ import annotations

import base64
import hmac
import itertools
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leafsearch.errors import (
    ElasticError,
    IllegalArgument,
    RejectedExecution,
    SearchContextMissing,
    TooManyScrollContexts,
)
from leafsearch.request.timevalue import parse_time_value
from leafsearch.search.context_records import ContextRecords
from leafsearch.search.read_ahead import ReadAhead
from leafsearch.search.shard_api import ShardContextId
from leafsearch.search.shard_contexts import engine_shard
from leafsearch.search.shared_contexts import (
    ORPHAN_GRACE_SECONDS,
    RECORD_SLACK_SECONDS,
    SHARED_KINDS,
    ContextStore,
    SharedRecords,
)
from leafsearch.search.targets import Target, release_targets
from leafsearch.search.top_hits import free_shard_contexts, open_shard_contexts
from leafsearch.search.walks import MAX_MEMORY, WalkMemory
from leafsearch.security.subject import current

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.search.services import CoordinatorServices

_ID_PREFIX = b"leafsearch:"
_ENDED_MEMORY = 10_000
#: Seconds between attempts to free the pins of shard actors that could not answer.
_UNFREED_RETRY_SECONDS = 5.0
#: How long closing waits for a scroll's request to let go before it applies its notes.
_CLOSE_WAIT_SECONDS = 5.0
_TIME_UNITS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0))


@dataclass(eq=False)
class ReaderContext:
    ctx_id: int  # this process's number for it (walk caches, search workers)
    kind: str  # "scroll" | "pit"
    key: str  # its name in ids, records and pins: 64 random bits, hex
    public_id: str  # its latest id
    token: str  # the id's random part: 128 bits
    targets: list[Target]
    keep_alive: float
    expires_at: float  # on the registry's clock
    opened_mono: float  # on the registry's clock
    opened_at: float = field(default_factory=time.time)  # wall time, for OpenSearch's `creation_time`
    requests: int = 0
    in_use: int = 0  # requests reading the context right now
    freed: bool = False
    # scroll state: the request that opened it, the sort values of the last hit it returned
    # (the walk goes on after them: search/walks.py) and its matches, counted by its first batch
    request: Any = None
    cursor: list | None = None
    total: int | None = None
    #: scroll replay: the number of the latest id handed out (the position after batch `seq`),
    #: the cursor batch `seq` started from and its `took`, to answer it again (scroll_pit.py)
    seq: int = 0
    prev_cursor: list | None = None
    prev_took: int | None = 0  # None: not known (a position its record named ahead; scroll_pit.py)
    #: The ends of the batches after `cursor` its record names ahead: ids up to `seq + len(ahead)`
    #: are answered after a restart without a record written per batch (scroll_pit.py).
    ahead: list = field(default_factory=list)
    #: Its record lags behind it (a batch it named ahead was answered): written on close.
    unrecorded: bool = False
    #: Restored from its record and no batch answered since: an id it named ahead is taken.
    restored: bool = False
    #: Batches a search worker answered on a connection it kept (search/workers/parking.py),
    #: each (seq, public id, cursor, took), not applied yet: whoever holds `lock` applies them
    #: (`apply_notes`) before it reads or moves the scroll.
    notes: list = field(default_factory=list)
    noted: threading.Condition = field(default_factory=threading.Condition)
    #: held while its record is written or deleted, so a freed context's record never comes back
    record_lock: threading.Lock = field(default_factory=threading.Lock)
    lock: threading.Lock = field(default_factory=threading.Lock)
    owner: str | None = None  # Subject.owner_key of the opener; None without authentication
    #: Per target, the shard context pinning its snapshot (the shard interface's reader context):
    #: the context's hold on its snapshots, freed with it.
    shard_contexts: list[ShardContextId] = field(default_factory=list)
    #: Whether freeing it frees its shards' pins (not when another coordinator ended it first).
    owned: bool = True
    #: The wall time its record in the cluster says it expires (a shared PIT's page that ends
    #: before that less its keep-alive writes no record: `ContextRegistry.release`).
    recorded_until: float = 0.0
    #: The contexts' version (shared_contexts.py) as of which this copy is the cluster's record:
    #: a request begun with no record written or removed since reads none.
    record_version: int = -1

    @property
    def indices(self) -> list[str]:
        return sorted({t.index.name for t in self.targets})

    def moved(
        self, seq: int, public_id: str, cursor: list | None, total: int | None, took: int | None
    ) -> None:
        """The scroll answered batch `seq` (caller holds `lock`): its position is after it."""
        self.prev_cursor, self.cursor, self.total = self.cursor, cursor, total
        self.seq, self.public_id, self.prev_took = seq, public_id, took
        self.restored = False

    def note(self, batches: list[tuple[int, str, list | None, int]]) -> None:
        """A worker answered these batches on a kept connection, each (seq, public id, cursor,
        took) ending where the record named (any thread; told once they were written, before
        anything after them on the connection). Applied now when nobody holds `lock`, else by
        its holder (a request waiting for them is woken)."""
        with self.noted:
            self.notes += batches
            self.noted.notify_all()
        if self.lock.acquire(blocking=False):
            try:
                self.apply_notes()
            finally:
                self.lock.release()

    def untold(self) -> None:
        """The worker that kept a connection of this scroll died: batches it answered there may
        never be told (parking.py), so an id its record names ahead is taken, as after a
        restart (scroll_pit.py): its client received the batches before it."""
        self.restored = True

    def apply_notes(self, until: int = 0, timeout: float = 0.0) -> None:
        """Apply the batches workers answered (caller holds `lock`), in order: a note is the
        scroll's next batch ending at the first position named ahead, or it is stale (the
        general path answered that position meanwhile). With `until`, wait up to `timeout` for
        the notes that bring `seq` there (told before anything after their batches, they are on
        their way when a client already asks for the id after them)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.noted:
                if until > self.seq and not self.notes:
                    self.noted.wait(max(0.0, deadline - time.monotonic()))
                notes, self.notes = self.notes, []
            for seq, public_id, cursor, took in notes:
                if seq == self.seq + 1 and self.ahead and self.ahead[0] == cursor:
                    self.moved(seq, public_id, cursor, self.total, took)
                    del self.ahead[0]
                    self.unrecorded = True
            if until <= self.seq or time.monotonic() >= deadline:
                return

    def pinned_docs(self) -> int:
        """Documents of the snapshots the context pins: in this process, or in a shard actor,
        which said how many when it pinned its snapshot (`ShardContextId.docs`)."""
        here = sum(t.searcher.max_doc for t in self.targets if not t.remote)
        return here + sum(c.docs for t, c in zip(self.targets, self.shard_contexts, strict=False) if t.remote)

    def store_bytes(self) -> int:
        """The disk its snapshots hold beyond what their shards read now (segments merged away
        since it opened); 0 for snapshots in shard actors."""
        local = [t for t in self.targets if not t.remote]
        return sum(engine_shard(t).store_bytes_beyond(t.searcher.segments) for t in local)

    def pinned_segments(self) -> int:
        here = sum(len(t.searcher.views) for t in self.targets if not t.remote)
        return here + sum(
            c.segments for t, c in zip(self.targets, self.shard_contexts, strict=False) if t.remote
        )


class ContextRegistry:
    """The node's open contexts. `clock` (seconds, monotonic) measures keep-alives and ages: the
    node passes its own, so that a test can advance time instead of sleeping past a keep-alive.
    `folder`: where the records of its contexts live (`<data>/contexts`)."""

    def __init__(
        self,
        services: CoordinatorServices,
        folder: Path,
        clock: Callable[[], float] = time.monotonic,
        *,
        shared: ContextStore | None = None,
        indices: Callable[[], dict[str, Index]] | None = None,
    ) -> None:
        """`shared`: the cluster's store of contexts, when coordinators share them
        (shared_contexts.py); `indices` then gives the node's indices by uuid."""
        self.services = services
        self.clock = clock
        local = ContextRecords(folder)
        self.shared = SharedRecords(shared, local) if shared is not None else None
        self.records: ContextRecords | SharedRecords = self.shared or local
        self._indices = indices
        #: Who issued an id: this node, or the cluster when contexts are shared.
        self.scope = services.node_id if shared is None else "cluster"
        self._sweep_at = 0.0
        self._lock = threading.RLock()
        self._contexts: dict[str, ReaderContext] = {}
        # key -> (how, wall time, token)
        self._ended: OrderedDict[str, tuple[str, float, str]] = self.records.ended(_ENDED_MEMORY)
        self._ids = itertools.count(1)
        self.read_ahead = ReadAhead()
        #: The lists of every match kept for walks run in this process (search/walks.py).
        self.walks = WalkMemory(int(services.cluster_settings.get(MAX_MEMORY)))
        #: Pins of freed contexts whose shard (an actor) could not answer, freed again by `reap`.
        self._unfreed: list[tuple[Target, ShardContextId]] = []
        self._unfreed_at = 0.0

    # ---- ids ---------------------------------------------------------------------------

    def encode_id(self, kind: str, key: str, seq: int, token: str) -> str:
        raw = _ID_PREFIX + f"{kind}:{self.scope}:{key}:{seq}:{token}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def decode_id(self, public_id: str, kind: str) -> tuple[bool, str, int, str] | None:
        """(is it this node's, context key, position, random token), or None when it is no id
        of `kind`."""
        try:
            raw = base64.urlsafe_b64decode(public_id + "=" * (-len(public_id) % 4))
            if not raw.startswith(_ID_PREFIX):
                return None
            id_kind, node_id, key, number, token = raw[len(_ID_PREFIX) :].decode().split(":")
            seq = int(number)
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            return None
        if id_kind != kind or seq < 0:
            return None
        return node_id == self.scope, key, seq, token

    @staticmethod
    def _may_use(ctx: ReaderContext, token: str) -> bool:
        """The id's token is the context's (compared in constant time) and the caller opened it
        (or is a superuser, or nobody is authenticated)."""
        if not hmac.compare_digest(ctx.token.encode(), token.encode()):
            return False
        caller = current()
        return caller is None or caller.superuser or caller.owner_key == ctx.owner

    # ---- limits ------------------------------------------------------------------------

    def keep_alive_seconds(self, value: str, name: str) -> float:
        seconds = parse_time_value(value, name)
        limit = self.services.cluster_settings.get("search.max_keep_alive")
        if seconds > limit:
            raise IllegalArgument(
                f"Keep alive for request ({_fmt(seconds)}) is too large. It must be less than "
                f"({_fmt(limit)}). This limit can be set by changing the [search.max_keep_alive] cluster "
                "level setting."
            )
        return seconds

    def _open_limit_error(self, kind: str) -> ElasticError | None:
        """Elasticsearch's `search.max_open_scroll_context` and OpenSearch's
        `search.max_open_pit_context`, each with its own error (both 429); None below the limit."""
        key, limit = self._limit(kind)
        if sum(1 for c in self._contexts.values() if c.kind == kind) < limit:
            return None
        return _refusal(kind, key, limit)

    def _limit(self, kind: str) -> tuple[str, int]:
        key = "search.max_open_scroll_context" if kind == "scroll" else "search.max_open_pit_context"
        return key, int(self.services.cluster_settings.get(key))

    def _shares(self, kind: str) -> bool:
        return self.shared is not None and kind in SHARED_KINDS

    def records_ahead(self, kind: str) -> bool:
        """Whether a context's record may name positions ahead of it (scroll_pit.py): not when the
        cluster's coordinators share it (each reads the latest record as the context's state)."""
        return not self._shares(kind)

    # ---- lifecycle ---------------------------------------------------------------------

    def open(
        self, kind: str, targets: list[Target], keep_alive: float, *, in_use: bool = False
    ) -> ReaderContext:
        """A new context owning `targets` (released when it is freed). Refused past the limit of
        open contexts of its kind.

        `in_use`: the opening request goes on reading it (as `acquire`; `release` when done).
        Each shard pins its snapshot for the context outside the registry's lock (a shard actor's
        answer takes a network round trip, and a restarting one longer: other contexts' requests
        must not wait for it); the limit is checked before the pins and again when the context
        goes in, so concurrent opens cannot pass it. A PIT's record is written here; a scroll's
        once its first batch is known (`persist`): both before the response naming the id.
        """
        with self._lock:
            refused = self._open_limit_error(kind)
        if refused is not None:
            raise refused
        key = secrets.token_hex(8)
        if self.shared is not None and self._shares(kind):  # the cluster's count, atomically
            limit_key, limit = self._limit(kind)
            if not self.shared.store.ctx_reserve(key, kind, limit):
                raise _refusal(kind, limit_key, limit)
        try:
            pins = open_shard_contexts(self.services, targets, key)
        except BaseException:
            if self.shared is not None and self._shares(kind):
                self.shared.remove(key)
            raise
        with self._lock:
            refused = self._open_limit_error(kind)
            if refused is None:
                ctx = self._new_context(kind, key, targets, keep_alive, in_use)
                ctx.shard_contexts = pins
                self._contexts[key] = ctx
        if refused is not None:  # others opened meanwhile
            free_shard_contexts(self.services, targets, pins)
            if self.shared is not None and self._shares(kind):
                self.shared.remove(key)
            raise refused
        # The caller's references on the snapshots passed to the pins.
        release_targets(targets)
        if kind == "scroll":
            self.services.search_stats.scroll_opened(targets)
        else:
            try:
                self.persist(ctx)
            except BaseException:
                self.free(ctx, "freed because its record could not be written")
                raise
        return ctx

    def _new_context(
        self, kind: str, key: str, targets: list[Target], keep_alive: float, in_use: bool
    ) -> ReaderContext:
        token = self.shared.token(kind, key) if self.shared is not None else secrets.token_hex(16)
        caller = current()
        now = self.clock()
        return ReaderContext(
            ctx_id=next(self._ids),
            kind=kind,
            key=key,
            public_id=self.encode_id(kind, key, 0, token),
            token=token,
            owner=None if caller is None else caller.owner_key,
            targets=targets,
            keep_alive=keep_alive,
            expires_at=now + keep_alive,
            opened_mono=now,
            requests=int(in_use),
            in_use=int(in_use),
        )

    # ---- records (context_records.py) ---------------------------------------------------

    def persist(self, ctx: ReaderContext) -> None:
        """Write the context's record as it is now (durable when this returns); nothing once the
        context is freed. A scroll's batch calls it holding `ctx.lock`, after moving its cursor."""
        with ctx.record_lock:
            if ctx.freed:
                return
            record = _record(ctx)
            ctx.unrecorded = False
            record["expires_wall"] = time.time() + max(ctx.expires_at - self.clock(), 0.0)
            if ctx.kind == "pit" and self._shares("pit"):
                record["expires_wall"] += RECORD_SLACK_SECONDS
            record["written_by"] = self.services.node_id
            written = self.records.write(ctx.key, record)
            if written is not None:
                ctx.record_version = written
            ctx.recorded_until = record["expires_wall"]

    def restore(self, indices: dict[str, Index]) -> None:
        """At start: every context whose record and shard pins are on disk, open again under its
        id, with its whole keep-alive from now. `indices`: the open indices by uuid. A context
        whose index is gone or closed, or whose pins are not all there, ended before the node
        stopped: its record goes (the caller then drops the pins no context took)."""
        now = self.clock()
        for key, record in self.records.load().items():
            targets = _targets(record, indices)
            if len(targets) == len(record["targets"]):
                self._restored(record, targets, now)
                continue
            for target in targets:  # (a shard actor's pin goes with `retain_contexts` below)
                if not target.remote:
                    engine_shard(target).unpin(key)
                target.searcher.release()
            self.records.remove(key)
            how = "freed because its snapshot was gone at restart"
            self._ended[key] = (how, time.time(), record["token"])
            self.records.add_ended(key, self._ended)
        if self.shared is None:  # (shared, the actors hold other coordinators' contexts too)
            self._retain_remote(indices)

    def _retain_remote(self, indices: dict[str, Index]) -> None:
        """Tell each Ray-backed index's actors which contexts this node holds (the others go)."""
        for index in indices.values():
            if index.remote is None:
                continue
            names: list[set[str]] = [set() for _ in index.shards]
            for ctx in self._contexts.values():
                for target in ctx.targets:
                    if target.index is index:
                        names[target.shard_id].add(ctx.key)
            index.remote.retain_contexts(names)

    def _restored(self, record: dict[str, Any], targets: list[Target], now: float) -> ReaderContext:
        key, kind = record["key"], record["kind"]
        recorded = record.get("shard_contexts") or [None] * len(targets)
        pins = [
            c if t.remote else self.services.shard_contexts.adopt(t, key)
            for t, c in zip(targets, recorded, strict=True)
        ]
        # The leases taken on shard actors' snapshots pass to their pins, as when opened.
        release_targets([t for t in targets if t.remote])
        expires_in = record["keep_alive"]  # (a restart counts as a use)
        if self.shared is not None:  # the cluster's expiry: a coordinator going does not count
            expires_in = record["expires_wall"] - time.time()
        ctx = ReaderContext(
            ctx_id=next(self._ids),
            kind=kind,
            key=key,
            public_id=self.encode_id(kind, key, record["seq"], record["token"]),
            token=record["token"],
            owner=record["owner"],
            targets=targets,
            keep_alive=record["keep_alive"],
            expires_at=now + expires_in,
            opened_mono=now,
            opened_at=record["opened_at"],
            request=record["request"],
            cursor=record["cursor"],
            total=record["total"],
            seq=record["seq"],
            prev_cursor=record["prev_cursor"],
            prev_took=record["prev_took"],
            ahead=list(record.get("ahead", ())),
            restored=True,
            shard_contexts=pins,
        )
        with self._lock:
            self._contexts[key] = ctx
        if kind == "scroll":
            self.services.search_stats.scroll_opened(targets)
        return ctx

    # ---- contexts shared by the cluster's coordinators (shared_contexts.py) ---------------

    def _fetch_shared(
        self, public_id: str, kind: str, *, requested: bool = False
    ) -> tuple[str, dict[str, Any] | None, int] | None:
        """The key, record (None: ended) and contexts' version of a shared context an id names,
        read from the cluster; None when contexts are not shared or the id is not the cluster's
        (checked with its secret before anything is read). `requested`: read for a request,
        which asked the cluster's versions as it began (node/cluster_sync.py): None too when this
        node's copy is the cluster's record as of them (no metadata call: an export's page)."""
        if self.shared is None or not self._shares(kind):
            return None
        decoded = self.decode_id(public_id, kind)
        if decoded is None or not decoded[0]:
            return None
        key, token = decoded[1], decoded[3]
        if not hmac.compare_digest(token.encode(), self.shared.token(kind, key).encode()):
            return None
        held = self._contexts.get(key) if requested else None
        if held is not None and self.shared.unchanged_since(held.record_version):
            return None
        return key, *self.shared.fetch(key)

    def _take_shared(self, fetched: tuple[str, dict[str, Any] | None, int] | None) -> None:
        """Make this node's copy of a shared context what the cluster holds (lock held): taken
        from its record when this node has none (opened through another coordinator), moved on
        to its cursor, position and expiry, or let go when another coordinator ended it."""
        if fetched is None:
            return
        key, record, version = fetched
        ctx = self._contexts.get(key)
        if record is None:
            if ctx is not None:  # ended elsewhere: the shards' pins went with it there
                ctx.owned = False
                self._free(ctx, "freed by another coordinator")
            return
        if ctx is None:
            targets = _targets(record, self._indices() if self._indices is not None else {})
            if len(targets) != len(record["targets"]):  # (its index was deleted)
                release_targets(targets)
                return
            self._restored(record, targets, self.clock()).record_version = version
            return
        ctx.record_version = version
        if record.get("written_by") == self.services.node_id:  # this node's copy is the latest
            return
        for name in ("cursor", "total", "seq", "prev_cursor", "prev_took", "keep_alive"):
            setattr(ctx, name, record[name])
        ctx.recorded_until = record["expires_wall"]
        if ctx.in_use == 0:
            ctx.expires_at = self.clock() + record["expires_wall"] - time.time()

    def _sweep_shared(self) -> None:
        """Free the shared contexts past their expiry that no coordinator freed (their own went
        away): each taken from the store as this node's, then freed as expired."""
        if self.shared is None:
            return
        for key in self.shared.store.ctx_expired(time.time(), ORPHAN_GRACE_SECONDS):
            fetched = (key, *self.shared.fetch(key))
            with self._lock:
                self._take_shared(fetched)
                ctx = self._contexts.get(key)
                if ctx is not None and ctx.in_use == 0 and self.clock() > ctx.expires_at:
                    self._free(ctx, "expired")

    # ---- use -----------------------------------------------------------------------------

    def _lookup(self, public_id: str, kind: str) -> ReaderContext:
        """The live context of an id (lock held); 404 saying why when it is gone. Expiry is
        checked here, so an expired context never serves even before the reaper runs."""
        decoded = self.decode_id(public_id, kind)
        if decoded is None or not decoded[0]:
            raise SearchContextMissing(
                f"No search context found for id [{public_id}]: it was not opened by this node"
            )
        key, token = decoded[1], decoded[3]
        ctx = self._contexts.get(key)
        if ctx is not None and not self._may_use(ctx, token):
            raise SearchContextMissing(
                f"No search context found for id [{key}]: it was never opened on this node"
            )
        if ctx is not None and ctx.in_use == 0 and self.clock() > ctx.expires_at:
            self._free(ctx, "expired")
            ctx = None
        if ctx is None:
            raise SearchContextMissing(self._missing_reason(key, token))
        return ctx

    def get(self, public_id: str, kind: str) -> ReaderContext:
        """The live context of an id, to inspect it (a request reads it through `acquire`)."""
        fetched = self._fetch_shared(public_id, kind, requested=True)
        with self._lock:
            self._take_shared(fetched)
            return self._lookup(public_id, kind)

    def held(self, public_id: str, kind: str) -> ReaderContext | None:
        """This node's copy of the live context an id names, as it holds it (None: it holds
        none): no read of the cluster's record, for what only reads the context's targets
        (the slow log, after the request that acquired it)."""
        with self._lock:
            try:
                return self._lookup(public_id, kind)
            except SearchContextMissing:
                return None

    def acquire(self, public_id: str, kind: str) -> ReaderContext:
        """The live context of an id, marked in use until `release`."""
        fetched = self._fetch_shared(public_id, kind, requested=True)
        with self._lock:
            self._take_shared(fetched)
            ctx = self._lookup(public_id, kind)
            ctx.in_use += 1
            ctx.requests += 1
        now = time.monotonic()
        for target in ctx.targets:
            target.index.last_search = (
                now  # search activity: a PIT or scroll page keeps the index search-active
            )
        return ctx

    def release(self, ctx: ReaderContext, keep_alive: float | None = None) -> None:
        """One request on `ctx` ended: its keep-alive (replaced by `keep_alive` when given) counts
        from now, and a free that came while it was in use completes. A PIT whose keep-alive
        changed has its record written again (a scroll's batch writes its own)."""
        with self._lock:
            ctx.in_use -= 1
            changed = keep_alive is not None and keep_alive != ctx.keep_alive
            if keep_alive is not None:
                ctx.keep_alive = keep_alive
            ctx.expires_at = self.clock() + ctx.keep_alive
            if ctx.freed and ctx.in_use == 0:
                self._release_resources(ctx)
        if (
            changed
            and ctx.kind == "pit"
            or self._shares(ctx.kind)
            and not (ctx.kind == "pit" and ctx.recorded_until >= time.time() + ctx.keep_alive)
        ):
            self.persist(ctx)

    def _missing_reason(self, key: str, token: str) -> str:
        ended = self._ended.get(key)
        if ended is None or not hmac.compare_digest(ended[2].encode(), token.encode()):
            return f"No search context found for id [{key}]: it was never opened on this node"
        how, when, _ = ended
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
        if how == "expired":
            return f"No search context found for id [{key}]: it expired at {stamp} (its keep-alive elapsed)"
        return f"No search context found for id [{key}]: it was {how} at {stamp}"

    def _free(self, ctx: ReaderContext, how: str) -> None:
        """End a context (lock held): its record goes first, so a restart never restores it; its
        snapshots (and their pins on disk) once no request reads it."""
        if self._contexts.pop(ctx.key, None) is None:
            return
        if self.services.workers is not None:  # parked walks go back (search/workers/parking.py)
            self.services.workers.context_freed(ctx.ctx_id)
        with ctx.record_lock:
            ctx.freed = True
            if self.records.remove(ctx.key) is False:  # another coordinator ended it first
                ctx.owned = False
        self._ended[ctx.key] = (how, time.time(), ctx.token)
        while len(self._ended) > _ENDED_MEMORY:
            self._ended.popitem(last=False)
        self.records.add_ended(ctx.key, self._ended)
        if ctx.kind == "scroll":
            self.services.search_stats.scroll_closed(self.clock() - ctx.opened_mono, ctx.targets)
        if ctx.in_use == 0:
            self._release_resources(ctx)

    def _forget(self, ctx: ReaderContext) -> None:
        """Drop what this process keeps for the context's walks."""
        self.walks.forget(ctx.ctx_id)
        self.read_ahead.forget(ctx.ctx_id)
        if self.services.workers is not None:
            self.services.workers.forget_context(ctx.ctx_id)

    def _release_resources(self, ctx: ReaderContext) -> None:
        self._forget(ctx)
        if not ctx.owned:
            return
        # Shards that could not answer keep the pins on disk: freed once they answer.
        self._unfreed.extend(free_shard_contexts(self.services, ctx.targets, ctx.shard_contexts))

    def _free_again(
        self, pending: list[tuple[Target, ShardContextId]]
    ) -> list[tuple[Target, ShardContextId]]:
        """Free again the pins of shard actors that could not answer, through the index's current
        actors (a closed index's wait until it is open again); those still not freed."""
        left: list[tuple[Target, ShardContextId]] = []
        for target, context in pending:
            index = target.index
            if index.closed:
                left.append((target, context))
                continue
            fresh = Target(index, target.shard_id, index.shards[target.shard_id].acquire_searcher(), None)
            try:
                left.extend(free_shard_contexts(self.services, [fresh], [context]))
            finally:
                fresh.searcher.release()
        return left

    def free(self, ctx: ReaderContext, how: str = "freed") -> None:
        with self._lock:
            self._free(ctx, how)

    def free_id(self, public_id: str, kind: str) -> bool:
        """Free the context of an id (any of a scroll's ids); False when it was not open
        (unknown, already ended, or expired)."""
        decoded = self.decode_id(public_id, kind)
        if decoded is None or not decoded[0]:
            return False
        fetched = self._fetch_shared(public_id, kind)
        with self._lock:
            self._take_shared(fetched)
            ctx = self._contexts.get(decoded[1])
            if ctx is None or not self._may_use(ctx, decoded[3]):
                return False
            expired = ctx.in_use == 0 and self.clock() > ctx.expires_at
            self._free(ctx, "expired" if expired else "cleared")
            return not expired

    def free_all(self, kind: str) -> int:
        if self.shared is not None and self._shares(kind):  # the other coordinators' too
            for key in self.shared.store.ctx_keys(kind):
                fetched = (key, *self.shared.fetch(key))
                with self._lock:
                    self._take_shared(fetched)
        with self._lock:
            now = self.clock()
            caller = current()
            victims = [
                c
                for c in self._contexts.values()
                if c.kind == kind and (caller is None or caller.superuser or c.owner == caller.owner_key)
            ]
            freed = 0
            for ctx in victims:
                expired = ctx.in_use == 0 and now > ctx.expires_at
                self._free(ctx, "expired" if expired else "cleared")
                freed += not expired
            return freed

    def visible(self, kind: str) -> list[ReaderContext]:
        """The open contexts of `kind` the caller may use (its own; all for a superuser or when
        nobody is authenticated), oldest first, expired ones left out."""
        now = self.clock()
        caller = current()
        with self._lock:
            return sorted(
                (
                    c
                    for c in self._contexts.values()
                    if c.kind == kind
                    and (c.in_use or now <= c.expires_at)
                    and (caller is None or caller.superuser or c.owner == caller.owner_key)
                ),
                key=lambda c: c.ctx_id,
            )

    def reap(self) -> None:
        now = self.clock()
        pending: list[tuple[Target, ShardContextId]] = []
        with self._lock:
            expired = [c for c in self._contexts.values() if c.in_use == 0 and now > c.expires_at]
        # A shared context may have been used through another coordinator: its record says.
        fetched = {c.key: self._fetch_shared(c.public_id, c.kind) for c in expired}
        with self._lock:
            for ctx in expired:
                self._take_shared(fetched[ctx.key])
                if self._contexts.get(ctx.key) is ctx and ctx.in_use == 0 and now > ctx.expires_at:
                    self._free(ctx, "expired")
            if self._unfreed and now >= self._unfreed_at:
                self._unfreed_at = now + _UNFREED_RETRY_SECONDS
                pending, self._unfreed = self._unfreed, []
            sweep = self.shared is not None and now >= self._sweep_at
            if sweep:
                self._sweep_at = now + _UNFREED_RETRY_SECONDS
        if sweep:
            self._sweep_shared()
        if pending:  # (calls to shard actors: outside the lock)
            left = self._free_again(pending)
            with self._lock:  # not those of an index deleted meanwhile
                self._unfreed.extend((t, c) for t, c in left if t.index.folder.exists())

    def drop_index(self, index, why: str = "deleted") -> None:
        """Free the contexts reading `index`, which was deleted or closed (as Elasticsearch does)."""
        with self._lock:
            for ctx in [c for c in self._contexts.values() if any(t.index is index for t in c.targets)]:
                self._free(ctx, f"freed because its index was {why}")
            if why == "deleted":  # its folders go with it
                self._unfreed = [(t, c) for t, c in self._unfreed if t.index is not index]

    def close_all(self) -> None:
        """The node is closing: contexts stay on disk for the restart (the node's shard contexts
        let their snapshots go; shard actors keep theirs). A record that lags behind its context
        (batches it named ahead were answered) is written as it is now, so a replay after a clean
        restart is the same bytes, `took` included."""
        for ctx in [c for c in list(self._contexts.values()) if c.notes]:
            # (A request still holding it: the record stays behind, its ends named ahead.)
            if ctx.lock.acquire(timeout=_CLOSE_WAIT_SECONDS):
                try:
                    ctx.apply_notes()
                finally:
                    ctx.lock.release()
        for ctx in [c for c in list(self._contexts.values()) if c.unrecorded]:
            self.persist(ctx)
        with self._lock:
            for ctx in list(self._contexts.values()):
                del self._contexts[ctx.key]
                self._forget(ctx)
        self.read_ahead.close()

    # ---- reporting ---------------------------------------------------------------------

    def open_count(self) -> int:
        return len(self._contexts)

    def open_per_shard(self) -> dict[int, int]:
        """Open contexts reading each shard, keyed by `id(shard)` (`search.open_contexts` of `_stats`)."""
        counts: dict[int, int] = {}
        with self._lock:
            for ctx in self._contexts.values():
                for target in ctx.targets:
                    shards = target.index.shards
                    if target.shard_id < len(shards):
                        key = id(shards[target.shard_id])
                        counts[key] = counts.get(key, 0) + 1
        return counts

    def describe(self) -> list[dict[str, Any]]:
        """One row per open context, oldest first: what `_cat/search_contexts` shows."""
        now = self.clock()
        with self._lock:
            contexts = sorted(self._contexts.values(), key=lambda c: c.ctx_id)
            rows = [
                {
                    "id": ctx.public_id,
                    "owner": ctx.owner,
                    "type": ctx.kind,
                    "indices": ",".join(ctx.indices),
                    "age": _fmt(now - ctx.opened_mono),
                    "keep_alive": _fmt(ctx.keep_alive),
                    "time_left": "in use" if ctx.in_use else _fmt(max(ctx.expires_at - now, 0.0)),
                    "requests": ctx.requests,
                    "docs": ctx.pinned_docs(),
                    "segments": ctx.pinned_segments(),
                }
                for ctx in contexts
            ]
        return rows


def _fmt(seconds: float) -> str:
    """Elasticsearch's short time rendering (TimeValue.toString): the largest unit that fits, with
    at most one decimal, truncated (a context with 59.99 s left shows 59.9s, not 60.0s)."""
    unit, size = next(((u, s) for u, s in _TIME_UNITS if seconds >= s), ("ms", 0.001))
    tenths = int(seconds / size * 10 + 1e-9)
    return f"{tenths // 10}{unit}" if tenths % 10 == 0 else f"{tenths / 10:.1f}{unit}"


def _refusal(kind: str, key: str, limit: int) -> ElasticError:
    """Elasticsearch's refusal of a context past the limit of its kind."""
    if kind == "scroll":
        return TooManyScrollContexts(
            f"Trying to create too many scroll contexts. Must be less than or equal to: [{limit}]. "
            f"This limit can be set by changing the [{key}] setting."
        )
    return RejectedExecution(
        f"Trying to create too many Point In Time contexts. Must be less than or equal to: [{limit}]. "
        f"This limit can be set by changing the [{key}] setting."
    )


def _targets(record: dict[str, Any], indices: dict[str, Index]) -> list[Target]:
    """The targets a record names, each holding its snapshot (a local shard's restored pin, a
    shard actor's lease), up to the first that is gone."""
    targets: list[Target] = []
    for index_uuid, shard_id, alias_filter in record["targets"]:
        index = indices.get(index_uuid)
        shard = index.shards[shard_id] if index is not None and shard_id < len(index.shards) else None
        if shard is None:
            break
        # A shard actor's pin is in its folder: the recorded shard context names it.
        searcher = shard.take_restored(record["key"]) if index.remote is None else shard.acquire_searcher()
        if searcher is None:
            break
        targets.append(Target(index, shard_id, searcher, alias_filter))
    return targets


def _record(ctx: ReaderContext) -> dict[str, Any]:
    """What a restart needs of a context (context_records.py)."""
    return {
        "key": ctx.key,
        "kind": ctx.kind,
        "token": ctx.token,
        "owner": ctx.owner,
        "keep_alive": ctx.keep_alive,
        "opened_at": ctx.opened_at,
        "targets": [(t.index.uuid, t.shard_id, t.alias_filter) for t in ctx.targets],
        "shard_contexts": ctx.shard_contexts,
        "request": ctx.request,
        "cursor": ctx.cursor,
        "total": ctx.total,
        "seq": ctx.seq,
        "prev_cursor": ctx.prev_cursor,
        "prev_took": ctx.prev_took,
        "ahead": ctx.ahead,
    }
