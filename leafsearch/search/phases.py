"""The phases every search shares: targets and limits, the query phase, paging, fetch, response.

A search reads a fixed list of shard snapshots (the current ones, or those a PIT or scroll context
holds); the HitList of matches in sort order is built once per (snapshots, query, sort, slice) and
reused, so every page is a slice or a binary search of it and the fetch phase touches only the
page's documents. One walk needs no HitList at all: every document by `_shard_doc` without
counting (`track_total_hits: false`), whose pages are ranges of the snapshots' live documents.
Shard-level refusals are reported as Elasticsearch's coordinator reports them: a
`search_phase_execution_exception` of the phase that failed, the real reason as root cause.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from leafsearch.errors import ElasticError, IllegalArgument, SearchPhaseExecution
from leafsearch.rawjson import RawJSON
from leafsearch.request.search_types import SHARD_DOC, SearchRequest
from leafsearch.rest.exchange import parse_bool
from leafsearch.search import fetch
from leafsearch.search.hitlist import HitList, HitListCache, shard_doc_page
from leafsearch.search.slicing import check_slice_field, pit_slice_range
from leafsearch.search.sort_keys import missing_substitute
from leafsearch.search.targets import Target, acquire_targets

if TYPE_CHECKING:
    from leafsearch.node import Node

_CACHE = HitListCache()


def resolve_targets(node: Node, index_expr: str | None, params: dict[str, str]) -> list[Target]:
    names = node.resolve_indices(
        index_expr,
        ignore_unavailable=parse_bool(params.get("ignore_unavailable"), False),
        allow_no_indices=parse_bool(params.get("allow_no_indices"), True),
        expand_wildcards=params.get("expand_wildcards", "open"),
    )
    indices = [node.indices[n] for n in sorted(names)]
    return acquire_targets(indices, params.get("routing"))


def check_limits(request: SearchRequest, targets: list[Target]) -> None:
    """Index-level limits, checked per target index as Elasticsearch's shards do."""
    for index in {id(t.index): t.index for t in targets}.values():
        window = int(index.setting("index.max_result_window"))
        if request.scroll is not None:
            if request.size > window:
                raise _phase_error(
                    IllegalArgument(
                        f"Batch size is too large, size must be less than or equal to: [{window}] but was "
                        f"[{request.size}]. Scroll batch sizes cost as much memory as result windows so they are "
                        "controlled by the [index.max_result_window] index level setting."
                    )
                )
        elif request.search_after is None and request.from_ + request.size > window:
            raise _phase_error(
                IllegalArgument(
                    f"Result window is too large, from + size must be less than or equal to: [{window}] but was "
                    f"[{request.from_ + request.size}]. See the scroll api for a more efficient way to request "
                    "large data sets. This limit can be set by changing the [index.max_result_window] index level "
                    "setting."
                )
            )
        elif request.search_after is not None and request.size > window:
            raise _phase_error(
                IllegalArgument(
                    f"Result window is too large, from + size must be less than or equal to: [{window}] but was "
                    f"[{request.size}]. See the scroll api for a more efficient way to request large data sets. "
                    "This limit can be set by changing the [index.max_result_window] index level setting."
                )
            )
        if request.slice is not None:
            limit = int(index.setting("index.max_slices_per_scroll"))
            if request.slice.max > limit:
                raise _phase_error(
                    IllegalArgument(
                        f"The number of slices [{request.slice.max}] is too large. It must be less than [{limit}]. "
                        "This limit can be set by changing the [index.max_slices_per_scroll] index level setting."
                    )
                )
    if request.slice is not None and request.slice.field is not None:
        try:
            check_slice_field(targets, request.slice, pit=request.pit is not None)
        except ElasticError as exc:
            raise _phase_error(exc) from None


def _phase_error(cause: ElasticError) -> SearchPhaseExecution:
    return SearchPhaseExecution(cause)


def _agg_collector(request: SearchRequest, targets: list[Target]):
    if request.aggs is None:
        return None, None
    from leafsearch.search.aggregations import collect, parse_aggs

    now = int(time.time() * 1000)
    trees = {}
    for t in targets:
        if t.index.uuid not in trees:
            trees[t.index.uuid] = parse_aggs(request.aggs, t.mapping, index=t.index.name, now_millis=now)
    if not trees:
        trees[None] = parse_aggs(request.aggs, None, now_millis=now)

    def with_aggs(target: Target, view, docs: np.ndarray, ctx) -> Any:
        return collect(trees[target.index.uuid], view, docs, ctx)

    return with_aggs, next(iter(trees.values()))


def query_phase(
    node: Node, targets: list[Target], request: SearchRequest, *, aggs: bool
) -> tuple[HitList, Any]:
    """The matches of every target in sort order (or, for a plain `_shard_doc` walk, the page)."""
    # Aggregation requests are parsed before the shards run: their errors are not shard failures.
    with_aggs, tree = _agg_collector(request, targets) if aggs else (None, None)
    with node.search_stats.phase("query"):
        try:
            if _walks_live_docs(request):
                hitlist = _live_docs_page(targets, request)
            else:
                hitlist = _CACHE.get_or_build(targets, request, with_aggs=with_aggs)
        except SearchPhaseExecution:
            raise
        except ElasticError as exc:
            if exc.status == 400 and exc.error_type not in ("parsing_exception", "x_content_parse_exception"):
                raise _phase_error(exc) from None
            raise
    return hitlist, tree


def _walks_live_docs(request: SearchRequest) -> bool:
    """Whether the request walks every document in `_shard_doc` order without counting them.

    That walk (SPEC 4.1 r12, the fastest full export) needs no query, no sort and no match list:
    its pages are ranges of the snapshots' live documents, located by binary search.
    """
    sliced = request.slice
    return (
        request.track_total_hits is False
        and request.plain_walk(SHARD_DOC)
        and (sliced is None or (request.pit is not None and sliced.field is None))
        and (request.search_after is None or len(request.search_after) == 1)
    )


def _live_docs_page(targets: list[Target], request: SearchRequest) -> HitList:
    spec = request.sort[0]
    after = None
    if request.search_after is not None:
        try:
            after = fetch.parse_search_after_value(request.search_after[0], None, spec)
        except ElasticError as exc:
            raise _phase_error(exc) from None
        if after is None:  # `null` means what it means in the match-list walk: past the end
            after = missing_substitute(spec, None)
    window = None
    if request.slice is not None:
        total = sum(t.searcher.live_count for t in targets)
        window = pit_slice_range(request.slice, total)
    return shard_doc_page(targets, spec, after, request.from_, request.size, window)


def page_bounds(hitlist: HitList, request: SearchRequest) -> tuple[int, int]:
    """The page's positions in the hit list: an offset, or a binary search for `search_after`."""
    if hitlist.window:
        return 0, len(hitlist)
    if request.search_after is not None:
        start = hitlist.position_after(_after_keys(hitlist, request))
    else:
        start = request.from_
    return start, min(start + request.size, len(hitlist))


def _after_keys(hitlist: HitList, request: SearchRequest) -> list[Any]:
    assert request.search_after is not None
    if len(request.search_after) != len(hitlist.columns):
        raise _phase_error(
            IllegalArgument(
                f"search_after has {len(request.search_after)} value(s) but sort has {len(hitlist.columns)}."
            )
        )
    keys: list[Any] = []
    for col, raw in zip(hitlist.columns, request.search_after, strict=True):
        ft = next((f for f in col.field_types if f is not None), None)
        try:
            value = fetch.parse_search_after_value(raw, ft, col.spec)
        except ElasticError as exc:
            raise _phase_error(exc) from None
        keys.extend(col.after_key(value))
    return keys


@dataclass
class _Page:
    """What the fetch phase reads for a page: per hit its target, segment view, local doc, id,
    source bytes, routing, score and sort values."""

    tpos: np.ndarray
    located: list[tuple[Any, int]]
    ids: list[bytes | None]  # UTF-8
    sources: list[bytes | None]
    routings: list[str | None]
    scores: list[float | None]
    sort_columns: list[list[Any]] | None  # per sort column, the page's rendered values

    def sort_rows(self) -> list[list[Any]]:
        assert self.sort_columns is not None
        return [list(row) for row in zip(*self.sort_columns, strict=True)]


def _gather(hitlist: HitList, start: int, end: int, request: SearchRequest) -> _Page:
    """Ids, sources and routings of the page's documents only, read segment by segment.

    `stored_fields: _none_` loads no stored field at all, so its hits have no id, routing or
    source (Elasticsearch's fetch phase then builds id-less hits).
    """
    sl = slice(start, end)
    tpos = hitlist.target[sl]
    docs = hitlist.doc[sl]
    n = end - start
    ids: list[bytes | None] = [None] * n
    sources: list[bytes | None] = [None] * n
    routings: list[str | None] = [None] * n
    located: list[tuple[Any, int]] = [(None, 0)] * n
    stored = _loads_stored_fields(request)
    fetch_source = request.source.fetch and stored
    for ti in np.unique(tpos).tolist():
        views = hitlist.targets[ti].searcher.views
        bases = np.array([v.doc_base for v in views], dtype=np.int64)
        in_target = np.flatnonzero(tpos == ti)
        vis = np.searchsorted(bases, docs[in_target], side="right") - 1
        for vi in np.unique(vis).tolist():
            view = views[vi]
            rows_arr = in_target[vis == vi]
            rows = rows_arr.tolist()
            local = docs[rows_arr] - view.doc_base
            for row, d in zip(rows, local.tolist(), strict=True):
                located[row] = (view, d)
            if not stored:
                continue
            for row, doc_id in zip(rows, view.segment.doc_id_bytes(local), strict=True):
                ids[row] = doc_id
            if fetch_source or request.fields:
                for row, raw in zip(rows, view.segment.sources(local), strict=True):
                    sources[row] = raw
            routing_col = view.segment.column("_routing")
            if routing_col is not None:
                for row, d in zip(rows, local.tolist(), strict=True):
                    vals = routing_col.ords.doc_values(d)
                    if len(vals):
                        routings[row] = routing_col.term(int(vals[0]))
    sorted_by_field = bool(request.sort) and request.sort[0].field != "_score"
    show_score = hitlist.score is not None and (
        not sorted_by_field or request.track_scores or any(s.field == "_score" for s in request.sort)
    )
    if show_score:
        scores: list[float | None] = [fetch._short_float(v, "float") for v in hitlist.score[sl].tolist()]
    else:
        scores = [None] * n
    sort_columns = _sort_columns(hitlist, start, end) if request.sort else None
    return _Page(tpos, located, ids, sources, routings, scores, sort_columns)


def _loads_stored_fields(request: SearchRequest) -> bool:
    """False for `stored_fields: _none_`, which disables stored fields, metadata ones included."""
    return request.stored_fields != ["_none_"]


def _plain(request: SearchRequest) -> bool:
    """Whether every hit of a page has the plain shape (no per-hit option needs building)."""
    return not (
        request.version
        or request.seq_no_primary_term
        or request.fields
        or request.docvalue_fields
        or request.explain
        or request.source.filtering
        or request.stored_fields is not None
    )


def _render_raw(hitlist: HitList, page: _Page, request: SearchRequest) -> RawJSON:
    """A plain page as one pre-encoded JSON array: each hit's bytes are joined around the stored
    `_source` bytes, so an export batch costs a few list appends per hit, not a dict and an
    encoder callback."""
    dumps = orjson.dumps
    heads = [b'{"_index":' + dumps(t.index.name) + b',"_id":' for t in hitlist.targets]
    with_source = request.source.fetch
    sort_json = _sort_json(page) if page.sort_columns is not None else None
    ids_json = _ids_json(page.ids)
    parts: list[bytes] = []
    add = parts.append
    for row, target in enumerate(page.tpos.tolist()):
        add(b"," + heads[target] if row else b"[" + heads[target])
        add(ids_json[row])
        score = page.scores[row]
        add(b',"_score":null' if score is None else b',"_score":' + dumps(score))
        routing = page.routings[row]
        if routing is not None:
            add(b',"_routing":' + dumps(routing))
        raw = page.sources[row]
        if with_source and raw is not None:
            add(b',"_source":')
            add(raw)
        if sort_json is not None:
            add(b',"sort":' + sort_json[row])
        add(b"}")
    add(b"]")
    return RawJSON(b"".join(parts))


def _render_hits(
    hitlist: HitList, start: int, end: int, request: SearchRequest, *, raw_hits: bool = False
) -> list[dict[str, Any]] | RawJSON:
    """The fetch phase: ids, sources and per-hit options for the page's documents only.

    With `raw_hits` (the REST layer) a plain page is rendered straight to bytes; in-process
    callers get one dict per hit.
    """
    if end <= start:
        return []
    page = _gather(hitlist, start, end, request)
    if raw_hits and _plain(request):
        return _render_raw(hitlist, page, request)
    fetch_source = request.source.fetch and _loads_stored_fields(request)
    sort_rows = page.sort_rows() if page.sort_columns is not None else None
    hits = []
    for row in range(end - start):
        target = hitlist.targets[int(page.tpos[row])]
        view, local_doc = page.located[row]
        hit: dict[str, Any] = {"_index": target.index.name}
        doc_id = page.ids[row]
        if doc_id is not None:
            hit["_id"] = doc_id.decode()
        if request.version:
            hit["_version"] = int(view.segment.versions[local_doc])
        if request.seq_no_primary_term:
            hit["_seq_no"] = int(view.segment.seq_nos[local_doc])
            hit["_primary_term"] = 1
        hit["_score"] = page.scores[row]
        if page.routings[row] is not None:
            hit["_routing"] = page.routings[row]
        raw = page.sources[row]
        if fetch_source and raw is not None:
            filtered = fetch.filter_source(raw, request.source)
            if filtered is not None:
                hit["_source"] = RawJSON(filtered)
        if request.fields or request.docvalue_fields:
            values: dict[str, list] = {}
            if request.fields and raw is not None:
                values.update(fetch.extract_fields(RawJSON(raw).parsed(), target.mapping, request.fields))
            if request.docvalue_fields:
                values.update(
                    fetch.docvalue_field_values(
                        view.segment, local_doc, target.mapping, request.docvalue_fields, target.index.name
                    )
                )
            if values:
                hit["fields"] = values
        if sort_rows is not None:
            hit["sort"] = sort_rows[row]
        if request.explain:
            hit["_explanation"] = {"value": hit["_score"] or 0.0, "description": "score", "details": []}
        hits.append(hit)
    return hits


#: Bytes a JSON string must escape; ids without them are spliced between quotes as they are.
_JSON_ESCAPED = re.compile(rb'["\\\x00-\x1f]')


def _ids_json(ids: list[bytes | None]) -> list[bytes]:
    """Each id as a JSON string: one scan of the page decides whether any needs escaping."""
    if _JSON_ESCAPED.search(b"".join(i for i in ids if i is not None)) is None:
        return [b'"' + i + b'"' if i is not None else b"null" for i in ids]
    return [orjson.dumps(i.decode() if i is not None else None) for i in ids]


def _sort_columns(hitlist: HitList, start: int, end: int) -> list[list[Any]]:
    """The page's sort values, rendered column by column."""
    tpos = hitlist.target[start:end].tolist()
    return [_column_values(col, start, end, tpos) for col in hitlist.columns]


def _sort_json(page: _Page) -> list[bytes]:
    """Each hit's encoded `sort` array. A column of plain numbers is encoded in one call and split
    on its commas (a number's JSON has none); columns holding strings or nulls are encoded per hit."""
    columns = page.sort_columns
    assert columns is not None
    tokens: list[list[bytes]] = []
    for values in columns:
        encoded = orjson.dumps(values)
        split = encoded[1:-1].split(b",") if values else []
        if b'"' in encoded or b"null" in encoded or len(split) != len(values):
            split = [orjson.dumps(v) for v in values]
        tokens.append(split)
    return [b"[" + b",".join(row) + b"]" for row in zip(*tokens, strict=True)]


#: Column kinds whose present values render as they are stored when the sort has no `format`.
#: Booleans are among them: Elasticsearch's boolean DocValueFormat keeps the default
#: `formatSortValue`, so their sort values are the longs 0 and 1.
_RAW_KINDS = ("long", "doc", "shard_doc", "keyword")


def _column_values(col, start: int, end: int, tpos: list[int]) -> list[Any]:
    """One sort column's values for hits [start, end) as Elasticsearch renders them.

    Documents without a value render as the missing value of the sort, per target (the field type
    may differ between indices); other values go through the sort's formatter only when it has
    one to apply.
    """
    raw = col.values[start:end]
    if col.kind == "keyword":
        terms = col.terms
        if terms is None or not len(terms):
            values: list[Any] = [None] * len(raw)
        else:
            values = [t.decode() for t in terms[np.clip(raw, 0, len(terms) - 1)].tolist()]
    else:
        values = raw.tolist()
    types = col.field_types
    if col.kind not in _RAW_KINDS or col.spec.format is not None:
        values = [
            fetch.format_sort_value(v, types[t] if types else None, col.spec)
            for v, t in zip(values, tpos, strict=True)
        ]
    if col.present is not None:
        absent = np.flatnonzero(~col.present[start:end]).tolist()
        missing: dict[int, Any] = {}
        for row in absent:
            t = tpos[row]
            if t not in missing:
                missing[t] = fetch.format_sort_value(None, types[t] if types else None, col.spec)
            values[row] = missing[t]
    return values


def _total(hitlist: HitList, request: SearchRequest) -> Any:
    track = request.track_total_hits
    if request.rest_total_hits_as_int:
        return hitlist.total if track is not False else -1
    if track is False:
        return None
    if track is True or hitlist.total <= track:
        return {"value": hitlist.total, "relation": "eq"}
    return {"value": int(track), "relation": "gte"}


def response(
    node: Node,
    hitlist: HitList,
    request: SearchRequest,
    start: int,
    end: int,
    started: float,
    *,
    agg_tree: Any,
    extra: dict[str, Any],
    raw_hits: bool = False,
) -> dict[str, Any]:
    with node.search_stats.phase("fetch"):
        try:
            hits = _render_hits(hitlist, start, end, request, raw_hits=raw_hits)
        except SearchPhaseExecution:
            raise
        except ElasticError as exc:
            raise SearchPhaseExecution(exc, phase="fetch") from None
    # A size 0 search collects no top hits, so it has no max score (Lucene's NaN, rendered null).
    sorted_by_field = bool(request.sort) and request.sort[0].field != "_score"
    scored = request.size > 0 and (not sorted_by_field or request.track_scores)
    max_score = hitlist.max_score if scored else None
    if max_score is not None:
        max_score = fetch._short_float(max_score, "float")
    hits_obj: dict[str, Any] = {}
    total = _total(hitlist, request)
    if total is not None:
        hits_obj["total"] = total
    hits_obj["max_score"] = max_score
    hits_obj["hits"] = hits
    body: dict[str, Any] = {}
    body.update({k: v for k, v in extra.items() if k in ("_scroll_id", "pit_id")})
    body["took"] = int((time.perf_counter() - started) * 1000)
    body["timed_out"] = False
    if hitlist.terminated_early:
        body["terminated_early"] = True
    n = len(hitlist.targets)
    body["_shards"] = {"total": n, "successful": n, "skipped": 0, "failed": 0}
    body["hits"] = hits_obj
    if agg_tree is not None:
        from leafsearch.search.aggregations import reduce

        body["aggregations"] = reduce(agg_tree, hitlist.agg_partials)
        if request.typed_keys:
            body["aggregations"] = _typed_keys(body["aggregations"], agg_tree)
    return body


def _typed_keys(aggs: dict, tree: Any) -> dict:
    from leafsearch.search.aggregations import typed_keys

    return typed_keys(aggs, tree)
