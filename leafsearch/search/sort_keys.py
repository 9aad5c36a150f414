"""Sort columns: the per-document values a sort spec orders by, gathered for matched documents.

Each sort spec becomes a `SortColumn` over all matched documents of a search (every segment of
every shard target, concatenated in (shard, doc) order): the values to render in `hits.sort`,
which documents have a value, and a comparable numeric key. Keyword values are compared through
global ordinals (one sorted term list over every segment involved), so keys of different segments
and shards compare directly as integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.common.bounded_cache import BoundedCache
from leafsearch.common.wire_pickle import ByFields
from leafsearch.errors import ElasticError, IllegalArgument
from leafsearch.index.columns import KeywordColumn, NumericColumn, merge_terms, ordinal_column
from leafsearch.request.search_types import DOC, SCORE, SHARD_DOC, SortSpec
from leafsearch.search import geo_sort
from leafsearch.search.fetch import fielddata_error, missing_sort_key


class GlobalOrdinals(BoundedCache[tuple, tuple[np.ndarray, list[np.ndarray]]]):
    """Global ordinals of keyword fields over sets of segments (Elasticsearch's fielddata), the
    node's, bounded in bytes by `indices.fielddata.cache.size`. Keyed by segment identity:
    segments never change, so a mapping holds for their life."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes, _ords_nbytes)

    def of(self, field: str, segments: list) -> tuple[np.ndarray, list[np.ndarray]]:
        """`global_ordinals` of these segments, cached when there are several."""
        if len(segments) < 2:
            return global_ordinals(field, segments)
        key = (field, tuple(str(s.folder) for s in segments))
        entry = self.get(key)
        if entry is None:
            entry = global_ordinals(field, segments)
            self.put(key, entry)
        return entry


def _ords_nbytes(entry: tuple[np.ndarray, list[np.ndarray]]) -> int:
    return entry[0].nbytes + sum(m.nbytes for m in entry[1])


def global_ordinals(field: str, segments: list) -> tuple[np.ndarray, list[np.ndarray]]:
    """(sorted union of the field's terms, per segment the global ordinal of each local term).
    O(terms log segments) over every term of the segments (each segment's terms are sorted)."""
    term_arrays = []
    for seg in segments:
        col = ordinal_column(seg.column(field))
        term_arrays.append(np.asarray(col.terms) if isinstance(col, KeywordColumn) else np.empty(0, "S1"))
    if not term_arrays:
        return np.empty(0, "S1"), []
    if len(term_arrays) == 1:
        return term_arrays[0], [np.arange(len(term_arrays[0]), dtype=np.int64)]
    return merge_terms(term_arrays)


#: Keys that order before / after every real key of a column (for a `null` cursor).
_KEY_MIN, _KEY_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
_INT_KINDS = ("long", "doc", "shard_doc")


@dataclass
class SortColumn(ByFields):
    """Values of one sort spec for the matched documents, in the order they were gathered.

    Numeric columns hold, for documents without a value, the value Lucene sorts them by (the
    `missing` option's value, else Long.MAX_VALUE / Long.MIN_VALUE or +/-Infinity, whichever puts
    them at the requested end): a document that really has that value ties with them, exactly as
    in Elasticsearch, and the rendered sort value of a missing document is a valid cursor. Keyword
    columns keep missing documents apart with a flag column, since Elasticsearch renders and
    accepts them as `null`.
    """

    spec: SortSpec
    kind: str  # "long", "double", "keyword", "score", "doc", "shard_doc"
    values: np.ndarray  # raw values (keyword: global ordinals); numeric: missing already substituted
    present: np.ndarray | None  # None: every document has a value (only rendering reads it)
    terms: np.ndarray | None = None  # keyword: the global term list
    field_types: tuple = ()  # the FieldType of the field in each target (for rendering)
    missing_key: Any = None  # numeric: the substitute of a missing value (also what `null` means)
    #: Whether the keys have a missing flag column (`key_columns`), when a column taken from a
    #: flagged one says so: the hits it keeps may all have a value, its keys still have the flag.
    flagged: bool | None = None

    def _flagged(self) -> bool:
        if self.flagged is not None:
            return self.flagged
        return self.kind == "keyword" and self.present is not None and not self.present.all()

    def key_columns(self) -> list[np.ndarray]:
        """Columns that order ascending in the requested order (missing flag first when needed)."""
        values = self.values
        if self.kind == "keyword":
            values = values * 2
        if self.spec.descending:
            values = ~values if values.dtype.kind in "iu" else -values
        if not self._flagged():
            return [values]
        values = np.where(self.present, values, 0)
        if self.spec.missing == "_first":
            flag = self.present.astype(np.int8)
        else:
            flag = (~self.present).astype(np.int8)
        return [flag, values]

    def take(self, order: np.ndarray) -> SortColumn:
        return SortColumn(
            self.spec,
            self.kind,
            self.values[order],
            None if self.present is None else self.present[order],
            self.terms,
            self.field_types,
            self.missing_key,
            self._flagged(),
        )

    def after_key(self, value: Any) -> list[Any]:
        """The key-column values of a `search_after` entry already converted to this kind.

        A keyword that no document has falls between the terms around it (byte order, as Lucene
        compares): a prefix of a stored value sorts just before it, so in ascending order the walk
        resumes at that document and in descending order just after it.
        """
        if self.kind != "keyword":
            k = self.missing_key if value is None else value
            if self.spec.descending:
                k = ~int(k) if self.kind in _INT_KINDS else -k
            return [k]
        missing_last = self.spec.missing != "_first"
        if value is None:
            if self._flagged():
                return [1 if missing_last else 0, 0]
            # No document lacks a value: `null` sorts after all of them or before all of them.
            return [_KEY_MAX if missing_last else _KEY_MIN]
        raw = value.encode() if isinstance(value, str) else value
        g = int(np.searchsorted(self.terms, raw)) if self.terms is not None else 0
        exact = self.terms is not None and g < len(self.terms) and self.terms[g] == raw
        k = 2 * g if exact else 2 * g - 1
        if self.spec.descending:
            k = ~k
        if self._flagged():
            return [0 if missing_last else 1, k]
        return [k]


def missing_substitute(spec: SortSpec, field_type: Any) -> Any:
    """The key of a document without a value: exactly what its rendered sort value converts to as
    a `search_after` entry, so a cursor taken from such a hit resumes right after it."""
    key = missing_sort_key(field_type, spec)
    if isinstance(key, int) and not isinstance(key, bool):
        # A formatted extreme (Long.MIN_VALUE as `yyyy-MM-dd`) can parse back past the range.
        key = min(max(key, _KEY_MIN), _KEY_MAX)
    return key


def resolve_field_kind(spec: SortSpec, field_types: list, index_names: list[str]) -> str:
    """The storage kind a sort compares in across all targets (`numeric_type` converts numbers),
    refusing what Elasticsearch refuses; `index_names` are the targets' indices, for messages."""
    if spec.geo is not None:
        return geo_sort.resolve_kind(spec, field_types)
    kinds = set()
    for ft, index in zip(field_types, index_names, strict=True):
        if ft is None:
            if spec.unmapped_type is None:
                raise ElasticError(
                    f"No mapping found for [{spec.field}] in order to sort on",
                    status=400,
                    error_type="query_shard_exception",
                )
            continue
        error = fielddata_error(spec.field, ft, index)
        if error is not None:
            raise error
        if ft.type == "geo_point":
            raise IllegalArgument(
                "can't sort on geo_point field without using specific sorting feature, like geo_distance"
            )
        kinds.add("double" if ft.kind == "double" or ft.type == "scaled_float" else _sort_kind(ft))
    types = {ft.type for ft in field_types if ft is not None}
    if "unsigned_long" in types and len(types) > 1:
        raise IllegalArgument(
            "Can't do sort across indices, as a field has [unsigned_long] type in one index, and different "
            "type in another index!"
        )
    if not kinds:
        kind = _unmapped_kind(spec.unmapped_type)
    elif kinds == {"long", "double"}:
        kind = "double"
    elif len(kinds) > 1:
        raise IllegalArgument(f"Can't sort on field [{spec.field}]; the field has incompatible sort types")
    else:
        kind = kinds.pop()
    if kind in ("long", "double") and spec.numeric_type is not None:
        # Double- or LongValuesComparatorSource over the field's values (dates compare as longs).
        return "double" if spec.numeric_type == "double" else "long"
    return kind


def _sort_kind(ft: Any) -> str:
    """A text field with fielddata sorts by its terms, as a keyword does."""
    return "keyword" if ft.kind == "text" else ft.kind


def _unmapped_kind(unmapped_type: str | None) -> str:
    if unmapped_type in ("keyword", "text", "string"):
        return "keyword"
    if unmapped_type in ("double", "float", "half_float", "scaled_float"):
        return "double"
    return "long"


def numeric_values(col, ft, spec: SortSpec, docs: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, present) of a numeric sort field for docs of one segment, converted for merging."""
    dtype = np.float64 if kind == "double" else np.int64
    if spec.geo is not None:
        return geo_sort.distance_values(col, spec, docs)
    if not isinstance(col, NumericColumn):
        return np.zeros(len(docs), dtype=dtype), np.zeros(len(docs), dtype=bool)
    mode = spec.mode or ("max" if spec.descending else "min")
    vals, present = col.doc_values.per_doc(mode)
    vals = np.asarray(vals)[docs]
    present = present[docs]
    if ft is not None and ft.type == "scaled_float":
        vals = vals / ft.scaling_factor
    if ft is not None and spec.numeric_type in ("date", "date_nanos"):
        if spec.numeric_type == "date_nanos" and ft.type == "date":
            vals = vals.astype(np.int64) * 1_000_000
        elif spec.numeric_type == "date" and ft.type == "date_nanos":
            vals = vals.astype(np.int64) // 1_000_000
    if kind == "long" and mode in ("avg", "median") and vals.dtype.kind == "f":
        # MultiValueMode on longs: Math.round of the double average or middle pair (half up).
        vals = np.floor(vals + 0.5)
    elif kind == "long" and vals.dtype.kind == "f":
        vals = np.trunc(vals)  # numeric_type long over doubles: Java's (long) cast
    return vals.astype(dtype, copy=False), present


def keyword_values(col, spec: SortSpec, docs: np.ndarray, gmap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    col = ordinal_column(col)
    if not isinstance(col, KeywordColumn):
        return np.zeros(len(docs), dtype=np.int64), np.zeros(len(docs), dtype=bool)
    mode = spec.mode or ("max" if spec.descending else "min")
    if mode not in ("min", "max"):
        raise IllegalArgument(f"Sort mode [{mode}] is not supported on keyword fields; use [min] or [max]")
    ords, present = col.ords.per_doc(mode)
    ords = np.asarray(ords)[docs]
    return gmap[ords] if len(gmap) else ords.astype(np.int64), present[docs]


def special_kind(spec: SortSpec) -> str | None:
    return {SCORE: "score", DOC: "doc", SHARD_DOC: "shard_doc"}.get(spec.field)
