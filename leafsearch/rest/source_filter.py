"""`_source`, `_source_includes`, `_source_excludes` on the document APIs.

The parameters are read as a search reads them (`request.search_request.url_source_filter`) and
the filtering is the fetch phase's (`search.fetch.filter_source`), so a get and a search hit show
the same fields for the same parameters.
"""

from __future__ import annotations

from typing import Any

from leafsearch.common.rawjson import RawJSON
from leafsearch.request.search_request import url_source_filter
from leafsearch.request.search_types import SourceFilter
from leafsearch.rest.exchange import RestRequest
from leafsearch.search.fetch import filter_source


def apply_source_option(body: dict[str, Any], req: RestRequest) -> dict[str, Any]:
    """Drop or filter the `_source` of a get response as the request's parameters ask."""
    return apply_source_filter(body, url_source_filter(req.params) or SourceFilter())


def apply_source_filter(body: dict[str, Any], source_filter: SourceFilter) -> dict[str, Any]:
    """Drop or filter the `_source` of a get response (or of one `_mget` document)."""
    source = body.get("_source")
    if isinstance(source, RawJSON):
        filtered = filter_source(source.data, source_filter)
        if filtered is None:
            del body["_source"]
        elif filtered is not source.data:
            body["_source"] = RawJSON(filtered)
    return body
