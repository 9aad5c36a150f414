"""The body of `POST [/<target>]/_export` (a leafsearch extension) as a typed walk request.

An export is a walk of one snapshot in a total order: its `sort` (default index order,
`_shard_doc`) then the `_shard_doc` tiebreaker, as a PIT search's; its pages are those of a PIT
walk of `EXPORT_PAGE` hits, without a total. The body takes only what shapes the documents and
their order (`query`, `sort`, `_source`, `slice`, `search_after`, `pit`); anything else, `size`
and `from` included, is an unknown key as in `_search`. Without `pit` the export reads a
snapshot of the target taken at the request: it is parsed as a PIT search (the same validation,
tiebreaker and slicing) whose PIT the coordinator opens for the request (`OWN_SNAPSHOT`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import ActionRequestValidation, ParsingError
from leafsearch.request.search_request import parse_indices_options, parse_search_request
from leafsearch.request.search_types import SearchRequest

#: Hits per page of an export's walk (one task; its window holds 8 of them, at most 10,000).
EXPORT_PAGE = 1250
#: The keys an export body takes.
KEYS = frozenset({"query", "sort", "_source", "slice", "search_after", "pit"})
#: The PIT id an export of its own snapshot is parsed with, until its context is opened.
OWN_SNAPSHOT = "_export"


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """`walk`: the first page's request (a PIT search: sort ending with `_shard_doc`, `size` a
    page, no total); `own_snapshot`: the export opens and frees its snapshot (no `pit` given)."""

    walk: SearchRequest
    own_snapshot: bool


def parse_export_request(
    body: dict[str, Any] | None, params: dict[str, str], *, indices: str | None
) -> ExportRequest:
    """The validated request of an export of `indices` (the path's target; None for `/_export`);
    `params`: the indices options of an export of its own snapshot."""
    body = dict(body or {})
    for key, value in body.items():
        if key not in KEYS:
            raise ParsingError(f"Unknown key for a {token_name(value)} in [{key}].")
    own = "pit" not in body
    if own:
        if not indices:
            raise ActionRequestValidation("[index] is not specified")
        body["pit"] = {"id": OWN_SNAPSHOT}
    elif indices:
        raise ActionRequestValidation(
            "[indices] cannot be used with point in time. Do not specify any index with point in time."
        )
    body["size"] = EXPORT_PAGE
    body["track_total_hits"] = False
    if "sort" not in body:
        body["sort"] = ["_shard_doc"]
    walk = parse_search_request(body, {}, path="/_export")
    if own:  # the snapshot's indices, with the path's indices options, as a PIT opens them
        walk = dataclasses.replace(walk, indices=indices, indices_options=parse_indices_options(params))
    return ExportRequest(walk, own)
