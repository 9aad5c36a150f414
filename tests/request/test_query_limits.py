"""Query-side limits through the HTTP API: no pattern can stall the server, and Elasticsearch's
limits (max_determinized_states, index.max_regex_length, index.max_terms_count, max_clause_count,
the query nesting depth, fuzziness values) refuse with its error types and messages."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from tests import web
from tests.conftest import error_of as plain_error_of

LIVENESS_TIMEOUT = 5.0
MAPPINGS = {"properties": {"k": {"type": "keyword"}, "t": {"type": "text"}}}


@pytest.fixture
def index(http: httpx.Client, new_index) -> str:
    """Keywords of long `a` runs (the worst case of a backtracking matcher) and a few others."""
    name = new_index(mappings=MAPPINGS)
    docs = [{"k": "a" * (30 + i % 20) + "c" * (i // 20), "t": f"hello w{i}"} for i in range(400)]
    docs += [{"k": "aaaaaaaab", "t": "aab"}, {"k": "12", "t": "x"}, {"k": "007", "t": "y"}]
    docs += [{"k": "abc", "t": "z"}]
    lines = []
    for i, doc in enumerate(docs):
        lines += [json.dumps({"index": {"_id": str(i)}}), json.dumps(doc)]
    response = http.post(
        f"/{name}/_bulk?refresh=true",
        content="\n".join(lines) + "\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and not response.json()["errors"]
    return name


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The `error` object of a refusal (its root cause may differ from the error itself)."""
    body = response.json()
    assert body["status"] == response.status_code
    return body["error"]


def search(http: httpx.Client, index: str, query: dict[str, Any], **params: Any) -> httpx.Response:
    return http.post(f"/{index}/_search", json={"query": query, "size": 1000}, params=params)


def keys(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {hit["_source"]["k"] for hit in response.json()["hits"]["hits"]}


def shard_refusal(response: httpx.Response, message: str) -> None:
    """A "failed to create query" refusal: Elasticsearch's query_shard_exception naming its cause."""
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "search_phase_execution_exception"
    assert error["root_cause"][0]["type"] == "query_shard_exception"
    assert error["root_cause"][0]["reason"] == f"failed to create query: {message}"
    assert error["caused_by"]["type"] == "query_shard_exception"


# -- patterns run in linear time ---------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        {"wildcard": {"k": "*a*a*a*a*a*a*a*b"}},
        {"regexp": {"k": "(a+)+b"}},
        {"regexp": {"k": "(a|aa)*b"}},
        {"query_string": {"query": "k:/(a+)+b/"}},
        {"query_string": {"query": "k:*a*a*a*a*a*a*a*b"}},
    ],
    ids=["wildcard", "regexp", "regexp-alternation", "query-string-regexp", "query-string-wildcard"],
)
def test_pathological_pattern_answers_while_the_server_stays_live(http, server, index, query):
    result: dict[str, httpx.Response] = {}

    def run() -> None:
        with web.Client(base_url=server, timeout=60) as client:
            result["search"] = search(client, index, query)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        with web.Client(base_url=server, timeout=LIVENESS_TIMEOUT) as other:
            assert other.get("/").status_code == 200
    finally:
        worker.join(60)
    assert keys(result["search"]) == {"aaaaaaaab"}


def test_patterns_match_as_lucene_does(http, index):
    def matched(query: dict[str, Any]) -> set[str]:
        return {k for k in keys(search(http, index, query)) if len(k) < 10}  # not the long runs

    assert matched({"regexp": {"k": "<1-20>"}}) == {"12", "007"}  # leading zeros allowed
    assert matched({"regexp": {"k": "<000-010>"}}) == {"007"}  # fixed width
    assert matched({"regexp": {"k": "~(a.*)&[0-9]+"}}) == {"12", "007"}
    assert matched({"regexp": {"k": "a@"}}) == {"aaaaaaaab", "abc"}
    assert matched({"regexp": {"k": "ab#"}}) == set()
    assert matched({"regexp": {"k": '"ab"c'}}) == {"abc"}
    assert matched({"regexp": {"k": "\\d+"}}) == {"12", "007"}
    assert matched({"regexp": {"k": {"value": "ABC", "case_insensitive": True}}}) == {"abc"}
    # Without the flag, an operator is an ordinary character.
    assert matched({"regexp": {"k": {"value": "~(abc)", "flags": "NONE"}}}) == set()
    assert matched({"regexp": {"k": {"value": "1<2-2>", "flags": "INTERVAL"}}}) == {"12"}
    assert matched({"wildcard": {"k": "a?c"}}) == {"abc"}
    assert matched({"prefix": {"k": {"value": "AA", "case_insensitive": True}}}) == {"aaaaaaaab"}


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("(ab", "expected ')' at position 3"),
        ("[ab", "expected ']' at position 3"),
        ("a{", "integer expected at position 2"),
        ("ab)", "end-of-string expected at position 2"),
        ("[z-a]", "invalid range: from (122) cannot be > to (97)"),
    ],
)
def test_bad_regexp_is_refused_with_lucene_message(http, index, pattern, message):
    shard_refusal(search(http, index, {"regexp": {"k": pattern}}), message)


def test_complement_inside_a_concatenation_is_refused(http, index):
    response = search(http, index, {"regexp": {"k": "a~(b)c"}})
    assert response.status_code == 400, response.text
    assert "complement [~] and intersection [&]" in error_of(response)["root_cause"][0]["reason"]


def test_unknown_regexp_flag(http, index):
    response = search(http, index, {"regexp": {"k": {"value": "a", "flags": "ALL|NOPE"}}})
    assert response.status_code == 400
    assert error_of(response)["root_cause"][0] == {
        "type": "illegal_argument_exception",
        "reason": "Unknown regexp flag [NOPE]",
    }


def test_max_determinized_states(http, index):
    repeated = "(abcdefghij){1000}"
    message = (
        "Determinizing automaton with 10001 states and 10001 transitions would require more than "
        "10000 effort."
    )
    shard_refusal(search(http, index, {"regexp": {"k": repeated}}), message)
    relaxed = {"regexp": {"k": {"value": repeated, "max_determinized_states": 20000}}}
    assert keys(search(http, index, relaxed)) == set()
    strict = {"regexp": {"k": {"value": "abc", "max_determinized_states": 2}}}
    assert search(http, index, strict).status_code == 400
    deep = "(" * 500 + "a" + ")" * 500
    assert search(http, index, {"regexp": {"k": deep}}).status_code == 400


# -- index.max_regex_length, index.max_terms_count ---------------------------------------------


def test_max_regex_length_is_a_dynamic_index_setting(http, index):
    pattern = "a" * 1001
    message = (
        "The length of regex [1001] used in the Regexp Query request has exceeded the allowed maximum of "
        "[1000]. This maximum can be set by changing the [index.max_regex_length] index level setting."
    )
    shard_refusal(search(http, index, {"regexp": {"k": pattern}}), message)
    huge = search(http, index, {"regexp": {"k": "a" * 100_000}})
    assert huge.status_code == 400
    assert http.put(f"/{index}/_settings", json={"index.max_regex_length": 2000}).status_code == 200
    assert keys(search(http, index, {"regexp": {"k": pattern}})) == set()


def test_max_terms_count_is_a_dynamic_index_setting(http, new_index):
    name = new_index(settings={"index.max_terms_count": 10}, mappings=MAPPINGS)
    values = [f"v{i}" for i in range(11)]
    message = (
        "The number of terms [11] used in the Terms Query request has exceeded the allowed maximum of [10]. "
        "This maximum can be set by changing the [index.max_terms_count] index level setting."
    )
    shard_refusal(search(http, name, {"terms": {"k": values}}), message)
    assert http.put(f"/{name}/_settings", json={"index.max_terms_count": 11}).status_code == 200
    assert search(http, name, {"terms": {"k": values}}).status_code == 200


def test_terms_of_many_long_values_cost_no_count_times_longest_array(http, index):
    # 20,000 values, one of 1 MB: a key array as wide as the longest value would be 20 GB.
    values = [f"v{i}" for i in range(19_999)] + ["x" * 1_000_000, "abc"]
    assert keys(search(http, index, {"terms": {"k": values}})) == {"abc"}


# -- max_clause_count --------------------------------------------------------------------------


def test_a_bool_of_more_clauses_than_max_clause_count(http, index):
    clauses = [{"term": {"k": f"v{i}"}} for i in range(4097)]
    refused = search(http, index, {"bool": {"should": clauses}})
    shard_refusal(refused, "maxClauseCount is set to 4096")
    assert search(http, index, {"bool": {"should": clauses[:4096]}}).status_code == 200


def test_a_match_of_more_terms_than_max_clause_count(http, index):
    text = " ".join(f"w{i}" for i in range(20_000))
    shard_refusal(search(http, index, {"match": {"t": text}}), "maxClauseCount is set to 4096")
    hits = search(http, index, {"match": {"t": " ".join(["hello"] * 4096)}})
    assert hits.status_code == 200 and hits.json()["hits"]["total"]["value"] == 400


def test_nested_clauses_count_through_every_level(http, index):
    half = [{"term": {"k": f"v{i}"}} for i in range(2100)]
    query = {"bool": {"should": [{"bool": {"should": half}}, {"bool": {"should": half}}]}}
    response = search(http, index, query)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["root_cause"][0] == {
        "type": "illegal_argument_exception",
        "reason": "Query rewrite failed: too many clauses",
    }
    assert error["caused_by"]["type"] == "illegal_argument_exception"


def test_max_clause_count_is_a_node_setting(http):
    body = {"persistent": {"indices.query.bool.max_clause_count": 10}}
    response = http.put("/_cluster/settings", json=body)
    assert response.status_code == 400
    assert plain_error_of(response)["reason"] == (
        "persistent setting [indices.query.bool.max_clause_count], not dynamically updateable"
    )


# -- nesting depth, fuzziness ------------------------------------------------------------------


def test_query_nested_deeper_than_max_nested_depth(http, index):
    depth = 300  # deep enough for a recursive parser to fail, shallow enough for the JSON parser
    body = '{"query":' + '{"bool":{"must":[' * depth + '{"match_all":{}}' + "]}}" * depth + "}"
    response = http.post(f"/{index}/_search", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert error_of(response)["root_cause"][0] == {
        "type": "illegal_argument_exception",
        "reason": "The nested depth of the query exceeds the maximum nested depth for queries set in "
        "[indices.query.bool.max_nested_depth]",
    }
    deeper = '{"query":' + '{"bool":{"must":[' * 5000 + '{"match_all":{}}' + "]}}" * 5000 + "}"
    response = http.post(f"/{index}/_search", content=deeper, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert error_of(response)["type"] == "x_content_parse_exception"


@pytest.mark.parametrize(
    "fuzziness, reason",
    [
        ("NaN", "fuzziness cannot be [NaN]."),
        ("Infinity", "fuzziness cannot be [Infinity]."),
        ("1.5", "fuzziness needs to be one of 0.0, 1.0 or 2.0 but was 1.5"),
        (3, "Valid edit distances are [0, 1, 2] but was [3]"),
        ("", "fuzziness cannot be null or empty."),
    ],
)
def test_bad_fuzziness(http, index, fuzziness, reason):
    response = search(http, index, {"match": {"t": {"query": "hello", "fuzziness": fuzziness}}})
    assert response.status_code == 400
    expected = {"type": "illegal_argument_exception", "reason": reason}
    assert plain_error_of(response)["root_cause"][0] == expected


def test_fuzziness_values_elasticsearch_accepts(http, index):
    for fuzziness in ("AUTO", "auto:2,5", "1", "1.0", 2):
        response = search(http, index, {"match": {"t": {"query": "helo", "fuzziness": fuzziness}}})
        assert response.json()["hits"]["total"]["value"] == 400, fuzziness
    assert search(http, index, {"query_string": {"query": "t:helo~NaN"}}).status_code == 200
