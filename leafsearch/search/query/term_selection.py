"""Which terms of a sorted term dictionary (a segment's text or keyword terms, or its ids) a query
selects: exact values, prefixes, Lucene wildcards and regular expressions. Binary searches narrow
the sorted terms first, so only the terms sharing a pattern's literal prefix are tested."""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np


def prefix_range(terms: np.ndarray, prefix: bytes) -> tuple[int, int]:
    """Ordinal range of the sorted terms starting with `prefix` (0xff never occurs in UTF-8)."""
    lo = int(np.searchsorted(terms, prefix, side="left"))
    hi = int(np.searchsorted(terms, prefix + b"\xff", side="left"))
    return lo, hi


def terms_matching(terms: np.ndarray, values: tuple[str, ...], case_insensitive: bool) -> np.ndarray:
    """One bool per term of a sorted term array: whether it equals one of the values."""
    selected = np.zeros(len(terms), dtype=bool)
    if case_insensitive:
        wanted = {v.lower() for v in values}
        decoded = np.asarray(terms).tolist()
        selected[:] = [t.decode().lower() in wanted for t in decoded]
        return selected
    keys = np.array(sorted({v.encode() for v in values}), dtype=bytes)
    idx = np.searchsorted(terms, keys)
    ok = idx < len(terms)
    idx, keys = idx[ok], keys[ok]
    selected[idx[np.asarray(terms)[idx] == keys]] = True
    return selected


def _wildcard_regex(pattern: str) -> str:
    """Lucene wildcard syntax (`*`, `?`, backslash escapes) as a Python regular expression."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
        i += 1
    return "".join(out)


def _literal_prefix(mode: str, pattern: str) -> str:
    """The fixed start of a pattern, which narrows the sorted terms to scan."""
    if mode == "prefix":
        return pattern
    if mode == "wildcard":
        out: list[str] = []
        i = 0
        while i < len(pattern):
            c = pattern[i]
            if c in "*?":
                break
            if c == "\\" and i + 1 < len(pattern):
                out.append(pattern[i + 1])
                i += 2
                continue
            out.append(c)
            i += 1
        return "".join(out)
    match = re.match(r"[\w ]*", pattern)
    literal = match.group(0) if match else ""
    if len(literal) < len(pattern) and pattern[len(literal)] in "?*{":
        literal = literal[:-1]
    return literal


def pattern_matches(mode: str, pattern: str, case_insensitive: bool, text: str) -> bool:
    return bool(_pattern_regex(mode, pattern, case_insensitive).fullmatch(text))


@lru_cache(maxsize=256)
def _pattern_regex(mode: str, pattern: str, case_insensitive: bool) -> re.Pattern:
    flags = re.IGNORECASE | re.DOTALL if case_insensitive else re.DOTALL
    if mode == "prefix":
        return re.compile(re.escape(pattern) + ".*", flags)
    if mode == "wildcard":
        return re.compile(_wildcard_regex(pattern), flags)
    try:
        return re.compile(pattern, flags)
    except re.error:
        return re.compile(re.escape(pattern), flags)


def select_terms(terms: np.ndarray, mode: str, pattern: str, case_insensitive: bool) -> np.ndarray:
    """One bool per sorted term: whether it matches the pattern. Only terms sharing the pattern's
    literal prefix are tested (all of them when case-insensitive)."""
    selected = np.zeros(len(terms), dtype=bool)
    literal = "" if case_insensitive else _literal_prefix(mode, pattern)
    lo, hi = prefix_range(terms, literal.encode()) if literal else (0, len(terms))
    if mode == "prefix" and not case_insensitive:
        selected[lo:hi] = True
        return selected
    regex = _pattern_regex(mode, pattern, case_insensitive)
    candidates = np.asarray(terms[lo:hi]).tolist()
    selected[lo:hi] = [regex.fullmatch(t.decode()) is not None for t in candidates]
    return selected
