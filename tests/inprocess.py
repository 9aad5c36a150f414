"""In-process searches for tests that call the engine directly: a body and parameters parsed as
the REST layer parses them, then executed by the node."""

from __future__ import annotations

from typing import Any

from leafsearch.node.node import Node
from leafsearch.request.search_request import parse_count_request, parse_search_request


def search(
    node: Node, index: str | None, body: dict[str, Any] | None, params: dict[str, str] | None = None, **kwargs
) -> dict[str, Any]:
    """`GET /<index>/_search` with this body and these query parameters."""
    return node.search(parse_search_request(body, params or {}, indices=index), **kwargs)


def count(
    node: Node, index: str | None, body: dict[str, Any] | None, params: dict[str, str] | None = None
) -> dict[str, Any]:
    """`GET /<index>/_count` with this body and these query parameters."""
    return node.count(parse_count_request(body, params or {}, indices=index))
