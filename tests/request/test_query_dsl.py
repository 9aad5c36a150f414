"""Parsing the query DSL: the typed tree of each query and Elasticsearch's refusals (type and message),
plus the query-string parsers' trees and syntax errors."""

from __future__ import annotations

import pytest

from leafsearch.errors import ElasticError
from leafsearch.request.query_dsl import (
    Bool,
    ConstantScore,
    DisMax,
    Exists,
    Ids,
    Match,
    MatchAll,
    MatchNone,
    MatchPhrase,
    MatchPhrasePrefix,
    MultiMatch,
    Nested,
    Prefix,
    QueryString,
    Range,
    Regexp,
    SimpleQueryString,
    Term,
    Terms,
    TermsLookup,
    Wildcard,
    outermost,
    parse_query,
    queries_within,
    query_is_match_all,
    query_key,
)
from leafsearch.request.query_string import (
    Group,
    Leaf,
    QuerySyntaxError,
    parse_query_string,
    parse_simple_query_string,
)


def refused(body) -> ElasticError:
    with pytest.raises(ElasticError) as info:
        parse_query(body)
    return info.value


# -- trees ----------------------------------------------------------------------------------


def test_missing_query_is_match_all():
    assert parse_query(None) == MatchAll()
    assert parse_query({"match_all": {"boost": 2}}) == MatchAll(2.0)
    assert parse_query({"match_none": {}}) == MatchNone()


def test_queries_within_lists_every_node_and_stops_at_its_kinds():
    query = parse_query(
        {
            "bool": {
                "must": [{"match_all": {}}, {"constant_score": {"filter": {"term": {"a": 1}}}}],
                "filter": [
                    {
                        "nested": {
                            "path": "n",
                            "query": {"nested": {"path": "n.m", "query": {"ids": {"values": ["x"]}}}},
                        }
                    }
                ],
            }
        }
    )
    kinds = [type(q) for q in queries_within(query)]
    assert kinds == [Bool, Nested, Nested, Ids, ConstantScore, Term, MatchAll]  # last clause first
    assert [type(q) for q in queries_within(query, stop_at=Nested)] == [
        Bool,
        Nested,
        ConstantScore,
        Term,
        MatchAll,
    ]
    (outer,) = outermost(query, Nested)
    assert outer.path == "n"
    assert queries_within(parse_query({"match_all": {}})) == [MatchAll()]  # a class of one field


def test_match_forms():
    assert parse_query({"match": {"title": "quick fox"}}) == Match("title", "quick fox")
    assert parse_query({"match": {"n": 5}}) == Match("n", 5)
    long_form = parse_query(
        {
            "match": {
                "title": {
                    "query": "quick fox",
                    "operator": "AND",
                    "minimum_should_match": 2,
                    "zero_terms_query": "all",
                    "fuzziness": "AUTO",
                    "lenient": True,
                    "analyzer": "standard",
                    "boost": 1.5,
                    "_name": "named",
                    "auto_generate_synonyms_phrase_query": False,
                }
            }
        }
    )
    assert long_form == Match(
        "title",
        "quick fox",
        operator="and",
        minimum_should_match="2",
        zero_terms_query="all",
        fuzziness="AUTO",
        lenient=True,
        analyzer="standard",
        boost=1.5,
    )


def test_phrase_queries():
    assert parse_query({"match_phrase": {"t": {"query": "a b", "slop": 2}}}) == MatchPhrase(
        "t", "a b", slop=2
    )
    assert parse_query(
        {"match_phrase_prefix": {"t": {"query": "a b", "max_expansions": 10}}}
    ) == MatchPhrasePrefix("t", "a b", max_expansions=10)


def test_multi_match():
    query = parse_query(
        {
            "multi_match": {
                "query": "x",
                "fields": ["a^2", "b.*"],
                "type": "most_fields",
                "tie_breaker": 0.3,
                "operator": "and",
            }
        }
    )
    assert query == MultiMatch("x", ("a^2", "b.*"), type="most_fields", tie_breaker=0.3, operator="and")
    assert parse_query({"multi_match": {"query": "x", "fields": "a"}}).fields == ("a",)


def test_term_level_queries():
    assert parse_query({"term": {"user": "kimchy"}}) == Term("user", "kimchy")
    assert parse_query({"term": {"user": {"value": "Kimchy", "case_insensitive": True, "boost": 2}}}) == Term(
        "user", "Kimchy", True, 2.0
    )
    assert parse_query({"terms": {"user": ["a", 1, True], "boost": 3}}) == Terms("user", ("a", 1, True), 3.0)
    assert parse_query({"exists": {"field": "f"}}) == Exists("f")
    assert parse_query({"ids": {"values": ["1", 2]}}) == Ids(("1", "2"))
    assert parse_query({"prefix": {"f": "ab"}}) == Prefix("f", "ab")
    assert parse_query(
        {"prefix": {"f": {"value": "ab", "case_insensitive": True, "rewrite": "x"}}}
    ) == Prefix("f", "ab", True)
    assert parse_query({"wildcard": {"f": {"wildcard": "a*b"}}}) == Wildcard("f", "a*b")
    assert parse_query({"regexp": {"f": {"value": "a.*", "flags": "ALL"}}}) == Regexp("f", "a.*")


def test_range():
    assert parse_query({"range": {"n": {"gt": 1, "lte": 5, "boost": 2}}}) == Range(
        "n", 1, 5, include_lower=False, include_upper=True, boost=2.0
    )
    assert parse_query(
        {
            "range": {
                "d": {
                    "gte": "now-1d/d",
                    "lt": "now",
                    "format": "yyyy",
                    "time_zone": "+01:00",
                    "relation": "WITHIN",
                }
            }
        }
    ) == Range("d", "now-1d/d", "now", True, False, format="yyyy", time_zone="+01:00", relation="within")
    assert parse_query({"range": {"n": {"from": 1, "to": 2, "include_lower": False}}}) == Range(
        "n", 1, 2, include_lower=False
    )


def test_bool_accepts_objects_and_arrays():
    term = {"term": {"a": 1}}
    query = parse_query(
        {
            "bool": {
                "must": term,
                "should": [term, term],
                "filter": [],
                "must_not": term,
                "minimum_should_match": "75%",
                "boost": 2,
                "adjust_pure_negative": True,
            }
        }
    )
    assert query == Bool(
        must=(Term("a", 1),),
        should=(Term("a", 1), Term("a", 1)),
        must_not=(Term("a", 1),),
        minimum_should_match="75%",
        boost=2.0,
    )


def test_compound_queries():
    assert parse_query({"constant_score": {"filter": {"term": {"a": 1}}, "boost": 1.2}}) == ConstantScore(
        Term("a", 1), 1.2
    )
    assert parse_query({"dis_max": {"queries": [{"term": {"a": 1}}], "tie_breaker": 0.7}}) == DisMax(
        (Term("a", 1),), 0.7
    )


def test_query_strings():
    assert parse_query(
        {
            "query_string": {
                "query": "a AND b",
                "default_field": "t",
                "default_operator": "and",
                "allow_leading_wildcard": False,
                "fuzziness": "AUTO",
            }
        }
    ) == QueryString("a AND b", default_field="t", default_operator="and", allow_leading_wildcard=False)
    assert parse_query(
        {"simple_query_string": {"query": "a | b", "fields": ["t"], "flags": "OR|AND"}}
    ) == SimpleQueryString("a | b", fields=("t",))


def test_query_key_and_match_all():
    key = query_key(parse_query({"term": {"n": 1}}))
    assert key == query_key(parse_query({"term": {"n": 1}}))
    assert key != query_key(parse_query({"term": {"n": 1.0}}))
    assert key != query_key(parse_query({"term": {"n": True}}))
    assert hash(parse_query({"bool": {"must": {"match": {"t": "x"}}}})) is not None
    assert query_is_match_all(parse_query(None))
    assert query_is_match_all(parse_query({"bool": {}}))
    assert not query_is_match_all(parse_query({"bool": {"filter": {"match_all": {}}}}))


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "error_type", "reason"),
    [
        ({"mach": {"a": "b"}}, "parsing_exception", "unknown query [mach] did you mean [match]?"),
        ({"foo": {}}, "parsing_exception", "unknown query [foo]"),
        ({"terma": {}}, "parsing_exception", "unknown query [terma] did you mean any of [term, terms]?"),
        ({"boool": {}}, "parsing_exception", "unknown query [boool] did you mean [bool]?"),
        (
            {"match": {"a": {"query": "x", "foo": 1}}},
            "parsing_exception",
            "[match] query does not support [foo]",
        ),
        (
            {"match": {"a": "x", "b": "y"}},
            "parsing_exception",
            "[match] query doesn't support multiple fields, found [a] and [b]",
        ),
        ({"match": {"a": {"operator": "and"}}}, "parsing_exception", "No text specified for text query"),
        (
            {"match": {"a": {"query": "x", "zero_terms_query": "some"}}},
            "parsing_exception",
            "Unsupported zero_terms_query value [some]",
        ),
        (
            {"match": {"a": {"query": "x", "operator": "xor"}}},
            "illegal_argument_exception",
            "operator needs to be either [OR, AND], but not [xor]",
        ),
        ({"match": "x"}, "parsing_exception", "[match] query malformed, no start_object after query name"),
        (
            {"match": {"a": "x"}, "term": {"b": "y"}},
            "parsing_exception",
            "[match] malformed query, expected [END_OBJECT] but found [FIELD_NAME]",
        ),
        ([], "parsing_exception", "[_na] query malformed, must start with start_object"),
        (
            {"term": {"a": 1, "b": 2}},
            "parsing_exception",
            "[term] query doesn't support multiple fields, found [a] and [b]",
        ),
        ({"term": {"a": {"value": 1, "x": 2}}}, "parsing_exception", "[term] query does not support [x]"),
        ({"term": {"a": [1, 2]}}, "parsing_exception", "[term] query does not support array of values"),
        (
            {"terms": {"a": [1], "b": [2]}},
            "parsing_exception",
            "[terms] query does not support multiple fields, found [a] and [b]",
        ),
        ({"terms": {"a": [1], "x": 2}}, "parsing_exception", "[terms] query does not support [x]"),
        ({"range": {"a": {"gt": 1, "gtx": 2}}}, "parsing_exception", "[range] query does not support [gtx]"),
        (
            {"range": {"a": {"gt": 1, "relation": "disjoint"}}},
            "parsing_exception",
            "[range] query does not support relation [disjoint]",
        ),
        ({"exists": {}}, "parsing_exception", "[exists] must be provided with a [field]"),
        ({"exists": {"field": "a", "x": 1}}, "parsing_exception", "[exists] query does not support [x]"),
        ({"ids": {"values": ["1"], "type": "t"}}, "x_content_parse_exception", "[ids] unknown field [type]"),
        ({"match_all": {"x": 1}}, "x_content_parse_exception", "[match_all] unknown field [x]"),
        ({"bool": {"musts": []}}, "x_content_parse_exception", "[bool] unknown field [musts]"),
        ({"constant_score": {}}, "parsing_exception", "[constant_score] requires a 'filter' element"),
        (
            {"constant_score": {"query": {}}},
            "parsing_exception",
            "[constant_score] query does not support [query]",
        ),
        ({"dis_max": {}}, "parsing_exception", "[dis_max] requires 'queries' field with at least one clause"),
        ({"multi_match": {"fields": ["a"]}}, "parsing_exception", "No text specified for multi_match query"),
        (
            {"multi_match": {"query": "x", "type": "best"}},
            "parse_exception",
            "failed to parse [multi_match] query type [best]. unknown type.",
        ),
        (
            {"multi_match": {"query": "x", "foo": 1}},
            "parsing_exception",
            "[multi_match] query does not support [foo]",
        ),
        (
            {"query_string": {"default_field": "a"}},
            "parsing_exception",
            "[query_string] must be provided with a [query]",
        ),
        (
            {"query_string": {"query": "a", "foo": 1}},
            "parsing_exception",
            "[query_string] query does not support [foo]",
        ),
        (
            {"simple_query_string": {"query": "a", "foo": 1}},
            "parsing_exception",
            "[simple_query_string] unsupported field [foo]",
        ),
        ({"simple_query_string": {}}, "parsing_exception", "[simple_query_string] query text missing"),
        (
            {"match_phrase": {"a": {"query": "x", "slop": -1}}},
            "illegal_argument_exception",
            "No negative slop allowed.",
        ),
        (
            {"match_phrase": {"a": {"query": "x", "foo": 1}}},
            "parsing_exception",
            "[match_phrase] query does not support [foo]",
        ),
        (
            {"prefix": {"a": {"value": "x", "foo": 1}}},
            "parsing_exception",
            "[prefix] query does not support [foo]",
        ),
        ({"wildcard": {"a": {"foo": 1}}}, "parsing_exception", "[wildcard] query does not support [foo]"),
        # Token names, as ConstantScoreQueryBuilder, Fuzziness.parse and Jackson print them.
        (
            {"constant_score": {"filter": "x"}},
            "parsing_exception",
            "[constant_score] query does not support [filter]",
        ),
        ({"constant_score": {"filter": [{}]}}, "parsing_exception", "unexpected token [START_ARRAY]"),
        (
            {"constant_score": {"filter": {"match_all": {}}, "boost": True}},
            "x_content_parse_exception",
            "Current token (VALUE_TRUE) not numeric, can not use numeric value accessors",
        ),
        (
            {"match": {"a": {"query": "x", "boost": None}}},
            "x_content_parse_exception",
            "Current token (VALUE_NULL) not numeric, can not use numeric value accessors",
        ),
        (
            {"match": {"a": {"query": "x", "boost": [1]}}},
            "parsing_exception",
            "[match] unknown token [START_ARRAY] after [boost]",
        ),
        (
            {"match": {"a": {"query": "x", "fuzziness": None}}},
            "illegal_argument_exception",
            "Can't parse fuzziness on token: [VALUE_NULL]",
        ),
        (
            {"match": {"a": {"query": "x", "fuzziness": False}}},
            "illegal_argument_exception",
            "Can't parse fuzziness on token: [VALUE_BOOLEAN]",
        ),
    ],
)
def test_refusals(body, error_type, reason):
    error = refused(body)
    assert (error.error_type, error.reason, error.status) == (error_type, reason, 400)


def test_inner_errors_of_bool_keep_their_root_cause():
    error = refused({"bool": {"must": [{"match": {"a": "x"}}, {"foo": {}}]}})
    assert error.error_type == "x_content_parse_exception"
    assert error.reason == "[bool] failed to parse field [must]"
    body = error.body()["error"]
    assert body["root_cause"] == [{"type": "parsing_exception", "reason": "unknown query [foo]"}]
    assert body["caused_by"]["type"] == "parsing_exception"
    nested = refused({"bool": {"filter": {"bool": {"should": {"term": {"a": [1]}}}}}})
    assert nested.reason == "[bool] failed to parse field [filter]"
    assert (
        nested.body()["error"]["root_cause"][0]["reason"] == "[term] query does not support array of values"
    )


def test_unsupported_elasticsearch_queries_are_named():
    error = refused({"intervals": {"f": {"match": {"query": "x"}}}})
    assert error.error_type == "illegal_argument_exception"
    assert error.reason == "[intervals] query is not supported by leafsearch"


def test_terms_lookup_parses_and_refuses_malformed_lookups():
    spec = {"index": "users", "id": "2", "path": "followers", "routing": "r"}
    assert parse_query({"terms": {"user": spec, "boost": 2}}) == TermsLookup(
        "user", "users", "2", "followers", "r", 2.0
    )
    for lookup, error_type, reason in (
        ({"index": "u", "id": "2"}, "illegal_argument_exception", "Required [path]"),
        ({"path": "p"}, "illegal_argument_exception", "Required [index, id]"),
        ({**spec, "size": 1}, "x_content_parse_exception", "[terms_lookup] unknown field [size]"),
        (
            {**spec, "id": 2},
            "x_content_parse_exception",
            "[terms_lookup] id doesn't support values of type: VALUE_NUMBER",
        ),
    ):
        error = refused({"terms": {"user": lookup}})
        assert (error.error_type, error.reason) == (error_type, reason)
    error = refused({"terms": {"user": spec, "other": ["a"]}})
    assert error.reason == "[terms] query does not support multiple fields, found [user] and [other]"


def test_nesting_depth_is_limited():
    body: dict = {"match_all": {}}
    for _ in range(40):
        body = {"bool": {"must": body}}
    error = refused(body)
    assert "exceeds the maximum nested depth" in error.body()["error"]["root_cause"][0]["reason"]


# -- query-string syntax --------------------------------------------------------------------


def test_classic_syntax_tree():
    tree = parse_query_string('title:(quick OR "brown fox"~2) AND -tag:red^2 n:[1 TO *} _exists_:x foo*')
    assert tree == Group(
        (
            (
                "must",
                Group(
                    (
                        ("should", Leaf("text", "title", "quick")),
                        ("should", Leaf("phrase", "title", "brown fox", slop=2)),
                    )
                ),
            ),
            ("must_not", Leaf("text", "tag", "red", boost=2.0)),
            ("should", Leaf("range", "n", lower="1", upper=None, include_upper=False)),
            ("should", Leaf("exists", "x")),
            ("should", Leaf("prefix", None, "foo")),
        )
    )


def test_classic_default_operator_and_runs_of_words():
    assert parse_query_string("a b", "and") == Group((("should", Leaf("text", None, "a b", multi=True)),))
    assert parse_query_string("a OR b", "and") == Group(
        (
            ("should", Leaf("text", None, "a")),
            ("should", Leaf("text", None, "b")),
        )
    )
    assert parse_query_string("a b AND c", "or") == Group(
        (
            ("should", Leaf("text", None, "a")),
            ("must", Leaf("text", None, "b")),
            ("must", Leaf("text", None, "c")),
        )
    )
    assert parse_query_string("   ") is None


@pytest.mark.parametrize("text", ["(a", "a)", "a AND", "OR a", "a:", "[a TO b", '"a', "a^x", "a\\"])
def test_classic_syntax_errors(text):
    with pytest.raises(QuerySyntaxError) as info:
        parse_query_string(text)
    assert str(info.value).startswith(f"Cannot parse '{text}'")


def test_escapes_and_wildcards():
    assert parse_query_string("a\\*b") == Group((("should", Leaf("text", None, "a*b")),))
    assert parse_query_string("a?c") == Group((("should", Leaf("wildcard", None, "a?c")),))
    with pytest.raises(QuerySyntaxError):
        parse_query_string("*ab", allow_leading_wildcard=False)


def test_simple_syntax_tree():
    assert parse_simple_query_string("a + b | c") == Group(
        (
            ("should", Group((("must", Leaf("text", None, "a")), ("must", Leaf("text", None, "b"))))),
            ("should", Leaf("text", None, "c")),
        )
    )
    assert parse_simple_query_string("-a", "or") == Group(
        (
            ("must_not", Leaf("text", None, "a")),
            ("should", Leaf("all", None)),
        )
    )
    assert parse_simple_query_string('"a b"~3 c* d~2') == Group(
        (
            ("should", Leaf("phrase", None, "a b", slop=3)),
            ("should", Leaf("prefix", None, "c")),
            ("should", Leaf("fuzzy", None, "d", fuzziness="2")),
        )
    )
    assert parse_simple_query_string("  ") is None
