"""Synthetic `_source` (`"_source": {"mode": "synthetic"}`): the source a get or a search answers
rebuilt the way Elasticsearch rebuilds it from the fields' values, not the bytes sent.

What Elasticsearch's synthetic source looks like, and what this gives:

- objects are rebuilt from the mapping: a field's value sits under its objects (`{"a.b": 1}` is
  answered `{"a": {"b": 1}}`), an array of objects becomes one object holding arrays of its
  leaves, and an object with `subobjects: false` keeps its leaves' dotted names; keys are sorted;
- a field's values are its indexed values: numbers of a `float` (`half_float`) field at the
  field's precision, a `scaled_float` rounded to its factor, a date printed in the field's
  format, an address normalized; the values of a keyword, number, date, boolean or address field
  are sorted (a keyword's duplicates removed);
- one value is a value, not an array; nulls are left out;
- what has no indexed value is kept as sent: a `text` field's values, a keyword above
  `ignore_above`, a malformed value an `ignore_malformed` field kept, and unmapped fields (a
  `dynamic: false` object's, a disabled object's), as Elasticsearch keeps them in `_ignored_source`.

The stored bytes are the original document (the translog replays them and a mapping change can
re-derive everything); only what leaves a get or a search is rebuilt, a document at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from leafsearch.index import geo, ip, unsigned_long
from leafsearch.index.mapping import FieldType, Mapping, ObjectMapper
from leafsearch.index.range_fields import RANGE_TYPES, shown_interval

_SORTED = frozenset(
    {"keyword", "long", "integer", "short", "byte", "double", "float", "half_float", "scaled_float"}
    | {"date", "date_nanos", "boolean", "ip", "unsigned_long"}
    | RANGE_TYPES  # by lower bound, then upper: their terms' order
)


def is_synthetic(mapping: Mapping, settings: dict[str, Any]) -> bool:
    """Whether an index answers synthetic sources: `index.mapping.source.mode`, else the
    mapping's `_source.mode`."""
    mode = settings.get("index.mapping.source.mode") or mapping.source.get("mode")
    return mode == "synthetic"


def synthesize(mapping: Mapping, source: bytes) -> bytes:
    """The synthetic source of a stored source (Elasticsearch's shape, see the module)."""
    values: dict[str, list[Any]] = {}
    fields = mapping.fields().items()
    ranges = {path for path, f in fields if f.type in RANGE_TYPES or f.type == "geo_point"}
    points = {path for path, f in fields if f.type == "geo_point"}
    _leaves(orjson.loads(source), "", values, ranges, points)
    out: dict[str, Any] = {}
    for path, raw in values.items():
        field = mapping.field(path)
        kept = _field_values(field, raw) if field is not None else [v for v in raw if v is not None]
        if kept:
            _place(out, _key_path(mapping.root, path), kept[0] if len(kept) == 1 else kept)
    return orjson.dumps(_sorted(out))


def _leaves(
    node: Any, prefix: str, out: dict[str, list[Any]], ranges: set[str], points: set[str] = frozenset()
) -> None:
    """Every leaf value by full dotted path, arrays (of objects too) walked through, a range or
    geo field's objects being its values (a geo field's arrays too: `[lon, lat]`); recursive,
    bounded by the depth the document parser let the stored source have."""
    if type(node) is dict and prefix not in ranges:
        for key, value in node.items():
            _leaves(value, f"{prefix}.{key}" if prefix else key, out, ranges, points)
    elif type(node) is list and prefix not in points:
        for item in node:
            _leaves(item, prefix, out, ranges, points)
    else:
        out.setdefault(prefix, []).append(node)


def _field_values(field: FieldType, raw: list[Any]) -> list[Any]:
    """A mapped field's values as its synthetic source answers them."""
    if field.type == "geo_point":  # its doc values: sorted, as `{"lat", "lon"}`
        packed = np.array(sorted(geo.encode(*p) for p in geo.source_points(raw, field.null_value)), np.int64)
        return [{"lat": a, "lon": o} for a, o in zip(*(c.tolist() for c in geo.decode(packed)), strict=True)]
    indexed: list[Any] = []
    kept: list[Any] = []  # values with nothing indexed: answered as sent, after the others
    for value in raw:
        if value is None:
            continue
        if field.type == "text":
            kept.append(value)
            continue
        try:
            stored = field.convert(value)
        except Exception:  # noqa: BLE001 - a malformed value ignore_malformed kept in the source
            kept.append(value)
            continue
        if stored is None:  # a keyword above `ignore_above`
            kept.append(value)
        else:
            indexed.append(stored)
    if field.type in _SORTED:
        indexed = sorted(set(indexed)) if field.type == "keyword" else sorted(indexed)
    return [_shown(field, v) for v in indexed] + kept


def _shown(field: FieldType, stored: Any) -> Any:
    """An indexed value as JSON: the way Elasticsearch prints the field's doc value."""
    kind = field.type
    if kind in RANGE_TYPES:
        return shown_interval(kind, stored, field.formatter.format if field.formatter else None)
    if kind in ("date", "date_nanos"):
        return field.formatter.format(stored, nanos=kind == "date_nanos")  # type: ignore[union-attr]
    if kind == "float":
        return float(str(np.float32(stored)))
    if kind == "half_float":
        return float(str(np.float16(stored)))
    if kind == "scaled_float":
        return stored / field.scaling_factor
    if kind == "boolean":
        return bool(stored)
    if kind == "ip":
        return ip.decode(stored)
    if kind == "unsigned_long":
        return unsigned_long.to_unsigned(stored)
    return stored


def _key_path(root: ObjectMapper, path: str) -> list[str]:
    """The keys a field's value sits under: one per object of the mapping, the rest of the name
    as one key under an object without subobjects; an unmapped path splits at every dot."""
    parts = path.split(".")
    keys: list[str] = []
    mapper: ObjectMapper | None = root
    i = 0
    while i < len(parts):
        if mapper is not None and mapper.params.get("subobjects") is False:
            keys.append(".".join(parts[i:]))
            break
        child = mapper.children.get(parts[i]) if mapper is not None else None
        keys.append(parts[i])
        mapper = child if isinstance(child, ObjectMapper) else None
        i += 1
    return keys


def _place(out: dict[str, Any], keys: list[str], value: Any) -> None:
    node = out
    for key in keys[:-1]:
        child = node.get(key)
        if type(child) is not dict:
            child = node[key] = {}
        node = child
    node[keys[-1]] = value


def _sorted(node: dict[str, Any]) -> dict[str, Any]:
    return {k: _sorted(v) if type(v) is dict else v for k, v in sorted(node.items())}
