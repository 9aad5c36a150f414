"""The requests of `_delete_by_query`, `_update_by_query` and `_reindex`, parsed and validated.

Elasticsearch reads these as a search request (the part that selects documents) plus the options
of the bulk writes that follow. The search part is handed to the search request parser unchanged,
so it accepts and refuses exactly what `_search` does; only the keys that belong to the operation
(`conflicts`, `max_docs`, `dest`, ...) are taken out first. Refusals use Elasticsearch's words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from leafsearch.common.settings import active_shard_count
from leafsearch.errors import ActionRequestValidation, IllegalArgument, XContentParseError
from leafsearch.request.params import parse_bool
from leafsearch.request.search_request import parse_search_request
from leafsearch.request.search_types import SearchRequest, SortSpec, SourceFilter
from leafsearch.request.timevalue import parse_time_value

DELETE = "delete"
UPDATE = "update"
REINDEX = "reindex"
#: Elasticsearch's default batch size (`scroll_size`) of a by-query operation.
DEFAULT_BATCH_SIZE = 1000
#: The keep-alive a search request needs to be parsed as a walk over every match.
_WALK = "5m"

#: Query parameters that select documents: handed to the search request parser.
SEARCH_PARAMS = frozenset(
    {
        "q",
        "df",
        "analyzer",
        "analyze_wildcard",
        "default_operator",
        "lenient",
        "routing",
        "preference",
        "ignore_unavailable",
        "allow_no_indices",
        "expand_wildcards",
        "search_type",
        "stats",
        "request_cache",
        "terminate_after",
        "_source",
        "_source_includes",
        "_source_excludes",
        "sort",
    }
)


@dataclass(frozen=True, slots=True)
class Destination:
    """`dest` of a reindex: the index written, how, and the routing each copy gets."""

    index: str
    op_type: str = "index"  # or "create": an existing document is a version conflict
    routing: str = "keep"  # "keep", "discard" or "=<value>"


@dataclass
class BulkByQuery:
    """One by-query operation: what it reads (a search over `indices`) and how it writes."""

    kind: str
    search: SearchRequest  # what it reads: the indices, their options and routing included
    abort_on_conflict: bool = True
    max_docs: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    slices: int | None = 1  # None: `auto`, one slice per shard
    requests_per_second: float = math.inf
    refresh: bool = False
    wait_for_active_shards: int | str | None = None  # handed to each batch's bulk request
    dest: Destination | None = None
    #: The `script` option as sent (compiled by `by_query.start`); none for a delete.
    script: Any = None

    @property
    def indices(self) -> str | None:
        return self.search.indices

    @property
    def action(self) -> str:
        return {
            DELETE: "indices:data/write/delete/byquery",
            UPDATE: "indices:data/write/update/byquery",
            REINDEX: "indices:data/write/reindex",
        }[self.kind]

    def description(self) -> str:
        indices = f"[{self.indices or '_all'}]"
        if self.kind == REINDEX:
            assert self.dest is not None
            return f"reindex from {indices} to [{self.dest.index}]"
        return f"{'delete' if self.kind == DELETE else 'update'}-by-query {indices}"


class _MaxDocs:
    """`max_docs` from several places (body, `size`, the parameter): they must agree."""

    def __init__(self) -> None:
        self.value: int | None = None

    def set(self, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise IllegalArgument(f"[max_docs] must be a number, found [{value}]")
        if value < 0:
            raise IllegalArgument(f"[max_docs] parameter cannot be negative, found [{value}]")
        if self.value is not None and self.value != value:
            raise IllegalArgument(f"[max_docs] set to two different values [{self.value}] and [{value}]")
        self.value = value


def _conflicts(value: Any) -> bool:
    """True to abort on a version conflict (`abort`), False to count it and go on (`proceed`)."""
    if value not in ("abort", "proceed"):
        raise IllegalArgument(f'conflicts may only be "proceed" or "abort" but was [{value}]')
    return value == "abort"


def parse_slices(raw: str | None) -> int | None:
    """The `slices` parameter: a positive integer, or `auto` (None: one slice per shard)."""
    if raw is None:
        return 1
    if raw == "auto":
        return None
    message = f'[slices] must be a positive integer or the string "auto", but was [{raw}]'
    try:
        slices = int(raw)
    except ValueError:
        raise IllegalArgument(message) from None
    if slices < 1:
        raise IllegalArgument(message)
    return slices


def parse_requests_per_second(raw: str | None) -> float | None:
    """Throttling: a float > 0, or -1 for none (infinity). None when the parameter is absent."""
    if raw is None:
        return None
    message = "[requests_per_second] must be a float greater than 0. Use -1 to disable throttling."
    try:
        value = float(raw)
    except ValueError:
        raise IllegalArgument(message) from None
    if value == -1:
        return math.inf
    if not value > 0 or math.isnan(value) or (math.isinf(value) and raw.strip().lower() != "infinity"):
        raise IllegalArgument(message)
    return value


def _common(op: BulkByQuery, params: dict[str, str], max_docs: _MaxDocs) -> None:
    """The parameters every by-query operation takes (AbstractBaseReindexRestHandler)."""
    op.refresh = parse_bool(params.get("refresh"), False)
    op.wait_for_active_shards = active_shard_count(params.get("wait_for_active_shards"))
    for name in ("timeout", "scroll", "search_timeout"):
        if name in params:
            parse_time_value(params[name], name)
    op.slices = parse_slices(params.get("slices"))
    rps = parse_requests_per_second(params.get("requests_per_second"))
    if rps is not None:
        op.requests_per_second = rps
    if "max_docs" in params:
        raw = params["max_docs"]
        try:
            max_docs.set(int(raw))
        except ValueError:
            raise IllegalArgument(f"Failed to parse int parameter [max_docs] with value [{raw}]") from None
    op.max_docs = max_docs.value
    if op.max_docs is not None and op.slices is not None and op.max_docs < op.slices:
        raise ActionRequestValidation("[max_docs] should be >= [slices]")


def _search_part(
    body: dict[str, Any], params: dict[str, str], indices: str | None, *, fetch_source: bool
) -> SearchRequest:
    """The search that selects the documents, parsed as `_search` parses it, as a walk over every
    match in `_doc` order unless the body sorts."""
    for key, what in (("stored_fields", "stored_fields"), ("from", "from")):
        if key in body or key in params:
            raise ActionRequestValidation(f"{what} is not supported in this context")
    if body.get("_source") is False:
        raise ActionRequestValidation("_source:false is not supported in this context")
    if "size" in params:
        raise IllegalArgument("invalid parameter [size], use [max_docs] instead")
    search_params = {k: v for k, v in params.items() if k in SEARCH_PARAMS}
    request = parse_search_request(body or None, search_params, scroll=_WALK, indices=indices)
    if not request.sort:
        request.sort = [SortSpec("_doc", "asc")]
    request.seq_no_primary_term = True
    request.track_total_hits = True
    if not fetch_source:
        request.source = SourceFilter(fetch=False)
    return request


def _batch_size(params: dict[str, str], body_size: Any) -> int:
    if "scroll_size" in params:
        raw = params["scroll_size"]
        try:
            return int(raw)
        except ValueError:
            raise IllegalArgument(f"Failed to parse int parameter [scroll_size] with value [{raw}]") from None
    if body_size is None:
        return DEFAULT_BATCH_SIZE
    if isinstance(body_size, bool) or not isinstance(body_size, int):
        raise IllegalArgument(f'number_format_exception: For input string: "{body_size}"')
    return body_size


def parse_by_query(
    kind: str, indices: str, body: dict[str, Any] | None, params: dict[str, str]
) -> BulkByQuery:
    """`POST /<indices>/_delete_by_query` or `_update_by_query`."""
    body = dict(body or {})
    max_docs = _MaxDocs()
    abort = True
    if "conflicts" in body:
        abort = _conflicts(body.pop("conflicts"))
    if "max_docs" in body:
        max_docs.set(body.pop("max_docs"))
    script = body.pop("script", None)
    if script is not None and kind == DELETE:
        raise XContentParseError("[delete_by_query] unknown field [script]")
    if "conflicts" in params:
        abort = _conflicts(params["conflicts"])
    size = body.pop("size", None)
    if kind == DELETE and "query" not in body and "q" not in params:
        raise ActionRequestValidation("query is missing")
    search = _search_part(body, params, indices, fetch_source=kind != DELETE)
    if kind == UPDATE:
        search.source = SourceFilter()  # the whole source is indexed again, whatever `_source` says
    op = BulkByQuery(kind, search)
    op.script = script
    op.abort_on_conflict = abort
    op.batch_size = _batch_size(params, size)
    _common(op, params, max_docs)
    return op


_REINDEX_KEYS = frozenset({"source", "dest", "conflicts", "max_docs", "size", "script"})
_DEST_KEYS = frozenset({"index", "op_type", "version_type", "routing", "pipeline"})


def parse_reindex(body: dict[str, Any] | None, params: dict[str, str]) -> BulkByQuery:
    """`POST /_reindex`: a local source (indices, query, `_source`, batch `size`, `slice`) into
    `dest`, through a `script` if one is given. Remote sources and ingest pipelines are refused as
    unsupported."""
    if body is None:
        raise ActionRequestValidation("request body is required")
    max_docs = _MaxDocs()
    abort = True
    source: dict[str, Any] = {}
    dest: dict[str, Any] = {}
    for key, value in body.items():
        if key not in _REINDEX_KEYS:
            raise XContentParseError(f"[reindex] unknown field [{key}]")
        if key == "source":
            if not isinstance(value, dict):
                raise XContentParseError("[reindex] source doesn't support values of type: VALUE_STRING")
            source = dict(value)
        elif key == "dest":
            if not isinstance(value, dict):
                raise XContentParseError("[reindex] dest doesn't support values of type: VALUE_STRING")
            for dkey in value:
                if dkey not in _DEST_KEYS:
                    raise XContentParseError(f"[dest] unknown field [{dkey}]")
            dest = value
        elif key == "conflicts":
            abort = _conflicts(value)
        elif key in ("max_docs", "size"):
            max_docs.set(value)
    if "remote" in source:
        raise IllegalArgument("reindex from a [remote] cluster is not supported by leafsearch")
    indices = source.pop("index", None)
    if isinstance(indices, list):
        indices = ",".join(str(i) for i in indices)
    elif indices is not None and not isinstance(indices, str):
        raise IllegalArgument("Expected [index] to be a list or a string")
    batch = source.pop("size", None)
    errors = []
    if not indices:
        errors.append("use _all if you really want to copy from all existing indexes")
    dest_index = dest.get("index")
    if not dest_index:
        errors.append("index must be specified")
    if errors:
        raise ActionRequestValidation(*errors)
    destination = _destination(dest)
    search = _search_part(source, params, indices, fetch_source=True)
    op = BulkByQuery(REINDEX, search)
    op.script = body.get("script")
    op.dest = destination
    op.abort_on_conflict = abort
    op.batch_size = _batch_size({}, batch)
    _common(op, params, max_docs)
    return op


def _destination(dest: dict[str, Any]) -> Destination:
    if dest.get("pipeline") is not None:
        raise IllegalArgument("[dest.pipeline] is not supported by leafsearch: it has no ingest pipelines")
    version_type = dest.get("version_type", "internal")
    if version_type not in ("internal", None):
        if version_type in ("external", "external_gt", "external_gte"):
            raise IllegalArgument(f"[dest.version_type] [{version_type}] is not supported by leafsearch")
        raise IllegalArgument(f"No version type match [{version_type}]")
    op_type = dest.get("op_type", "index")
    if op_type not in ("index", "create"):
        raise IllegalArgument(f"opType must be 'create' or 'index', found: [{op_type}]")
    routing = dest.get("routing", "keep")
    if not isinstance(routing, str) or (routing not in ("keep", "discard") and not routing.startswith("=")):
        raise IllegalArgument(f"Unsupported routing command [{routing}]")
    return Destination(str(dest["index"]), op_type, routing)
