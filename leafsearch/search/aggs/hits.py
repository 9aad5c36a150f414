"""The `top_hits` metric aggregation: the best documents of each bucket, rendered as hits.

Each segment keeps, per parent bucket, its best `from + size` documents by the aggregation's
`sort` (`_score` by default, from the scores the query computed; numeric, date, boolean and
keyword fields by their doc values) and reads their ids and sources then: a partial carries at
most `from + size` hits per bucket and segment, so merging is a cut of those rows per bucket.
`from + size` is bounded by `index.max_inner_result_window` (100), checked when the request is
parsed, before anything is collected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.common.rawjson import RawJSON
from leafsearch.errors import IllegalArgument
from leafsearch.request.search_request import parse_fetch_source
from leafsearch.request.search_types import SortSpec, SourceFilter
from leafsearch.request.sort import parse_sort
from leafsearch.search.aggs.base import Agg, Options, ParseContext, SegmentContext, remap, shard_failure
from leafsearch.search.aggs.values import (
    ANY,
    GEO,
    KEYWORD,
    NUMERIC,
    FieldRef,
    keyword_values,
    numeric_values,
    resolve_field,
)
from leafsearch.search.fetch import filter_source
from leafsearch.search.geo_sort import distance_values

_OPTIONS = {"from", "size", "sort", "_source", "track_scores", "version", "seq_no_primary_term", "explain"}


@dataclass
class HitRows:
    """Candidate hits: per row its parent bucket, sort keys, score and what renders it."""

    groups: np.ndarray  # int64
    keys: list[tuple]  # comparable: smaller is better
    sort_values: list[list[Any]]  # as rendered in `sort`
    scores: list[float | None]
    ids: list[str]
    sources: list[bytes | None]
    index: str
    counts: np.ndarray  # documents per parent bucket (the hits' `total`)
    max_scores: np.ndarray  # per parent bucket, NaN where none


class TopHitsAgg(Agg):
    type_name = "top_hits"

    def __init__(self, name: str, meta: dict | None, opts: Options, pctx: ParseContext) -> None:
        super().__init__(name, meta, [])
        self.from_ = opts.integer("from", 0)
        self.size = opts.integer("size", 3)
        if self.from_ < 0:
            raise IllegalArgument(f"[from] parameter cannot be negative but was [{self.from_}]")
        if self.size < 0:
            raise IllegalArgument(f"[size] parameter cannot be negative, found [{self.size}]")
        limit = pctx.max_inner_result_window
        if self.from_ + self.size > limit:
            raise shard_failure(
                IllegalArgument(
                    f"Top hits result window is too large, the top hits aggregator [{name}]'s from + size "
                    f"must be less than or equal to: [{limit}] but was [{self.from_ + self.size}]. This "
                    "limit can be set by changing the [index.max_inner_result_window] index level setting."
                )
            )
        self.sort: list[SortSpec] = parse_sort(opts.get("sort")) if "sort" in opts else []
        self.fields: list[FieldRef | None] = []
        for spec in self.sort:
            if spec.field in ("_score", "_doc"):
                self.fields.append(None)
            elif spec.script is not None:  # a `_script` sort: the script's values (aggs/scripted.py)
                family = KEYWORD if spec.script_type == "string" else NUMERIC
                self.fields.append(FieldRef(spec.field, None, family, spec.script))
            elif spec.geo is not None:
                self.fields.append(resolve_field("top_hits", {"field": spec.field}, pctx, frozenset({GEO})))
            else:
                self.fields.append(resolve_field("top_hits", {"field": spec.field}, pctx, ANY))
        self.by_score = not self.sort or self.sort[0].field == "_score"
        self.track_scores = opts.boolean("track_scores", False)
        self.source: SourceFilter = (
            parse_fetch_source(opts.get("_source")) if "_source" in opts else SourceFilter()
        )
        self.k = self.from_ + self.size

    # -- collecting ------------------------------------------------------------------------------

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> HitRows:
        counts = np.bincount(groups, minlength=n_groups).astype(np.int64)
        scores = None if seg.scores is None else np.asarray(seg.scores, dtype=np.float32)[docs]
        max_scores = np.full(n_groups, np.nan)
        if scores is not None and len(docs):
            np.fmax.at(max_scores, groups, scores.astype(np.float64))
        kept = self._best(seg, docs, groups, scores)
        local = docs[kept]
        columns = [self._column(seg, local, i) for i in range(len(self.sort))]
        kept_scores = None if scores is None else scores[kept]
        keys = self._keys(local, kept_scores, columns)
        segment = seg.segment
        return HitRows(
            groups=groups[kept].astype(np.int64),
            keys=keys,
            sort_values=[[col[1][i] for col in columns] for i in range(len(local))],
            scores=[None] * len(local) if kept_scores is None else [float(v) for v in kept_scores.tolist()],
            ids=[b.decode() for b in segment.doc_id_bytes(local)] if len(local) else [],
            sources=list(segment.sources(local)) if len(local) and self.source.fetch else [None] * len(local),
            index=getattr(seg.request, "index_name", None) or "",
            counts=counts,
            max_scores=max_scores,
        )

    def _best(
        self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, scores: np.ndarray | None
    ) -> np.ndarray:
        """Indices into `docs` of each bucket's best `k` (at most), vectorized: by score or by a
        numeric first sort field, ties by doc; other sorts keep every row to the exact sort after."""
        if not len(docs) or self.k == 0:
            return np.empty(0, np.int64)
        primary: np.ndarray | None = None
        if self.by_score and scores is not None:
            primary = -scores.astype(np.float64)
        elif self.sort and len(self.sort) == 1 and self.sort[0].field == "_doc":
            primary = docs.astype(np.float64) * (-1 if self.sort[0].descending else 1)
        elif self.sort and len(self.sort) == 1 and self.sort[0].geo is not None:
            spec = self.sort[0]
            values, present = distance_values(seg.segment.column(spec.field), spec, docs)
            missing = -np.inf if spec.missing == "_first" else np.inf
            primary = np.where(present, values * (-1 if spec.descending else 1), missing)
        elif (
            self.sort
            and len(self.sort) == 1
            and self.fields[0] is not None
            and self.fields[0].family != KEYWORD
        ):
            spec = self.sort[0]
            idx, values, multi = numeric_values(seg, self.fields[0], docs)
            if not multi:
                primary = np.full(len(docs), -np.inf if spec.missing == "_first" else np.inf)
                signed = values.astype(np.float64) * (-1 if spec.descending else 1)
                primary[idx] = signed
        elif self.sort:
            return np.arange(len(docs))
        keys = (docs, groups) if primary is None else (docs, primary, groups)
        order = np.lexsort(keys)
        sorted_groups = groups[order]
        starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
        rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        return np.sort(order[rank < self.k])

    def _column(self, seg: SegmentContext, docs: np.ndarray, i: int) -> tuple[list[Any], list[Any]]:
        """(comparable keys, rendered values) of one sort spec for every doc."""
        spec, ref = self.sort[i], self.fields[i]
        n = len(docs)
        if spec.field == "_score":
            values = [None] * n if seg.scores is None else [float(v) for v in np.asarray(seg.scores)[docs]]
            return values, values
        if spec.field == "_doc":
            base = seg.view.doc_base
            values = [int(d) + base for d in docs.tolist()]
            return values, values
        found: list[Any] = [None] * n
        if spec.geo is not None:
            values, present = distance_values(seg.segment.column(spec.field), spec, docs)
            found = [v if p else None for v, p in zip(values.tolist(), present.tolist(), strict=True)]
        elif ref is not None and ref.family == KEYWORD:
            idx, ords, terms, _ = keyword_values(seg, ref, docs)
            pick = min if not spec.descending else max
            for j, o in zip(idx.tolist(), ords.tolist(), strict=True):
                term = terms[o]
                term = term.decode() if isinstance(term, bytes) else str(term)
                found[j] = term if found[j] is None else pick(found[j], term)
        elif ref is not None and ref.mapped:
            idx, values, _ = numeric_values(seg, ref, docs)
            if spec.script is not None:
                values = values.astype(np.float64)  # a number script sorts and renders as doubles
            pick = min if not spec.descending else max
            for j, v in zip(idx.tolist(), values.tolist(), strict=True):
                found[j] = v if found[j] is None else pick(found[j], v)
        return found, found

    def _keys(self, docs: np.ndarray, scores: np.ndarray | None, columns: list) -> list[tuple]:
        if not self.sort:
            if scores is None:
                return [(0, int(d)) for d in docs.tolist()]
            return [(-float(s), int(d)) for s, d in zip(scores.tolist(), docs.tolist(), strict=True)]
        keys = []
        for i, d in enumerate(docs.tolist()):
            key: list[Any] = []
            for spec, (values, _) in zip(self.sort, columns, strict=True):
                key.append(_key(values[i], spec))
            key.append((0, int(d)))
            keys.append(tuple(key))
        return keys

    # -- merging and rendering -------------------------------------------------------------------

    def merge(self, parts: list[HitRows], maps: list[np.ndarray], n_out: int) -> HitRows:
        mapped, keeps = remap(maps, [p.groups for p in parts])
        counts = np.zeros(n_out, np.int64)
        max_scores = np.full(n_out, np.nan)
        rows: list[tuple[int, tuple, list, float | None, str, bytes | None, str]] = []
        for part, m in zip(parts, maps, strict=True):
            m = np.asarray(m, dtype=np.int64)[: len(part.counts)]
            ok = m >= 0
            np.add.at(counts, m[ok], part.counts[: len(m)][ok])
            np.fmax.at(max_scores, m[ok], part.max_scores[: len(m)][ok])
        at = 0
        for part, keep in zip(parts, keeps, strict=True):
            for i in np.flatnonzero(keep).tolist():
                rows.append(
                    (
                        int(mapped[at]),
                        part.keys[i],
                        part.sort_values[i],
                        part.scores[i],
                        part.ids[i],
                        part.sources[i],
                        part.index,
                    )
                )
                at += 1
        rows.sort(key=lambda r: (r[0], r[1]))
        out: list[tuple] = []
        taken: dict[int, int] = {}
        for row in rows:
            if taken.get(row[0], 0) < self.k:
                taken[row[0]] = taken.get(row[0], 0) + 1
                out.append(row)
        return HitRows(
            groups=np.array([r[0] for r in out], dtype=np.int64),
            keys=[r[1] for r in out],
            sort_values=[r[2] for r in out],
            scores=[r[3] for r in out],
            ids=[r[4] for r in out],
            sources=[r[5] for r in out],
            index=parts[0].index if parts else "",
            counts=counts,
            max_scores=max_scores,
        )

    def render(self, part: HitRows, group: int | None) -> dict:
        total = 0 if group is None or group >= len(part.counts) else int(part.counts[group])
        rows = [] if group is None else [i for i, g in enumerate(part.groups.tolist()) if g == group]
        rows = rows[self.from_ : self.from_ + self.size]
        show_scores = self.by_score or self.track_scores
        best = None if group is None or group >= len(part.max_scores) else part.max_scores[group]
        hits = []
        for i in rows:
            hit: dict[str, Any] = {"_index": part.index, "_id": part.ids[i]}
            hit["_score"] = part.scores[i] if show_scores else None
            raw = part.sources[i]
            if raw is not None and self.source.fetch:
                filtered = filter_source(raw, self.source)
                if filtered is not None:
                    hit["_source"] = RawJSON(filtered)
            if self.sort:
                hit["sort"] = part.sort_values[i]
            hits.append(hit)
        max_score = float(best) if show_scores and best is not None and not math.isnan(best) else None
        return {"hits": {"total": {"value": total, "relation": "eq"}, "max_score": max_score, "hits": hits}}


def _key(value: Any, spec: SortSpec) -> tuple:
    """A sort value as a key where smaller sorts first; missing values last (or first)."""
    missing_first = spec.missing == "_first"
    if value is None:
        return (0 if missing_first else 2, 0)
    if spec.descending:
        if isinstance(value, str):
            return (1, tuple(-ord(c) for c in value) + (1,))
        return (1, -value)
    return (1, value)


def parse_top_hits(name: str, body: Any, meta: dict | None, subs: list, pctx: ParseContext) -> TopHitsAgg:
    opts = Options("top_hits", name, body, _OPTIONS)
    return TopHitsAgg(name, meta, opts, pctx)
