"""Pre-encoded JSON carried through a response unchanged.

Stored `_source` bytes are exactly what the client sent; wrapping them in RawJSON lets the
renderer splice them into the response (orjson.Fragment) instead of parsing and re-encoding.
"""

from __future__ import annotations

import orjson


class RawJSON:
    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def parsed(self):
        return orjson.loads(self.data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawJSON) and other.data == self.data

    def __repr__(self) -> str:
        return f"RawJSON({self.data[:60]!r})"
