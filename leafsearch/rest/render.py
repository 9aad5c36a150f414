"""Response bodies: orjson with stored `_source` spliced in raw, `pretty`, YAML, `filter_path`.

`_source` arrives as `RawJSON` (the bytes the client sent), and a REST page of hits as one
pre-encoded array (`search/fetch_phase.py`); orjson writes both as Fragments so a page is never
decoded and re-encoded. Only the renderings that need every value do more, and only when asked:
`pretty` re-indents the finished bytes (so spliced sources and hit arrays are indented too, their
numbers kept as written), YAML decodes the finished bytes once, and `filter_path` expressions that
reach inside a source parse that source.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

import orjson
import yaml

from leafsearch.rawjson import RawJSON
from leafsearch.rest.media import YAML

Pattern = tuple[str, ...]


def _fragment(value: Any) -> Any:
    if isinstance(value, RawJSON):
        return orjson.Fragment(value.data)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def to_json(body: Any, *, pretty: bool = False) -> bytes:
    compact = orjson.dumps(body, default=_fragment)
    return indent(compact) if pretty else compact


# A string (skipped whole, escapes included), an empty container, a structural character, or
# whitespace between tokens (raw sources keep the client's spacing). Numbers and literals never
# match, so they are copied as written: a 30-digit integer stays exact.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|\{\s*\}|\[\s*\]|[{}\[\],:]|\s+')
_EMPTY = {ord("{"): b"{ }", ord("["): b"[ ]"}


def indent(compact: bytes) -> bytes:
    """Elasticsearch's pretty form of a JSON document (Jackson's pretty printer with arrays
    indented like objects): two spaces a level, `"key" : value`, `[ ]` and `{ }` for empty
    containers, and a final newline.

    It works on the encoded bytes, so the spliced sources and pre-encoded hit arrays are indented
    like the rest without being decoded into Python objects."""
    depth = 0

    def token(match: re.Match[bytes]) -> bytes:
        nonlocal depth
        text = match.group()
        first = text[0]
        if first == 34:  # '"'
            return text
        if len(text) > 1 and first in _EMPTY:
            return _EMPTY[first]
        if first in (123, 91):  # '{' '['
            depth += 1
            return text + b"\n" + b"  " * depth
        if first in (125, 93):  # '}' ']'
            depth -= 1
            return b"\n" + b"  " * depth + text
        if first == 44:  # ','
            return b",\n" + b"  " * depth
        if first == 58:  # ':'
            return b" : "
        return b""  # whitespace between tokens

    return _TOKEN.sub(token, compact) + b"\n"


class _Key(str):
    """A mapping key: written plain, as Jackson's YAML writer writes field names."""


class _Dumper(yaml.SafeDumper):
    """Elasticsearch's YAML (Jackson's YAMLFactory): a `---` start, keys plain, string values
    double-quoted, block style."""


_Dumper.add_representer(_Key, lambda dumper, key: dumper.represent_scalar("tag:yaml.org,2002:str", key))
_Dumper.add_representer(
    str, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
)


def to_yaml(body: Any) -> bytes:
    """The body as YAML. It is encoded to JSON first (sources spliced) and that document decoded
    once with the standard library, which keeps integers of any size exact."""
    document = json.loads(
        orjson.dumps(body, default=_fragment), object_pairs_hook=lambda pairs: {_Key(k): v for k, v in pairs}
    )
    return yaml.dump(
        document,
        Dumper=_Dumper,
        explicit_start=True,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        width=2**31 - 1,
    ).encode()


def render(body: Any, media_type: str, *, pretty: bool = False) -> bytes:
    """A response body in the negotiated media type: YAML, or JSON (plain or vendored)."""
    return to_yaml(body) if media_type == YAML else to_json(body, pretty=pretty)


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
