"""Every mapping parameter given a value of the wrong type is a 400 `mapper_parsing_exception`
(never a 500), in Elasticsearch's words: for each field type, each of its parameters, runtime
fields and dynamic templates included; and the mapping is unchanged."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from conftest import error_of

from leafsearch.errors import ElasticError
from leafsearch.index.mapping import Mapping

BOOLEAN = (
    "index",
    "doc_values",
    "store",
    "coerce",
    "ignore_malformed",
    "norms",
    "eager_global_ordinals",
    "index_phrases",
    "fielddata",
    "split_queries_on_whitespace",
    "time_series_dimension",
)
STRING = ("analyzer", "search_analyzer", "search_quote_analyzer", "similarity", "term_vector", "normalizer")
#: Wrong values by the kind of parameter; strings take numbers and booleans as their text, as
#: Elasticsearch's `toString` does.
WRONG: dict[str, list[Any]] = {
    "boolean": ["maybe", 1, 1.5, {}, []],
    "string": [{}, [], {"a": 1}],
    "integer": ["x", 1.5, True, {}, [], 2**40, "9" * 5000],
    "number": ["x", True, {}, []],
    "map": ["x", 1, [], True],
    "meta": ["x", 1, [], {"a": 1}, {"a": {}}, {"a": None}, {"k" * 21: "v"}, {"a": "v" * 51}],
    "copy_to": [1, {}, [1], True],
    "format": [1, {}, [], "not-a-format"],
    "index_options": [{}, []],
    "time_series_metric": [{}, []],
    "locale": [{}, []],
}
KIND = {
    **dict.fromkeys(BOOLEAN, "boolean"),
    **dict.fromkeys(STRING, "string"),
    "ignore_above": "integer",
    "position_increment_gap": "integer",
    "boost": "number",
    "scaling_factor": "number",
    "index_prefixes": "map",
    "fielddata_frequency_filter": "map",
    "meta": "meta",
    "copy_to": "copy_to",
    "format": "format",
    "index_options": "index_options",
    "time_series_metric": "time_series_metric",
    "locale": "locale",
}
COMMON = {"index", "doc_values", "store", "meta", "boost", "copy_to"}
NUMERIC = COMMON | {"ignore_malformed", "coerce", "time_series_dimension", "time_series_metric"}
DATE = COMMON | {"format", "locale", "ignore_malformed"}
PARAMETERS: dict[str, set[str]] = {
    "text": (COMMON - {"doc_values"})
    | {
        "analyzer",
        "search_analyzer",
        "search_quote_analyzer",
        "index_options",
        "index_phrases",
        "index_prefixes",
        "norms",
        "position_increment_gap",
        "similarity",
        "term_vector",
        "fielddata",
        "fielddata_frequency_filter",
        "eager_global_ordinals",
    },
    "keyword": COMMON
    | {
        "ignore_above",
        "normalizer",
        "eager_global_ordinals",
        "index_options",
        "norms",
        "similarity",
        "split_queries_on_whitespace",
        "time_series_dimension",
    },
    **dict.fromkeys(("long", "integer", "short", "byte", "double", "float", "half_float"), NUMERIC),
    "scaled_float": NUMERIC | {"scaling_factor"},
    "unsigned_long": NUMERIC - {"coerce"},
    "ip": COMMON | {"ignore_malformed", "time_series_dimension"},
    "boolean": COMMON | {"ignore_malformed"},
    "date": DATE,
    "date_nanos": DATE,
}
#: A `null_value` each type cannot take.
WRONG_NULL_VALUE: dict[str, list[Any]] = {
    "text": [],
    "keyword": [{}, []],
    **dict.fromkeys(("long", "integer", "short", "byte", "unsigned_long"), ["x", {}, 2**70, 1.5e300]),
    **dict.fromkeys(("double", "float", "half_float", "scaled_float"), ["x", {}, []]),
    "ip": ["x", 1, {}],
    "boolean": ["x", 1, {}],
    "date": ["x", {}, True],
    "date_nanos": ["x", {}, -1],
}


def field(type_: str, **params: Any) -> dict[str, Any]:
    extra = {"scaling_factor": 10} if type_ == "scaled_float" and "scaling_factor" not in params else {}
    return {"type": type_, **extra, **params}


def refused(body: dict[str, Any]) -> ElasticError:
    """The error a new mapping, and a put-mapping onto an existing one, refuse `body` with (the
    same, and the existing mapping unchanged)."""
    with pytest.raises(ElasticError) as created:
        Mapping.from_body(body)
    existing = Mapping.from_body({"properties": {"other": {"type": "keyword"}}})
    before = existing.to_body()
    with pytest.raises(ElasticError) as merged:
        existing.merge(body)
    assert existing.to_body() == before
    assert (merged.value.error_type, merged.value.reason) == (created.value.error_type, created.value.reason)
    error = created.value
    assert (error.status, error.error_type) == (400, "mapper_parsing_exception"), error.reason
    return error


CASES = [
    (type_, param, value)
    for type_, params in PARAMETERS.items()
    for param in sorted(params)
    for value in [*WRONG[KIND[param]], None]
]


@pytest.mark.parametrize(("type_", "param", "value"), CASES)
def test_a_parameter_of_the_wrong_type_is_a_mapper_parsing_exception(
    type_: str, param: str, value: Any
) -> None:
    error = refused({"properties": {"f": field(type_, **{param: value})}})
    if value is None:
        assert error.reason == (
            f"Failed to parse mapping: [{param}] on mapper [f] of type [{type_}] must not have a [null] value"
        )
    elif KIND[param] == "boolean":  # Elasticsearch names the value, not the parameter
        assert error.reason.startswith("Failed to parse mapping: Failed to parse value [")
        assert error.reason.endswith("] as only [true] or [false] are allowed.")
    else:
        assert f"[{param}]" in error.reason


@pytest.mark.parametrize("type_", sorted(PARAMETERS))
def test_a_multi_field_parameter_of_the_wrong_type_is_refused_too(type_: str) -> None:
    for param in sorted(PARAMETERS[type_] - set(BOOLEAN)):
        sub = field(type_, **{param: WRONG[KIND[param]][0]})
        assert f"[{param}]" in refused({"properties": {"f": {"type": "text", "fields": {"sub": sub}}}}).reason


@pytest.mark.parametrize(
    ("type_", "value"), [(type_, value) for type_, values in WRONG_NULL_VALUE.items() for value in values]
)
def test_a_null_value_the_type_cannot_take(type_: str, value: Any) -> None:
    assert "[null_value]" in refused({"properties": {"f": field(type_, null_value=value)}}).reason


@pytest.mark.parametrize(
    ("node", "reason"),
    [
        ({"type": {}}, "The mapper type [{}] declared on field [f] does not exist."),
        ({"type": ["keyword"]}, "The mapper type [[keyword]] declared on field [f] does not exist."),
        (
            {"type": "keyword", "fields": "x"},
            "expected map for property [fields] on field [x] or [fields] but got a class java.lang.String",
        ),
        (
            {"type": "keyword", "fields": 1},
            "expected map for property [fields] on field [1] or [fields] but got a class java.lang.Integer",
        ),
        (
            {"type": "keyword", "fields": None},
            "[fields] on mapper [f] of type [keyword] must not have a [null] value",
        ),
        ({"type": "keyword", "fields": {"s": "x"}}, "Expected map for property [fields] on field [s]"),
        ({"type": "object", "dynamic": {}}, "Could not convert [f.dynamic] to boolean"),
        (
            {"type": "object", "enabled": "x"},
            "Failed to parse value [x] as only [true] or [false] are allowed.",
        ),
        ({"type": "object", "properties": "x"}, "properties must be a map type"),
        (
            {"properties": {"g": 1}},
            "Expected map for property [fields] on field [g] but got a class java.lang.String",
        ),
    ],
)
def test_types_fields_and_objects_of_the_wrong_type(node: dict[str, Any], reason: str) -> None:
    assert reason in refused({"properties": {"f": node}}).reason


# ---- runtime fields ---------------------------------------------------------------------------

RUNTIME_TYPES = ("boolean", "composite", "date", "double", "geo_point", "ip", "keyword", "long", "lookup")


@pytest.mark.parametrize("value", [{}, [], ["keyword"], 1, True, {"type": "keyword"}, "text"])
def test_a_runtime_type_that_is_no_runtime_type(value: Any) -> None:
    error = refused({"runtime": {"r": {"type": value}}})
    assert "declared on runtime field [r] does not exist" in error.reason


@pytest.mark.parametrize(
    ("definition", "reason"),
    [
        ("keyword", "Expected map for runtime field [r] definition but got a java.lang.String"),
        ({}, "No type specified for runtime field [r]"),
        ({"type": "keyword", "script": 1}, "Script value should be a String or a Map"),
        ({"type": "keyword", "script": []}, "Script value should be a String or a Map"),
        (
            {"type": "keyword", "on_script_error": "ignore"},
            "Unknown value [ignore] for field [on_script_error] - accepted values are [fail, continue]",
        ),
        ({"type": "keyword", "meta": "x"}, "[meta] must be an object, got String[x] for field [r]"),
        (
            {"type": "keyword", "meta": {"a": 1}},
            "[meta] values can only be strings, but got Integer[1] for field [r]",
        ),
        ({"type": "date", "format": 1}, "Failed to parse [format] on field [r]: expected a string"),
        ({"type": "date", "locale": {}}, "Failed to parse [locale] on field [r]: expected a string"),
        (
            {"type": "keyword", "format": "x"},
            "unknown parameter [format] on runtime field [r] of type [keyword]",
        ),
        (
            {"type": "long", "script": None},
            "[script] on runtime field [r] of type [long] must not have a [null] value",
        ),
        ({"type": "composite", "fields": "x"}, "[fields] on mapper [r] should be of type map"),
        (
            {"type": "composite", "script": "x", "fields": {"a": {"type": "keyword", "script": "y"}}},
            "Cannot use [script] parameter on sub-field [a] of composite field [r]",
        ),
        (
            {"type": "composite", "fields": {"a": {"type": "lookup"}}},
            "[lookup] declared on runtime field [a]",
        ),
        (
            {"type": "lookup", "target_index": {}},
            "Failed to parse [target_index] on field [r]: expected a string",
        ),
        (
            {"type": "lookup", "fetch_fields": "x"},
            "[fetch_fields] on runtime field [r] must be a list, got [x]",
        ),
        (
            {"type": "lookup", "script": "x"},
            "unknown parameter [script] on runtime field [r] of type [lookup]",
        ),
    ],
)
def test_runtime_field_parameters_of_the_wrong_type(definition: Any, reason: str) -> None:
    assert reason in refused({"runtime": {"r": definition}}).reason


@pytest.mark.parametrize("type_", RUNTIME_TYPES)
def test_runtime_fields_of_every_type_are_kept(type_: str) -> None:
    definition = {"type": type_, "meta": {"unit": "ms"}}
    if type_ == "composite":
        definition.update(script="emit(Map.of())", fields={"a": {"type": "keyword"}})
    if type_ == "lookup":
        definition = {"type": type_, "target_index": "i", "input_field": "a", "target_field": "b"}
    assert Mapping.from_body({"runtime": {"r": definition}}).to_body() == {"runtime": {"r": definition}}


def test_a_runtime_type_of_the_wrong_type_over_http(http: httpx.Client, new_index) -> None:
    index = new_index()
    response = http.put(f"/{index}/_mapping", json={"runtime": {"r": {"type": {}}}})
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "mapper_parsing_exception"
    assert error["reason"].startswith(
        "Failed to parse mapping: The mapper type [{}] declared on runtime field [r]"
    )
    assert http.get(f"/{index}/_mapping").json() == {index: {"mappings": {}}}


# ---- dynamic templates ------------------------------------------------------------------------


def template(**conditions: Any) -> dict[str, Any]:
    return {"dynamic_templates": [{"t": {"mapping": {"type": "keyword"}, **conditions}}]}


@pytest.mark.parametrize("key", ["match", "unmatch", "path_match", "path_unmatch"])
@pytest.mark.parametrize("value", [[1], [None], [[]], None])
def test_template_patterns_of_the_wrong_type(key: str, value: Any) -> None:
    error = refused(template(**{key: value}))
    assert f"[{key}] values must either be a string or list of strings, but was [" in error.reason


@pytest.mark.parametrize("key", ["match_mapping_type", "unmatch_mapping_type"])
@pytest.mark.parametrize("value", ["x", 1, [1], None, {}])
def test_template_mapping_types_of_the_wrong_type(key: str, value: Any) -> None:
    error = refused(template(**{key: value}))
    assert "No field type matched on [" in error.reason or f"[{key}] values must" in error.reason


@pytest.mark.parametrize(
    ("conditions", "reason"),
    [
        ({"match_pattern": "glob"}, "No matching pattern matched on [glob]"),
        ({"match_pattern": 1}, "No matching pattern matched on [1]"),
        (
            {"match_pattern": "regex", "match": "(a"},
            "Pattern [(a] of type [regex] is invalid. Cannot create dynamic template [t].",
        ),
        ({"mapping": "keyword"}, "dynamic template [t] has an invalid [mapping]"),
        ({"mapping": None, "runtime": "x"}, "dynamic template [t] has an invalid [runtime]"),
    ],
)
def test_template_parameters_of_the_wrong_type(conditions: dict[str, Any], reason: str) -> None:
    assert reason in refused(template(**conditions)).reason


def test_template_patterns_given_as_numbers_are_their_text() -> None:
    """Elasticsearch takes one value of another type as its text (`toString`)."""
    mapping = Mapping.from_body({"dynamic_templates": [{"t": {"match": 1, "mapping": {"type": "keyword"}}}]})
    doc = mapping.parse_document(b'{"1": "x", "2": "y"}', "1")
    assert mapping.field("1").type == "keyword"
    assert mapping.field("2").type == "text"
    assert doc.keyword == {"1": ["x"], "2.keyword": ["y"]}


# ---- nesting ---------------------------------------------------------------------------------


def nested(depth: int, leaf: Any, key: str = "a") -> Any:
    for _ in range(depth):
        leaf = {key: leaf}
    return leaf


@pytest.mark.parametrize(
    "body",
    [
        template(mapping=nested(300, {"type": "keyword"})),
        {"_meta": nested(250, 1)},
        {"runtime": {"r": {"type": "keyword", "script": {"source": "x", "params": nested(250, [])}}}},
    ],
)
def test_a_mapping_nested_past_what_can_be_stored_is_refused(body: dict[str, Any]) -> None:
    error = refused(body)
    assert (
        error.reason == "Failed to parse mapping: the mapping is nested deeper than the maximum allowed [240]"
    )


def test_the_deepest_object_mapping_the_depth_limit_allows_is_taken_and_written() -> None:
    """`index.mapping.depth.limit` goes up to 100: a mapping that deep is taken, and written out
    with what wraps it in `GET _mapping`."""
    node: dict[str, Any] = {"type": "keyword"}
    for _ in range(100):
        node = {"properties": {"o": node}}
    mapping = Mapping.from_body(node)
    mapping.set_limits(1000, 100, 255, 50, 10_000)
    mapping.check_limits()
    assert orjson.loads(orjson.dumps({"index": {"mappings": mapping.to_body()}}))["index"]["mappings"] == node
