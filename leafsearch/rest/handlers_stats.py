"""`_stats`, `_close` and `_open`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leafsearch.errors import IllegalArgument
from leafsearch.indices.open_close import close_indices, open_indices
from leafsearch.indices.stats import METRICS
from leafsearch.indices.stats import indices_stats as compute_indices_stats
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.rest.unrecognized import unrecognized

if TYPE_CHECKING:
    from leafsearch.node.node import Node


def parse_metrics(path: str, metric: str | None) -> tuple[str, ...]:
    """The metrics a request names (`_all` or none: every one); unknown names are refused."""
    names = [m for m in (metric or "_all").split(",") if m]
    unknown = set(names) - {*METRICS, "_all"}
    if unknown:
        raise IllegalArgument(unrecognized(path, unknown, (*METRICS, "_all"), "metric"))
    if "_all" in names:
        return METRICS
    return tuple(m for m in METRICS if m in names)


def indices_stats(node: Node, req: RestRequest) -> RestResponse:
    metrics = parse_metrics(req.path, req.path_params.get("metric"))
    body = compute_indices_stats(
        node,
        req.path_params.get("index"),
        req.indices_options(forbid_closed=req.flag("forbid_closed_indices", True)),
        metrics,
        level=req.param("level", "indices") or "indices",
        file_sizes=req.flag("include_segment_file_sizes"),
    )
    return RestResponse(body)


def close_index(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(close_indices(node, req.path_params["index"], req.indices_options()))


def open_index(node: Node, req: RestRequest) -> RestResponse:
    options = req.indices_options(expand_wildcards="closed")
    return RestResponse(open_indices(node, req.path_params["index"], options))
