"""Path matching with Elasticsearch's precedence, so ambiguous paths reach the same handler.

Elasticsearch's path trie prefers explicit segments over `{placeholders}` (first with no
placeholder, then one at the root, then one at the leaf, then anywhere), and a request falls
through to the next candidate path when the first has no handler for its method: that is why
`PUT /_search` creates an index named `_search` (and is refused for its name) while
`DELETE /_search` is a 405.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

Handler = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Route:
    methods: frozenset[str]
    path: str
    handler: Handler
    params: frozenset[str]
    segments: tuple[str, ...] = ()

    @classmethod
    def of(cls, methods: str, path: str, handler: Handler, params: Iterable[str] = ()) -> Route:
        return cls(frozenset(methods.split("|")), path, handler, frozenset(params), _segments(path))

    def match(self, parts: list[str]) -> dict[str, str] | None:
        if len(parts) != len(self.segments):
            return None
        captured: dict[str, str] = {}
        for template, part in zip(self.segments, parts, strict=True):
            if template.startswith("{"):
                captured[template[1:-1]] = unquote(part)
            elif template != part:
                return None
        return captured

    def precedence(self) -> tuple[int, tuple[bool, ...]]:
        wild = tuple(s.startswith("{") for s in self.segments)
        if not any(wild):
            mode = 0
        elif not any(wild[1:]):
            mode = 1
        elif not any(wild[:-1]):
            mode = 2
        else:
            mode = 3
        return mode, wild


def _segments(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.strip("/").split("/") if part)


def split_raw_path(raw_path: str) -> list[str]:
    """Segments of the undecoded path, so `%2F` inside a document id stays inside its segment."""
    parts = raw_path.lstrip("/").split("/")
    while parts and not parts[-1]:
        parts.pop()
    return parts


class Router:
    def __init__(self, routes: Iterable[Route]) -> None:
        self.routes = sorted(routes, key=Route.precedence)

    def candidates(self, raw_path: str) -> list[tuple[Route, dict[str, str]]]:
        """Every route whose path matches, best first."""
        parts = split_raw_path(raw_path)
        found = []
        for route in self.routes:
            captured = route.match(parts)
            if captured is not None:
                found.append((route, captured))
        return found
