"""Parsing the `aggs` object: the structure Elasticsearch accepts, and the registry of types."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from leafsearch.common.json_tokens import token_name
from leafsearch.common.suggestions import did_you_mean
from leafsearch.errors import AggregationInitialization, ElasticError, IllegalArgument, ParsingError
from leafsearch.search.aggs import geo
from leafsearch.search.aggs.base import AggTree, ParseContext
from leafsearch.search.aggs.composite import parse_composite
from leafsearch.search.aggs.filters import parse_filter, parse_filters
from leafsearch.search.aggs.histogram import parse_date_histogram, parse_histogram
from leafsearch.search.aggs.hits import parse_top_hits
from leafsearch.search.aggs.join import PARSERS as JOIN_PARSERS
from leafsearch.search.aggs.metrics import parse_cardinality, parse_stats
from leafsearch.search.aggs.nested import parse_nested, parse_reverse_nested
from leafsearch.search.aggs.ranges import parse_range
from leafsearch.search.aggs.terms import parse_terms
from leafsearch.unsupported import AGGREGATIONS, NotSupported

METRICS = ("min", "max", "sum", "avg", "value_count", "stats", "extended_stats")
PARSERS = {
    **{name: parse_stats(name) for name in METRICS},
    "cardinality": parse_cardinality,
    "terms": parse_terms,
    "histogram": parse_histogram,
    "date_histogram": parse_date_histogram,
    "range": parse_range("range"),
    "date_range": parse_range("date_range"),
    "filter": parse_filter,
    "filters": parse_filters,
    "composite": parse_composite,
    "top_hits": parse_top_hits,
    **JOIN_PARSERS,
    "nested": parse_nested,
    "reverse_nested": parse_reverse_nested,
    **geo.PARSERS,
}
LEAVES = frozenset((*METRICS, "cardinality", "top_hits", *geo.LEAVES))
_VALID_NAME = re.compile(r"[^\[\]>]+")
MAX_NESTED_DEPTH = "search.aggs.max_nested_depth"
MAX_AGGREGATIONS = "search.max_aggregations"


def _too_deep(max_depth: int) -> ParsingError:
    return ParsingError(
        "The nested depth of the aggregations exceeds the maximum nested depth for aggregations of "
        f"[{max_depth}] set in [{MAX_NESTED_DEPTH}]"
    )


def _too_many(max_count: int, count: int) -> IllegalArgument:
    return IllegalArgument(
        f"Trying to create too many aggregations. Must be less than or equal to: [{max_count}] but was "
        f"[{count}]. This limit can be set by changing the [{MAX_AGGREGATIONS}] cluster level setting."
    )


def check_aggregations(body: Any, max_depth: int, max_count: int) -> None:
    """Refuse aggregations nested deeper than `max_depth`, or more than `max_count` of them over
    all levels, before anything builds or walks them recursively (the server process checks this
    before a search worker is sent the request, whose pickling recurses). Iterative,
    O(aggregations); a malformed level is left for the parser to refuse."""
    level = [body] if isinstance(body, dict) else []
    count = 0
    for depth in range(max_depth + 1):
        if not level:
            break
        if depth == max_depth:
            raise _too_deep(max_depth)
        count += sum(len(aggs) for aggs in level)
        level = [
            subs
            for aggs in level
            for definition in aggs.values()
            if isinstance(definition, dict)
            for key in ("aggs", "aggregations")
            if isinstance(subs := definition.get(key), dict) and subs
        ]
    if count > max_count:
        raise _too_many(max_count, count)


def parse_level(body: Any, pctx: ParseContext) -> AggTree:
    if pctx.max_depth is not None and pctx.depth > pctx.max_depth:
        raise _too_deep(pctx.max_depth)
    tree = AggTree()
    for name, definition in body.items():
        if not _VALID_NAME.fullmatch(name):
            raise ParsingError(
                f"Invalid aggregation name [{name}]. Aggregation names can contain any character "
                "except '[', ']', and '>'"
            )
        if not isinstance(definition, dict):
            raise ParsingError(
                f"Aggregation definition for [{name} starts with a [{token_name(definition)}], expected a "
                "[START_OBJECT]."
            )
        type_name = agg_body = meta = subs_body = None
        for key, value in definition.items():
            if not isinstance(value, dict):
                raise ParsingError(
                    f"Expected [START_OBJECT] under [{key}], but got a [{token_name(value)}] in [{name}]"
                )
            if key == "meta":
                meta = value
            elif key in ("aggs", "aggregations"):
                if subs_body is not None:
                    raise ParsingError(f"Found two sub aggregation definitions under [{name}]")
                subs_body = value
            elif type_name is not None:
                raise ParsingError(
                    f"Found two aggregation type definitions in [{name}]: [{type_name}] and [{key}]"
                )
            elif key not in PARSERS:
                raise NotSupported(f"[{key}] aggregation") if key in AGGREGATIONS else unknown_type(key)
            else:
                type_name, agg_body = key, value
        if type_name is None:
            raise ParsingError(f"Missing definition for aggregation [{name}]")
        subs = (
            parse_level(subs_body, replace(pctx, parent=type_name, depth=pctx.depth + 1))
            if subs_body
            else AggTree()
        )
        if subs and type_name in LEAVES:
            raise AggregationInitialization(
                f"Aggregator [{name}] of type [{type_name}] cannot accept sub-aggregations"
            )
        tree.append(PARSERS[type_name](name, agg_body, meta, subs, pctx))
    return tree


def unknown_type(type_name: str) -> ElasticError:
    cause = ElasticError(
        f"unknown field [{type_name}]", error_type="named_object_not_found_exception", status=400
    )
    error = ParsingError(
        f"Unknown aggregation type [{type_name}]{did_you_mean(type_name, PARSERS)}", caused_by=cause
    )
    # NamedObjectNotFoundException is no ElasticsearchException, so guessRootCauses stops above it.
    error.root_is_self = True
    return error
