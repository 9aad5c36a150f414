"""Elasticsearch's `standard` analyzer: UAX#29 word segmentation, lowercased, tokens cut at 255 chars.

A regular expression stands in for Lucene's JFlex grammar. It keeps the rules users notice: words
and numbers joined by letters, digits and underscores; `'`, `.` and `:` kept *between letters*
("don't", "u.s.a", "example.com"); `.`, `,`, `;` and `'` kept *between digits* ("3.14", "1,000");
every CJK ideograph and Hiragana character a token of its own. It runs for every text value that is
indexed, so the work is one `lower()` and one `findall`, with a cheaper ASCII-only expression for
the common case.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import chain

import numpy as np

from leafsearch.index.interning import Spans
from leafsearch.index.parsed import POSITION_INCREMENT_GAP

MAX_TOKEN_LENGTH = 255

# Ideographs and Hiragana: Lucene emits each character as a token.
_SINGLE = "\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f\U00030000-\U0003134f"


def _mark_ranges() -> str:
    """Combining marks of the BMP: Python's `\\w` leaves them out, which would cut Indic words apart."""
    ranges: list[str] = []
    start = None
    for cp in range(0x10000):
        is_mark = unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me")
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            ranges.append(f"\\u{start:04x}-\\u{cp - 1:04x}")
            start = None
    return "".join(ranges)


def _word_pattern(char: str, letter: str, digit: str, mid_letter: str, mid_num: str) -> str:
    # The joiner is matched first and its neighbours checked after: the engine then gives up at
    # once on the usual space instead of trying two look-behinds at every token end. Greedy, not
    # possessive, quantifiers: CPython 3.11.2 (Debian 12's) matched this expression wrongly with
    # possessive ones ("3.14," and empty tokens; 3.11.7 right), and greedy ones cost the same here.
    joiner = (
        f"[{mid_letter}{mid_num}]"
        f"(?:(?<={letter}[{mid_letter}])(?={letter})|(?<={digit}[{mid_num}])(?={digit}))"
    )
    return f"{char}+(?:{joiner}{char}+)*"


_ASCII_WORDS = re.compile(_word_pattern("[0-9a-z_]", "[a-z]", "[0-9]", "':.", "'.,;"))
# Most ASCII text has no joiner between two word characters; it then splits on every other byte,
# which bytes.translate + split do several times faster than the expression above.
_ASCII_JOINED = re.compile(rb"['.:,;](?<=[0-9a-z_]['.:,;])(?=[0-9a-z_])")
_JOINERS = tuple(bytes([c]) for c in b"'.:,;")
# Without a joiner, ASCII words are the runs of word characters: a plain expression finds them.
_ASCII_RUNS = re.compile(r"[0-9a-z_]+")
_ASCII_SEPARATORS = bytes(
    c if chr(c).isascii() and (chr(c).isalnum() or chr(c) == "_") else ord(" ") for c in range(256)
)
# Batches join their texts with a control character the table above keeps, to split them after.
_VALUE_SEPARATOR = "\x01"
_BATCH_SEPARATORS = _ASCII_SEPARATORS[:1] + _VALUE_SEPARATOR.encode() + _ASCII_SEPARATORS[2:]
_SEPARATOR_BYTE, _SPACE = ord(_VALUE_SEPARATOR), ord(" ")
_UNICODE_WORDS = re.compile(
    f"[{_SINGLE}]|"
    + _word_pattern(
        f"(?:[^\\W{_SINGLE}]|[{_mark_ranges()}])",
        r"[^\W\d_]",
        r"\d",
        "'.:\u00b7\u2019\u2018\u2024\ufe52\uff07\uff0e",
        "'.,;\u2019\u2018\u2024\ufe52\uff07\uff0e\u066c\ufe50\ufe54\uff0c\uff1b",
    )
)


def _joined(raw: bytes) -> bool:
    """Whether ASCII text holds a joiner between two word characters; a byte search for each
    joiner first (memchr speed: text without any, as many log messages, skips the expression)."""
    return any(joiner in raw for joiner in _JOINERS) and _ASCII_JOINED.search(raw) is not None


def analyze(text: str) -> list[str]:
    """The tokens of one text value, in order."""
    lowered = text.lower()
    if lowered.isascii():
        raw = lowered.encode()
        if _ASCII_JOINED.search(raw) is None:
            tokens = raw.translate(_ASCII_SEPARATORS).decode().split()
        else:
            tokens = _ASCII_WORDS.findall(lowered)
    else:
        tokens = _UNICODE_WORDS.findall(lowered)
    if len(lowered) > MAX_TOKEN_LENGTH and max(map(len, tokens), default=0) > MAX_TOKEN_LENGTH:
        return _split_long(tokens)
    return tokens


def standard_tokens(text: str) -> list[tuple[str, int, int]]:
    """The tokens of `analyze(text)` with where each lies in `text` (start and end character
    offsets), for `_analyze`: the same expressions over the same lowered text, over-long tokens
    cut the same way. Where lowering changes the length (`İ` becomes two characters), offsets in
    the lowered text are mapped back to the original's."""
    lowered = text.lower()
    if lowered.isascii():
        pattern = _ASCII_WORDS if _ASCII_JOINED.search(lowered.encode()) is not None else _ASCII_RUNS
    else:
        pattern = _UNICODE_WORDS
    if len(lowered) == len(text):
        back = None
    else:  # back[i]: the original character that lowered character i came from
        back = [i for i, c in enumerate(text) for _ in c.lower()]
        back.append(len(text))
    tokens: list[tuple[str, int, int]] = []
    for match in pattern.finditer(lowered):
        start, end = match.span()
        while start < end:
            cut = min(end, start + MAX_TOKEN_LENGTH)
            if back is None:
                tokens.append((lowered[start:cut], start, cut))
            else:
                tokens.append((lowered[start:cut], back[start], back[cut - 1] + 1))
            start = cut
    return tokens


def analyze_flat(texts: list[str]) -> tuple[Spans, np.ndarray]:
    """The tokens of every text end to end, as spans of one buffer (`interning.Spans`), and how
    many each text has (`analyze` of each, joined). For ASCII text without joiners (most log
    messages) the lowering, the joiner search and the translation run once over the whole batch,
    and the tokens are found and counted by numpy over the translated bytes (a token starts where
    a word byte follows a separator): no Python step, and no Python string, per text or token."""
    if texts and max(map(len, texts)) <= MAX_TOKEN_LENGTH:
        lowered = _VALUE_SEPARATOR.join(texts).lower()
        if lowered.isascii():
            raw = lowered.encode()
            if not _joined(raw):
                translated = raw.translate(_BATCH_SEPARATORS)
                marked = np.frombuffer(translated, dtype=np.uint8)
                bounds = np.flatnonzero(marked == _SEPARATOR_BYTE)
                if len(bounds) == len(texts) - 1:  # else a text held the separator itself
                    # Translated, a word byte is above the space, the rest are spaces and
                    # separators: the words' edges alternate, a start then an end.
                    word = np.zeros(len(marked) + 2, dtype=bool)
                    np.greater(marked, _SPACE, out=word[1:-1])
                    edges = np.flatnonzero(word[1:] != word[:-1])
                    starts = edges[0::2].copy()  # (a view would hold the ends too)
                    lengths = edges[1::2] - starts
                    # tokens before each text's end: one search per text, not per token
                    ends = np.searchsorted(starts, bounds)
                    counts = np.diff(ends, prepend=0, append=len(starts))
                    return Spans(translated, starts, lengths), counts
    token_lists = [analyze(text) for text in texts]
    counts = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    spans = Spans.of(list(chain.from_iterable(token_lists)))
    assert spans is not None  # no token holds a NUL: both expressions leave it out
    return spans, counts


def _split_long(tokens: list[str]) -> list[str]:
    """Lucene's StandardTokenizer cuts an over-long token into max_token_length pieces."""
    out: list[str] = []
    for token in tokens:
        if len(token) <= MAX_TOKEN_LENGTH:
            out.append(token)
        else:
            out.extend(token[i : i + MAX_TOKEN_LENGTH] for i in range(0, len(token), MAX_TOKEN_LENGTH))
    return out


def analyze_with_positions(
    values: list[str], gap: int = POSITION_INCREMENT_GAP
) -> tuple[list[str], list[int]]:
    """Tokens and positions of a (multi-valued) text field.

    As in Lucene, each value after the first starts `gap` positions after the previous one ended,
    even when a value yields no token, so a phrase never matches across two array elements.
    """
    if len(values) == 1:
        tokens = analyze(values[0])
        return tokens, list(range(len(tokens)))
    tokens = []
    positions: list[int] = []
    position = -1
    for i, value in enumerate(values):
        if i:
            position += gap
        value_tokens = analyze(value)
        tokens.extend(value_tokens)
        positions.extend(range(position + 1, position + 1 + len(value_tokens)))
        position += len(value_tokens)
    return tokens, positions
