"""Tokenizers of Elasticsearch's analysis: each turns a text into `Tok`s (term, character offsets,
type, position increment, position length), the stream token filters (token_filters.py) change.

The `standard` tokenizer is analysis.py's expression; user patterns (`pattern`, `simple_pattern`,
`simple_pattern_split`) run on RE2, whose matching is linear in the text, so no pattern can stall a
node, and whose program size is bounded.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import re2

from leafsearch.index.analysis import MAX_TOKEN_LENGTH, standard_tokens


@dataclass(slots=True)
class Tok:
    term: str
    start: int
    end: int
    type: str = "word"
    inc: int = 1  # position increment: 0 stacks the token on the previous one
    length: int = 1  # positionLength: how many positions the token spans
    keyword: bool = False  # `keyword_marker`: stemmers leave it alone


Tokenizer = Callable[[str], list[Tok]]


class AnalysisConfigError(ValueError):
    """A component's settings are wrong; the message is Elasticsearch's."""


def standard_type(term: str) -> str:
    """The token type Lucene's StandardTokenizer gives."""
    first = ord(term[0])
    if 0x3040 <= first <= 0x309F:
        return "<HIRAGANA>"
    if len(term) == 1 and (0x3400 <= first <= 0x9FFF or 0xF900 <= first <= 0xFAFF or first >= 0x20000):
        return "<IDEOGRAPHIC>"
    if all(0x30A0 <= ord(c) <= 0x30FF for c in term):
        return "<KATAKANA>"
    if all(0xAC00 <= ord(c) <= 0xD7AF or 0x1100 <= ord(c) <= 0x11FF for c in term):
        return "<HANGUL>"
    if not any(c.isalpha() for c in term):
        return "<NUM>"
    return "<ALPHANUM>"


def int_param(params: dict[str, Any], key: str, default: int, name: str) -> int:
    value = params.get(key, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AnalysisConfigError(
            f"Failed to parse value [{value}] for setting [{key}] of [{name}]"
        ) from None


def flag_param(params: dict[str, Any], key: str, default: bool) -> bool:
    value = params.get(key, default)
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise AnalysisConfigError(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")


def _cut(toks: list[Tok], limit: int) -> list[Tok]:
    """Over-long tokens split into `limit`-character pieces, as Lucene's tokenizers do."""
    if all(t.end - t.start <= limit for t in toks):
        return toks
    out = []
    for t in toks:
        for i in range(0, len(t.term), limit):
            out.append(Tok(t.term[i : i + limit], t.start + i, min(t.end, t.start + i + limit), t.type))
    return out


def standard(params: dict[str, Any], name: str) -> Tokenizer:
    limit = int_param(params, "max_token_length", MAX_TOKEN_LENGTH, name)

    def run(text: str) -> list[Tok]:
        toks = [
            Tok(text[s:e] if e - s == len(term) else term, s, e, standard_type(term))
            for term, s, e in standard_tokens(text)
        ]
        return toks if limit >= MAX_TOKEN_LENGTH else _cut(toks, limit)

    run.max_token_length = limit  # type: ignore[attr-defined]
    return run


def _regex_tokenizer(expression: str, kind: str = "word") -> Callable[[dict[str, Any], str], Tokenizer]:
    compiled = re.compile(expression)

    def build(params: dict[str, Any], name: str) -> Tokenizer:
        limit = int_param(params, "max_token_length", MAX_TOKEN_LENGTH, name)
        return lambda text: _cut([Tok(m.group(), *m.span(), kind) for m in compiled.finditer(text)], limit)

    return build


def keyword(params: dict[str, Any], name: str) -> Tokenizer:
    return lambda text: [Tok(text, 0, len(text))] if text else []


def lowercase(params: dict[str, Any], name: str) -> Tokenizer:
    letters = letter(params, name)

    def run(text: str) -> list[Tok]:
        toks = letters(text)
        for t in toks:
            t.term = t.term.lower()
        return toks

    return run


letter = _regex_tokenizer(r"[^\W\d_]+")
whitespace = _regex_tokenizer(r"\S+")


def _re2(pattern: Any, name: str) -> Any:
    if not isinstance(pattern, str):
        raise AnalysisConfigError(f"[pattern] of [{name}] must be a string")
    options = re2.Options()
    options.max_mem = 8 << 20  # the compiled program's budget: a huge pattern is refused, not built
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        raise AnalysisConfigError(f"Invalid pattern [{pattern}] for [{name}]: {e}") from None


def pattern(params: dict[str, Any], name: str) -> Tokenizer:
    """Java-style `pattern` and `group`: -1 splits on the matches, a group number keeps it."""
    compiled = _re2(params.get("pattern", r"\W+"), name)
    group = int_param(params, "group", -1, name)
    if group >= 0 and group > compiled.groups:
        raise AnalysisConfigError(
            f"invalid group [{group}] for pattern [{params.get('pattern')}] of [{name}]"
        )
    if group < 0:
        return lambda text: _split(compiled, text)
    return lambda text: [
        Tok(m.group(group), *m.span(group)) for m in compiled.finditer(text) if m.end(group) > m.start(group)
    ]


def _split(compiled: Any, text: str) -> list[Tok]:
    toks = []
    start = 0
    for m in compiled.finditer(text):
        if m.start() > start:
            toks.append(Tok(text[start : m.start()], start, m.start()))
        start = max(start, m.end())
    if start < len(text):
        toks.append(Tok(text[start:], start, len(text)))
    return toks


def simple_pattern(params: dict[str, Any], name: str) -> Tokenizer:
    compiled = _re2(params.get("pattern", ""), name)
    return lambda text: [Tok(m.group(), *m.span()) for m in compiled.finditer(text) if m.end() > m.start()]


def simple_pattern_split(params: dict[str, Any], name: str) -> Tokenizer:
    compiled = _re2(params.get("pattern", ""), name)
    return lambda text: _split(compiled, text)


_CHAR_CLASSES: dict[str, Callable[[str], bool]] = {
    "whitespace": str.isspace,
    "letter": str.isalpha,
    "digit": str.isdigit,
    "punctuation": lambda c: unicodedata.category(c).startswith("P"),
    "symbol": lambda c: unicodedata.category(c).startswith("S"),
}
_ESCAPES = {"\\n": "\n", "\\r": "\r", "\\t": "\t", "\\f": "\f", "\\\\": "\\", "\\'": "'", '\\"': '"'}


def char_group(params: dict[str, Any], name: str) -> Tokenizer:
    chars: set[str] = set()
    classes: list[Callable[[str], bool]] = []
    spec = params.get("tokenize_on_chars", [])
    for item in spec if isinstance(spec, list) else [spec]:
        item = str(item)
        if item in _CHAR_CLASSES:
            classes.append(_CHAR_CLASSES[item])
        elif item in _ESCAPES:
            chars.add(_ESCAPES[item])
        elif len(item) == 1:
            chars.add(item)
        elif item.startswith("\\u") and len(item) == 6:
            chars.add(chr(int(item[2:], 16)))
        else:
            raise AnalysisConfigError(f"Invalid escaped char in [{item}]")
    limit = int_param(params, "max_token_length", MAX_TOKEN_LENGTH, name)

    def run(text: str) -> list[Tok]:
        toks = []
        start = None
        for i, c in enumerate(text):
            split = c in chars or any(f(c) for f in classes)
            if split:
                if start is not None:
                    toks.append(Tok(text[start:i], start, i))
                    start = None
            elif start is None:
                start = i
            elif i - start >= limit:
                toks.append(Tok(text[start:i], start, i))
                start = i
        if start is not None:
            toks.append(Tok(text[start:], start, len(text)))
        return toks

    return run


def path_hierarchy(params: dict[str, Any], name: str) -> Tokenizer:
    """`/a/b/c` -> `/a`, `/a/b`, `/a/b/c` (or, `reverse`, `/a/b/c`, `a/b/c`, `b/c`, `c`), all at one
    position; `skip` leaves out the first (last, reversed) components."""
    delimiter = str(params.get("delimiter", "/"))
    replacement = str(params.get("replacement", delimiter))
    skip = int_param(params, "skip", 0, name)
    reverse = flag_param(params, "reverse", False)
    if len(delimiter) != 1 or len(replacement) != 1:
        raise AnalysisConfigError("delimiter must be a one char value")

    def run(text: str) -> list[Tok]:
        cuts = [i for i, c in enumerate(text) if c == delimiter]
        toks: list[Tok] = []
        if not reverse:
            ends = [c for c in cuts if c > 0] + [len(text)]
            begin = 0
            if skip:
                bounds = [0, *(c for c in cuts if c > 0)]
                if skip >= len(bounds):
                    return []
                begin = bounds[skip]
                ends = [e for e in ends if e > begin]
            for end in dict.fromkeys(ends):
                toks.append(Tok(text[begin:end].replace(delimiter, replacement), begin, end, inc=0))
        else:
            starts = [0, *(c + 1 for c in cuts if c + 1 < len(text))]
            end = len(text)
            if skip:
                tails = [c for c in cuts if c > 0]
                if skip > len(tails):
                    return []
                end = tails[len(tails) - skip]
                starts = [s for s in starts if s < end]
            for begin in dict.fromkeys(starts):
                toks.append(Tok(text[begin:end].replace(delimiter, replacement), begin, end, inc=0))
        if toks:
            toks[0].inc = 1
        return toks

    return run


def ngram_bounds(params: dict[str, Any], name: str, default_max: int) -> tuple[int, int]:
    low = int_param(params, "min_gram", 1, name)
    high = int_param(params, "max_gram", default_max, name)
    if low < 1 or high < low:
        raise AnalysisConfigError(f"min_gram [{low}] and max_gram [{high}] of [{name}] are out of order")
    return low, high


def _token_chars(params: dict[str, Any]) -> Callable[[str], bool] | None:
    spec = params.get("token_chars", [])
    spec = spec if isinstance(spec, list) else [s.strip() for s in str(spec).split(",") if s.strip()]
    if not spec:
        return None
    custom = set(str(params.get("custom_token_chars", "")))
    tests = []
    for kind in spec:
        if kind == "custom":
            tests.append(custom.__contains__)
        elif kind in _CHAR_CLASSES:
            tests.append(_CHAR_CLASSES[kind])
        else:
            raise AnalysisConfigError(f"Unknown token type: '{kind}', must be one of {sorted(_CHAR_CLASSES)}")
    return lambda c: any(t(c) for t in tests)


def _words(text: str, keep: Callable[[str], bool] | None) -> list[tuple[int, int]]:
    if keep is None:
        return [(0, len(text))] if text else []
    spans = []
    start = None
    for i, c in enumerate(text):
        if keep(c):
            if start is None:
                start = i
        elif start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(text)))
    return spans


def ngram(params: dict[str, Any], name: str, max_diff: int) -> Tokenizer:
    low, high = ngram_bounds(params, name, 2)
    if high - low > max_diff:
        raise AnalysisConfigError(
            f"The difference between max_gram and min_gram in NGram Tokenizer must be less than or equal "
            f"to: [{max_diff}] but was [{high - low}]. This limit can be set by changing the "
            "[index.max_ngram_diff] index level setting."
        )
    keep = _token_chars(params)

    def run(text: str) -> list[Tok]:
        return [
            Tok(text[i : i + n], i, i + n)
            for s, e in _words(text, keep)
            for i in range(s, e)
            for n in range(low, min(high, e - i) + 1)
        ]

    return run


def edge_ngram(params: dict[str, Any], name: str, max_diff: int) -> Tokenizer:
    low, high = ngram_bounds(params, name, 2)
    keep = _token_chars(params)
    return lambda text: [
        Tok(text[s : s + n], s, s + n)
        for s, e in _words(text, keep)
        for n in range(low, min(high, e - s) + 1)
    ]


#: Tokenizer types by name: a builder of (settings, component name) -> tokenizer.
TOKENIZERS: dict[str, Callable[[dict[str, Any], str], Tokenizer]] = {
    "standard": standard,
    "classic": standard,
    "keyword": keyword,
    "letter": letter,
    "lowercase": lowercase,
    "whitespace": whitespace,
    "pattern": pattern,
    "simple_pattern": simple_pattern,
    "simple_pattern_split": simple_pattern_split,
    "char_group": char_group,
    "path_hierarchy": path_hierarchy,
    "PathHierarchy": path_hierarchy,
}
#: Those whose builder also takes `index.max_ngram_diff`.
NGRAM_TOKENIZERS = {"ngram": ngram, "nGram": ngram, "edge_ngram": edge_ngram, "edgeNGram": edge_ngram}
