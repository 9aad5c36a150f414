"""Search request parsing and validation: defaults, every refusal with Elasticsearch's type and
message, URL parameters over the body, the sort forms, and the scroll / clear-scroll requests."""

from __future__ import annotations

from typing import Any

import pytest

from leafsearch.errors import ElasticError
from leafsearch.request.query_dsl import MatchAll, QueryString, Term
from leafsearch.request.search_request import (
    parse_clear_scroll,
    parse_count_request,
    parse_scroll_request,
    parse_search_request,
)
from leafsearch.request.search_types import PitSpec, SliceSpec, SortSpec, SourceFilter
from leafsearch.request.sort import parse_sort, parse_url_sort


def refused(body: Any = None, params: dict[str, str] | None = None, **kw: Any) -> ElasticError:
    with pytest.raises(ElasticError) as info:
        parse_search_request(body, params or {}, **kw)
    return info.value


def validation(body: Any = None, params: dict[str, str] | None = None, **kw: Any) -> str:
    error = refused(body, params, **kw)
    assert (error.error_type, error.status) == ("action_request_validation_exception", 400)
    return error.reason


# ---------------------------------------------------------------------------------------------
# defaults


def test_an_empty_request_is_the_first_ten_hits_by_relevance():
    request = parse_search_request(None, {})
    assert isinstance(request.query, MatchAll)
    assert (request.from_, request.size, request.sort) == (0, 10, [])
    assert request.track_total_hits == 10_000
    assert request.source == SourceFilter()
    assert request.search_after is None and request.scroll is None and request.pit is None


def test_body_options_are_read():
    request = parse_search_request(
        {
            "query": {"term": {"user": "kimchy"}},
            "from": 5,
            "size": 20,
            "track_scores": True,
            "version": True,
            "seq_no_primary_term": "true",
            "explain": False,
            "min_score": "0.5",
            "terminate_after": 100,
            "timeout": "10s",
            "aggs": {"by_user": {"terms": {"field": "user"}}},
            "post_filter": {"term": {"tag": "x"}},
            "indices_boost": [{"a": 2}, {"b": 1.5}],
            "stats": ["group"],
            "profile": False,
        },
        {},
    )
    assert isinstance(request.query, Term) and isinstance(request.post_filter, Term)
    assert (request.from_, request.size) == (5, 20)
    assert request.track_scores and request.version and request.seq_no_primary_term and not request.explain
    assert request.min_score == 0.5 and request.terminate_after == 100
    assert request.aggs == {"by_user": {"terms": {"field": "user"}}}
    assert request.indices_boost == [("a", 2.0), ("b", 1.5)]


def test_minus_one_from_means_unset_as_the_spec_allows():
    request = parse_search_request({"from": -1, "search_after": [1], "sort": ["n"]}, {})
    assert request.from_ == 0


def test_numbers_are_coerced_as_elasticsearch_reads_them():
    assert parse_search_request({"from": "5", "size": 7.9}, {}).size == 7
    assert parse_search_request({"from": "5"}, {}).from_ == 5
    assert parse_search_request({"terminate_after": 0}, {}).terminate_after is None


# ---------------------------------------------------------------------------------------------
# unknown keys and wrong value types


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ({}, "START_OBJECT"),
        ([], "START_ARRAY"),
        ("x", "VALUE_STRING"),
        (1, "VALUE_NUMBER"),
        (1.5, "VALUE_NUMBER"),
        (True, "VALUE_BOOLEAN"),
        (None, "VALUE_NULL"),
    ],
)
def test_unknown_keys_are_named_with_their_token(value, token):
    error = refused({"foo": value})
    assert (error.error_type, error.status) == ("parsing_exception", 400)
    assert error.reason == f"Unknown key for a {token} in [foo]."


@pytest.mark.parametrize(
    ("body", "token"),
    [
        ({"size": None}, "VALUE_NULL"),
        ({"query": "x"}, "VALUE_STRING"),
        ({"from": [1]}, "START_ARRAY"),
        ({"search_after": "x"}, "VALUE_STRING"),
        ({"track_total_hits": {}}, "START_OBJECT"),
    ],
)
def test_known_keys_with_a_value_of_the_wrong_kind_are_unknown_for_that_token(body, token):
    key = next(iter(body))
    assert refused(body).reason == f"Unknown key for a {token} in [{key}]."


def test_a_body_that_is_not_an_object_is_refused():
    error = refused([1])
    assert (error.error_type, error.reason) == (
        "parsing_exception",
        "Expected [START_OBJECT] but found [START_ARRAY]",
    )


@pytest.mark.parametrize(
    ("body", "error_type", "reason"),
    [
        ({"from": "abc"}, "number_format_exception", 'For input string: "abc"'),
        ({"size": ""}, "number_format_exception", "empty String"),
        (
            {"size": "3000000000"},
            "illegal_argument_exception",
            "Value [3000000000] is out of range for an integer",
        ),
        (
            {"size": 3000000000},
            "x_content_parse_exception",
            "Numeric value (3000000000) out of range of int (-2147483648 - 2147483647)",
        ),
        (
            {"from": True},
            "x_content_parse_exception",
            "Current token (VALUE_TRUE) not numeric, can not use numeric value accessors",
        ),
        ({"version": 1}, "x_content_parse_exception", "Current token (VALUE_NUMBER_INT) not of boolean type"),
        (
            {"explain": "yes"},
            "illegal_argument_exception",
            "Failed to parse value [yes] as only [true] or [false] are allowed.",
        ),
        ({"min_score": "high"}, "number_format_exception", 'For input string: "high"'),
        (
            {"timeout": "5"},
            "illegal_argument_exception",
            "failed to parse setting [timeout] with value [5] as a time value: "
            "unit is missing or unrecognized",
        ),
    ],
)
def test_wrong_value_types_get_elasticsearch_errors(body, error_type, reason):
    error = refused(body)
    assert (error.error_type, error.reason, error.status) == (error_type, reason, 400)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"size": -1}, "[size] parameter cannot be negative, found [-1]"),
        ({"from": -2}, "[from] parameter cannot be negative but was [-2]"),
        ({"terminate_after": -1}, "terminateAfter must be > 0"),
        ({"track_total_hits": -2}, "[track_total_hits] parameter must be positive or equals to -1, got -2"),
    ],
)
def test_negative_numbers_are_refused(body, reason):
    error = refused(body)
    assert (error.error_type, error.reason) == ("illegal_argument_exception", reason)


# ---------------------------------------------------------------------------------------------
# track_total_hits


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("true", True),
        ("false", False),
        (500, 500),
        (-1, False),
        (2**31 - 1, True),
    ],
)
def test_track_total_hits_values(value, expected):
    assert parse_search_request({"track_total_hits": value}, {}).track_total_hits == expected


def test_track_total_hits_url_parameter():
    assert parse_search_request(None, {"track_total_hits": "false"}).track_total_hits is False
    assert parse_search_request(None, {"track_total_hits": "42"}).track_total_hits == 42


def test_rest_total_hits_as_int_forces_an_exact_total():
    request = parse_search_request(None, {"rest_total_hits_as_int": "true"})
    assert request.track_total_hits is True and request.rest_total_hits_as_int
    assert (
        parse_search_request({"track_total_hits": False}, {"rest_total_hits_as_int": ""}).track_total_hits
        is False
    )
    error = refused({"track_total_hits": 100}, {"rest_total_hits_as_int": "true"})
    assert error.reason == (
        "[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got 100"
    )


# ---------------------------------------------------------------------------------------------
# _source, stored_fields, fields, docvalue_fields


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (False, SourceFilter(fetch=False)),
        (True, SourceFilter()),
        ("user.*", SourceFilter(includes=("user.*",))),
        (["a", "b", "a"], SourceFilter(includes=("a", "b"))),
        ({"includes": ["a"], "excludes": "a.b"}, SourceFilter(includes=("a",), excludes=("a.b",))),
        ({"include": "a", "exclude": ["c"]}, SourceFilter(includes=("a",), excludes=("c",))),
    ],
)
def test_source_option_forms(value, expected):
    assert parse_search_request({"_source": value}, {}).source == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            5,
            "Expected one of [VALUE_BOOLEAN, VALUE_STRING, START_ARRAY, START_OBJECT] "
            "but found [VALUE_NUMBER]",
        ),
        (["a", 1], "Unknown key for a VALUE_NUMBER in [_source]."),
        ({"includes": ["a"], "foo": "b"}, "Unknown key for a VALUE_STRING in [foo]."),
        ({"includes": {}}, "Unknown key for a START_OBJECT in [includes]."),
    ],
)
def test_source_option_errors(value, reason):
    error = refused({"_source": value})
    assert (error.error_type, error.reason) == ("parsing_exception", reason)


def test_source_url_parameters_replace_the_body_option():
    request = parse_search_request({"_source": {"excludes": ["x"]}}, {"_source_includes": "a,b"})
    assert request.source == SourceFilter(includes=("a", "b"))
    assert parse_search_request({"_source": ["a"]}, {"_source": "false"}).source.fetch is False
    assert parse_search_request(None, {"_source": "a,b"}).source.includes == ("a", "b")
    assert parse_search_request(None, {"_source_excludes": "c"}).source == SourceFilter(excludes=("c",))


def test_stored_fields_turn_source_off_unless_they_name_it():
    assert parse_search_request({"stored_fields": "_none_"}, {}).source.fetch is False
    assert parse_search_request({"stored_fields": ["title"]}, {}).source.fetch is False
    assert parse_search_request({"stored_fields": ["title", "_source"]}, {}).source.fetch is True
    assert parse_search_request({"stored_fields": ["title"], "_source": True}, {}).source.fetch is True
    assert parse_search_request(None, {"stored_fields": "_none_"}).stored_fields == ["_none_"]


def test_stored_fields_errors():
    assert refused({"stored_fields": ["_none_", "a"]}).reason == "cannot combine _none_ with other fields"
    error = refused({"stored_fields": 1})
    assert (error.error_type, error.reason) == (
        "parsing_exception",
        "Expected [VALUE_STRING] or [START_ARRAY] in [stored_fields] but found [VALUE_NUMBER]",
    )
    assert validation({"stored_fields": "_none_", "_source": True}) == (
        "Validation Failed: 1: [stored_fields] cannot be disabled if [_source] is requested;"
    )
    assert validation({"stored_fields": "_none_", "fields": ["a"]}) == (
        "Validation Failed: 1: [stored_fields] cannot be disabled when using the [fields] option;"
    )


def test_fields_and_docvalue_fields_forms():
    request = parse_search_request(
        {
            "fields": [
                "user.*",
                {"field": "date", "format": "yyyy"},
                {"field": "x", "include_unmapped": "true"},
            ],
            "docvalue_fields": [{"field": "n", "format": None}, "k"],
        },
        {"docvalue_fields": "extra"},
    )
    assert request.fields == [
        {"field": "user.*"},
        {"field": "date", "format": "yyyy"},
        {"field": "x", "include_unmapped": True},
    ]
    assert request.docvalue_fields == [{"field": "n", "format": None}, {"field": "k"}, {"field": "extra"}]


@pytest.mark.parametrize(
    ("entry", "error_type", "reason"),
    [
        ({"format": "x"}, "illegal_argument_exception", "Required [field]"),
        (
            {"field": "a", "foo": 1},
            "x_content_parse_exception",
            "[fetch_field_and_format] unknown field [foo]",
        ),
        (
            {"field": 1},
            "x_content_parse_exception",
            "[fetch_field_and_format] field doesn't support values of type: VALUE_NUMBER",
        ),
        (
            None,
            "x_content_parse_exception",
            "[fetch_field_and_format] Expected START_OBJECT but was: VALUE_NULL",
        ),
    ],
)
def test_field_entry_errors(entry, error_type, reason):
    error = refused({"fields": [entry]})
    assert (error.error_type, error.reason) == (error_type, reason)


def test_indices_boost_errors():
    assert (
        refused({"indices_boost": ["a"]}).reason
        == "Expected [START_OBJECT] in [indices_boost] but found [VALUE_STRING]"
    )
    assert refused({"indices_boost": [{"a": "x"}]}).reason == (
        "Expected [VALUE_NUMBER] in [indices_boost] but found [VALUE_STRING]"
    )
    assert refused({"indices_boost": [{"a": 1, "b": 2}]}).reason == (
        "Expected [END_OBJECT] in [indices_boost] but found [FIELD_NAME]"
    )
    assert refused({"indices_boost": {"a": 1}}).reason == "Unknown key for a START_OBJECT in [indices_boost]."


# ---------------------------------------------------------------------------------------------
# search_after, pit, slice


def test_search_after_values_are_kept_exact():
    big = 1_704_067_200_123_456_789
    request = parse_search_request(
        {"search_after": [big, "k", None, True, 1.5], "sort": ["a", "b", "c", "d", "e"]}, {}
    )
    assert request.search_after == [big, "k", None, True, 1.5]


def test_search_after_errors():
    assert refused({"search_after": [], "sort": ["a"]}).reason == "Values must contains at least one value."
    error = refused({"search_after": [{}], "sort": ["a"]})
    assert (error.error_type, error.reason) == (
        "parsing_exception",
        "Expected [VALUE_STRING] or [VALUE_NUMBER] or [VALUE_BOOLEAN] or [VALUE_NULL] "
        "but found [START_OBJECT] inside search_after.",
    )


@pytest.mark.parametrize("body", [{"search_after": [1]}, {"search_after": [1], "sort": ["_score"]}])
def test_search_after_needs_a_sort_field(body):
    error = refused(body)
    assert (error.error_type, error.status) == ("search_phase_execution_exception", 400)
    assert error.root_causes[0].reason == "Sort must contain at least one field."


def test_pit_is_parsed():
    request = parse_search_request({"pit": {"id": "abc", "keep_alive": "1m"}}, {})
    assert request.pit == PitSpec("abc", "1m")


@pytest.mark.parametrize(
    ("pit", "error_type", "reason"),
    [
        ({"keep_alive": "1m"}, "illegal_argument_exception", "point in time id is not provided"),
        ({"id": "a", "foo": 1}, "x_content_parse_exception", "[pit] unknown field [foo]"),
        ({"id": 1}, "x_content_parse_exception", "[pit] id doesn't support values of type: VALUE_NUMBER"),
        (
            {"id": "a", "keep_alive": "soon"},
            "x_content_parse_exception",
            "[pit] failed to parse field [keep_alive]",
        ),
    ],
)
def test_pit_errors(pit, error_type, reason):
    error = refused({"pit": pit})
    assert (error.error_type, error.reason) == (error_type, reason)


def test_slice_is_parsed():
    request = parse_search_request({"slice": {"id": "1", "max": 4, "field": "ts"}}, {}, scroll="1m")
    assert request.slice == SliceSpec(1, 4, "ts")


@pytest.mark.parametrize(
    ("slice_", "field", "cause"),
    [
        ({"id": -1, "max": 2}, "id", "id must be greater than or equal to 0"),
        ({"id": 0, "max": 1}, "max", "max must be greater than 1"),
        ({"id": 2, "max": 2}, "max", "max must be greater than id"),
        ({"max": 2, "id": 2}, "id", "max must be greater than id"),
    ],
)
def test_slice_rules_are_wrapped_as_object_parser_failures(slice_, field, cause):
    error = refused({"slice": slice_}, scroll="1m")
    assert (error.error_type, error.reason) == (
        "x_content_parse_exception",
        f"[slice] failed to parse field [{field}]",
    )
    assert (error.caused_by.error_type, error.caused_by.reason) == ("illegal_argument_exception", cause)
    assert error.body()["error"]["root_cause"][0]["type"] == "x_content_parse_exception"


def test_slice_needs_id_and_max():
    assert refused({"slice": {"id": 0}}, scroll="1m").reason == "max must be greater than 1"
    assert refused({"slice": {"max": 3}}, scroll="1m").reason == "id must be greater than or equal to 0"
    assert refused({"slice": {"id": 0, "max": 2, "x": 1}}, scroll="1m").reason == "[slice] unknown field [x]"


# ---------------------------------------------------------------------------------------------
# what leafsearch does not implement


@pytest.mark.parametrize(
    "body",
    [
        {"rank": {"rrf": {}}},
        {"runtime_mappings": {"x": {"type": "long"}}},
    ],
)
def test_unsupported_features_are_refused_by_name(body):
    error = refused(body)
    key = next(iter(body))
    assert (error.error_type, error.status) == ("illegal_argument_exception", 400)
    assert error.reason == f"[{key}] is not supported by leafsearch"


@pytest.mark.parametrize(
    ("body", "error_type", "reason"),
    [
        ({"window_size": 5}, "parsing_exception", "missing rescore type"),
        (
            {"window_size": 5, "learning_to_rank": {}},
            "parsing_exception",
            "rescore doesn't support rescorer with name [learning_to_rank]",
        ),
        ({"query": {}}, "illegal_argument_exception", "rescore_query cannot be null"),
        (
            {"query": {"rescore_query": {"match_all": {}}, "x": 1}},
            "x_content_parse_exception",
            "[query] unknown field [x]",
        ),
        (
            {"query": {"rescore_query": {"match_all": {}}, "score_mode": "sum"}},
            "x_content_parse_exception",
            "[query] failed to parse field [score_mode]",
        ),
    ],
)
def test_rescore_is_parsed_as_elasticsearch_parses_it(body, error_type, reason):
    for rescore in (body, [body]):
        error = refused({"rescore": rescore})
        assert (error.error_type, error.reason) == (error_type, reason)


def test_rescore_defaults():
    body = {"rescore": {"query": {"rescore_query": {"match_all": {}}}}}
    (rescorer,) = parse_search_request(body, {}).rescore
    assert (rescorer.window_size, rescorer.query_weight, rescorer.rescore_query_weight) == (10, 1.0, 1.0)
    assert rescorer.score_mode == "total"


def test_highlight_and_empty_extras_are_accepted():
    request = parse_search_request(
        {"highlight": {"fields": {"body": {}}}, "script_fields": {}, "runtime_mappings": {}, "ext": {}}, {}
    )
    assert request.size == 10


# ---------------------------------------------------------------------------------------------
# URL parameters


def test_q_becomes_a_query_string_query_over_the_body_query():
    request = parse_search_request(
        {"query": {"term": {"a": "b"}}},
        {
            "q": "user:kimchy",
            "df": "user",
            "default_operator": "AND",
            "analyze_wildcard": "",
            "lenient": "true",
        },
    )
    assert request.query == QueryString(
        query="user:kimchy", default_field="user", default_operator="and", analyze_wildcard=True, lenient=True
    )


def test_query_string_parameters_without_q_are_refused():
    error = refused(None, {"df": "a", "lenient": "true"}, path="/idx/_search")
    assert (
        error.reason
        == "request [/idx/_search] contains parameters [df, lenient] but missing query string parameter 'q'."
    )


def test_url_parameters_override_the_body():
    request = parse_search_request(
        {"from": 1, "size": 2, "explain": True, "sort": [{"a": "desc"}]},
        {
            "from": "3",
            "size": "4",
            "explain": "",
            "sort": "b:desc,c,d:foo",
            "track_scores": "",
            "typed_keys": "",
        },
    )
    assert (request.from_, request.size, request.explain, request.track_scores, request.typed_keys) == (
        3,
        4,
        False,
        True,
        True,
    )
    assert request.sort == [SortSpec("a", "desc"), SortSpec("b", "desc"), SortSpec("c", "asc")]


@pytest.mark.parametrize(
    ("params", "reason", "cause"),
    [
        ({"size": "abc"}, "Failed to parse int parameter [size] with value [abc]", 'For input string: "abc"'),
        ({"from": "1.5"}, "Failed to parse int parameter [from] with value [1.5]", 'For input string: "1.5"'),
        (
            {"terminate_after": ""},
            "Failed to parse int parameter [terminate_after] with value []",
            'For input string: ""',
        ),
    ],
)
def test_bad_integer_parameters(params, reason, cause):
    error = refused(None, params)
    assert (error.error_type, error.reason, error.caused_by.reason) == (
        "illegal_argument_exception",
        reason,
        cause,
    )
    assert error.body()["error"]["root_cause"][0]["type"] == "illegal_argument_exception"


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"size": "-2"}, "[size] parameter cannot be negative, found [-2]"),
        ({"version": "maybe"}, "Failed to parse value [maybe] as only [true] or [false] are allowed."),
        ({"search_type": "scan"}, "No search type for [scan]"),
        ({"search_type": "query_and_fetch"}, "Unsupported search type [query_and_fetch]"),
        ({"batched_reduce_size": "1"}, "batchedReduceSize must be >= 2"),
        ({"pre_filter_shard_size": "0"}, "preFilterShardSize must be >= 1"),
        ({"max_concurrent_shard_requests": "0"}, "maxConcurrentShardRequests must be >= 1"),
        (
            {"scroll": "forever"},
            "failed to parse setting [scroll] with value [forever] as a time value: "
            "unit is missing or unrecognized",
        ),
    ],
)
def test_bad_parameters(params, reason):
    error = refused(None, params)
    assert (error.error_type, error.reason) == ("illegal_argument_exception", reason)


def test_search_type_query_then_fetch_is_accepted():
    assert parse_search_request(None, {"search_type": "dfs_query_then_fetch"}).size == 10


def test_scroll_comes_from_the_argument_or_the_parameter():
    assert parse_search_request(None, {"scroll": "1m"}).scroll == "1m"
    assert parse_search_request(None, {}, scroll="30s").scroll == "30s"


# ---------------------------------------------------------------------------------------------
# validation rules (SPEC 4 and SearchRequest.validate)


def test_scroll_refusals_are_collected_into_one_validation_error():
    reason = validation(
        {"from": 5, "size": 0, "track_total_hits": False, "search_after": [1], "sort": ["a"]},
        {"request_cache": "true"},
        scroll="1m",
    )
    assert reason == (
        "Validation Failed: 1: disabling [track_total_hits] is not allowed in a scroll context;"
        "2: using [from] is not allowed in a scroll context;"
        "3: [size] cannot be [0] in a scroll context;"
        "4: [search_after] cannot be used in a scroll context;"
        "5: [from] parameter must be set to 0 when [search_after] is used;"
        "6: [request_cache] cannot be used in a scroll context;"
    )


def test_scroll_accepts_from_zero_and_an_exact_total():
    request = parse_search_request({"from": 0, "track_total_hits": True}, {}, scroll="1m")
    assert request.scroll == "1m"


def test_limited_total_is_refused_in_a_scroll():
    assert validation({"track_total_hits": 100}, scroll="1m") == (
        "Validation Failed: 1: disabling [track_total_hits] is not allowed in a scroll context;"
    )


def test_from_with_search_after_must_be_zero():
    assert validation({"from": 10, "search_after": [1], "sort": ["a"]}) == (
        "Validation Failed: 1: [from] parameter must be set to 0 when [search_after] is used;"
    )
    assert parse_search_request({"from": 0, "search_after": [1], "sort": ["a"]}, {}).from_ == 0


def test_slice_needs_a_scroll_or_a_pit():
    assert validation({"slice": {"id": 0, "max": 2}}) == (
        "Validation Failed: 1: [slice] can only be used with [scroll] or [point-in-time] requests;"
    )
    assert parse_search_request({"slice": {"id": 0, "max": 2}, "pit": {"id": "p"}}, {}).slice == SliceSpec(
        0, 2
    )


def test_shard_doc_needs_a_pit():
    assert validation({"sort": [{"_shard_doc": "desc"}]}) == (
        "Validation Failed: 1: [_shard_doc] sort field cannot be used without [point in time];"
    )


def test_pit_refusals():
    reason = validation(
        {"pit": {"id": "p"}},
        {
            "routing": "1",
            "preference": "_local",
            "expand_wildcards": "all",
            "ccs_minimize_roundtrips": "true",
        },
        scroll="1m",
        indices="logs",
    )
    # RestSearchAction.preparePointInTime refuses these while reading, before validate() runs.
    assert reason == (
        "Validation Failed: 1: [indices] cannot be used with point in time. "
        "Do not specify any index with point in time.;"
        "2: [indicesOptions] cannot be used with point in time;"
        "3: [routing] cannot be used with point in time;"
        "4: [preference] cannot be used with point in time;"
        "5: [ccs_minimize_roundtrips] cannot be used with point in time;"
    )
    assert validation({"pit": {"id": "p"}}, {}, scroll="1m") == (
        "Validation Failed: 1: using [point in time] is not allowed in a scroll context;"
    )


# ---------------------------------------------------------------------------------------------
# the sort the shards execute


def test_pit_sorts_gain_a_shard_doc_tiebreaker():
    request = parse_search_request({"pit": {"id": "p"}, "sort": [{"n": "desc"}]}, {})
    assert request.sort == [SortSpec("n", "desc"), SortSpec("_shard_doc", "asc")]


def test_pit_tiebreaker_is_not_added_twice_or_to_an_old_cursor():
    explicit = parse_search_request({"pit": {"id": "p"}, "sort": [{"_shard_doc": "desc"}]}, {})
    assert explicit.sort == [SortSpec("_shard_doc", "desc")]
    old_cursor = parse_search_request({"pit": {"id": "p"}, "sort": ["n"], "search_after": [5]}, {})
    assert old_cursor.sort == [SortSpec("n", "asc")]
    new_cursor = parse_search_request({"pit": {"id": "p"}, "sort": ["n"], "search_after": [5, 12]}, {})
    assert new_cursor.sort == [SortSpec("n", "asc"), SortSpec("_shard_doc", "asc")]


def test_pit_without_sort_stays_a_relevance_search():
    assert parse_search_request({"pit": {"id": "p"}}, {}).sort == []


def test_a_lone_score_descending_sort_is_no_sort():
    assert parse_search_request({"sort": ["_score"]}, {}).sort == []
    assert parse_search_request({"sort": [{"_score": "asc"}]}, {}).sort == [SortSpec("_score", "asc")]
    assert parse_search_request({"sort": ["_score", "n"]}, {}).sort == [
        SortSpec("_score", "desc"),
        SortSpec("n", "asc"),
    ]


# ---------------------------------------------------------------------------------------------
# sort forms (sort.py)


def test_every_sort_form():
    specs = parse_sort(
        [
            "plain",
            "_score",
            "_doc",
            {"_shard_doc": "desc"},
            {"a": "DESC", "b": "asc"},
            {"_score": {"order": "asc"}},
            {
                "c": {
                    "order": "desc",
                    "missing": "_first",
                    "mode": "AVG",
                    "unmapped_type": "long",
                    "numeric_type": "Date_Nanos",
                    "format": "strict_date_optional_time_nanos",
                }
            },
            {"d": {"missing": 0}},
            {"e": {"missing": None}},
        ]
    )
    assert specs == [
        SortSpec("plain", "asc"),
        SortSpec("_score", "desc"),
        SortSpec("_doc", "asc"),
        SortSpec("_shard_doc", "desc"),
        SortSpec("a", "desc"),
        SortSpec("b", "asc"),
        SortSpec("_score", "asc"),
        SortSpec("c", "desc", "_first", "avg", "long", "date_nanos", "strict_date_optional_time_nanos"),
        SortSpec("d", "asc", missing=0),
        SortSpec("e", "asc"),
    ]
    assert parse_sort("x") == [SortSpec("x", "asc")]
    assert parse_sort({"x": {}}) == [SortSpec("x", "asc")]


def test_url_sort_form():
    assert parse_url_sort("a:desc,b,_score,x:y:asc,z:up") == [
        SortSpec("a", "desc"),
        SortSpec("b", "asc"),
        SortSpec("_score", "desc"),
        SortSpec("x:y", "asc"),
    ]


@pytest.mark.parametrize(
    ("sort", "error_type", "reason", "cause"),
    [
        (
            {"a": "up"},
            "illegal_argument_exception",
            "No enum constant org.elasticsearch.search.sort.SortOrder.UP",
            None,
        ),
        (
            {"a": {"order": "up"}},
            "x_content_parse_exception",
            "[field_sort] failed to parse field [order]",
            "No enum constant org.elasticsearch.search.sort.SortOrder.UP",
        ),
        (
            {"a": {"mode": "first"}},
            "x_content_parse_exception",
            "[field_sort] failed to parse field [mode]",
            "Unknown SortMode [first]",
        ),
        (
            {"a": {"numeric_type": "INT"}},
            "x_content_parse_exception",
            "[field_sort] failed to parse field [numeric_type]",
            "invalid value for [numeric_type], must be [long, double, date, date_nanos], got int",
        ),
        (
            {"a": {"sort_order": "asc"}},
            "x_content_parse_exception",
            "[field_sort] unknown field [sort_order]",
            None,
        ),
        (
            {"a": {"order": 1}},
            "x_content_parse_exception",
            "[field_sort] order doesn't support values of type: VALUE_NUMBER",
            None,
        ),
        (
            {"a": {"missing": {}}},
            "x_content_parse_exception",
            "[field_sort] missing doesn't support values of type: START_OBJECT",
            None,
        ),
        (
            {"a": 5},
            "x_content_parse_exception",
            "[field_sort] Expected START_OBJECT but was: VALUE_NUMBER",
            None,
        ),
        ({"_score": {"mode": "min"}}, "x_content_parse_exception", "[_score] unknown field [mode]", None),
        (
            {"a": {"nested_path": "p"}},
            "x_content_parse_exception",
            "[field_sort] failed to parse field [nested_path]",
            "[nested_path] has been removed in favour of the [nested] parameter",
        ),
        (
            {"a": {"nested": {"filter": {"match_all": {}}}}},
            "illegal_argument_exception",
            "[nested] requires 'path' field",
            None,
        ),
        (
            {"a": {"nested": {"path": "p", "depth": 1}}},
            "x_content_parse_exception",
            "[nested] unknown field [depth]",
            None,
        ),
        (
            {"_script": {"type": "number"}},
            "illegal_argument_exception",
            "Required [script]",
            None,
        ),
        (
            [1],
            "illegal_argument_exception",
            "malformed sort format, within the sort array, an object, or an actual string are allowed",
            None,
        ),
    ],
)
def test_sort_errors(sort, error_type, reason, cause):
    with pytest.raises(ElasticError) as info:
        parse_sort(sort)
    error = info.value
    assert (error.error_type, error.reason, error.status) == (error_type, reason, 400)
    assert (error.caused_by.reason if error.caused_by else None) == cause


def test_malformed_sort_at_the_top_level():
    with pytest.raises(
        ElasticError, match="malformed sort format, either start with array, object, or an actual string"
    ):
        parse_sort(5)


def test_sort_in_the_body_accepts_a_number_as_a_field_name():
    assert parse_search_request({"sort": 5}, {}).sort == [SortSpec("5", "asc")]


# ---------------------------------------------------------------------------------------------
# _count, scroll, clear-scroll


def test_count_request():
    request = parse_count_request(
        {"query": {"term": {"a": "b"}}}, {"terminate_after": "5", "min_score": "1.5"}
    )
    assert isinstance(request.query, Term)
    assert (request.size, request.track_total_hits, request.terminate_after, request.min_score) == (
        0,
        True,
        5,
        1.5,
    )
    assert isinstance(parse_count_request(None, {"q": "x"}).query, QueryString)


def test_count_request_errors():
    with pytest.raises(ElasticError) as info:
        parse_count_request({"query": {"match_all": {}}, "size": 0}, {})
    assert (info.value.error_type, info.value.reason) == (
        "parsing_exception",
        "request does not support [size]",
    )
    with pytest.raises(ElasticError, match=r"Failed to parse float parameter \[min_score\] with value \[x\]"):
        parse_count_request(None, {"min_score": "x"})


def test_scroll_request_sources_and_precedence():
    assert parse_scroll_request(None, {"scroll": "1m"}, "path-id") == ("path-id", "1m")
    assert parse_scroll_request({"scroll_id": "body-id"}, {"scroll_id": "q-id"}, "p") == ("body-id", None)
    assert parse_scroll_request({"scroll_id": "b", "scroll": "2m"}, {"scroll": "1m"}) == ("b", "2m")


def test_scroll_request_errors():
    with pytest.raises(ElasticError) as info:
        parse_scroll_request(None, {})
    assert (info.value.error_type, info.value.reason) == (
        "action_request_validation_exception",
        "Validation Failed: 1: scrollId is missing;",
    )
    with pytest.raises(ElasticError) as info:
        parse_scroll_request({"scroll_id": 5}, {})
    assert (
        info.value.reason
        == "Unknown parameter [scroll_id] in request body or parameter is of the wrong type[VALUE_NUMBER] "
    )
    with pytest.raises(ElasticError, match="unit is missing or unrecognized"):
        parse_scroll_request({"scroll_id": "a", "scroll": "5"}, {})


def test_clear_scroll_ids():
    assert parse_clear_scroll(None, {}, "a,b") == ["a", "b"]
    assert parse_clear_scroll(None, {"scroll_id": "c"}, None) == ["c"]
    assert parse_clear_scroll(None, {}, "_all") == ["_all"]
    assert parse_clear_scroll({"scroll_id": ["x", "y"]}, {}, "ignored") == ["x", "y"]
    assert parse_clear_scroll({"scroll_id": "x"}, {}) == ["x"]


@pytest.mark.parametrize(
    ("body", "error_type", "reason"),
    [
        ({}, "action_request_validation_exception", "Validation Failed: 1: no scroll ids specified;"),
        (
            {"scroll_id": [{}]},
            "illegal_argument_exception",
            "scroll_id array element should only contain scroll_id",
        ),
        (
            {"scroll_id": None},
            "illegal_argument_exception",
            "scroll_id element should only contain scroll_id",
        ),
        (
            {"ids": ["x"]},
            "illegal_argument_exception",
            "Unknown parameter [ids] in request body or parameter is of the wrong type[START_ARRAY] ",
        ),
    ],
)
def test_clear_scroll_errors(body, error_type, reason):
    with pytest.raises(ElasticError) as info:
        parse_clear_scroll(body, {}, "from-path")
    assert (info.value.error_type, info.value.reason) == (error_type, reason)
