"""The parent-join queries (`has_child`, `has_parent`, `parent_id`), parsed as Elasticsearch's
parent-join module parses them; planned per shard by search/query/join_queries.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from leafsearch.errors import IllegalArgument, ParsingError
from leafsearch.request import query_dsl as dsl

if TYPE_CHECKING:
    from leafsearch.request.search_types import InnerHitsSpec

SCORE_MODES = ("none", "avg", "max", "min", "sum")
_INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class HasChild(dsl.Query):
    """Parents with children of `type` matching `query`, scored from theirs by `score_mode`."""

    type: str
    query: dsl.Query
    score_mode: str = "none"
    min_children: int = 0
    max_children: int = _INT_MAX
    ignore_unmapped: bool = False
    inner_hits: InnerHitsSpec | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class HasParent(dsl.Query):
    """Children whose parent of `parent_type` matches `query` (scored by it with `score`)."""

    parent_type: str
    query: dsl.Query
    score: bool = False
    ignore_unmapped: bool = False
    inner_hits: InnerHitsSpec | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class ParentId(dsl.Query):
    """Children of `type` whose parent is `id`."""

    type: str
    id: str
    ignore_unmapped: bool = False
    boost: float = 1.0


def _inner_hits_spec(value: Any, default_name: str) -> InnerHitsSpec:
    """A query's `inner_hits`, named after the relation it reaches unless it names itself."""
    from leafsearch.request import search_request  # it parses the bodies these queries are in
    from leafsearch.request.collapse import parse_inner_hits

    spec = parse_inner_hits(
        value, search_request.parse_fetch_source, search_request._int_value, search_request._bool_value
    )
    return spec if spec.name else replace(spec, name=default_name)


def _has_child(body: dict, depth: int) -> dsl.Query:
    name = "has_child"
    options: dict[str, Any] = {}
    inner_hits = None
    for key, value in body.items():
        if key == "query":
            options["query"] = _query(name, value, depth)
        elif key == "type":
            options["type"] = dsl._text(name, key, value)
        elif key == "score_mode":
            mode = dsl._text(name, key, value)
            if mode not in SCORE_MODES:
                raise IllegalArgument(f"No score mode for child query [{mode}] found")
            options["score_mode"] = mode
        elif key in ("min_children", "max_children"):
            options[key] = dsl._int(name, key, value)
        elif key == "ignore_unmapped":
            options[key] = dsl._bool(name, key, value)
        elif key == "boost":
            options[key] = dsl._float(name, key, value)
        elif key == "inner_hits":
            inner_hits = value
        elif key not in dsl._IGNORED:
            raise ParsingError(f"[{name}] query does not support [{key}]")
    _require(name, options, "type", "query")
    low, high = options.get("min_children", 0), options.get("max_children", _INT_MAX)
    if low < 0:
        raise IllegalArgument(f"[{name}] requires non-negative 'min_children' field")
    if high < 0:
        raise IllegalArgument(f"[{name}] requires non-negative 'max_children' field")
    if high < low:
        raise IllegalArgument(f"[{name}] 'max_children' is less than 'min_children'")
    if inner_hits is not None:
        options["inner_hits"] = _inner_hits_spec(inner_hits, options["type"])
    return HasChild(**options)


def _has_parent(body: dict, depth: int) -> dsl.Query:
    name = "has_parent"
    options: dict[str, Any] = {}
    inner_hits = None
    for key, value in body.items():
        if key == "query":
            options["query"] = _query(name, value, depth)
        elif key in ("parent_type", "type"):
            options["parent_type"] = dsl._text(name, key, value)
        elif key in ("score", "ignore_unmapped"):
            options[key] = dsl._bool(name, key, value)
        elif key == "boost":
            options[key] = dsl._float(name, key, value)
        elif key == "inner_hits":
            inner_hits = value
        elif key not in dsl._IGNORED:
            raise ParsingError(f"[{name}] query does not support [{key}]")
    _require(name, options, "parent_type", "query")
    if inner_hits is not None:
        options["inner_hits"] = _inner_hits_spec(inner_hits, options["parent_type"])
    return HasParent(**options)


def _parent_id(body: dict, depth: int) -> dsl.Query:
    name = "parent_id"
    options: dict[str, Any] = {}
    for key, value in body.items():
        if key in ("type", "id"):
            options[key] = dsl._text(name, key, value)
        elif key == "ignore_unmapped":
            options[key] = dsl._bool(name, key, value)
        elif key == "boost":
            options[key] = dsl._float(name, key, value)
        elif key not in dsl._IGNORED:
            raise ParsingError(f"[{name}] query does not support [{key}]")
    _require(name, options, "type", "id")
    return ParentId(**options)


def _query(name: str, value: Any, depth: int) -> dsl.Query:
    if not isinstance(value, dict):
        raise ParsingError(f"[{name}] query does not support [query]")
    return dsl._parse(value, depth)


def _require(name: str, options: dict[str, Any], *keys: str) -> None:
    for key in keys:
        if key not in options:
            raise IllegalArgument(f"[{name}] requires '{key}' field")


PARSERS: dict[str, Callable[[dict, int], dsl.Query]] = {
    "has_child": _has_child,
    "has_parent": _has_parent,
    "parent_id": _parent_id,
}
