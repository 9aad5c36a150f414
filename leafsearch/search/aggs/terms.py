"""The `terms` aggregation: keyword, numeric, date and boolean fields.

Per segment, keyword terms are counted by ordinal (`bincount`) and only the terms that occur are
turned into strings. Partials keep every term, so the merge over all segments and shards is exact:
`doc_count_error_upper_bound` is always 0 and `sum_other_doc_count` counts precisely the documents
of the buckets not returned.
"""

from __future__ import annotations

import re
from typing import Any

import mmh3
import numpy as np

from leafsearch.errors import AggregationExecution, IllegalArgument
from leafsearch.index import ip
from leafsearch.index.columns import KeywordColumn
from leafsearch.search.aggs.base import (
    COMMON_VALUE_OPTIONS,
    Agg,
    Options,
    ParseContext,
    SegmentContext,
    collect_subs,
    field_failed,
    render_subs,
    shard_failure,
)
from leafsearch.search.aggs.grouping import (
    Buckets,
    collect_buckets,
    dedupe_pairs,
    merge_buckets,
)
from leafsearch.search.aggs.limits import consume_buckets
from leafsearch.search.aggs.order import OrderKey, parse_order, sort_rows
from leafsearch.search.aggs.values import (
    ANY,
    BOOLEAN,
    DATE,
    KEYWORD,
    FieldRef,
    gather,
    keyword_values,
    numeric_values,
    resolve_field,
)

_OPTIONS = COMMON_VALUE_OPTIONS | {
    "size",
    "shard_size",
    "min_doc_count",
    "shard_min_doc_count",
    "order",
    "include",
    "exclude",
    "execution_hint",
    "collect_mode",
    "show_term_doc_count_error",
}
_DEFAULT_ORDER = [OrderKey("_count", False), OrderKey("_key", True)]
_PARTITION_SEED = 31


class IncludeExclude:
    """`include` / `exclude`: a regular expression, exact values, or a hash partition (include only)."""

    def __init__(self, agg_name: str, include: Any, exclude: Any, numeric: bool) -> None:
        self.partition: tuple[int, int] | None = None
        self.include_re = self.exclude_re = None
        self.include_set = self.exclude_set = None
        if isinstance(include, dict):
            self.partition = _partition(include)
        for value, kind in ((include, "include"), (exclude, "exclude")):
            if isinstance(value, str):
                if numeric:
                    raise shard_failure(
                        AggregationExecution(
                            f"Aggregation [{agg_name}] cannot support regular expression style "
                            "include/exclude settings as they can only be applied to string fields. "
                            "Use an array of numeric values for include/exclude clauses used to filter "
                            "numeric fields"
                        )
                    )
                setattr(self, f"{kind}_re", _lucene_regex(value, kind))
            elif isinstance(value, list):
                setattr(self, f"{kind}_set", value)
        self.active = include is not None or exclude is not None

    def keyword_mask(self, terms: np.ndarray) -> np.ndarray:
        """Which terms of a segment pass (a loop over distinct terms, never over documents)."""
        mask = np.ones(len(terms), dtype=bool)
        if not self.active or not len(terms):
            return mask
        if self.include_set is not None:
            mask &= np.isin(terms, np.array([str(v).encode() for v in self.include_set] or [b""]))
            if not self.include_set:
                mask[:] = False
        if self.exclude_set is not None and self.exclude_set:
            mask &= ~np.isin(terms, np.array([str(v).encode() for v in self.exclude_set]))
        if self.include_re is not None or self.exclude_re is not None or self.partition is not None:
            strings = [t.decode() for t in terms.tolist()]
            if self.include_re is not None:
                mask &= np.fromiter((bool(self.include_re.fullmatch(s)) for s in strings), bool, len(strings))
            if self.exclude_re is not None:
                mask &= ~np.fromiter(
                    (bool(self.exclude_re.fullmatch(s)) for s in strings), bool, len(strings)
                )
            if self.partition is not None:
                part, count = self.partition
                hashes = np.fromiter(
                    (mmh3.hash(t, _PARTITION_SEED) for t in terms.tolist()), np.int64, len(terms)
                )
                mask &= np.mod(hashes, count) == part
        return mask

    def numeric_mask(self, values: np.ndarray) -> np.ndarray:
        mask = np.ones(len(values), dtype=bool)
        if self.include_set is not None:
            mask &= np.isin(values, np.asarray(self.include_set, dtype=np.float64))
        if self.exclude_set is not None and self.exclude_set:
            mask &= ~np.isin(values, np.asarray(self.exclude_set, dtype=np.float64))
        if self.partition is not None:
            part, count = self.partition
            mask &= np.mod(_mix64(values), count) == part
        return mask


def _partition(spec: dict) -> tuple[int, int]:
    if "num_partitions" not in spec or "partition" not in spec:
        raise field_failed(
            "terms",
            "include",
            IllegalArgument("Missing [num_partitions] or [partition] parameter for partition-based include"),
        )
    return int(spec["partition"]), int(spec["num_partitions"])


def _lucene_regex(pattern: str, kind: str) -> re.Pattern:
    """Lucene's RegExp is anchored and shares Python's common syntax; `@` is any string."""
    try:
        return re.compile(pattern.replace("@", ".*"), re.DOTALL)
    except re.error as err:
        raise field_failed(
            "terms", kind, IllegalArgument(f"invalid regular expression [{pattern}]: {err}")
        ) from None


def _mix64(values: np.ndarray) -> np.ndarray:
    """hppc's BitMixer.mix64 over the long bits of each value, as Elasticsearch partitions numbers."""
    if values.dtype.kind == "f":
        z = values.astype(np.float64).view(np.uint64).copy()
    else:
        z = values.astype(np.int64).view(np.uint64).copy()
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(32))) * np.uint64(0x4CD6944C5CC20B6D)
        z = (z ^ (z >> np.uint64(29))) * np.uint64(0xFC12C5B19D3259E9)
        z = z ^ (z >> np.uint64(32))
    return z.view(np.int64)


class TermsAgg(Agg):
    type_name = "terms"

    def __init__(
        self, name: str, meta: dict | None, subs: list[Agg], opts: Options, pctx: ParseContext
    ) -> None:
        super().__init__(name, meta, subs)
        self.field: FieldRef = resolve_field("terms", opts, pctx, ANY)
        self.size = opts.positive("size", 10)
        opts.positive("shard_size", max(self.size, 1), "shardSize")
        self.min_doc_count = opts.min_doc_count(1)
        self.show_error = opts.boolean("show_term_doc_count_error", False)
        self.order = parse_order(opts.get("order"), subs, _DEFAULT_ORDER, tiebreak=True)
        self.format = self.field.value_format(opts.get("format"))
        keyword = self.field.family in (KEYWORD, None)
        self.filter = IncludeExclude(name, opts.get("include"), opts.get("exclude"), numeric=not keyword)
        self.missing: Any = opts.missing(self.format, pctx.now_millis, as_text=keyword)
        self.ip = self.field.type_name == "ip"  # keys are stored terms of addresses (index/ip.py)
        if self.ip and self.missing is not None:
            try:
                self.missing = ip.encode(self.missing)
            except ValueError as err:
                raise field_failed("terms", "missing", IllegalArgument(str(err))) from None

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Buckets:
        counted = self._ordinal_counts(seg, docs, n_groups)
        if counted is not None:
            return counted
        if self.field.family in (KEYWORD, None):
            idx, codes, universe, multi = keyword_values(seg, self.field, docs, self.missing)
            allowed = self.filter.keyword_mask(universe)
        else:
            idx, values, multi = numeric_values(seg, self.field, docs, self.missing)
            universe = self._numeric_universe(seg, values)
            codes = np.searchsorted(universe, values)
            allowed = self.filter.numeric_mask(universe)
        if self.filter.active:
            keep = allowed[codes]
            idx, codes = idx[keep], codes[keep]
        if multi:
            idx, codes = dedupe_pairs(idx, codes, len(universe))
        if self.min_doc_count == 0:
            row_group, row_code, count, subs = self._with_empty_terms(
                seg, docs, groups, n_groups, idx, codes, np.flatnonzero(allowed), len(universe)
            )
        else:
            row_group, row_code, count, subs = collect_buckets(
                self, seg, docs, groups, n_groups, idx, codes, len(universe)
            )
        return Buckets(row_group, [universe[row_code]], count, subs)

    def _ordinal_counts(self, seg: SegmentContext, docs: np.ndarray, n_groups: int) -> Buckets | None:
        """The commonest shape, a top-level `terms` on a single-valued keyword without
        sub-aggregations or `missing`, counted straight from the ordinals: one `bincount` of the
        matched documents' ordinals, or, when every document of the segment matched (`match_all`
        on a segment without deletes), the segment's own per-term counts, computed once
        (`KeywordColumn.doc_counts`). None: the general path applies.

        Why: the general path pairs every value with its parent bucket and document (three
        arrays of 8 bytes per match, then a dense count over the cells); at 1,000,000 documents
        that was most of a `size: 0` aggregation's time. O(matches), or O(terms) when all match."""
        if n_groups != 1 or self.subs or self.missing is not None or self.min_doc_count == 0:
            return None
        if self.field.family != KEYWORD or self.field.ftype is None or self.field.script is not None:
            return None
        col = seg.segment.column(self.field.path)
        if not isinstance(col, KeywordColumn):
            return None
        ords = col.ords
        if len(docs) == seg.segment.max_doc:  # docs are distinct and ascending: all of them
            counts = col.doc_counts
        elif ords.is_single:
            values = np.asarray(ords.values)[docs]
            if not ords.present.all():
                values = values[ords.present[docs]]
            counts = np.bincount(values, minlength=len(col.terms))
        else:
            return None
        terms = np.asarray(col.terms)
        if self.filter.active:
            counts = np.where(self.filter.keyword_mask(terms), counts, 0)
        used = np.flatnonzero(counts)
        return Buckets(np.zeros(len(used), np.int64), [terms[used]], counts[used].astype(np.int64))

    def _numeric_universe(self, seg: SegmentContext, values: np.ndarray) -> np.ndarray:
        """Distinct values: of the matched documents, or of the whole segment when empty terms are shown."""
        if self.min_doc_count == 0 and self.field.ftype is not None and self.field.script is None:
            col = seg.segment.column(self.field.path)
            dv = getattr(col, "doc_values", None)
            if dv is not None:
                every = self.field.convert(gather(dv, np.arange(seg.segment.max_doc))[1])
                return np.unique(np.concatenate([every.astype(values.dtype), values]))
        return np.unique(values)

    def _with_empty_terms(
        self,
        seg: SegmentContext,
        docs: np.ndarray,
        groups: np.ndarray,
        n_groups: int,
        idx: np.ndarray,
        codes: np.ndarray,
        allowed: np.ndarray,
        n_codes: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
        """`min_doc_count: 0`: every term of the segment becomes a row of every parent bucket."""
        n_codes = max(n_codes, 1)
        grid = (np.arange(n_groups, dtype=np.int64)[:, None] * n_codes + allowed[None, :]).ravel()
        cell = np.searchsorted(grid, groups[idx].astype(np.int64) * n_codes + codes)
        count = np.bincount(cell, minlength=len(grid)).astype(np.int64)
        subs = collect_subs(self.subs, seg, docs[idx], cell, len(grid)) if self.subs else {}
        return grid // n_codes, grid % n_codes, count, subs

    def merge(self, parts: list[Buckets], maps: list[np.ndarray], n_out: int) -> Buckets:
        return merge_buckets(self, parts, maps, n_out)

    def _key(self, value: Any) -> Any:
        if isinstance(value, bytes):
            return ip.decode(value.decode()) if self.ip else value.decode()
        if isinstance(value, (np.integer, int)):
            return int(value)
        return float(value)

    def render(self, part: Buckets, group: int | None) -> dict:
        rows = part.rows_of(group)
        rows = rows[part.count[rows] >= self.min_doc_count]
        ordered = sort_rows(part, rows, self.order, self.subs)
        chosen = ordered[: self.size]
        consume_buckets(len(chosen))
        other = int(part.count[rows].sum() - part.count[chosen].sum())
        buckets = []
        keys = part.keys[0][chosen].tolist() if len(chosen) else []
        for row, key in zip(chosen.tolist(), keys, strict=True):
            bucket: dict[str, Any] = {"key": self._key(key)}
            if not self.format.raw and not isinstance(key, bytes):
                bucket["key_as_string"] = self.format.format(key)
            bucket["doc_count"] = int(part.count[row])
            if self.show_error:
                bucket["doc_count_error_upper_bound"] = 0
            bucket.update(render_subs(self.subs, part.subs, row))
            buckets.append(bucket)
        return {"doc_count_error_upper_bound": 0, "sum_other_doc_count": other, "buckets": buckets}

    def typed_name(self) -> str:
        if not self.field.mapped and self.missing is None:
            return "umterms"
        if self.field.family in (KEYWORD, None):
            return "sterms"
        if self.field.family in (DATE, BOOLEAN) or self.field.is_integral():
            return "lterms"
        return "dterms"


def parse_terms(name: str, body: Any, meta: dict | None, subs: list[Agg], pctx: ParseContext) -> Agg:
    return TermsAgg(name, meta, subs, Options("terms", name, body, _OPTIONS), pctx)
