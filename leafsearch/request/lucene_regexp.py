"""Lucene's pattern languages (regular expressions, wildcards, prefixes) translated to RE2.

Term patterns must run in time linear in the terms they scan, whatever a client sends, so they
never reach Python's backtracking `re`: they are parsed here with Lucene's own grammar (its
`RegExp` class: `.`, `?`, `+`, `*`, `{n,m}`, `|`, `()`, `[]`, `"..."`, `\\`, the predefined
classes `\\d \\s \\w` and their negations, and, as the `flags` allow, `~` complement, `&`
intersection, `<n-m>` numeric intervals, `@` any string and `#` the empty language) and written
out as RE2 syntax, every literal escaped, so that RE2's automaton decides exactly what Lucene's
decides.

RE2 has no complement or intersection. They are kept where whole-term matching can still evaluate
them: at the top of the pattern (under unions, intersections and complements only), where a term
matches `A&B` when it matches both, `~A` when it does not match `A`. Inside a concatenation or a
repetition they are refused (`illegal_argument_exception`).

`max_determinized_states` (Lucene's determinize work limit, 10,000 by default) is checked on a
proxy computed from the parsed pattern before RE2 compiles anything: the size of the pattern's
Thompson automaton, one state per character, class, `.` or `@`, repetitions multiplied out
(`x{n,m}` costs `m` copies of `x`; `x{n,}` costs `n + 1`), intersections the product of their
sides. For patterns without ambiguity this is the determinized automaton's size; it does not see
the exponential blow-up of a pattern such as `(a|b)*a(a|b){20}`, which Lucene refuses and RE2
runs in linear time all the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from leafsearch.errors import ElasticError

# Lucene's RegExp syntax flags, as Elasticsearch's `flags` names them.
INTERSECTION = 0x0001
COMPLEMENT = 0x0002
EMPTY = 0x0004
ANYSTRING = 0x0008
AUTOMATON = 0x0010
INTERVAL = 0x0020
ALL = 0xFFFF
FLAG_NAMES = {
    "INTERSECTION": INTERSECTION,
    "COMPLEMENT": COMPLEMENT,
    "EMPTY": EMPTY,
    "ANYSTRING": ANYSTRING,
    "INTERVAL": INTERVAL,
    "NONE": 0,
    "ALL": ALL,
}

#: Groups nested deeper than this are refused (each level is a few Python frames here).
MAX_GROUP_DEPTH = 100

#: Lucene's `Operations.DEFAULT_DETERMINIZE_WORK_LIMIT`, also `max_determinized_states`' default.
DEFAULT_MAX_STATES = 10_000

_MAX_CODE_POINT = 0x10FFFF
_SPACE = " \t\n\x0b\f\r"
_PREDEFINED = {
    "d": ((ord("0"), ord("9")),),
    "s": tuple((ord(c), ord(c)) for c in _SPACE),
    "w": ((ord("0"), ord("9")), (ord("A"), ord("Z")), (ord("_"), ord("_")), (ord("a"), ord("z"))),
}


class PatternError(ElasticError):
    """A pattern Lucene's parser refuses (its IllegalArgumentException)."""

    error_type = "illegal_argument_exception"
    status = 400


class TooComplex(ElasticError):
    """Lucene's TooComplexToDeterminizeException."""

    error_type = "too_complex_to_determinize_exception"
    status = 400


# ---------------------------------------------------------------------------------------------
# The parsed pattern. `regex` is RE2 syntax (None where RE2 cannot say it); `size` the proxy above.


@dataclass(frozen=True, slots=True)
class Node:
    regex: str | None
    size: int
    op: str = "re"  # re, or, and, not: how a pattern that RE2 cannot express combines its parts
    parts: tuple[Node, ...] = ()


def _re(regex: str, size: int) -> Node:
    return Node(regex, size)


def _literal(ch: str, case_insensitive: bool = False) -> str:
    """RE2 syntax matching one code point (its other case too when asked), escaped."""
    if case_insensitive:
        other = ch.lower() if ch.isupper() else ch.upper()
        if len(other) == 1 and other != ch:
            return f"[{_class_char(ord(ch))}{_class_char(ord(other))}]"
    if ch.isascii() and ch.isalnum():
        return ch
    return f"\\x{{{ord(ch):x}}}"


def _class_char(code: int) -> str:
    return chr(code) if chr(code).isascii() and chr(code).isalnum() else f"\\x{{{code:x}}}"


def _class(ranges: tuple[tuple[int, int], ...], negate: bool = False) -> str:
    if not ranges:
        return "[^\\x00-\\x{10ffff}]" if not negate else "(?s:.)"
    body = "".join(_class_char(a) if a == b else f"{_class_char(a)}-{_class_char(b)}" for a, b in ranges)
    return f"[{'^' if negate else ''}{body}]"


def _union(a: Node, b: Node) -> Node:
    if a.regex is not None and b.regex is not None:
        return _re(f"(?:{a.regex})|(?:{b.regex})", a.size + b.size)
    return Node(None, a.size + b.size, "or", (a, b))


def _repeat(e: Node, low: int, high: int | None) -> Node:
    """`e{low,high}` (high None: unbounded). RE2 takes counts up to 1,000, which the state limit
    reaches first for any `e` of more than ten states."""
    if e.regex is None:
        raise _inexpressible()
    if high is not None and low > high:
        return _re(_class(()), 0)
    size = e.size * (high if high is not None else low + 1) + 1
    if low == 0 and high is None:
        return _re(f"(?:{e.regex})*", size)
    if high is None:
        return _re(f"(?:{e.regex}){{{low},}}", size)
    return _re(f"(?:{e.regex}){{{low},{high}}}", size)


def _inexpressible() -> PatternError:
    return PatternError(
        "complement [~] and intersection [&] are only supported at the top of a regular expression "
        "(not inside a concatenation or repetition) by leafsearch"
    )


def _interval(low: int, high: int, digits: int) -> str:
    """Decimal numbers in [low, high]: exactly `digits` digits (zero-padded) when digits > 0,
    any number of leading zeros otherwise (Lucene's `Automata.makeDecimalInterval`)."""
    if digits > 0:
        return _fixed_range(str(low).zfill(digits), str(high).zfill(digits))
    parts = []
    for width in range(len(str(low)), len(str(high)) + 1):
        lo = max(low, 10 ** (width - 1) if width > 1 else 0)
        hi = min(high, 10**width - 1)
        if lo <= hi:
            parts.append(_fixed_range(str(lo), str(hi)))
    return "0*(?:" + "|".join(parts) + ")"


def _fixed_range(lo: str, hi: str) -> str:
    """Digit strings of one width between lo and hi inclusive, as an alternation."""
    if not lo:
        return ""
    if lo[0] == hi[0]:
        return lo[0] + _fixed_range(lo[1:], hi[1:])
    rest = len(lo) - 1
    parts = [lo[0] + _fixed_range(lo[1:], "9" * rest)]
    if int(hi[0]) - int(lo[0]) > 1:
        parts.append(f"[{int(lo[0]) + 1}-{int(hi[0]) - 1}]" + "[0-9]" * rest)
    parts.append(hi[0] + _fixed_range("0" * rest, hi[1:]))
    return "(?:" + "|".join(parts) + ")"


class _Parser:
    """Recursive descent over Lucene's RegExp grammar; the messages are Lucene's."""

    def __init__(self, text: str, flags: int, case_insensitive: bool) -> None:
        self.s = text
        self.pos = 0
        self.flags = flags
        self.ci = case_insensitive
        self.depth = 0

    def more(self) -> bool:
        return self.pos < len(self.s)

    def peek(self, chars: str) -> bool:
        return self.more() and self.s[self.pos] in chars

    def match(self, ch: str) -> bool:
        if self.more() and self.s[self.pos] == ch:
            self.pos += 1
            return True
        return False

    def next(self) -> str:
        if not self.more():
            raise PatternError("unexpected end-of-string")
        ch = self.s[self.pos]
        self.pos += 1
        return ch

    def check(self, flag: int) -> bool:
        return bool(self.flags & flag)

    def parse(self) -> Node:
        if not self.s:
            return _re("", 0)
        e = self.union()
        if self.more():
            raise PatternError(f"end-of-string expected at position {self.pos}")
        return e

    # Lucene recurses for every `|`, `&` and concatenated piece; these loops build the same
    # trees without a Python frame per character.

    def union(self) -> Node:
        e = self.inter()
        while self.match("|"):
            e = _union(e, self.inter())
        return e

    def inter(self) -> Node:
        e = self.concat()
        while self.check(INTERSECTION) and self.match("&"):
            other = self.concat()
            e = Node(None, max(e.size, 1) * max(other.size, 1), "and", (e, other))
        return e

    def concat(self) -> Node:
        parts = [self.repeat()]
        while self.more() and not self.peek(")|") and not (self.check(INTERSECTION) and self.peek("&")):
            parts.append(self.repeat())
        if len(parts) == 1:
            return parts[0]
        if any(p.regex is None for p in parts):
            raise _inexpressible()
        return _re("".join(f"(?:{p.regex})" for p in parts), sum(p.size for p in parts))

    def repeat(self) -> Node:
        e = self.complement()
        while self.peek("?*+{"):
            if self.match("?"):
                e = _repeat(e, 0, 1)
            elif self.match("*"):
                e = _repeat(e, 0, None)
            elif self.match("+"):
                e = _repeat(e, 1, None)
            elif self.match("{"):
                low = self.integer()
                high: int | None = low
                if self.match(","):
                    high = self.integer() if self.peek("0123456789") else None
                if not self.match("}"):
                    raise PatternError(f"expected '}}' at position {self.pos}")
                e = _repeat(e, low, high)
        return e

    def integer(self) -> int:
        start = self.pos
        while self.peek("0123456789"):
            self.pos += 1
        if start == self.pos:
            raise PatternError(f"integer expected at position {self.pos}")
        value = int(self.s[start : self.pos])
        if value > 2**31 - 1:
            raise PatternError(f'For input string: "{self.s[start : self.pos]}"')
        return value

    def complement(self) -> Node:
        if self.check(COMPLEMENT) and self.match("~"):
            inner = self.complement()
            return Node(None, inner.size + 1, "not", (inner,))
        return self.char_class_exp()

    def char_class_exp(self) -> Node:
        if self.match("["):
            negate = self.match("^")
            ranges = self.char_classes()
            if not self.match("]"):
                raise PatternError(f"expected ']' at position {self.pos}")
            return _re(_class(tuple(ranges), negate), 1)
        return self.simple()

    def char_classes(self) -> list[tuple[int, int]]:
        ranges = self.char_class()
        while self.more() and not self.peek("]"):
            ranges += self.char_class()
        return ranges

    def char_class(self) -> list[tuple[int, int]]:
        predefined = self.predefined()
        if predefined is not None:
            return predefined
        low = ord(self.char_exp())
        if self.match("-"):
            high = ord(self.char_exp())
            if low > high:
                raise PatternError(f"invalid range: from ({low}) cannot be > to ({high})")
            return [(low, high)]
        return [(low, low)]

    def predefined(self) -> list[tuple[int, int]] | None:
        """`\\d \\s \\w` and their negations `\\D \\S \\W`, as code point ranges."""
        if self.pos + 1 < len(self.s) and self.s[self.pos] == "\\" and self.s[self.pos + 1] in "dDsSwW":
            letter = self.s[self.pos + 1]
            self.pos += 2
            ranges = _PREDEFINED[letter.lower()]
            return list(ranges) if letter.islower() else _negate(ranges)
        return None

    def char_exp(self) -> str:
        self.match("\\")
        return self.next()

    def simple(self) -> Node:
        if self.match("."):
            return _re("(?s:.)", 1)
        if self.check(EMPTY) and self.match("#"):
            return _re(_class(()), 0)
        if self.check(ANYSTRING) and self.match("@"):
            return _re("(?s:.)*", 1)
        if self.match('"'):
            start = self.pos
            while self.more() and not self.peek('"'):
                self.pos += 1
            if not self.match('"'):
                raise PatternError(f"expected '\"' at position {self.pos}")
            text = self.s[start : self.pos - 1]
            return _re("".join(_literal(c, self.ci) for c in text), len(text))
        if self.match("("):
            if self.match(")"):
                return _re("", 0)
            self.depth += 1
            if self.depth > MAX_GROUP_DEPTH:
                raise TooComplex(f"regular expression nests groups deeper than {MAX_GROUP_DEPTH}")
            e = self.union()
            self.depth -= 1
            if not self.match(")"):
                raise PatternError(f"expected ')' at position {self.pos}")
            return e
        if (self.check(AUTOMATON) or self.check(INTERVAL)) and self.match("<"):
            return self.interval()
        predefined = self.predefined()
        if predefined is not None:
            return _re(_class(tuple(predefined)), 1)
        return _re(_literal(self.char_exp(), self.ci), 1)

    def interval(self) -> Node:
        start = self.pos
        while self.more() and not self.peek(">"):
            self.pos += 1
        if not self.match(">"):
            raise PatternError(f"expected '>' at position {self.pos}")
        body = self.s[start : self.pos - 1]
        dash = body.find("-")
        if dash == -1:
            if not self.check(AUTOMATON):
                raise PatternError(f"interval syntax error at position {self.pos - 1}")
            raise PatternError(f"'{body}' not found")
        if not self.check(INTERVAL):
            raise PatternError(f"illegal identifier at position {self.pos - 1}")
        low_text, high_text = body[:dash], body[dash + 1 :]
        if not (low_text.isdigit() and high_text.isdigit() and low_text.isascii() and high_text.isascii()):
            raise PatternError(f"interval syntax error at position {self.pos - 1}")
        low, high = int(low_text), int(high_text)
        if max(low, high) > 2**31 - 1:
            raise PatternError(f"interval syntax error at position {self.pos - 1}")
        digits = len(low_text) if len(low_text) == len(high_text) else 0
        low, high = min(low, high), max(low, high)
        regex = _interval(low, high, digits)
        return _re(regex, len(regex))


def _negate(ranges: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    out, start = [], 0
    for a, b in sorted(ranges):
        if a > start:
            out.append((start, a - 1))
        start = b + 1
    if start <= _MAX_CODE_POINT:
        out.append((start, _MAX_CODE_POINT))
    return out


def parse_regexp(text: str, flags: int = ALL, case_insensitive: bool = False) -> Node:
    """The parsed form of a Lucene regular expression; raises Lucene's parse errors."""
    return _Parser(text, flags, case_insensitive).parse()


def wildcard(text: str, case_insensitive: bool = False) -> Node:
    """Lucene's WildcardQuery syntax: `*` any string, `?` any character, `\\` escapes the next
    character (a trailing one is itself)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(_literal(text[i + 1], case_insensitive))
            i += 2
            continue
        out.append("(?s:.)*" if ch == "*" else "(?s:.)" if ch == "?" else _literal(ch, case_insensitive))
        i += 1
    return _re("".join(out), len(out))


def prefix(text: str, case_insensitive: bool = False) -> Node:
    return _re("".join(_literal(c, case_insensitive) for c in text) + "(?s:.)*", len(text) + 1)
