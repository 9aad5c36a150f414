"""The common bulk body by column: every action line a simple index/create (`SimpleBulk`).

Most bulk bodies are one simple action line and one document per operation:
`{"index":{}}`, `{"create":{"_id":"1"}}`, `{"index":{"_index":"logs","_id":"1"}}`. Such a body is
typed in a few passes over the whole body instead of a step per operation: numpy finds the line
boundaries and checks that every line is an object with nothing around it, one regex checks every
action line at once and one more reads their kinds, index names and ids (lines that are all
`{"index":{"_id":...}}`, raw clients' usual, are read by one split and a few counts instead).
The documents stay the byte slices they arrived as (never decoded here). A `BulkOp` is built only
for an operation that needs one (an item error, an index that takes the general path).

Any other body (another action or parameter, blank lines, whitespace around a line, non-ASCII or
escaped names, an empty `_id` or `_index`, no final newline) is `parse_bulk`'s, which gives the
same operations, items and errors for this shape too: `parse_simple` only answers None for it.
"""

from __future__ import annotations

import base64
import operator
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from leafsearch.request.date_math_names import resolve_expression
from leafsearch.write.bulk_request import BulkOp

#: A name or id as `_simple_action` takes it: no quote, backslash or control character.
_NAME = r'[^"\\\x00-\x1f]+'
#: One simple action line: `_index`, `_id`, both in either order (the official clients' helpers
#: write `_id` first), or neither.
_INDEX, _ID = rf'"_index":"{_NAME}"', rf'"_id":"{_NAME}"'
_META = rf"{_INDEX},{_ID}|{_ID},{_INDEX}|{_INDEX}|{_ID}"
_LINE = rf'\{{"(?:index|create)":\{{(?:{_META})?\}}\}}'
_ALL = re.compile(rf"(?:{_LINE}\n)*{_LINE}").fullmatch
#: ... and what each line holds (the first check made sure the commas are right): the kind, the
#: name given before the id, the id, the name given after it.
_FIELDS = re.compile(
    rf'\{{"(index|create)":\{{(?:"_index":"({_NAME})",?)?(?:"_id":"({_NAME})")?(?:,"_index":"({_NAME})")?\}}\}}'
).findall

#: Lines that are all `{"index":{"_id":...}}` (raw clients' usual): their start, their end, and
#: what lies between two ids (`_plain_ids`).
_ID_LINE_START, _ID_LINE_END = '{"index":{"_id":"', '"}}'
_BETWEEN_IDS = f"{_ID_LINE_END}\n{_ID_LINE_START}"
#: Quotes in such a line, its id's none.
_ID_LINE_QUOTES = 6

_OPEN, _CLOSE, _NEWLINE = ord("{"), ord("}"), ord("\n")


@dataclass(slots=True)
class SimpleBulk(Sequence[BulkOp]):
    """A body of simple index/create operations by column; operation i is at line 2i + 1.

    As a sequence it holds each operation's `BulkOp`, built when asked for (an item's error,
    the general path for an index): the same `parse_bulk` gives."""

    kinds: list[str]
    #: The index each operation names (date math resolved), the URL's when its line names none.
    names: list[str]
    #: Each operation's `_id`, "" where its line gives none (generated when applied).
    ids: list[str]
    sources: list[bytes]
    #: The URL's routing: simple lines give none.
    routing: str | None

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, pos: int) -> BulkOp: ...
    @overload
    def __getitem__(self, pos: slice) -> list[BulkOp]: ...
    def __getitem__(self, pos):
        if isinstance(pos, slice):
            return [self[i] for i in range(len(self))[pos]]
        meta = {"_id": self.ids[pos]} if self.ids[pos] else {}  # (`_index` is read from `index`)
        return BulkOp(self.kinds[pos], meta, 2 * pos + 1, self.names[pos], self.routing, self.sources[pos])

    def __iter__(self) -> Iterator[BulkOp]:
        return (self[i] for i in range(len(self)))

    def by_name(self) -> dict[str, list[int]]:
        """The positions of the operations on each index name, in order."""
        names = self.names
        if names.count(names[0]) == len(names):
            return {names[0]: list(range(len(names)))}
        groups: dict[str, list[int]] = {}
        for pos, name in enumerate(names):
            groups.setdefault(name, []).append(pos)
        return groups


def parse_simple(body: bytes, default_index: str | None, default_routing: str | None) -> SimpleBulk | None:
    """The body by column if every action line is a simple index/create, else None (`parse_bulk`
    types it, and refuses what is malformed)."""
    if not body.endswith(b"\n"):
        return None
    data = np.frombuffer(body, np.uint8)
    ends = np.flatnonzero(data == _NEWLINE)
    if len(ends) % 2:
        return None
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    if not (
        (ends > starts).all() and (data[starts] == _OPEN).all() and (data[ends - 1] == _CLOSE).all()
    ):  # an empty line, or whitespace (or anything) around a line's object
        return None
    lines = body.split(b"\n")
    actions = b"\n".join(lines[0:-1:2])
    if not actions.isascii():
        return None
    text = actions.decode()
    count = len(ends) // 2
    ids = _plain_ids(text, actions, count)
    if ids is not None:
        kinds, names = ["index"] * count, [""] * count
    else:
        if _ALL(text) is None:
            return None
        kinds, before, ids, after = map(list, zip(*_FIELDS(text), strict=True))
        names = list(map(operator.add, before, after)) if any(after) else before
    if "" in names:  # lines without `_index`
        if default_index is None:
            return None  # `parse_bulk` refuses the request
        names = [name or default_index for name in names]
    if any(name.startswith("<") for name in set(names)):
        bulk_now = int(time.time() * 1000)
        resolved = {name: resolve_expression(name, bulk_now) for name in set(names)}
        names = [resolved[name] for name in names]
    return SimpleBulk(kinds, names, ids, lines[1::2], default_routing)


def _plain_ids(text: str, actions: bytes, count: int) -> list[str] | None:
    """The ids of `count` action lines (`text`, ASCII; `actions` its bytes) when every one is
    `{"index":{"_id":"<id>"}}`, found by one split instead of `_ALL` and `_FIELDS`; else None.
    The split's pieces are the lines' ids exactly when there are `count` of them, none empty, and
    the text holds no quote but the lines' own, no backslash, no control character but the
    `count - 1` line breaks: each then is a `_NAME`."""
    if not (text.startswith(_ID_LINE_START) and text.endswith(_ID_LINE_END)):
        return None
    if text.count('"') != _ID_LINE_QUOTES * count or "\\" in text:
        return None
    ids = text[len(_ID_LINE_START) : -len(_ID_LINE_END)].split(_BETWEEN_IDS)
    if len(ids) != count or "" in ids:
        return None
    if np.count_nonzero(np.frombuffer(actions, np.uint8) < 0x20) != count - 1:
        return None
    return ids


def generate_ids(count: int) -> list[str]:
    """`count` 20-character URL-safe random ids (`documents.generate_id`'s), encoded together."""
    text = base64.urlsafe_b64encode(os.urandom(15 * count)).decode()
    return [text[i : i + 20] for i in range(0, 20 * count, 20)]
