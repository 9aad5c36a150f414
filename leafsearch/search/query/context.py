"""What a query needs from its shard, and the shard-level errors raised while planning it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from leafsearch.common.settings import node_setting
from leafsearch.errors import ElasticError, QueryShardError
from leafsearch.index.searcher import Searcher

MAX_CLAUSE_COUNT: int = node_setting("indices.query.bool.max_clause_count")


@dataclass
class QueryContext:
    """What a query needs from its shard. One context serves all segments of one shard snapshot;
    it caches the prepared plan and term statistics for them."""

    mapping: Any
    searcher: Searcher
    now_millis: int = 0
    needs_scores: bool = True
    default_fields: tuple[str, ...] = ("*",)  # index.query.default_field
    index_name: str | None = None
    index_uuid: str = "_na_"
    max_regex_length: int = 1000  # index.max_regex_length
    max_terms_count: int = 65_536  # index.max_terms_count
    query_string_lenient: bool = False  # index.query_string.lenient: `query_string`'s default
    max_result_window: int = 10_000  # index.max_result_window: the most ids an `ids` query may name
    max_clause_count: int = MAX_CLAUSE_COUNT  # indices.query.bool.max_clause_count
    profile: Any = None  # the shard's `search.profile.ShardProfile` when the search is profiled
    nested_path: str | None = None  # the `nested` level the query runs on (None: the documents)
    nested_levels: dict[str, Any] = field(default_factory=dict, repr=False)  # nested_queries.py
    _plans: dict[str, Any] = field(default_factory=dict, repr=False)
    _weights: dict[tuple, Any] = field(default_factory=dict, repr=False)


def shard_error(
    ctx: QueryContext, reason: str, cause: ElasticError | None = None, *, root: bool = False
) -> QueryShardError:
    return QueryShardError(
        reason, index=ctx.index_name, index_uuid=ctx.index_uuid, caused_by=cause, cause_is_root=root
    )


def failed(ctx: QueryContext, error_type: str, message: str, *, root: bool = False) -> QueryShardError:
    """Elasticsearch wraps an exception raised while building a query as "failed to create query"."""
    return failed_in(ctx.index_name, ctx.index_uuid, error_type, message, root=root)


def failed_in(
    index_name: str | None, index_uuid: str, error_type: str, message: str, *, root: bool = False
) -> QueryShardError:
    """`failed` for a check made before the shard's query context exists."""
    cause = ElasticError(message, error_type=error_type, status=400)
    return QueryShardError(
        f"failed to create query: {message}",
        index=index_name,
        index_uuid=index_uuid,
        caused_by=cause,
        cause_is_root=root,
    )


def check_ids_count(count: int, max_result_window: int, index_name: str | None, index_uuid: str) -> None:
    """IdsQueryBuilder refuses more ids than the index's result window."""
    if count > max_result_window:
        raise failed_in(
            index_name,
            index_uuid,
            "illegal_state_exception",
            f"Too many ids specified, allowed max result window is [{max_result_window}]",
        )
