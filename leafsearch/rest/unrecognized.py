"""Elasticsearch's "contains unrecognized parameter" message with its "did you mean" suggestions.

Suggestions are the known names whose Lucene Levenshtein similarity to the unknown one exceeds
0.5, best first, as `BaseRestHandler.unrecognized` lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from leafsearch.errors import IllegalArgument
from leafsearch.rest.exchange import RESPONSE_PARAMS

if TYPE_CHECKING:
    from leafsearch.rest.exchange import RestRequest
    from leafsearch.rest.router import Route


def similarity(target: str, other: str) -> float:
    """Lucene's `LevenshteinDistance.getDistance`: 1 - edits / longer length."""
    n, m = len(target), len(other)
    if n == 0 or m == 0:
        return 1.0 if n == m else 0.0
    previous = list(range(n + 1))
    for j in range(1, m + 1):
        current = [j] + [0] * n
        for i in range(1, n + 1):
            cost = 0 if target[i - 1] == other[j - 1] else 1
            current[i] = min(current[i - 1] + 1, previous[i] + 1, previous[i - 1] + cost)
        previous = current
    return 1.0 - previous[n] / max(n, m)


def unrecognized(path: str, invalid: Iterable[str], candidates: Iterable[str], detail: str) -> str:
    names = sorted(set(invalid))
    known = set(candidates)
    parts = []
    for name in names:
        scored = sorted(((similarity(name, c), c) for c in known), key=lambda sc: (-sc[0], sc[1]))
        suggestions = [c for score, c in scored if score > 0.5]
        text = f"[{name}]"
        if len(suggestions) == 1:
            text += f" -> did you mean [{suggestions[0]}]?"
        elif suggestions:
            text += f" -> did you mean any of [{', '.join(suggestions)}]?"
        parts.append(text)
    plural = "s" if len(names) > 1 else ""
    return f"request [{path}] contains unrecognized {detail}{plural}: {', '.join(parts)}"


def check_params(route: Route, request: RestRequest) -> None:
    """Refuse query parameters the route does not take (the rendering ones are everyone's)."""
    unknown = set(request.params) - route.params - RESPONSE_PARAMS
    if unknown:
        raise IllegalArgument(
            unrecognized(request.path, unknown, route.params | RESPONSE_PARAMS, "parameter")
        )
