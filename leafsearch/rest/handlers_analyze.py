"""`GET|POST /_analyze` and `/<index>/_analyze` (leafsearch/indices/analyze.py does the work).

Two handlers, so that the route guard authorizes each as Elasticsearch does: without an index the
analysis reads no index (any authenticated caller); with one it is `indices:admin/analyze` on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from leafsearch.errors import IllegalArgument, ParseException
from leafsearch.indices import admin
from leafsearch.indices import analyze as analyze_api
from leafsearch.rest.exchange import RestRequest, RestResponse

if TYPE_CHECKING:
    from leafsearch.node.node import Node


def analyze(node: Node, req: RestRequest) -> RestResponse:
    """`/_analyze`: the global analyzers."""
    return RestResponse(analyze_api.analyze(None, _body(req)))


def analyze_index(node: Node, req: RestRequest) -> RestResponse:
    """`/<index>/_analyze`: the index's analyzers, fields and `index.analyze.max_token_count`."""
    body = _body(req)
    indices = admin.indices_of(node, req.indices_options(), req.path_params["index"])
    if len(indices) != 1:
        raise IllegalArgument(
            "unable to return a single index as the index and options provided got resolved to "
            "multiple indices"
        )
    return RestResponse(analyze_api.analyze(indices[0], body))


def _body(req: RestRequest) -> dict:
    body = req.json_object()
    if body is None:
        raise ParseException("request body or source parameter is required")
    return body
