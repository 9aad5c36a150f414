"""Date math in index names: `<logs-{now/d}>` names `logs-2024.03.22` (today, in UTC).

Elasticsearch resolves such names wherever an index is named (create, search, writes, bulk items),
as its DateMathExpressionResolver does: a name is date math only when it is wrapped in `<` and
`>`; inside, `{math}` or `{math{format}}` or `{math{format|time_zone}}` is replaced by the date
`math` gives (it starts at `now`), printed in `format` (default `uuuu.MM.dd`) in `time_zone`
(default UTC); `\\` escapes a brace. The same request resolves every name at the same `now`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from leafsearch.errors import ElasticError, ParseException
from leafsearch.index.dates import DateFormatter, parse_date_math, parse_zone

DEFAULT_FORMAT = "uuuu.MM.dd"
_ESCAPE, _OPEN, _CLOSE, _ZONE = "\\", "{", "}", "|"


def resolve_expression(expression: str, now_millis: int | None = None) -> str:
    """A comma-separated index expression with each `<...>` part resolved; others as given."""
    if "<" not in expression:
        return expression
    now = int(time.time() * 1000) if now_millis is None else now_millis
    return ",".join(resolve_name(part, now) for part in expression.split(","))


def resolve_name(name: str, now_millis: int) -> str:
    """One name: its date math resolved when it is `<...>` (a leading `-` exclusion is kept)."""
    prefix = "-" if name.startswith("-<") else ""
    body = name[len(prefix) :]
    if len(body) < 2 or not (body.startswith("<") and body.endswith(">")):
        return name
    return prefix + _resolve(body[1:-1], now_millis)


def _resolve(text: str, now_millis: int) -> str:
    out: list[str] = []
    placeholder: list[str] | None = None  # the `{...}` being read, None outside one
    in_format = False
    escaped = False
    for position, c in enumerate(text, start=1):  # positions count the leading `<`
        was_escaped, escaped = escaped, False
        if c == _ESCAPE and not was_escaped:
            escaped = True
            continue
        if c == _ESCAPE:
            out.append(c)
            continue
        if placeholder is None:
            if c == _OPEN and not was_escaped:
                placeholder = []
            elif c == _CLOSE and not was_escaped:
                raise ParseException(
                    f"invalid dynamic name expression [{text}]. invalid character at position "
                    f"[{position}]. `{{` and `}}` are reserved characters and should be escaped when used as "
                    "part of the index name using `\\` (e.g. `\\{text\\}`)"
                )
            else:
                out.append(c)
        elif c == _OPEN and not (in_format and was_escaped):
            if in_format:
                raise ParseException(
                    f"invalid dynamic name expression [{text}]. invalid character in placeholder at "
                    f"position [{position}]"
                )
            in_format = True
            placeholder.append(c)
        elif c == _CLOSE and not (in_format and was_escaped):
            if in_format:
                in_format = False
                placeholder.append(c)
            else:
                out.append(_evaluate("".join(placeholder), now_millis))
                placeholder = None
        else:
            placeholder.append(c)
    if placeholder is not None:
        raise ParseException(f"invalid dynamic name expression [{text}]. date math placeholder is open ended")
    if not out:
        raise ParseException("nothing captured")
    return "".join(out)


def _evaluate(placeholder: str, now_millis: int) -> str:
    """One `math{format|zone}` placeholder printed."""
    brace = placeholder.find(_OPEN)
    pattern, zone_id = DEFAULT_FORMAT, None
    math = placeholder
    if brace >= 0:
        if not placeholder.endswith(_CLOSE):
            raise ParseException(
                f"invalid dynamic name expression [{placeholder}]. missing closing `}}` for date math format"
            )
        if brace == len(placeholder) - 2:
            raise ParseException(f"invalid dynamic name expression [{placeholder}]. missing date format")
        math = placeholder[:brace]
        pattern, _, zone_id = placeholder[brace + 1 : -1].partition(_ZONE)
    try:
        zone = parse_zone(zone_id) if zone_id else UTC
        formatter = DateFormatter(pattern)
        millis = parse_date_math(math, now_millis, formatter, False, time_zone=zone)
    except ValueError as exc:
        raise ElasticError(str(exc), status=400, error_type="illegal_argument_exception") from None
    offset = zone.utcoffset(datetime.fromtimestamp(millis / 1000, UTC))
    local = millis + (int(offset.total_seconds() * 1000) if offset is not None else 0)
    return formatter.format(local)
