"""The `highlight` section of a search: parsed into a `HighlightSpec`, its per-field options
resolved against the top-level ones (a field's own option wins), as Elasticsearch's
HighlightBuilder reads it. Rendering is search/highlight.py's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import IllegalArgument, XContentParseError
from leafsearch.request.query_dsl import Query, parse_query

_STYLED = tuple(f'<em class="hlt{i}">' for i in range(1, 11))
_TYPES = frozenset({"unified", "plain", "fvh"})
# Options Elasticsearch has that leafsearch reads and ignores (they tune the other highlighters).
_IGNORED = frozenset(
    {
        "fragmenter", "boundary_scanner", "boundary_chars", "boundary_max_scan", "boundary_scanner_locale",
        "fragment_offset", "phrase_limit", "force_source", "matched_fields", "highlight_filter", "options",
    }
)  # fmt: skip
_OPTIONS = frozenset(
    {
        "pre_tags", "post_tags", "fragment_size", "number_of_fragments", "require_field_match",
        "highlight_query", "no_match_size", "order", "type", "max_analyzed_offset",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FieldHighlight:
    """One `fields` entry with every option resolved."""

    pattern: str
    pre_tag: str = "<em>"
    post_tag: str = "</em>"
    fragment_size: int = 100
    number_of_fragments: int = 5
    require_field_match: bool = True
    highlight_query: Query | None = None
    no_match_size: int = 0
    order_by_score: bool = False
    max_analyzed_offset: int | None = None


@dataclass(frozen=True, slots=True)
class HighlightSpec:
    fields: tuple[FieldHighlight, ...]
    html: bool = False  # `encoder: html`: the text around the tags is HTML-escaped


def parse_highlight(body: Any) -> HighlightSpec:
    if not isinstance(body, dict):
        raise XContentParseError(f"[highlight] highlight doesn't support values of type: {token_name(body)}")
    top: dict[str, Any] = {}
    html = False
    fields: list[tuple[str, dict[str, Any]]] = []
    for key, value in body.items():
        if key == "fields":
            fields = _fields(value)
        elif key == "encoder":
            if value not in ("default", "html"):
                raise IllegalArgument(f"Unknown encoder [{value}]")
            html = value == "html"
        elif key == "tags_schema":
            if value != "styled":
                raise IllegalArgument(f"Unknown tag schema [{value}]")
            top.setdefault("pre_tags", list(_STYLED))
            top.setdefault("post_tags", ["</em>"])
        elif key in _OPTIONS:
            top[key] = _option(key, value, "highlight")
        elif key not in _IGNORED:
            raise XContentParseError(f"[highlight] unknown field [{key}]")
    if not fields:
        raise IllegalArgument("no fields to highlight: [highlight] needs [fields]")
    resolved = []
    for pattern, own in fields:
        options = {**top}
        for key, value in own.items():
            if key in _OPTIONS:
                options[key] = _option(key, value, "highlight_field")
            elif key not in _IGNORED:
                raise XContentParseError(f"[highlight_field] unknown field [{key}]")
        resolved.append(_field(pattern, options))
    return HighlightSpec(tuple(resolved), html)


def _fields(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """`fields` as an object, or an array of one-key objects (to keep an order)."""
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        for entry in value:
            if not isinstance(entry, dict) or len(entry) != 1:
                raise IllegalArgument(
                    "If highlighter fields is an array it must contain objects containing a single field"
                )
            items += list(entry.items())
    else:
        raise XContentParseError(f"[highlight] fields doesn't support values of type: {token_name(value)}")
    for name, options in items:
        if not isinstance(options, dict):
            raise XContentParseError(
                f"[highlight_field] {name} doesn't support values of type: {token_name(options)}"
            )
    return items


def _option(key: str, value: Any, where: str) -> Any:
    if key in ("pre_tags", "post_tags"):
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) for v in values):
            raise XContentParseError(f"[{where}] {key} doesn't support values of type: {token_name(value)}")
        return values
    if key in ("fragment_size", "number_of_fragments", "no_match_size", "max_analyzed_offset"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise XContentParseError(f"[{where}] failed to parse field [{key}]")
        try:
            number = int(value)
        except ValueError:
            raise XContentParseError(f"[{where}] failed to parse field [{key}]") from None
        if key == "max_analyzed_offset" and number < 1 and number != -1:
            raise IllegalArgument("[max_analyzed_offset] must be a positive integer, or -1")
        if number < 0 and key != "max_analyzed_offset":
            raise IllegalArgument(f"[{where}] {key} must be non-negative, got [{number}]")
        return number
    if key == "require_field_match":
        if not isinstance(value, bool) and value not in ("true", "false"):
            raise XContentParseError(f"[{where}] failed to parse field [{key}]")
        return value in (True, "true")
    if key == "highlight_query":
        return parse_query(value)
    if key == "order":
        if value not in ("score", "none"):
            raise IllegalArgument(f"No HighlightBuilder.Order enum constant for [{value}]")
        return value
    if key == "type":
        if value not in _TYPES:
            raise IllegalArgument(f"unknown highlighter type [{value}]")
        return value
    raise XContentParseError(f"[{where}] unknown field [{key}]")


def _field(pattern: str, options: dict[str, Any]) -> FieldHighlight:
    offset = options.get("max_analyzed_offset")
    return FieldHighlight(
        pattern=pattern,
        pre_tag=options.get("pre_tags", ["<em>"])[0],
        post_tag=options.get("post_tags", ["</em>"])[0],
        fragment_size=options.get("fragment_size", 100),
        number_of_fragments=options.get("number_of_fragments", 5),
        require_field_match=options.get("require_field_match", True),
        highlight_query=options.get("highlight_query"),
        no_match_size=options.get("no_match_size", 0),
        order_by_score=options.get("order") == "score",
        max_analyzed_offset=None if offset in (None, -1) else offset,
    )
