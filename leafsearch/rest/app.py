"""The HTTP front: one ASGI endpoint that does what Elasticsearch's RestController does.

Order of checks, as in Elasticsearch: body size (413) while reading, then routing (400 "no
handler found" / 405 with `Allow`; 400 "not supported by leafsearch" for an Elasticsearch API
leafsearch lacks), then media types (406), then query parameters (400 unrecognized), then the
handler, which runs in a worker thread because the engine is synchronous. The answer is rendered
in the format asked (`format`, `Accept`: JSON or YAML; `pretty`, `human`, `filter_path`,
`error_trace`). Every response carries `X-Elastic-Product: Elasticsearch`, which the official
clients require.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import zlib
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route as StarletteRoute

from leafsearch import console
from leafsearch.errors import ContentTooLong, ElasticError, ParseException, release_frames
from leafsearch.request.params import parse_bool
from leafsearch.rest.access import AccessControl, Refusal, is_loopback_host
from leafsearch.rest.access_log import WRITTEN
from leafsearch.rest.connections import CYCLE, TRANSPORT, SocketLoan, drained, plain_socket
from leafsearch.rest.error_trace import with_stack_trace
from leafsearch.rest.exchange import RestRequest, RestResponse, Stream
from leafsearch.rest.human import with_human_fields
from leafsearch.rest.media import JSON, NotAcceptable, negotiate, response_format
from leafsearch.rest.render import YAML, filter_path, render, to_json
from leafsearch.rest.router import Route, Router, split_raw_path
from leafsearch.rest.routes import CONTINUED_BY_BODY, LENDS_SOCKET, ROUTES
from leafsearch.rest.unrecognized import check_params
from leafsearch.search.socket_sink import ResponseCut, Written
from leafsearch.services.memory import Trimmer
from leafsearch.unsupported import endpoint, endpoint_error

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from leafsearch.node.node import Node

log = logging.getLogger("leafsearch.rest")

DEFAULT_MAX_CONTENT_LENGTH = 100 * 1024 * 1024
TEXT = "text/plain; charset=UTF-8"
_PRODUCT = (b"x-elastic-product", b"Elasticsearch")


class _TooLarge(Exception):
    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length


class _Disconnected(Exception):
    pass


class _BadEncoding(Exception):
    pass


class Dispatcher:
    """The ASGI application behind every path."""

    def __init__(self, node: Node, max_content_length: int, access: AccessControl) -> None:
        self.node = node
        self.router = Router(ROUTES)
        self.max_content_length = max_content_length
        self.trimmer = Trimmer()
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method: str = scope["method"]
        raw_path = scope.get("raw_path")
        raw = raw_path.decode("latin-1") if raw_path else quote(scope["path"])
        query = scope.get("query_string", b"").decode("latin-1")
        uri = f"{raw}?{query}" if query else raw
        headers = _headers(scope)
        params = dict(parse_qsl(query, keep_blank_values=True))
        pretty = _is_pretty(params)
        try:  # foreign Host and Origin are refused before the body is read (rest/access.py)
            cors = self.access.screen(method, headers, scope.get("scheme", "http"))
        except Refusal as refusal:
            payload = b"" if refusal.error.status == 200 else to_json(refusal.error.body(), pretty=pretty)
            await _send(send, refusal.error.status, payload, JSON, method, refusal.headers)
            return
        if cors:
            send = _with_headers(send, cors)
        if raw == console.PREFIX or raw.startswith(console.PREFIX + "/"):
            await _send_console(send, method, raw)
            return
        try:
            media = response_format(params.get("format"), headers.get("accept")) or JSON
        except NotAcceptable as exc:
            await _send(
                send, 406, to_json({"error": exc.message, "status": 406}, pretty=pretty), JSON, method
            )
            return
        try:
            body = await self._read_body(receive, headers)
        except _TooLarge as exc:
            error = ContentTooLong(
                f"entity content is too long [{exc.length}] for the configured buffer limit "
                f"[{self.max_content_length}]"
            )
            await _send(send, error.status, render(error.body(), media, pretty=pretty), media, method)
            return
        except _Disconnected:
            return
        except _BadEncoding as exc:
            error = ParseException(f"failed to decompress the request body: {exc}")
            await _send(send, error.status, render(error.body(), media, pretty=pretty), media, method)
            return

        candidates = self.router.candidates(raw)
        allowed = sorted({m for route, _ in candidates for m in route.methods})
        if method == "OPTIONS":
            await _send(send, 200, b"", TEXT, method, {"allow": ",".join(allowed)} if allowed else None)
            return
        chosen = next(((route, captured) for route, captured in candidates if method in route.methods), None)
        listed = endpoint(method, split_raw_path(raw))
        ours = max((len(route.literals) for route, _ in candidates), default=-1)
        # An Elasticsearch API leafsearch lacks says so, unless a route of ours names the path as
        # precisely (`GET /_snapshot` is not an index named `_snapshot`; `POST /_cluster/settings`
        # is a 405).
        if listed is not None and (listed.literals > ours or listed.by_method and chosen is None):
            error = endpoint_error(method, raw, listed.feature)
            await _send(send, error.status, render(error.body(), media, pretty=pretty), media, method)
            return
        if chosen is None:
            if allowed:
                message = (
                    f"Incorrect HTTP method for uri [{uri}] and method [{method}], "
                    f"allowed: [{', '.join(allowed)}]"
                )
                await _send(
                    send,
                    405,
                    render({"error": message, "status": 405}, media, pretty=pretty),
                    media,
                    method,
                    {"allow": ",".join(allowed)},
                )
            else:
                message = f"no handler found for uri [{uri}] and method [{method}]"
                await _send(send, 400, render({"error": message}, media, pretty=pretty), media, method)
            return
        route, captured = chosen

        try:
            content_type = negotiate(headers.get("content-type"), headers.get("accept"), bool(body))
        except NotAcceptable as exc:
            await _send(
                send, 406, render({"error": exc.message, "status": 406}, media, pretty=pretty), media, method
            )
            return
        except ElasticError as exc:
            await _send(send, exc.status, render(exc.body(), media, pretty=pretty), media, method)
            return
        if media == YAML:
            content_type = YAML

        request = RestRequest(method, scope["path"], uri, captured, params, body, headers)
        loan = None
        lends = route.handler in LENDS_SOCKET
        if lends and method != "HEAD" and media != YAML and not pretty and not _rewrites(params):
            # A page a search worker renders may be written to the socket by it (socket_sink.py).
            # A PIT page's connection may stay with the worker for the walk's next pages (not one
            # with aggregations or a profile: such pages are not read ahead, and so never kept),
            # and a scroll's asked by its body's id, for its next batches.
            park = (b'"pit"' in body and not any(key in body for key in _NOT_KEPT)) or (
                route.handler in CONTINUED_BY_BODY and b'"scroll_id"' in body
            )
            loan = await SocketLoan.of(scope, content_type, cors, park=park)
            request.lend = None if loan is None else loan.lend
        # The client may go away while the handler runs: that sets the request's `cancelled`, which
        # a search checks between segments (Elasticsearch cancels the task of a closed channel).
        # (A connection lent with a park offer is not read meanwhile: only its close is seen.)
        if loan is not None and loan.offer is not None:
            watcher = asyncio.ensure_future(_watch_closed(scope[CYCLE], request.cancelled))
        else:
            watcher = asyncio.ensure_future(_watch_disconnect(receive, request.cancelled))
        try:
            status, payload, media, extra = await run_in_threadpool(
                self._respond, route, request, content_type, pretty
            )
            if loan is not None:
                ended, loan = loan, None
                if payload is None or isinstance(payload, Written):
                    ended.end(payload)
                    scope[WRITTEN] = (status, 0 if payload is None else payload.length)
                    return
                ended.release()
            if not isinstance(payload, bytes):
                transport = scope.get(TRANSPORT)
                await _send_stream(send, status, payload, method, extra, request.cancelled, transport)
                return
        finally:
            watcher.cancel()
            if loan is not None:
                loan.release()
        await _send(send, status, payload, media, method, extra)

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> bytes:
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_content_length:
            raise _TooLarge(int(declared))
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_content_length:
                raise _TooLarge(size)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if body and headers.get("content-encoding", "").lower() in ("gzip", "x-gzip", "deflate"):
            body = self._inflate(body)
        return body

    def _inflate(self, body: bytes) -> bytes:
        """Clients with `http_compress` send gzip bodies; the size limit applies to the inflated bytes.

        A gzip stream may hold several members one after the other (RFC 1952, what `cat a.gz b.gz`
        makes): every member is inflated, and the limit counts all of them together, so a body is
        never silently cut to its first member."""
        parts: list[bytes] = []
        size = 0
        rest = body
        while rest:
            inflater = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, detected
            try:
                inflated = inflater.decompress(rest, self.max_content_length + 1 - size)
            except zlib.error as exc:
                raise _BadEncoding(str(exc)) from None
            size += len(inflated)
            if size > self.max_content_length or inflater.unconsumed_tail:
                raise _TooLarge(size + len(inflater.unconsumed_tail))
            if not inflater.eof:
                raise _BadEncoding("unexpected end of compressed data")
            parts.append(inflated)
            rest = inflater.unused_data
        return b"".join(parts)

    def _respond(
        self, route: Route, request: RestRequest, content_type: str, pretty: bool
    ) -> tuple[int, bytes | Stream | Written | None, str, dict[str, str]]:
        """Run the handler (in a worker thread) and render its answer or its refusal; then give
        back the memory a heavy request freed (leafsearch/services/memory.py), unless a search
        worker rendered and wrote the response (this process held only the request: the check's
        read of /proc was about 4% of its CPU for a PIT page, py-spy --gil)."""
        answer = None
        try:
            answer = self._answer(route, request, content_type, pretty)
            return answer
        finally:
            if answer is None or not isinstance(answer[1], Written):
                self.trimmer.after_request()

    def _answer(
        self, route: Route, request: RestRequest, content_type: str, pretty: bool
    ) -> tuple[int, bytes | Stream | Written | None, str, dict[str, str]]:
        """The rendered answer; a response its renderer wrote to the socket (`request.lend`)
        answers what was `Written`, or None when the process writing it died (the connection is
        then closed: what reached the client is unknown)."""
        try:
            check_params(route, request)
            request.resolve_date_math()
            self.node.before_request()
            self.access.admit(route, request)
            parse_bool(request.params.get("error_trace"), False)
            human = parse_bool(request.params.get("human"), False)
            response: RestResponse = route.handler(self.node, request)
            if response.stream is not None:
                return response.status, response.stream, response.stream.media_type, response.headers
            if response.written is not None:
                return response.status, response.written, content_type, response.headers
            if response.text is not None:
                return response.status, response.text.encode(), TEXT, response.headers
            if response.body is None:
                return response.status, b"", content_type, response.headers
            body: Any = with_human_fields(response.body) if human else response.body
            expression = request.params.get("filter_path")
            if expression:
                body = filter_path(body, expression)
            return response.status, render(body, content_type, pretty=pretty), content_type, response.headers
        except ElasticError as exc:
            try:
                body = (
                    with_stack_trace(exc, request)
                    if request.params.get("error_trace") in ("", "true")
                    else exc.body()
                )
                return (
                    exc.status,
                    render(body, content_type, pretty=pretty),
                    content_type,
                    getattr(exc, "headers", {}),
                )
            finally:
                release_frames(exc)  # answered: nothing of the request may stay in a cycle
        except ResponseCut:
            return 200, None, content_type, {}
        except Exception as exc:  # a bug: answer like Elasticsearch's 500 and keep serving
            try:
                body = self.access.internal_error(exc, request)
                return 500, render(body, content_type, pretty=pretty), content_type, {}
            finally:
                release_frames(exc)


async def _watch_disconnect(receive: Receive, cancelled: threading.Event) -> None:
    """Once the body is read, the next ASGI message is the client's disconnect."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            cancelled.set()
            return


#: Body keys of PIT searches whose connection is never kept by a worker (search/workers/parking.py).
_NOT_KEPT = (b'"aggs"', b'"aggregations"', b'"profile"')


async def _watch_closed(cycle: Any, cancelled: threading.Event) -> None:
    """The connection closed, seen without reading it (uvicorn's `receive` would resume reading)."""
    while not cycle.disconnected:
        await cycle.message_event.wait()
        cycle.message_event.clear()
    cancelled.set()


def _headers(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]},{text}" if key in headers else text
    return headers


def _rewrites(params: dict[str, str]) -> bool:
    """Whether the body is rewritten after the handler (`filter_path`, `human`): such a response
    is rendered by the server process, never written by a search worker."""
    return bool(params.get("filter_path")) or "human" in params


def _is_pretty(params: dict[str, str]) -> bool:
    value = params.get("pretty")
    return value is not None and value != "false"


async def _send(
    send: Send, status: int, payload: bytes, media: str, method: str, extra: dict[str, str] | None = None
) -> None:
    if method == "HEAD":
        payload = b""
    headers = [
        (b"content-type", media.encode()),
        (b"content-length", str(len(payload)).encode()),
        _PRODUCT,
    ]
    headers.extend((k.encode(), v.encode()) for k, v in (extra or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def _send_console(send: Send, method: str, raw: str) -> None:
    """A file of the console (leafsearch/console/), before any route: it holds no data, so it
    needs no credentials (the page asks for them); `/_ui` goes to `/_ui/`, the page."""
    if method not in ("GET", "HEAD"):
        message = f"Incorrect HTTP method for uri [{raw}] and method [{method}], allowed: [GET, HEAD]"
        body = to_json({"error": message, "status": 405})
        await _send(send, 405, body, JSON, method, {"allow": "GET,HEAD"})
        return
    if raw == console.PREFIX:
        await _send(send, 301, b"", TEXT, method, {"location": console.PREFIX + "/"})
        return
    asset = console.asset(raw)
    if asset is None:
        missing = {"error": f"no file [{raw}] in the console", "status": 404}
        await _send(send, 404, to_json(missing), JSON, method)
        return
    await _send(send, 200, asset.body, asset.media, method, console.HEADERS)


async def _send_stream(
    send: Send,
    status: int,
    stream: Stream,
    method: str,
    extra: dict[str, str],
    cancelled: threading.Event,
    transport: Any,
) -> None:
    """A body sent chunk by chunk as the handler's stream produces it (chunked transfer: no
    length). Each chunk is taken in a worker thread only once `send` returned, which waits while
    the socket's buffer is full, so a slow client holds its producer back; a client that goes
    away (`cancelled`) ends the stream, and `close()` stops its work either way.

    Over plain TCP the stream is also given a duplicate of the connection's socket, with nothing
    pending on it before each chunk is asked for: it may write the rest of the body to it itself
    (its chunks framed as HTTP's; the final empty chunk is sent here)."""
    headers = [(b"content-type", stream.media_type.encode()), _PRODUCT]
    headers.extend((k.encode(), v.encode()) for k, v in extra.items())
    sink = None
    try:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if method != "HEAD":
            sink = plain_socket(transport)
            chunks = stream.chunks(sink)
            while not cancelled.is_set():
                if sink is not None:
                    await drained(transport)
                chunk = await run_in_threadpool(next, chunks, None)
                if chunk is None:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        stream.close()
        if sink is not None:
            os.close(sink)


def _with_headers(send: Send, extra: dict[str, str]) -> Send:
    """`send`, adding `extra` headers to the response start (the CORS headers of an allowed origin)."""
    encoded = [(k.encode(), v.encode()) for k, v in extra.items()]

    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message["headers"], *encoded]}
        await send(message)

    return sending


def create_app(
    node: Node,
    *,
    max_content_length: int = DEFAULT_MAX_CONTENT_LENGTH,
    bind_host: str = "127.0.0.1",
    node_settings: dict[str, str] | None = None,
) -> Starlette:
    """The Starlette application serving `node`; `max_content_length` is `http.max_content_length`,
    `bind_host` the address listened on (a loopback one makes the Host check apply), and
    `node_settings` the node settings given at start (`http.cors.*`)."""
    access = AccessControl(node, loopback_only=is_loopback_host(bind_host), node_settings=node_settings or {})
    return Starlette(routes=[StarletteRoute("/{path:path}", Dispatcher(node, max_content_length, access))])
