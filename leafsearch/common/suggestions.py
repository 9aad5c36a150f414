"""Elasticsearch's "did you mean" for a name it does not know: Lucene's Levenshtein similarity.

One place for the distance every refusal of an unknown name uses (a query type, an aggregation
type, an update body field, a query parameter), so their suggestions agree.
"""

from __future__ import annotations

from collections.abc import Iterable


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


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """The " did you mean [x]?" hint: candidates more than half similar, best first."""
    scored = sorted((-similarity(name, c), c) for c in candidates)
    keys = [c for s, c in scored if -s > 0.5]
    if not keys:
        return ""
    if len(keys) == 1:
        return f" did you mean [{keys[0]}]?"
    return f" did you mean any of [{', '.join(keys)}]?"
