"""Batch parsing (`mapping_batch`, `analysis.analyze_flat`, `iso_columns`) equals per-document parsing."""

from __future__ import annotations

import random

import orjson
import pytest
from inprocess import count

from leafsearch.index.analysis import analyze, analyze_flat
from leafsearch.index.dates import DateFormatter
from leafsearch.index.iso_columns import iso_millis
from leafsearch.index.mapping import Mapping
from leafsearch.index.mapping_batch import parse_batch

MAPPING = {
    "properties": {
        "@timestamp": {"type": "date"},
        "nanos": {"type": "date_nanos"},
        "tag": {"type": "keyword", "ignore_above": 4},
        "lower": {"type": "keyword", "normalizer": "lowercase"},
        "n": {"type": "integer"},
        "f": {"type": "float"},
        "d": {"type": "double"},
        "ok": {"type": "boolean"},
        "msg": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "obj": {"properties": {"x": {"type": "long"}, "t": {"type": "text"}}},
        "off": {"type": "object", "enabled": False},
        "loc": {"type": "geo_point"},
    }
}


def _per_document(mapping: Mapping, sources: list[bytes]) -> list[dict]:
    out = []
    for source in sources:
        parsed = mapping.parse_document(source, "1")
        doc = {kind: dict(getattr(parsed, kind)) for kind in ("keyword", "long", "double")}
        doc["text"] = {path: tokens for path, (tokens, _) in parsed.text.items()}
        out.append(doc)
    return out


def _expand(batch, n: int) -> list[dict]:
    docs: list[dict] = [{"text": {}, "keyword": {}, "long": {}, "double": {}} for _ in range(n)]
    for kind in ("text", "keyword", "long", "double"):
        for path, (rows, values) in getattr(batch, kind).items():
            for row, value in zip(range(n) if rows is None else rows, values, strict=True):
                docs[row][kind][path] = analyze(value) if kind == "text" else [value]
    return docs


@pytest.mark.parametrize(
    "docs",
    [
        [{"@timestamp": "2024-01-01T00:00:00.123Z", "tag": "ab", "n": 1, "msg": "Hello World"}] * 3,
        [{"tag": "abcdef", "n": 5, "d": 1.5, "f": 1.1}, {"tag": 12, "ok": "true", "lower": "AbC"}],
        [{"msg": 42, "obj": {"x": 2, "t": "Don't stop"}}, {"obj": {"t": "x.y z"}, "off": [1, {"a": 2}]}],
        [
            {"@timestamp": "2024-01-01", "nanos": "2024-02-29T23:59:59.999Z"},
            {"@timestamp": 1_700_000_000_000},
        ],
        [{"@timestamp": "1960-05-01T00:00:00.000Z", "n": -7}, {}],
        [{"loc": {"lat": 1.5, "lon": 2}}, {"loc": [2, 1.5, 3]}, {"loc": "1.5,2"}, {"loc": "s0"}, {"n": 1}],
        [{"loc": "POINT (2 1.5)"}, {"loc": {"type": "Point", "coordinates": [2, 1.5]}}],
    ],
)
def test_a_batch_parses_as_its_documents_do(docs):
    mapping = Mapping.from_body(MAPPING)
    sources = [orjson.dumps(doc) for doc in docs]
    batch = parse_batch(mapping, sources)
    assert batch is not None
    assert _expand(batch, len(sources)) == _per_document(mapping, sources)


@pytest.mark.parametrize(
    "doc",
    [
        {"new_field": 1},  # dynamic mapping
        {"tag": None},  # null
        {"tag": ["a", "b"]},  # array
        {"n": 2**40},  # refused value
        {"nanos": "1960-01-01T00:00:00.000Z"},  # refused value
        {"obj": 3},  # concrete value for an object
        {"obj.x": 3},  # dotted key
        {"loc": [[1, 2], [3, 4]]},  # several points
        {"loc": {"lat": 99, "lon": 0}},  # refused point
        {"loc": []},  # no point
    ],
)
def test_anything_else_is_left_to_the_per_document_parser(doc):
    mapping = Mapping.from_body(MAPPING)
    assert parse_batch(mapping, [b'{"tag":"a"}', orjson.dumps(doc)]) is None
    assert mapping.version == Mapping.from_body(MAPPING).version


def _flat(token_lists: list[list[str]]) -> tuple[list[str], list[int]]:
    return [token for tokens in token_lists for token in tokens], [len(tokens) for tokens in token_lists]


def test_analyze_flat_equals_analyze():
    """Random texts, the separator of the joined batch (\x01) and over-long tokens among them."""
    rng = random.Random(0)
    alphabet = "abcXYZ019 _-.,;:'\t\n\x01\x02!é"
    for _ in range(2000):
        texts = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(1, 6))
        ]
        tokens, counts = analyze_flat(texts)
        assert (tokens.strings(), counts.tolist()) == _flat([analyze(t) for t in texts])
    for texts in (["a" * 300, "b"], ["", "", "x y"], ["a b", ""], [""]):
        tokens, counts = analyze_flat(texts)
        assert (tokens.strings(), counts.tolist()) == _flat([analyze(t) for t in texts])


def test_iso_millis_equals_the_date_parser():
    formatter = DateFormatter("strict_date_optional_time||epoch_millis")
    rng = random.Random(1)
    values = [
        f"{rng.choice([1, 1600, 1900, 1969, 2000, 2024, 9999]):04d}-{rng.randint(1, 12):02d}-"
        f"{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
        f"{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"
        for _ in range(5000)
    ] + ["2024-02-29T12:00:00.000Z", "2000-02-29T00:00:00.000Z"]
    assert iso_millis(values).tolist() == [formatter.parse(v) for v in values]
    for bad in ["2023-02-29T00:00:00.000Z", "0000-01-01T00:00:00.000Z", "2024-01-01T24:00:00.000Z",
                "2024-01-01 00:00:00.000Z", "2024-01-0xT00:00:00.000Z", "2024-01-01T00:00:00Z"]:  # fmt: skip
        assert iso_millis(values[:2] + [bad]) is None


def test_a_bulk_parsed_as_a_batch_answers_item_by_item(tmp_path):
    from leafsearch.node.node import Node

    with Node(tmp_path, background=False) as node:
        body = (
            b'{"index":{"_index":"logs","_id":"a"}}\n{"n":1}\n'
            b'{"create":{"_index":"logs","_id":"a"}}\n{"n":2}\n'
            b'{"index":{"_index":"logs","_id":"a"}}\n{"n":3}\n'
            b'{"index":{"_index":"logs"}}\n{"n":4}\n'
        )
        node.bulk(b'{"index":{"_index":"logs","_id":"seed"}}\n{"n":0}\n')  # maps `n`
        items = node.bulk(body)["items"]
        assert [next(iter(i.values()))["status"] for i in items] == [201, 409, 200, 201]
        assert [items[0]["index"]["_version"], items[2]["index"]["_version"]] == [1, 2]
        assert node.get_doc("logs", "a")["_source"].parsed() == {"n": 3}
        node.indices["logs"].refresh()
        assert count(node, "logs", None, {})["count"] == 3


#: Every leaf of a fixed JSON type: documents are decoded into structs typed by the mapping.
TYPED = {
    "properties": {
        "@timestamp": {"type": "date"},
        "tag": {"type": "keyword", "ignore_above": 6},
        "n": {"type": "integer"},
        "big": {"type": "long"},
        "d": {"type": "double"},
        "msg": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "obj": {
            "properties": {
                "x": {"type": "long"},
                "t": {"type": "text"},
                "in": {"properties": {"k": {"type": "keyword"}}},
            }
        },
        "off": {"type": "object", "enabled": False},
    }
}


def _typed_and_dicts(monkeypatch, sources: list[bytes]):
    """(the batch of the typed decoder, the batch of the dict path) of the same sources."""
    from leafsearch.index import mapping_batch

    typed = parse_batch(Mapping.from_body(TYPED), sources)
    with monkeypatch.context() as patch:
        patch.setattr(mapping_batch._Typed, "of", staticmethod(lambda mapping: None))
        dicts = parse_batch(Mapping.from_body(TYPED), sources)
    return typed, dicts


def _same(a, b) -> None:
    """Equal batches (rows None standing for every row), their columns in the same order (a
    segment numbers its fields in it)."""
    n = len(a.sources)
    assert a.sources == b.sources
    for kind in ("text", "keyword", "long", "double"):
        columns = [
            [
                (path, list(range(n)) if rows is None else rows, values)
                for path, (rows, values) in getattr(batch, kind).items()
            ]
            for batch in (a, b)
        ]
        assert columns[0] == columns[1]


def test_the_mapping_types_the_decoding_of_its_plain_documents():
    from leafsearch.index.mapping_batch import _Typed

    assert _Typed.of(Mapping.from_body(TYPED)) is not None
    assert _Typed.of(Mapping.from_body(MAPPING)) is None  # geo_point, float, boolean: dicts


@pytest.mark.parametrize(
    "docs",
    [
        [{"@timestamp": "2024-01-01T00:00:00.123Z", "tag": "ab", "n": 1, "msg": "Hello World"}] * 3,
        [{"msg": "", "tag": ""}, {"msg": '日本 😀 Ünï \u0000 \\ " \n', "tag": "é\u0001"}],
        [{"tag": "abcdefgh"}, {"tag": "ab"}],  # ignore_above drops the first
        [{"n": 3, "tag": "a"}, {"tag": "b", "n": 4}, {"d": 2, "msg": "x"}, {"d": 2.5}],  # key orders
        [{"msg": "x", "tag": "a", "big": 1, "n": 2}, {"n": 1}],
        [{"n": 1}, {"msg": "x", "obj": {"in": {"k": "a"}, "x": 1}, "tag": "a"}, {"tag": "b", "big": 3}],
        [
            {"obj": {"x": 2, "t": "Don't stop", "in": {"k": "v"}}},
            {"obj": {"t": "x.y z"}, "off": [1, {"a": None}]},
        ],
        [{}, {"obj": {}}, {"obj": {"in": {}}, "n": -7}],
        [{"big": 2**63 - 1, "d": 1e308, "obj": {"t": "w " * 20_000}}],  # a huge field
        [{"@timestamp": "1960-05-01T00:00:00.000Z"}, {"@timestamp": "9999-12-31T23:59:59.999Z"}],
    ],
)
def test_typed_decoding_parses_as_the_documents_do(monkeypatch, docs):
    sources = [orjson.dumps(doc) for doc in docs]
    typed, dicts = _typed_and_dicts(monkeypatch, sources)
    assert typed is not None
    _same(typed, dicts)
    assert _expand(typed, len(sources)) == _per_document(Mapping.from_body(TYPED), sources)


def test_the_typed_columns_name_their_values_type_where_the_decoder_fixed_it():
    """`_leaf` takes a column's type set from the decoder instead of a pass over its values: it
    must be the values' own, and absent (scanned) where a JSON type has more than one Python
    type (a double's int or float)."""
    from leafsearch.index.mapping_batch import _Structs, _Typed

    mapping = Mapping.from_body(TYPED)
    typed = _Typed.of(mapping)
    docs = [
        {"@timestamp": "2024-01-01T00:00:00Z", "tag": "a", "n": -1, "big": 2**63 - 1, "d": 2, "msg": "x"},
        {"tag": "", "n": 0, "d": 2.5, "obj": {"x": 0, "t": "y", "in": {"k": "é"}}},
    ]
    sources = [orjson.dumps(doc) for doc in docs]
    structs = typed.decode(sources)
    reader = _Structs(typed, sources)
    columns = reader.columns(structs, None, ())
    inner = reader.columns([structs[1].f6], [1], ("obj",))  # (the struct's fields in mapping order)
    fixed = {key: types for key, (_, _, types) in [*columns.items(), *inner.items()]}
    assert fixed == {
        "@timestamp": {str}, "tag": {str}, "n": {int}, "big": {int}, "d": None, "msg": {str},
        "obj": None, "x": {int}, "t": {str}, "in": None,
    }  # fmt: skip
    for _, values, types in [*columns.values(), *inner.values()]:
        assert types is None or set(map(type, values)) == types


@pytest.mark.parametrize(
    "source",
    [
        b'{"tag": 12}',  # a number for a keyword: the dict path converts it
        b'{"n": "12"}',  # a string for an integer
        b'{"n": 1.0}',
        b'{"@timestamp": 1700000000000}',  # epoch millis
        b'{\n  "tag": "pretty",\n  "n": 1\n}',  # a document with line breaks
        b'  {"tag":"spaces"}  ',
        b'{"tag": "a", "n": 1, "tag": "b"}',  # a key twice: the last value counts, at the first place
    ],
)
def test_typed_decoding_refused_or_not_agrees_with_the_dict_path(monkeypatch, source):
    typed, dicts = _typed_and_dicts(monkeypatch, [b'{"tag":"a","n":0}', source])
    assert typed is not None
    _same(typed, dicts)


@pytest.mark.parametrize(
    "source",
    [
        b'{"new_field": 1}',  # dynamic mapping
        b'{"tag": null}',
        b'{"tag": ["a", "b"]}',
        b'{"n": 2147483648}',  # out of the integer's range
        b'{"big": 18446744073709551616}',  # beyond 64 bits
        b'{"obj": 3}',
        b'{"obj.x": 3}',  # dotted key
        b'{"tag": "\\ud800"}',  # a lone surrogate
        b'{"tag": "\xff"}',  # not UTF-8
        b'{"tag": "a"',  # malformed
        b'[{"tag": "a"}]',
        b"",
    ],
)
def test_what_neither_path_takes_is_left_to_the_per_document_parser(monkeypatch, source):
    typed, dicts = _typed_and_dicts(monkeypatch, [b'{"tag":"a"}', source])
    assert typed is None and dicts is None


def test_a_mapping_update_retypes_the_decoding():
    mapping = Mapping.from_body(TYPED)
    assert parse_batch(mapping, [b'{"extra":"a"}']) is None
    mapping.merge({"properties": {"extra": {"type": "keyword"}}})
    batch = parse_batch(mapping, [b'{"extra":"a"}'])
    assert batch is not None and batch.keyword == {"extra": (None, ["a"])}
