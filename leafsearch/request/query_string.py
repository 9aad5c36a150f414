"""The Lucene query syntaxes: `query_string` (and the URL `q=`) and `simple_query_string`.

Both parse into a small tree of `Leaf`s (one term, phrase, wildcard, range... with an optional
field) inside `Group`s whose clauses carry Lucene's occurs (must / should / must_not). The tree does
not depend on the mapping; `to_query` turns it into the query DSL's nodes with a callback that
expands fields and analyzes text per shard, the way Elasticsearch's query parsers call back into
field types. Boolean semantics follow Lucene's classic QueryParser (`AND` makes the previous clause
required, `OR` under `default_operator: and` makes it optional again, `NOT`/`-`/`!` prohibit, and a
group of only prohibited clauses also matches everything else, as Elasticsearch's
fixNegativeQueryIfNeeded does) and Lucene's SimpleQueryParser (`+` `|` `-` with left-to-right
precedence changes). Runs of plain words are kept together ("split on operators only"), so that
multi-field queries combine per field as Elasticsearch does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from leafsearch.request.query_dsl import Bool, MatchAll, MatchNone, Query


class QuerySyntaxError(ValueError):
    """A query string that Lucene's parser refuses; the message is Lucene's "Cannot parse ..."."""


@dataclass(frozen=True, slots=True)
class Leaf:
    """One searchable unit. `kind`: text (analyzed words; `multi` when several plain words ran
    together), phrase, prefix, wildcard, regexp, fuzzy, range, exists, all."""

    kind: str
    field: str | None
    text: str = ""
    slop: int | None = None
    fuzziness: str | None = None
    lower: str | None = None
    upper: str | None = None
    include_lower: bool = True
    include_upper: bool = True
    multi: bool = False
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Group:
    clauses: tuple[tuple[str, Node], ...]
    boost: float = 1.0


Node = Leaf | Group

#: Builds the query of one leaf for the shard's mapping. A list means "several clauses that the
#: enclosing group takes in directly" (Lucene's flattening of a multi-word run into term clauses).
LeafBuilder = Callable[[Leaf], "Query | list[Query] | None"]


def to_query(node: Node, build: LeafBuilder, default_operator: str) -> Query:
    """The query DSL tree of a parsed query string."""
    query = _node_query(node, build, default_operator)
    return MatchNone() if query is None else query


def _occur_of(operator: str) -> str:
    return "must" if operator == "and" else "should"


def _node_query(node: Node, build: LeafBuilder, operator: str) -> Query | None:
    if isinstance(node, Leaf):
        built = build(node)
        if isinstance(built, list):
            if not built:
                return None
            built = built[0] if len(built) == 1 else _bool([(_occur_of(operator), q) for q in built])
        if built is None:
            return None
        return _boosted(built, node.boost)
    clauses: list[tuple[str, Query]] = []
    for occur, child in node.clauses:
        if isinstance(child, Leaf) and child.multi:
            built = build(child)
            if isinstance(built, list):
                clauses.extend((_occur_of(operator), q) for q in built)
            elif built is not None:
                clauses.append(("should", _boosted(built, child.boost)))
            continue
        query = _node_query(child, build, operator)
        if query is not None:
            clauses.append((occur, query))
    if not clauses:
        return None
    if len(clauses) == 1 and clauses[0][0] in ("must", "should") and node.boost == 1.0:
        return clauses[0][1]
    return _boosted(_bool(clauses), node.boost)


def _bool(clauses: list[tuple[str, Query]]) -> Bool:
    must = tuple(q for o, q in clauses if o == "must")
    should = tuple(q for o, q in clauses if o == "should")
    must_not = tuple(q for o, q in clauses if o == "must_not")
    filters: tuple[Query, ...] = ()
    if must_not and not must and not should:
        filters = (MatchAll(),)
    return Bool(must=must, should=should, must_not=must_not, filter=filters)


def _boosted(query: Query, boost: float) -> Query:
    if boost == 1.0:
        return query
    return Bool(must=(query,), boost=boost)


# ---------------------------------------------------------------------------------------------
# query_string: Lucene's classic syntax

#: What Lucene's lexer reads as the number after `~` (anything else is a term of its own).
_FUZZY_SLOP = re.compile(r"\d+(?:\.\d+)?")

_TERM_SPECIAL = set(' \t\n\r\u3000!():^[]"{}~\\/')  # '+', '-', '*', '?' may continue a term


@dataclass(slots=True)
class _Token:
    # TERM QUOTED REGEX AND OR NOT PLUS MINUS LPAREN RPAREN COLON CARAT TILDE RANGE_START RANGE_END EOF
    kind: str
    text: str
    pos: int
    raw: str = ""  # TERM: the text with escapes kept, to tell wildcards from escaped '*'


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\n\r\u3000":
            i += 1
            continue
        start = i
        if text.startswith("&&", i):
            tokens.append(_Token("AND", "&&", start))
            i += 2
        elif text.startswith("||", i):
            tokens.append(_Token("OR", "||", start))
            i += 2
        elif c in "+-!():^~[]{}":
            kind = {
                "+": "PLUS",
                "-": "MINUS",
                "!": "NOT",
                "(": "LPAREN",
                ")": "RPAREN",
                ":": "COLON",
                "^": "CARAT",
                "~": "TILDE",
                "[": "RANGE_START",
                "{": "RANGE_START",
                "]": "RANGE_END",
                "}": "RANGE_END",
            }[c]
            tokens.append(_Token(kind, c, start))
            i += 1
        elif c == '"':
            i += 1
            buf: list[str] = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    buf.append(text[i + 1])
                    i += 2
                else:
                    buf.append(text[i])
                    i += 1
            if i >= n:
                raise QuerySyntaxError(
                    f"Cannot parse '{text}': Lexical error at line 1, column {n + 1}.  "
                    f'Encountered: <EOF> after : "{text[start:]}"'
                )
            i += 1
            tokens.append(_Token("QUOTED", "".join(buf), start))
        elif c == "/":
            j = i + 1
            while j < n and text[j] != "/":
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise QuerySyntaxError(
                    f"Cannot parse '{text}': Lexical error at line 1, column {n + 1}.  "
                    f'Encountered: <EOF> after : "{text[start:]}"'
                )
            tokens.append(_Token("REGEX", text[i + 1 : j], start))
            i = j + 1
        else:
            raw: list[str] = []
            while i < n and (text[i] not in _TERM_SPECIAL or text[i] == "\\"):
                if text[i] == "\\":
                    if i + 1 >= n:
                        raise QuerySyntaxError(
                            f"Cannot parse '{text}': Term can not end with escape character."
                        )
                    raw.append(text[i : i + 2])
                    i += 2
                else:
                    raw.append(text[i])
                    i += 1
            raw_text = "".join(raw)
            word = _unescape(raw_text)
            kind = {"AND": "AND", "OR": "OR", "NOT": "NOT"}.get(raw_text, "TERM")
            tokens.append(_Token(kind, word, start, raw_text))
    tokens.append(_Token("EOF", "<EOF>", n))
    return tokens


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


def _has_wildcard(raw: str) -> bool:
    i = 0
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
            continue
        if raw[i] in "*?":
            return True
        i += 1
    return False


class _ClassicParser:
    """Recursive descent over Lucene's classic grammar:
    Query := (Conjunction? Modifiers? Clause)* ; Clause := [field ':'] (Term | '(' Query ')') ['^' n]."""

    def __init__(self, text: str, operator: str, allow_leading_wildcard: bool) -> None:
        self.text = text
        self.operator = operator
        self.tokens = _lex(text)
        self.i = 0
        self.allow_leading_wildcard = allow_leading_wildcard

    def peek(self, offset: int = 0) -> _Token:
        return self.tokens[min(self.i + offset, len(self.tokens) - 1)]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return token

    def fail(self, token: _Token) -> QuerySyntaxError:
        """Lucene's "Encountered" message (columns are 1-based; the end is reported at its offset)."""
        if token.kind == "EOF":
            return QuerySyntaxError(
                f"Cannot parse '{self.text}': Encountered \"<EOF>\" at line 1, column {token.pos}."
            )
        return QuerySyntaxError(
            f'Cannot parse \'{self.text}\': Encountered " <{token.kind}> "{token.text} "" '
            f"at line 1, column {token.pos + 1}."
        )

    def expect(self, kind: str) -> _Token:
        token = self.peek()
        if token.kind != kind:
            raise self.fail(token)
        return self.take()

    def parse(self) -> Node:
        node = self.query(None, top=True)
        if self.peek().kind != "EOF":
            raise self.fail(self.peek())
        return node

    def query(self, field: str | None, top: bool = False) -> Group:
        clauses: list[tuple[str, Node]] = []
        first = True
        while True:
            token = self.peek()
            if token.kind == "EOF" or (token.kind == "RPAREN" and not top):
                break
            if token.kind == "RPAREN":
                raise self.fail(token)
            conj = None
            if not first and token.kind in ("AND", "OR"):
                conj = self.take().kind
            elif first and token.kind in ("AND", "OR"):
                raise self.fail(token)
            if conj is None and self._multi_term_ahead():
                words = [self.take().text]
                while self._multi_term_continues():
                    words.append(self.take().text)
                clauses.append(("should", Leaf("text", field, " ".join(words), multi=True)))
                first = False
                continue
            mods = self.modifiers()
            clause = self.clause(field)
            self.add_clause(clauses, conj, mods, clause)
            first = False
        return Group(tuple(clauses))

    def _plain_term(self, offset: int) -> bool:
        token = self.peek(offset)
        return token.kind == "TERM" and not _has_wildcard(token.raw) and not token.text.startswith(("<", ">"))

    def _allowed_after_multi(self, offset: int) -> bool:
        return self.peek(offset).kind in ("EOF", "RPAREN", "TERM", "PLUS", "MINUS", "NOT", "QUOTED", "LPAREN")

    def _multi_term_ahead(self) -> bool:
        return (
            self._plain_term(0)
            and self._plain_term(1)
            and self._allowed_after_multi(2)
            and (self.peek(2).kind != "TERM" or self.peek(3).kind != "COLON")
        )

    def _multi_term_continues(self) -> bool:
        return (
            self._plain_term(0)
            and self._allowed_after_multi(1)
            and (self.peek(1).kind != "TERM" or self.peek(2).kind != "COLON")
        )

    def modifiers(self) -> str | None:
        kind = self.peek().kind
        if kind == "PLUS":
            self.take()
            return "req"
        if kind in ("MINUS", "NOT"):
            self.take()
            return "not"
        return None

    def add_clause(self, clauses: list, conj: str | None, mods: str | None, node: Node) -> None:
        """Lucene's addClause: `AND` makes the previous clause required and, under the AND default
        operator, `OR` makes it optional again (a prohibited clause stays prohibited)."""
        if clauses and clauses[-1][0] != "must_not":
            if conj == "AND":
                clauses[-1] = ("must", clauses[-1][1])
            elif conj == "OR" and self.operator == "and":
                clauses[-1] = ("should", clauses[-1][1])
        if mods == "not":
            clauses.append(("must_not", node))
        elif mods == "req" or conj == "AND" or (self.operator == "and" and conj != "OR"):
            clauses.append(("must", node))
        else:
            clauses.append(("should", node))

    def clause(self, field: str | None) -> Node:
        token = self.peek()
        if token.kind == "TERM" and self.peek(1).kind == "COLON":
            self.take()
            self.take()
            field = token.text
        if self.peek().kind == "LPAREN":
            self.take()
            group = self.query(field)
            self.expect("RPAREN")
            boost = self.boost()
            return Group(group.clauses, boost)
        return self.term(field)

    def boost(self) -> float:
        if self.peek().kind != "CARAT":
            return 1.0
        self.take()
        token = self.expect("TERM")
        try:
            return float(token.text)
        except ValueError:
            raise self.fail(token) from None

    def fuzz(self) -> str | None:
        if self.peek().kind != "TILDE":
            return None
        self.take()
        token = self.peek()
        if token.kind == "TERM" and _FUZZY_SLOP.fullmatch(token.raw):
            self.take()
            return token.text
        return "AUTO"

    def term(self, field: str | None) -> Node:
        token = self.take()
        if token.kind == "QUOTED":
            slop = self.fuzz()
            boost = self.boost()
            phrase_slop = None if slop in (None, "AUTO") else int(float(slop))
            return Leaf("phrase", field, token.text, slop=phrase_slop, boost=boost)
        if token.kind == "RANGE_START":
            return self.range(field, token)
        if token.kind == "REGEX":
            return Leaf("regexp", field, token.text, boost=self.boost())
        if token.kind != "TERM":
            raise self.fail(token)
        fuzziness = self.fuzz()
        boost = self.boost()
        text, raw = token.text, token.raw
        if field == "_exists_":
            return Leaf("exists", text, boost=boost)
        if fuzziness is not None and not _has_wildcard(raw):
            return Leaf("fuzzy", field, text, fuzziness=fuzziness, boost=boost)
        if raw == "*":
            return Leaf("all" if field in (None, "*") else "exists", field, boost=boost)
        if _has_wildcard(raw):
            if not self.allow_leading_wildcard and raw[0] in "*?":
                raise QuerySyntaxError(
                    f"Cannot parse '{self.text}': '*' or '?' not allowed as first character in WildcardQuery"
                )
            body = raw[:-1]
            if raw.endswith("*") and not raw.endswith("\\*") and not _has_wildcard(body):
                return Leaf("prefix", field, _unescape(body), boost=boost)
            return Leaf("wildcard", field, raw, boost=boost)
        for op, include in ((">=", True), ("<=", True), (">", False), ("<", False)):
            if text.startswith(op) and len(text) > len(op):
                bound = text[len(op) :]
                if op[0] == ">":
                    return Leaf("range", field, lower=bound, include_lower=include, boost=boost)
                return Leaf("range", field, upper=bound, include_upper=include, boost=boost)
        return Leaf("text", field, text, boost=boost)

    def range(self, field: str | None, start: _Token) -> Node:
        lower = self._range_bound()
        if self.peek().kind == "TERM" and self.peek().raw == "TO":
            self.take()
        upper = self._range_bound()
        end = self.expect("RANGE_END")
        return Leaf(
            "range",
            field,
            lower=lower,
            upper=upper,
            include_lower=start.text == "[",
            include_upper=end.text == "]",
            boost=self.boost(),
        )

    def _range_bound(self) -> str | None:
        token = self.take()
        if token.kind == "QUOTED":
            return token.text
        if token.kind != "TERM":
            raise self.fail(token)
        return None if token.raw == "*" else token.text


def parse_query_string(
    text: str, default_operator: str = "or", allow_leading_wildcard: bool = True
) -> Node | None:
    """The tree of a `query_string` query; None for an empty query (which matches nothing)."""
    if not text.strip():
        return None
    return _ClassicParser(text, default_operator, allow_leading_wildcard).parse()


# ---------------------------------------------------------------------------------------------
# simple_query_string: Lucene's SimpleQueryParser


_SIMPLE_BREAK = set(' \t\n\r\u3000"|+()')


class _SimpleParser:
    def __init__(self, text: str, operator: str) -> None:
        self.text = text
        self.i = 0
        self.default_occur = _occur_of(operator)

    def parse(self) -> Node | None:
        return self.sub_query(top=True)

    def sub_query(self, top: bool) -> Node | None:
        top_node: Group | Node | None = None
        current: str | None = None
        previous: str | None = None
        negations = 0
        text, n = self.text, len(self.text)
        while self.i < n:
            c = text[self.i]
            branch: Node | None = None
            if c == "(":
                self.i += 1
                branch = self.sub_query(top=False)
            elif c == ")":
                self.i += 1
                if not top:
                    break
                continue
            elif c == '"':
                branch = self.phrase()
            elif c == "+":
                self.i += 1
                if current is None and top_node is not None:
                    current = "must"
                continue
            elif c == "|":
                self.i += 1
                if current is None and top_node is not None:
                    current = "should"
                continue
            elif c == "-":
                self.i += 1
                negations += 1
                continue
            elif c in " \t\n\r\u3000":
                self.i += 1
                continue
            else:
                branch = self.token()
            if branch is None:
                continue
            if negations % 2 == 1:
                branch = Group((("must_not", branch), ("should", Leaf("all", None))))
            negations = 0
            if top_node is None:
                top_node = branch
            else:
                occur = current or self.default_occur
                if previous != occur or not isinstance(top_node, Group):
                    top_node = Group(((occur, top_node),))
                top_node = Group(top_node.clauses + ((occur, branch),))
                previous = occur
            current = None
        return top_node

    def phrase(self) -> Node:
        text, n = self.text, len(self.text)
        self.i += 1
        buf: list[str] = []
        while self.i < n and text[self.i] != '"':
            if text[self.i] == "\\" and self.i + 1 < n:
                buf.append(text[self.i + 1])
                self.i += 2
            else:
                buf.append(text[self.i])
                self.i += 1
        self.i += 1
        slop = self._tilde_number()
        return Leaf("phrase", None, "".join(buf), slop=None if slop is None else int(slop))

    def _tilde_number(self) -> str | None:
        text, n = self.text, len(self.text)
        if self.i < n and text[self.i] == "~":
            self.i += 1
            start = self.i
            while self.i < n and text[self.i].isdigit():
                self.i += 1
            return text[start : self.i] or "AUTO"
        return None

    def token(self) -> Node | None:
        text, n = self.text, len(self.text)
        buf: list[str] = []
        while self.i < n and text[self.i] not in _SIMPLE_BREAK and text[self.i] != "~":
            if text[self.i] == "\\" and self.i + 1 < n:
                buf.append(text[self.i + 1])
                self.i += 2
                continue
            buf.append(text[self.i])
            self.i += 1
        fuzziness = self._tilde_number()
        word = "".join(buf)
        if not word:
            return None
        if fuzziness is not None:
            return Leaf("fuzzy", None, word, fuzziness=fuzziness)
        if word.endswith("*") and len(word) > 1:
            return Leaf("prefix", None, word[:-1])
        return Leaf("text", None, word)


def parse_simple_query_string(text: str, default_operator: str = "or") -> Node | None:
    """The tree of a `simple_query_string` query (which never fails to parse); None when empty."""
    return _SimpleParser(text, default_operator).parse()
