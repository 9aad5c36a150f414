"""A minimal keep-alive HTTP client for timing single requests.

`http.client` adds far less overhead per request than httpx or the official client, so a page that
the server answers in 1 ms is not reported as 3 ms. Errors carry Elasticsearch's error type and
reason so that a workload can say why the server refused.
"""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlsplit

import orjson


class HttpError(Exception):
    """The server answered with an error status. Picklable, so worker processes can report it."""

    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        super().__init__(method, path, status, body)
        self.status = status
        self.type: str | None = None  # Elasticsearch's error type, when the body has one
        self.root_cause: str | None = None  # and the type of its first root cause
        self.reason: str | None = None
        try:
            error = orjson.loads(body).get("error")
        except (orjson.JSONDecodeError, AttributeError):
            error = None
        if isinstance(error, dict):
            self.type = error.get("type")
            self.reason = error.get("reason")
            causes = error.get("root_cause")
            if isinstance(causes, list) and causes and isinstance(causes[0], dict):
                self.root_cause = causes[0].get("type")
                self.reason = causes[0].get("reason", self.reason)
            detail = f"{error.get('type')}: {error.get('reason')}"
        else:
            detail = body[:200].decode(errors="replace") or "(empty body)"
        self.message = f"{method} {path.split('?')[0]} -> HTTP {status} {detail}"

    def __str__(self) -> str:
        return self.message


class Client:
    """One persistent connection to the server; not thread-safe (use one per process)."""

    def __init__(self, url: str, timeout: float = 120.0) -> None:
        parts = urlsplit(url)
        self._conn = http.client.HTTPConnection(
            parts.hostname or "localhost", parts.port or 9200, timeout=timeout
        )

    def raw(
        self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"
    ) -> bytes:
        """Send one request and return the response body; raise HttpError on status >= 400."""
        headers = {"Content-Type": content_type} if body is not None else {}
        reused = self._conn.sock is not None
        try:
            self._conn.request(method, path, body=body, headers=headers)
            response = self._conn.getresponse()
            data = response.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self._conn.close()
            if not reused:
                raise
            # The server closed the idle keep-alive connection before reading the request (uvicorn
            # does after 5 s): the request was not processed, so sending it again is safe.
            return self.raw(method, path, body, content_type)
        except (OSError, http.client.HTTPException):
            self._conn.close()  # the next request reconnects, e.g. after a server restart
            raise
        if response.status >= 400:
            raise HttpError(method, path, response.status, data)
        return data

    def json(self, method: str, path: str, body: Any = None) -> Any:
        return orjson.loads(self.raw(method, path, None if body is None else orjson.dumps(body)))

    def close(self) -> None:
        self._conn.close()
