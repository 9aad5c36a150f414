"""The access log: one line per HTTP request (client, method, path and query, status, bytes sent,
milliseconds), written by the `leafsearch.access` logger when `leafsearch serve --access-log` is
given. It wraps the application from outside, so it times everything a request costs the server,
refusals included, and adds nothing to a request when it is off (it is then not installed)."""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ACCESS_LOGGER = logging.getLogger("leafsearch.access")
#: The scope key of a response written by the process that rendered it, not sent through the
#: ASGI `send` (app.py): its status and body length.
WRITTEN = "leafsearch.written"


class AccessLog:
    """ASGI middleware logging each HTTP request once its response is sent (or it failed)."""

    def __init__(self, app: ASGIApp, logger: logging.Logger = ACCESS_LOGGER) -> None:
        self.app = app
        self.logger = logger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        sent = 0

        async def counting_send(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            if WRITTEN in scope:
                status, sent = scope[WRITTEN]
            millis = (time.perf_counter() - started) * 1000
            client = scope.get("client")
            raw = scope.get("raw_path") or scope["path"].encode()
            query = scope.get("query_string", b"")
            target = (raw + b"?" + query if query else raw).decode("latin-1")
            self.logger.info(
                '%s "%s %s HTTP/%s" %d %d %.2fms',
                client[0] if client else "-",
                scope["method"],
                target,
                scope.get("http_version", "1.1"),
                status,
                sent,
                millis,
            )
