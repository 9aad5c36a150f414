"""Values at a dotted path of a JSON document, as Elasticsearch's XContentMapValues reads them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def path_values(source: Any, path: str, whole: bool = False) -> Iterator[Any]:
    """The scalar values at dotted `path` of a document (XContentMapValues.extractRawValues): an
    array is walked through at any step, and a key may itself hold dots (`a.b` under `{"a.b": ..}`).
    `whole`: the values at the path as they are (a geo point's array or object)."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(source, tuple(path.split(".")))]
    found: list[Any] = []
    while stack:
        node, parts = stack.pop()
        if whole and not parts:
            if node is not None:
                found.append(node)
        elif isinstance(node, list):
            stack.extend((item, parts) for item in reversed(node))
        elif not parts:
            if node is not None and not isinstance(node, dict):
                found.append(node)
        elif isinstance(node, dict):
            for i in range(len(parts), 0, -1):
                key = ".".join(parts[:i])
                if key in node:
                    stack.append((node[key], parts[i:]))
    return iter(found)
