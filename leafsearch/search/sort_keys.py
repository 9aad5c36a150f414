"""Sort columns: the per-document values a sort spec orders by, gathered for matched documents.

Each sort spec becomes a `SortColumn` over all matched documents of a search (every segment of
every shard target, concatenated in (shard, doc) order): the values to render in `hits.sort`,
which documents have a value, and a comparable numeric key. Keyword values are compared through
global ordinals (one sorted term list over every segment involved), so keys of different segments
and shards compare directly as integers.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.errors import ElasticError, IllegalArgument
from leafsearch.index.columns import KeywordColumn, NumericColumn, TextColumn
from leafsearch.request.search_types import DOC, SCORE, SHARD_DOC, SortSpec

_GLOBAL_ORDS: OrderedDict[tuple, tuple[np.ndarray, list[np.ndarray]]] = OrderedDict()
_GLOBAL_ORDS_MAX = 64


def global_ordinals(field: str, segments: list) -> tuple[np.ndarray, list[np.ndarray]]:
    """(sorted union of the field's terms, per segment the global ordinal of each local term).

    Cached by segment identity: segments never change, so the mapping holds for their life.
    """
    key = (field, tuple(str(s.folder) for s in segments))
    hit = _GLOBAL_ORDS.get(key)
    if hit is not None:
        _GLOBAL_ORDS.move_to_end(key)
        return hit
    term_arrays = []
    for seg in segments:
        col = seg.column(field)
        term_arrays.append(np.asarray(col.terms) if isinstance(col, KeywordColumn) else np.empty(0, "S1"))
    if len(term_arrays) == 1:
        merged = term_arrays[0]
        maps = [np.arange(len(merged), dtype=np.int64)]
    else:
        merged, inverse = np.unique(np.concatenate(term_arrays), return_inverse=True)
        maps, pos = [], 0
        for t in term_arrays:
            maps.append(inverse[pos : pos + len(t)].astype(np.int64))
            pos += len(t)
    _GLOBAL_ORDS[key] = (merged, maps)
    if len(_GLOBAL_ORDS) > _GLOBAL_ORDS_MAX:
        _GLOBAL_ORDS.popitem(last=False)
    return merged, maps


@dataclass
class SortColumn:
    """Values of one sort spec for the matched documents, in the order they were gathered."""

    spec: SortSpec
    kind: str  # "long", "double", "keyword", "score", "doc", "shard_doc"
    values: np.ndarray  # raw values (keyword: global ordinals)
    present: np.ndarray | None  # None: every document has a value
    terms: np.ndarray | None = None  # keyword: the global term list
    field_types: tuple = ()  # the FieldType of the field in each target (for rendering)

    def key_columns(self) -> list[np.ndarray]:
        """Columns that order ascending in the requested order (missing flag first when needed)."""
        values = self.values
        if self.kind == "keyword":
            values = values * 2
        if self.spec.descending:
            values = ~values if values.dtype.kind in "iu" else -values
        if self.present is None or self.present.all():
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
        )

    def after_key(self, value: Any) -> list[Any]:
        """The key-column values of a `search_after` entry already converted to this kind."""
        present = value is not None
        if self.kind == "keyword" and present:
            raw = value.encode() if isinstance(value, str) else value
            g = int(np.searchsorted(self.terms, raw)) if self.terms is not None else 0
            exact = self.terms is not None and g < len(self.terms) and self.terms[g] == raw
            k = 2 * g if exact else 2 * g - 1
        elif present:
            k = value
        else:
            k = 0
        if self.spec.descending and present:
            k = ~int(k) if self.kind in ("keyword", "long", "doc", "shard_doc") else -k
        if self.present is None or self.present.all():
            if not present:
                # A null cursor on a column without missing values: every value sorts before it
                # under `_first` and after it under `_last`.
                return [np.inf if self.spec.missing != "_first" else -np.inf]
            return [k]
        flag = (0 if present else 1) if self.spec.missing != "_first" else (1 if present else 0)
        return [flag, k]


def resolve_field_kind(spec: SortSpec, field_types: list) -> str:
    """The storage kind of a sort field across all targets, refusing what Elasticsearch refuses."""
    kinds = set()
    for ft in field_types:
        if ft is None:
            if spec.unmapped_type is None:
                raise ElasticError(
                    f"No mapping found for [{spec.field}] in order to sort on",
                    status=400,
                    error_type="query_shard_exception",
                )
            continue
        if ft.kind == "text":
            raise IllegalArgument(
                "Text fields are not optimised for operations that require per-document field data like "
                "aggregations and sorting, so these operations are disabled by default. Please use a keyword "
                f"field instead. Alternatively, set fielddata=true on [{spec.field}] in order to load field "
                "data by uninverting the inverted index. Note that this can use significant memory."
            )
        if not ft.doc_values:
            raise IllegalArgument(
                f"Can't load fielddata on [{spec.field}] because fielddata is unsupported on fields of type "
                f"[{ft.type}]. Use a field with doc values"
            )
        kinds.add("double" if ft.kind == "double" or ft.type == "scaled_float" else ft.kind)
    if not kinds:
        return _unmapped_kind(spec.unmapped_type)
    if kinds == {"long", "double"}:
        return "double"
    if len(kinds) > 1:
        raise IllegalArgument(f"Can't sort on field [{spec.field}]; the field has incompatible sort types")
    return kinds.pop()


def _unmapped_kind(unmapped_type: str | None) -> str:
    if unmapped_type in ("keyword", "text", "string"):
        return "keyword"
    if unmapped_type in ("double", "float", "half_float", "scaled_float"):
        return "double"
    return "long"


def numeric_values(col, ft, spec: SortSpec, docs: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, present) of a numeric sort field for docs of one segment, converted for merging."""
    dtype = np.float64 if kind == "double" else np.int64
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
    elif spec.numeric_type == "double":
        vals = vals.astype(np.float64)
    return vals.astype(dtype, copy=False), present


def keyword_values(col, spec: SortSpec, docs: np.ndarray, gmap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def is_text(col) -> bool:
    return isinstance(col, TextColumn)
