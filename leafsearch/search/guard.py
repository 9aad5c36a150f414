"""What stops a search early: its `timeout`, its client going away, and the request breaker.

Elasticsearch checks a search's deadline and its task's cancellation between small units of
work (Lucene's ExitableDirectoryReader), never by killing a thread. Here the query phase checks
between segments and before each segment's aggregations, which is where the work is split: a
check is one clock call and one flag read. A search past its deadline stops collecting and
answers with what it has and `timed_out: true`, or, when `allow_partial_search_results` is false,
with Elasticsearch's `search_timeout_exception` (429). A search whose client disconnected raises
`task_cancelled_exception` (nobody reads the answer; the point is to stop the work).

The clock is the node's (`Node.clock`, `time.monotonic` by default): tests give the node a clock
that advances on every call, so a search times out at a chosen check without any sleep.

The guard also holds the request's reservations on the request circuit breaker, released
together when the query phase ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from leafsearch.errors import SearchPhaseExecution, SearchTimeout, TaskCancelled

if TYPE_CHECKING:
    from leafsearch.request.search_types import SearchRequest
    from leafsearch.search.services import SearchServices
    from leafsearch.services.breaker import Breakers

#: Bytes per document of a segment that executing a query there may allocate at once: the match
#: mask, the float32 scores, the matched doc numbers (int64) and a post-filter mask.
SEGMENT_BYTES_PER_DOC = 16
#: Bytes per match kept until the sort: shard position (int32), doc (int64), score (float32).
MATCH_BYTES = 16
#: Bytes per match and sort key while sorting: values, comparable key, their reordered copies.
SORT_KEY_BYTES = 32


class TimeExceeded(Exception):
    """The search's deadline passed; the query phase stops and keeps what it collected."""


class SearchGuard:
    def __init__(
        self,
        clock: Callable[[], float],
        timeout: float | None,
        *,
        allow_partial: bool = True,
        cancelled: threading.Event | None = None,
        breakers: Breakers | None = None,
    ) -> None:
        """`timeout` in seconds (None or negative: none)."""
        self._clock = clock
        self.deadline = clock() + timeout if timeout is not None and timeout >= 0 else None
        self.allow_partial = allow_partial
        self.cancelled = cancelled
        self._breakers = breakers
        self.reserved = 0
        self.expired = False  # the query phase stopped at the deadline

    @classmethod
    def for_search(
        cls, services: SearchServices, request: SearchRequest, cancelled: threading.Event | None
    ) -> SearchGuard:
        """A search's guard: its own `timeout` or the node's `search.default_search_timeout`;
        as in Elasticsearch, a scroll has no timeout."""
        settings = services.cluster_settings
        timeout = request.timeout
        if timeout is None:
            timeout = settings.get("search.default_search_timeout")
        if request.scroll is not None:
            timeout = None
        allow = request.allow_partial_search_results
        if allow is None:
            allow = settings.get("search.default_allow_partial_results")
        return cls(
            services.clock, timeout, allow_partial=allow, cancelled=cancelled, breakers=services.breakers
        )

    def check(self) -> None:
        """Raise `TaskCancelled` when the client went away, `TimeExceeded` past the deadline."""
        if self.cancelled is not None and self.cancelled.is_set():
            raise TaskCancelled("task cancelled [http channel closed]")
        if self.deadline is not None and self._clock() > self.deadline:
            raise TimeExceeded

    def timed_out(self) -> None:
        """The query phase stopped at the deadline: refuse when partial results are not allowed."""
        self.expired = True
        if not self.allow_partial:
            raise SearchPhaseExecution(SearchTimeout("Time exceeded"))

    def reserve(self, size: int) -> None:
        """Reserve `size` bytes on the request breaker before allocating them (or refuse: 429)."""
        if self._breakers is not None and size > 0:
            self._breakers.reserve(size)
            self.reserved += size

    def release(self, size: int) -> None:
        if self._breakers is not None and size > 0:
            self._breakers.release(size)
            self.reserved -= size

    def release_all(self) -> None:
        self.release(self.reserved)
