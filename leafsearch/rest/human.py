"""`human=true`: the readable form of every time and size beside its raw number.

Elasticsearch writes `"total_time" : "1.2s"` before `"total_time_in_millis" : 1234` and
`"size" : "4.5kb"` before `"size_in_bytes" : 4669` when `human` is set. Every such field of
leafsearch's responses follows that naming, so one walk over the response adds them all, whoever
built the section (stats, nodes, breakers, cat as JSON); sources and `fields` are user data and are
never walked.
"""

from __future__ import annotations

from typing import Any

from leafsearch.common.rawjson import RawJSON
from leafsearch.common.settings import human_size

_NANOS = (
    (86_400_000_000_000, "d"),
    (3_600_000_000_000, "h"),
    (60_000_000_000, "m"),
    (1_000_000_000, "s"),
    (1_000_000, "ms"),
    (1_000, "micros"),
)
# `_millis` alone: cluster health's `task_max_waiting_in_queue_millis`.
_SUFFIXES = (("_in_millis", 1_000_000), ("_in_nanos", 1), ("_millis", 1_000_000))
_USER_DATA = frozenset({"_source", "fields", "hits", "aggregations", "mappings", "settings"})


def human_time(nanos: int) -> str:
    """`TimeValue.toString`: the largest unit the value reaches, one decimal truncated, `.0`
    dropped; `0s` for zero and the raw number for a negative value."""
    if nanos < 0:
        return str(nanos)
    if nanos == 0:
        return "0s"
    for scale, suffix in _NANOS:
        if nanos >= scale:
            return _one_decimal(nanos / scale) + suffix
    return f"{nanos}nanos"


def _one_decimal(value: float) -> str:
    whole, _, fraction = repr(value).partition(".")
    digit = fraction[:1]
    return whole if digit in ("", "0") or "e" in fraction else f"{whole}.{digit}"


def _readable(key: str, value: Any) -> tuple[str, str] | None:
    if type(value) is not int:
        return None
    if key.endswith("_in_bytes"):
        return key.removesuffix("_in_bytes"), human_size(value) if value >= 0 else f"{value}b"
    for suffix, nanos in _SUFFIXES:
        if key.endswith(suffix):
            return key.removesuffix(suffix), human_time(value * nanos)
    return None


def with_human_fields(body: Any) -> Any:
    """`body` with the readable field written before each `*_in_millis` (`*_millis`), `*_in_nanos`
    and `*_in_bytes` number that has none yet; other values are shared, not copied."""
    if isinstance(body, list):
        return [with_human_fields(item) for item in body]
    if not isinstance(body, dict):
        return body
    out: dict[str, Any] = {}
    for key, value in body.items():
        readable = _readable(key, value)
        if readable is not None and readable[0] not in body:
            out[readable[0]] = readable[1]
        elif key not in _USER_DATA and not isinstance(value, RawJSON):
            value = with_human_fields(value)
        out[key] = value
    return out
