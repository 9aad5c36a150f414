"""`children` and `parent`: single-bucket aggregations that cross a `join` field's relation.

`children` (`type`: a child relation) holds, for each parent bucket, the live child documents of
that type whose parent is in the bucket, as Elasticsearch's children aggregation does (the
children need not match the query); `parent` (`type`: a child relation) the parents of the
bucket's children of that type, each once. Children share their parent's shard, so the other side
is found in the shard's snapshot: an index of its linking ids (sorted, with the segment and
document of each) built once per snapshot and relation, and each bucket's ids looked up in it by
`searchsorted`. Sub-aggregations are collected over the documents found, segment by segment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import ParsingError
from leafsearch.index.columns import KeywordColumn
from leafsearch.search.aggs.base import Agg, ParseContext, SegmentContext, collect_subs, merge_subs, remap
from leafsearch.search.aggs.filters import FilterAgg, SingleBucket
from leafsearch.search.query.join_queries import link_ordinals, linked_ordinals, relation_docs
from leafsearch.search.query.masks import ranges


class _LinkIndex:
    """The live documents of some relations in a snapshot, sorted by the global ordinal of their
    linking id (join_queries.link_ordinals)."""

    __slots__ = ("docs", "ids", "views")

    def __init__(self, ctx: Any, join_path: str, relations: tuple[str, ...], link: str) -> None:
        _, maps = link_ordinals(ctx, link)
        ids, views, docs = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for i, view in enumerate(ctx.searcher.views):
            found, ords = linked_ordinals(i, view, relation_docs(view, join_path, relations), link, maps)
            ids.append(ords)
            docs.append(found)
            views.append(np.full(len(found), i, dtype=np.int64))
        all_ids = np.concatenate(ids)
        order = np.argsort(all_ids, kind="stable")
        self.ids, self.views, self.docs = (
            all_ids[order],
            np.concatenate(views)[order],
            np.concatenate(docs)[order],
        )

    def find(self, keys: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(segment position, doc, group) of every indexed document whose id is one of `keys`
        (the global ordinal of the id of a document of bucket `groups[i]`)."""
        lo = np.searchsorted(self.ids, keys, side="left")
        hi = np.searchsorted(self.ids, keys, side="right")
        at = ranges(lo, hi)
        return self.views[at], self.docs[at], np.repeat(groups, hi - lo)


def _link_index(ctx: Any, join_path: str, relations: tuple[str, ...], link: str) -> _LinkIndex:
    """One index per snapshot and relation, built on first use."""
    cached = getattr(ctx.searcher, "cached", None)
    if cached is None:
        return _LinkIndex(ctx, join_path, relations, link)
    return cached(("join index", link, relations), lambda: _LinkIndex(ctx, join_path, relations, link))


@dataclass
class _Side:
    """The bucket documents of one segment that link to the other side, and their links."""

    join: Any
    link: str
    keys: np.ndarray  # the linking id of each
    groups: np.ndarray  # the bucket of each


def _side(agg: Agg, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, relation: str) -> _Side | None:
    """Where `children` (the bucket's parents) or `parent` (the bucket's children of `relation`)
    start; None when the index maps no such relation or the bucket holds none."""
    ctx = seg.request
    join = getattr(ctx.mapping, "join", None) if ctx.mapping is not None else None
    parent = join.relations.parent_of.get(relation) if join is not None else None
    if parent is None or not len(docs):
        return None
    link = join.id_field(parent)
    here = (parent,) if agg.type_name == "children" else (relation,)
    inside = np.isin(docs, relation_docs(seg.view, join.path, here))
    col = seg.segment.column(link)
    if not isinstance(col, KeywordColumn) or not inside.any():
        return None
    _, maps = link_ordinals(ctx, link)
    position = next(i for i, view in enumerate(ctx.searcher.views) if view.segment is seg.segment)
    counts, ords = col.ords.values_of(docs[inside])
    return _Side(join, link, maps[position][ords], np.repeat(groups[inside], counts))


def _collect_found(
    subs: list[Agg], seg: SegmentContext, views: np.ndarray, docs: np.ndarray, groups: np.ndarray, n: int
) -> dict:
    """Sub-aggregations of documents found anywhere in the snapshot (`views`: the segment of each),
    collected segment by segment and merged."""
    ctx = seg.request
    identity = np.arange(n, dtype=np.int64)
    parts = []
    for i in np.unique(views).tolist():
        mine = views == i
        order = np.lexsort((groups[mine], docs[mine]))
        other = SegmentContext(ctx.searcher.views[i], ctx)
        parts.append(collect_subs(subs, other, docs[mine][order], groups[mine][order], n))
    if not parts:
        parts = [collect_subs(subs, seg, docs[:0], groups[:0], n)]
    return merge_subs(subs, parts, [identity] * len(parts), n)


class ChildrenAgg(FilterAgg):
    """`children`: the live children of `type` of the bucket's parents (each child has one parent,
    which lives in one segment: no child is found twice for a bucket)."""

    type_name = "children"

    def __init__(self, name: str, meta: dict | None, subs: list[Agg], relation: str) -> None:
        Agg.__init__(self, name, meta, subs)
        self.relation = relation

    def collect(
        self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int
    ) -> SingleBucket:
        side = _side(self, seg, docs, groups, self.relation)
        if side is None:
            return SingleBucket(
                np.zeros(n_groups, np.int64), _collect_found(self.subs, seg, *_NONE, n_groups)
            )
        index = _link_index(seg.request, side.join.path, (self.relation,), side.link)
        views, found, found_groups = index.find(side.keys, side.groups)
        count = np.bincount(found_groups, minlength=n_groups).astype(np.int64)
        return SingleBucket(count, _collect_found(self.subs, seg, views, found, found_groups, n_groups))


_NONE = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))


@dataclass
class ParentPart:
    """A `parent` partial: one row per (bucket, parent) pair, sub-aggregations collected per pair,
    so that merging counts a parent once per bucket however many segments found it."""

    groups: np.ndarray
    keys: np.ndarray
    subs: dict
    n: int  # parent buckets
    by_group: SingleBucket | None = None


class ParentAgg(FilterAgg):
    """`parent`: the parents of the bucket's children of `type`, each once."""

    type_name = "parent"

    def __init__(self, name: str, meta: dict | None, subs: list[Agg], relation: str) -> None:
        Agg.__init__(self, name, meta, subs)
        self.relation = relation

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> ParentPart:
        side = _side(self, seg, docs, groups, self.relation)
        if side is None:
            empty = _collect_found(self.subs, seg, *_NONE, 0)
            return ParentPart(_NONE[0], np.zeros(0, "S1"), empty, n_groups)
        pair_groups, pair_keys, _ = _pairs(side.groups, side.keys)
        parent = side.join.relations.parent_of[self.relation]
        index = _link_index(seg.request, side.join.path, (parent,), side.link)
        views, found, pair = index.find(pair_keys, np.arange(len(pair_keys), dtype=np.int64))
        kept = np.zeros(len(pair_keys), dtype=np.int64)
        kept[pair] = 1  # a pair whose parent is not live in the snapshot is dropped
        renumber = np.cumsum(kept) - 1
        n = int(kept.sum())
        subs = _collect_found(self.subs, seg, views, found, renumber[pair], n)
        keep = kept.astype(bool)
        terms, _ = link_ordinals(seg.request, side.link)  # ids, not ordinals: shards merge them
        return ParentPart(pair_groups[keep], terms[pair_keys[keep]], subs, n_groups)

    def merge(self, parts: list[ParentPart], maps: list[np.ndarray], n_out: int) -> ParentPart:
        mapped, keeps = remap(maps, [p.groups for p in parts])
        keys = np.concatenate([p.keys[k] for p, k in zip(parts, keeps, strict=True)]) if parts else _NONE[0]
        groups, unique_keys, first = _pairs(mapped, keys.astype(np.bytes_))
        # Each part's pairs: the merged pair they are, when they are its first occurrence, else -1.
        rank = np.full(len(mapped), -1, dtype=np.int64)
        rank[first] = np.arange(len(first))
        sub_maps, at = [], 0
        for p, k in zip(parts, keeps, strict=True):
            own = np.full(len(p.groups), -1, dtype=np.int64)
            own[np.flatnonzero(k)] = rank[at : at + int(k.sum())]
            at += int(k.sum())
            sub_maps.append(own)
        subs = merge_subs(self.subs, [p.subs for p in parts], sub_maps, len(first))
        return ParentPart(groups, unique_keys, subs, n_out)

    def _grouped(self, part: ParentPart) -> SingleBucket:
        """The merged pairs as buckets (computed once per rendered partial)."""
        if part.by_group is None:
            subs = merge_subs(self.subs, [part.subs], [part.groups], part.n)
            part.by_group = SingleBucket(np.bincount(part.groups, minlength=part.n).astype(np.int64), subs)
        return part.by_group

    def render(self, part: ParentPart, group: int | None) -> dict:
        return FilterAgg.render(self, self._grouped(part), group)

    def sort_values(self, part: ParentPart, path: list[str]) -> np.ndarray:
        return FilterAgg.sort_values(self, self._grouped(part), path)


def _pairs(groups: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (group, key) pairs: (their groups, their keys, the first position of each)."""
    if not len(keys):
        return _NONE[0], np.zeros(0, "S1"), _NONE[0]
    order = np.lexsort((keys, groups))
    g, k = groups[order], keys[order]
    start = np.ones(len(order), dtype=bool)
    start[1:] = (g[1:] != g[:-1]) | (k[1:] != k[:-1])
    return g[start], k[start], order[start]


def _parse(type_name: str):
    def parse(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
        relation = None
        for key, value in body.items():
            if key != "type" or not isinstance(value, str):
                raise ParsingError(f"Unknown key for a {token_name(value)} in [{name}]: [{key}].")
            relation = value
        if relation is None:
            raise ParsingError(f"Missing [type] field for {type_name} aggregation [{name}]")
        return (ChildrenAgg if type_name == "children" else ParentAgg)(name, meta, subs, relation)

    return parse


PARSERS = {"children": _parse("children"), "parent": _parse("parent")}
