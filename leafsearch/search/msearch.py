"""`_msearch`: NDJSON header/body pairs, each run as its own search through the coordinator.

As in Elasticsearch, the whole request is read first: a header key it does not know, a line that
is not JSON, a search body that does not parse or a PIT search that names indices, routing or
preference fails the whole request (400). What happens
when a search runs (a missing index, a validation failure, a refused index) is that item's error,
in its place in `responses` with its status, and the other searches are answered.

Searches run on a shared pool of worker threads, at most `max_concurrent_searches` of one
request at a time; each runs in a copy of the caller's context, so a PIT search inside still
knows who opened its PIT.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import (
    ActionRequestValidation,
    ElasticError,
    IllegalArgument,
    ParseException,
    SearchPhaseExecution,
    XContentParseError,
)
from leafsearch.request.date_math_names import resolve_expression
from leafsearch.request.search_request import PointInTimeMisuse, parse_search_request
from leafsearch.request.search_types import SearchRequest
from leafsearch.search import coordinator

if TYPE_CHECKING:
    from leafsearch.search.services import CoordinatorServices

#: Query parameters of `_msearch` that are defaults of every search in it (a header may override
#: the ones it also names).
ITEM_DEFAULT_PARAMS = (
    "search_type",
    "routing",
    "ccs_minimize_roundtrips",
    "expand_wildcards",
    "ignore_unavailable",
    "allow_no_indices",
    "ignore_throttled",
    "typed_keys",
    "rest_total_hits_as_int",
    "max_concurrent_shard_requests",
    "pre_filter_shard_size",
    "include_named_queries_score",
)
#: Header keys (and their camelCase spellings) and the search parameter each one sets.
_HEADER_PARAMS = {
    "search_type": "search_type",
    "searchType": "search_type",
    "ccs_minimize_roundtrips": "ccs_minimize_roundtrips",
    "ccsMinimizeRoundtrips": "ccs_minimize_roundtrips",
    "request_cache": "request_cache",
    "requestCache": "request_cache",
    "preference": "preference",
    "routing": "routing",
    "allow_partial_search_results": "allow_partial_search_results",
    "expand_wildcards": "expand_wildcards",
    "expandWildcards": "expand_wildcards",
    "ignore_unavailable": "ignore_unavailable",
    "ignoreUnavailable": "ignore_unavailable",
    "allow_no_indices": "allow_no_indices",
    "allowNoIndices": "allow_no_indices",
    "ignore_throttled": "ignore_throttled",
    "ignoreThrottled": "ignore_throttled",
}
_BOOLEAN_PARAMS = frozenset(
    {
        "ccs_minimize_roundtrips",
        "request_cache",
        "allow_partial_search_results",
        "ignore_unavailable",
        "allow_no_indices",
        "ignore_throttled",
    }
)
#: Elasticsearch's default: one data node times min(search pool size, 10).
DEFAULT_MAX_CONCURRENT = max(1, min((os.cpu_count() or 1) * 3 // 2 + 1, 10))

#: (index expression, item params, body) -> the expression to search instead, or None to keep it;
#: raises for an item the caller may not run.
Authorize = Callable[[str | None, dict[str, str], dict[str, Any] | None], str | None]


@dataclass(slots=True)
class SearchItem:
    """One search of the request: its indices, parameters, body, and the parsed request or the
    error it failed with."""

    index: str | None
    params: dict[str, str]
    body: dict[str, Any] | None
    request: SearchRequest | None = None
    error: ElasticError | None = None


def parse_msearch(data: bytes, default_index: str | None, params: dict[str, str]) -> list[SearchItem]:
    """The searches of an `_msearch` body, every body parsed (and validated) once up front."""
    if not data:
        raise ParseException("request body or source parameter is required")
    if not data.endswith(b"\n"):
        raise IllegalArgument("The msearch request must be terminated by a newline [\n]")
    lines = data[:-1].split(b"\n")
    defaults = {k: params[k] for k in ITEM_DEFAULT_PARAMS if k in params}
    items = []
    line_no = 0
    for header_line, body_line in zip(lines[0::2], lines[1::2], strict=False):
        line_no += 2
        index, item_params = _header(header_line, default_index, defaults, line_no - 1)
        body = _json_line(body_line, line_no)
        item = SearchItem(index, item_params, body)
        try:
            item.request = parse_search_request(body, item_params, indices=index)
        except PointInTimeMisuse:
            raise  # read with the request, as RestMultiSearchAction reads it: the whole request fails
        except (ActionRequestValidation, SearchPhaseExecution) as exc:
            item.error = exc  # a search's own failure, answered in its place
        items.append(item)
    if not items:
        raise ActionRequestValidation("no requests added")
    return items


def _json_line(line: bytes, line_no: int) -> Any:
    if not line.strip():
        return None
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise XContentParseError(f"[{line_no}:{exc.colno}] {exc.msg}") from None


def _header(
    line: bytes, default_index: str | None, defaults: dict[str, str], line_no: int
) -> tuple[str | None, dict[str, str]]:
    """`MultiSearchRequest.readMultiLineFormat`'s header: the indices and the search parameters."""
    index = default_index
    params = dict(defaults)
    header = _json_line(line, line_no)
    if header is None:
        return index, params
    if not isinstance(header, dict):
        raise XContentParseError(f"[{line_no}:1] Expected [START_OBJECT] but found [{token_name(header)}]")
    for key, value in header.items():
        if key in ("index", "indices"):
            if value is None:
                continue
            names = value if isinstance(value, list) else _text(value).split(",")
            index = resolve_expression(",".join(_text(v) for v in names if _text(v)))
        elif key in _HEADER_PARAMS:
            name = _HEADER_PARAMS[key]
            if value is None:
                params.pop(name, None)
            elif name in _BOOLEAN_PARAMS:
                params[name] = _boolean(value, key)
            else:
                params[name] = ",".join(map(_text, value)) if isinstance(value, list) else _text(value)
        else:
            raise IllegalArgument(f"key [{key}] is not supported in the metadata section")
    return index, params


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _boolean(value: Any, key: str) -> str:
    """`XContentMapValues.nodeBooleanValue(value, key)`: a boolean or the strings true/false."""
    text = _text(value)
    if text not in ("true", "false"):
        raise IllegalArgument(f"Could not convert [{key}] to boolean")
    return text


def msearch(
    services: CoordinatorServices,
    items: list[SearchItem],
    *,
    max_concurrent: int | None = None,
    authorize: Authorize | None = None,
    raw_hits: bool = False,
    cancelled: threading.Event | None = None,
) -> dict[str, Any]:
    """Run every search, at most `max_concurrent` at once; `responses` in the request's order."""
    started = time.perf_counter()
    if max_concurrent is not None and max_concurrent < 1:
        raise IllegalArgument("maxConcurrentSearchRequests must be positive")
    limit = min(max_concurrent or DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_CONCURRENT, len(items))

    def run(item: SearchItem) -> dict[str, Any]:
        return _run_one(services, item, authorize, raw_hits, cancelled)

    if limit == 1:
        responses = [run(item) for item in items]
    else:
        pool = services.msearch_pool
        futures: list[Future[dict[str, Any]]] = []
        for position, item in enumerate(items):
            if position >= limit:
                futures[position - limit].result()  # a window of `limit` searches in flight
            futures.append(pool.submit(contextvars.copy_context().run, run, item))
        responses = [future.result() for future in futures]
    return {"took": int((time.perf_counter() - started) * 1000), "responses": responses}


def _run_one(
    services: CoordinatorServices,
    item: SearchItem,
    authorize: Authorize | None,
    raw_hits: bool,
    cancelled: threading.Event | None,
) -> dict[str, Any]:
    try:
        if item.error is not None:
            raise item.error
        assert item.request is not None
        request = item.request
        if authorize is not None:
            narrowed = authorize(item.index, item.params, item.body)
            if narrowed is not None:
                request = replace(request, indices=narrowed)
        response = coordinator.search(services, request, raw_hits=raw_hits, cancelled=cancelled)
    except ElasticError as exc:
        return {"error": exc.body()["error"], "status": exc.status}
    response["status"] = 200
    return response
