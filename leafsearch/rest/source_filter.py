"""`_source`, `_source_includes`, `_source_excludes` on the document APIs.

The filtering itself is the fetch phase's (`search.fetch.filter_source`), so a get and a search
hit show the same fields for the same patterns.
"""

from __future__ import annotations

from typing import Any

from leafsearch.rawjson import RawJSON
from leafsearch.request.search_types import SourceFilter
from leafsearch.rest.exchange import RestRequest, parse_bool
from leafsearch.search.fetch import filter_source


def _patterns(value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(",") if p)


def source_option(req: RestRequest) -> SourceFilter:
    """As `FetchSourceContext.parseFromRestRequest`: `_source` is a boolean or an includes list."""
    fetch, includes, excludes = True, (), ()
    raw = req.param("_source")
    if raw is not None:
        if raw in ("", "true", "false"):
            fetch = parse_bool(raw, True)
        else:
            includes = _patterns(raw)
    if req.param("_source_includes") is not None:
        includes = _patterns(req.params["_source_includes"])
    if req.param("_source_excludes") is not None:
        excludes = _patterns(req.params["_source_excludes"])
    return SourceFilter(fetch=fetch, includes=includes, excludes=excludes)


def apply_source_option(body: dict[str, Any], req: RestRequest) -> dict[str, Any]:
    """Drop or filter the `_source` of a get response as the request's parameters ask."""
    source = body.get("_source")
    if isinstance(source, RawJSON):
        filtered = filter_source(source.data, source_option(req))
        if filtered is None:
            del body["_source"]
        elif filtered is not source.data:
            body["_source"] = RawJSON(filtered)
    return body
