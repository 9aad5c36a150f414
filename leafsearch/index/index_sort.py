"""Index sorting (`index.sort.*`): the order in which every segment of an index holds its documents.

Elasticsearch's index sort: the settings name fields (with `order`, `mode`, `missing`), are final,
and are checked against the mapping when the index is created. Every segment the index writes (a
buffer flush, a merge) is then written in that order, ties in arrival order, so a query sorted by
the index sort (or a prefix of it) finds each segment's sort order already in place: the walk of
`search/top_hits.py` reads the documents from the first on and stops at a page's worth, with no
sort of the segment at all (`covers`).

The keys are the search's own (`SortColumn.key_columns` over the same per-document values and
missing substitutes), so a segment's documents are in exactly the order a sort by the index sort
gives on it: the identity is the search's order, not an approximation of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.common.settings import index_setting
from leafsearch.errors import IllegalArgument
from leafsearch.request.search_types import DOC, SHARD_DOC, SortSpec

if TYPE_CHECKING:
    from leafsearch.index.mapping import FieldType, Mapping

FIELD, ORDER, MODE, MISSING = "index.sort.field", "index.sort.order", "index.sort.mode", "index.sort.missing"


@dataclass(frozen=True, slots=True)
class IndexSortField:
    """One field of an index sort, resolved against the mapping (picklable: the merge worker
    process orders merged segments with it)."""

    spec: SortSpec  # field, order, missing (`_last`/`_first`), mode (`min`/`max`, explicit)
    kind: str  # the kind a search compares in: "long", "double" or "keyword"
    scaling_factor: float | None  # scaled_float: stored longs are divided by it, as a sort does
    missing_key: Any  # numeric: the value documents without one sort as (the search's substitute)


@dataclass(frozen=True, slots=True)
class IndexSort:
    fields: tuple[IndexSortField, ...]

    def order(self, columns: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """The documents in index-sort order, ties in their given order, from each sort field's
        (per-document value, present): keyword ordinals of one sorted term list, or numbers."""
        from leafsearch.search.sort_keys import SortColumn

        keys: list[np.ndarray] = []
        for field, (values, present) in zip(self.fields, columns, strict=True):
            if field.kind == "keyword":
                column = SortColumn(
                    field.spec, "keyword", values.astype(np.int64), None if present.all() else present
                )
            else:
                dtype = np.float64 if field.kind == "double" else np.int64
                if field.scaling_factor is not None:
                    values = values / field.scaling_factor
                values = np.where(present, values.astype(dtype), field.missing_key).astype(dtype)
                column = SortColumn(field.spec, field.kind, values, None)
            keys.extend(column.key_columns())
        return np.lexsort(keys[::-1])

    def covers(self, specs: list[SortSpec], field_types: list[FieldType | None]) -> bool:
        """Whether a search sort orders this index's segments as they are stored: the index sort
        or a prefix of it (same order, `missing`, `mode`, no `numeric_type`, the same missing
        substitute), optionally followed by `_doc` or `_shard_doc` ascending after the whole
        index sort (ties are in doc order)."""
        from leafsearch.search.sort_keys import missing_substitute

        n = len(self.fields)
        tail = specs[n:]
        if len(tail) > 1 or (tail and (tail[0].field not in (DOC, SHARD_DOC) or tail[0].descending)):
            return False
        for spec, ft, field in zip(specs, field_types, self.fields, strict=False):
            own = field.spec
            if (
                spec.field != own.field
                or spec.order != own.order
                or spec.missing != own.missing
                or (spec.mode or ("max" if spec.descending else "min")) != own.mode
                or spec.numeric_type is not None
                or ft is None
            ):
                return False
            if field.kind != "keyword" and missing_substitute(spec, ft) != field.missing_key:
                return False
        return True


def _java_list(values: list[str]) -> str:
    return "[" + ", ".join(values) + "]"


def check_sort_settings(settings: dict[str, Any]) -> None:
    """Elasticsearch's `IndexSortConfig`: `order`, `mode` and `missing`, when set, hold one value
    per sort field."""
    fields = index_setting(settings, FIELD)
    for key in (ORDER, MODE, MISSING):
        if key in settings:
            values = index_setting(settings, key)
            if len(values) != len(fields):
                shown = [v.upper() for v in values] if key == MODE else values
                raise IllegalArgument(
                    f"{FIELD}:{_java_list(fields)} {key}:{_java_list(shown)}, size mismatch"
                )


def index_sort_of(settings: dict[str, Any], mapping: Mapping, index_name: str) -> IndexSort | None:
    """The index sort the settings ask for (None: not sorted), refusing fields Elasticsearch
    refuses: unmapped, or without doc values."""
    from leafsearch.search.fetch import fielddata_error
    from leafsearch.search.sort_keys import missing_substitute

    check_sort_settings(settings)
    names = index_setting(settings, FIELD)
    if not names:
        return None
    if mapping.nested_paths:
        raise IllegalArgument("cannot have nested fields when index sort is activated")
    orders = index_setting(settings, ORDER) if ORDER in settings else ["asc"] * len(names)
    modes = index_setting(settings, MODE) if MODE in settings else [None] * len(names)
    missing = index_setting(settings, MISSING) if MISSING in settings else ["_last"] * len(names)
    fields = []
    for name, order, mode, miss in zip(names, orders, modes, missing, strict=True):
        ft = mapping.field(name)
        if ft is None:
            raise IllegalArgument(f"unknown index sort field:[{name}]")
        cause = fielddata_error(name, ft, index_name)
        if cause is not None:
            error = IllegalArgument(f"docvalues not found for index sort field:[{name}]", caused_by=cause)
            error.root_is_self = True
            raise error
        if ft.type == "geo_point":  # its values sort by distance only (Lucene's custom SortField)
            raise IllegalArgument(f"invalid index sort field:[{name}]")
        spec = SortSpec(name, order, miss, mode or ("max" if order == "desc" else "min"))
        kind = "double" if ft.kind == "double" or ft.type == "scaled_float" else ft.kind
        scaling = ft.scaling_factor if ft.type == "scaled_float" else None
        substitute = None if kind == "keyword" else missing_substitute(spec, ft)
        fields.append(IndexSortField(spec, kind, scaling, substitute))
    return IndexSort(tuple(fields))
