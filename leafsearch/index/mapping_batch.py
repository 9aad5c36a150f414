"""Parsing the documents of a bulk request together, column by column.

`Mapping.parse_document` walks one document at a time: a few Python calls per field and document,
which is most of the cost of indexing small log documents. Documents of one bulk request usually
share their shape, so here each field's values of every document are gathered into one list and
checked and converted with one pass of C-level calls (`set(map(type, ...))`, `min`/`max`, one
numpy parse of the timestamps); texts are analysed later, where the segment is built.

Only the plain cases are taken: every field already mapped, leaf values that are single scalars,
no `copy_to`. Anything else (a new field, an array, a null, a value its field refuses, ...) makes
`parse_batch` answer None and the caller parses each document with `parse_document`, which then
maps, refuses or reports exactly as it always does. So a batch that parses here yields the very
values `parse_document` would have produced (its texts once analysed).
"""

from __future__ import annotations

import math
from itertools import chain
from operator import itemgetter
from typing import Any

import orjson

from leafsearch.index.dates import MAX_NANOS, NANOS_PER_MILLI
from leafsearch.index.iso_columns import iso_millis
from leafsearch.index.mapping import (
    _INTEGER_TYPES,
    MAX_TERM_CHARS_ALWAYS_SHORT,
    FieldType,
    Mapping,
    ObjectMapper,
    _Malformed,
)
from leafsearch.index.parsed import ParsedBatch, Rows

_SCALARS = frozenset({str, int, float, bool})


class _Fallback(Exception):
    """The batch needs the per-document parser."""


def parse_batch(mapping: Mapping, sources: list[bytes]) -> ParsedBatch | None:
    """The indexable values of every source, or None when they must be parsed one by one."""
    try:
        docs = list(map(orjson.loads, sources))
    except orjson.JSONDecodeError:
        return None
    root = mapping.root
    if not docs or not root.enabled or set(map(type, docs)) != {dict} or mapping.join is not None:
        return None
    batch = ParsedBatch(sources)
    try:
        _object(root, docs, None, batch)
    except _Fallback:
        return None
    return batch


def _columns(objs: list[dict]) -> dict[str, tuple[list[int] | None, list]]:
    """key -> (indices into `objs` of the objects holding it, or None for all; their values)."""
    keys = list(objs[0])
    if set(map(len, objs)) == {len(keys)}:
        try:
            if len(keys) == 1:
                return {keys[0]: (None, [obj[keys[0]] for obj in objs])}
            if keys:
                columns = zip(*map(itemgetter(*keys), objs), strict=True)
                return {k: (None, list(v)) for k, v in zip(keys, columns, strict=True)}
            return {}
        except KeyError:
            pass  # same sizes, other keys: gathered key by key below
    columns = {}
    for key in dict.fromkeys(chain.from_iterable(objs)):
        where = [i for i, obj in enumerate(objs) if key in obj]
        columns[key] = (where, [objs[i][key] for i in where])
    return columns


def _object(mapper: ObjectMapper, objs: list[dict], rows: Rows, batch: ParsedBatch) -> None:
    for key, (where, values) in _columns(objs).items():
        child = mapper.children.get(key)
        if child is None:
            raise _Fallback
        child_rows = rows if where is None else where if rows is None else [rows[i] for i in where]
        if child.leaf:
            if child.copy_to:
                raise _Fallback
            _leaf(child, values, child_rows, batch)
        elif child.enabled:  # a disabled object ignores whatever it holds
            if child.type == "nested" or set(map(type, values)) != {dict}:
                raise _Fallback
            _object(child, values, child_rows, batch)


def _leaf(field: FieldType, values: list, rows: Rows, batch: ParsedBatch) -> None:
    types = set(map(type, values))
    if field.type == "geo_point" and not field.subfields:
        _points(field, values, types, rows, batch)
        return
    if not types <= _SCALARS or type(field) is not FieldType:  # a subclass parses its own way
        raise _Fallback
    try:
        if field.kind == "text":
            if not field.analyzer.standard:
                raise _Fallback  # a chain of its own analyses document by document
            texts = values if types == {str} else [field.convert(v) for v in values]
            _add(batch.text, field.path, rows, texts)  # analysed where the segment is built
        else:
            converted = _fast_values(field, values, types)
            if converted is None:
                converted = [field.convert(v) for v in values]
                if None in converted:  # dropped by `ignore_above`
                    kept = [i for i, v in enumerate(converted) if v is not None]
                    converted = [converted[i] for i in kept]
                    rows = kept if rows is None else [rows[i] for i in kept]
            if converted:
                _add(getattr(batch, field.kind), field.path, rows, converted)
    except _Malformed:
        raise _Fallback from None
    for sub in field.subfields:
        _leaf(sub, values, rows, batch)


def _points(field: FieldType, values: list, types: set[type], rows: Rows, batch: ParsedBatch) -> None:
    """One point per document in any form (`{"lat", "lon"}`, `[lon, lat]`, text); arrays of
    points and nulls go to the per-document parser."""
    if not types <= {str, dict, list} or not all(map(_one_point, values)):
        raise _Fallback
    try:
        _add(batch.long, field.path, rows, [field.convert(v) for v in values])
    except _Malformed:
        raise _Fallback from None


def _one_point(value: Any) -> bool:
    """Whether a geo_point value is one point: an array is one only as `[lon, lat(, z)]`."""
    return type(value) is not list or (bool(value) and type(value[0]) in (int, float))


def _fast_values(field: FieldType, values: list, types: set[type]) -> list[Any] | None:
    """The converted values when the whole column is of the common kind, else None."""
    type_ = field.type
    if type_ == "keyword":
        longest = max(map(len, values)) if types == {str} else 0
        ok = (
            types == {str}
            and field.normalizer is None
            and longest <= field.ignore_above
            and longest <= MAX_TERM_CHARS_ALWAYS_SHORT  # longer ones: checked value by value
        )
        return values if ok else None
    if type_ in _INTEGER_TYPES:
        lo, hi, _ = _INTEGER_TYPES[type_]
        return values if types == {int} and lo <= min(values) and max(values) <= hi else None
    if type_ == "double":
        return values if types == {float} and all(map(math.isfinite, values)) else None
    if field.formatter is not None and field.formatter.parses_iso and types == {str}:
        millis = iso_millis(values)
        if millis is None:
            return None
        if not field.nanos:
            return millis.tolist()
        nanos = millis * NANOS_PER_MILLI
        return nanos.tolist() if nanos.min() >= 0 and nanos.max() <= MAX_NANOS else None
    return None


def _add(store: dict, path: str, rows: Rows, values: list) -> None:
    if path in store:  # a path reached twice in one document: the per-document parser positions it
        raise _Fallback
    store[path] = (rows, values)
