"""Elasticsearch-shaped errors.

Every refusal in leafsearch is raised as an `ElasticError`: it carries Elasticsearch's type name,
reason and HTTP status together, so the REST layer renders the exact body shape that the official
clients parse (`error.root_cause[]`, `error.type`, `error.reason`, `status`) and the in-process
API raises the same objects that a test can inspect.
"""

from __future__ import annotations

import traceback
from typing import Any


class ElasticError(Exception):
    """An error with Elasticsearch's type name, reason and HTTP status."""

    error_type = "exception"
    status = 500
    #: Whether this error is its own root cause although it has a cause: Elasticsearch's
    #: `guessRootCauses` stops above a cause that is no Elasticsearch exception. A flag rather than
    #: `root_causes = [self]`: an error holding itself is a reference cycle, which keeps its
    #: traceback (and the request in its frames) alive until the cycle collector runs.
    root_is_self = False

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        extra: dict[str, Any] | None = None,
        caused_by: ElasticError | None = None,
        root_causes: list[ElasticError] | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        if status is not None:
            self.status = status
        if error_type is not None:
            self.error_type = error_type
        self.extra = extra or {}
        self.caused_by = caused_by
        self.root_causes = root_causes

    def __reduce__(self) -> tuple:
        """Pickled with its whole state, whatever a subclass's constructor takes: a search worker
        process sends its errors to the server process (search/workers/)."""
        return (_restore, (type(self), self.args), self.__dict__)  # state after: cycles pickle

    def _cause_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.error_type, "reason": self.reason}
        body.update(self.extra)
        return body

    def roots(self) -> list[ElasticError]:
        """The errors Elasticsearch reports as `root_cause`."""
        if self.root_causes is not None:
            return self.root_causes
        return [self] if self.root_is_self else [self.caused_by or self]

    def body(self) -> dict[str, Any]:
        """The response body Elasticsearch sends for this error."""
        error = {"root_cause": [r._cause_body() for r in self.roots()], **self._cause_body()}
        if self.caused_by is not None:
            error["caused_by"] = self.caused_by._cause_body()
        return {"error": error, "status": self.status}


def _restore(cls: type[ElasticError], args: tuple) -> ElasticError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


class IllegalArgument(ElasticError):
    error_type = "illegal_argument_exception"
    status = 400


class ParsingError(ElasticError):
    error_type = "parsing_exception"
    status = 400


class XContentParseError(ElasticError):
    error_type = "x_content_parse_exception"
    status = 400


class ActionRequestValidation(ElasticError):
    """Elasticsearch prefixes each message with "Validation Failed: N: ...;"."""

    error_type = "action_request_validation_exception"
    status = 400

    def __init__(self, *messages: str) -> None:
        text = "".join(f"{i}: {m};" for i, m in enumerate(messages, start=1))
        super().__init__(f"Validation Failed: {text}")


class IndexNotFound(ElasticError):
    error_type = "index_not_found_exception"
    status = 404

    def __init__(self, index: str, *, suffix: str = "") -> None:
        super().__init__(
            f"no such index [{index}]{suffix}",
            extra={
                "resource.type": "index_or_alias",
                "resource.id": index,
                "index_uuid": "_na_",
                "index": index,
            },
        )


class IndexClosed(ElasticError):
    """A request reading or writing a closed index (Elasticsearch's IndexClosedException)."""

    error_type = "index_closed_exception"
    status = 400

    def __init__(self, index: str, uuid: str) -> None:
        super().__init__("closed", extra={"index_uuid": uuid, "index": index})


class ResourceAlreadyExists(ElasticError):
    error_type = "resource_already_exists_exception"
    status = 400


class InvalidIndexName(ElasticError):
    error_type = "invalid_index_name_exception"
    status = 400

    def __init__(self, index: str, why: str) -> None:
        super().__init__(
            f"Invalid index name [{index}], {why}",
            extra={"index_uuid": "_na_", "index": index},
        )


class DocumentParsing(ElasticError):
    error_type = "document_parsing_exception"
    status = 400


class MapperParsing(ElasticError):
    error_type = "mapper_parsing_exception"
    status = 400


class StrictDynamicMapping(ElasticError):
    error_type = "strict_dynamic_mapping_exception"
    status = 400


class VersionConflict(ElasticError):
    error_type = "version_conflict_engine_exception"
    status = 409


class DocumentMissing(ElasticError):
    error_type = "document_missing_exception"
    status = 404


class DocumentSourceMissing(ElasticError):
    """An update of a document whose index keeps no `_source` (`_source.enabled: false`)."""

    error_type = "document_source_missing_exception"
    status = 400


class TranslogFailed(ElasticError):
    """Writing or syncing a shard's translog failed (a full disk, an I/O error): its operations
    since the last sync are not durable, so the shard takes no more writes until a restart
    recovers it from what is on disk, as Elasticsearch fails a shard on such a tragic event."""

    error_type = "translog_exception"
    status = 500


class FlushFailed(ElasticError):
    """Writing a buffer as a segment, or a commit, failed (a full disk, an I/O error, memory). Its
    operations are still in the translog and the buffer; the write is tried again (a segment
    under a new name) by the next flush."""

    error_type = "flush_failed_engine_exception"
    status = 500


class RefreshFailed(ElasticError):
    """A refresh failed before it published its snapshot (memory, an I/O error): the shard is as
    it was before it, searches read the previous snapshot, and the next refresh tries again."""

    error_type = "refresh_failed_engine_exception"
    status = 500


def cause_of(exc: BaseException) -> str:
    """A failure that is not an `ElasticError`, as the reason of one names it: its class and
    message, an `OSError`'s without the file name (a path is not the client's to see)."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class SearchContextMissing(ElasticError):
    error_type = "search_context_missing_exception"
    status = 404


class TooManyScrollContexts(ElasticError):
    error_type = "too_many_scroll_contexts_exception"
    status = 429


class RejectedExecution(ElasticError):
    """Elasticsearch's (and OpenSearch's) rejected_execution_exception: a limit on work in
    flight, e.g. OpenSearch's `search.max_open_pit_context`."""

    error_type = "rejected_execution_exception"
    status = 429


class SearchTimeout(ElasticError):
    """A search that ran out of its `timeout` while `allow_partial_search_results` is false."""

    error_type = "search_timeout_exception"
    status = 429


class TaskCancelled(ElasticError):
    """A request stopped because its client went away (Elasticsearch answers 400: the client
    asked for it, so it is no server failure)."""

    error_type = "task_cancelled_exception"
    status = 400


class CircuitBreaking(ElasticError):
    """A request refused because the memory it would take does not fit under a breaker's limit."""

    error_type = "circuit_breaking_exception"
    status = 429

    def __init__(
        self, reason: str, *, bytes_wanted: int, bytes_limit: int, durability: str = "TRANSIENT"
    ) -> None:
        """`durability`: TRANSIENT or PERMANENT (the fielddata breaker's), as Elasticsearch's
        breakers say; the status is 429 either way, as Elasticsearch answers."""
        super().__init__(
            reason,
            extra={"bytes_wanted": bytes_wanted, "bytes_limit": bytes_limit, "durability": durability},
        )


class ResourceNotFound(ElasticError):
    error_type = "resource_not_found_exception"
    status = 404


class SearchPhaseExecution(ElasticError):
    """Wraps shard failures the way Elasticsearch's coordinator reports them."""

    error_type = "search_phase_execution_exception"
    status = 400

    def __init__(
        self,
        cause: ElasticError,
        phase: str = "query",
        reason: str = "all shards failed",
        failed_shards: list[dict] | None = None,
    ) -> None:
        super().__init__(
            reason,
            status=cause.status,
            caused_by=cause,
            root_causes=[cause],
            extra={"phase": phase, "grouped": True, "failed_shards": failed_shards or []},
        )


class ShardUnavailable(ElasticError):
    """A shard that cannot answer: its process (a Ray shard actor) died, is restarting, or its
    machine is gone (Elasticsearch's NoShardAvailableActionException)."""

    error_type = "no_shard_available_action_exception"
    status = 503


class ShardFailed(ElasticError):
    """One shard of a search failed in a way that fails that shard alone (it is unavailable, or
    its reader context is gone): the coordinator answers the other shards' hits with the failure
    in `_shards.failures`, as Elasticsearch does, unless partial results are refused."""

    def __init__(self, cause: ElasticError, shard_index: int, index: str, shard_id: int) -> None:
        super().__init__(cause.reason, status=cause.status, error_type=cause.error_type)
        self.cause = cause
        self.shard_index = shard_index
        self.index = index
        self.shard_id = shard_id

    def failure(self, node_id: str) -> dict:
        """The shard's entry in `_shards.failures` (Elasticsearch's ShardSearchFailure)."""
        return {
            "shard": self.shard_id,
            "index": self.index,
            "node": node_id,
            "reason": self.cause._cause_body(),
        }


class ContentTooLong(ElasticError):
    error_type = "content_too_long_exception"
    status = 413


class ParseException(ElasticError):
    """Elasticsearch's ElasticsearchParseException, e.g. "request body is required"."""

    error_type = "parse_exception"
    status = 400


class MediaTypeHeader(ElasticError):
    """Accept / Content-Type headers that ask for incompatible API versions."""

    error_type = "media_type_header_exception"
    status = 400


class AggregationExecution(ElasticError):
    error_type = "aggregation_execution_exception"
    status = 400


class AggregationInitialization(ElasticError):
    error_type = "aggregation_initialization_exception"
    status = 400


class QueryShardError(ElasticError):
    """A query that cannot run against one index's mapping ("failed to create query: ...").

    Elasticsearch names the index, and reports this error itself as the root cause unless its
    cause is another Elasticsearch error (a date `parse_exception`), which then becomes the root.
    """

    error_type = "query_shard_exception"
    status = 400

    def __init__(
        self,
        reason: str,
        *,
        index: str | None = None,
        index_uuid: str = "_na_",
        caused_by: ElasticError | None = None,
        cause_is_root: bool = False,
    ) -> None:
        extra = {"index_uuid": index_uuid, "index": index} if index is not None else {}
        super().__init__(reason, extra=extra, caused_by=caused_by)
        if cause_is_root and caused_by is not None:
            self.root_causes = [caused_by]
        else:
            self.root_is_self = True


def release_frames(error: BaseException) -> None:
    """Let go of the frames that `error` and every error it leads to (`__cause__`, `__context__`,
    `caused_by`, root causes, a shard failure's cause) were raised through, once the error has
    been answered or sent on.

    Why: an error kept in a local of a frame it passed through (a list of shard answers, the
    result of a worker that is raised again) makes a reference cycle error -> traceback -> frame
    -> error, which only the cycle collector frees, and until it runs the frames keep the whole
    request alive (its body, its parsed query). The server raises the collector's thresholds
    (cli.py), so that could be hundreds of requests. Clearing the finished frames' locals and
    dropping the tracebacks breaks every such cycle at once, whatever frame made it."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        exc = pending.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc.__traceback__ = None
        pending += (exc.__cause__, exc.__context__)
        if isinstance(exc, ElasticError):
            pending.append(exc.caused_by)
            pending += exc.root_causes or ()
        if isinstance(exc, ShardFailed):
            pending.append(exc.cause)
