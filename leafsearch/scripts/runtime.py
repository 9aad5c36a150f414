"""What a Painless value can do: Java's operators on Python values, the methods of strings,
lists, maps and sets, `Math`, doc values, and the errors Elasticsearch reports for a script.

Values are Python's: `int` for Java's integral types, `float` for `double`/`float`, `str`,
`bool`, `None` for `null`, `list`, `dict`, `set`, and `DocValues` for `doc['field']`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from leafsearch.errors import ElasticError


class ScriptError(ElasticError):
    """Elasticsearch's `script_exception`: `reason` is "compile error" or "runtime error", with the
    script, a window of it around `offset` (`script_stack`) and the Java exception behind it."""

    error_type = "script_exception"
    status = 400
    root_is_self = True  # its `caused_by` (the Java exception) is no Elasticsearch exception

    def __init__(self, reason: str, source: str, offset: int, cause_type: str, cause_reason: str) -> None:
        start = max(0, offset - 25)
        end = min(len(source), offset + 25)
        head = "... " if start else ""
        window = head + source[start:end] + (" ..." if end < len(source) else "")
        pointer = " " * (len(head) + offset - start) + "^---- HERE"
        super().__init__(
            reason,
            extra={
                "script_stack": [window, pointer],
                "script": source,
                "lang": "painless",
                "position": {"offset": offset, "start": start, "end": end},
                "caused_by": {"type": cause_type, "reason": cause_reason},
            },
        )


#: The longest string and the largest list, set or map a script may build (a statement can double
#: one: `s = s + s`, `l.addAll(l)`), checked before the memory is taken.
MAX_LENGTH = 1_000_000


def _check_length(size: int, source: str, offset: int) -> None:
    if size > MAX_LENGTH:
        reason = f"the script builds a value of [{size}] elements or characters, more than [{MAX_LENGTH}]"
        raise _fail(source, offset, "circuit_breaking_exception", reason)


def _fail(source: str, offset: int, cause_type: str, reason: str) -> ScriptError:
    return ScriptError("runtime error", source, offset, cause_type, reason)


def _null(source: str, offset: int, what: str) -> ScriptError:
    return _fail(source, offset, "null_pointer_exception", f"Cannot {what} because the value is null")


# ---- names of types ------------------------------------------------------------------------------

_JAVA_NAMES = {
    bool: "java.lang.Boolean", int: "java.lang.Integer", float: "java.lang.Double", str: "java.lang.String",
    list: "java.util.ArrayList", dict: "java.util.HashMap", set: "java.util.HashSet",
}  # fmt: skip


def java_name(value: Any) -> str:
    if isinstance(value, ScriptObject):
        return value.java_class
    if isinstance(value, DocValues):
        return "org.elasticsearch.index.fielddata.ScriptDocValues"
    return _JAVA_NAMES.get(type(value), "java.lang.Object")


_INSTANCE = {
    "String": (str,), "Integer": (int,), "Long": (int,), "int": (int,), "long": (int,),
    "Double": (float,), "Float": (float,), "double": (float,), "float": (float,),
    "Number": (int, float), "Boolean": (bool,), "boolean": (bool,), "List": (list,),
    "ArrayList": (list,), "Map": (dict,), "HashMap": (dict,), "Set": (set,), "HashSet": (set,),
    "Collection": (list, set), "Object": (object,), "def": (object,),
}  # fmt: skip


def instance_of(value: Any, type_name: str) -> bool:
    if value is None:
        return False
    kinds = _INSTANCE.get(type_name, ())
    if bool in kinds:
        return type(value) is bool
    return isinstance(value, kinds) and not (type(value) is bool and bool not in kinds)


def default_of(type_name: str) -> Any:
    if type_name in ("int", "long", "short", "byte", "char"):
        return 0
    if type_name in ("double", "float"):
        return 0.0
    if type_name == "boolean":
        return False
    return None


def converter(type_name: str) -> Callable[[Any, str, int], Any]:
    """The cast to `type_name` (a declaration's or a `(type)` cast's)."""
    if type_name in ("int", "long", "short", "byte", "Integer", "Long", "Short", "Byte"):

        def to_int(value: Any, source: str, offset: int) -> Any:
            if type(value) is int or (value is None and type_name[0].isupper()):
                return value
            if type(value) is float:
                return 0 if math.isnan(value) else int(max(min(value, 2**63 - 1), -(2**63)))
            raise _cast(value, type_name, source, offset)

        return to_int
    if type_name in ("double", "float", "Double", "Float"):

        def to_float(value: Any, source: str, offset: int) -> Any:
            if type(value) in (int, float):
                return float(value)
            if value is None and type_name[0].isupper():
                return None
            raise _cast(value, type_name, source, offset)

        return to_float
    checks = {"String": str, "boolean": bool, "Boolean": bool, "List": list, "ArrayList": list,
              "Map": dict, "HashMap": dict, "Set": set, "HashSet": set}  # fmt: skip
    kind = checks.get(type_name)
    if kind is None:
        return lambda value, source, offset: value

    def check(value: Any, source: str, offset: int) -> Any:
        if value is None and type_name != "boolean":
            return value
        if type(value) is not kind:
            raise _cast(value, type_name, source, offset)
        return value

    return check


def _cast(value: Any, type_name: str, source: str, offset: int) -> ScriptError:
    return _fail(source, offset, "class_cast_exception", f"Cannot cast {java_name(value)} to {type_name}")


# ---- literals -------------------------------------------------------------------------------------


def number(text: str) -> int | float:
    lowered = text.lower()
    if lowered.startswith("0x"):
        return int(lowered.rstrip("l"), 16)
    if lowered.endswith("l"):
        return int(lowered[:-1])
    if lowered.endswith(("f", "d")):
        return float(lowered[:-1])
    if "." in lowered or "e" in lowered:
        return float(lowered)
    return int(lowered)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "\\": "\\", "'": "'", '"': '"'}


def string_literal(text: str) -> str:
    body = text[1:-1]
    if "\\" not in body:
        return body
    out = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


# ---- operators -----------------------------------------------------------------------------------


def truth(value: Any, source: str, offset: int) -> bool:
    if type(value) is bool:
        return value
    if value is None:
        raise _null(source, offset, 'invoke "java.lang.Boolean.booleanValue()"')
    raise _fail(source, offset, "class_cast_exception", f"Cannot cast {java_name(value)} to boolean")


def java_str(value: Any) -> str:
    """Java's `String.valueOf`."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) is float:
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value == int(value) and abs(value) < 1e7:
            return f"{value:.1f}"
        return repr(value).replace("e", "E").replace("E+", "E")
    if type(value) is list:
        return "[" + ", ".join(java_str(v) for v in value) + "]"
    if type(value) is dict:
        return "{" + ", ".join(f"{java_str(k)}={java_str(v)}" for k, v in value.items()) + "}"
    return str(value)


def _numeric(value: Any) -> bool:
    return type(value) in (int, float)


def binary(operator: str, left: Any, right: Any, source: str, offset: int) -> Any:
    if operator == "+" and (type(left) is str or type(right) is str):
        left, right = java_str(left), java_str(right)
        _check_length(len(left) + len(right), source, offset)
        return left + right
    if operator in ("==", "==="):
        return left == right if operator == "==" or type(left) is type(right) else False
    if operator in ("!=", "!=="):
        return not binary("==" if operator == "!=" else "===", left, right, source, offset)
    if left is None or right is None:
        raise _null(source, offset, f"apply [{operator}]")
    if not (_numeric(left) and _numeric(right)):
        if operator in ("<", ">", "<=", ">=") and type(left) is str and type(right) is str:
            return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[operator]
        raise _fail(
            source, offset, "class_cast_exception",
            f"Cannot apply [{operator}] operation to types [{java_name(left)}] and [{java_name(right)}].",
        )  # fmt: skip
    if operator == "+":
        return left + right
    if operator == "-":
        return left - right
    if operator == "*":
        return left * right
    if operator == "/":
        if type(left) is int and type(right) is int:
            if right == 0:
                raise _fail(source, offset, "arithmetic_exception", "/ by zero")
            quotient = abs(left) // abs(right)
            return quotient if (left >= 0) == (right >= 0) else -quotient
        if right == 0:
            return math.copysign(math.inf, left) * math.copysign(1, right) if left else math.nan
        return left / right
    if operator == "%":
        if type(left) is int and type(right) is int:
            if right == 0:
                raise _fail(source, offset, "arithmetic_exception", "/ by zero")
            return int(math.fmod(left, right))
        return math.fmod(left, right) if right else math.nan
    if operator == "<":
        return left < right
    if operator == ">":
        return left > right
    if operator == "<=":
        return left <= right
    if operator == ">=":
        return left >= right
    raise _fail(source, offset, "illegal_argument_exception", f"unknown operator [{operator}]")


def unary(operator: str, value: Any, source: str, offset: int) -> Any:
    if operator == "!":
        return not truth(value, source, offset)
    if value is None:
        raise _null(source, offset, f"apply [{operator}]")
    if not _numeric(value):
        raise _fail(source, offset, "class_cast_exception",
                    f"Cannot apply [{operator}] operation to type [{java_name(value)}].")  # fmt: skip
    if operator == "-":
        return -value
    if operator == "~" and type(value) is int:
        return ~value
    return value


def iterate(value: Any, source: str, offset: int) -> Iterable[Any]:
    if value is None:
        raise _null(source, offset, "iterate")
    if isinstance(value, DocValues):
        return list(value.values)
    if type(value) in (list, set):
        return list(value)
    if type(value) is dict:
        return list(value.keys())
    raise _fail(source, offset, "illegal_argument_exception", f"Cannot iterate over [{java_name(value)}]")


def construct(type_name: str, arguments: list[Any], source: str, offset: int) -> Any:
    if type_name == "GeoPoint" and len(arguments) in (0, 2):
        from leafsearch.scripts import geo_values  # it imports this module

        return geo_values.new_point(arguments, source, offset)
    if type_name in ("ArrayList", "List", "LinkedList"):
        return list(arguments[0]) if arguments and isinstance(arguments[0], (list, set)) else []
    if type_name in ("HashMap", "Map", "LinkedHashMap", "TreeMap"):
        return dict(arguments[0]) if arguments and type(arguments[0]) is dict else {}
    if type_name in ("HashSet", "Set", "LinkedHashSet", "TreeSet"):
        return set(arguments[0]) if arguments and isinstance(arguments[0], (list, set)) else set()
    if type_name == "String":
        return java_str(arguments[0]) if arguments else ""
    raise ScriptError("compile error", source, offset, "illegal_argument_exception",
                      f"cannot resolve symbol [{type_name}]")  # fmt: skip


# ---- members, elements and methods ------------------------------------------------------------------


NO_VALUE = (
    "A document doesn't have a value for a field! Use doc[<field>].size()==0 to check if a document is "
    "missing a field!"
)


#: What a method or member lookup answers when the value has no such method or member.
MISSING = object()


class ScriptObject:
    """A value of a Java class the scripts know beyond the collections (a geo point, ...): its
    members (`x.name`, Painless's getter shortcut included) and its methods, MISSING for none."""

    __slots__ = ()
    java_class = "java.lang.Object"

    def member(self, name: str, source: str, offset: int) -> Any:
        return MISSING

    def method(self, name: str, arguments: list[Any], source: str, offset: int) -> Any:
        return MISSING


class DocValues:
    """`doc['field']`: the field's values in the document, sorted as doc values are."""

    __slots__ = ("field", "values")

    def __init__(self, field: str, values: list[Any]) -> None:
        self.field, self.values = field, values

    def first(self, source: str, offset: int) -> Any:
        if not self.values:
            raise _fail(source, offset, "illegal_state_exception", NO_VALUE)
        return self.values[0]


class Doc:
    """`doc`: the doc values of one document, by field name; `lookup(field)` reads them."""

    __slots__ = ("lookup",)

    def __init__(self, lookup: Callable[[str], DocValues | None]) -> None:
        self.lookup = lookup


class _Math:
    PI = math.pi
    E = math.e


STATICS: dict[str, Any] = {"Math": _Math()}


def get_member(owner: Any, name: str, source: str, offset: int) -> Any:
    if owner is None:
        raise _null(source, offset, f'read field "{name}"')
    if type(owner) is dict:
        return owner.get(name)
    if isinstance(owner, DocValues):
        if name == "value":
            return owner.first(source, offset)
        if name == "empty":
            return not owner.values
        if name == "length":
            return len(owner.values)
        if name == "values":
            return list(owner.values)
        if name in ("vectorValue", "magnitude"):
            from leafsearch.scripts import vector_functions  # it imports this module

            return vector_functions.member(owner, name, source, offset)
    if isinstance(owner, ScriptObject):
        found = owner.member(name, source, offset)
        if found is not MISSING:
            return found
    if isinstance(owner, _Math) and name in ("PI", "E"):
        return getattr(owner, name)
    if type(owner) is list and name == "length":
        return len(owner)
    if type(owner) is list and name == "empty":
        return not owner
    raise _fail(source, offset, "illegal_argument_exception",
                f"dynamic getter [{java_name(owner)}, {name}] not found")  # fmt: skip


def set_member(owner: Any, name: str, value: Any, source: str, offset: int) -> None:
    if owner is None:
        raise _null(source, offset, f'write field "{name}"')
    if type(owner) is dict:
        owner[name] = value
        return
    raise _fail(source, offset, "illegal_argument_exception",
                f"dynamic setter [{java_name(owner)}, {name}] not found")  # fmt: skip


def _position(owner: list, key: Any, source: str, offset: int) -> int:
    if type(key) is not int:
        raise _fail(source, offset, "class_cast_exception", f"Cannot cast {java_name(key)} to int")
    index = key + len(owner) if key < 0 else key
    if not 0 <= index < len(owner):
        raise _fail(source, offset, "index_out_of_bounds_exception",
                    f"Index {key} out of bounds for length {len(owner)}")  # fmt: skip
    return index


def get_item(owner: Any, key: Any, source: str, offset: int) -> Any:
    if owner is None:
        raise _null(source, offset, "load from a null reference")
    if type(owner) is dict:
        return owner.get(key)
    if type(owner) is list:
        return owner[_position(owner, key, source, offset)]
    if isinstance(owner, DocValues):
        return owner.values[_position(owner.values, key, source, offset)]
    if isinstance(owner, Doc):
        values = owner.lookup(key) if type(key) is str else None
        if values is None:
            raise _fail(
                source, offset, "illegal_argument_exception", f"No field found for [{key}] in mapping"
            )
        return values
    raise _not_array(owner, source, offset)


def _not_array(owner: Any, source: str, offset: int) -> ScriptError:
    reason = f"Attempting to address a non-array-like type [{java_name(owner)}] as an array."
    return _fail(source, offset, "illegal_argument_exception", reason)


def set_item(owner: Any, key: Any, value: Any, source: str, offset: int) -> None:
    if owner is None:
        raise _null(source, offset, "store to a null reference")
    if type(owner) is dict:
        owner[key] = value
    elif type(owner) is list:
        owner[_position(owner, key, source, offset)] = value
    else:
        raise _not_array(owner, source, offset)


def _arity(arguments: list[Any], *counts: int) -> bool:
    return len(arguments) in counts


def _str_method(owner: str, name: str, a: list[Any]) -> Any:
    if name == "length" and not a:
        return len(owner)
    if name == "substring" and _arity(a, 1, 2):
        end = a[1] if len(a) == 2 else len(owner)
        if not 0 <= a[0] <= end <= len(owner):
            raise IndexError(f"begin {a[0]}, end {end}, length {len(owner)}")
        return owner[a[0] : end]
    if name == "indexOf" and _arity(a, 1, 2):
        return owner.find(java_str(a[0]), *(a[1:]))
    if name == "lastIndexOf" and _arity(a, 1):
        return owner.rfind(java_str(a[0]))
    if name == "contains" and _arity(a, 1):
        return java_str(a[0]) in owner
    if name == "startsWith" and _arity(a, 1):
        return owner.startswith(java_str(a[0]))
    if name == "endsWith" and _arity(a, 1):
        return owner.endswith(java_str(a[0]))
    if name == "toLowerCase" and not a:
        return owner.lower()
    if name == "toUpperCase" and not a:
        return owner.upper()
    if name == "trim" and not a:
        return owner.strip(" \t\n\r\x0b\f\x00")
    if name == "replace" and _arity(a, 2):
        old, new = java_str(a[0]), java_str(a[1])
        if len(new) > len(old) and len(owner) + owner.count(old) * (len(new) - len(old)) > MAX_LENGTH:
            raise OverflowError(f"the result would be longer than [{MAX_LENGTH}] characters")
        return owner.replace(old, new)
    if name == "equalsIgnoreCase" and _arity(a, 1):
        return type(a[0]) is str and owner.lower() == a[0].lower()
    if name == "isEmpty" and not a:
        return not owner
    if name == "charAt" and _arity(a, 1):
        return owner[a[0]]
    if name == "compareTo" and _arity(a, 1):
        return (owner > a[0]) - (owner < a[0])
    if name == "concat" and _arity(a, 1):
        if len(owner) + len(java_str(a[0])) > MAX_LENGTH:
            raise OverflowError(f"the result would be longer than [{MAX_LENGTH}] characters")
        return owner + java_str(a[0])
    if name == "splitOnToken" and _arity(a, 1):
        return owner.split(java_str(a[0]))
    return MISSING


def _list_method(owner: list, name: str, a: list[Any], source: str, offset: int) -> Any:
    if name == "add" and _arity(a, 1):
        owner.append(a[0])
        return True
    if name == "add" and _arity(a, 2):
        owner.insert(a[0], a[1])
        return None
    if name == "addAll" and _arity(a, 1):
        items = iterate(a[0], source, offset)
        _check_length(len(owner) + len(items), source, offset)  # type: ignore[arg-type]
        owner.extend(items)
        return True
    if name == "get" and _arity(a, 1):
        return owner[_position(owner, a[0], source, offset)]
    if name == "set" and _arity(a, 2):
        index = _position(owner, a[0], source, offset)
        old, owner[index] = owner[index], a[1]
        return old
    if name == "remove" and _arity(a, 1):
        if type(a[0]) is int:
            return owner.pop(_position(owner, a[0], source, offset))
        if a[0] in owner:
            owner.remove(a[0])
            return True
        return False
    if name == "size" and not a:
        return len(owner)
    if name == "isEmpty" and not a:
        return not owner
    if name == "contains" and _arity(a, 1):
        return a[0] in owner
    if name == "indexOf" and _arity(a, 1):
        return owner.index(a[0]) if a[0] in owner else -1
    if name == "clear" and not a:
        owner.clear()
        return None
    return MISSING


def _map_method(owner: dict, name: str, a: list[Any]) -> Any:
    if name == "get" and _arity(a, 1):
        return owner.get(a[0])
    if name == "getOrDefault" and _arity(a, 2):
        return owner.get(a[0], a[1])
    if name == "put" and _arity(a, 2):
        old = owner.get(a[0])
        owner[a[0]] = a[1]
        return old
    if name == "putAll" and _arity(a, 1) and type(a[0]) is dict:
        owner.update(a[0])
        return None
    if name == "remove" and _arity(a, 1):
        return owner.pop(a[0], None)
    if name == "containsKey" and _arity(a, 1):
        return a[0] in owner
    if name == "containsValue" and _arity(a, 1):
        return a[0] in owner.values()
    if name == "keySet" and not a:
        return list(owner.keys())
    if name == "values" and not a:
        return list(owner.values())
    if name == "size" and not a:
        return len(owner)
    if name == "isEmpty" and not a:
        return not owner
    if name == "clear" and not a:
        owner.clear()
        return None
    return MISSING


def _set_method(owner: set, name: str, a: list[Any]) -> Any:
    if name == "add" and _arity(a, 1):
        added = a[0] not in owner
        owner.add(a[0])
        return added
    if name == "remove" and _arity(a, 1):
        removed = a[0] in owner
        owner.discard(a[0])
        return removed
    if name == "contains" and _arity(a, 1):
        return a[0] in owner
    if name == "size" and not a:
        return len(owner)
    if name == "isEmpty" and not a:
        return not owner
    return MISSING


def _math_method(name: str, a: list[Any]) -> Any:
    one = {"abs": abs, "sqrt": math.sqrt, "log": math.log, "log10": math.log10, "exp": math.exp,
           "floor": lambda x: float(math.floor(x)), "ceil": lambda x: float(math.ceil(x)),
           "signum": lambda x: float((x > 0) - (x < 0)), "sin": math.sin, "cos": math.cos, "tan": math.tan,
           "round": lambda x: int(math.floor(x + 0.5))}  # fmt: skip
    if name in one and _arity(a, 1) and _numeric(a[0]):
        try:
            return one[name](a[0])
        except ValueError:
            return math.nan
    if name in ("max", "min") and _arity(a, 2) and _numeric(a[0]) and _numeric(a[1]):
        return max(a) if name == "max" else min(a)
    if name == "pow" and _arity(a, 2) and _numeric(a[0]) and _numeric(a[1]):
        try:
            return math.pow(a[0], a[1])
        except (OverflowError, ValueError):
            return math.inf if a[0] > 0 else math.nan
    return MISSING


def call_method(owner: Any, name: str, arguments: list[Any], source: str, offset: int) -> Any:
    if owner is None:
        raise _null(source, offset, f'invoke "{name}()"')
    try:
        if name == "equals" and _arity(arguments, 1):
            return owner == arguments[0] and type(owner) is type(arguments[0])
        if name == "toString" and not arguments:
            return java_str(owner)
        kind = type(owner)
        if kind is str:
            result = _str_method(owner, name, arguments)
        elif kind is list:
            result = _list_method(owner, name, arguments, source, offset)
        elif kind is dict:
            result = _map_method(owner, name, arguments)
        elif kind is set:
            result = _set_method(owner, name, arguments)
        elif isinstance(owner, _Math):
            result = _math_method(name, arguments)
        elif isinstance(owner, DocValues):
            result = _doc_values_method(owner, name, arguments, source, offset)
        elif kind in (int, float) and not arguments and name in ("intValue", "longValue"):
            result = int(owner)
        elif kind in (int, float) and not arguments and name in ("doubleValue", "floatValue"):
            result = float(owner)
        else:
            result = MISSING
        if result is MISSING and isinstance(owner, ScriptObject):
            result = owner.method(name, arguments, source, offset)
    except OverflowError as exc:
        raise _fail(source, offset, "circuit_breaking_exception", str(exc)) from None
    except (IndexError, TypeError) as exc:
        raise _fail(source, offset, "illegal_argument_exception", f"[{name}] failed: {exc}") from None
    if result is MISSING:
        raise _fail(source, offset, "illegal_argument_exception",
                    f"dynamic method [{java_name(owner)}, {name}/{len(arguments)}] not found")  # fmt: skip
    return result


def _doc_values_method(owner: DocValues, name: str, a: list[Any], source: str, offset: int) -> Any:
    if name == "size" and not a:
        return len(owner.values)
    if name == "isEmpty" and not a:
        return not owner.values
    if name == "getValue" and not a:
        return owner.first(source, offset)
    if name == "get" and _arity(a, 1):
        return owner.values[_position(owner.values, a[0], source, offset)]
    if name == "contains" and _arity(a, 1):
        return a[0] in owner.values
    return MISSING
