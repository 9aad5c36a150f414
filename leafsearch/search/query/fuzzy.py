"""Fuzzy term expansion: the edits a `fuzziness` value allows, and the shard's terms within them.

Approximation, knowingly: expansions keep the best `max_expansions` terms by edit distance and
score them with the largest document frequency among them (Lucene's blended rewrite) and a boost
of `1 - edits / length`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from leafsearch.index.columns import TextColumn
from leafsearch.search import bm25
from leafsearch.search.query.context import QueryContext, failed
from leafsearch.search.query.plans import BoolPlan, NoDocs, ScoredTerm
from leafsearch.search.query.term_selection import prefix_range


def fuzzy_edits(ctx: QueryContext, fuzziness: str | None, token: str) -> int:
    """Edits allowed by a `fuzziness` value for a term: 0-2, or AUTO[:low,high] by length."""
    if fuzziness is None:
        return 0
    text = fuzziness.upper()
    if text.startswith("AUTO"):
        low, high = 3, 6
        if ":" in text:
            try:
                low, high = (int(x) for x in text[5:].split(","))
            except ValueError:
                raise failed(
                    ctx, "illegal_argument_exception", f"failed to parse [{fuzziness}] as a fuzziness value"
                ) from None
        length = len(token)
        return 0 if length < low else 1 if length < high else 2
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise failed(
            ctx, "illegal_argument_exception", f"failed to parse [{fuzziness}] as a fuzziness value"
        ) from None
    return max(0, min(int(value), 2))


def edit_distances(candidates: list[str], word: str, transpositions: bool = True) -> np.ndarray:
    """Damerau-Levenshtein (optimal string alignment) distance of each candidate to `word`
    (Levenshtein without `transpositions`), one numpy row per candidate so the dynamic program
    runs over all of them at once."""
    last, lengths = _last_rows(candidates, word, transpositions)
    return last[np.arange(len(candidates)), lengths]


def prefix_edit_distances(
    candidates: list[str], word: str, edits: int, transpositions: bool = True
) -> np.ndarray:
    """The least distance of `word` to a prefix of each candidate of `len(word)` ± `edits`
    characters (a candidate shorter than that is out of reach): one dynamic program, whose last
    row holds the distance to every prefix."""
    last, lengths = _last_rows(candidates, word, transpositions)
    columns = np.arange(last.shape[1])
    m = len(word)
    allowed = (columns >= m - edits) & (columns <= m + edits)
    within = allowed[None, :] & (columns[None, :] <= lengths[:, None])  # shorter ones: out of reach
    return np.where(within, last, np.iinfo(np.int64).max).min(axis=1)


def _last_rows(candidates: list[str], word: str, transpositions: bool) -> tuple[np.ndarray, np.ndarray]:
    """The dynamic program's last row per candidate (distance of `word` to each prefix of it),
    and the candidates' lengths."""
    n, m = len(candidates), len(word)
    width = max((len(c) for c in candidates), default=0)
    grid = np.full((n, width), -1, dtype=np.int64)
    lengths = np.fromiter((len(c) for c in candidates), dtype=np.int64, count=n)
    for i, c in enumerate(candidates):
        grid[i, : len(c)] = [ord(ch) for ch in c]
    codes = [ord(ch) for ch in word]
    prev2 = None
    prev = np.broadcast_to(np.arange(width + 1, dtype=np.int64), (n, width + 1)).copy()
    for i in range(1, m + 1):
        cur = np.empty_like(prev)
        cur[:, 0] = i
        for j in range(1, width + 1):
            cost = (grid[:, j - 1] != codes[i - 1]).astype(np.int64)
            best = np.minimum(np.minimum(prev[:, j] + 1, cur[:, j - 1] + 1), prev[:, j - 1] + cost)
            if transpositions and prev2 is not None and j > 1:
                swap = (grid[:, j - 1] == codes[i - 2]) & (grid[:, j - 2] == codes[i - 1])
                best = np.where(swap, np.minimum(best, prev2[:, j - 2] + 1), best)
            cur[:, j] = best
        prev2, prev = prev, cur
    return prev, lengths


def fuzzy_plan(ctx: QueryContext, name: str, token: str, edits: int, prefix_length: int, limit: int) -> Any:
    """The terms of the shard within `edits` of `token`, each scored as a term (see module doc)."""
    prefix = token[:prefix_length]
    candidates: set[str] = set()
    for view in ctx.searcher.views:
        col = view.segment.column(name)
        if isinstance(col, TextColumn):
            lo, hi = prefix_range(col.terms, prefix.encode())
            terms = [t.decode() for t in np.asarray(col.terms[lo:hi]).tolist()]
            candidates.update(t for t in terms if abs(len(t) - len(token)) <= edits)
    if not candidates:
        return NoDocs()
    ordered = sorted(candidates)
    distances = edit_distances(ordered, token)
    scored = sorted(
        (1.0 - d / min(len(t), len(token)), t)
        for t, d in zip(ordered, distances.tolist(), strict=True)
        if d <= edits
    )
    best = sorted(scored, key=lambda s: (-s[0], s[1]))[:limit]
    if not best:
        return NoDocs()
    blended = max(bm25.text_doc_freq(ctx.searcher, name, t) for _, t in best)
    terms = tuple(ScoredTerm(name, "text", t, max(sim, 0.0), blended) for sim, t in best)
    return terms[0] if len(terms) == 1 else BoolPlan(should=terms)
