"""The `collapse` option of a search body: `CollapseBuilder`'s and `InnerHitBuilder`'s parsers.

What depends on a mapping (the field's type, its values being single) is checked by the search
(search/collapse.py); what depends on the rest of the request (scroll, rescore, `search_before`)
by `search_request._validate`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import IllegalArgument, ParsingError
from leafsearch.request.search_types import CollapseSpec, InnerHitsSpec, SourceFilter
from leafsearch.request.sort import parse_sort
from leafsearch.unsupported import NotSupported

#: `InnerHitBuilder` options leafsearch does not have (no highlighting, scripts or second level).
_UNSUPPORTED_INNER = ("highlight", "script_fields", "collapse", "docvalue_fields", "fields", "stored_fields")


def parse_collapse(value: Any, parse_source, to_int, to_bool) -> CollapseSpec:
    """A body's `collapse` object. `parse_source`, `to_int`, `to_bool`: the search body's own
    parsers of `_source`, integers and booleans (search_request.py), so values read alike."""
    if not isinstance(value, dict):
        raise ParsingError(f"[collapse] collapse doesn't support values of type: {token_name(value)}")
    field: str | None = None
    inner: list[InnerHitsSpec] = []
    for key, item in value.items():
        if key == "field":
            if not isinstance(item, str):
                raise ParsingError(f"[collapse] field doesn't support values of type: {token_name(item)}")
            field = item
        elif key == "inner_hits":
            entries = item if isinstance(item, list) else [item]
            for entry in entries:
                inner.append(inner_hits_spec(entry, parse_source, to_int, to_bool))
        elif key == "max_concurrent_group_searches":
            if to_int(item) < 1:
                raise IllegalArgument("maxConcurrentGroupRequests must be positive, was: " + str(item))
        else:
            raise ParsingError(f"[collapse] unknown field [{key}]")
    if field is None:
        raise IllegalArgument("[collapse] Required [field]")
    names: set[str] = set()
    named = []
    for spec in inner:
        name = spec.name or field
        if name in names:
            raise IllegalArgument(f"[inner_hits] already contains an entry for key [{name}]")
        names.add(name)
        named.append(spec if spec.name else replace(spec, name=name))
    return CollapseSpec(field, tuple(named))


def inner_hits_spec(value: Any, parse_source, to_int, to_bool) -> InnerHitsSpec:
    if not isinstance(value, dict):
        raise ParsingError(f"[inner_hits] inner_hits doesn't support values of type: {token_name(value)}")
    options: dict[str, Any] = {"name": ""}
    for key, item in value.items():
        if key == "name":
            if not isinstance(item, str):
                raise ParsingError(f"[inner_hits] name doesn't support values of type: {token_name(item)}")
            options["name"] = item
        elif key in ("from", "size"):
            number = to_int(item)
            if number < 0:
                raise IllegalArgument(f"illegal {key} value, at least 0 or higher")
            options["from_" if key == "from" else key] = number
        elif key == "sort":
            options["sort"] = tuple(parse_sort(item))
        elif key == "_source":
            options["source"] = parse_source(item)
        elif key in ("version", "seq_no_primary_term", "explain", "track_scores"):
            options[key] = to_bool(item)
        elif key == "ignore_unmapped":
            to_bool(item)
        elif key in _UNSUPPORTED_INNER:
            raise NotSupported(f"[inner_hits.{key}]")
        else:
            raise ParsingError(f"[inner_hits] unknown field [{key}]")
    if "source" in options and not isinstance(options["source"], SourceFilter):
        raise ParsingError("[inner_hits] _source malformed")
    return InnerHitsSpec(**options)
