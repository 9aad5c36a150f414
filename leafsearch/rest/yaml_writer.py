"""YAML in Elasticsearch's shape (Jackson's YAMLFactory): a `---` start, block style, field names
plain, string values double-quoted, a sequence's items at the indentation of the key holding it.

A JSON document's values map onto YAML directly: a JSON string, with its escapes, is a valid YAML
double-quoted scalar, so each string is encoded by orjson in C and the writer only lays out lines.
A general YAML library runs its representer in Python for every value (seconds for a page of
5,000 hits); this writer does the one thing a response needs, a few times faster.
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

# Field names written plain: those that no YAML 1.1 reader takes for anything but a string.
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_RESERVED_KEYS = frozenset({"y", "yes", "n", "no", "true", "false", "on", "off", "null"})
# Characters a YAML reader would not keep as written inside a double-quoted scalar: DEL and the C1
# controls, the line breaks YAML 1.1 adds (NEL, U+2028, U+2029: folded to spaces), the byte-order
# mark and the non-characters. They are written as escapes.
_NON_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def yaml_document(value: Any) -> str:
    """`value` (decoded JSON: dicts, lists, strings, numbers, booleans, None) as a YAML document."""
    if isinstance(value, dict | list) and value:
        lines = ["---"]
        _block(value, "", lines)
        text = "\n".join(lines) + "\n"
    else:
        text = f"--- {_scalar(value)}\n"
    return _NON_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _block(value: dict | list, indent: str, out: list[str]) -> None:
    """The lines of a non-empty mapping or sequence, at `indent`."""
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{indent}{_key(key)}:"
            if isinstance(item, dict) and item:
                out.append(head)
                _block(item, indent + "  ", out)
            elif isinstance(item, list) and item:
                out.append(head)
                _block(item, indent, out)
            else:
                out.append(f"{head} {_scalar(item)}")
        return
    for item in value:
        if isinstance(item, dict | list) and item:
            start = len(out)
            _block(item, indent + "  ", out)
            out[start] = f"{indent}- {out[start][len(indent) + 2 :]}"
        else:
            out.append(f"{indent}- {_scalar(item)}")


def _key(key: str) -> str:
    if _PLAIN_KEY.fullmatch(key) and key.lower() not in _RESERVED_KEYS:
        return key
    return orjson.dumps(key).decode()


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        # YAML 1.1 reads an exponent without a fraction as a string: 1e+22 is written 1.0e+22.
        return text if "." in text or "e" not in text else text.replace("e", ".0e")
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return str(value)
