"""Reader contexts: points in time and scrolls, each holding shard snapshots until freed.

A context pins the Searchers it was opened on; freeing it (close, clear, expiry, a scroll request
without `scroll`, deletion of its index) releases them, which lets the shard delete segment files
that nothing else holds. Expiry is checked on every access and by the node's reaper, so an
expired context never serves a request and its resources go promptly.

Ids are opaque and URL-safe. A scroll id stays the same across batches (the position lives in the
context), as Elasticsearch's conformance tests expect; a PIT id stays valid for the PIT's life.
Ended contexts are remembered for a while so that a 404 can say whether an id expired, was
freed, or never existed on this node.
"""

from __future__ import annotations

import base64
import itertools
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from leafsearch.errors import IllegalArgument, SearchContextMissing, TooManyScrollContexts
from leafsearch.request.timevalue import parse_time_value
from leafsearch.search.targets import Target, release_targets

if TYPE_CHECKING:
    from leafsearch.node import Node

_ID_PREFIX = b"leafsearch:"
_ENDED_MEMORY = 10_000


@dataclass(eq=False)
class ReaderContext:
    ctx_id: int
    kind: str  # "scroll" | "pit"
    public_id: str
    targets: list[Target]
    keep_alive: float
    expires_at: float  # time.monotonic()
    opened_wall: float = field(default_factory=time.time)
    opened_mono: float = field(default_factory=time.monotonic)
    requests: int = 0
    # scroll state
    request: Any = None
    hitlist: Any = None
    position: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def indices(self) -> list[str]:
        return sorted({t.index.name for t in self.targets})

    def pinned_docs(self) -> int:
        return sum(t.searcher.max_doc for t in self.targets)

    def pinned_segments(self) -> int:
        return sum(len(t.searcher.views) for t in self.targets)


def _encode_id(kind: str, node_id: str, ctx_id: int) -> str:
    raw = _ID_PREFIX + f"{kind}:{node_id}:{ctx_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_id(public_id: str) -> tuple[str, str, int] | None:
    try:
        raw = base64.urlsafe_b64decode(public_id + "=" * (-len(public_id) % 4))
    except (ValueError, TypeError):
        return None
    if not raw.startswith(_ID_PREFIX):
        return None
    try:
        kind, node_id, ctx = raw[len(_ID_PREFIX) :].decode().split(":")
        return kind, node_id, int(ctx)
    except ValueError:
        return None


class ContextRegistry:
    def __init__(self, node: Node) -> None:
        self.node = node
        self._lock = threading.RLock()
        self._contexts: dict[int, ReaderContext] = {}
        self._ended: OrderedDict[int, tuple[str, float]] = OrderedDict()  # ctx id -> (how, wall time)
        self._ids = itertools.count(1)

    # ---- limits ------------------------------------------------------------------------

    def keep_alive_seconds(self, value: str, name: str) -> float:
        seconds = parse_time_value(value, name)
        limit = self.node.cluster_settings.get("search.max_keep_alive")
        if seconds > limit:
            raise IllegalArgument(
                f"Keep alive for request ({_fmt(seconds)}) is too large. It must be less than ({_fmt(limit)}). "
                "This limit can be set by changing the [search.max_keep_alive] cluster level setting."
            )
        return seconds

    def _check_scroll_limit(self) -> None:
        limit = int(self.node.cluster_settings.get("search.max_open_scroll_context"))
        if sum(1 for c in self._contexts.values() if c.kind == "scroll") >= limit:
            raise TooManyScrollContexts(
                f"Trying to create too many scroll contexts. Must be less than or equal to: [{limit}]. "
                "This limit can be set by changing the [search.max_open_scroll_context] setting."
            )

    # ---- lifecycle ---------------------------------------------------------------------

    def open(self, kind: str, targets: list[Target], keep_alive: float) -> ReaderContext:
        with self._lock:
            if kind == "scroll":
                self._check_scroll_limit()
            ctx_id = next(self._ids)
            ctx = ReaderContext(
                ctx_id=ctx_id,
                kind=kind,
                public_id=_encode_id(kind, self.node.node_id, ctx_id),
                targets=targets,
                keep_alive=keep_alive,
                expires_at=time.monotonic() + keep_alive,
            )
            self._contexts[ctx_id] = ctx
            if kind == "scroll":
                self.node.search_stats.scroll_opened()
            return ctx

    def get(self, public_id: str, kind: str) -> ReaderContext:
        """The live context of an id; 404 saying why when it is gone. Expiry is checked here."""
        decoded = _decode_id(public_id)
        if decoded is None or decoded[0] != kind or decoded[1] != self.node.node_id:
            raise SearchContextMissing(
                f"No search context found for id [{public_id}]: it was never opened on this node"
            )
        ctx_id = decoded[2]
        with self._lock:
            ctx = self._contexts.get(ctx_id)
            if ctx is not None and time.monotonic() > ctx.expires_at:
                self._free(ctx, "expired")
                ctx = None
            if ctx is None:
                raise SearchContextMissing(self._missing_reason(ctx_id))
            return ctx

    def _missing_reason(self, ctx_id: int) -> str:
        ended = self._ended.get(ctx_id)
        if ended is None:
            return f"No search context found for id [{ctx_id}]: it was never opened on this node or ended long ago"
        how, when = ended
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
        if how == "expired":
            return f"No search context found for id [{ctx_id}]: it expired at {stamp} (keep_alive elapsed)"
        return f"No search context found for id [{ctx_id}]: it was {how} at {stamp}"

    def touch(self, ctx: ReaderContext, keep_alive: float | None, *, extend_only: bool) -> None:
        """Reset (scroll) or extend (PIT: the later of old and new) the expiry."""
        with self._lock:
            ctx.requests += 1
            if keep_alive is None:
                return
            new_expiry = time.monotonic() + keep_alive
            if extend_only:
                if new_expiry > ctx.expires_at:
                    ctx.expires_at = new_expiry
                    ctx.keep_alive = max(ctx.keep_alive, keep_alive)
            else:
                ctx.expires_at = new_expiry
                ctx.keep_alive = keep_alive

    def _free(self, ctx: ReaderContext, how: str) -> None:
        if self._contexts.pop(ctx.ctx_id, None) is None:
            return
        self._ended[ctx.ctx_id] = (how, time.time())
        while len(self._ended) > _ENDED_MEMORY:
            self._ended.popitem(last=False)
        if ctx.kind == "scroll":
            self.node.search_stats.scroll_closed(time.monotonic() - ctx.opened_mono)
        ctx.hitlist = None
        release_targets(ctx.targets)

    def free(self, ctx: ReaderContext, how: str = "freed") -> None:
        with self._lock:
            self._free(ctx, how)

    def free_id(self, public_id: str, kind: str) -> bool:
        decoded = _decode_id(public_id)
        if decoded is None or decoded[0] != kind or decoded[1] != self.node.node_id:
            return False
        with self._lock:
            ctx = self._contexts.get(decoded[2])
            if ctx is None:
                return False
            expired = time.monotonic() > ctx.expires_at
            self._free(ctx, "expired" if expired else "cleared")
            return not expired

    def free_all(self, kind: str) -> int:
        with self._lock:
            victims = [c for c in self._contexts.values() if c.kind == kind]
            for ctx in victims:
                self._free(ctx, "cleared")
            return len(victims)

    def reap(self) -> None:
        now = time.monotonic()
        with self._lock:
            for ctx in [c for c in self._contexts.values() if now > c.expires_at]:
                self._free(ctx, "expired")

    def drop_index(self, index) -> None:
        with self._lock:
            for ctx in [c for c in self._contexts.values() if any(t.index is index for t in c.targets)]:
                self._free(ctx, "freed because its index was deleted")

    def close_all(self) -> None:
        with self._lock:
            for ctx in list(self._contexts.values()):
                self._free(ctx, "freed at node shutdown")

    # ---- reporting ---------------------------------------------------------------------

    def open_count(self) -> int:
        return len(self._contexts)

    def describe(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        with self._lock:
            contexts = list(self._contexts.values())
        rows = []
        for ctx in contexts:
            rows.append(
                {
                    "id": ctx.public_id,
                    "type": ctx.kind,
                    "indices": ",".join(ctx.indices),
                    "age": _fmt(now - ctx.opened_mono),
                    "keep_alive": _fmt(ctx.keep_alive),
                    "time_left": _fmt(max(ctx.expires_at - now, 0.0)),
                    "requests": ctx.requests,
                    "docs": ctx.pinned_docs(),
                    "segments": ctx.pinned_segments(),
                }
            )
        return rows


def _fmt(seconds: float) -> str:
    """Elasticsearch's short time rendering (TimeValue.toString)."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.0f}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    ms = seconds * 1000
    return f"{ms:.0f}ms" if ms == int(ms) else f"{ms:.1f}ms"
