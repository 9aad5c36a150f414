"""Elasticsearch's "contains unrecognized parameter" message with its "did you mean" suggestions.

Suggestions are the known names whose Lucene Levenshtein similarity to the unknown one exceeds
0.5, best first, as `BaseRestHandler.unrecognized` lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from leafsearch.common.suggestions import similarity
from leafsearch.errors import IllegalArgument
from leafsearch.rest.exchange import RESPONSE_PARAMS

if TYPE_CHECKING:
    from leafsearch.rest.exchange import RestRequest
    from leafsearch.rest.router import Route


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
