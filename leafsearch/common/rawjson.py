"""Pre-encoded JSON carried through a response unchanged.

Stored `_source` bytes are exactly what the client sent; wrapping them in RawJSON lets the
renderer splice them into the response (orjson.Fragment) instead of parsing and re-encoding.
"""

from __future__ import annotations

import pickle

import orjson


class RawJSON:
    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce_ex__(self, protocol: int) -> tuple:
        """Pickled (protocol 5) with its bytes as a buffer: a search worker sends a rendered page
        out of band, and the server process holds the bytes it read, without a copy."""
        if protocol >= 5:
            return _rebuilt, (pickle.PickleBuffer(self.data),)
        return RawJSON, (self.data,)

    def parsed(self):
        return orjson.loads(self.data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawJSON) and other.data == self.data

    def __repr__(self) -> str:
        return f"RawJSON({self.data[:60]!r})"


def fragment(value: object) -> orjson.Fragment:
    """orjson's `default` for bodies holding `RawJSON`: its bytes spliced as they are."""
    if isinstance(value, RawJSON):
        return orjson.Fragment(value.data)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def as_bytes(data: bytes | memoryview) -> bytes:
    """An out-of-band buffer as bytes: the one a search worker's reply was read into, or a copy
    of a view another transport (Ray's object store) hands over."""
    return data if isinstance(data, bytes) else bytes(data)


def _rebuilt(data: bytes | memoryview) -> RawJSON:
    return RawJSON(as_bytes(data))
