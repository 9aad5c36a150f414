"""Fetch-phase helpers: `_source` filtering, `fields`, `docvalue_fields`, sort values and their
way back in as `search_after` (exact to the nanosecond)."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from leafsearch.errors import ElasticError
from leafsearch.index.columns import DocValues, KeywordColumn, NumericColumn
from leafsearch.index.mapping import Mapping
from leafsearch.request.search_types import SortSpec, SourceFilter
from leafsearch.search.fetch import (
    docvalue_field_values,
    extract_fields,
    filter_source,
    format_sort_value,
    parse_search_after_value,
)

LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)

MAPPING = Mapping.from_body(
    {
        "properties": {
            "message": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 8}}},
            "tag": {"type": "keyword", "null_value": "none"},
            "count": {"type": "long"},
            "ratio": {"type": "double"},
            "weight": {"type": "float"},
            "half": {"type": "half_float"},
            "price": {"type": "scaled_float", "scaling_factor": 100},
            "ts": {"type": "date"},
            "ts_custom": {"type": "date", "format": "yyyy/MM/dd HH:mm:ss||epoch_millis"},
            "nanos": {"type": "date_nanos"},
            "flag": {"type": "boolean"},
            "hidden": {"type": "long", "doc_values": False},
            "user": {"properties": {"name": {"type": "keyword"}, "age": {"type": "integer"}}},
        }
    }
)


def ft(path: str):
    return MAPPING.field(path)


def raised(fn, *args) -> ElasticError:
    with pytest.raises(ElasticError) as info:
        fn(*args)
    return info.value


# ---------------------------------------------------------------------------------------------
# _source filtering

SOURCE = {
    "user": {"name": "kimchy", "age": 30, "address": {"city": "Berlin", "zip": "10115"}},
    "tags": ["a", "b"],
    "comments": [{"author": "x", "text": "hi"}, {"author": "y"}, {"text": "only text"}],
    "meta.version": 3,
    "title": "t",
}
RAW = orjson.dumps(SOURCE)


def filtered(includes=(), excludes=()):
    out = filter_source(RAW, SourceFilter(True, tuple(includes), tuple(excludes)))
    assert out is not None
    return orjson.loads(out)


def test_source_not_fetched_is_none_and_unfiltered_source_is_the_stored_bytes():
    assert filter_source(RAW, SourceFilter(fetch=False)) is None
    assert filter_source(RAW, SourceFilter()) is RAW


@pytest.mark.parametrize(
    ("includes", "excludes", "expected"),
    [
        (["user"], [], {"user": SOURCE["user"]}),
        (["user.name"], [], {"user": {"name": "kimchy"}}),
        (["user.*"], [], {"user": SOURCE["user"]}),
        (["*.city"], [], {"user": {"address": {"city": "Berlin"}}}),
        (["us*ci*"], [], {"user": {"address": {"city": "Berlin"}}}),
        (["comments.author"], [], {"comments": [{"author": "x"}, {"author": "y"}]}),
        (["tags"], [], {"tags": ["a", "b"]}),
        (["meta.version"], [], {"meta.version": 3}),
        (["meta"], [], {"meta.version": 3}),
        (["user.name.first"], [], {}),
        (["title", "tags"], [], {"tags": ["a", "b"], "title": "t"}),
        ([], ["user", "comments"], {"tags": ["a", "b"], "meta.version": 3, "title": "t"}),
        (["user"], ["user.address"], {"user": {"name": "kimchy", "age": 30}}),
        (["user"], ["*.zip"], {"user": {"name": "kimchy", "age": 30, "address": {"city": "Berlin"}}}),
        ([], ["user.*"], {"user": {}, **{k: v for k, v in SOURCE.items() if k != "user"}}),
        (["comments"], ["comments.text"], {"comments": [{"author": "x"}, {"author": "y"}]}),
        (["*"], ["*"], {}),
    ],
)
def test_source_filtering_follows_elasticsearch(includes, excludes, expected):
    assert filtered(includes, excludes) == expected


def test_filtered_source_keeps_the_document_key_order():
    assert list(filtered([], ["tags"])) == ["user", "comments", "meta.version", "title"]


# ---------------------------------------------------------------------------------------------
# fields


def test_fields_read_values_from_source_typed_by_the_mapping():
    source = {
        "message": ["short", "much too long"],
        "count": ["5", 6.9],
        "ratio": "0.25",
        "weight": 1.1,
        "half": 1.1,
        "price": 9.999,
        "flag": "true",
        "tag": None,
        "user": [{"name": "a", "age": "7"}, {"name": "b"}],
        "user.name": "c",
    }
    fields = extract_fields(source, MAPPING, [{"field": "*"}])
    assert fields == {
        "message": ["short", "much too long"],
        "message.keyword": ["short"],
        "count": [5, 6],
        "ratio": [0.25],
        "weight": [1.1],
        "half": [1.0996094],
        "price": [10.0],
        "flag": [True],
        "tag": ["none"],
        "user.age": [7],
        "user.name": ["a", "b", "c"],
    }


def test_fields_print_dates_in_the_mapping_format_or_the_requested_one():
    source = {
        "ts": 1_700_000_000_000,
        "ts_custom": "2024/01/02 03:04:05",
        "nanos": "2024-01-01T00:00:00.123456789Z",
    }
    assert extract_fields(source, MAPPING, [{"field": "ts*"}, {"field": "nanos"}]) == {
        "ts": ["2023-11-14T22:13:20.000Z"],
        "ts_custom": ["2024/01/02 03:04:05"],
        "nanos": ["2024-01-01T00:00:00.123456789Z"],
    }
    assert extract_fields(source, MAPPING, [{"field": "ts", "format": "yyyy-MM-dd"}]) == {
        "ts": ["2023-11-14"]
    }


def test_unmapped_fields_only_with_include_unmapped():
    source = {"extra": {"a": 1, "b": [2, 3]}, "count": 1}
    assert extract_fields(source, MAPPING, [{"field": "extra.*"}]) == {}
    assert extract_fields(source, MAPPING, [{"field": "extra.*", "include_unmapped": True}]) == {
        "extra.a": [1],
        "extra.b": [2, 3],
    }


def test_fields_format_only_for_dates():
    error = raised(extract_fields, {"count": 1}, MAPPING, [{"field": "count", "format": "0.0"}])
    assert (error.error_type, error.reason) == (
        "illegal_argument_exception",
        "Field [count] of type [long] doesn't support formats.",
    )


# ---------------------------------------------------------------------------------------------
# docvalue_fields


class _Segment:
    """One document's worth of columns, shaped as segment.column() returns them."""

    def __init__(self) -> None:
        one = lambda values: DocValues(np.asarray(values), 2, present=np.array([True, False]))  # noqa: E731
        self.columns = {
            "tag": KeywordColumn(
                np.array([b"alpha", b"beta", b"gamma"]),
                DocValues(np.array([0, 2, 1]), 2, offsets=np.array([0, 2, 3])),
            ),
            "count": NumericColumn("long", one([42, 0])),
            "weight": NumericColumn("double", one([float(np.float32(1.1)), 0.0])),
            "price": NumericColumn("long", one([1999, 0])),
            "ts": NumericColumn("long", one([1_700_000_000_000, 0])),
            "nanos": NumericColumn("long", one([1_704_067_200_123_456_789, 0])),
            "flag": NumericColumn("long", one([1, 0])),
        }

    def column(self, path: str):
        return self.columns.get(path)


SEGMENT = _Segment()


def test_docvalue_fields_render_as_elasticsearch_doc_values():
    specs = [{"field": f} for f in ("tag", "count", "weight", "price", "ts", "nanos", "flag", "user.name")]
    assert docvalue_field_values(SEGMENT, 0, MAPPING, specs, "idx") == {
        "tag": ["alpha", "gamma"],
        "count": [42],
        "weight": [1.100000023841858],
        "price": [19.99],
        "ts": ["2023-11-14T22:13:20.000Z"],
        "nanos": ["2024-01-01T00:00:00.123456789Z"],
        "flag": [True],
    }
    assert docvalue_field_values(SEGMENT, 1, MAPPING, [{"field": "count"}], "idx") == {}


def test_docvalue_fields_formats():
    specs = [
        {"field": "ts", "format": "epoch_millis"},
        {"field": "nanos", "format": "strict_date_optional_time"},
        {"field": "count", "format": "#,##0.00"},
    ]
    assert docvalue_field_values(SEGMENT, 0, MAPPING, specs, "idx") == {
        "ts": ["1700000000000"],
        "nanos": ["2024-01-01T00:00:00.123Z"],
        "count": ["42.00"],
    }


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (
            {"field": "message"},
            "Fielddata is disabled on [message] in [idx]. Text fields are not optimised for operations that "
            "require per-document field data",
        ),
        (
            {"field": "hidden"},
            "Can't load fielddata on [hidden] because fielddata is unsupported on fields of type [long]. "
            "Use doc values instead.",
        ),
        ({"field": "tag", "format": "x"}, "Field [tag] of type [keyword] does not support custom formats"),
    ],
)
def test_docvalue_fields_refusals(spec, reason):
    error = raised(docvalue_field_values, SEGMENT, 0, MAPPING, [spec], "idx")
    assert error.error_type == "illegal_argument_exception"
    assert error.reason.startswith(reason)


# ---------------------------------------------------------------------------------------------
# sort values


@pytest.mark.parametrize(
    ("path", "spec", "value", "expected"),
    [
        ("ts", SortSpec("ts", "asc"), 1_700_000_000_000, 1_700_000_000_000),
        (
            "ts",
            SortSpec("ts", "asc", format="strict_date_optional_time"),
            1_700_000_000_000,
            "2023-11-14T22:13:20.000Z",
        ),
        ("nanos", SortSpec("nanos", "asc"), 1_704_067_200_123_456_789, 1_704_067_200_123_456_789),
        (
            "nanos",
            SortSpec("nanos", "asc", format="strict_date_optional_time_nanos"),
            1_704_067_200_123_456_789,
            "2024-01-01T00:00:00.123456789Z",
        ),
        (
            "ts",
            SortSpec("ts", "asc", numeric_type="date_nanos", format="strict_date_optional_time_nanos"),
            1_700_000_000_000_000_001,
            "2023-11-14T22:13:20.000000001Z",
        ),
        ("weight", SortSpec("weight", "asc"), float(np.float32(1.1)), 1.1),
        ("ratio", SortSpec("ratio", "asc"), 0.1, 0.1),
        ("flag", SortSpec("flag", "asc"), 1, 1),
        ("tag", SortSpec("tag", "asc"), "alpha", "alpha"),
        (None, SortSpec("_score", "desc"), float(np.float32(0.2876821)), 0.2876821),
        (None, SortSpec("_shard_doc", "asc"), (3 << 32) | 17, (3 << 32) | 17),
    ],
)
def test_sort_values(path, spec, value, expected):
    rendered = format_sort_value(value, ft(path) if path else None, spec)
    assert rendered == expected and type(rendered) is type(expected)


@pytest.mark.parametrize(
    ("path", "spec", "expected"),
    [
        ("count", SortSpec("count", "asc"), LONG_MAX),
        ("count", SortSpec("count", "desc"), LONG_MIN),
        ("count", SortSpec("count", "asc", missing="_first"), LONG_MIN),
        ("count", SortSpec("count", "desc", missing="_first"), LONG_MAX),
        ("ts", SortSpec("ts", "asc"), LONG_MAX),
        ("ratio", SortSpec("ratio", "asc"), "Infinity"),
        ("weight", SortSpec("weight", "desc"), "-Infinity"),
        ("tag", SortSpec("tag", "asc"), None),
        ("count", SortSpec("count", "asc", missing=7), 7),
        ("count", SortSpec("count", "asc", missing="8"), 8),
        ("ratio", SortSpec("ratio", "asc", missing="0.5"), 0.5),
        ("tag", SortSpec("tag", "asc", missing="zzz"), "zzz"),
        (None, SortSpec("gone", "asc", unmapped_type="long"), LONG_MAX),
        (None, SortSpec("gone", "asc", unmapped_type="keyword"), None),
    ],
)
def test_missing_sort_values_render_as_lucene_sorted_them(path, spec, expected):
    assert format_sort_value(None, ft(path) if path else None, spec) == expected


@pytest.mark.parametrize(
    ("path", "spec", "error_type", "reason"),
    [
        (
            "tag",
            SortSpec("tag", "asc", format="yyyy"),
            "illegal_argument_exception",
            "Field [tag] of type [keyword] does not support custom formats",
        ),
        (
            "count",
            SortSpec("count", "asc", format="0.0"),
            "illegal_argument_exception",
            "require a date_time formatter; got [decimal]",
        ),
        (
            "tag",
            SortSpec("tag", "asc", numeric_type="long"),
            "query_shard_exception",
            "[numeric_type] option cannot be set on a non-numeric field, got keyword",
        ),
        (
            "count",
            SortSpec("count", "asc", numeric_type="date_nanos"),
            "illegal_argument_exception",
            "trying to convert a known date time formatter to a nanosecond one, wrong field used?",
        ),
    ],
)
def test_sort_value_refusals(path, spec, error_type, reason):
    error = raised(format_sort_value, 1, ft(path), spec)
    assert (error.error_type, error.reason, error.status) == (error_type, reason, 400)


# ---------------------------------------------------------------------------------------------
# search_after


@pytest.mark.parametrize(
    ("path", "spec", "value", "expected"),
    [
        ("nanos", SortSpec("nanos", "asc"), 1_704_067_200_123_456_789, 1_704_067_200_123_456_789),
        ("nanos", SortSpec("nanos", "asc"), "2024-01-01T00:00:00.123456789Z", 1_704_067_200_123_456_789),
        (
            "ts",
            SortSpec("ts", "asc", numeric_type="date_nanos"),
            "2023-11-14T22:13:20.000000001Z",
            1_700_000_000_000_000_001,
        ),
        ("ts", SortSpec("ts", "asc"), "2023-11-14T22:13:20.000Z", 1_700_000_000_000),
        ("ts_custom", SortSpec("ts_custom", "asc"), "2023/11/14 22:13:20", 1_700_000_000_000),
        ("ts", SortSpec("ts", "asc", format="dd.MM.yyyy"), "14.11.2023", 1_699_920_000_000),
        ("count", SortSpec("count", "asc"), 5.9, 5),
        ("count", SortSpec("count", "asc"), "12", 12),
        ("count", SortSpec("count", "asc"), "12.7", 12),
        ("count", SortSpec("count", "asc"), 2**70, LONG_MAX),
        ("ratio", SortSpec("ratio", "asc"), "0.5", 0.5),
        ("ratio", SortSpec("ratio", "asc"), 3, 3.0),
        ("weight", SortSpec("weight", "asc"), 1.1, float(np.float32(1.1))),
        ("flag", SortSpec("flag", "asc"), True, 1),
        ("flag", SortSpec("flag", "asc"), "false", 0),
        ("tag", SortSpec("tag", "asc"), 5, "5"),
        ("tag", SortSpec("tag", "asc"), True, "true"),
        ("tag", SortSpec("tag", "asc"), None, None),
        (None, SortSpec("_score", "desc"), 0.2876821, float(np.float32(0.2876821))),
        (None, SortSpec("_doc", "asc"), "17", 17),
        (None, SortSpec("_shard_doc", "asc"), (5 << 32) | 9, (5 << 32) | 9),
    ],
)
def test_search_after_values(path, spec, value, expected):
    parsed = parse_search_after_value(value, ft(path) if path else None, spec)
    assert parsed == expected and type(parsed) is type(expected)


@pytest.mark.parametrize(
    ("path", "spec", "value", "error_type", "reason"),
    [
        (
            "count",
            SortSpec("count", "asc"),
            "abc",
            "illegal_argument_exception",
            "Failed to parse search_after value for field [count].",
        ),
        (
            "count",
            SortSpec("count", "asc"),
            True,
            "illegal_argument_exception",
            "Failed to parse search_after value for field [count].",
        ),
        (
            "ratio",
            SortSpec("ratio", "asc"),
            "x",
            "illegal_argument_exception",
            "Failed to parse search_after value for field [ratio].",
        ),
        (
            None,
            SortSpec("_score", "desc"),
            "high",
            "illegal_argument_exception",
            "Failed to parse search_after value for field [null].",
        ),
        (
            "flag",
            SortSpec("flag", "asc"),
            "yes",
            "illegal_argument_exception",
            "Cannot parse boolean [yes], expected either [true] or [false]",
        ),
        (
            "ts",
            SortSpec("ts", "asc"),
            "tomorrow",
            "parse_exception",
            "failed to parse date field [tomorrow] with format [strict_date_optional_time||epoch_millis]: "
            "[failed to parse date field [tomorrow] with format [strict_date_optional_time||epoch_millis]]",
        ),
    ],
)
def test_search_after_refusals(path, spec, value, error_type, reason):
    error = raised(parse_search_after_value, value, ft(path) if path else None, spec)
    assert (error.error_type, error.reason, error.status) == (error_type, reason, 400)


def test_search_after_number_errors_carry_the_java_cause():
    error = raised(parse_search_after_value, "abc", ft("count"), SortSpec("count", "asc"))
    assert (error.caused_by.error_type, error.caused_by.reason) == (
        "number_format_exception",
        'For input string: "abc"',
    )


def test_search_after_refuses_now():
    error = raised(parse_search_after_value, "now-1d", ft("ts"), SortSpec("ts", "asc"))
    assert (error.error_type, error.status) == ("illegal_state_exception", 500)
    assert error.reason == "now() is not allowed in [search_after] key"


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_date_nanos_cursors_round_trip_exactly(nanos):
    for spec in (
        SortSpec("nanos", "asc"),
        SortSpec("nanos", "asc", format="strict_date_optional_time_nanos"),
    ):
        rendered = format_sort_value(nanos, ft("nanos"), spec)
        assert parse_search_after_value(rendered, ft("nanos"), spec) == nanos


@given(st.floats(min_value=0, max_value=100, allow_nan=False, width=32))
def test_score_cursors_round_trip_exactly(score):
    spec = SortSpec("_score", "desc")
    rendered = format_sort_value(float(score), None, spec)
    assert parse_search_after_value(orjson.loads(orjson.dumps(rendered)), None, spec) == float(score)


@pytest.mark.parametrize("pattern", ["#.0", "0.00", "#", "0", "000.#", "#.##", "$#.0 units", "00000"])
def test_integers_print_as_decimal_format_prints_them(pattern: str) -> None:
    """A page of integers takes the direct path; the same values through the `Decimal` path (one
    float among them forces it) print the same."""
    import random

    from leafsearch.search.fetch import _decimal_format

    render = _decimal_format(pattern)
    values = [random.Random(pattern).randint(-(10**7), 10**7) for _ in range(300)] + [0, 1, -1, 10, 7]
    assert render(values) == render([*values, 0.5])[:-1]
