"""`search.max_buckets`: how many buckets one response may hold, counted while the reduce builds them.

As Elasticsearch's MultiBucketConsumer does in its final reduce, every multi-bucket aggregation
consumes the buckets it is about to render, at every level of nesting, so sub-aggregations
multiply. Histograms consume the buckets that filling the gaps between their bounds would create
before any array of keys exists: a tiny interval over a wide range is refused, never allocated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from leafsearch.errors import ElasticError, SearchPhaseExecution

MAX_BUCKETS = "search.max_buckets"
# A histogram's count of keys between two bounds is exact in UTC; a time zone's shifts or float
# rounding may make the keys really built a few fewer, so an estimate this close is built and counted.
_ESTIMATE_SLACK = 2


class TooManyBuckets(ElasticError):
    error_type = "too_many_buckets_exception"
    status = 400

    def __init__(self, limit: int, *, size: int | None = None) -> None:
        """`size`: a composite aggregation asking for more buckets than the limit, named in the message."""
        exceeded = "this number of buckets was exceeded" if size is None else f"was [{size}]"
        super().__init__(
            f"Trying to create too many buckets. Must be less than or equal to: [{limit}] but {exceeded}. "
            f"This limit can be set by changing the [{MAX_BUCKETS}] cluster level setting.",
            extra={"max_buckets": limit},
        )


class BucketConsumer:
    """The buckets a reduce has created so far, against the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def consume(self, buckets: int) -> None:
        self.count += buckets
        if self.count > self.limit:
            raise TooManyBuckets(self.limit)

    def room(self) -> int:
        return self.limit - self.count


_CONSUMER: ContextVar[BucketConsumer | None] = ContextVar("bucket_consumer", default=None)


@contextmanager
def counting_buckets(limit: int | None) -> Iterator[None]:
    """Count the buckets rendered inside the block against `limit` (None: no limit).

    The count lives in a context variable so that every aggregation's `render` can consume from
    it without the counter being threaded through each render signature.
    """
    token = _CONSUMER.set(BucketConsumer(limit) if limit is not None else None)
    try:
        yield
    except TooManyBuckets as cause:
        raise reduce_failure(cause) from None
    finally:
        _CONSUMER.reset(token)


def consume_buckets(buckets: int) -> None:
    consumer = _CONSUMER.get()
    if consumer is not None:
        consumer.consume(buckets)


def reserve_estimate(estimate: int) -> None:
    """Refuse now when an upper bound of the buckets to build is over the limit by more than the
    estimate's slack; otherwise the caller builds them and consumes the exact count."""
    consumer = _CONSUMER.get()
    if consumer is not None and estimate > consumer.room() + _ESTIMATE_SLACK:
        consumer.consume(estimate)


def reduce_failure(cause: ElasticError) -> SearchPhaseExecution:
    """A failure of the coordinator's final reduce, after every shard succeeded: Elasticsearch
    reports it with an empty reason and no root causes (there is no shard failure to name)."""
    error = SearchPhaseExecution(cause, phase="rank-feature")
    error.reason = ""
    error.root_causes = []
    return error
