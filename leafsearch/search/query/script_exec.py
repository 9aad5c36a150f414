"""Running a search's scripts on a segment's documents: the `script` query, `script_score`,
`_script` sorts and aggregation scripts (`evaluate`, over the candidates of a segment), and
`script_fields` (per hit of a page, with `params['_source']` beside `doc`).

The script is compiled once per source (scripts/service.py). One that is a doc-values
expression runs over numpy columns (scripts/vector.py): the first value and value count of each
numeric field it names, for every candidate, in a few array operations. Any other runs once per
document, in a Python loop, after the doc values it reads (`doc['field']`, named by string
literals in its source) are gathered column by column, as `docvalue_fields` are
(search/fetch.py): a script query is then as slow as Elasticsearch warns it is, and is meant to
narrow what other clauses matched. Keywords read as strings, numbers as the longs or doubles of
their doc values, dates as epoch milliseconds, booleans as booleans."""

from __future__ import annotations

import re
from typing import Any, Protocol

import numpy as np
import orjson

from leafsearch.errors import ElasticError
from leafsearch.index import geo
from leafsearch.index.columns import KeywordColumn, NumericColumn, VectorColumn
from leafsearch.index.mapping import VectorField
from leafsearch.index.searcher import SegmentView
from leafsearch.request.query_dsl import ScriptSpec
from leafsearch.scripts import geo_values
from leafsearch.scripts.runtime import Doc, DocValues
from leafsearch.scripts.service import compile_source
from leafsearch.scripts.vector import Columns, vectorize
from leafsearch.search.fetch import _docvalue_numbers, _type_domain, fielddata_error

_DOC_FIELD = re.compile(r"""doc\s*\[\s*(['"])(.+?)\1\s*\]""")


class ScriptTarget(Protocol):
    """What a script reads of the index it runs on (a query context is one)."""

    mapping: Any
    index_name: str | None


def evaluate(
    source: str,
    params_json: bytes,
    view: SegmentView,
    target: ScriptTarget,
    docs: np.ndarray,
    scores: np.ndarray | None,
    value: np.ndarray | list[Any] | None = None,
) -> np.ndarray | list[Any]:
    """The script's value for each of `docs` (with `_score` from `scores`, and a value script's
    `_value` from `value`, when given; `docs` may repeat): a column of booleans or numbers when
    the script runs over columns (scripts/vector.py), else a list."""
    params = orjson.loads(params_json)
    vector = vectorize(source)
    if vector is not None and (scores is not None or not vector.reads_score):
        columns = _columns(view, target, docs, vector.fields)
        if columns is not None:
            float_scores = None if scores is None else scores.astype(np.float64)
            value_column = value if isinstance(value, np.ndarray) else None
            values, counts, points = columns
            found = vector.run(Columns(values, counts, params, float_scores, len(docs), value_column, points))
            if found is not None:
                return found
    script = compile_source(source)
    fields = {
        name: _values(view, target.mapping, target.index_name, docs, name) for name in _doc_fields(source)
    }
    results = []
    row = 0

    def lookup(name: str) -> DocValues | None:
        values = fields.get(name)
        if values is None:
            if name not in fields and target.mapping.field(name) is not None:  # a name built at run time
                fields[name] = values = _values(view, target.mapping, target.index_name, docs, name)
            else:
                return None
        return values[row]

    doc = Doc(lookup)
    score_list = scores.tolist() if scores is not None else None
    value_list = value.tolist() if isinstance(value, np.ndarray) else value
    for row in range(len(docs)):
        variables = {"params": params, "doc": doc}
        if score_list is not None:
            variables["_score"] = score_list[row]
        if value_list is not None:
            variables["_value"] = value_list[row]
        results.append(script.run(variables))
    return results


def _columns(
    view: SegmentView, target: ScriptTarget, docs: np.ndarray, names: tuple[str, ...]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]]] | None:
    """(first value, value count, first point) of each numeric or geo_point field for `docs`, as
    the per-document run reads them; None when a field is neither (the per-document run reads it
    or gives its error)."""
    values: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    points: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in names:
        ft = target.mapping.field(name)
        if ft is None or fielddata_error(name, ft, target.index_name) is not None:
            return None
        column = view.segment.column(name)
        if column is None:
            empty = np.zeros(len(docs), np.int64)
            if ft.type == "geo_point":
                points[name] = geo.decode(empty)
            else:
                values[name] = empty
            counts[name] = empty
            continue
        if not isinstance(column, NumericColumn):
            return None
        domain = _type_domain(ft.type, ft.kind)
        if domain == "unsigned_long":
            return None
        raw = column.doc_values.per_doc("min")[0][docs]
        counts[name] = column.doc_values.counts[docs]
        if ft.type == "geo_point":
            points[name] = geo.decode(raw)  # the smallest packed point is the first, as doc values sort
        elif ft.type == "scaled_float":
            values[name] = raw / ft.scaling_factor
        elif domain == "half_float":
            values[name] = raw.astype(np.float16).astype(np.float64)
        elif domain == "float":
            values[name] = raw.astype(np.float32).astype(np.float64)
        elif domain == "double":
            values[name] = raw.astype(np.float64)
        elif domain == "boolean":
            values[name] = raw != 0
        else:
            values[name] = raw.astype(np.int64)
    return values, counts, points


def script_fields(
    view: SegmentView,
    target: Any,
    doc: int,
    source: bytes | None,
    specs: tuple[tuple[str, ScriptSpec, bool], ...],
) -> dict[str, list[Any]]:
    """One hit's `script_fields`: each script's value as a list (a list value as it is); a failing
    script with `ignore_failure` is left out, any other failure is the search's error."""
    docs = np.array([doc], dtype=np.int64)
    mapping, index = target.mapping, target.index.name
    cache: dict[str, list[DocValues] | None] = {}

    def lookup(name: str) -> DocValues | None:
        if name not in cache:
            cache[name] = _values(view, mapping, index, docs, name)
        values = cache[name]
        return None if values is None else values[0]

    parsed = orjson.loads(source) if source is not None else None
    out: dict[str, list[Any]] = {}
    for name, spec, ignore_failure in specs:
        params = {**orjson.loads(spec.params_json), "_source": parsed}
        try:
            value = compile_source(spec.source).run({"params": params, "doc": Doc(lookup)})
        except ElasticError:
            if ignore_failure:
                continue
            raise
        out[name] = value if isinstance(value, list) else [value]
    return out


def _doc_fields(source: str) -> list[str]:
    return [name for _, name in _DOC_FIELD.findall(source)]


def _values(
    view: SegmentView, mapping: Any, index_name: str | None, docs: np.ndarray, name: str
) -> list[DocValues] | None:
    """Each document's `doc[name]` (None for a field the mapping lacks)."""
    ft = mapping.field(name)
    if ft is None:
        return None
    if isinstance(ft, VectorField):
        return [DocValues(name, v) for v in _vectors(view.segment.column(name), docs)]
    error = fielddata_error(name, ft, index_name)
    if error is not None:
        raise error
    column = view.segment.column(name)
    if isinstance(column, KeywordColumn):
        counts, ords = column.ords.values_of(docs)
        flat = [term.decode() for term in column.terms[ords].tolist()]
    elif isinstance(column, NumericColumn):
        counts, raw = column.doc_values.values_of(docs)
        if ft.type == "geo_point":
            return geo_values.doc_values(name, raw, counts)
        domain = _type_domain(ft.type, ft.kind)
        if domain in ("date", "date_nanos"):
            flat = raw.tolist()
        elif domain == "boolean":
            flat = (raw != 0).tolist()
        else:
            flat = _docvalue_numbers(ft, domain)(raw)
    elif ft.type == "geo_point":
        return geo_values.doc_values(name, np.zeros(0, np.int64), np.zeros(len(docs), np.int64))
    else:
        return [DocValues(name, []) for _ in range(len(docs))]
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends[:-1]] if ends else []
    return [DocValues(name, flat[a:b]) for a, b in zip(starts, ends, strict=True)]


def _vectors(column: Any, docs: np.ndarray) -> list[list[Any]]:
    """Each document's vector of a `dense_vector` column (as stored), or no value."""
    if not isinstance(column, VectorColumn) or not len(column.docs):
        return [[] for _ in range(len(docs))]
    rows = np.minimum(np.searchsorted(column.docs, docs), len(column.docs) - 1)
    held = column.docs[rows] == docs
    return [
        [np.asarray(column.vectors[r])] if h else []
        for r, h in zip(rows.tolist(), held.tolist(), strict=True)
    ]
