"""The action line of a bulk item, typed as Elasticsearch's bulk parser types it.

Elasticsearch reads each parameter of `{"index": {...}}` with the accessor of its kind: the text of
any scalar for names (`"routing": 5` is the routing "5"), a long for sequence numbers and versions,
a boolean for flags. An array, or an object where a value belongs, fails the whole request, and a
null leaves the default. Doing the same here means no value of the wrong type can reach routing,
hashing or the translog: whatever is acknowledged can be replayed.
"""

from __future__ import annotations

from typing import Any

from leafsearch.common.json_tokens import not_boolean, not_numeric
from leafsearch.errors import ElasticError, IllegalArgument, XContentParseError

#: Parameters read as text (`parser.text()`).
_TEXT = frozenset({"_index", "_id", "routing", "_routing", "op_type", "pipeline", "version_type"})
#: Parameters read as a long, and the one read as an int.
_LONG = frozenset({"version", "if_seq_no", "if_primary_term"})
_INT = frozenset({"retry_on_conflict"})
#: Parameters read as a boolean.
_BOOLEAN = frozenset({"require_alias", "require_data_stream", "list_executed_pipelines"})
#: Parameters that may hold an object.
_OBJECTS = frozenset({"dynamic_templates", "_source"})

_LONG_RANGE = (-(2**63), 2**63 - 1, "long")
_INT_RANGE = (-(2**31), 2**31 - 1, "int")


def _text(value: Any) -> str:
    if type(value) is str:
        return value
    if value is True or value is False:
        return "true" if value else "false"
    return repr(value)


def _integer(value: Any, bounds: tuple[int, int, str]) -> int:
    """A long (or int) as Jackson and `Numbers.toLong` read it: strings are coerced, decimals cut."""
    low, high, name = bounds
    if value is True or value is False:
        raise XContentParseError(not_numeric(value))
    if type(value) is str:
        try:
            number = int(value)
        except ValueError:
            try:
                number = int(float(value))
            except (ValueError, OverflowError):
                raise IllegalArgument(f'For input string: "{value}"') from None
        if not low <= number <= high:
            raise IllegalArgument(f"Value [{value}] is out of range for a {name}")
        return number
    number = int(value)
    if not low <= number <= high:
        raise XContentParseError(f"Numeric value ({_text(value)}) out of range of {name} ({low} - {high})")
    return number


def _boolean(value: Any) -> bool:
    if value is True or value is False:
        return value
    if type(value) is str:
        if value in ("true", "false"):
            return value == "true"
        raise IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")
    raise XContentParseError(not_boolean(value))


def typed_metadata(line_no: int, meta: dict[str, Any]) -> dict[str, Any]:
    """The parameters of one action line with Elasticsearch's types; nulls dropped.

    Raises the error that fails the whole bulk request, as Elasticsearch's parser does.
    """
    typed: dict[str, Any] = {}
    for key, value in meta.items():
        if value is None:
            continue
        if type(value) is list:
            raise _not_simple(line_no, key, "START_ARRAY")
        if type(value) is dict:
            if key not in _OBJECTS:
                raise _not_simple(line_no, key, "START_OBJECT")
            typed[key] = value
        elif key in _TEXT:
            typed[key] = _text(value)
        elif key in _LONG:
            typed[key] = _integer(value, _LONG_RANGE)
        elif key in _INT:
            typed[key] = _integer(value, _INT_RANGE)
        elif key in _BOOLEAN:
            typed[key] = _boolean(value)
        elif key == "_source":
            typed[key] = value
        else:  # an object-valued parameter given a scalar is not one Elasticsearch knows
            raise IllegalArgument(f"Action/metadata line [{line_no}] contains an unknown parameter [{key}]")
    return typed


def _not_simple(line_no: int, key: str, token: str) -> ElasticError:
    return IllegalArgument(
        f"Malformed action/metadata line [{line_no}], expected a simple value for field [{key}] "
        f"but found [{token}]"
    )
