"""Typed search requests: what the request parser produces and the coordinator consumes.

Validation happens while building these (see search_request.py), so the coordinator can trust
every field: sort specs are resolved, limits are checked, and refusals carry Elasticsearch's
error type and message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from leafsearch.common.wire_pickle import ByFields
from leafsearch.request.query_dsl import Query, ScriptSpec, query_is_match_all

if TYPE_CHECKING:
    from leafsearch.request.highlight import HighlightSpec
    from leafsearch.request.indices_options import IndicesOptions

#: Special sort keys.
SCORE = "_score"
DOC = "_doc"
SHARD_DOC = "_shard_doc"


@dataclass(frozen=True, slots=True)
class NestedSort:
    """A sort's `nested` option: the values of the objects of `path` (passing `filter`, the first
    `max_children` of each document) are the document's (search/nested_sort.py)."""

    path: str
    filter: Query | None = None
    max_children: int | None = None


@dataclass(frozen=True, slots=True)
class SortSpec(ByFields):
    """One sort key. `missing` is "_last", "_first" or a raw value; `mode` None means the default
    (min for asc, max for desc)."""

    field: str
    order: str  # "asc" | "desc"
    missing: Any = "_last"
    mode: str | None = None
    unmapped_type: str | None = None
    numeric_type: str | None = None
    format: str | None = None
    #: A `_script` sort's script and its `type` ("number", "string" or "version"); `field` is
    #: then "_script".
    script: ScriptSpec | None = None
    script_type: str | None = None
    nested: NestedSort | None = None
    geo: Any = None  # a `_geo_distance` sort's `geo_dsl.GeoSort`; `field` is then its geo_point field

    @property
    def descending(self) -> bool:
        return self.order == "desc"


@dataclass(frozen=True, slots=True)
class SliceSpec:
    id: int
    max: int
    field: str | None = None


@dataclass(frozen=True, slots=True)
class PitSpec:
    id: str
    keep_alive: str | None = None


@dataclass(frozen=True, slots=True)
class SourceFilter:
    """`_source` option: fetch=False drops it; includes/excludes are path patterns with `*`."""

    fetch: bool = True
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()

    @property
    def filtering(self) -> bool:
        return bool(self.includes or self.excludes)


@dataclass(frozen=True, slots=True)
class InnerHitsSpec:
    """One `collapse.inner_hits` entry: each collapsed hit's group, searched with these options
    (Elasticsearch's expand phase)."""

    name: str
    from_: int = 0
    size: int = 3
    sort: tuple[SortSpec, ...] = ()
    source: SourceFilter = field(default_factory=SourceFilter)
    version: bool = False
    seq_no_primary_term: bool = False
    explain: bool = False
    track_scores: bool = False


@dataclass(frozen=True, slots=True)
class CollapseSpec:
    """`collapse`: one hit per value of a keyword or numeric `field`, its best by the sort."""

    field: str
    inner_hits: tuple[InnerHitsSpec, ...] = ()


@dataclass(slots=True)
class SearchRequest(ByFields):
    """A whole search, as the REST layer (or an in-process caller) hands it to `Node.search`."""

    query: Query
    indices: str | None = None  # the index expression (None: every index); a PIT search has none
    indices_options: IndicesOptions | None = None  # None: a search's defaults
    from_: int = 0
    size: int = 10
    sort: list[SortSpec] = field(default_factory=list)  # empty: by _score desc
    search_after: list[Any] | None = None
    #: `search_before` (a leafsearch extension): `sort` and `search_after` are then the reversed
    #: walk's (`request.sort.reversed_sort`, the client's `search_before` values as its cursor), so
    #: the engine pages forward from the cursor as for `search_after`; the page is answered
    #: reversed, in the request's own order (`hitlist.backwards_page`).
    backwards: bool = False
    pit: PitSpec | None = None
    slice: SliceSpec | None = None
    scroll: str | None = None  # keep-alive of a scroll this request opens
    track_total_hits: bool | int = 10_000  # True: exact; False: not tracked; int: exact up to it
    track_scores: bool = False
    profile: bool = False  # `profile: true`: timings per shard in the response (search/profile.py)
    source: SourceFilter = field(default_factory=SourceFilter)
    fields: list[dict[str, Any]] = field(default_factory=list)  # [{"field": pattern, "format": ...}]
    docvalue_fields: list[dict[str, Any]] = field(default_factory=list)
    stored_fields: list[str] | None = None  # ["_none_"] disables fetching
    version: bool = False
    seq_no_primary_term: bool = False
    explain: bool = False
    aggs: Any = None  # parsed aggregation tree, or None
    rescore: tuple[Any, ...] = ()  # `request.rescore.Rescorer`s, applied in order
    #: `script_fields`: (name, script, ignore_failure), in the request's order.
    script_fields: tuple[tuple[str, ScriptSpec, bool], ...] = ()
    highlight: HighlightSpec | None = None  # `highlight`: fragments rendered with each hit
    post_filter: Query | None = None
    collapse: CollapseSpec | None = None
    min_score: float | None = None
    terminate_after: int | None = None
    rest_total_hits_as_int: bool = False
    typed_keys: bool = False
    indices_boost: list[tuple[str, float]] = field(default_factory=list)
    routing: str | None = None  # the `routing` parameter: comma-separated values naming the shards to search
    dfs: bool = False  # search_type=dfs_query_then_fetch: score with statistics of all shards
    timeout: float | None = None  # seconds (-1: none); None: `search.default_search_timeout`
    allow_partial_search_results: bool | None = None  # None: `search.default_allow_partial_results`
    #: `request_cache`: True caches the answer whatever its size, False never; None: the index's
    #: `index.requests.cache.enable` for `size: 0` requests (search/request_cache.py)
    request_cache: bool | None = None
    #: `suggest`: `request.suggest` suggestions, answered beside the hits (search/suggest.py)
    suggest: tuple[Any, ...] = ()

    def plain_walk(self, sort_field: str) -> bool:
        """Whether the request only reads every document in the order of one `sort_field` sort: a
        `match_all` with nothing computed per document (no aggs, post_filter, min_score,
        terminate_after or scores). The `_doc` scroll and the `_shard_doc` export need no match
        list for such a walk."""
        sort = self.sort
        return (
            len(sort) == 1
            and sort[0].field == sort_field
            and query_is_match_all(self.query)
            and self.aggs is None
            and self.collapse is None
            and self.post_filter is None
            and self.min_score is None
            and self.terminate_after is None
            and not self.track_scores
        )
