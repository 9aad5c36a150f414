"""One HTTP exchange as handlers see it: decoded path and query parameters, the body, the reply.

Query parameters are parsed the way Elasticsearch's `RestRequest` parses them (a bare `?flag` is
true, only `true`/`false` are booleans, numbers are refused with its messages), so every handler
refuses bad input with the same words Elasticsearch uses.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import IllegalArgument, ParseException, ParsingError, XContentParseError
from leafsearch.request.date_math_names import resolve_expression
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.request.params import parse_bool
from leafsearch.request.search_request import parse_indices_options
from leafsearch.request.timevalue import parse_time_value
from leafsearch.search.socket_sink import Lend, Written

# Parameters every endpoint accepts; they shape the response, not the action.
RESPONSE_PARAMS = frozenset({"pretty", "human", "error_trace", "filter_path", "format"})
#: The parameters that stand for the body on the read APIs that take them (search, count, mget,
#: scroll); `rest/access.py` applies them, only with `source_content_type`, as Elasticsearch does.
SOURCE_PARAMS = frozenset({"source", "source_content_type"})
_INTEGER = re.compile(r"[+-]?\d+")


@dataclass
class RestRequest:
    method: str
    path: str
    uri: str
    path_params: dict[str, str]
    params: dict[str, str]
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    #: Set by the HTTP layer when the client disconnects; long handlers (searches) stop on it.
    cancelled: threading.Event = field(default_factory=threading.Event)
    subject: Any = None  # the authenticated caller (security.subject.Subject), None without authentication
    #: Set by the HTTP layer when the response may be written to the client's socket by the
    #: process that renders it (search/socket_sink.py): a PIT page or a scroll batch.
    lend: Lend | None = None

    def param(self, name: str, default: str | None = None) -> str | None:
        return self.params.get(name, default)

    def flag(self, name: str, default: bool = False) -> bool:
        return parse_bool(self.params.get(name), default)

    def int_param(self, name: str, default: int | None = None, *, kind: str = "int") -> int | None:
        raw = self.params.get(name)
        if raw is None:
            return default
        bits = 31 if kind == "int" else 63
        if not _INTEGER.fullmatch(raw) or not -(2**bits) <= int(raw) < 2**bits:
            raise IllegalArgument(f"Failed to parse {kind} parameter [{name}] with value [{raw}]")
        return int(raw)

    def long_param(self, name: str) -> int | None:
        return self.int_param(name, kind="long")

    def time_param(self, name: str, default: float | None = None) -> float | None:
        raw = self.params.get(name)
        return default if raw is None else parse_time_value(raw, name)

    def indices_options(
        self,
        *,
        ignore_unavailable: bool = False,
        allow_no_indices: bool = True,
        expand_wildcards: str = "open",
        forbid_closed: bool = False,
    ) -> IndicesOptions:
        defaults = IndicesOptions(
            ignore_unavailable, allow_no_indices, expand_wildcards, forbid_closed=forbid_closed
        )
        return parse_indices_options(self.params, defaults)

    def action_params(self) -> dict[str, str]:
        """The query parameters that belong to the action (rendering ones removed)."""
        return {k: v for k, v in self.params.items() if k not in RESPONSE_PARAMS}

    def required_body(self) -> bytes:
        if not self.body or self.body.isspace():  # no copy of a large body, as strip() made
            raise ParseException("request body is required")
        return self.body

    def resolve_date_math(self) -> None:
        """Index names written as date math (`<logs-{now/d}>`) are resolved before anything reads
        them, authorization included, as Elasticsearch's index name resolver does."""
        for holder in (self.path_params, self.params):
            expression = holder.get("index")
            if expression is not None and "<" in expression:
                holder["index"] = resolve_expression(expression)

    def json(self) -> Any:
        """The parsed body, or None when there is none."""
        if not self.body.strip():
            return None
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise XContentParseError(_parse_error_reason(self.body, exc)) from None

    def json_object(self) -> dict[str, Any] | None:
        """The body as a JSON object; any other JSON value is refused as Elasticsearch refuses it."""
        body = self.json()
        if body is not None and not isinstance(body, dict):
            raise ParsingError(f"Expected [START_OBJECT] but found [{token_name(body)}]")
        return body


def _parse_error_reason(body: bytes, exc: orjson.JSONDecodeError) -> str:
    """Elasticsearch prefixes parser errors with `[line:column]`."""
    position = min(exc.pos, len(body))
    line = body.count(b"\n", 0, position) + 1
    column = position - (body.rfind(b"\n", 0, position) + 1) + 1
    return f"[{line}:{column}] {exc.msg}"


@dataclass
class RestResponse:
    """What a handler answers: a JSON-able body (dicts may hold RawJSON), text, nothing, or a
    `stream` of bytes sent as they come (chunked: the export)."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    stream: Stream | None = None
    #: The response was written to the socket `RestRequest.lend` lent, by its renderer.
    written: Written | None = None


class Stream(Protocol):
    """A response body sent as it is produced: `chunks(sink)` blocks for each next one (the HTTP
    layer takes it in a worker thread once the socket has room); `sink`, when not None, is a file
    descriptor of the client's plain TCP socket, with nothing pending on it whenever a chunk is
    asked for, to which the stream may write HTTP chunks itself (the HTTP layer closes it and
    sends the final empty chunk). `close()` comes once the response ended, sent whole or cut by
    the client's disconnect, and stops what still runs."""

    media_type: str

    def chunks(self, sink: int | None) -> Iterator[bytes]: ...

    def close(self) -> None: ...
