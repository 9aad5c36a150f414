"""Response bodies: orjson with stored `_source` spliced in raw, `filter_path`, `pretty`.

`_source` arrives as `RawJSON` (the bytes the client sent); orjson writes it as a Fragment so a
page of hits is never decoded and re-encoded. Only `filter_path` expressions that reach inside a
source parse it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import orjson

from leafsearch.rawjson import RawJSON

Pattern = tuple[str, ...]


def _fragment(value: Any) -> Any:
    if isinstance(value, RawJSON):
        return orjson.Fragment(value.data)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def to_json(body: Any, *, pretty: bool = False) -> bytes:
    if pretty:
        # Elasticsearch ends pretty output with a newline.
        return orjson.dumps(body, default=_fragment, option=orjson.OPT_INDENT_2) + b"\n"
    return orjson.dumps(body, default=_fragment)


# ---------------------------------------------------------------------------------------------
# filter_path: comma list of dotted paths; `*` inside a name, `**` for any depth, `-` excludes


@lru_cache(maxsize=512)
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
