"""Column evaluation: a script that only computes with doc values, params, `_score` and `Math`
runs once over whole numpy columns instead of once per document.

The common search script (`script_score`, a `_script` sort, an aggregation's script, a `script`
query) is one expression: `Math.log(2 + doc['likes'].value) * params.w`, `doc['price'].value >
params.min && doc['stock'].value > 0`. `vectorize` compiles such a source (a single expression,
optionally after `return`) into a function over columns; any other source gives None and runs per
document (painless.py). The columns follow Java's semantics where numpy's differ: integer `/`
truncates toward zero, `%` takes the dividend's sign, `Math.round` is floor(x + 0.5).

A run answers None whenever the per-document path would answer differently (a document without a
value for `.value`, an integer division by zero, `&&` on a non-boolean, a param that is not a
number): the caller then runs the script per document, which gives the result or the exact
`script_exception`. So a column run is only ever a faster way to the same values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leafsearch.common.memo import memo
from leafsearch.index import geo
from leafsearch.scripts import runtime
from leafsearch.scripts.painless import Token, TokenCursor, tokenize
from leafsearch.scripts.runtime import ScriptError

#: A compiled expression's value: a numpy array of one value per document, or a scalar (a
#: constant, a param); an expression reads its inputs from `Columns`.
Value = Any
Expr = Callable[["Columns"], Value]


class _Fallback(Exception):
    """The column run cannot give what the per-document run gives: run that instead."""


@dataclass
class Columns:
    """The inputs of one run: each field's first value per document (`values`, or `points`:
    latitudes and longitudes for a geo_point field) and its value counts, the params, the scores
    and a value script's `_value`, over `n` documents."""

    values: dict[str, np.ndarray]
    counts: dict[str, np.ndarray]
    params: dict[str, Any]
    score: np.ndarray | None
    n: int
    value: np.ndarray | None = None
    points: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


@dataclass(frozen=True)
class VectorScript:
    """A script compiled for columns: `fields` are the doc values it reads."""

    fields: tuple[str, ...]
    reads_score: bool
    _expr: Expr

    def run(self, columns: Columns) -> np.ndarray | None:
        """The script's value for each document (booleans, longs or doubles), or None: run it
        per document."""
        try:
            with np.errstate(all="ignore"):
                value = np.asarray(self._expr(columns))
        except _Fallback:
            return None
        if value.dtype.kind not in "biuf":
            return None
        return np.full(columns.n, value) if value.ndim == 0 else value


@memo(256)
def vectorize(source: str) -> VectorScript | None:
    """`source` compiled for columns, or None when it is more than one such expression."""
    try:
        parser = _Parser(tokenize(source))
        expr = parser.program()
    except (_NotVector, ScriptError):
        return None
    return VectorScript(tuple(sorted(parser.fields)), parser.reads_score, expr)


class _NotVector(Exception):
    pass


_MATH_ONE = {
    "abs": np.abs, "sqrt": np.sqrt, "log": np.log, "log10": np.log10, "exp": np.exp, "sin": np.sin,
    "cos": np.cos, "tan": np.tan,
}  # fmt: skip
_COMPARE = {"==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater, "<=": np.less_equal,
            ">=": np.greater_equal}  # fmt: skip


class _Parser(TokenCursor):
    """Recursive descent over painless tokens for the column subset; `_NotVector` elsewhere."""

    def __init__(self, tokens: list[Token]) -> None:
        super().__init__(tokens)
        self.fields: set[str] = set()
        self.reads_score = False

    def expect(self, text: str) -> None:
        if self.next().text != text:
            raise _NotVector

    def program(self) -> Expr:
        if self.peek().kind == "name" and self.peek().text == "return":
            self.next()
        expr = self.expression()
        if self.is_op(";"):
            self.next()
        if self.peek().kind != "end":
            raise _NotVector
        return expr

    def expression(self) -> Expr:
        self.depth += 1
        if self.depth > 64:
            raise _NotVector
        try:
            return self.conditional()
        finally:
            self.depth -= 1

    def conditional(self) -> Expr:
        test = self.logical("||")
        if not self.is_op("?"):
            return test
        self.next()
        then = self.expression()
        self.expect(":")
        otherwise = self.expression()
        return lambda c: _where(_boolean(test(c)), then(c), otherwise(c))

    def logical(self, operator: str) -> Expr:
        lower = (lambda: self.logical("&&")) if operator == "||" else self.equality
        left = lower()
        while self.is_op(operator):
            self.next()
            right = lower()
            combine = np.logical_or if operator == "||" else np.logical_and
            left = _logical(combine, left, right)
        return left

    def equality(self) -> Expr:
        left = self.comparison()
        while self.is_op("==", "!="):
            left = _compare(_COMPARE[self.next().text], left, self.comparison())
        return left

    def comparison(self) -> Expr:
        left = self.additive()
        while self.is_op("<", ">", "<=", ">="):
            left = _compare(_COMPARE[self.next().text], left, self.additive())
        return left

    def additive(self) -> Expr:
        left = self.multiplicative()
        while self.is_op("+", "-"):
            left = _arithmetic(self.next().text, left, self.multiplicative())
        return left

    def multiplicative(self) -> Expr:
        left = self.unary()
        while self.is_op("*", "/", "%"):
            left = _arithmetic(self.next().text, left, self.unary())
        return left

    def unary(self) -> Expr:
        if self.is_op("-"):
            self.next()
            operand = self.unary()
            return lambda c: -_number(operand(c))
        if self.is_op("+"):
            self.next()
            operand = self.unary()
            return lambda c: _number(operand(c))
        if self.is_op("!"):
            self.next()
            operand = self.unary()
            return lambda c: np.logical_not(_boolean(operand(c)))
        if (
            self.is_op("(")
            and self.peek(1).text in ("double", "float", "int", "long")
            and self.peek(2).text == ")"
        ):
            self.next()
            kind = self.next().text
            self.next()
            operand = self.unary()
            return lambda c: _cast(kind, operand(c))
        return self.primary()

    def primary(self) -> Expr:
        token = self.next()
        if token.kind == "number":
            constant = runtime.number(token.text)
            return lambda c: constant
        if token.kind == "op" and token.text == "(":
            inner = self.expression()
            self.expect(")")
            return inner
        if token.kind != "name":
            raise _NotVector
        if token.text in ("true", "false"):
            flag = token.text == "true"
            return lambda c: flag
        if token.text == "_score":
            self.reads_score = True
            return _score
        if token.text == "_value":
            return _value
        if token.text == "params":
            return self.param()
        if token.text == "doc":
            return self.doc_value()
        if token.text == "Math":
            return self.math()
        raise _NotVector

    def param(self) -> Expr:
        if self.is_op("."):
            self.next()
            name = self.next()
            if name.kind != "name":
                raise _NotVector
            key = name.text
        elif self.is_op("["):
            self.next()
            name = self.next()
            if name.kind != "string":
                raise _NotVector
            key = runtime.string_literal(name.text)
            self.expect("]")
        else:
            raise _NotVector

        def read(c: Columns) -> Any:
            value = c.params.get(key)
            if type(value) not in (int, float, bool):
                raise _Fallback
            return value

        return read

    def doc_value(self) -> Expr:
        self.expect("[")
        name = self.next()
        if name.kind != "string":
            raise _NotVector
        field = runtime.string_literal(name.text)
        self.expect("]")
        self.expect(".")
        member = self.next().text
        self.fields.add(field)
        if member in ("value",) or (member == "getValue" and self._no_arguments()):
            if self.is_op(".") and self.peek(1).text in _COORDINATES:  # doc['point'].value.lat
                self.next()
                return self._coordinate(field, self.next().text)
            return lambda c: _single(c, field)
        if member in _COORDINATES:
            return self._coordinate(field, member)
        if member in _DISTANCES:
            return self._distance(field, member)
        if member == "size" and self._no_arguments():
            return lambda c: c.counts[field]
        if member == "empty":
            return lambda c: c.counts[field] == 0
        if member == "isEmpty" and self._no_arguments():
            return lambda c: c.counts[field] == 0
        raise _NotVector

    def _coordinate(self, field: str, member: str) -> Expr:
        """`.lat`, `.lon`, `.getLat()`, `.getLon()` of a geo_point's first point."""
        if member.startswith("get") and not self._no_arguments():
            raise _NotVector
        axis = _COORDINATES[member]
        return lambda c: _point(c, field)[axis]

    def _distance(self, field: str, member: str) -> Expr:
        """`.arcDistance(lat, lon)`, `.planeDistance(lat, lon)` and their `...WithDefault(lat, lon,
        default)`: meters from a geo_point's first point (or the default without one)."""
        arguments = self._arguments()
        with_default = member.endswith("WithDefault")
        if len(arguments) != (3 if with_default else 2):
            raise _NotVector
        kind = "plane" if member.startswith("plane") else "arc"
        lat, lon = arguments[0], arguments[1]

        def run(c: Columns) -> Value:
            if not with_default:
                return geo.distance(kind, _scalar(lat(c)), _scalar(lon(c)), *_point(c, field))
            points = c.points.get(field)
            if points is None:
                raise _Fallback  # no geo_point: the per-document run gives its error
            found = geo.distance(kind, _scalar(lat(c)), _scalar(lon(c)), *points)
            return np.where(c.counts[field] > 0, found, _scalar(arguments[2](c)))

        return run

    def _arguments(self) -> list[Expr]:
        """`(a, b, ...)`: one or more arguments."""
        self.expect("(")
        arguments = [self.expression()]
        while self.is_op(","):
            self.next()
            arguments.append(self.expression())
        self.expect(")")
        return arguments

    def _no_arguments(self) -> bool:
        if not self.is_op("("):
            return False
        self.next()
        self.expect(")")
        return True

    def math(self) -> Expr:
        self.expect(".")
        name = self.next().text
        if name in ("PI", "E") and not self.is_op("("):
            constant = runtime.STATICS["Math"].PI if name == "PI" else runtime.STATICS["Math"].E
            return lambda c: constant
        arguments = self._arguments()
        if name in _MATH_ONE and len(arguments) == 1:
            return _math_one(name, arguments[0])
        if name in ("floor", "ceil", "signum") and len(arguments) == 1:
            function = {"floor": np.floor, "ceil": np.ceil, "signum": np.sign}[name]
            operand = arguments[0]
            return lambda c: _as_float(function(_as_float(_number(operand(c)))))
        if name == "round" and len(arguments) == 1:
            operand = arguments[0]
            return lambda c: _round(_number(operand(c)))
        if name in ("max", "min", "pow") and len(arguments) == 2:
            function = {"max": np.maximum, "min": np.minimum, "pow": np.power}[name]
            left, right = arguments
            if name == "pow":
                return lambda c: _as_float(
                    function(_as_float(_number(left(c))), _as_float(_number(right(c))))
                )
            return lambda c: function(_number(left(c)), _number(right(c)))
        raise _NotVector


# ---- the column operations -------------------------------------------------------------------


def _score(c: Columns) -> np.ndarray:
    if c.score is None:
        raise _Fallback
    return c.score


def _value(c: Columns) -> np.ndarray:
    if c.value is None or c.value.dtype.kind not in "biuf":
        raise _Fallback
    return c.value


def _single(c: Columns, field: str) -> np.ndarray:
    """`doc[field].value`: every document must have a value (else the per-document error)."""
    counts = c.counts.get(field)
    if counts is None or field not in c.values or not bool((counts > 0).all()):
        raise _Fallback
    return c.values[field]


_COORDINATES = {"lat": 0, "getLat": 0, "lon": 1, "getLon": 1}
_DISTANCES = ("arcDistance", "planeDistance", "arcDistanceWithDefault", "planeDistanceWithDefault")


def _point(c: Columns, field: str) -> tuple[np.ndarray, np.ndarray]:
    """(latitudes, longitudes) of a geo_point's first point: every document must have one."""
    counts = c.counts.get(field)
    points = c.points.get(field)
    if points is None or counts is None or not bool((counts > 0).all()):
        raise _Fallback
    return points


def _scalar(value: Value) -> float:
    """A number argument the same for every document (a constant, a param) as Java's double."""
    if type(value) not in (int, float):
        raise _Fallback
    return float(value)


def _kind(value: Value) -> str:
    """numpy's kind of a column or constant: b(oolean), i(nteger), f(loat), or another."""
    return (
        np.asarray(value).dtype.kind
        if type(value) in (bool, int, float) or isinstance(value, np.generic | np.ndarray)
        else "O"
    )


def _is_int(value: Value) -> bool:
    return _kind(value) in "iu"


def _is_float(value: Value) -> bool:
    return _kind(value) == "f"


def _number(value: Value) -> Value:
    if _kind(value) not in "iuf":
        raise _Fallback
    return value


def _boolean(value: Value) -> Value:
    if _kind(value) != "b":
        raise _Fallback
    return value


def _as_float(value: Value) -> Value:
    return value.astype(np.float64) if isinstance(value, np.ndarray) else float(value)


def _where(test: Value, then: Value, otherwise: Value) -> Value:
    if type(test) is bool or isinstance(test, np.bool_):
        return then if test else otherwise
    if not (_is_int(then) or _is_float(then) or _boolean_like(then)) or not (
        _is_int(otherwise) or _is_float(otherwise) or _boolean_like(otherwise)
    ):
        raise _Fallback
    if _boolean_like(then) != _boolean_like(otherwise):
        raise _Fallback
    return np.where(test, then, otherwise)


def _boolean_like(value: Value) -> bool:
    return _kind(value) == "b"


def _logical(combine: Callable, left: Expr, right: Expr) -> Expr:
    return lambda c: combine(_boolean(left(c)), _boolean(right(c)))


def _compare(compare: Callable, left: Expr, right: Expr) -> Expr:
    def run(c: Columns) -> Value:
        a, b = left(c), right(c)
        if not (_is_int(a) or _is_float(a)) or not (_is_int(b) or _is_float(b)):
            if compare in (np.equal, np.not_equal) and _boolean_like(a) and _boolean_like(b):
                return compare(a, b)
            raise _Fallback
        return compare(a, b)

    return run


def _arithmetic(operator: str, left: Expr, right: Expr) -> Expr:
    def run(c: Columns) -> Value:
        a, b = _number(left(c)), _number(right(c))
        if operator == "+":
            return a + b
        if operator == "-":
            return a - b
        if operator == "*":
            return a * b
        if _is_int(a) and _is_int(b):
            divisor = np.asarray(b)
            if bool((divisor == 0).any()):
                raise _Fallback  # Java's ArithmeticException, from the per-document run
            if operator == "/":
                quotient = np.abs(a) // np.abs(b)
                return np.where((np.asarray(a) >= 0) == (divisor >= 0), quotient, -quotient)
            return np.fmod(a, b)
        if operator == "/":
            return np.true_divide(a, b)
        return np.fmod(_as_float(a), _as_float(b))

    return run


def _cast(kind: str, value: Value) -> Value:
    value = _number(value)
    if kind in ("double", "float"):
        return _as_float(value)
    if _is_int(value):
        return value
    array = np.nan_to_num(np.asarray(value, dtype=np.float64), nan=0.0, posinf=2**63 - 1, neginf=-(2**63))
    return np.trunc(np.clip(array, -(2.0**63), 2.0**63 - 1024)).astype(np.int64)


def _round(value: Value) -> Value:
    if _is_int(value):
        return value
    return np.floor(np.asarray(value, dtype=np.float64) + 0.5).astype(np.int64)


def _math_one(name: str, operand: Expr) -> Expr:
    function = _MATH_ONE[name]
    if name == "abs":
        return lambda c: function(_number(operand(c)))
    return lambda c: function(_as_float(_number(operand(c))))
