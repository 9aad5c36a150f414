"""The Elasticsearch API in-process: the official Python client's calls, without HTTP.

`Client` has the method names and keyword arguments of `elasticsearch.Elasticsearch` (`index`,
`get`, `bulk`, `search`, `open_point_in_time`, `indices.create`, ...), takes and returns plain
Python objects (documents as dicts, responses as dicts with `_source` decoded) and raises the same
`ElasticError`s a server answers with (`.status`, `.body()`). Code written against the official
client runs against an embedded node by swapping the object, and what a test checks in-process
is what a client gets over HTTP.

Why through the REST route table and not straight onto `Node`: each call runs the same handler,
parameter checks and request parser as an HTTP request (`Node`'s own methods are the engine's typed
boundary, taking parsed requests), so there is no second implementation of any API to drift
apart. A call costs what rendering its response to JSON and reading it back costs, which is
small beside the work of a search; the request's security checks are skipped (an in-process
caller owns the node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from leafsearch.errors import ElasticError, IllegalArgument
from leafsearch.rest.exchange import RestRequest
from leafsearch.rest.render import to_json
from leafsearch.rest.router import Router
from leafsearch.rest.routes import ROUTES
from leafsearch.rest.unrecognized import check_params

if TYPE_CHECKING:
    from leafsearch.node.node import Node

_ROUTER = Router(ROUTES)


class Client:
    """An embedded node's Elasticsearch API.

    `Client("./data")` opens (and on `close()` closes) a node on that folder; `Client(node=node)`
    uses a node the caller owns. Keyword arguments are the REST API's parameters and body fields,
    named as in the official client (`from_` for `from`); scalars that the endpoint accepts as
    query parameters go in the query string, everything else in the body.
    """

    def __init__(self, path: str | Path | None = None, *, node: Node | None = None, **node_options: Any):
        if (path is None) == (node is None):
            raise TypeError("give either a data folder or a node")
        if node is None:
            from leafsearch.node.node import Node

            node = Node(Path(path), **node_options)  # type: ignore[arg-type]
            self._owned = True
        else:
            self._owned = False
        self.node = node
        self.indices = IndicesClient(self)

    def close(self) -> None:
        """Close the node if this client opened it (flushing it and releasing its folder)."""
        if self._owned:
            self.node.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None):
        self.close()

    # ---- the transport ------------------------------------------------------------------

    def perform_request(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None, body: Any = None
    ) -> Any:
        """Any endpoint: `method` and `path` as over HTTP, `params` the query string (values in
        Python form: booleans, numbers, lists), `body` a JSON value, or bytes sent as they are
        (NDJSON). Returns the decoded response body (None when it has none). An error status
        raises, as the official client raises: an `ElasticError` the handler raised, or
        `ErrorResponse` for a response whose body is not an error (a missing document)."""
        status, answer = self._call(method, path, params or {}, body)
        if status >= 400:
            raise ErrorResponse(status, answer)
        return answer

    def _status(self, method: str, path: str, params: Mapping[str, Any]) -> bool:
        """A HEAD request's answer: whether it found what it names."""
        status, _ = self._call(method, path, params, None)
        return status < 300

    def _call(self, method: str, path: str, params: Mapping[str, Any], body: Any) -> tuple[int, Any]:
        raw_path = path if path.startswith("/") else "/" + path
        candidates = _ROUTER.candidates(raw_path)
        chosen = next(((r, c) for r, c in candidates if method in r.methods), None)
        if chosen is None:
            allowed = sorted({m for r, _ in candidates for m in r.methods})
            if allowed:
                raise ElasticError(
                    f"Incorrect HTTP method for uri [{raw_path}] and method [{method}], "
                    f"allowed: [{', '.join(allowed)}]",
                    status=405,
                    error_type="illegal_argument_exception",
                )
            raise IllegalArgument(f"no handler found for uri [{raw_path}] and method [{method}]")
        route, captured = chosen
        data = body if isinstance(body, bytes) else b"" if body is None else orjson.dumps(body)
        strings = {key: _param_text(value) for key, value in params.items() if value is not None}
        headers = {"content-type": "application/x-ndjson" if isinstance(body, bytes) else "application/json"}
        request = RestRequest(method, raw_path, raw_path, captured, strings, data, headers)
        check_params(route, request)
        request.resolve_date_math()
        self.node.before_request()
        response = route.handler(self.node, request)
        if response.text is not None:
            return response.status, response.text
        if response.body is None:
            return response.status, None
        return response.status, orjson.loads(to_json(response.body))

    def _endpoint(
        self,
        method: str,
        path: str,
        kwargs: dict[str, Any],
        *,
        body: Any = None,
        body_keys: Iterable[str] = (),
    ) -> Any:
        """Call an endpoint that takes a body with `kwargs` as its parameters (when `body` is
        given) or split into query parameters (scalars the route accepts as such, unless listed
        in `body_keys`) and body fields, where the request parser refuses unknown keys."""
        if body is not None:
            return self.perform_request(method, path, params=kwargs, body=body)
        route = _route(method, path)  # body fields and parameters are told apart by its parameters
        params: dict[str, Any] = {}
        fields: dict[str, Any] = {}
        for key, value in kwargs.items():
            name = "from" if key == "from_" else key
            if value is None:
                continue
            if name in route.params and name not in body_keys and _is_param_value(value):
                params[name] = value
            else:
                fields[name] = value
        return self.perform_request(method, path, params=params, body=fields or None)

    # ---- documents ----------------------------------------------------------------------

    def index(self, index: str, document: Mapping[str, Any], *, id: str | None = None, **params: Any) -> Any:
        """Index (create or replace) a document; `id` generated when not given."""
        if id is None:
            return self._endpoint("POST", f"/{_seg(index)}/_doc", params, body=document)
        return self._endpoint("PUT", f"/{_seg(index)}/_doc/{_seg(id)}", params, body=document)

    def create(self, index: str, id: str, document: Mapping[str, Any], **params: Any) -> Any:
        """Index a document only if its id does not exist yet (409 otherwise)."""
        return self._endpoint("PUT", f"/{_seg(index)}/_create/{_seg(id)}", params, body=document)

    def get(self, index: str, id: str, **params: Any) -> Any:
        return self.perform_request("GET", f"/{_seg(index)}/_doc/{_seg(id)}", params=params)

    def exists(self, index: str, id: str, **params: Any) -> bool:
        return self._status("HEAD", f"/{_seg(index)}/_doc/{_seg(id)}", params)

    def delete(self, index: str, id: str, **params: Any) -> Any:
        return self.perform_request("DELETE", f"/{_seg(index)}/_doc/{_seg(id)}", params=params)

    def update(self, index: str, id: str, **kwargs: Any) -> Any:
        """Partial update: `doc`, `upsert`, `doc_as_upsert`, `detect_noop` and the parameters."""
        return self._endpoint("POST", f"/{_seg(index)}/_update/{_seg(id)}", kwargs, body_keys=("_source",))

    def mget(self, *, index: str | None = None, **kwargs: Any) -> Any:
        """`docs` (with `_index`, `_id`, per-document options) or `ids` of one index."""
        return self._endpoint("POST", _path(index, "_mget"), kwargs)

    def bulk(self, operations: Iterable[Any] | bytes, *, index: str | None = None, **params: Any) -> Any:
        """`operations`: action lines and sources as dicts, in order (as the official client
        takes them), or NDJSON bytes."""
        return self._endpoint("POST", _path(index, "_bulk"), params, body=_ndjson(operations))

    # ---- search ------------------------------------------------------------------------

    def search(self, *, index: str | None = None, **kwargs: Any) -> Any:
        """A search: `query`, `sort`, `size`, `from_`, `search_after`, `pit`, `aggs`, `_source`,
        `track_total_hits`, ... as body fields, `scroll`, `routing`, ... as parameters."""
        return self._endpoint("POST", _path(index, "_search"), kwargs, body_keys=_SEARCH_BODY)

    def count(self, *, index: str | None = None, **kwargs: Any) -> Any:
        return self._endpoint("POST", _path(index, "_count"), kwargs)

    def msearch(self, searches: Iterable[Any] | bytes, *, index: str | None = None, **params: Any) -> Any:
        """`searches`: header and body dicts in turn (as the official client takes them)."""
        return self._endpoint("POST", _path(index, "_msearch"), params, body=_ndjson(searches))

    def scroll(self, *, scroll_id: str, scroll: str | None = None, **params: Any) -> Any:
        """The next batch of a scroll opened by `search(scroll=...)`."""
        body = {"scroll_id": scroll_id, **({"scroll": scroll} if scroll is not None else {})}
        return self._endpoint("POST", "/_search/scroll", params, body=body)

    def clear_scroll(self, *, scroll_id: str | list[str] = "_all") -> Any:
        return self.perform_request("DELETE", "/_search/scroll", body={"scroll_id": scroll_id})

    def open_point_in_time(self, *, index: str, keep_alive: str, **params: Any) -> Any:
        return self.perform_request(
            "POST", f"/{_seg(index)}/_pit", params={"keep_alive": keep_alive, **params}
        )

    def close_point_in_time(self, *, id: str) -> Any:
        return self.perform_request("DELETE", "/_pit", body={"id": id})

    def info(self) -> Any:
        return self.perform_request("GET", "/")


class ErrorResponse(ElasticError):
    """An error status whose body is the API's own (a missing document's `found: false`, a
    clear-scroll that freed nothing), raised as the official client raises `NotFoundError`;
    `body()` is that response body."""

    def __init__(self, status: int, response: Any) -> None:
        super().__init__(f"the request answered [{status}]", status=status, error_type="status_exception")
        self.response = response

    def body(self) -> Any:
        return self.response


class IndicesClient:
    """`client.indices`: index administration."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, *, index: str, **kwargs: Any) -> Any:
        """`mappings`, `settings`, `aliases` as body fields."""
        return self._client._endpoint("PUT", f"/{_seg(index)}", kwargs)

    def delete(self, *, index: str, **params: Any) -> Any:
        return self._client.perform_request("DELETE", f"/{_seg(index)}", params=params)

    def exists(self, *, index: str, **params: Any) -> bool:
        return self._client._status("HEAD", f"/{_seg(index)}", params)

    def get(self, *, index: str, **params: Any) -> Any:
        return self._client.perform_request("GET", f"/{_seg(index)}", params=params)

    def refresh(self, *, index: str | None = None, **params: Any) -> Any:
        return self._client.perform_request("POST", _path(index, "_refresh"), params=params)

    def get_mapping(self, *, index: str | None = None, **params: Any) -> Any:
        return self._client.perform_request("GET", _path(index, "_mapping"), params=params)

    def put_mapping(self, *, index: str, **kwargs: Any) -> Any:
        """`properties`, `dynamic`, ... as body fields."""
        return self._client._endpoint("PUT", f"/{_seg(index)}/_mapping", kwargs)

    def get_settings(self, *, index: str | None = None, **params: Any) -> Any:
        return self._client.perform_request("GET", _path(index, "_settings"), params=params)

    def put_settings(self, *, settings: Mapping[str, Any], index: str | None = None, **params: Any) -> Any:
        return self._client._endpoint("PUT", _path(index, "_settings"), params, body=dict(settings))


#: Search body fields that are also query parameters with another meaning or form (`sort` as
#: `field:order` text, `_source` as field lists, ...): given as keyword arguments they go in the
#: body, as the official client sends them.
_SEARCH_BODY = ("sort", "_source", "stored_fields", "docvalue_fields", "timeout", "track_total_hits")


def _route(method: str, path: str) -> Any:
    for route, _ in _ROUTER.candidates(path):
        if method in route.methods:
            return route
    raise IllegalArgument(f"no handler found for uri [{path}] and method [{method}]")


def _seg(name: str) -> str:
    """A path segment: index names and ids may hold any character."""
    return quote(str(name), safe="")


def _path(index: str | None, endpoint: str) -> str:
    return f"/{_seg(index)}/{endpoint}" if index else f"/{endpoint}"


def _is_param_value(value: Any) -> bool:
    if isinstance(value, (str, int, float, bool)):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _param_text(value: Any) -> str:
    """A query-string value as the official client writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _ndjson(items: Iterable[Any] | bytes) -> bytes:
    if isinstance(items, bytes):
        return items
    return b"".join(orjson.dumps(item) + b"\n" for item in items)
