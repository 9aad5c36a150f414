"""The fetch phase of one page: the page's ids, sources and routings read segment by segment, then
its hits rendered.

The REST layer asks for pages as JSON bytes: every hit is constant pieces around columns (its id,
stored `_source` bytes, version, seq_no, score, routing, doc values, sort values), each gathered
and encoded for the whole page at once (`hit_columns`), so the page is one `bytes.join` over them,
without a dict or an encoder callback per hit. Pages with options that read or rewrite a hit's
source (`fields`, `_source` filtering, `explain`), and in-process callers, get one dict per hit.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any

import numpy as np
import orjson

from leafsearch.rawjson import RawJSON
from leafsearch.request.search_types import SearchRequest
from leafsearch.search import fetch, hit_columns
from leafsearch.search.hit_columns import Group, PageOrder, groups_of
from leafsearch.search.hitlist import HitList


@dataclass
class _Page:
    """What the fetch phase reads for a page: per hit its target, id, source bytes, routing,
    score and sort values; and the segment groups they were read from."""

    tpos: np.ndarray
    groups: list[Group]
    order: PageOrder
    ids: list[bytes | None]  # UTF-8
    sources: list[bytes | None]
    routings: list[str | None]
    scores: np.ndarray | None  # float32, when the hits show their score
    sort_columns: list[list[Any]] | None  # per sort column, the page's rendered values

    def sort_rows(self) -> list[list[Any]]:
        assert self.sort_columns is not None
        return [list(row) for row in zip(*self.sort_columns, strict=True)]

    def located(self) -> list[tuple[Any, int]]:
        """Per hit its segment view and local doc, for the options that read doc values."""
        out: list[tuple[Any, int]] = [(None, 0)] * len(self.ids)
        for group in self.groups:
            for row, doc in zip(group.rows.tolist(), group.local.tolist(), strict=True):
                out[row] = (group.view, doc)
        return out


def _gather(hitlist: HitList, start: int, end: int, request: SearchRequest) -> _Page:
    """Ids, sources and routings of the page's documents only, read segment by segment.

    `stored_fields: _none_` loads no stored field at all, so its hits have no id, routing or
    source (Elasticsearch's fetch phase then builds id-less hits).
    """
    sl = slice(start, end)
    tpos = hitlist.target[sl]
    groups = groups_of(hitlist.targets, tpos, hitlist.doc[sl])
    order = PageOrder(groups)
    n = end - start
    ids: list[bytes | None] = [None] * n
    sources: list[bytes | None] = [None] * n
    routings: list[str | None] = [None] * n
    if _loads_stored_fields(request):
        ids = order.merge([g.view.segment.doc_id_bytes(g.local) for g in groups])
        if request.source.fetch or request.fields:
            sources = order.merge([_sources(hitlist.targets[g.target], g) for g in groups])
        if any(g.view.segment.column("_routing") is not None for g in groups):
            routings = hit_columns.routings(groups, order)
    sorted_by_field = bool(request.sort) and request.sort[0].field != "_score"
    show_score = hitlist.score is not None and (
        not sorted_by_field or request.track_scores or any(s.field == "_score" for s in request.sort)
    )
    scores = hitlist.score[sl] if show_score and hitlist.score is not None else None
    sort_columns = _sort_columns(hitlist, start, end) if request.sort else None
    return _Page(tpos, groups, order, ids, sources, routings, scores, sort_columns)


def _sources(target: Any, group: Group) -> list[bytes | None]:
    """A group's stored sources; none when its index keeps no source (`_source.enabled: false`)."""
    if not target.mapping.source_enabled:
        return [None] * len(group.local)
    return group.view.segment.sources(group.local)


def _loads_stored_fields(request: SearchRequest) -> bool:
    """False for `stored_fields: _none_`, which disables stored fields, metadata ones included."""
    return request.stored_fields != ["_none_"]


def renders_raw(request: SearchRequest) -> bool:
    """Whether the REST layer gets this request's pages as bytes: no hit needs its source parsed
    (`fields`, `_source` filtering) or an explanation built."""
    return not (request.fields or request.explain or request.source.filtering)


def _render_raw(hitlist: HitList, page: _Page, request: SearchRequest) -> RawJSON:
    """A page as one pre-encoded JSON array, keys in the order Elasticsearch writes them.

    Each hit is `{"_index":..[,"_id":..][,"_version":..][,"_seq_no":..,"_primary_term":1],"_score":..
    [,"_routing":..][,"_source":..][,"fields":{..}][,"sort":[..]]}`: the parts that differ per hit
    are columns (lists), the others constants, and the page is one join over the hits' parts
    taken in turn.
    """
    dumps = orjson.dumps
    n = len(page.ids)
    pieces: list[bytes | list[bytes]] = []
    heads = [b'{"_index":' + dumps(t.index.name) for t in hitlist.targets]
    pieces.append(heads[0] if len(heads) == 1 else [heads[t] for t in page.tpos.tolist()])
    loaded = _loads_stored_fields(request)
    if loaded:
        ids: list[bytes] = page.ids  # type: ignore[assignment]  # loaded: every hit has its id
        if hit_columns.JSON_ESCAPED.search(b"".join(ids)) is None:
            pieces += [b',"_id":"', ids, b'"']
        else:
            pieces += [b',"_id":', [dumps(i.decode()) for i in ids]]
    if request.version:
        versions = hit_columns.page_column(page.groups, n, lambda seg, docs: seg.versions[docs])
        pieces += [b',"_version":', hit_columns.json_items(versions.tolist())]
    if request.seq_no_primary_term:
        seq_nos = hit_columns.page_column(page.groups, n, lambda seg, docs: seg.seq_nos[docs])
        pieces += [b',"_seq_no":', hit_columns.json_items(seq_nos.tolist()), b',"_primary_term":1']
    pieces.append(b',"_score":')
    pieces.append(b"null" if page.scores is None else hit_columns.json_scores(page.scores))
    if page.routings.count(None) != n:
        pieces.append([b"" if r is None else b',"_routing":' + dumps(r) for r in page.routings])
    if request.source.fetch and loaded:
        if None in page.sources:
            pieces.append([b"" if s is None else b',"_source":' + s for s in page.sources])
        else:
            pieces += [b',"_source":', page.sources]  # type: ignore[list-item]
    if request.docvalue_fields:
        parts = hit_columns.docvalue_fields_json(page.groups, hitlist.targets, request.docvalue_fields)
        pieces.append(page.order.merge(parts))
    if page.sort_columns is not None:
        pieces += [b',"sort":[', _sort_json(page.sort_columns), b"]"]
    pieces.append(b"},")
    merged: list[bytes | list[bytes]] = []
    for piece in pieces:
        if isinstance(piece, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += piece
        else:
            merged.append(piece)
    columns = [repeat(p, n) if isinstance(p, bytes) else p for p in merged]
    body = b"".join(chain.from_iterable(zip(*columns, strict=True)))
    return RawJSON(b"[" + body[:-1] + b"]")


def render_hits(
    hitlist: HitList, start: int, end: int, request: SearchRequest, *, raw_hits: bool = False
) -> list[dict[str, Any]] | RawJSON:
    """The fetch phase: ids, sources and per-hit options for the page's documents only.

    With `raw_hits` (the REST layer) a plain page is rendered straight to bytes; in-process
    callers get one dict per hit.
    """
    if end <= start:
        return []
    page = _gather(hitlist, start, end, request)
    if raw_hits and renders_raw(request):
        return _render_raw(hitlist, page, request)
    fetch_source = request.source.fetch and _loads_stored_fields(request)
    sort_rows = page.sort_rows() if page.sort_columns is not None else None
    located = (
        page.located() if request.version or request.seq_no_primary_term or request.docvalue_fields else None
    )
    scores = (
        [fetch._short_float(v, "float") for v in page.scores.tolist()]
        if page.scores is not None
        else [None] * (end - start)
    )
    hits = []
    for row in range(end - start):
        target = hitlist.targets[int(page.tpos[row])]
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
            filtered = fetch.filter_source(raw, request.source)
            if filtered is not None:
                hit["_source"] = RawJSON(filtered)
        if request.fields or request.docvalue_fields:
            values: dict[str, list] = {}
            if request.fields and raw is not None:
                values.update(fetch.extract_fields(RawJSON(raw).parsed(), target.mapping, request.fields))
            if request.docvalue_fields:
                assert located is not None
                view, local_doc = located[row]
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


def _sort_columns(hitlist: HitList, start: int, end: int) -> list[list[Any]]:
    """The page's sort values, rendered column by column."""
    tpos = hitlist.target[start:end].tolist()
    return [_column_values(col, start, end, tpos) for col in hitlist.columns]


def _sort_json(columns: list[list[Any]]) -> list[bytes]:
    """Each hit's encoded sort values, comma-separated (the caller adds the brackets). A column of
    plain numbers is encoded in one call and split on its commas (a number's JSON has none);
    columns holding strings or nulls are encoded per hit."""
    tokens: list[list[bytes]] = []
    for values in columns:
        encoded = orjson.dumps(values)
        split = encoded[1:-1].split(b",") if values else []
        if b'"' in encoded or b"null" in encoded or len(split) != len(values):
            split = [orjson.dumps(v) for v in values]
        tokens.append(split)
    if len(tokens) == 1:
        return tokens[0]
    return [b",".join(row) for row in zip(*tokens, strict=True)]


#: Column kinds whose present values render as they are stored when the sort has no `format`.
#: Booleans are among them: Elasticsearch's boolean DocValueFormat keeps the default
#: `formatSortValue`, so their sort values are the longs 0 and 1.
_RAW_KINDS = ("long", "doc", "shard_doc", "keyword")


def _stored_otherwise(field_types: tuple) -> bool:
    """`unsigned_long` (shifted longs) and `ip` (hex terms) sort values are stored in another form
    than they show: they render through the field's format."""
    return any(ft is not None and ft.type in ("unsigned_long", "ip") for ft in field_types)


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
    if col.kind not in _RAW_KINDS or col.spec.format is not None or _stored_otherwise(types):
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
