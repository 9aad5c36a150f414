"""Column evaluation gives exactly what the per-document run gives, or declines (None) so the
per-document run answers, errors included."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from leafsearch.index import geo
from leafsearch.scripts import geo_values
from leafsearch.scripts.painless import CompiledScript
from leafsearch.scripts.runtime import Doc, DocValues, ScriptError
from leafsearch.scripts.vector import Columns, vectorize

N = 200
RNG = np.random.default_rng(7)
LONGS = RNG.integers(-50, 50, N)
DOUBLES = RNG.normal(0, 10, N)
SCORES = RNG.random(N).astype(np.float32).astype(np.float64)
PARAMS = {"w": 2, "p": 1.5, "flag": True, "name": "x", "zero": 0}


def per_document(source: str, longs: np.ndarray, counts: np.ndarray) -> list[Any]:
    script = CompiledScript(source)
    out = []
    for row in range(N):
        fields = {
            "n": DocValues("n", [int(longs[row])] if counts[row] else []),
            "d": DocValues("d", [float(DOUBLES[row])]),
        }
        doc = Doc(fields.get)
        out.append(script.run({"params": PARAMS, "doc": doc, "_score": float(SCORES[row])}))
    return out


def columns(longs: np.ndarray, counts: np.ndarray) -> Columns:
    return Columns({"n": longs, "d": DOUBLES}, {"n": counts, "d": np.ones(N, np.int64)}, PARAMS, SCORES, N)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and type(a) is type(b)


@pytest.mark.parametrize(
    "source",
    [
        "doc['n'].value * 2 + 1",
        "return doc['n'].value / 7;",
        "doc['n'].value % 7",
        "doc['d'].value / 3",
        "doc['d'].value % 4",
        "Math.log(2 + Math.abs(doc['n'].value)) * params.w",
        "Math.sqrt(Math.abs(doc['d'].value)) + _score",
        "Math.max(doc['n'].value, params.w)",
        "Math.min(doc['d'].value, doc['n'].value)",
        "Math.pow(doc['d'].value, 2)",
        "Math.round(doc['d'].value)",
        "Math.floor(doc['d'].value) + Math.ceil(doc['d'].value)",
        "Math.signum(doc['d'].value)",
        "Math.log(doc['d'].value)",  # NaN for negatives
        "(int) doc['d'].value",
        "(double) doc['n'].value / 4",
        "doc['n'].value > 0 && doc['d'].value < params.p || !params.flag",
        "doc['n'].value == 3 || doc['n'].value != 4",
        "doc['n'].value > 0 ? doc['d'].value : params.w",
        "doc['n'].size() + (doc['n'].empty ? 1 : 0)",
        "-doc['n'].value + Math.PI",
        "params['w'] * _score",
        "1.0 / 0",
    ],
)
def test_a_column_run_equals_the_per_document_run(source: str) -> None:
    counts = np.ones(N, np.int64)
    vector = vectorize(source)
    assert vector is not None, source
    found = vector.run(columns(LONGS, counts))
    assert found is not None and found.shape == (N,)
    expected = per_document(source, LONGS, counts)
    got = found.tolist()
    assert all(same(e, g) or math.isclose(e, g, rel_tol=1e-12) for e, g in zip(expected, got, strict=True)), (
        source,
        [(e, g) for e, g in zip(expected, got, strict=True) if not same(e, g)][:5],
    )


@pytest.mark.parametrize(
    "source",
    [
        "def x = doc['n'].value; x * 2",  # statements: per document
        "doc['tag'].value == 'a'",  # strings
        "ctx._source.n",
        "params.name.length()",
        "doc['n'].value; doc['n'].value",
    ],
)
def test_what_is_not_one_column_expression_runs_per_document(source: str) -> None:
    assert vectorize(source) is None


@pytest.mark.parametrize(
    "source",
    [
        "doc['n'].value / params.zero",  # Java's ArithmeticException comes from the per-document run
        "doc['n'].value + 1 > 0 && params.name",  # && on a string
        "params.name * 2",
        "params.missing + 1",
    ],
)
def test_a_column_run_declines_where_the_per_document_run_fails(source: str) -> None:
    counts = np.ones(N, np.int64)
    vector = vectorize(source)
    assert vector is not None
    assert vector.run(columns(LONGS, counts)) is None
    with pytest.raises(ScriptError):
        per_document(source, LONGS, counts)


def test_a_document_without_a_value_sends_value_to_the_per_document_run() -> None:
    counts = np.ones(N, np.int64)
    counts[5] = 0
    vector = vectorize("doc['n'].value + 1")
    assert vector is not None and vector.run(columns(LONGS, counts)) is None
    with pytest.raises(ScriptError, match="runtime error"):
        per_document("doc['n'].value + 1", LONGS, counts)
    # `.size()` and `.empty` read the counts, which every document has.
    sized = vectorize("doc['n'].size() == 0 ? -1 : doc['d'].value")
    assert sized is not None
    assert sized.run(columns(LONGS, counts)).tolist()[5] == -1


GEO_PACKED = np.array(
    [
        geo.encode(float(a), float(o))
        for a, o in zip(RNG.uniform(-90, 90, N), RNG.uniform(-180, 180, N), strict=True)
    ]
)


@pytest.mark.parametrize(
    "source",
    [
        "doc['g'].lat",
        "doc['g'].value.lon + doc['g'].getLat()",
        "doc['g'].arcDistance(params.p, 10)",
        "doc['g'].planeDistance(-3, params.w) / 1000.0",
        "doc['g'].arcDistanceWithDefault(params.p, 10, -1) > 5000000",
    ],
)
def test_geo_point_columns_equal_the_per_document_run(source: str) -> None:
    """`doc['g']` of a geo_point: its first point's coordinates and distances, over columns."""
    counts = (np.arange(N) % 5 != 0).astype(np.int64)
    with_default = "WithDefault" in source
    if not with_default:
        counts[:] = 1
    script = vectorize(source)
    assert script is not None
    lat, lon = geo.decode(GEO_PACKED)
    found = script.run(Columns({}, {"g": counts}, PARAMS, None, N, points={"g": (lat, lon)}))
    assert found is not None
    compiled = CompiledScript(source)
    values = geo_values.doc_values("g", GEO_PACKED[counts > 0], counts)
    expected = [compiled.run({"params": PARAMS, "doc": Doc({"g": values[row]}.get)}) for row in range(N)]
    assert found.tolist() == pytest.approx(expected, rel=1e-12)
    if not with_default:  # a document without a point: the per-document run gives the error
        counts[3] = 0
        assert script.run(Columns({}, {"g": counts}, PARAMS, None, N, points={"g": (lat, lon)})) is None
