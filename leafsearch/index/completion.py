"""`completion` fields: the inputs the completion suggester finds by prefix (search/suggest.py).

Each input is kept as one term of a keyword column (so per segment the terms are a sorted array,
searched by prefix with `searchsorted`, and merges, deletes and snapshots need nothing of their
own). A term is the input's analysed form first, then what the suggester shows:

    FAMILY analysed \x1f original \x1f weight (10 digits)

FAMILY is `\x01` for the input itself, and `\x02 name \x1d value \x1d` for the input under one
value of a context (one term per value), so a query naming a context is also one prefix range. A
`geo` context's value is the geohash of a point at the context's `precision` (a point given with
the input, or read from the geo_point field its `path` names), so a query for a larger cell is a
prefix range too. The analysed form is the analyzer's tokens joined by `\x1e` (`preserve_separators`) or
run together. Elasticsearch reserves `\x00`, `\x1e` and `\x1f` in inputs; so do we, and `\x1d`
in context values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from leafsearch.common.json_paths import path_values
from leafsearch.index import geo
from leafsearch.index.feature_fields import as_sent
from leafsearch.index.mapping import FieldType, _FieldError, _flat, _Malformed, _MappingError
from leafsearch.index.parsed import ParsedDoc

PLAIN = b"\x01"
IN_CONTEXT = b"\x02"
CONTEXT_SEP = "\x1d"
TOKEN_SEP = "\x1e"
PART_SEP = "\x1f"
_RESERVED = {"\x00": "\\u0000", "\x1e": "\\u001e", "\x1f": "\\u001f"}
_MAX_WEIGHT = 2**31 - 1
DEFAULTS = {
    "analyzer": "simple",
    "preserve_separators": True,
    "preserve_position_increments": True,
    "max_input_length": 50,
}


#: A geo context's geohash length when its mapping names none (Elasticsearch's).
DEFAULT_GEO_PRECISION = 6


@dataclass(frozen=True, slots=True)
class ContextMapping:
    """One context of a completion field: `category` or `geo`, read from the source at `path`
    when there is one; a geo context indexes geohashes of `precision` characters."""

    kind: str
    path: str | None
    precision: int = DEFAULT_GEO_PRECISION


def geohash(lat: float, lon: float, precision: int) -> str:
    """The geohash of a point's cell at `precision` characters."""
    cell = geo.geohash_cells(np.array([lat]), np.array([lon]), precision)[0]
    return geo.geohash_text(int(cell), precision)


def geohash_neighbours(cell: str) -> list[str]:
    """The (up to 8) cells of the same precision around a geohash cell; none past a pole, and
    across the antimeridian on the other side (Geohash.addNeighbors)."""
    lat_lo, lat_hi, lon_lo, lon_hi = geo.geohash_bounds(cell)
    height, width = lat_hi - lat_lo, lon_hi - lon_lo
    center_lat, center_lon = (lat_lo + lat_hi) / 2, (lon_lo + lon_hi) / 2
    out = []
    for dy in (-1, 0, 1):
        lat = center_lat + dy * height
        if not -90 < lat < 90:
            continue
        for dx in (-1, 0, 1):
            if dx or dy:
                lon = (center_lon + dx * width + 180) % 360 - 180
                out.append(geohash(lat, lon, len(cell)))
    return out


def analysed(analyzer: Any, text: str, preserve_separators: bool) -> str:
    """An input or a prefix as the suggester compares them: the analyzer's tokens, joined."""
    return (TOKEN_SEP if preserve_separators else "").join(analyzer.terms(text))


def context_key(name: str, value: str) -> bytes:
    return IN_CONTEXT + f"{name}{CONTEXT_SEP}{value}{CONTEXT_SEP}".encode()


def term_context(term: bytes) -> dict[str, list[str]]:
    """{name: [value]} of a term under a context (what an option shows)."""
    name, value, _ = term[len(IN_CONTEXT) :].decode().split(CONTEXT_SEP, 2)
    return {name: [value]}


def split_term(term: bytes) -> tuple[bytes, str, int]:
    """(family and analysed form, original input, weight) of a stored term."""
    head, original, weight = term.rsplit(PART_SEP.encode(), 2)
    return head, original.decode(), int(weight)


class CompletionField(FieldType):
    """A `completion` field: inputs with weights and category contexts."""

    __slots__ = ("contexts", "max_input_length", "preserve_separators")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for key, value in DEFAULTS.items():
            self.params.setdefault(key, value)
        self.doc_values = False
        self.max_input_length: int = self.params["max_input_length"]
        self.preserve_separators: bool = self.params["preserve_separators"]
        self.contexts: dict[str, ContextMapping] = _contexts(self.params.get("contexts"), self.name)
        self.parse = self._parse_completion
        self.convert = as_sent

    def bind(self, mapping: Any, analyzer: Callable[[str], Any]) -> None:
        """The mapping's hook: this field's analyzers from the index's analysis."""
        self.analyzer = analyzer(self.params["analyzer"])
        self.search_analyzer = analyzer(self.params.get("search_analyzer", self.params["analyzer"]))

    def _parse_completion(self, value: Any, doc: ParsedDoc) -> None:
        terms: list[str] = []
        for entry in _flat(value) if type(value) is list else (value,):
            if entry is None:
                continue
            if type(entry) is str:
                self._add(terms, [entry], 1, {}, doc)
            elif type(entry) is dict:
                inputs, weight, contexts = self._entry(entry)
                self._add(terms, inputs, weight, contexts, doc)
            else:
                message = (
                    f"failed to parse [{self.path}]: expected text or object, but got {type(entry).__name__}"
                )
                raise _FieldError(self, entry, _Malformed(message))
        if terms:
            doc.keyword.setdefault(self.path, []).extend(terms)

    def _entry(self, entry: dict) -> tuple[list[str], int, dict[str, list[str]]]:
        inputs: list[str] = []
        weight = 1
        contexts: dict[str, list[str]] = {}
        for key, v in entry.items():
            if key == "input":
                values = _flat(v) if type(v) is list else [v]
                if not all(type(x) is str for x in values):
                    raise _FieldError(self, v, _Malformed("input array must have string values"))
                inputs.extend(values)
            elif key == "weight":
                weight = _weight(v, self)
            elif key == "contexts":
                if type(v) is not dict:
                    raise _FieldError(self, v, _Malformed("contexts must be an object"))
                for name, values in v.items():
                    spec = self.contexts.get(name)
                    if spec is None:
                        raise _FieldError(self, v, _Malformed(f"context [{name}] is not defined"))
                    if spec.kind == "geo":
                        contexts[name] = self._geohashes(values, spec.precision)
                    else:
                        listed = values if type(values) is list else [values]
                        contexts[name] = [_context_value(x, self) for x in listed if x is not None]
            else:
                message = f"unknown field name [{key}], must be one of [input, weight, contexts]"
                raise _FieldError(self, entry, _Malformed(message))
        return inputs, weight, contexts

    def _add(
        self, terms: list[str], inputs: list[str], weight: int, contexts: dict[str, list[str]], doc: ParsedDoc
    ) -> None:
        contexts = {**self._path_contexts(doc), **contexts} if self.contexts else contexts
        for text in inputs:
            bad = next((c for c in text if c in _RESERVED), None)
            if bad is not None:
                message = f"Illegal input [{_RESERVED[bad]}] reserved character found in input [{text}]"
                raise _FieldError(self, text, _Malformed(message))
            text = text[: self.max_input_length]
            form = analysed(self.analyzer, text, self.preserve_separators)
            tail = f"{form}{PART_SEP}{text}{PART_SEP}{weight:010d}"
            terms.append(PLAIN.decode() + tail)
            for name, values in contexts.items():
                terms.extend(context_key(name, value).decode() + tail for value in values)

    def _geohashes(self, value: Any, precision: int) -> list[str]:
        """A geo context's values given with an input (GeoContextMapping): a geohash (cut to the
        precision), a point in any geo_point form, or an array of them."""
        if type(value) is str:
            return [_context_value(value, self)[:precision]]
        single = type(value) is not list or bool(value and type(value[0]) in (int, float))
        out = []
        for point in (value,) if single else value:
            try:
                lat, lon = geo.parse_point(point)
            except geo.GeoError as e:
                raise _FieldError(self, point, _Malformed(str(e))) from None
            problem = geo.point_problem(lat, lon, self.path)
            if problem is not None:
                raise _FieldError(self, point, _Malformed(problem))
            out.append(geohash(lat, lon, precision))
        return out

    def _path_contexts(self, doc: ParsedDoc) -> dict[str, list[str]]:
        """Context values read from other fields of the document (a context's `path`): a geo
        context's the cells of the points there, as the geo_point field indexed them."""
        paths = {name: spec for name, spec in self.contexts.items() if spec.path is not None}
        if not paths:
            return {}
        source = orjson.loads(doc.source)
        out = {}
        for name, spec in paths.items():
            assert spec.path is not None
            if spec.kind == "geo":
                points = geo.source_points(list(path_values(source, spec.path, whole=True)))
                out[name] = [geohash(*geo.quantize(lat, lon), spec.precision) for lat, lon in points]
            else:
                out[name] = [_context_value(x, self) for x in path_values(source, spec.path)]
        return out


def _weight(value: Any, field: CompletionField) -> int:
    if type(value) is bool or type(value) not in (int, float, str):
        raise _FieldError(field, value, _Malformed("weight must be a number or string"))
    try:
        number = float(value) if type(value) is not int else value
    except ValueError:
        raise _FieldError(field, value, _Malformed(f"weight must be a number, but was [{value}]")) from None
    if type(number) is float:
        if not number.is_integer():
            raise _FieldError(field, value, _Malformed(f"weight must be an integer, but was [{value}]"))
        number = int(number)
    if not 0 <= number <= _MAX_WEIGHT:
        message = f"weight must be in the interval [0..{_MAX_WEIGHT}], but was [{value}]"
        raise _FieldError(field, value, _Malformed(message))
    return number


def _context_value(value: Any, field: CompletionField) -> str:
    if type(value) not in (str, int, float, bool):
        raise _FieldError(
            field, value, _Malformed("context array must have string, number or boolean values")
        )
    text = value if type(value) is str else orjson.dumps(value).decode()
    if any(c in text for c in (CONTEXT_SEP, TOKEN_SEP, PART_SEP, "\x00")):
        raise _FieldError(field, value, _Malformed(f"Illegal value [{text}]: reserved character found"))
    return text


def _contexts(spec: Any, name: str) -> dict[str, ContextMapping]:
    """A mapping's `contexts`, checked: `category` and `geo` contexts."""
    if spec is None:
        return {}
    items = spec if type(spec) is list else [spec]
    out: dict[str, ContextMapping] = {}
    for item in items:
        if type(item) is not dict:
            raise _MappingError(f"expected an object in [contexts] of field [{name}]")
        unknown = next((k for k in item if k not in ("name", "type", "path", "precision")), None)
        if unknown is not None:
            raise _MappingError(f"unknown field [{unknown}] in context mapping of field [{name}]")
        if "name" not in item:
            raise _MappingError("field [name] is missing")
        if "type" not in item:
            raise _MappingError("field [type] is missing")
        kind = item["type"]
        if kind not in ("category", "geo"):
            raise _MappingError(f"unknown context type[{kind}]")
        path = item.get("path")
        precision = DEFAULT_GEO_PRECISION
        if kind == "geo" and "precision" in item:
            try:
                precision = geo.geohash_precision(item["precision"])
            except geo.GeoError as e:
                raise _MappingError(str(e)) from None
        out[str(item["name"])] = ContextMapping(kind, None if path is None else str(path), precision)
    return out
