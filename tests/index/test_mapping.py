"""Mappings: parsing and echoing them, dynamic mapping, document parsing and put-mapping merges."""

from __future__ import annotations

import copy

import orjson
import pytest

from leafsearch.errors import ElasticError
from leafsearch.index.mapping import Mapping
from leafsearch.index.parsed import ParsedDoc

KEYWORD_SUBFIELD = {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}


def parse(mapping: Mapping, doc: dict, doc_id: str = "1") -> ParsedDoc:
    return mapping.parse_document(orjson.dumps(doc), doc_id)


def refused(call) -> ElasticError:
    with pytest.raises(ElasticError) as e:
        call()
    return e.value


# -- mapping bodies --------------------------------------------------------------------------

RICH = {
    "dynamic": "strict",
    "date_detection": False,
    "_source": {"excludes": ["secret"]},
    "_routing": {"required": True},
    "_meta": {"owner": "team"},
    "dynamic_templates": [{"ids": {"match": "*_id", "mapping": {"type": "keyword"}}}],
    "properties": {
        "title": {
            "type": "text",
            "analyzer": "english",
            "fields": {"raw": {"type": "keyword", "ignore_above": 10}},
        },
        "count": {"type": "integer", "coerce": False},
        "price": {"type": "scaled_float", "scaling_factor": 100},
        "when": {"type": "date", "format": "yyyy-MM-dd||epoch_millis"},
        "ns": {"type": "date_nanos"},
        "tags": {"type": "keyword", "index": False, "doc_values": False},
        "user": {"dynamic": "true", "properties": {"name": {"type": "keyword", "null_value": "anon"}}},
        "nest": {"type": "nested", "properties": {"x": {"type": "long"}}},
        "off": {"type": "object", "enabled": False},
    },
}


def test_explicit_parameters_are_echoed_and_the_body_round_trips() -> None:
    mapping = Mapping.from_body(copy.deepcopy(RICH))
    assert mapping.to_body() == RICH
    assert Mapping.from_body(mapping.to_body()).to_body() == RICH
    assert mapping.routing_required is True
    assert mapping.source == {"excludes": ["secret"]}


def test_parameter_values_are_normalised_as_elasticsearch_stores_them() -> None:
    body = {
        "properties": {
            "k": {"type": "keyword", "index": "false", "ignore_above": "20"},
            "o": {"type": "object", "dynamic": False},
        }
    }
    assert Mapping.from_body(body).to_body() == {
        "properties": {
            "k": {"type": "keyword", "index": False, "ignore_above": 20},
            "o": {"type": "object", "dynamic": "false"},
        }
    }


def test_empty_and_legacy_type_wrapped_bodies() -> None:
    assert Mapping.from_body(None).to_body() == {}
    assert Mapping.from_body({}).to_body() == {}
    wrapped = Mapping.from_body({"_doc": {"properties": {"a": {"type": "long"}}}})
    assert wrapped.to_body() == {"properties": {"a": {"type": "long"}}}


def test_dotted_names_in_properties_become_objects() -> None:
    mapping = Mapping.from_body(
        {"properties": {"a.b": {"type": "long"}, "a": {"properties": {"c": {"type": "keyword"}}}}}
    )
    assert mapping.to_body() == {
        "properties": {"a": {"properties": {"b": {"type": "long"}, "c": {"type": "keyword"}}}}
    }
    assert mapping.field("a.b").type == "long"


@pytest.mark.parametrize(
    ("body", "inner", "inner_type"),
    [
        (
            {"properties": {"title": {"type": "text", "foo": 1}}},
            "unknown parameter [foo] on mapper [title] of type [text]",
            "mapper_parsing_exception",
        ),
        (
            {"properties": {"title": {"type": "text", "doc_values": False}}},
            "unknown parameter [doc_values] on mapper [title] of type [text]",
            "mapper_parsing_exception",
        ),
        (
            {"properties": {"bar": {"type": "foo"}}},
            "The mapper type [foo] declared on field [bar] does not exist. It might have been created "
            "within a future version or requires a plugin to be installed. Check the documentation.",
            "mapper_parsing_exception",
        ),
        (
            {"properties": {"p": {"type": "scaled_float"}}},
            "Field [scaling_factor] is required",
            "illegal_argument_exception",
        ),
        (
            {"properties": {"x": {"index": True}}},
            "No type specified for field [x]",
            "mapper_parsing_exception",
        ),
        (
            {"foo": "bar"},
            "Root mapping definition has unsupported parameters:  [foo : bar]",
            "mapper_parsing_exception",
        ),
        (
            {"properties": {"o": {"properties": {}, "foo": 1}}},
            "Mapping definition for [o] has unsupported parameters:  [foo : 1]",
            "mapper_parsing_exception",
        ),
        (
            {"properties": {"d": {"type": "date", "format": "foo"}}},
            "Error parsing [format] on field [d]: Invalid format: [foo]: Unknown pattern letter: f",
            "illegal_argument_exception",
        ),
        (
            {"properties": {"i": {"type": "integer", "null_value": "abc"}}},
            'Error parsing [null_value] on field [i]: For input string: "abc"',
            "illegal_argument_exception",
        ),
    ],
)
def test_bad_mappings_are_refused_with_elasticsearch_messages(
    body: dict, inner: str, inner_type: str
) -> None:
    error = refused(lambda: Mapping.from_body(body))
    assert (error.status, error.error_type) == (400, "mapper_parsing_exception")
    assert error.reason == f"Failed to parse mapping: {inner}"
    assert error.caused_by.error_type == inner_type
    assert error.caused_by.reason == inner


def test_storage_kinds_and_flags_of_field_types() -> None:
    types = [
        "text",
        "keyword",
        "long",
        "integer",
        "short",
        "byte",
        "double",
        "float",
        "half_float",
        "boolean",
        "date",
    ]
    mapping = Mapping.from_body({"properties": {t: {"type": t} for t in types}})
    kinds = {t: mapping.field(t).kind for t in types}
    assert kinds == {
        "text": "text",
        "keyword": "keyword",
        **dict.fromkeys(["long", "integer", "short", "byte", "boolean", "date"], "long"),
        **dict.fromkeys(["double", "float", "half_float"], "double"),
    }
    assert mapping.field("text").doc_values is False and mapping.field("keyword").doc_values is True
    assert mapping.field("date").formatter.pattern == "strict_date_optional_time||epoch_millis"
    nanos = Mapping.from_body({"properties": {"n": {"type": "date_nanos"}}}).field("n")
    assert nanos.nanos and nanos.formatter.pattern == "strict_date_optional_time_nanos||epoch_millis"


# -- dynamic mapping -------------------------------------------------------------------------


def test_new_fields_are_mapped_as_elasticsearch_does() -> None:
    mapping = Mapping.from_body(None)
    parse(
        mapping,
        {
            "s": "hello",
            "i": 5,
            "f": 1.5,
            "b": True,
            "iso": "2024-05-01T10:00:00Z",
            "slashed": "2024/05/01",
            "digits": "12345",
            "o": {"x": 1},
            "empty": {},
            "none": None,
            "no_values": [],
        },
    )
    assert mapping.to_body() == {
        "properties": {
            "b": {"type": "boolean"},
            "digits": KEYWORD_SUBFIELD,
            "empty": {"type": "object"},
            "f": {"type": "float"},
            "i": {"type": "long"},
            "iso": {"type": "date"},
            "o": {"properties": {"x": {"type": "long"}}},
            "s": KEYWORD_SUBFIELD,
            "slashed": {"type": "date", "format": "yyyy/MM/dd HH:mm:ss||yyyy/MM/dd||epoch_millis"},
        }
    }
    assert mapping.version == 1
    parse(mapping, {"s": "again", "i": 6})
    assert mapping.version == 1


def test_detection_switches() -> None:
    mapping = Mapping.from_body({"date_detection": False, "numeric_detection": True})
    parse(mapping, {"d": "2024-05-01", "n": "42", "x": "4.5"})
    props = mapping.to_body()["properties"]
    assert props["d"] == KEYWORD_SUBFIELD
    assert props["n"] == {"type": "long"} and props["x"] == {"type": "float"}


def test_custom_dynamic_date_formats() -> None:
    mapping = Mapping.from_body({"dynamic_date_formats": ["dd-MM-yyyy"]})
    parsed = parse(mapping, {"d": "01-05-2024", "iso": "2024-05-01"})
    assert mapping.to_body()["properties"]["d"] == {"type": "date", "format": "dd-MM-yyyy"}
    assert mapping.to_body()["properties"]["iso"] == KEYWORD_SUBFIELD
    assert parsed.long["d"] == [1_714_521_600_000]


def test_dynamic_templates() -> None:
    mapping = Mapping.from_body(
        {
            "dynamic_templates": [
                {"ids": {"match": "*_id", "match_mapping_type": "string", "mapping": {"type": "keyword"}}},
                {
                    "meta": {
                        "path_match": "meta.*",
                        "unmatch": "keep*",
                        "mapping": {"type": "{dynamic_type}", "index": False},
                    }
                },
                {
                    "named": {
                        "match_pattern": "regex",
                        "match": "^(simple|stop)$",
                        "mapping": {"analyzer": "{name}"},
                    }
                },
            ]
        }
    )
    parse(mapping, {"user_id": "U1", "meta": {"a": "x", "keep": "y", "n": 5}, "stop": "some text"})
    props = mapping.to_body()["properties"]
    assert props["user_id"] == {"type": "keyword"}
    assert props["meta"]["properties"] == {
        "a": {"type": "text", "index": False},
        "keep": KEYWORD_SUBFIELD,
        "n": {"type": "long", "index": False},
    }
    assert props["stop"] == {"type": "text", "analyzer": "stop"}


def test_objects_mapped_by_a_template_obey_its_dynamic_setting_at_once() -> None:
    template = {"match_mapping_type": "object", "mapping": {"type": "object", "dynamic": "strict"}}
    mapping = Mapping.from_body({"dynamic_templates": [{"strict_objects": template}]})
    error = refused(lambda: parse(mapping, {"o": {"x": 1}}))
    assert error.reason.endswith("dynamic introduction of [x] within [o] is not allowed")
    assert mapping.field("o.x") is None and "properties" not in mapping.to_body()


def test_dynamic_false_keeps_values_in_source_but_does_not_index_them() -> None:
    mapping = Mapping.from_body({"dynamic": False, "properties": {"a": {"type": "keyword"}}})
    source = b'{"a":"x","b":"y","o":{"c":1}}'
    parsed = mapping.parse_document(source, "1")
    assert parsed.source == source
    assert parsed.keyword == {"a": ["x"]} and not parsed.text and not parsed.long
    assert mapping.to_body() == {"dynamic": "false", "properties": {"a": {"type": "keyword"}}}
    assert mapping.version == 0


def test_strict_dynamic_mapping_is_refused_and_objects_inherit_it() -> None:
    mapping = Mapping.from_body(
        {
            "dynamic": "strict",
            "properties": {"a": {"type": "keyword"}, "user": {"properties": {"n": {"type": "long"}}}},
        }
    )
    error = refused(lambda: mapping.parse_document(b'{"a":"x","foo":1}', "1"))
    assert (error.status, error.error_type) == (400, "strict_dynamic_mapping_exception")
    assert (
        error.reason
        == "[1:16] mapping set to strict, dynamic introduction of [foo] within [_doc] is not allowed"
    )
    error = refused(lambda: parse(mapping, {"user": {"age": 3}}))
    assert error.reason.endswith("dynamic introduction of [age] within [user] is not allowed")


def test_an_object_may_allow_what_its_parent_forbids() -> None:
    mapping = Mapping.from_body(
        {"dynamic": "strict", "properties": {"free": {"type": "object", "dynamic": True}}}
    )
    parsed = parse(mapping, {"free": {"x": 1, "deeper": {"y": "z"}}})
    assert parsed.long == {"free.x": [1]}
    assert parsed.keyword == {"free.deeper.y.keyword": ["z"]}


def test_a_refused_document_leaves_the_mapping_unchanged() -> None:
    mapping = Mapping.from_body({"properties": {"n": {"type": "long"}}})
    before = mapping.to_body()
    refused(lambda: parse(mapping, {"new_field": "x", "new_obj": {"a": 1}, "n": "not a number"}))
    assert mapping.to_body() == before
    assert mapping.version == 0
    assert mapping.field("new_field") is None


def test_the_total_fields_limit() -> None:
    """Elasticsearch 8 counts new fields as the document adds them and refuses at the first one
    past the limit, wrapping the cause as a document parsing error at that field."""
    mapping = Mapping.from_body(None)
    mapping.total_fields_limit = 2
    error = refused(lambda: parse(mapping, {"a": "x", "b": 1}))
    reason = "Limit of total fields [2] has been exceeded while adding new fields [3]"
    assert error.body()["error"] == {
        "root_cause": [{"type": "document_parsing_exception", "reason": f"[1:14] failed to parse: {reason}"}],
        "type": "document_parsing_exception",
        "reason": f"[1:14] failed to parse: {reason}",
        "caused_by": {"type": "illegal_argument_exception", "reason": reason},
    }
    assert mapping.to_body() == {}


def test_the_total_fields_limit_counts_what_the_document_adds_at_every_level() -> None:
    """Fields of objects the document creates count, multi-fields count, and fields already mapped
    do not: the refusal names the count at the first field past the limit, however many follow."""
    mapping = Mapping.from_body({"properties": {"known": {"type": "long"}}})
    mapping.total_fields_limit = 5
    parse(mapping, {"known": 1, "o": {"p": {"n": 1}}, "k": 2})  # o, o.p, o.p.n, k: 5 with known
    assert mapping.field("o.p.n") is not None
    many = {"known": 2, **{f"f{i}": i for i in range(100_000)}}
    error = refused(lambda: parse(mapping, many))
    assert error.caused_by is not None
    assert error.caused_by.reason == "Limit of total fields [5] has been exceeded while adding new fields [1]"
    mapping.total_fields_limit = 8
    error = refused(lambda: parse(mapping, {"t": "text gets a keyword multi-field", "u": "x", "v": 1}))
    assert error.caused_by is not None
    assert error.caused_by.reason == "Limit of total fields [8] has been exceeded while adding new fields [4]"
    assert sorted(mapping.fields()) == ["k", "known", "o.p.n"]
    parse(mapping, {"t": "x", "v": 1})  # t, t.keyword, v: 8
    assert sorted(mapping.fields()) == ["k", "known", "o.p.n", "t", "t.keyword", "v"]


# -- document values -------------------------------------------------------------------------


def test_typical_document_values_by_storage_kind() -> None:
    mapping = Mapping.from_body(
        {
            "properties": {
                "@timestamp": {"type": "date"},
                "status": {"type": "integer"},
                "service": {"type": "keyword"},
                "message": {"type": "text"},
                "ok": {"type": "boolean"},
                "ratio": {"type": "double"},
            }
        }
    )
    source = b'{"@timestamp":"2024-05-01T00:00:00.250Z","status":200,"service":"svc","message":"Hello World",'
    source += b'"ok":false,"ratio":0.5}'
    parsed = mapping.parse_document(source, "1")
    assert parsed.source is source
    assert parsed.long == {"@timestamp": [1_714_521_600_250], "status": [200], "ok": [0]}
    assert parsed.keyword == {"service": ["svc"]}
    tokens, positions = parsed.text["message"]
    assert (tokens, list(positions)) == (["hello", "world"], [0, 1])
    assert parsed.double == {"ratio": [0.5]}


def test_arrays_nested_arrays_and_nulls() -> None:
    mapping = Mapping.from_body(
        {
            "properties": {
                "k": {"type": "keyword"},
                "n": {"type": "long"},
                "t": {"type": "text"},
                "d": {"type": "keyword", "null_value": "NULL"},
            }
        }
    )
    parsed = parse(
        mapping, {"k": ["a", ["b", ["c"]], None], "n": [1, [2, 3]], "t": ["x y", None, "z"], "d": [None, "v"]}
    )
    assert parsed.keyword == {"k": ["a", "b", "c"], "d": ["NULL", "v"]}
    assert parsed.long == {"n": [1, 2, 3]}
    assert parsed.text == {"t": (["x", "y", "z"], [0, 1, 102])}
    assert parse(mapping, {"k": None, "n": None, "t": None}).keyword == {}


def test_text_positions_continue_across_an_array_of_objects() -> None:
    mapping = Mapping.from_body({"properties": {"c": {"properties": {"t": {"type": "text"}}}}})
    parsed = parse(mapping, {"c": [{"t": "a b"}, {"t": "c"}]})
    assert parsed.text == {"c.t": (["a", "b", "c"], [0, 1, 102])}


def test_ignore_above_skips_the_value_but_keeps_the_source() -> None:
    mapping = Mapping.from_body(None)
    long_text = "x" * 300
    parsed = parse(mapping, {"s": long_text})
    assert parsed.keyword == {}
    tokens, positions = parsed.text["s"]
    assert (tokens, list(positions)) == ([long_text[:255], long_text[255:]], [0, 1])
    assert orjson.loads(parsed.source) == {"s": long_text}


def test_numbers_are_coerced_and_range_checked() -> None:
    mapping = Mapping.from_body(
        {
            "properties": {
                "l": {"type": "long"},
                "b": {"type": "byte"},
                "f": {"type": "float"},
                "h": {"type": "half_float"},
                "s": {"type": "scaled_float", "scaling_factor": 100},
                "k": {"type": "keyword"},
            }
        }
    )
    parsed = parse(
        mapping,
        {
            "l": ["42", 1.7, -1.7, "1e3", 7],
            "b": 127,
            "f": 0.1,
            "h": 0.1,
            "s": [12.345, "0.5"],
            "k": [1, 1.5, True],
        },
    )
    assert parsed.long == {"l": [42, 1, -1, 1000, 7], "b": [127], "s": [1235, 50]}
    assert parsed.double == {"f": [0.10000000149011612], "h": [0.0999755859375]}
    assert parsed.keyword == {"k": ["1", "1.5", "true"]}


def test_booleans_and_dates() -> None:
    mapping = Mapping.from_body(
        {
            "properties": {
                "b": {"type": "boolean"},
                "d": {"type": "date"},
                "n": {"type": "date_nanos"},
                "e": {"type": "date", "format": "epoch_second"},
            }
        }
    )
    parsed = parse(
        mapping,
        {
            "b": [True, "false", "true", ""],
            "d": [1_714_521_600_000, "2024-05-01"],
            "n": "2024-05-01T00:00:00.123456789Z",
            "e": 1_714_521_600,
        },
    )
    assert parsed.long == {
        "b": [1, 0, 1, 0],
        "d": [1_714_521_600_000, 1_714_521_600_000],
        "n": [1_714_521_600_123_456_789],
        "e": [1_714_521_600_000],
    }


def test_multi_fields_and_copy_to() -> None:
    mapping = Mapping.from_body(
        {
            "properties": {
                "title": {
                    "type": "text",
                    "fields": {"raw": {"type": "keyword"}, "len": {"type": "long", "ignore_malformed": True}},
                },
                "first": {"type": "keyword", "copy_to": ["full", "auto.made"]},
                "full": {"type": "text"},
            }
        }
    )
    parsed = parse(mapping, {"title": "Hello World", "first": "Jane"})
    assert {path: (tokens, list(positions)) for path, (tokens, positions) in parsed.text.items()} == {
        "title": (["hello", "world"], [0, 1]),
        "full": (["jane"], [0]),
        "auto.made": (["jane"], [0]),
    }
    assert parsed.keyword == {"title.raw": ["Hello World"], "first": ["Jane"], "auto.made.keyword": ["Jane"]}
    assert parsed.long == {}
    assert mapping.field("auto.made").type == "text"


def test_index_false_fields_are_parsed_and_flagged() -> None:
    mapping = Mapping.from_body({"properties": {"k": {"type": "keyword", "index": False}}})
    assert parse(mapping, {"k": "v"}).keyword == {"k": ["v"]}
    assert mapping.field("k").index is False


def test_nested_objects_are_child_documents() -> None:
    mapping = Mapping.from_body(
        {"properties": {"n": {"type": "nested", "properties": {"x": {"type": "long"}}}}}
    )
    parsed = parse(mapping, {"n": [{"x": 1}, {"x": 2}]})
    assert parsed.long == {}
    assert [(c.source, c.long) for c in parsed.nested["n"]] == [
        (b'{"x":1}', {"n.x": [1]}),
        (b'{"x":2}', {"n.x": [2]}),
    ]


def test_nested_include_in_parent_and_root_index_the_values_there_too() -> None:
    mapping = Mapping.from_body(
        {
            "properties": {
                "n": {
                    "type": "nested",
                    "include_in_parent": True,
                    "properties": {"m": {"type": "nested", "include_in_root": True}},
                }
            }
        }
    )
    parsed = parse(mapping, {"n": [{"x": 1, "m": {"y": 2}}, {"x": 3}]})
    assert parsed.long == {"n.x": [1, 3], "n.m.y": [2]}
    assert set(parsed.nested) == {"n"}  # the copy into the root makes no children of its own
    first = parsed.nested["n"][0]
    assert first.long == {"n.x": [1]} and first.nested["n.m"][0].long == {"n.m.y": [2]}


def test_nested_objects_limit_refuses_the_document() -> None:
    mapping = Mapping.from_body({"properties": {"n": {"type": "nested"}}})
    mapping.set_limits(1000, 20, 255, 50, 2)
    error = refused(lambda: parse(mapping, {"n": [{"x": 1}, {"x": 2}, {"x": 3}]}))
    assert error.error_type == "document_parsing_exception"
    assert error.reason == (
        "The number of nested documents has exceeded the allowed limit of [2]. This limit can be set "
        "by changing the [index.mapping.nested_objects.limit] index level setting."
    )


def test_disabled_objects_are_not_parsed() -> None:
    mapping = Mapping.from_body({"properties": {"off": {"enabled": False}}})
    parsed = parse(mapping, {"off": {"anything": [1, {"x": "y"}]}})
    assert (parsed.text, parsed.keyword, parsed.long) == ({}, {}, {})
    assert mapping.version == 0


def test_dotted_keys_in_documents_are_objects() -> None:
    mapping = Mapping.from_body(None)
    parsed = parse(mapping, {"a.b": 1, "a": {"c": 2}})
    assert parsed.long == {"a.b": [1], "a.c": [2]}
    assert mapping.to_body() == {
        "properties": {"a": {"properties": {"b": {"type": "long"}, "c": {"type": "long"}}}}
    }


# -- document errors ---------------------------------------------------------------------------


def failed(location: str, field: str, type_: str, preview: str) -> str:
    return (
        f"[{location}] failed to parse field [{field}] of type [{type_}] in document with id '1'. "
        f"Preview of field's value: '{preview}'"
    )


NANOS_BEFORE_1970 = (
    "date[1969-12-31T00:00:00Z] is before the epoch in 1970 and cannot be stored in nanosecond resolution"
)


@pytest.mark.parametrize(
    ("mapping_body", "source", "reason", "cause"),
    [
        (
            {"properties": {"count": {"type": "long"}}},
            b'{"count":"abc"}',
            failed("1:10", "count", "long", "abc"),
            ("illegal_argument_exception", 'For input string: "abc"'),
        ),
        (
            {"properties": {"n": {"type": "integer"}}},
            b'{"n": 3000000000}',
            failed("1:7", "n", "integer", "3000000000"),
            ("illegal_argument_exception", "Value [3000000000] is out of range for an integer"),
        ),
        (
            {"properties": {"n": {"type": "long", "coerce": False}}},
            b'{"n": 1.5}',
            failed("1:7", "n", "long", "1.5"),
            ("illegal_argument_exception", "Value [1.5] has a decimal part"),
        ),
        (
            {"properties": {"b": {"type": "boolean"}}},
            b'{"b":"yes"}',
            failed("1:6", "b", "boolean", "yes"),
            (
                "illegal_argument_exception",
                "Failed to parse value [yes] as only [true] or [false] are allowed.",
            ),
        ),
        (
            {"properties": {"d": {"type": "date"}}},
            b'{"d":"nope"}',
            failed("1:6", "d", "date", "nope"),
            (
                "illegal_argument_exception",
                "failed to parse date field [nope] with format [strict_date_optional_time||epoch_millis]",
            ),
        ),
        (
            {"properties": {"d": {"type": "date_nanos"}}},
            b'{"d":"1969-12-31"}',
            failed("1:6", "d", "date_nanos", "1969-12-31"),
            ("illegal_argument_exception", NANOS_BEFORE_1970),
        ),
        (
            {"properties": {"k": {"type": "keyword"}}},
            b'{"k":{"a":1}}',
            failed("1:6", "k", "keyword", "{a=1}"),
            ("illegal_argument_exception", "Can't get text on a START_OBJECT"),
        ),
    ],
)
def test_values_refused_by_their_field(mapping_body: dict, source: bytes, reason: str, cause: tuple) -> None:
    mapping = Mapping.from_body(mapping_body)
    error = refused(lambda: mapping.parse_document(source, "1"))
    assert (error.status, error.error_type, error.reason) == (400, "document_parsing_exception", reason)
    assert (error.caused_by.error_type, error.caused_by.reason) == cause
    assert error.body()["error"]["root_cause"][0]["type"] == "document_parsing_exception"


def test_ignore_malformed_skips_bad_values() -> None:
    mapping = Mapping.from_body({"properties": {"n": {"type": "long", "ignore_malformed": True}}})
    assert parse(mapping, {"n": ["x", 5]}).long == {"n": [5]}


def test_an_object_given_a_concrete_value() -> None:
    mapping = Mapping.from_body({"properties": {"user": {"properties": {"name": {"type": "keyword"}}}}})
    error = refused(lambda: mapping.parse_document(b'{"user":"bob"}', "1"))
    assert error.error_type == "document_parsing_exception"
    assert (
        error.reason
        == "[1:9] object mapping for [user] tried to parse field [user] as object, but found a concrete value"
    )


def test_metadata_fields_inside_the_source() -> None:
    mapping = Mapping.from_body(None)
    error = refused(lambda: mapping.parse_document(b'{"_id":"x"}', "1"))
    assert error.error_type == "document_parsing_exception"
    message = (
        "Field [_id] is a metadata field and cannot be added inside a document. "
        "Use the index API request parameters."
    )
    assert error.body()["error"]["root_cause"] == [{"type": "mapper_parsing_exception", "reason": message}]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (b'{"a": }', "[1:7] failed to parse: unexpected character, expected a JSON value"),
        (b"[1, 2]", "Malformed content, must start with an object"),
        (b'"text"', "Malformed content, must start with an object"),
        (b"", "[0:0] failed to parse, document is empty"),
    ],
)
def test_malformed_documents(source: bytes, reason: str) -> None:
    error = refused(lambda: Mapping.from_body(None).parse_document(source, "1"))
    assert (error.status, error.error_type, error.reason) == (400, "document_parsing_exception", reason)


def test_a_dotted_key_under_a_leaf_field() -> None:
    mapping = Mapping.from_body(
        {"properties": {"title": {"type": "text", "fields": {"raw": {"type": "keyword"}}}}}
    )
    error = refused(lambda: parse(mapping, {"title.raw": "x"}))
    assert error.reason.endswith(
        "Could not dynamically add mapping for field [title.raw]. "
        "Existing mapping for [title] must be of type object but found [text]."
    )


# -- put mapping -----------------------------------------------------------------------------


CONFLICT = "Mapper for [k] conflicts with existing mapper:\n\tCannot update parameter "


def base_mapping() -> Mapping:
    return Mapping.from_body(
        {
            "properties": {
                "k": {"type": "keyword", "ignore_above": 10},
                "t": {"type": "text"},
                "o": {"properties": {"a": {"type": "long"}}},
                "d": {"type": "date"},
            }
        }
    )


def test_merge_adds_fields_and_allowed_updates() -> None:
    mapping = base_mapping()
    mapping.merge(
        {
            "properties": {
                "k": {"type": "keyword", "ignore_above": 20, "fields": {"lc": {"type": "keyword"}}},
                "o": {"properties": {"b": {"type": "keyword"}}},
                "new": {"type": "long"},
            }
        }
    )
    props = mapping.to_body()["properties"]
    assert props["k"] == {"type": "keyword", "ignore_above": 20, "fields": {"lc": {"type": "keyword"}}}
    assert props["o"] == {"properties": {"a": {"type": "long"}, "b": {"type": "keyword"}}}
    assert props["new"] == {"type": "long"}
    assert mapping.field("k.lc").kind == "keyword"
    assert mapping.version == 1
    mapping.merge({"properties": {"new": {"type": "long"}}})
    assert mapping.version == 1  # nothing changed


def test_merge_keeps_existing_multi_fields_and_updates_root_settings() -> None:
    mapping = Mapping.from_body(
        {"properties": {"t": {"type": "text", "fields": {"raw": {"type": "keyword"}}}}}
    )
    mapping.merge(
        {"dynamic": "strict", "properties": {"t": {"type": "text", "fields": {"len": {"type": "long"}}}}}
    )
    assert mapping.to_body() == {
        "dynamic": "strict",
        "properties": {
            "t": {"type": "text", "fields": {"len": {"type": "long"}, "raw": {"type": "keyword"}}}
        },
    }
    refused(lambda: parse(mapping, {"x": 1}))


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"properties": {"k": {"type": "text"}}},
            "mapper [k] cannot be changed from type [keyword] to [text]",
        ),
        (
            {"properties": {"k": {"type": "keyword", "index": False}}},
            CONFLICT + "[index] from [true] to [false]",
        ),
        (
            {"properties": {"d": {"type": "date", "format": "yyyy"}}},
            "Mapper for [d] conflicts with existing mapper:\n\tCannot update parameter [format] from "
            "[strict_date_optional_time||epoch_millis] to [yyyy]",
        ),
        (
            {"properties": {"o": {"type": "keyword"}}},
            "can't merge a non object mapping [o] with an object mapping",
        ),
        (
            {"properties": {"k": {"properties": {"x": {"type": "long"}}}}},
            "can't merge a non object mapping [k] with an object mapping",
        ),
        (
            {"properties": {"o": {"type": "nested"}}},
            "object mapping [o] can't be changed from non-nested to nested",
        ),
        (
            {"_source": {"enabled": False}},
            CONFLICT.replace("[k]", "[_source]") + "[enabled] from [true] to [false]",
        ),
    ],
)
def test_merge_conflicts_change_nothing(body: dict, reason: str) -> None:
    mapping = base_mapping()
    before = mapping.to_body()
    error = refused(lambda: mapping.merge(body))
    assert (error.status, error.error_type, error.reason) == (400, "illegal_argument_exception", reason)
    assert mapping.to_body() == before and mapping.version == 0


def test_merge_of_an_invalid_body_is_a_mapping_error() -> None:
    mapping = base_mapping()
    error = refused(lambda: mapping.merge({"properties": {"new": {"type": "long"}, "x": {"type": "nope"}}}))
    assert error.error_type == "mapper_parsing_exception"
    assert mapping.field("new") is None


# -- field lookups ---------------------------------------------------------------------------


def test_field_lookups_and_wildcards() -> None:
    mapping = Mapping.from_body(
        {
            "properties": {
                "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
                "user": {"properties": {"name": {"type": "keyword"}, "age": {"type": "long"}}},
            }
        }
    )
    assert list(mapping.fields()) == ["title", "title.raw", "user.age", "user.name"]
    assert mapping.field("title.raw").type == "keyword"
    assert mapping.field("user") is None
    assert mapping.resolve_fields("user.*") == ["user.age", "user.name"]
    assert mapping.resolve_fields("*.raw") == ["title.raw"]
    assert mapping.resolve_fields("*") == ["title", "title.raw", "user.age", "user.name"]
    assert mapping.resolve_fields("title") == ["title"]
    assert mapping.resolve_fields("missing") == []
