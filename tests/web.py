"""httpx's client and one-request functions for the tests, all on one TLS context per process.

httpx makes a TLS context for each client it builds, reading the whole CA bundle again (about
20 ms of CPU), and `httpx.get` and the like build a client for each request; the tests built some
thousand a run (a client per writer thread or per check, a request per poll of a wait), though
their servers speak plain HTTP but for the TLS tests (bench/RESULTS.md "The suite's CPU, cut
(session 26, `suite14`)").
Here they share the one context httpx would make for each (`httpx.create_ssl_context()`, the same
settings), built on first use; a call given its own `verify` (a TLS test's CA) keeps it. A TLS
context may serve any number of connections, from any thread.
"""

from __future__ import annotations

import ssl
from functools import cache
from typing import Any

import httpx


@cache
def tls_context() -> ssl.SSLContext:
    """The process's context: what httpx makes for `verify=True`."""
    return httpx.create_ssl_context()


def _shared(options: dict[str, Any]) -> dict[str, Any]:
    return {"verify": tls_context(), **options}


def Client(**options: Any) -> httpx.Client:  # noqa: N802 - httpx.Client, on the shared context
    return httpx.Client(**_shared(options))


def request(method: str, url: str, **options: Any) -> httpx.Response:
    return httpx.request(method, url, **_shared(options))


def get(url: str, **options: Any) -> httpx.Response:
    return request("GET", url, **options)


def head(url: str, **options: Any) -> httpx.Response:
    return request("HEAD", url, **options)


def post(url: str, **options: Any) -> httpx.Response:
    return request("POST", url, **options)


def put(url: str, **options: Any) -> httpx.Response:
    return request("PUT", url, **options)


def delete(url: str, **options: Any) -> httpx.Response:
    return request("DELETE", url, **options)
