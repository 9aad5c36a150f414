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

Decoding typed by the mapping: where every leaf of the mapping is of a kind whose JSON type is
fixed (a `keyword`, a `text` of the `standard` analyzer or an ISO `date` is a string, an integer
type an integer, a `double` a number), the sources are decoded together by msgspec into one
struct per document whose fields are the mapping's (`_Typed`), and the columns are read from the
structs: no dict per document, and no pass over a string or integer column to find its values'
types (msgspec decodes nothing else into that field). Why: `orjson.loads` per document and the
columns taken from its dicts were half of the batch's cost (bench/RESULTS.md, "Bulk bodies decoded
by the mapping (session 16)"). A body the typed decoder refuses (a new field, a null, an array, a number for a
keyword ...) takes the dict path above, so both give the same batch or the same None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
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
_UNSET = msgspec.UNSET
#: The Python type of every value msgspec decodes for a leaf of these JSON types (`_json_type`)
_FIXED: dict[Any, frozenset] = {str: frozenset({str}), int: frozenset({int})}
#: A struct field: (its name, its JSON key, the values' type set when fixed: `_FIXED`)
_Key = tuple[str, str, "frozenset | None"]
#: A column of an object's key: (the indices of the objects holding it, or None for all; their
#: values; the values' type set when the decoder fixed it, else None)
_Column = tuple[Rows, list, "frozenset | None"]


class _Fallback(Exception):
    """The batch needs the per-document parser."""


def parse_batch(mapping: Mapping, sources: list[bytes]) -> ParsedBatch | None:
    """The indexable values of every source, or None when they must be parsed one by one."""
    root = mapping.root
    if not sources or not root.enabled or mapping.join is not None:
        return None
    typed = _Typed.of(mapping)
    structs = typed.decode(sources) if typed is not None else None
    if structs is not None:
        reader: _Dicts | _Structs = _Structs(typed, sources)  # type: ignore[union-attr]
        objs: list = structs
    else:
        try:
            objs = list(map(orjson.loads, sources))
        except orjson.JSONDecodeError:
            return None
        if set(map(type, objs)) != {dict}:
            return None
        reader = _Dicts()
    batch = ParsedBatch(sources)
    try:
        _object(root, objs, None, batch, reader, ())
    except _Fallback:
        return None
    return batch


@dataclass(slots=True)
class _Typed:
    """A mapping's decoder of documents into structs (see the module's docstring), kept on the
    mapping for its version; the JSON key of each struct field, by struct class."""

    version: int
    root: ObjectMapper
    decoder: msgspec.json.Decoder | None
    #: (field name, JSON key, the values' one Python type when the struct fixes it) of each field
    keys: dict[type, list[_Key]]

    @staticmethod
    def of(mapping: Mapping) -> _Typed | None:
        """The mapping's typed decoder, made once per mapping version; None when a leaf of the
        mapping takes values of more than one JSON type (or any other shape)."""
        typed = mapping.batch_decoder
        if typed is None or typed.version != mapping.version or typed.root is not mapping.root:
            keys: dict[type, list[_Key]] = {}
            struct = _struct_of(mapping.root, keys)
            decoder = msgspec.json.Decoder(struct) if struct is not None else None
            typed = mapping.batch_decoder = _Typed(mapping.version, mapping.root, decoder, keys)
        return typed if typed.decoder is not None else None

    def decode(self, sources: list[bytes]) -> list | None:
        """A struct per source, or None when a source does not decode as the mapping types it
        (or holds a line break: the sources are decoded as the lines of one text)."""
        joined = b"\n".join(sources)
        if joined.count(b"\n") != len(sources) - 1:
            return None
        try:
            structs = self.decoder.decode_lines(joined)  # type: ignore[union-attr]
        except msgspec.DecodeError:  # (a `ValidationError` too)
            return None
        return structs if len(structs) == len(sources) else None  # (a blank line is skipped)


def _struct_of(mapper: ObjectMapper, keys: dict[type, list[_Key]]) -> type | None:
    """The struct class of an object's documents: a field per child, absent as UNSET, unknown
    keys refused; None when a child's JSON type is not fixed."""
    fields, kinds = [], []
    for i, (key, child) in enumerate(mapper.children.items()):
        kind: Any
        if child.leaf:
            kind = _json_type(child)
        elif not child.enabled:
            kind = Any  # whatever it holds is ignored
        elif child.type == "nested":
            kind = None
        else:
            kind = _struct_of(child, keys)
        if kind is None:
            return None
        fields.append((f"f{i}", kind | msgspec.UnsetType, msgspec.field(default=_UNSET, name=key)))
        kinds.append(kind)
    struct = msgspec.defstruct("Document", fields, forbid_unknown_fields=True)
    keys[struct] = [
        (name, key, _FIXED.get(kind))
        for (name, _, _), kind, key in zip(fields, kinds, mapper.children, strict=True)
    ]
    return struct


def _json_type(field: FieldType) -> Any:
    """The one JSON type of a leaf's values in the batch's plain case, or None."""
    if type(field) is not FieldType or field.copy_to:
        return None
    if field.kind == "text":
        return str if field.analyzer.standard else None
    if field.type == "keyword":
        return str
    if field.type in _INTEGER_TYPES:
        return int
    if field.type == "double":
        return int | float
    if field.formatter is not None and field.formatter.parses_iso:
        return str
    return None


class _Dicts:
    """The columns of objects decoded as dicts."""

    @staticmethod
    def columns(objs: list[dict], rows: Rows, path: tuple[str, ...]) -> dict[str, _Column]:
        return {key: (where, values, None) for key, (where, values) in _columns(objs).items()}

    @staticmethod
    def objects(values: list) -> bool:
        return set(map(type, values)) == {dict}


@dataclass(slots=True)
class _Structs:
    """The columns of objects decoded as structs (`_Typed`), keyed in the order the dict path
    gives them: the order of the first object holding them, so that fields are numbered alike in
    a segment whichever path parsed its documents."""

    typed: _Typed
    sources: list[bytes]

    def columns(self, objs: list, rows: Rows, path: tuple[str, ...]) -> dict[str, _Column]:
        found: dict[str, _Column] = {}
        for name, key, types in self.typed.keys[type(objs[0])]:
            values = list(map(attrgetter(name), objs))
            if not all(values) and _UNSET in values:  # (UNSET is false: `all` is the quick check)
                where = [i for i, value in enumerate(values) if value is not _UNSET]
                if not where:
                    continue
                found[key] = (where, [values[i] for i in where], types)
            else:
                found[key] = (None, values, types)
        order: dict[str, tuple[int, int]] = {}
        for first in sorted({0 if where is None else where[0] for where, _, _ in found.values()}):
            obj = orjson.loads(self.sources[first if rows is None else rows[first]])
            for key in path:
                obj = obj[key]
            for at, key in enumerate(obj):  # the keys first held by this object, in its order
                if key in found and key not in order:
                    order[key] = (first, at)
        return {key: found[key] for key in sorted(found, key=order.__getitem__)}

    @staticmethod
    def objects(values: list) -> bool:
        return True  # the decoder refused anything else


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


def _object(
    mapper: ObjectMapper,
    objs: list,
    rows: Rows,
    batch: ParsedBatch,
    reader: _Dicts | _Structs,
    path: tuple[str, ...],
) -> None:
    for key, (where, values, types) in reader.columns(objs, rows, path).items():
        child = mapper.children.get(key)
        if child is None:
            raise _Fallback
        child_rows = rows if where is None else where if rows is None else [rows[i] for i in where]
        if child.leaf:
            if child.copy_to:
                raise _Fallback
            _leaf(child, values, child_rows, batch, types)
        elif child.enabled:  # a disabled object ignores whatever it holds
            if child.type == "nested" or not reader.objects(values):
                raise _Fallback
            _object(child, values, child_rows, batch, reader, (*path, key))


def _leaf(field: FieldType, values: list, rows: Rows, batch: ParsedBatch, fixed: frozenset | None) -> None:
    """`fixed`: the values' one type when the typed decoder fixed it (no pass over them to find it)."""
    types = set(map(type, values)) if fixed is None else fixed
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
        _leaf(sub, values, rows, batch, fixed)


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
