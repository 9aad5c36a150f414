"""Search requests: a `_search` body and its URL parameters validated into a `SearchRequest`.

Everything Elasticsearch checks before it looks at an index is checked here, in Elasticsearch's
order and with its words, because clients and their tests read those refusals: the body is parsed
as `SearchSourceBuilder.parseXContent` does (dispatching on the JSON token of each value, so an
unknown key or a value of the wrong kind gets "Unknown key for a VALUE_STRING in [foo]."), URL
parameters then override it as `RestSearchAction` does, and the combinations that cannot work
together (scroll with `from`, `slice` without scroll or PIT, ...) are collected into one
`action_request_validation_exception` ("Validation Failed: 1: ...;2: ...;").

The parsed request is also normalised the way Elasticsearch's coordinating node rewrites it: a
PIT search with a sort gets its implicit `_shard_doc` tiebreaker, and a lone `_score` descending
sort is no sort at all (hits then carry no `sort` values), so the coordinator executes exactly
what it receives.

Also here: the `_count` body, the scroll request and the clear-scroll request.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from leafsearch.common.json_tokens import not_boolean, not_numeric, token_name
from leafsearch.errors import (
    ActionRequestValidation,
    ElasticError,
    IllegalArgument,
    ParsingError,
    SearchPhaseExecution,
    XContentParseError,
)
from leafsearch.request.collapse import parse_collapse
from leafsearch.request.highlight import HighlightSpec, parse_highlight
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.request.query_dsl import (
    Bool,
    Query,
    ScriptSpec,
    parse_knn,
    parse_query,
    scalar_text,
    script_spec,
)
from leafsearch.request.rescore import Rescorer, parse_rescore
from leafsearch.request.search_types import (
    SCORE,
    SHARD_DOC,
    CollapseSpec,
    PitSpec,
    SearchRequest,
    SliceSpec,
    SortSpec,
    SourceFilter,
)
from leafsearch.request.sort import (
    chain,
    field_failed,
    parse_sort,
    parse_url_sort,
    reversed_sort,
    unsupported_token,
)
from leafsearch.request.suggest import parse_suggest, url_suggestion
from leafsearch.request.timevalue import parse_time_value
from leafsearch.unsupported import NotSupported

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
#: `track_total_hits` as Elasticsearch stores it: -1 disabled, Integer.MAX_VALUE exact.
_TRACK_DISABLED, _TRACK_ACCURATE = -1, _INT_MAX
_DEFAULT_TRACK_TOTAL_HITS = 10_000
_DEFAULT_SIZE = 10
_NONE_FIELDS = "_none_"
#: Parameters of the `q` query that make no sense without it (`RestActions.urlParamsToQueryBuilder`).
_QUERY_STRING_PARAMS = ("df", "analyzer", "analyze_wildcard", "lenient", "default_operator")
#: Parts of Elasticsearch's search body that leafsearch does not implement: refused by name.
_UNSUPPORTED = ("rank", "retriever", "sub_searches")
#: Parts accepted only empty, the form some clients always send.
_EMPTY_ONLY = ("runtime_mappings", "ext")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)")
_JAVA_INT = re.compile(r"[+-]?\d+")


# ---------------------------------------------------------------------------------------------
# entry points


def parse_search_request(
    body: dict[str, Any] | None,
    params: dict[str, str],
    *,
    scroll: str | None = None,
    indices: str | None = None,
    path: str = "/_search",
) -> SearchRequest:
    """The validated request of `GET|POST [/<indices>]/_search`.

    `scroll` is the keep-alive of a scroll the request opens (default: the `scroll` parameter);
    `indices` is the index part of the path, which a PIT search must not have; `path` only names
    the request in the message about `q`-less query-string parameters.
    """
    source = _Source()
    if body is not None:
        source.parse_body(body)
    request = _RequestOptions(params, scroll)
    source.apply_params(params, path)
    request.check_total_hits_as_int(source)
    _validate_pit(source, request, indices)
    _validate(source, request)
    return _build(source, request, indices)


def parse_count_request(
    body: dict[str, Any] | None,
    params: dict[str, str],
    *,
    indices: str | None = None,
    path: str = "/_count",
) -> SearchRequest:
    """`_count`: only `query` in the body (the `q` parameter when there is no body). Counting needs
    no order: `_shard_doc` ascending is the order matches are gathered in."""
    query: Query | None = None
    if body is not None:
        if not isinstance(body, dict):
            raise ParsingError(f"Expected [START_OBJECT] but found [{token_name(body)}]")
        for key, value in body.items():
            if key != "query":
                raise ParsingError(f"request does not support [{key}]")
            query = parse_query(value)
    else:
        query = _url_query(params, path)
    min_score = params.get("min_score")
    terminate_after = _param_int(params, "terminate_after")
    if terminate_after is not None and terminate_after < 0:
        raise IllegalArgument("terminateAfter must be > 0")
    return SearchRequest(
        query=query if query is not None else parse_query(None),
        indices=indices,
        indices_options=parse_indices_options(params),
        sort=[SortSpec(SHARD_DOC, "asc")],
        size=0,
        track_total_hits=True,
        min_score=None if min_score is None else _param_float("min_score", min_score),
        terminate_after=terminate_after or None,
        routing=params.get("routing"),
    )


def parse_indices_options(params: dict[str, str], defaults: IndicesOptions | None = None) -> IndicesOptions:
    """The `ignore_unavailable`, `allow_no_indices` and `expand_wildcards` parameters over an API's
    defaults (a search's when not given)."""
    base = defaults or IndicesOptions()
    ignore = _param_bool(params, "ignore_unavailable", base.ignore_unavailable, empty_true=True)
    allow = _param_bool(params, "allow_no_indices", base.allow_no_indices, empty_true=True)
    wildcards = params.get("expand_wildcards", base.expand_wildcards)
    return replace(
        base, ignore_unavailable=bool(ignore), allow_no_indices=bool(allow), expand_wildcards=wildcards
    )


def parse_scroll_request(
    body: dict[str, Any] | None, params: dict[str, str], path_id: str | None = None
) -> tuple[str, str | None]:
    """(scroll id, new keep-alive or None) of `GET|POST /_search/scroll[/<id>]`.

    The body wins over the query string and the path, as in `RestSearchScrollAction`. A keep-alive
    of None means the context is freed after this batch (SPEC 4.5).
    """
    scroll_id = params.get("scroll_id", path_id)
    keep_alive = params.get("scroll")
    if keep_alive is not None:
        parse_time_value(keep_alive, "scroll")
    if body is not None:
        if not isinstance(body, dict):
            raise IllegalArgument("Malformed content, must start with an object")
        for key, value in body.items():
            if key == "scroll_id" and isinstance(value, str):
                scroll_id = value
            elif key == "scroll" and isinstance(value, str):
                parse_time_value(value, "scroll")
                keep_alive = value
            else:
                raise _unknown_body_parameter(key, value)
    if scroll_id is None:
        raise ActionRequestValidation("scrollId is missing")
    return scroll_id, keep_alive


def parse_clear_scroll(
    body: dict[str, Any] | None, params: dict[str, str], path_ids: str | None = None
) -> list[str]:
    """The ids of `DELETE /_search/scroll[/<ids>]`; `["_all"]` clears every scroll.

    A body replaces the ids of the path and query string entirely (`ClearScrollRequest.fromXContent`
    starts from an empty list), so `{}` clears nothing and is refused.
    """
    raw = params.get("scroll_id", path_ids)
    ids = [i for i in raw.split(",") if i] if raw else []
    if body is not None:
        if not isinstance(body, dict):
            raise IllegalArgument("Malformed content, must start with an object")
        ids = []
        for key, value in body.items():
            if key != "scroll_id":
                raise _unknown_body_parameter(key, value)
            if isinstance(value, list):
                for item in value:
                    if item is None or isinstance(item, dict | list):
                        raise IllegalArgument("scroll_id array element should only contain scroll_id")
                    ids.append(scalar_text(item))
            elif value is None or isinstance(value, dict):
                raise IllegalArgument("scroll_id element should only contain scroll_id")
            else:
                ids.append(scalar_text(value))
    if not ids:
        raise ActionRequestValidation("no scroll ids specified")
    return ids


def _unknown_body_parameter(key: str, value: Any) -> IllegalArgument:
    token = token_name(value)
    return IllegalArgument(
        f"Unknown parameter [{key}] in request body or parameter is of the wrong type[{token}] "
    )


# ---------------------------------------------------------------------------------------------
# the search source: body first, then URL parameters


class _Source:
    """`SearchSourceBuilder`'s state while parsing: None (or -1) means not given."""

    def __init__(self) -> None:
        self.query: Query | None = None
        self.post_filter: Query | None = None
        self.from_ = -1
        self.size = -1
        self.sort: list[SortSpec] | None = None
        self.search_after: list[Any] | None = None
        self.search_before: list[Any] | None = None
        self.pit: PitSpec | None = None
        self.collapse: CollapseSpec | None = None
        self.slice: SliceSpec | None = None
        self.track_total_hits: int | None = None
        self.track_scores = False
        self.profile = False
        self.source: SourceFilter | None = None
        self.fields: list[dict[str, Any]] | None = None
        self.docvalue_fields: list[dict[str, Any]] | None = None
        self.stored_fields: list[str] | None = None
        self.version: bool | None = None
        self.seq_no_primary_term: bool | None = None
        self.explain: bool | None = None
        self.aggs: dict[str, Any] | None = None
        self.rescore: tuple[Rescorer, ...] = ()
        self.script_fields: tuple[tuple[str, ScriptSpec, bool], ...] = ()
        self.highlight: HighlightSpec | None = None
        self.min_score: float | None = None
        self.terminate_after = 0
        self.timeout: float | None = None
        self.indices_boost: list[tuple[str, float]] = []
        self.knn: list[Any] = []  # the bodies, parsed once `size` (their default `k`) is known
        self.suggest: tuple[Any, ...] = ()

    # -- body ------------------------------------------------------------------------------

    def parse_body(self, body: Any) -> None:
        if not isinstance(body, dict):
            raise ParsingError(f"Expected [START_OBJECT] but found [{token_name(body)}]")
        for key, value in body.items():
            if isinstance(value, dict):
                self._object(key, value)
            elif isinstance(value, list):
                self._array(key, value)
            elif value is None:
                raise _unknown_key(key, value)
            else:
                self._scalar(key, value)

    def _scalar(self, key: str, value: Any) -> None:
        if key == "from":
            self.set_from(_int_value(value))
        elif key == "size":
            self.set_size(_int_value(value))
        elif key == "timeout":
            self.timeout = parse_time_value(scalar_text(value), "timeout")
        elif key == "terminate_after":
            self.set_terminate_after(_int_value(value))
        elif key == "min_score":
            self.min_score = _float_value(value)
        elif key in ("version", "seq_no_primary_term", "explain"):
            setattr(self, key, _bool_value(value))
        elif key == "track_scores":
            self.track_scores = _bool_value(value)
        elif key == "track_total_hits":
            if isinstance(value, bool) or value in ("true", "false"):
                self.track_total_hits = _TRACK_ACCURATE if _bool_value(value) else _TRACK_DISABLED
            else:
                self.set_track_total_hits(_int_value(value))
        elif key == "_source":
            self.source = _source_scalar(value)
        elif key == "stored_fields":
            if not isinstance(value, str):
                raise _stored_fields_token(value)
            self.stored_fields = _stored_fields([value])
        elif key == "sort":
            self.sort = parse_sort(scalar_text(value))
        elif key == "profile":
            self.profile = _bool_value(value)
        else:
            raise _unknown_key(key, value)

    def _object(self, key: str, value: dict[str, Any]) -> None:
        if key == "query":
            self.query = parse_query(value)
        elif key == "post_filter":
            self.post_filter = parse_query(value)
        elif key == "_source":
            self.source = _source_object(value)
        elif key in ("aggs", "aggregations"):
            self.aggs = value
        elif key == "sort":
            self.sort = parse_sort(value)
        elif key == "slice":
            self.slice = _slice(value)
        elif key == "collapse":
            self.collapse = parse_collapse(value, parse_fetch_source, _int_value, _bool_value)
        elif key == "pit":
            self.pit = _pit(value)
        elif key == "rescore":
            self.rescore = parse_rescore(value)
        elif key == "script_fields":
            self.script_fields = _script_fields(value)
        elif key == "highlight":
            self.highlight = parse_highlight(value)
        elif key == "knn":
            self.knn = [value]
        elif key == "suggest":
            self.suggest = parse_suggest(value)
        elif key in _EMPTY_ONLY and not value:
            pass
        elif key in _UNSUPPORTED or key in _EMPTY_ONLY:
            raise NotSupported(f"[{key}]")
        else:
            raise _unknown_key(key, value)

    def _array(self, key: str, value: list[Any]) -> None:
        if key == "sort":
            self.sort = parse_sort(value)
        elif key == "search_after":
            self.search_after = _search_after(value)
        elif key == "search_before":
            self.search_before = _search_after(value, key)
        elif key == "_source":
            self.source = _source_array("_source", value)
        elif key == "stored_fields":
            self.stored_fields = _stored_fields(value)
        elif key == "docvalue_fields":
            self.docvalue_fields = [_field_and_format(v, with_unmapped=False) for v in value]
        elif key == "fields":
            self.fields = [_field_and_format(v, with_unmapped=True) for v in value]
        elif key == "indices_boost":
            self.indices_boost = [_index_boost(v) for v in value]
        elif key == "rescore":
            self.rescore = parse_rescore(value)
        elif key == "knn":
            self.knn = value
        elif key == "stats":
            for group in value:
                if not isinstance(group, str):
                    raise ParsingError(f"Expected [VALUE_STRING] in [stats] but found [{token_name(group)}]")
        elif key in _UNSUPPORTED:
            raise NotSupported(f"[{key}]")
        else:
            raise _unknown_key(key, value)

    # -- setters with SearchSourceBuilder's checks --------------------------------------------

    def set_from(self, value: int) -> None:
        # SPEC 2.1 allows -1 ("unset"), which Elasticsearch 8 itself refuses in the body.
        if value < -1:
            raise IllegalArgument(f"[from] parameter cannot be negative but was [{value}]")
        self.from_ = value

    def set_size(self, value: int) -> None:
        if value < 0:
            raise IllegalArgument(f"[size] parameter cannot be negative, found [{value}]")
        self.size = value

    def set_terminate_after(self, value: int) -> None:
        if value < 0:
            raise IllegalArgument("terminateAfter must be > 0")
        self.terminate_after = value

    def set_track_total_hits(self, value: int) -> None:
        if value < _TRACK_DISABLED:
            raise IllegalArgument(
                f"[track_total_hits] parameter must be positive or equals to -1, got {value}"
            )
        self.track_total_hits = value

    # -- URL parameters (RestSearchAction.parseSearchSource) -----------------------------------

    def apply_params(self, params: dict[str, str], path: str) -> None:
        query = _url_query(params, path)
        if query is not None:
            self.query = query
        if "from" in params:
            self.set_from(_param_int(params, "from"))
        # Elasticsearch 8 refuses `?size=-1` as any negative size (only its 7.x compatibility mode,
        # which leafsearch does not emulate, read -1 as "not given").
        if "size" in params:
            self.set_size(_param_int(params, "size"))
        for key in ("explain", "version", "seq_no_primary_term"):
            if key in params:
                setattr(self, key, _param_bool(params, key, None))
        if "timeout" in params:
            self.timeout = parse_time_value(params["timeout"], "timeout")
        if "terminate_after" in params:
            self.set_terminate_after(_param_int(params, "terminate_after"))
        if "stored_fields" in params:
            self.stored_fields = _stored_fields(params["stored_fields"].split(","))
        if params.get("docvalue_fields"):
            extra = [{"field": f} for f in params["docvalue_fields"].split(",") if f]
            self.docvalue_fields = (self.docvalue_fields or []) + extra
        url_source = url_source_filter(params)
        if url_source is not None:
            self.source = url_source
        if "track_scores" in params:
            self.track_scores = _param_bool(params, "track_scores", False, empty_true=True)
        if "track_total_hits" in params:
            raw = params["track_total_hits"]
            if raw in ("true", "false"):
                self.track_total_hits = _TRACK_ACCURATE if raw == "true" else _TRACK_DISABLED
            else:
                self.set_track_total_hits(_param_int(params, "track_total_hits"))
        if "sort" in params:
            self.sort = (self.sort or []) + parse_url_sort(params["sort"])
        if "suggest_field" in params:
            size = _param_int(params, "suggest_size") if "suggest_size" in params else None
            text = params.get("suggest_text", params.get("q"))
            mode = params.get("suggest_mode", "missing")
            self.suggest = (url_suggestion(params["suggest_field"], text, mode, size),)


class _RequestOptions:
    """The `SearchRequest`-level parameters (not part of the search source)."""

    def __init__(self, params: dict[str, str], scroll: str | None) -> None:
        for key, minimum, message in (
            ("batched_reduce_size", 2, "batchedReduceSize must be >= 2"),
            ("pre_filter_shard_size", 1, "preFilterShardSize must be >= 1"),
            ("max_concurrent_shard_requests", 1, "maxConcurrentShardRequests must be >= 1"),
        ):
            if key in params and _param_int(params, key) < minimum:
                raise IllegalArgument(message)
        self.allow_partial = _param_bool(params, "allow_partial_search_results", None)
        self.dfs = _search_type(params.get("search_type"))
        self.request_cache = _param_bool(params, "request_cache", None)
        self.scroll = scroll if scroll is not None else params.get("scroll")
        if self.scroll is not None:
            parse_time_value(self.scroll, "scroll")
        self.routing = params.get("routing")
        self.preference = params.get("preference")
        self.indices_options = parse_indices_options(params)
        self.custom_indices_options = self.indices_options != IndicesOptions()
        self.ccs_minimize_roundtrips = _param_bool(params, "ccs_minimize_roundtrips", False, empty_true=True)
        self.total_hits_as_int = _param_bool(params, "rest_total_hits_as_int", False, empty_true=True)
        self.typed_keys = _param_bool(params, "typed_keys", False, empty_true=True)

    def check_total_hits_as_int(self, source: _Source) -> None:
        """`RestSearchAction.checkRestTotalHits`: an integer total must be exact."""
        if not self.total_hits_as_int:
            return
        if source.track_total_hits is None:
            source.track_total_hits = _TRACK_ACCURATE
        elif source.track_total_hits not in (_TRACK_ACCURATE, _TRACK_DISABLED):
            raise IllegalArgument(
                "[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, "
                f"got {source.track_total_hits}"
            )


def _search_type(value: str | None) -> bool:
    """Whether the search type asks for statistics gathered over all shards first (DFS)."""
    if value is None or value in ("query_then_fetch", "dfs_query_then_fetch"):
        return value == "dfs_query_then_fetch"
    if value in ("query_and_fetch", "dfs_query_and_fetch"):
        raise IllegalArgument(f"Unsupported search type [{value}]")
    raise IllegalArgument(f"No search type for [{value}]")


def _url_query(params: dict[str, str], path: str) -> Query | None:
    """The `q` parameter as a query_string query, with `df`, `default_operator` and friends."""
    if "q" not in params:
        given = [k for k in _QUERY_STRING_PARAMS if k in params]
        if given:
            raise IllegalArgument(
                f"request [{path}] contains parameters [{', '.join(given)}] but missing query string "
                "parameter 'q'."
            )
        return None
    body: dict[str, Any] = {"query": params["q"]}
    if params.get("df") is not None:
        body["default_field"] = params["df"]
    if params.get("analyzer") is not None:
        body["analyzer"] = params["analyzer"]
    body["analyze_wildcard"] = _param_bool(params, "analyze_wildcard", False, empty_true=True)
    lenient = _param_bool(params, "lenient", None)
    if lenient is not None:
        body["lenient"] = lenient
    if params.get("default_operator") is not None:
        body["default_operator"] = params["default_operator"]
    return parse_query({"query_string": body})


# ---------------------------------------------------------------------------------------------
# validation and the final request


def _validate(source: _Source, request: _RequestOptions) -> None:
    """`SearchRequest.validate()` with `SearchSourceBuilder.validate()`: every message at once."""
    errors: list[str] = []
    scroll = request.scroll is not None
    if scroll:
        if source.track_total_hits is not None and source.track_total_hits != _TRACK_ACCURATE:
            errors.append("disabling [track_total_hits] is not allowed in a scroll context")
        if source.from_ > 0:
            errors.append("using [from] is not allowed in a scroll context")
        if source.size == 0:
            errors.append("[size] cannot be [0] in a scroll context")
        if source.rescore:
            errors.append("using [rescore] is not allowed in a scroll context")
        if source.search_after:
            errors.append("[search_after] cannot be used in a scroll context")
        if source.search_before:
            errors.append("[search_before] cannot be used in a scroll context")
    if source.slice is not None and source.pit is None and not scroll:
        errors.append("[slice] can only be used with [scroll] or [point-in-time] requests")
    if source.from_ > 0 and source.search_after:
        errors.append("[from] parameter must be set to 0 when [search_after] is used")
    if source.search_before is not None:
        if source.from_ > 0:
            errors.append("[from] parameter must be set to 0 when [search_before] is used")
        if source.search_after is not None:
            errors.append("[search_before] cannot be used with [search_after]")
    if source.stored_fields == [_NONE_FIELDS]:
        if source.source is not None and source.source.fetch:
            errors.append("[stored_fields] cannot be disabled if [_source] is requested")
        if source.fields is not None:
            errors.append("[stored_fields] cannot be disabled when using the [fields] option")
    if source.pit is None and any(s.field == SHARD_DOC for s in source.sort or ()):
        errors.append("[_shard_doc] sort field cannot be used without [point in time]")
    if scroll and request.request_cache:
        errors.append("[request_cache] cannot be used in a scroll context")
    if source.pit is not None and scroll:
        errors.append("using [point in time] is not allowed in a scroll context")
    if errors:
        raise ActionRequestValidation(*errors)
    if source.collapse is not None:
        _validate_collapse(source, scroll)


def _validate_collapse(source: _Source, scroll: bool) -> None:
    """What Elasticsearch's shards refuse of `collapse` with the rest of the request (a shard
    failure of every shard, reported as the search's); `search_before` pages groups in no order
    leafsearch keeps (a group's best hit is its first in the request's order)."""
    for refused, message in (
        (scroll, "cannot use `collapse` in a scroll context"),
        (bool(source.rescore), "cannot use `collapse` in conjunction with `rescore`"),
        (source.search_before is not None, "cannot use `collapse` in conjunction with `search_before`"),
    ):
        if refused:
            raise SearchPhaseExecution(IllegalArgument(message))


class PointInTimeMisuse(ActionRequestValidation):
    """What RestSearchAction.preparePointInTime refuses while it reads the request, before the
    request is validated: in `_msearch` it fails the whole request, not one search."""


def _validate_pit(source: _Source, request: _RequestOptions, indices: str | None) -> None:
    if source.pit is None:
        return
    errors: list[str] = []
    if indices:
        errors.append(
            "[indices] cannot be used with point in time. Do not specify any index with point in time."
        )
    if request.custom_indices_options:
        errors.append("[indicesOptions] cannot be used with point in time")
    if request.routing is not None:
        errors.append("[routing] cannot be used with point in time")
    if request.preference is not None:
        errors.append("[preference] cannot be used with point in time")
    if request.ccs_minimize_roundtrips:
        errors.append("[ccs_minimize_roundtrips] cannot be used with point in time")
    if errors:
        raise PointInTimeMisuse(*errors)


def _script_fields(value: Any) -> tuple[tuple[str, ScriptSpec, bool], ...]:
    """`script_fields`: {name: {"script": ..., "ignore_failure": bool}}."""
    if not isinstance(value, dict):
        raise ParsingError(f"Expected [START_OBJECT] in [script_fields] but found [{token_name(value)}]")
    out = []
    for name, spec in value.items():
        if not isinstance(spec, dict):
            raise ParsingError(
                f"Expected [START_OBJECT] under [{name}], but got a [{token_name(spec)}] in [script_fields]"
            )
        unknown = next((k for k in spec if k not in ("script", "ignore_failure")), None)
        if unknown is not None:
            raise ParsingError(
                f"Unknown key for a [{token_name(spec[unknown])}] in [script_fields]: [{unknown}]."
            )
        if "script" not in spec:
            raise ParsingError(f"script_fields [{name}] must have a [script]")
        ignore = spec.get("ignore_failure", False)
        if not isinstance(ignore, bool):
            raise ParsingError("[script_fields] [ignore_failure] must be a boolean")
        out.append((name, script_spec("script_fields", spec["script"]), ignore))
    return tuple(out)


def _build(source: _Source, request: _RequestOptions, indices: str | None) -> SearchRequest:
    cursor = source.search_after if source.search_before is None else source.search_before
    sort = _effective_sort(source.sort or [], source.pit, cursor)
    if cursor is not None and not sort:
        # Elasticsearch's shards cannot place a cursor in a pure relevance order.
        raise SearchPhaseExecution(IllegalArgument("Sort must contain at least one field."))
    track = source.track_total_hits
    return SearchRequest(
        query=_with_knn(source),
        indices=indices,
        indices_options=request.indices_options,
        from_=max(source.from_, 0),
        size=_DEFAULT_SIZE if source.size < 0 else source.size,
        sort=sort if source.search_before is None else reversed_sort(sort),
        search_after=cursor,
        backwards=source.search_before is not None,
        pit=source.pit,
        slice=source.slice,
        scroll=request.scroll,
        track_total_hits=(
            _DEFAULT_TRACK_TOTAL_HITS
            if track is None
            else True
            if track == _TRACK_ACCURATE
            else False
            if track == _TRACK_DISABLED
            else track
        ),
        track_scores=source.track_scores,
        profile=source.profile,
        source=_source_filter(source),
        fields=source.fields or [],
        docvalue_fields=source.docvalue_fields or [],
        stored_fields=source.stored_fields,
        version=bool(source.version),
        seq_no_primary_term=bool(source.seq_no_primary_term),
        explain=bool(source.explain),
        aggs=source.aggs,
        rescore=source.rescore,
        script_fields=source.script_fields,
        highlight=source.highlight,
        post_filter=source.post_filter,
        collapse=source.collapse,
        min_score=source.min_score,
        terminate_after=source.terminate_after or None,
        rest_total_hits_as_int=request.total_hits_as_int,
        typed_keys=request.typed_keys,
        indices_boost=source.indices_boost,
        routing=request.routing,
        dfs=request.dfs,
        request_cache=request.request_cache,
        timeout=source.timeout,
        allow_partial_search_results=request.allow_partial,
        suggest=source.suggest,
    )


def _with_knn(source: _Source) -> Query:
    """The search's query with its top-level `knn` searches, as Elasticsearch combines them: a
    disjunction whose score is the sum of the query's and each kNN's scores."""
    size = _DEFAULT_SIZE if source.size <= 0 else source.size
    knns = [parse_knn(body, default_k=size, top_level=True) for body in source.knn]
    query = source.query
    if not knns:
        return query if query is not None else parse_query(None)
    clauses = (*([] if query is None else [query]), *knns)
    return clauses[0] if len(clauses) == 1 else Bool(should=clauses)


def _effective_sort(
    sort: list[SortSpec], pit: PitSpec | None, search_after: list[Any] | None
) -> list[SortSpec]:
    """The sort a shard executes, as Elasticsearch rewrites it.

    A PIT search with a sort gains an ascending `_shard_doc` tiebreaker unless it already ends with
    one, or unless `search_after` carries exactly as many values as the given sort (a cursor from
    before the tiebreaker existed). A sort of `_score` descending alone is the default relevance
    order: no sort, hence no `sort` values in hits.
    """
    ends_with_tiebreaker = bool(sort) and sort[-1].field == SHARD_DOC
    cursor_fits = search_after is None or len(search_after) == len(sort) + 1
    if pit is not None and sort and not ends_with_tiebreaker and cursor_fits:
        sort = [*sort, SortSpec(SHARD_DOC, "asc")]
    if len(sort) == 1 and sort[0].field == SCORE and sort[0].descending:
        return []
    return sort


def _source_filter(source: _Source) -> SourceFilter:
    """The `_source` to return: with `stored_fields` and no `_source` option, none unless listed;
    with `script_fields` and no `_source` option, none (as Elasticsearch's fetch phase)."""
    stored = source.stored_fields
    if source.source is None:
        if source.script_fields:
            return SourceFilter(fetch=stored is not None and "_source" in stored)
        return SourceFilter(fetch=stored is None or "_source" in stored)
    if stored is not None and "_source" in stored:
        return SourceFilter(True, source.source.includes, source.source.excludes)
    return source.source


# ---------------------------------------------------------------------------------------------
# parts of the body


def _unknown_key(key: str, value: Any) -> ParsingError:
    return ParsingError(f"Unknown key for a {token_name(value)} in [{key}].")


def parse_fetch_source(value: Any) -> SourceFilter:
    """A `_source` option in any of its JSON forms (boolean, pattern, patterns, object), as a
    search body and each document of an `_mget` give it."""
    if isinstance(value, dict):
        return _source_object(value)
    if isinstance(value, list):
        return _source_array("_source", value)
    return _source_scalar(value)


def _source_scalar(value: Any) -> SourceFilter:
    if isinstance(value, bool):
        return SourceFilter(fetch=value)
    if isinstance(value, str):
        return SourceFilter(includes=(value,))
    expected = "VALUE_BOOLEAN, VALUE_STRING, START_ARRAY, START_OBJECT"
    raise ParsingError(f"Expected one of [{expected}] but found [{token_name(value)}]")


def _source_array(key: str, value: list[Any]) -> SourceFilter:
    return SourceFilter(includes=_patterns(key, value))


def _patterns(key: str, value: list[Any]) -> tuple[str, ...]:
    for item in value:
        if not isinstance(item, str):
            raise _unknown_key(key, item)
    return tuple(dict.fromkeys(value))


def _source_object(value: dict[str, Any]) -> SourceFilter:
    """`FetchSourceContext.fromXContent` for an object: `includes`/`excludes` (string or array)
    and `exclude_vectors` (a boolean, as elasticsearch-dsl 9 always sends it). The flag is
    validated and has no effect: `dense_vector` values stay in `_source` as sent, as in
    Elasticsearch 8 (docs/differences.md)."""
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    for key, option in value.items():
        if key == "exclude_vectors" and isinstance(option, (bool, str)):
            _check_exclude_vectors(option)
            continue
        if key not in ("includes", "include", "excludes", "exclude"):
            raise _unknown_key(key, option)
        if isinstance(option, str):
            patterns: tuple[str, ...] = (option,)
        elif isinstance(option, list):
            patterns = _patterns(key, option)
        else:
            raise _unknown_key(key, option)
        if key.startswith("include"):
            includes = patterns
        else:
            excludes = patterns
    return SourceFilter(includes=includes, excludes=excludes)


def _check_exclude_vectors(value: bool | str) -> None:
    """A JSON boolean, or the strings `true` / `false` (Jackson's `booleanValue` of a string)."""
    if isinstance(value, str) and value not in ("true", "false"):
        raise IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")


def url_source_filter(params: dict[str, str]) -> SourceFilter | None:
    """`FetchSourceContext.parseFromRestRequest`: the `_source`, `_source_includes` and
    `_source_excludes` parameters (of a search, where they replace the body's `_source`, or of a
    get); None when none is given."""
    fetch: bool | None = None
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    raw = params.get("_source")
    if raw is not None:
        if raw in ("true", "false"):
            fetch = raw == "true"
        else:
            includes = _comma_list(raw)
    if params.get("_source_includes") is not None:
        includes = _comma_list(params["_source_includes"])
    if params.get("_source_excludes") is not None:
        excludes = _comma_list(params["_source_excludes"])
    if params.get("_source_exclude_vectors") is not None:
        _param_bool(params, "_source_exclude_vectors", None)
    if raw is None and "_source_includes" not in params and "_source_excludes" not in params:
        return None
    return SourceFilter(fetch=True if fetch is None else fetch, includes=includes, excludes=excludes)


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(p for p in text.split(",") if p)


def _stored_fields_token(value: Any) -> ParsingError:
    return ParsingError(
        f"Expected [VALUE_STRING] or [START_ARRAY] in [stored_fields] but found [{token_name(value)}]"
    )


def _stored_fields(names: list[Any]) -> list[str]:
    """`StoredFieldsContext.fromList`: `_none_` alone disables stored fields (and `_source`)."""
    fields = []
    for name in names:
        if isinstance(name, dict | list):
            raise _stored_fields_token(name)
        fields.append("null" if name is None else scalar_text(name))
    if fields == [_NONE_FIELDS]:
        return fields
    if _NONE_FIELDS in fields:
        raise IllegalArgument("cannot combine _none_ with other fields")
    return fields


def _field_and_format(value: Any, *, with_unmapped: bool) -> dict[str, Any]:
    """One entry of `fields` / `docvalue_fields`: a name, or `{"field", "format", ...}`."""
    name = "fetch_field_and_format"
    if value is not None and not isinstance(value, dict | list):
        return {"field": scalar_text(value)}
    if not isinstance(value, dict):
        raise XContentParseError(f"[{name}] Expected START_OBJECT but was: {token_name(value)}")
    spec: dict[str, Any] = {}
    for key, option in value.items():
        if key == "field":
            if not isinstance(option, str):
                raise unsupported_token(name, "field", option)
            spec["field"] = option
        elif key == "format":
            if option is not None and not isinstance(option, str):
                raise unsupported_token(name, "format", option)
            spec["format"] = option
        elif key == "include_unmapped":
            if not isinstance(option, bool | str):
                raise unsupported_token(name, key, option)
            try:
                spec["include_unmapped"] = _bool_value(option)
            except ElasticError as exc:
                raise field_failed(name, key, exc) from None
        else:
            raise XContentParseError(f"[{name}] unknown field [{key}]")
    if "field" not in spec:
        raise IllegalArgument("Required [field]")
    if not with_unmapped:
        spec.pop("include_unmapped", None)
    return spec


def _index_boost(value: Any) -> tuple[str, float]:
    if not isinstance(value, dict):
        raise ParsingError(f"Expected [START_OBJECT] in [indices_boost] but found [{token_name(value)}]")
    items = list(value.items())
    if not items:
        raise ParsingError("Expected [FIELD_NAME] in [indices_boost] but found [END_OBJECT]")
    index, boost = items[0]
    if isinstance(boost, bool) or not isinstance(boost, int | float):
        raise ParsingError(f"Expected [VALUE_NUMBER] in [indices_boost] but found [{token_name(boost)}]")
    if len(items) > 1:
        raise ParsingError("Expected [END_OBJECT] in [indices_boost] but found [FIELD_NAME]")
    return index, float(boost)


def _search_after(value: list[Any], key: str = "search_after") -> list[Any]:
    """The values of `search_after` (or of leafsearch's `search_before`, parsed the same)."""
    for item in value:
        if isinstance(item, dict | list):
            raise ParsingError(
                "Expected [VALUE_STRING] or [VALUE_NUMBER] or [VALUE_BOOLEAN] or [VALUE_NULL] but found "
                f"[{token_name(item)}] inside {key}."
            )
    if not value:
        raise IllegalArgument("Values must contains at least one value.")
    return list(value)


def _slice(value: dict[str, Any]) -> SliceSpec:
    """`SliceBuilder`'s parser: each setter checks against the options already seen."""
    name = "slice"
    field: str | None = None
    slice_id = slice_max = -1
    for key, option in value.items():
        if key == "field":
            if not isinstance(option, str):
                raise unsupported_token(name, "field", option)
            field = option
        elif key in ("id", "max"):
            if not isinstance(option, int | float | str) or isinstance(option, bool):
                raise unsupported_token(name, key, option)
            try:
                number = _int_value(option)
                if key == "id":
                    if number < 0:
                        raise IllegalArgument("id must be greater than or equal to 0")
                    if slice_max != -1 and number >= slice_max:
                        raise IllegalArgument("max must be greater than id")
                    slice_id = number
                else:
                    if number <= 1:
                        raise IllegalArgument("max must be greater than 1")
                    if slice_id != -1 and slice_id >= number:
                        raise IllegalArgument("max must be greater than id")
                    slice_max = number
            except ElasticError as exc:
                raise field_failed(name, key, exc) from None
        else:
            raise XContentParseError(f"[{name}] unknown field [{key}]")
    if slice_id == -1:
        raise IllegalArgument("id must be greater than or equal to 0")
    if slice_max == -1:
        raise IllegalArgument("max must be greater than 1")
    return SliceSpec(slice_id, slice_max, field)


def _pit(value: dict[str, Any]) -> PitSpec:
    name = "pit"
    pit_id: str | None = None
    keep_alive: str | None = None
    for key, option in value.items():
        if key not in ("id", "keep_alive"):
            raise XContentParseError(f"[{name}] unknown field [{key}]")
        if not isinstance(option, str):
            raise unsupported_token(name, key, option)
        if key == "id":
            pit_id = option
        else:
            try:
                parse_time_value(option, "keep_alive")
            except ElasticError as exc:
                raise field_failed(name, key, exc) from None
            keep_alive = option
    if pit_id is None:
        raise IllegalArgument("point in time id is not provided")
    return PitSpec(pit_id, keep_alive)


# ---------------------------------------------------------------------------------------------
# values as XContentParser reads them (numbers and booleans may come as strings)


def number_format_error(text: str, *, integer: bool = False) -> ElasticError:
    """Java's NumberFormatException, which Elasticsearch reports as `number_format_exception`;
    Double.parseDouble words a blank input differently from Integer.parseInt."""
    reason = "empty String" if not integer and not text.strip() else f'For input string: "{text}"'
    return ElasticError(reason, status=400, error_type="number_format_exception")


def java_double(text: str) -> float:
    """`Double.parseDouble`: surrounding whitespace allowed, an optional d/f suffix, else refused."""
    stripped = text.strip()
    if not _JAVA_DOUBLE.fullmatch(stripped):
        raise number_format_error(text)
    return float(stripped.rstrip("fFdD"))


def _int_value(value: Any) -> int:
    """`intValue()`: strings through Double.parseDouble, fractions truncated, int range enforced."""
    if isinstance(value, bool):
        raise XContentParseError(not_numeric(value))
    if isinstance(value, str):
        number = java_double(value)
        if number != number:  # NaN casts to 0 in Java
            return 0
        if not _INT_MIN <= number <= _INT_MAX:
            raise IllegalArgument(f"Value [{value}] is out of range for an integer")
        return int(number)
    if not _INT_MIN <= value <= _INT_MAX:
        raise XContentParseError(f"Numeric value ({value}) out of range of int ({_INT_MIN} - {_INT_MAX})")
    return int(value)


def _float_value(value: Any) -> float:
    if isinstance(value, bool):
        raise XContentParseError(not_numeric(value))
    if isinstance(value, str):
        return java_double(value)
    return float(value)


def _bool_value(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value in ("true", "false"):
            return value == "true"
        raise IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")
    raise XContentParseError(not_boolean(value))


# -- URL parameters as RestRequest reads them ---------------------------------------------------


def _param_int(params: dict[str, str], key: str) -> int | None:
    """`paramAsInt`: Integer.parseInt or "Failed to parse int parameter ..."."""
    raw = params.get(key)
    if raw is None:
        return None
    if _JAVA_INT.fullmatch(raw) and _INT_MIN <= int(raw) <= _INT_MAX:
        return int(raw)
    failed = IllegalArgument(f"Failed to parse int parameter [{key}] with value [{raw}]")
    raise chain(failed, number_format_error(raw, integer=True))


def _param_float(key: str, raw: str) -> float:
    try:
        return java_double(raw)
    except ElasticError as exc:
        failed = IllegalArgument(f"Failed to parse float parameter [{key}] with value [{raw}]")
        raise chain(failed, exc) from None


def _param_bool(
    params: dict[str, str], key: str, default: bool | None, *, empty_true: bool = False
) -> bool | None:
    """`paramAsBoolean`: the primitive form reads an empty value as true, the boxed form as unset."""
    raw = params.get(key)
    if raw is None:
        return default
    if raw == "":
        return True if empty_true else default
    if raw in ("true", "false"):
        return raw == "true"
    raise IllegalArgument(f"Failed to parse value [{raw}] as only [true] or [false] are allowed.")
