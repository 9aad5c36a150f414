"""The fetch phase of one page, both sides of the shard interface (shard_api.py).

The coordinator (`render_hits`) splits the page by shard and sends each shard a `ShardFetch`: its
docs in page order with what the merge knows of them (scores, rendered sort values) and the
request's fetch options; the shards render at once and the coordinator splices their answers in
page order. A shard (`fetch_shard`) reads its hits' ids, sources and routings segment by segment.

The REST layer asks for pages as JSON bytes: every hit is constant pieces around columns (its id,
stored `_source` bytes, version, seq_no, score, routing, doc values, sort values), each gathered
and encoded for the shard's hits at once (`hit_columns`), so a shard's hits are one `bytes.join`
over them, without a dict or an encoder callback per hit; a page of one shard is that join as it
comes. Pages with options that read or rewrite a hit's source (`fields`, `_source` filtering,
`explain`), and in-process callers, get one dict per hit.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from leafsearch.common.rawjson import RawJSON
from leafsearch.index.synthetic_source import is_synthetic, synthesize
from leafsearch.request.join_queries import HasChild, HasParent
from leafsearch.request.query_dsl import Nested, Percolate, queries_within
from leafsearch.request.search_types import SearchRequest
from leafsearch.search import fetch as fetch_helpers
from leafsearch.search import hit_columns, nested_hits
from leafsearch.search.highlight import Highlighter
from leafsearch.search.hit_columns import Group, PageOrder, groups_of
from leafsearch.search.hitlist import HitList, shard_query_context
from leafsearch.search.join_inner_hits import join_inner_hits
from leafsearch.search.profile import ShardProfile
from leafsearch.search.query import script_exec
from leafsearch.search.query.percolate_queries import document_highlights, document_slots
from leafsearch.search.shard_api import FetchForm, ShardFetch, ShardFetchResult, ShardSearch, each_phase

if TYPE_CHECKING:
    from leafsearch.search.targets import Target


@dataclass
class _Page:
    """What a shard's fetch reads for its hits of a page: per hit its id, source bytes and
    routing; and the segment groups they were read from."""

    groups: list[Group]
    order: PageOrder
    ids: list[bytes | None]  # UTF-8
    sources: list[bytes | None]  # each hit's, or None for every hit (no source kept or asked)
    routings: list[str | None]

    def located(self) -> list[tuple[Any, int]]:
        """Per hit its segment view and local doc, for the options that read doc values."""
        out: list[tuple[Any, int]] = [(None, 0)] * len(self.ids)
        for group in self.groups:
            for row, doc in zip(group.rows.tolist(), group.local.tolist(), strict=True):
                out[row] = (group.view, doc)
        return out


def _gather(target: Target, fetch: ShardFetch) -> _Page:
    """Ids, sources and routings of the shard's hits only, read segment by segment.

    `stored_fields: _none_` loads no stored field at all, so its hits have no id, routing or
    source (Elasticsearch's fetch phase then builds id-less hits).
    """
    request, n = fetch.request, len(fetch.docs)
    groups = groups_of([target], None, fetch.docs)
    order = PageOrder(groups)
    ids: list[bytes | None] = [None] * n
    sources: list[bytes | None] = [None] * n
    routings: list[str | None] = [None] * n
    if _loads_stored_fields(request):
        ids = order.merge([g.view.segment.doc_id_bytes(g.local) for g in groups])
        if request.source.fetch or request.fields or request.highlight is not None or request.script_fields:
            sources = order.merge([_sources(target, g) for g in groups])
        if any(g.view.segment.column("_routing") is not None for g in groups):
            routings = hit_columns.routings(groups, order)
    return _Page(groups, order, ids, sources, routings)


def _sources(target: Any, group: Group) -> list[bytes | None]:
    """A group's stored sources; none when its index keeps no source (`_source.enabled: false`)."""
    if not target.mapping.source_enabled:
        return [None] * len(group.local)
    sources = group.view.segment.sources(group.local)
    if is_synthetic(target.mapping, target.index.settings):
        return [None if s is None else synthesize(target.mapping, s) for s in sources]
    return sources


def _loads_stored_fields(request: SearchRequest) -> bool:
    """False for `stored_fields: _none_`, which disables stored fields, metadata ones included."""
    return request.stored_fields != ["_none_"]


#: The queries that may add to a hit what its columns do not hold (inner hits, matched slots).
_DECORATING = (HasChild, HasParent, Nested, Percolate)


def renders_raw(request: SearchRequest) -> bool:
    """Whether the REST layer gets this request's pages as bytes: no hit needs its source parsed
    (`fields`, `_source` filtering), an explanation built, a collapse key and inner hits added, or
    a script field computed, or a nested query's inner hits. Asked per page: the query is walked
    once when it holds none of the queries that may decorate a hit (most requests)."""
    if (
        request.fields
        or request.explain
        or request.source.filtering
        or request.collapse
        or request.script_fields
    ):
        return False
    within = queries_within(request.query)
    if not any(isinstance(q, _DECORATING) for q in within):
        return True
    return not (
        join_inner_hits(request.query)
        or any(isinstance(q, Percolate) for q in within)  # matched slots
        or nested_hits.wanted(request)
    )


def fetch_shard(target: Target, fetch: ShardFetch) -> ShardFetchResult:
    """The fetch phase on one shard snapshot: its hits of a page rendered in the form asked.

    Cost: the hits' own reads (ids, sources, per-hit options) a segment group at a time; the
    bytes forms join columns, never build a dict per hit."""
    started = time.perf_counter_ns()
    page = _gather(target, fetch)
    highlights = _highlights(target, page, fetch)
    joined: bytes | None = None
    hits: list[Any] | None = None
    if fetch.form == "dicts":
        hits = _render_dicts(target, page, fetch, highlights)
    else:
        pieces = _raw_columns(target, page, fetch, highlights)
        if fetch.form == "page":
            joined = b"".join(_rows(pieces, len(page.ids), lines=fetch.lines))
        else:
            columns = [repeat(p, len(page.ids)) if isinstance(p, bytes) else p for p in pieces]
            hits = [b"".join(row) for row in zip(*columns, strict=True)]
    return ShardFetchResult(fetch.shard_index, joined, hits, time.perf_counter_ns() - started)


def _rows(pieces: list[bytes | list[bytes]], n: int, *, lines: bool) -> list[bytes]:
    """The `n` hits' rows of `pieces` (constants, and columns of a piece per hit) one after the
    other, as one list of pieces: NDJSON lines, or a JSON array (the last hit ends `}]`, not `},`).
    A row starts and ends with a constant (`{"_index":..`, `}`), so a row's end and the next one's
    start are one piece: a piece a hit fewer to join (of ~7 in a scroll batch).

    Why: filled column by column by slice assignment (a loop in C per column), it costs half of
    building it row by row (`zip` and `chain`: a tuple per hit), ~45 us of a page of 1,000."""
    if not n:
        return [] if lines else [b"[]"]
    head, middle, tail = (pieces[0], pieces[1:-1], pieces[-1]) if len(pieces) > 1 else (b"", [], pieces[0])
    assert isinstance(head, bytes) and isinstance(tail, bytes)  # (`_raw_columns`: constants at both ends)
    width = len(middle) + 1
    parts = [tail + head] * (width * n + 1)
    for i, column in enumerate(middle):
        values = [column] * n if isinstance(column, bytes) else column
        parts[1 + i :: width] = values  # (a column of another length than n: ValueError)
    parts[0] = head if lines else b"[" + head
    parts[-1] = tail if lines else tail[:-1] + b"]"
    return parts


def _highlights(target: Target, page: _Page, fetch: ShardFetch) -> list[dict[str, list[str]] | None] | None:
    """Each hit's `highlight` object (None: nothing matched), or None when the request asks none."""
    spec = fetch.request.highlight
    if spec is None:
        return None
    ctx = shard_query_context(target, 0, needs_scores=False)
    highlighter = Highlighter.prepare(spec, fetch.request.query, ctx, target.index.settings)
    found = [highlighter.render(raw, doc) for raw, doc in zip(page.sources, fetch.docs.tolist(), strict=True)]
    percolated = document_highlights(
        fetch.request.query, spec, target.mapping, target.index.name, target.index.settings
    )
    if percolated is None:
        return found
    located = page.located()
    return [{**(own or {}), **percolated(*located[row])} or None for row, own in enumerate(found)]


def _raw_columns(
    target: Target, page: _Page, fetch: ShardFetch, highlights: list[dict[str, list[str]] | None] | None
) -> list[bytes | list[bytes]]:
    """The shard's hits as columns of JSON pieces, keys in the order Elasticsearch writes them.

    Each hit is `{"_index":..[,"_id":..][,"_version":..][,"_seq_no":..,"_primary_term":1],"_score":..
    [,"_routing":..][,"_source":..][,"fields":{..}][,"sort":[..]]}` and a comma: the parts that
    differ per hit are columns (lists), the others constants; a hit is one row of them.
    """
    request = fetch.request
    dumps = orjson.dumps
    n = len(page.ids)
    pieces: list[bytes | list[bytes]] = [b'{"_index":' + dumps(target.index.name)]
    loaded = _loads_stored_fields(request)
    if loaded:
        ids: list[bytes] = page.ids  # type: ignore[assignment]  # loaded: every hit has its id
        if not hit_columns.escapes(b"".join(ids)):
            pieces += [b',"_id":"', ids, b'"']
        else:
            pieces += [b',"_id":', [dumps(i.decode()) for i in ids]]
    if request.version:
        versions = hit_columns.page_column(page.groups, n, lambda seg, docs: seg.versions[docs])
        pieces += [b',"_version":', hit_columns.json_items(versions.tolist())]
    if request.seq_no_primary_term:
        seq_nos = hit_columns.page_column(page.groups, n, lambda seg, docs: seg.seq_nos[docs])
        pieces += [b',"_seq_no":', hit_columns.json_items(seq_nos.tolist()), b',"_primary_term":1']
    if not fetch.lines:
        pieces.append(b',"_score":')
        pieces.append(b"null" if fetch.scores is None else hit_columns.json_scores(fetch.scores))
    if page.routings.count(None) != n:
        pieces.append([b"" if r is None else b',"_routing":' + dumps(r) for r in page.routings])
    if request.source.fetch and loaded:
        sources = page.sources
        if request.source.filtering:  # (an export's lines only: searches render dicts then)
            flt = request.source
            sources = [None if s is None else fetch_helpers.filter_source(s, flt) for s in sources]
        # A shard's hits have each its source or none has one (`_sources`; filtering, which
        # fetches, keeps each): one look, not a comparison of every source with None.
        if n and sources[0] is not None:
            pieces += [b',"_source":', sources]  # type: ignore[list-item]
    if request.docvalue_fields:
        parts = hit_columns.docvalue_fields_json(page.groups, [target], request.docvalue_fields)
        pieces.append(page.order.merge(parts))
    if highlights is not None:
        pieces.append([b"" if h is None else b',"highlight":' + dumps(h) for h in highlights])
    if fetch.sort_values is not None:
        pieces += [b',"sort":[', *_sort_json(fetch.sort_values), b"]"]
    pieces.append(b"}\n" if fetch.lines else b"},")
    merged: list[bytes | list[bytes]] = []
    for piece in pieces:
        if isinstance(piece, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


def _render_dicts(
    target: Target, page: _Page, fetch: ShardFetch, highlights: list[dict[str, list[str]] | None] | None
) -> list[dict[str, Any]]:
    """One dict per hit: for options that read or rewrite a hit's source, and in-process callers."""
    request, n = fetch.request, len(page.ids)
    fetch_source = request.source.fetch and _loads_stored_fields(request)
    sort_rows = (
        [list(row) for row in zip(*fetch.sort_values, strict=True)] if fetch.sort_values is not None else None
    )
    slots = document_slots(request.query, target.mapping, target.index.name)
    nested = nested_hits.wanted(request)
    runs: dict[Any, Any] = {}  # each nested query's run over a segment's children
    located = (
        page.located()
        if request.version
        or request.seq_no_primary_term
        or request.docvalue_fields
        or request.script_fields
        or slots is not None
        or nested
        else None
    )
    scores = (
        [fetch_helpers._short_float(v, "float") for v in fetch.scores.tolist()]
        if fetch.scores is not None
        else [None] * n
    )
    hits = []
    for row in range(n):
        hit: dict[str, Any] = {"_index": target.index.name}
        doc_id = page.ids[row]
        if doc_id is not None:
            hit["_id"] = doc_id.decode()
        if request.version:
            assert located is not None
            view, local_doc = located[row]
            hit["_version"] = int(view.segment.versions[local_doc])
        if request.seq_no_primary_term:
            assert located is not None
            view, local_doc = located[row]
            hit["_seq_no"] = int(view.segment.seq_nos[local_doc])
            hit["_primary_term"] = 1
        hit["_score"] = scores[row]
        if page.routings[row] is not None:
            hit["_routing"] = page.routings[row]
        raw = page.sources[row]
        if fetch_source and raw is not None:
            filtered = fetch_helpers.filter_source(raw, request.source)
            if filtered is not None:
                hit["_source"] = RawJSON(filtered)
        if request.fields or request.docvalue_fields or request.script_fields or slots is not None:
            values: dict[str, list] = {}
            if request.fields and raw is not None:
                values.update(
                    fetch_helpers.extract_fields(RawJSON(raw).parsed(), target.mapping, request.fields)
                )
            if request.docvalue_fields:
                assert located is not None
                view, local_doc = located[row]
                values.update(
                    fetch_helpers.docvalue_field_values(
                        view.segment, local_doc, target.mapping, request.docvalue_fields, target.index.name
                    )
                )
            if request.script_fields:
                assert located is not None
                view, local_doc = located[row]
                values.update(script_exec.script_fields(view, target, local_doc, raw, request.script_fields))
            if slots is not None:
                assert located is not None
                values.update(slots(*located[row]))
            if values:
                hit["fields"] = values
        if highlights is not None and highlights[row] is not None:
            hit["highlight"] = highlights[row]
        if sort_rows is not None:
            hit["sort"] = sort_rows[row]
        if request.explain:
            hit["_explanation"] = {"value": hit["_score"] or 0.0, "description": "score", "details": []}
        if nested:
            assert located is not None
            hit["inner_hits"] = nested_hits.hits_of(target, *located[row], nested, hit, runs)
        hits.append(hit)
    return hits


# ---------------------------------------------------------------------------------------------
# The coordinator's side: a page split into its shards' fetches, their hits spliced in page order


def render_hits(
    hitlist: HitList,
    start: int,
    end: int,
    request: SearchRequest,
    *,
    shards: Sequence[ShardSearch],
    pool: Executor | None = None,
    raw_hits: bool = False,
    profiles: list[ShardProfile] | None = None,
    last_phase: bool = False,
) -> list[dict[str, Any]] | RawJSON:
    """The fetch phase of hits [start, end): one `ShardFetch` per shard holding some of them (at
    once on `pool` when several do), their answers spliced in page order.

    `shards` are per target of the hit list. With `raw_hits` (the REST layer) a plain page comes
    back as bytes; in-process callers get one dict per hit. `profiles` (per target) receive each
    shard's fetch time. `last_phase`: nothing reads the hit list's snapshots after this
    (`ShardFetch.last_phase`). Cost: the shards' own fetches; a page of one shard is spliced as it
    comes, a page of several takes one list step per hit to interleave them."""
    if end <= start:
        return []
    raw = raw_hits and renders_raw(request) and profiles is None
    # (fetched with the query: the fetches are compared, not sent, and need no sort values)
    along = hitlist.fetched is not None
    parts, fetches = page_fetches(
        hitlist, start, end, request, raw=raw, last_phase=last_phase, sorts=not along
    )
    form = fetches[0].form
    results = fetched_with_query(hitlist, start, end, request, fetches)
    if results is None:
        if along:
            parts, fetches = page_fetches(hitlist, start, end, request, raw=raw, last_phase=last_phase)
        results = each_phase(pool, shards, "fetch", fetches)
    if profiles is not None:
        for (shard, _), result, f in zip(parts, results, fetches, strict=True):
            profiles[shard].fetch_nanos = result.fetch_nanos
            profiles[shard].fetched = len(f.docs)
    return spliced(parts, results, end - start, form)


def spliced(
    parts: list[tuple[int, np.ndarray | None]], results: list[ShardFetchResult], n: int, form: FetchForm
) -> list[dict[str, Any]] | RawJSON:
    """A page of `n` hits from its shards' fetch answers (`page_fetches`' parts, in their order)."""
    if form == "page":
        assert results[0].page is not None
        return RawJSON(results[0].page)
    if len(parts) == 1:
        assert results[0].hits is not None
        return results[0].hits
    hits: list[Any] = [None] * n
    for (_, rows), result in zip(parts, results, strict=True):
        assert rows is not None and result.hits is not None
        for row, hit in zip(rows.tolist(), result.hits, strict=True):
            hits[row] = hit
    if form == "hits":
        return RawJSON(b"[" + b"".join(hits)[:-1] + b"]")
    return hits


def render_lines(
    hitlist: HitList,
    start: int,
    end: int,
    request: SearchRequest,
    *,
    shards: Sequence[ShardSearch],
    pool: Executor | None = None,
) -> bytes:
    """Hits [start, end) as an export's NDJSON lines (`ShardFetch.lines`): each shard renders its
    hits by column, and a page of several shards is interleaved in page order, one list step per
    hit. The sources are spliced as stored (filtered by the shard when `_source` asks)."""
    if end <= start:
        return b""
    parts, fetches = page_fetches(hitlist, start, end, request, raw=True, last_phase=False, lines=True)
    results = each_phase(pool, shards, "fetch", fetches)
    if len(parts) == 1:
        assert results[0].page is not None
        return results[0].page
    lines: list[Any] = [None] * (end - start)
    for (_, rows), result in zip(parts, results, strict=True):
        assert rows is not None and result.hits is not None
        for row, line in zip(rows.tolist(), result.hits, strict=True):
            lines[row] = line
    return b"".join(lines)


def fetched_with_query(
    hitlist: HitList, start: int, end: int, request: SearchRequest, fetches: list[ShardFetch]
) -> list[ShardFetchResult] | None:
    """The page's fetch answers when its shards ran them with their query (`ShardQuery.fetch`,
    query_and_fetch.py) and they are these very fetches: the same request, form and phase, and
    range (the page of a shard asked alone; or every hit of the fetch among the candidates its
    shard rendered, where a shard's hits of a page follow its hits before the page); None
    otherwise (then the fetches are sent). Taken once. A fetch error a shard met is raised here,
    where the fetch's own would be."""
    fetched, hitlist.fetched = hitlist.fetched, None
    if fetched is None:
        return None
    results = []
    for fetch in fetches:
        query, top = fetched.get(fetch.shard_index, (None, None))
        along, page = (None, None) if query is None else (query.fetch, top.page)
        if (
            along is None
            or page is None
            or (query.request if along.request is None else along.request) is not request
            or along.last_phase != fetch.last_phase
        ):
            return None
        if along.candidates:
            before = int(np.count_nonzero(hitlist.target[:start] == fetch.shard_index))
            rows = slice(before, before + len(fetch.docs))
            if page.form != "hits" or not np.array_equal(top.docs[rows], fetch.docs):
                return None
        elif (page.start, page.end, page.form) != (start, end, fetch.form):
            return None
        if page.error is not None:
            raise page.error
        assert page.result is not None
        if along.candidates:
            hits = page.result.hits[rows]
            if fetch.form == "page":
                joined = b"[" + b"".join(hits)[:-1] + b"]"
                results.append(ShardFetchResult(fetch.shard_index, joined, None, page.result.fetch_nanos))
            else:
                results.append(ShardFetchResult(fetch.shard_index, None, hits, page.result.fetch_nanos))
        else:
            results.append(page.result)
    return results


def page_fetches(
    hitlist: HitList,
    start: int,
    end: int,
    request: SearchRequest,
    *,
    raw: bool,
    last_phase: bool,
    lines: bool = False,
    sorts: bool = True,
) -> tuple[list[tuple[int, np.ndarray | None]], list[ShardFetch]]:
    """The `ShardFetch` of each shard holding hits of [start, end) (not empty), in page order of
    each shard's first hit, and per shard its rows in the page (None: the whole page). A shard
    that fetches with its query (query_and_fetch.py) builds its message here too, from the same
    hit list, so both paths send the same fetch. `lines`: the hits as an export's lines; not
    `sorts`: without their sort values (fetches compared, not sent: `render_hits`)."""
    sl = slice(start, end)
    tpos, docs = hitlist.target[sl], hitlist.doc[sl]
    sorted_by_field = bool(request.sort) and request.sort[0].field != "_score"
    show_score = hitlist.score is not None and (
        not sorted_by_field or request.track_scores or any(s.field == "_score" for s in request.sort)
    )
    scores = hitlist.score[sl] if show_score and hitlist.score is not None else None
    sort_values = _sort_columns(hitlist, start, end, arrays=raw) if request.sort and sorts else None
    first = int(tpos[0])
    parts: list[tuple[int, np.ndarray | None]]
    if (tpos == first).all():
        parts = [(first, None)]
    else:
        # In page order of each shard's first hit: a refusal is the one the first hit meets.
        present, firsts = np.unique(tpos, return_index=True)
        parts = [(int(present[i]), np.flatnonzero(tpos == present[i])) for i in np.argsort(firsts)]
    form: FetchForm = "dicts" if not raw else ("page" if len(parts) == 1 else "hits")
    fetches = []
    for shard, rows in parts:
        fetches.append(
            ShardFetch(
                request,
                shard,
                docs if rows is None else docs[rows],
                scores if rows is None or scores is None else scores[rows],
                sort_values if rows is None or sort_values is None else _rows_of(sort_values, rows),
                form,
                None if hitlist.contexts is None else hitlist.contexts[shard],
                last_phase,
                lines,
            )
        )
    return parts, fetches


def _rows_of(columns: list[Any], rows: np.ndarray) -> list[Any]:
    """The values of some rows of each column (a list, or an array: `_sort_columns`)."""
    at = rows.tolist()
    return [column[rows] if isinstance(column, np.ndarray) else [column[i] for i in at] for column in columns]


def _sort_columns(hitlist: HitList, start: int, end: int, arrays: bool = False) -> list[Any]:
    """The page's sort values, rendered column by column; `arrays`: a column of integers that
    render as they are stored stays their array (rendered to bytes: `_sort_json`)."""
    tpos = hitlist.target[start:end]
    return [
        col.values[start:end] if arrays and _as_stored(col) else _column_values(col, start, end, tpos)
        for col in hitlist.columns
    ]


def _as_stored(col) -> bool:
    """Whether a sort column's values render as the integers it stores (`_column_values`)."""
    plain = col.kind != "keyword" and col.present is None and col.values.dtype.kind == "i"
    return plain and not _formatted(col)


def last_sort_values(hitlist: HitList, end: int) -> list[Any]:
    """The sort values of hit `end - 1` as a client sees them (what it sends as `search_after`)."""
    return [column[0] for column in _sort_columns(hitlist, end - 1, end)]


def each_sort_values(hitlist: HitList) -> list[list[Any]]:
    """Every hit's sort values as a client sees them, rendered column by column."""
    return [list(row) for row in zip(*_sort_columns(hitlist, 0, len(hitlist)), strict=True)]


def _sort_json(columns: list[Any]) -> list[bytes | list[bytes]]:
    """The hits' encoded sort values as pieces of `_raw_columns`: each column's values (a list,
    one per hit), commas between them (the caller adds the brackets), so a hit's values are
    joined with the rest of its row, not one by one. A column of plain numbers is encoded in one
    call and split on its commas (a number's JSON has none); columns holding strings or nulls
    are encoded per hit. A column of integers as stored (an array, `_sort_columns`) is encoded
    from the array: no Python int per hit, nothing to look for."""
    pieces: list[bytes | list[bytes]] = []
    for values in columns:
        if isinstance(values, np.ndarray):  # (native int64, contiguous: as orjson takes them)
            encoded = orjson.dumps(
                np.ascontiguousarray(values, dtype=np.int64), option=orjson.OPT_SERIALIZE_NUMPY
            )
            split = encoded[1:-1].split(b",") if len(values) else []
        else:
            encoded = orjson.dumps(values)
            split = encoded[1:-1].split(b",") if values else []
            if b'"' in encoded or b"null" in encoded or len(split) != len(values):
                split = [orjson.dumps(v) for v in values]
        pieces += [b",", split] if pieces else [split]
    return pieces


#: Column kinds whose present values render as they are stored when the sort has no `format`.
#: Booleans are among them: Elasticsearch's boolean DocValueFormat keeps the default
#: `formatSortValue`, so their sort values are the longs 0 and 1.
_RAW_KINDS = ("long", "doc", "shard_doc", "keyword")


def _stored_otherwise(field_types: tuple) -> bool:
    """`unsigned_long` (shifted longs) and `ip` (hex terms) sort values are stored in another form
    than they show: they render through the field's format."""
    return any(ft is not None and ft.type in ("unsigned_long", "ip") for ft in field_types)


def _formatted(col) -> bool:
    """Whether a sort column's values render through the sort's formatter, not as stored."""
    return col.kind not in _RAW_KINDS or col.spec.format is not None or _stored_otherwise(col.field_types)


def _column_values(col, start: int, end: int, targets: np.ndarray) -> list[Any]:
    """One sort column's values for hits [start, end) as Elasticsearch renders them (`targets`:
    each hit's target position).

    Documents without a value render as the missing value of the sort, per target (the field type
    may differ between indices); other values go through the sort's formatter only when it has
    one to apply (only then are the hits' targets listed).
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
    if _formatted(col):
        values = [
            fetch_helpers.format_sort_value(v, types[t] if types else None, col.spec)
            for v, t in zip(values, targets.tolist(), strict=True)
        ]
    if col.present is not None:
        absent = np.flatnonzero(~col.present[start:end]).tolist()
        missing: dict[int, Any] = {}
        for row in absent:
            t = int(targets[row])
            if t not in missing:
                missing[t] = fetch_helpers.format_sort_value(None, types[t] if types else None, col.spec)
            values[row] = missing[t]
    return values
