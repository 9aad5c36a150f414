"""A subset of Painless, compiled once into a tree of Python closures (never `eval`).

What is there (docs/scripts.md): literals (numbers, strings, `true`/`false`/`null`, `[...]`
lists, `[k: v]` maps), variables declared with `def` or a type (`int`, `long`, `double`,
`String`, `List`, `Map`, ...), the operators of Java (arithmetic with Java's integer division and
remainder, comparisons, `&&`/`||`/`!`, `?:` and the Elvis `?:`, `?.` null-safe access, `+` on
strings, compound assignment, `++`/`--`, `instanceof`, casts), `if`/`else`, `for` (both forms),
`while`, `do`/`while`, `break`, `continue`, `return`, `new ArrayList()`/`HashMap`/`HashSet`, and
the methods of `runtime.py` (strings, lists, maps, `Math`, doc values).

Bounded: the source's size (`MAX_SOURCE`), its nesting while parsing (`MAX_DEPTH`), and the
statements and loop turns one run executes (`MAX_STATEMENTS`: Painless's loop counter), so no
script can stall the node. Errors carry the offset they happened at, which
`errors.ScriptError` renders as Elasticsearch's `script_stack` and `position`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from leafsearch.scripts import runtime, vector_functions
from leafsearch.scripts.runtime import ScriptError

#: Painless's loop counter: statements and loop turns one execution may take.
MAX_STATEMENTS = 1_000_000
LOOP_LIMIT = "The maximum number of statements that can be executed in a loop has been reached."
#: How deep expressions and blocks may nest (each level is a Python frame when it runs).
MAX_DEPTH = 64

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<number>0[xX][0-9a-fA-F]+[lL]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[lLfFdD]?)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op>\?\.|\?:|===|!==|==|!=|<=|>=|&&|\|\||\+\+|--|\+=|-=|\*=|/=|%=|->|[-+*/%<>=!?:.,;(){}\[\]&|^~])
    """,
    re.VERBOSE | re.DOTALL,
)

_KEYWORDS = {
    "if", "else", "for", "while", "do", "return", "break", "continue", "new", "true", "false", "null",
    "instanceof", "in", "def",
}  # fmt: skip
_TYPES = {
    "def", "int", "long", "short", "byte", "char", "float", "double", "boolean", "String", "Object",
    "List", "ArrayList", "Map", "HashMap", "Set", "HashSet", "Integer", "Long", "Double", "Float",
    "Boolean", "Number", "Collection", "ZonedDateTime", "Instant", "GeoPoint",
}  # fmt: skip


@dataclass(frozen=True)
class Token:
    kind: str  # number, string, name, op, end
    text: str
    offset: int


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise ScriptError("compile error", source, position, "illegal_argument_exception",
                              f"unexpected character [{source[position]}].")  # fmt: skip
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append(Token(kind, match.group(), position))
        position = match.end()
    tokens.append(Token("end", "<EOF>", len(source)))
    return tokens


# ---- the running state -------------------------------------------------------------------------


class Frame:
    """One execution: its variables (scopes of a dict each) and the statements left."""

    __slots__ = ("scopes", "budget", "source")

    def __init__(self, variables: dict[str, Any], source: str) -> None:
        self.scopes = [variables]
        self.budget = MAX_STATEMENTS
        self.source = source

    def lookup(self, name: str, offset: int) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise ScriptError("compile error", self.source, offset, "illegal_argument_exception",
                          f"cannot resolve symbol [{name}]")  # fmt: skip

    def assign(self, name: str, value: Any, offset: int) -> None:
        for scope in reversed(self.scopes):
            if name in scope:
                scope[name] = value
                return
        raise ScriptError("compile error", self.source, offset, "illegal_argument_exception",
                          f"cannot resolve symbol [{name}]")  # fmt: skip

    def tick(self, offset: int) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise ScriptError("runtime error", self.source, offset, "painless_error", LOOP_LIMIT)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


Expr = Callable[[Frame], Any]
Stmt = Callable[[Frame], None]


@dataclass(frozen=True)
class Place:
    """Where an assignment writes: a variable, a member or an index, with its reader."""

    read: Expr
    write: Callable[[Frame, Any], None]


# ---- the parser and compiler ----------------------------------------------------------------


class TokenCursor:
    """A recursive-descent parser's place in a script's tokens (it never moves past the last,
    `end`) and its nesting depth."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.at = 0
        self.depth = 0

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.at + ahead, len(self.tokens) - 1)]

    def next(self) -> Token:
        token = self.tokens[self.at]
        self.at = min(self.at + 1, len(self.tokens) - 1)
        return token

    def is_op(self, *texts: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.text in texts


class Compiler(TokenCursor):
    """Recursive descent over the tokens, returning closures as it goes."""

    def __init__(self, source: str) -> None:
        super().__init__(tokenize(source))
        self.source = source

    def is_name(self, *texts: str) -> bool:
        token = self.peek()
        return token.kind == "name" and token.text in texts

    def expect(self, text: str) -> Token:
        token = self.next()
        if token.text != text or token.kind not in ("op", "name"):
            self.fail(token, f"invalid sequence of tokens near [{token.text}]: expected [{text}]")
        return token

    def fail(self, token: Token, message: str) -> Any:
        raise ScriptError("compile error", self.source, token.offset, "illegal_argument_exception", message)

    def nest(self, token: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(token, f"the script nests more than {MAX_DEPTH} levels")

    # statements
    def program(self) -> Stmt:
        statements = []
        while self.peek().kind != "end":
            statements.append(self.statement())
        return _block(statements, scoped=False)

    def statement(self) -> Stmt:
        token = self.peek()
        self.nest(token)
        try:
            return self._statement(token)
        finally:
            self.depth -= 1

    def _statement(self, token: Token) -> Stmt:
        if token.kind == "op" and token.text == "{":
            return self.block()
        if token.kind == "op" and token.text == ";":
            self.next()
            return lambda frame: None
        if token.kind == "name":
            word = token.text
            if word == "if":
                return self.if_statement()
            if word == "while":
                return self.while_statement()
            if word == "do":
                return self.do_statement()
            if word == "for":
                return self.for_statement()
            if word in ("break", "continue"):
                self.next()
                self.end_statement()
                signal = _Break if word == "break" else _Continue

                def jump(frame: Frame) -> None:
                    raise signal()

                return jump
            if word == "return":
                self.next()
                value = None if self.is_op(";", "}") or self.peek().kind == "end" else self.expression()
                self.end_statement()
                offset = token.offset

                def give(frame: Frame) -> None:
                    frame.tick(offset)
                    raise _Return(value(frame) if value is not None else None)

                return give
            if self.declaration_ahead():
                declared = self.declaration()
                self.end_statement()
                return declared
        value = self.expression()
        self.end_statement()
        offset = token.offset

        def evaluate(frame: Frame) -> None:
            frame.tick(offset)
            value(frame)

        evaluate.value = value  # type: ignore[attr-defined] - the last statement's value is returned
        return evaluate

    def end_statement(self) -> None:
        if self.is_op(";"):
            self.next()
        elif not (self.is_op("}") or self.peek().kind == "end"):
            token = self.peek()
            self.fail(token, f"invalid sequence of tokens near [{token.text}]: expected [;]")

    def block(self) -> Stmt:
        self.expect("{")
        statements = []
        while not self.is_op("}"):
            if self.peek().kind == "end":
                self.fail(self.peek(), "invalid sequence of tokens near [<EOF>]: expected [}]")
            statements.append(self.statement())
        self.next()
        return _block(statements, scoped=True)

    def declaration_ahead(self) -> bool:
        """A type (with generic arguments or `[]`) followed by a name."""
        token = self.peek()
        if token.kind != "name" or (token.text in _KEYWORDS and token.text != "def"):
            return False
        ahead = 1
        if self.peek(ahead).text == "<":
            depth = 0
            while True:
                text = self.peek(ahead).text
                depth += text == "<"
                depth -= text == ">"
                ahead += 1
                if depth == 0 or self.peek(ahead).kind == "end":
                    break
        while self.peek(ahead).text == "[" and self.peek(ahead + 1).text == "]":
            ahead += 2
        return self.peek(ahead).kind == "name" and (token.text in _TYPES or token.text[0].isupper())

    def skip_type(self) -> str:
        name = self.next().text
        if self.is_op("<"):
            depth = 0
            while True:
                text = self.next().text
                depth += text == "<"
                depth -= text == ">"
                if depth == 0:
                    break
        while self.is_op("[") and self.peek(1).text == "]":
            self.next()
            self.next()
        return name

    def declaration(self) -> Stmt:
        type_name = self.skip_type()
        parts: list[tuple[str, Expr | None, int]] = []
        while True:
            token = self.next()
            if token.kind != "name" or token.text in _KEYWORDS:
                self.fail(token, f"invalid sequence of tokens near [{token.text}]: expected a variable name")
            value = None
            if self.is_op("="):
                self.next()
                value = self.expression()
            parts.append((token.text, value, token.offset))
            if not self.is_op(","):
                break
            self.next()
        default = runtime.default_of(type_name)
        convert = runtime.converter(type_name)

        def declare(frame: Frame) -> None:
            scope = frame.scopes[-1]
            for name, value, offset in parts:
                frame.tick(offset)
                scope[name] = default if value is None else convert(value(frame), frame.source, offset)

        return declare

    def condition(self) -> Expr:
        self.expect("(")
        test = self.expression()
        self.expect(")")
        return test

    def if_statement(self) -> Stmt:
        token = self.next()
        test = self.condition()
        then = self.statement()
        otherwise = None
        if self.is_name("else"):
            self.next()
            otherwise = self.statement()
        offset = token.offset

        def branch(frame: Frame) -> None:
            frame.tick(offset)
            if runtime.truth(test(frame), frame.source, offset):
                then(frame)
            elif otherwise is not None:
                otherwise(frame)

        return branch

    def while_statement(self) -> Stmt:
        token = self.next()
        test = self.condition()
        body = self.statement()
        offset = token.offset

        def loop(frame: Frame) -> None:
            while runtime.truth(test(frame), frame.source, offset):
                frame.tick(offset)
                try:
                    body(frame)
                except _Break:
                    break
                except _Continue:
                    continue

        return loop

    def do_statement(self) -> Stmt:
        token = self.next()
        body = self.statement()
        if not self.is_name("while"):
            self.fail(self.peek(), "invalid sequence of tokens: expected [while]")
        self.next()
        test = self.condition()
        self.end_statement()
        offset = token.offset

        def loop(frame: Frame) -> None:
            while True:
                frame.tick(offset)
                try:
                    body(frame)
                except _Break:
                    break
                except _Continue:
                    pass
                if not runtime.truth(test(frame), frame.source, offset):
                    break

        return loop

    def for_statement(self) -> Stmt:
        token = self.next()
        offset = token.offset
        self.expect("(")
        # for (def x : items) / for (x in items)
        if self.peek().kind == "name" and (
            (self.declaration_ahead() and self.peek(2).text == ":") or self.peek(1).text == "in"
        ):
            if self.peek(1).text != "in":
                self.skip_type()
            name = self.next().text
            self.next()  # : or in
            items = self.expression()
            self.expect(")")
            body = self.statement()

            def each(frame: Frame) -> None:
                frame.scopes.append({})
                try:
                    for item in runtime.iterate(items(frame), frame.source, offset):
                        frame.tick(offset)
                        frame.scopes[-1][name] = item
                        try:
                            body(frame)
                        except _Break:
                            break
                        except _Continue:
                            continue
                finally:
                    frame.scopes.pop()

            return each
        start: Stmt | None = None
        if not self.is_op(";"):
            start = (
                self.declaration() if self.declaration_ahead() else _expression_statement(self.expression())
            )
        self.expect(";")
        test = None if self.is_op(";") else self.expression()
        self.expect(";")
        step = None if self.is_op(")") else self.expression()
        self.expect(")")
        body = self.statement()

        def loop(frame: Frame) -> None:
            frame.scopes.append({})
            try:
                if start is not None:
                    start(frame)
                while test is None or runtime.truth(test(frame), frame.source, offset):
                    frame.tick(offset)
                    try:
                        body(frame)
                    except _Break:
                        break
                    except _Continue:
                        pass
                    if step is not None:
                        step(frame)
            finally:
                frame.scopes.pop()

        return loop

    # expressions, lowest precedence first
    def expression(self) -> Expr:
        token = self.peek()
        self.nest(token)
        try:
            return self.assignment()
        finally:
            self.depth -= 1

    def assignment(self) -> Expr:
        start = self.at
        target = self.conditional()
        if self.is_op("=", "+=", "-=", "*=", "/=", "%="):
            token = self.next()
            place = getattr(target, "place", None)
            if place is None:
                self.at = start
                self.fail(token, "invalid assignment: cannot assign a value to this expression")
            value = self.expression()
            operator = token.text[:-1]
            offset = token.offset

            def assign(frame: Frame) -> Any:
                new = value(frame)
                if operator:
                    new = runtime.binary(operator, place.read(frame), new, frame.source, offset)
                place.write(frame, new)
                return new

            return assign
        return target

    def conditional(self) -> Expr:
        test = self.logical_or()
        if self.is_op("?"):
            token = self.next()
            then = self.expression()
            self.expect(":")
            otherwise = self.expression()
            offset = token.offset
            return lambda frame: (
                then(frame) if runtime.truth(test(frame), frame.source, offset) else otherwise(frame)
            )
        if self.is_op("?:"):
            self.next()
            otherwise = self.expression()

            def elvis(frame: Frame) -> Any:
                value = test(frame)
                return otherwise(frame) if value is None else value

            return elvis
        return test

    def logical_or(self) -> Expr:
        left = self.logical_and()
        while self.is_op("||"):
            offset = self.next().offset
            right = self.logical_and()
            left = _or(left, right, offset)
        return left

    def logical_and(self) -> Expr:
        left = self.equality()
        while self.is_op("&&"):
            offset = self.next().offset
            right = self.equality()
            left = _and(left, right, offset)
        return left

    def equality(self) -> Expr:
        left = self.comparison()
        while self.is_op("==", "!=", "===", "!=="):
            token = self.next()
            right = self.comparison()
            left = _binary(token.text, left, right, token.offset)
        return left

    def comparison(self) -> Expr:
        left = self.additive()
        while self.is_op("<", ">", "<=", ">=") or self.is_name("instanceof"):
            token = self.next()
            if token.text == "instanceof":
                type_name = self.skip_type()
                left = _instanceof(left, type_name)
                continue
            right = self.additive()
            left = _binary(token.text, left, right, token.offset)
        return left

    def additive(self) -> Expr:
        left = self.multiplicative()
        while self.is_op("+", "-"):
            token = self.next()
            right = self.multiplicative()
            left = _binary(token.text, left, right, token.offset)
        return left

    def multiplicative(self) -> Expr:
        left = self.unary()
        while self.is_op("*", "/", "%"):
            token = self.next()
            right = self.unary()
            left = _binary(token.text, left, right, token.offset)
        return left

    def unary(self) -> Expr:
        token = self.peek()
        if token.kind == "op" and token.text in ("!", "-", "+", "~"):
            self.next()
            self.nest(token)
            try:
                operand = self.unary()
            finally:
                self.depth -= 1
            offset = token.offset
            return lambda frame: runtime.unary(token.text, operand(frame), frame.source, offset)
        if token.kind == "op" and token.text in ("++", "--"):
            self.next()
            target = self.unary()
            return _increment(self, target, token, prefix=True)
        if token.kind == "op" and token.text == "(" and self.cast_ahead():
            self.next()
            type_name = self.skip_type()
            self.expect(")")
            operand = self.unary()
            convert = runtime.converter(type_name)
            offset = token.offset
            return lambda frame: convert(operand(frame), frame.source, offset)
        return self.postfix()

    def cast_ahead(self) -> bool:
        first, second = self.peek(1), self.peek(2)
        return (
            first.kind == "name"
            and first.text in _TYPES
            and first.text != "def"
            and second.text in (")", "[")
        )

    def postfix(self) -> Expr:
        value = self.primary()
        while True:
            token = self.peek()
            if token.kind != "op":
                return value
            if token.text in (".", "?."):
                self.next()
                name = self.next()
                if name.kind != "name":
                    self.fail(name, f"invalid sequence of tokens near [{name.text}]: expected a member name")
                safe = token.text == "?."
                if self.is_op("("):
                    arguments = self.arguments()
                    value = _call(value, name.text, arguments, name.offset, safe)
                else:
                    value = _member(value, name.text, name.offset, safe)
            elif token.text == "[":
                self.next()
                key = self.expression()
                self.expect("]")
                value = _index(value, key, token.offset)
            elif token.text in ("++", "--"):
                self.next()
                value = _increment(self, value, token, prefix=False)
            else:
                return value

    def arguments(self) -> list[Expr]:
        self.expect("(")
        arguments: list[Expr] = []
        while not self.is_op(")"):
            arguments.append(self.expression())
            if not self.is_op(","):
                break
            self.next()
        self.expect(")")
        return arguments

    def primary(self) -> Expr:
        token = self.next()
        if token.kind == "number":
            constant = runtime.number(token.text)
            return lambda frame: constant
        if token.kind == "string":
            text = runtime.string_literal(token.text)
            return lambda frame: text
        if token.kind == "name":
            word = token.text
            if word in ("true", "false"):
                flag = word == "true"
                return lambda frame: flag
            if word == "null":
                return lambda frame: None
            if word == "new":
                type_name = self.skip_type()
                arguments = self.arguments()
                offset = token.offset
                return lambda frame: runtime.construct(
                    type_name, [a(frame) for a in arguments], frame.source, offset
                )
            if word in vector_functions.NAMES and self.is_op("("):
                arguments = self.arguments()
                offset = token.offset
                return lambda frame: vector_functions.call(
                    word, [a(frame) for a in arguments], frame.lookup("doc", offset), frame.source, offset
                )
            if word in runtime.STATICS:
                return lambda frame: runtime.STATICS[word]
            if word in _KEYWORDS:
                self.fail(token, f"invalid sequence of tokens near [{word}]")
            return _variable(word, token.offset)
        if token.kind == "op" and token.text == "(":
            inner = self.expression()
            self.expect(")")
            return inner
        if token.kind == "op" and token.text == "[":
            return self.collection(token)
        return self.fail(token, f"invalid sequence of tokens near [{token.text}]")

    def collection(self, token: Token) -> Expr:
        """`[a, b]`, `[:]` or `[k: v, ...]`."""
        if self.is_op(":"):
            self.next()
            self.expect("]")
            return lambda frame: {}
        if self.is_op("]"):
            self.next()
            return lambda frame: []
        first = self.expression()
        if self.is_op(":"):
            self.next()
            pairs = [(first, self.expression())]
            while self.is_op(","):
                self.next()
                key = self.expression()
                self.expect(":")
                pairs.append((key, self.expression()))
            self.expect("]")
            return lambda frame: {k(frame): v(frame) for k, v in pairs}
        items = [first]
        while self.is_op(","):
            self.next()
            items.append(self.expression())
        self.expect("]")
        return lambda frame: [item(frame) for item in items]


# ---- the closures -------------------------------------------------------------------------------


def _block(statements: list[Stmt], *, scoped: bool) -> Stmt:
    if not scoped:

        def run(frame: Frame) -> None:
            for statement in statements:
                statement(frame)

        run.statements = statements  # type: ignore[attr-defined]
        return run

    def scope(frame: Frame) -> None:
        frame.scopes.append({})
        try:
            for statement in statements:
                statement(frame)
        finally:
            frame.scopes.pop()

    return scope


def _expression_statement(value: Expr) -> Stmt:
    def run(frame: Frame) -> None:
        value(frame)

    return run


def _or(left: Expr, right: Expr, offset: int) -> Expr:
    return lambda frame: (
        runtime.truth(left(frame), frame.source, offset) or runtime.truth(right(frame), frame.source, offset)
    )


def _and(left: Expr, right: Expr, offset: int) -> Expr:
    return lambda frame: (
        runtime.truth(left(frame), frame.source, offset) and runtime.truth(right(frame), frame.source, offset)
    )


def _binary(operator: str, left: Expr, right: Expr, offset: int) -> Expr:
    return lambda frame: runtime.binary(operator, left(frame), right(frame), frame.source, offset)


def _instanceof(value: Expr, type_name: str) -> Expr:
    return lambda frame: runtime.instance_of(value(frame), type_name)


def _variable(name: str, offset: int) -> Expr:
    def read(frame: Frame) -> Any:
        return frame.lookup(name, offset)

    read.place = Place(read, lambda frame, value: frame.assign(name, value, offset))  # type: ignore[attr-defined]
    return read


def _member(target: Expr, name: str, offset: int, safe: bool) -> Expr:
    def read(frame: Frame) -> Any:
        owner = target(frame)
        if owner is None and safe:
            return None
        return runtime.get_member(owner, name, frame.source, offset)

    def write(frame: Frame, value: Any) -> None:
        runtime.set_member(target(frame), name, value, frame.source, offset)

    read.place = Place(read, write)  # type: ignore[attr-defined]
    return read


def _index(target: Expr, key: Expr, offset: int) -> Expr:
    def read(frame: Frame) -> Any:
        return runtime.get_item(target(frame), key(frame), frame.source, offset)

    def write(frame: Frame, value: Any) -> None:
        runtime.set_item(target(frame), key(frame), value, frame.source, offset)

    read.place = Place(read, write)  # type: ignore[attr-defined]
    return read


def _call(target: Expr, name: str, arguments: list[Expr], offset: int, safe: bool) -> Expr:
    def call(frame: Frame) -> Any:
        owner = target(frame)
        if owner is None and safe:
            return None
        return runtime.call_method(owner, name, [a(frame) for a in arguments], frame.source, offset)

    return call


def _increment(compiler: Compiler, target: Expr, token: Token, *, prefix: bool) -> Expr:
    place = getattr(target, "place", None)
    if place is None:
        compiler.fail(token, f"invalid use of [{token.text}]: it needs a variable, field or element")
    delta = 1 if token.text == "++" else -1
    offset = token.offset

    def step(frame: Frame) -> Any:
        old = place.read(frame)
        new = runtime.binary("+", old, delta, frame.source, offset)
        place.write(frame, new)
        return new if prefix else old

    return step


# ---- a compiled script ----------------------------------------------------------------------------


class CompiledScript:
    """A script's source compiled once; `run` executes it on its variables (`params`, `ctx`,
    `doc`, ...), returning the value of its `return` or of its last expression statement."""

    def __init__(self, source: str) -> None:
        self.source = source
        compiler = Compiler(source)
        self._body = compiler.program()
        statements = getattr(self._body, "statements", [])
        last = statements[-1] if statements else None
        self._last_value: Expr | None = getattr(last, "value", None)
        self._leading = _block(statements[:-1], scoped=False) if self._last_value else self._body

    def run(self, variables: dict[str, Any]) -> Any:
        frame = Frame(dict(variables), self.source)
        try:
            self._leading(frame)
            if self._last_value is not None:
                frame.tick(0)
                return self._last_value(frame)
            return None
        except _Return as done:
            return done.value
        except (_Break, _Continue):
            return None
        except RecursionError:
            raise ScriptError("runtime error", self.source, 0, "stack_overflow_error", "too deep") from None
