"""The `rescore` section of a search body: query rescorers, as Elasticsearch's QueryRescorerBuilder
reads them (one object or an array of them, applied in order)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import IllegalArgument, ParsingError, XContentParseError
from leafsearch.request.query_dsl import Query, parse_query

DEFAULT_WINDOW_SIZE = 10
SCORE_MODES = ("total", "multiply", "avg", "max", "min")


@dataclass(frozen=True, slots=True)
class Rescorer:
    """One query rescorer: the top `window_size` hits of each shard get
    `score_mode(score * query_weight, rescore score * rescore_query_weight)` when the rescore query
    matches them, `score * query_weight` otherwise."""

    window_size: int
    query: Query
    query_weight: float = 1.0
    rescore_query_weight: float = 1.0
    score_mode: str = "total"


def parse_rescore(value: Any) -> tuple[Rescorer, ...]:
    """`rescore`: an object or an array of objects."""
    if isinstance(value, list):
        return tuple(_rescorer(item) for item in value)
    return (_rescorer(value),)


def _rescorer(body: Any) -> Rescorer:
    from leafsearch.request.search_request import _int_value

    if not isinstance(body, dict):
        raise ParsingError(f"Unexpected token {token_name(body)} in rescore")
    window_size = DEFAULT_WINDOW_SIZE
    query_body = None
    for key, value in body.items():
        if key == "window_size":
            window_size = _int_value(value)
        elif key == "query":
            if not isinstance(value, dict):
                raise ParsingError(f"Unexpected token {token_name(value)} in rescore")
            query_body = value
        else:
            raise ParsingError(f"rescore doesn't support rescorer with name [{key}]")
    if query_body is None:
        raise ParsingError("missing rescore type")
    if window_size < 0:
        raise IllegalArgument("[window_size] must be greater than or equal to 0")
    return _query_rescorer(window_size, query_body)


def _query_rescorer(window_size: int, body: dict[str, Any]) -> Rescorer:
    from leafsearch.request.search_request import _float_value

    query = None
    weights = {"query_weight": 1.0, "rescore_query_weight": 1.0}
    mode = "total"
    for key, value in body.items():
        if key == "rescore_query":
            query = parse_query(value)
        elif key in weights:
            weights[key] = _float_value(value)
        elif key == "score_mode":
            if str(value).lower() not in SCORE_MODES:
                raise XContentParseError(
                    "[query] failed to parse field [score_mode]",
                    caused_by=IllegalArgument(f"illegal score_mode [{value}]"),
                )
            mode = str(value).lower()
        else:
            raise XContentParseError(f"[query] unknown field [{key}]")
    if query is None:
        raise IllegalArgument("rescore_query cannot be null")
    return Rescorer(window_size, query, weights["query_weight"], weights["rescore_query_weight"], mode)
