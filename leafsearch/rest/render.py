"""Response bodies: orjson with stored `_source` spliced in raw, `pretty`, YAML, `filter_path`.

`_source` arrives as `RawJSON` (the bytes the client sent), and a REST page of hits as one
pre-encoded array (`search/fetch_phase.py`); orjson writes both as Fragments so a page is never
decoded and re-encoded. Only the renderings that need every value do more, and only when asked:
`pretty` and YAML decode the finished bytes once (so spliced sources and hit arrays are rendered
like the rest), and `filter_path` expressions that reach inside a source parse that source.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import orjson

from leafsearch.common.memo import memo
from leafsearch.common.rawjson import RawJSON, fragment
from leafsearch.rest.media import YAML
from leafsearch.rest.yaml_writer import yaml_document

Pattern = tuple[str, ...]


def to_json(body: Any, *, pretty: bool = False) -> bytes:
    compact = orjson.dumps(body, default=fragment)
    return indent(compact) if pretty else compact


# After orjson's (or json's) two-space indentation, Jackson's form: `"key" : value` and `[ ]`,
# `{ }` for empty containers. Outside strings `": ` only ends a key; inside one it needs an escaped
# quote before it, and only then are keys found line by line (a key is the first string on its
# line: strings hold no raw newline). An empty container is the only `[]` or `{}` followed by a
# comma or a line end: in a string it would be followed by the closing quote.
_KEY_COLON = re.compile(rb'(?m)^( *"[^"\\]*(?:\\.[^"\\]*)*"): ')
# Integers of 19 digits or more may not fit 64 bits, which orjson's decoder would turn to floats:
# found as a run of 19 zeros once every digit is a zero and everything else a space (one C pass).
_DIGITS_ONLY = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))
_LONG_DIGITS = b"0" * 19


def indent(compact: bytes) -> bytes:
    """Elasticsearch's pretty form of a JSON document (Jackson's pretty printer with arrays
    indented like objects): two spaces a level, `"key" : value`, `[ ]` and `{ }` for empty
    containers, and a final newline.

    The finished bytes are decoded once and re-encoded indented, all in C with orjson: spliced
    sources and pre-encoded hit pages are indented like the rest, and numbers come out as
    Elasticsearch's re-encoding writes them (`1.50` as `1.5`). A document holding an integer
    too long for 64 bits takes the standard library, which keeps it exact."""
    indented = None
    if _LONG_DIGITS not in compact.translate(_DIGITS_ONLY):
        with contextlib.suppress(orjson.JSONDecodeError):  # a number orjson refuses, like 1e400
            indented = orjson.dumps(orjson.loads(compact), option=orjson.OPT_INDENT_2)
    if indented is None:
        indented = json.dumps(json.loads(compact), indent=2, ensure_ascii=False).encode()
    if b'\\": ' in indented:
        indented = _KEY_COLON.sub(rb"\1 : ", indented)
    else:
        indented = indented.replace(b'": ', b'" : ')
    for empty, spaced in ((b"[]", b"[ ]"), (b"{}", b"{ }")):
        indented = indented.replace(empty + b",\n", spaced + b",\n").replace(empty + b"\n", spaced + b"\n")
        if indented == empty:
            indented = spaced
    return indented + b"\n"


def to_yaml(body: Any) -> bytes:
    """The body as YAML. It is encoded to JSON first (sources spliced) and that document decoded
    once with the standard library, which keeps integers of any size exact."""
    return yaml_document(json.loads(orjson.dumps(body, default=fragment))).encode()


def render(body: Any, media_type: str, *, pretty: bool = False) -> bytes:
    """A response body in the negotiated media type: YAML, or JSON (plain or vendored)."""
    return to_yaml(body) if media_type == YAML else to_json(body, pretty=pretty)


# ---------------------------------------------------------------------------------------------
# filter_path: comma list of dotted paths; `*` inside a name, `**` for any depth, `-` excludes


@memo(512)
def _name_regex(segment: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in segment.split("*")))


def _consume(pattern: Pattern, key: str) -> list[Pattern]:
    """What remains of `pattern` after it matched `key`; empty when it does not match."""
    head = pattern[0]
    if head == "**":
        # `**` consumes this key and stays, or consumes nothing and lets the rest match it.
        rest = [pattern]
        if len(pattern) > 1:
            rest.extend(_consume(pattern[1:], key))
        return rest
    return [pattern[1:]] if _name_regex(head).fullmatch(key) else []


def _split(patterns: list[Pattern], key: str) -> tuple[bool, list[Pattern]]:
    """(does a pattern end at this key, the patterns that continue below it)."""
    full = False
    below: list[Pattern] = []
    for pattern in patterns:
        for rest in _consume(pattern, key):
            if not rest or rest == ("**",):
                full = True
            else:
                below.append(rest)
    return full, below


_DROP = object()


def _include(value: Any, patterns: list[Pattern]) -> Any:
    """The parts of `value` that some pattern reaches; `_DROP` when none (empty containers vanish)."""
    if isinstance(value, RawJSON):
        value = value.parsed()
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        for key, child in value.items():
            full, below = _split(patterns, key)
            if full:
                kept[key] = child
            elif below:
                filtered = _include(child, below)
                if filtered is not _DROP:
                    kept[key] = filtered
        return kept or _DROP
    if isinstance(value, list):
        items = [item for item in (_include(v, patterns) for v in value) if item is not _DROP]
        return items or _DROP
    return _DROP


def _exclude(value: Any, patterns: list[Pattern]) -> Any:
    if isinstance(value, RawJSON):
        value = value.parsed()
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        for key, child in value.items():
            full, below = _split(patterns, key)
            if full:
                continue
            kept[key] = _exclude(child, below) if below else child
        return kept
    if isinstance(value, list):
        return [_exclude(v, patterns) for v in value]
    return value


def filter_path(body: Any, expression: str) -> Any:
    """Apply an Elasticsearch `filter_path` expression to a response body."""
    includes: list[Pattern] = []
    excludes: list[Pattern] = []
    for raw in expression.split(","):
        raw = raw.strip()
        if not raw:
            continue
        target = excludes if raw.startswith("-") else includes
        target.append(tuple(raw.removeprefix("-").split(".")))
    if includes:
        body = _include(body, includes)
        if body is _DROP:
            body = {}
    if excludes:
        body = _exclude(body, excludes)
    return body
