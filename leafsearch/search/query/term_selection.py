"""Which terms of a sorted term dictionary (a segment's text or keyword terms, or its ids) a query
selects: exact values, prefixes, Lucene wildcards and regular expressions. Binary searches narrow
the sorted terms first, so only the terms sharing a pattern's literal prefix are tested. Patterns run
as RE2 automata (`lucene_regexp` translates them), in one pass over the candidate terms: the time is
linear in the terms' length whatever the pattern, so no query can stall the server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import re2

from leafsearch.common.memo import memo
from leafsearch.request import lucene_regexp


def prefix_range(terms: np.ndarray, prefix: bytes) -> tuple[int, int]:
    """Ordinal range of the sorted terms starting with `prefix` (0xff never occurs in UTF-8)."""
    lo = int(np.searchsorted(terms, prefix, side="left"))
    hi = int(np.searchsorted(terms, prefix + b"\xff", side="left"))
    return lo, hi


#: Bytes of one fixed-width key array built to look values up in a term dictionary.
_KEY_CHUNK_BYTES = 8 << 20


def terms_matching(terms: np.ndarray, values: tuple[str, ...], case_insensitive: bool) -> np.ndarray:
    """One bool per term of a sorted term array: whether it equals one of the values."""
    selected = np.zeros(len(terms), dtype=bool)
    if case_insensitive:
        wanted = {v.lower() for v in values}
        decoded = np.asarray(terms).tolist()
        selected[:] = [t.decode().lower() in wanted for t in decoded]
        return selected
    width = terms.dtype.itemsize
    # A value longer than the longest term matches nothing; the rest are looked up in chunks by
    # length, so no key array is ever count x longest value bytes.
    keys = sorted({k for v in values if len(k := v.encode()) <= width}, key=len)
    start = 0
    while start < len(keys):
        stop = start + 1
        while stop < len(keys) and (stop - start + 1) * len(keys[stop]) <= _KEY_CHUNK_BYTES:
            stop += 1
        chunk = np.array(keys[start:stop], dtype=bytes)
        idx = np.searchsorted(terms, chunk)
        ok = idx < len(terms)
        idx, chunk = idx[ok], chunk[ok]
        selected[idx[np.asarray(terms)[idx] == chunk]] = True
        start = stop
    return selected


def literal_prefix(mode: str, pattern: str) -> str:
    """The fixed start of a wildcard or prefix pattern, which narrows the sorted terms to scan."""
    if mode == "prefix":
        return pattern
    if mode != "wildcard":
        return ""
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


@dataclass(frozen=True, slots=True)
class TermPattern:
    """A compiled term pattern: RE2 programs for the parts RE2 can say, combined as the Lucene
    pattern's top-level union, intersection and complement say (`op`)."""

    op: str
    regex: Any = None  # RE2 program matching whole lines of a newline-joined term list
    whole: Any = None  # the same pattern for one whole term that may hold a newline
    parts: tuple[TermPattern, ...] = ()

    def select(self, terms: list[bytes]) -> np.ndarray:
        """One bool per term: whether the whole term matches."""
        if self.op == "or":
            return np.logical_or.reduce([p.select(terms) for p in self.parts])
        if self.op == "and":
            return np.logical_and.reduce([p.select(terms) for p in self.parts])
        if self.op == "not":
            return ~self.parts[0].select(terms)
        return _select_lines(self, terms)

    def matches(self, text: str) -> bool:
        return bool(self.select([text.encode()])[0])


def _select_lines(pattern: TermPattern, terms: list[bytes]) -> np.ndarray:
    """One RE2 pass over the terms joined by newlines, the program anchored at line starts and
    ends and never matching a newline, so each match is one whole term. A term list holding a
    newline itself is matched term by term."""
    selected = np.zeros(len(terms), dtype=bool)
    if not terms:
        return selected
    text = b"\n".join(terms)
    if text.count(b"\n") != len(terms) - 1:
        selected[:] = [pattern.whole.fullmatch(t) is not None for t in terms]
        return selected
    lengths = np.fromiter(map(len, terms), dtype=np.int64, count=len(terms))
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))
    found = np.fromiter((m.start() for m in pattern.regex.finditer(text)), dtype=np.int64)
    selected[np.searchsorted(starts, found)] = True
    return selected


def _options(line: bool) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    options.never_nl = line
    return options


def _compile(node: lucene_regexp.Node) -> TermPattern:
    if node.op != "re":
        return TermPattern(node.op, parts=tuple(_compile(p) for p in node.parts))
    try:
        line = re2.compile(f"(?m)^(?:{node.regex})$", _options(True))
        whole = re2.compile(f"(?:{node.regex})\\z", _options(False))
    except re2.error:  # a count past RE2's 1,000, or a program past its memory budget
        raise _too_complex(node.size, DEFAULT_RE2_LIMIT) from None
    return TermPattern("re", line, whole)


@memo(256)
def term_pattern(
    mode: str,
    pattern: str,
    case_insensitive: bool,
    flags: int = lucene_regexp.ALL,
    max_states: int = lucene_regexp.DEFAULT_MAX_STATES,
) -> TermPattern:
    """The compiled form of a prefix, wildcard or regexp pattern, refused as Lucene refuses it:
    a parse error, or `too_complex_to_determinize_exception` past `max_states` (see
    `lucene_regexp` for what is counted)."""
    if mode == "prefix":
        node = lucene_regexp.prefix(pattern, case_insensitive)
    elif mode == "wildcard":
        node = lucene_regexp.wildcard(pattern, case_insensitive)
    else:
        node = lucene_regexp.parse_regexp(pattern, flags, case_insensitive)
    if node.size > max_states:
        raise _too_complex(node.size, max_states)
    return _compile(node)


#: What RE2 itself can run: repetition counts up to 1,000, programs within its 8 MB budget.
DEFAULT_RE2_LIMIT = 1000


def _too_complex(size: int, limit: int) -> lucene_regexp.TooComplex:
    return lucene_regexp.TooComplex(
        f"Determinizing automaton with {size} states and {size} transitions would require more than "
        f"{limit} effort."
    )


def select_terms(
    terms: np.ndarray, mode: str, pattern: TermPattern | None, case_insensitive: bool, literal: str = ""
) -> np.ndarray:
    """One bool per sorted term: whether it matches the pattern. Only the terms starting with the
    pattern's literal prefix are tested (all of them when case-insensitive); a plain prefix needs
    no pattern at all."""
    selected = np.zeros(len(terms), dtype=bool)
    lo, hi = prefix_range(terms, literal.encode()) if literal else (0, len(terms))
    if pattern is None:
        selected[lo:hi] = True
        return selected
    selected[lo:hi] = pattern.select(np.asarray(terms[lo:hi]).tolist())
    return selected
