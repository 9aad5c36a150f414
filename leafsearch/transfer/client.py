"""The HTTP side of the transfer commands: a small client of any Elasticsearch-compatible server.

httpx's connection pool is shared by the page and bulk worker threads; bodies are encoded and
decoded with orjson. An error answer becomes a `TransferError` carrying Elasticsearch's error type
and reason, which the command line prints."""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import orjson

NDJSON = "application/x-ndjson"


class TransferError(Exception):
    """A failure the command reports and exits 1 for; `type` is the server's error type if any."""

    def __init__(self, message: str, error_type: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.type = error_type
        self.status = status


class InputError(TransferError):
    """The input file cannot be read as the command needs it (missing, not NDJSON, corrupt)."""


class Client:
    """`url`'s HTTP API with optional basic (`user` as `name:password`) or API key authentication."""

    def __init__(
        self,
        url: str,
        *,
        user: str | None = None,
        api_key: str | None = None,
        verify: bool | str = True,
        connections: int = 8,
        timeout: float = 300.0,
    ) -> None:
        headers = {"accept": "application/json"}
        auth = None
        if user is not None:
            name, _, password = user.partition(":")
            auth = httpx.BasicAuth(name, password)
        if api_key is not None:
            headers["authorization"] = f"ApiKey {api_key}"
        self.url = url.rstrip("/")
        if not self.url.startswith("https:"):  # never used: spares loading the CA bundle (~0.5 s)
            verify = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.http = httpx.Client(
            base_url=self.url,
            auth=auth,
            headers=headers,
            verify=verify,
            timeout=timeout,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    def close(self) -> None:
        self.http.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        ndjson: bytes | None = None,
        allow: tuple[int, ...] = (),
    ) -> tuple[int, Any]:
        """The status and decoded body of one request; a status >= 400 not in `allow` raises."""
        status, content = self.request_bytes(method, path, body, params=params, ndjson=ndjson)
        decoded = decode(content)
        if status >= 400 and status not in allow:
            raise error_of(method, path, status, decoded)
        return status, decoded

    def request_bytes(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        ndjson: bytes | None = None,
    ) -> tuple[int, bytes]:
        """The status and undecoded body of one request (whatever the status)."""
        if ndjson is not None:
            content, content_type = ndjson, NDJSON
        elif body is not None:
            content, content_type = orjson.dumps(body), "application/json"
        else:
            content, content_type = None, None
        headers = {"content-type": content_type} if content_type else None
        try:
            response = self.http.request(method, path, content=content, params=params, headers=headers)
        except httpx.TransportError as exc:
            raise TransferError(f"{method} {self.url}{path}: {exc}") from None
        return response.status_code, response.content


def decode(content: bytes) -> Any:
    """A JSON answer decoded (None when empty; the text of a proxy's error page, say)."""
    if not content:
        return None
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return content[:500].decode(errors="replace")


def error_of(method: str, path: str, status: int, body: Any) -> TransferError:
    """A `TransferError` from an Elasticsearch error body (its type and reason when it has them)."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return TransferError(
            f"{method} {path}: {status} {error.get('type')}: {error.get('reason')}", error.get("type"), status
        )
    return TransferError(f"{method} {path}: {status} {error if error is not None else body}", None, status)
