"""`memo`: `functools.lru_cache` for pure functions of request text that keeps only small calls.

A compiled pattern, a parsed query string or a date format is worth remembering between requests,
but an entry keeps its key and its value, and both grow with the text a client sent: 256 entries
of a 1 MB `query_string` are hundreds of MB held after their requests were answered. A call
whose arguments (strings, bytes, and what tuples hold) add up to more than `max_key_chars` is
computed and not kept, so a cache holds at most `maxsize` entries of bounded size.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: Text a remembered call may carry: far beyond any pattern, format or filter a client writes by
#: hand, far below what a cache of a few hundred entries should hold.
MAX_KEY_CHARS = 4096


def memo(maxsize: int, max_key_chars: int = MAX_KEY_CHARS) -> Callable[[F], F]:
    def decorate(function: F) -> F:
        cached = lru_cache(maxsize)(function)

        @wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            if _text_size((*args, *kwargs.values()), max_key_chars) > max_key_chars:
                return function(*args, **kwargs)
            return cached(*args, **kwargs)

        return call  # type: ignore[return-value]

    return decorate


def _text_size(values: tuple, limit: int) -> int:
    """The size of `values` as counted against `limit`: one per value, plus the characters of
    strings and bytes, nested tuples included; counting stops once past `limit`."""
    size = 0
    pending = list(values)
    while pending and size <= limit:
        value = pending.pop()
        size += 1
        if isinstance(value, str | bytes):
            size += len(value)
        elif isinstance(value, tuple):
            size += len(value)
            if size <= limit:
                pending.extend(value)
    return size
