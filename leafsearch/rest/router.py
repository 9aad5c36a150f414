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
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

Handler = Callable[..., Any]
#: How many paths' matches a router keeps, and the longest path kept (`Router.candidates`).
MATCHED_PATHS = 1024
MATCHED_PATH_LENGTH = 256


@dataclass(frozen=True, slots=True)
class Route:
    methods: frozenset[str]
    path: str
    handler: Handler
    params: frozenset[str]
    segments: tuple[str, ...] = ()
    literals: tuple[tuple[int, str], ...] = ()  # (position, text) of the explicit segments
    placeholders: tuple[tuple[int, str], ...] = ()  # (position, name) of the `{name}` segments

    @classmethod
    def of(cls, methods: str, path: str, handler: Handler, params: Iterable[str] = ()) -> Route:
        segments = _segments(path)
        return cls(
            frozenset(methods.split("|")),
            path,
            handler,
            frozenset(params),
            segments,
            tuple((i, s) for i, s in enumerate(segments) if not s.startswith("{")),
            tuple((i, s[1:-1]) for i, s in enumerate(segments) if s.startswith("{")),
        )

    def match(self, parts: list[str]) -> dict[str, str] | None:
        """The placeholders' values if the path's segments fit this route, else None."""
        if len(parts) != len(self.segments):
            return None
        for i, literal in self.literals:
            if parts[i] != literal:
                return None
        return {name: unquote(parts[i]) for i, name in self.placeholders}

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
        # Grouped by segment count, each group in precedence order: a request tries only the
        # routes of its own length.
        self._by_length: dict[int, list[Route]] = {}
        for route in sorted(routes, key=Route.precedence):
            self._by_length.setdefault(len(route.segments), []).append(route)
        self._matched = lru_cache(maxsize=MATCHED_PATHS)(self._match)

    def candidates(self, raw_path: str) -> list[tuple[Route, dict[str, str]]]:
        """Every route whose path matches, best first (each with its own dict of the captured
        values). The matches of the last `MATCHED_PATHS` paths (of at most `MATCHED_PATH_LENGTH`
        characters) are kept: trying every route of a path's length was 4% of a coordinator's CPU
        per search (py-spy --gil)."""
        match = self._matched if len(raw_path) <= MATCHED_PATH_LENGTH else self._match
        return [(route, dict(captured)) for route, captured in match(raw_path)]

    def _match(self, raw_path: str) -> tuple[tuple[Route, dict[str, str]], ...]:
        parts = split_raw_path(raw_path)
        found = []
        for route in self._by_length.get(len(parts), ()):
            captured = route.match(parts)
            if captured is not None:
                found.append((route, captured))
        return tuple(found)
