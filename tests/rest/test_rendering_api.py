"""Response rendering as Elasticsearch does it: `?pretty` over the whole response (stored sources
and pre-encoded hit pages included), `format=yaml` / `Accept: application/yaml`, `error_trace`,
`human`, through raw HTTP and the official client."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from conftest import REPO, error_of
from elasticsearch import Elasticsearch
from security_helpers import add_user
from starlette.testclient import TestClient

from leafsearch import Node
from leafsearch.errors import TranslogFailed
from leafsearch.rest.app import create_app
from leafsearch.rest.human import human_time, with_human_fields
from leafsearch.rest.render import indent, to_yaml

# Stored exactly as sent: odd spacing, an integer beyond 64 bits, unicode, empty containers and
# a string holding JSON punctuation, none of which a pretty rendering may change.
RAW_SOURCES = [
    b'{"n" :  123456789012345678901234567890, "t":"caf\\u00e9 \xe2\x98\x95", "e":[], "o":{}}',
    b'{ "s": "a: {b}, [c]", "deep": {"list": [{"x": null}, {"y": [2]}], "f": 1.50}}',
]


@pytest.fixture
def raw_index(http: httpx.Client, new_index: Callable[..., str]) -> str:
    name = new_index()
    for i, source in enumerate(RAW_SOURCES):
        response = http.put(f"/{name}/_doc/{i}", content=source, headers={"content-type": "application/json"})
        assert response.status_code == 201, response.text
    http.post(f"/{name}/_refresh")
    return name


def assert_pretty(response: httpx.Response) -> None:
    """Elasticsearch's pretty form: every object and array opened on its own line (nothing left
    compact), `"key" : value`, a final newline, and the same document as the compact answer."""
    text = response.text
    assert text.endswith("}\n") or text.endswith("]\n")
    for line in text.splitlines():
        stripped = line.strip()
        # A compact object or array left on one line would hold `{"` or `":` or `,"`.
        assert '{"' not in stripped and '":' not in stripped and ',"' not in stripped, line
        assert line == line.rstrip()
        assert (len(line) - len(line.lstrip(" "))) % 2 == 0


def test_pretty_search_indents_hits_and_raw_sources(http: httpx.Client, raw_index: str) -> None:
    compact = http.get(f"/{raw_index}/_search", params={"sort": "_doc"})
    pretty = http.get(f"/{raw_index}/_search", params={"sort": "_doc", "pretty": ""})
    assert compact.status_code == pretty.status_code == 200
    assert "\n" not in compact.text  # the fast path is untouched
    assert_pretty(pretty)
    # The 30-digit integer exact, numbers re-encoded as Elasticsearch's pretty printer does, empties
    # as Elasticsearch writes them.
    assert '          "n" : 123456789012345678901234567890,\n' in pretty.text
    assert '"f" : 1.5\n' in pretty.text and '"e" : [ ],' in pretty.text and '"o" : { }' in pretty.text
    assert '"s" : "a: {b}, [c]"' in pretty.text
    hits_pretty = json.loads(pretty.text)["hits"]["hits"]
    hits_compact = json.loads(compact.text)["hits"]["hits"]
    for hit in (*hits_pretty, *hits_compact):
        hit.pop("_score", None)
    assert hits_pretty == hits_compact
    assert hits_pretty[0]["_source"]["n"] == 123456789012345678901234567890


def test_pretty_covers_every_response_that_carries_sources(http: httpx.Client, raw_index: str) -> None:
    opened = http.post(f"/{raw_index}/_search", params={"scroll": "1m", "size": 1, "pretty": ""})
    assert_pretty(opened)
    scroll_id = opened.json()["_scroll_id"]
    assert_pretty(
        http.post("/_search/scroll", params={"pretty": ""}, json={"scroll": "1m", "scroll_id": scroll_id})
    )
    http.request("DELETE", "/_search/scroll", json={"scroll_id": scroll_id})
    pit = http.post(f"/{raw_index}/_pit", params={"keep_alive": "1m"}).json()["id"]
    page = http.post(
        "/_search", params={"pretty": ""}, json={"pit": {"id": pit}, "size": 1, "sort": ["_shard_doc"]}
    )
    assert_pretty(page)
    http.request("DELETE", "/_pit", json={"id": pit})
    ndjson = b"".join(
        orjson.dumps(line) + b"\n" for line in ({"index": raw_index}, {"query": {"match_all": {}}})
    )
    msearch = http.post(
        "/_msearch", params={"pretty": ""}, content=ndjson, headers={"content-type": "application/x-ndjson"}
    )
    assert_pretty(msearch)
    get = http.get(f"/{raw_index}/_doc/0", params={"pretty": ""})
    assert_pretty(get)
    assert get.json()["_source"]["n"] == 123456789012345678901234567890
    assert_pretty(http.get(f"/{raw_index}/_source/1", params={"pretty": ""}))
    assert_pretty(
        http.post("/_mget", params={"pretty": ""}, json={"docs": [{"_index": raw_index, "_id": "0"}]})
    )
    bulk = b'{"index":{"_id":"b"}}\n{"x":1}\n'
    assert_pretty(
        http.post(
            f"/{raw_index}/_bulk",
            params={"pretty": ""},
            content=bulk,
            headers={"content-type": "application/x-ndjson"},
        )
    )
    assert_pretty(http.get("/no-such-index-here/_search", params={"pretty": ""}))


def test_pretty_through_the_official_client(es: Elasticsearch, raw_index: str) -> None:
    plain = es.search(index=raw_index, sort="_doc")
    pretty = es.options(headers={}).search(index=raw_index, sort="_doc", pretty=True)
    assert pretty["hits"]["hits"][0]["_source"] == plain["hits"]["hits"][0]["_source"]
    assert pretty["hits"]["hits"][0]["_source"]["n"] == 123456789012345678901234567890


def test_indent_is_jacksons_pretty_form() -> None:
    compact = b'{"a":[],"b":{},"c":[1,{"d":"x,\\": []"}],"e":null,"f":1.50,"g":"[]","h\\\\":[[],{}]}'
    expected = (
        b'{\n  "a" : [ ],\n  "b" : { },\n  "c" : [\n    1,\n    {\n      "d" : "x,\\": []"\n    }\n  ],\n'
        b'  "e" : null,\n  "f" : 1.5,\n  "g" : "[]",\n  "h\\\\" : [\n    [ ],\n    { }\n  ]\n}\n'
    )
    assert indent(compact) == expected
    # the standard library's path (an integer beyond 64 bits) gives the same form
    assert indent(compact[:-1] + b',"i":123456789012345678901}') == expected[:-3] + (
        b',\n  "i" : 123456789012345678901\n}\n'
    )
    assert indent(b"[]") == b"[ ]\n" and indent(b"{}") == b"{ }\n"


# ---- YAML ------------------------------------------------------------------------------------


def test_format_yaml_answers_yaml(http: httpx.Client, raw_index: str) -> None:
    as_json = http.get(f"/{raw_index}/_doc/0").json()
    for response in (
        http.get(f"/{raw_index}/_doc/0", params={"format": "yaml"}),
        http.get(f"/{raw_index}/_doc/0", headers={"accept": "application/yaml"}),
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/yaml"
        assert response.text.startswith("---\n_index: ")
        assert yaml.safe_load(response.text) == as_json
    assert '  t: "café ☕"\n' in http.get(f"/{raw_index}/_doc/0", params={"format": "yaml"}).text
    search = http.get(f"/{raw_index}/_search", params={"format": "yaml", "sort": "_doc"})
    assert yaml.safe_load(search.text)["hits"]["hits"][0]["_source"]["n"] == 123456789012345678901234567890
    # the parameter wins over the header, as in Elasticsearch
    assert http.get("/", params={"format": "json"}, headers={"accept": "application/yaml"}).json()["tagline"]


def test_yaml_errors_and_cat_rows(http: httpx.Client, raw_index: str) -> None:
    missing = http.get("/no-such-index-yaml/_search", params={"format": "yaml"})
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/yaml"
    body = yaml.safe_load(missing.text)
    assert body["status"] == 404 and body["error"]["type"] == "index_not_found_exception"
    rows = yaml.safe_load(
        http.get(f"/_cat/indices/{raw_index}", params={"format": "yaml", "h": "index"}).text
    )
    assert rows == [{"index": raw_index}]


@pytest.mark.parametrize(
    ("params", "headers", "named"),
    [
        ({"format": "cbor"}, {}, "[cbor]"),
        ({"format": "smile"}, {}, "[smile]"),
        ({}, {"accept": "application/cbor"}, "[application/cbor]"),
    ],
)
def test_binary_formats_are_refused_not_answered_in_json(
    http: httpx.Client, params: dict, headers: dict, named: str
) -> None:
    response = http.get("/", params=params, headers=headers)
    assert response.status_code == 406
    assert response.json() == {
        "error": f"the response format {named} is not supported by leafsearch: it answers JSON or YAML",
        "status": 406,
    }


_CHARS = "aZ_-.: #'\"\\\n\t\x00\x1f\x7f\x85\x9f\u00e9\u2028\u2029\ufeff\U0001f600{}[],&*!|>%@`?yn~<"


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        text = "".join(rng.choice(_CHARS) for _ in range(rng.randint(0, 8)))
        number = rng.random() * 10 ** rng.randint(-30, 30)
        return rng.choice([None, True, False, rng.randint(-(2**63), 2**63 - 1), number, text])
    if roll < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ("".join(rng.choice(_CHARS) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(0, 4)))
    return {key: _random_value(rng, depth + 1) for key in keys}


def test_yaml_reads_back_as_the_json_it_renders() -> None:
    """Any JSON value, whatever its strings hold (quotes, escapes, YAML indicators, line breaks
    YAML folds, controls, the words YAML 1.1 reads as booleans), reads back as itself."""
    rng = random.Random(7)
    for _ in range(3000):
        value = _random_value(rng)
        assert yaml.safe_load(to_yaml(value)) == json.loads(json.dumps(value)), value


# ---- error_trace -------------------------------------------------------------------------------


def test_error_trace_adds_stack_traces_without_paths(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index()
    plain = error_of(http.post(f"/{name}/_search", json={"query": {"bogus": {}}}))
    assert "stack_trace" not in plain and "stack_trace" not in plain["root_cause"][0]
    traced = error_of(
        http.post(f"/{name}/_search", params={"error_trace": "true"}, json={"query": {"bogus": {}}})
    )
    trace = traced["stack_trace"]
    assert trace.startswith("leafsearch.errors.ParsingError: unknown query [bogus]\n\tat leafsearch.")
    assert "\tat leafsearch.request.query_dsl._parse(query_dsl.py:" in trace
    assert traced["root_cause"][0]["stack_trace"] == trace
    assert str(REPO) not in trace and "/" not in trace
    # a cause carries its own trace
    caused = error_of(http.get("/_search", params={"size": "abc", "error_trace": ""}))
    assert caused["caused_by"]["stack_trace"].startswith("leafsearch.errors.")


def test_error_trace_of_a_5xx_refusal_only_for_superusers(tmp_path: Path) -> None:
    with Node(tmp_path / "data", background=False) as node:

        def failing(metric_path: list[str], **options: object) -> dict:
            raise TranslogFailed("the translog of [x][0] failed")

        node.nodes_stats = failing
        add_user(node.path, "ann", "ann-secret", "superuser")
        add_user(node.path, "vic", "vic-secret", "viewer")
        with TestClient(create_app(node), base_url="http://127.0.0.1") as http:
            viewer = http.get("/_nodes/stats?error_trace=true", auth=("vic", "vic-secret"))
            assert viewer.status_code == 500 and "stack_trace" not in error_of(viewer)
            admin = http.get("/_nodes/stats?error_trace=true", auth=("ann", "ann-secret"))
            assert error_of(admin)["stack_trace"].startswith("leafsearch.errors.TranslogFailed: the translog")
            # a 4xx carries its trace for anyone, as in Elasticsearch
            refused = http.get("/_search?size=x&error_trace=true", auth=("vic", "vic-secret"))
            assert "stack_trace" in error_of(refused)


# ---- human -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (0, "0s"),
        (-1, "-1"),
        (999, "999nanos"),
        (1_500, "1.5micros"),
        (500_000_000, "500ms"),
        (1_999_000_000, "1.9s"),
        (90_000_000_000, "1.5m"),
        (3_600_000_000_000, "1h"),
        (36 * 3_600_000_000_000, "1.5d"),
    ],
)
def test_human_time_is_timevalue_to_string(nanos: int, text: str) -> None:
    assert human_time(nanos) == text


def test_human_fields_come_before_their_raw_numbers() -> None:
    body = {
        "refresh": {"total": 3, "total_time_in_millis": 1234},
        "store": {"size_in_bytes": 4669},
        "breaker": {"limit_size_in_bytes": 10, "limit_size": "10b"},
        "hits": {"hits": [{"_source": {"x_in_millis": 5}}]},
    }
    assert with_human_fields(body) == {
        "refresh": {"total": 3, "total_time": "1.2s", "total_time_in_millis": 1234},
        "store": {"size": "4.5kb", "size_in_bytes": 4669},
        "breaker": {"limit_size_in_bytes": 10, "limit_size": "10b"},
        "hits": {"hits": [{"_source": {"x_in_millis": 5}}]},
    }
    assert list(with_human_fields(body)["store"]) == ["size", "size_in_bytes"]


def test_human_over_http(http: httpx.Client, raw_index: str) -> None:
    stats = http.get("/_nodes/stats", params={"human": "true"}).json()
    (node,) = stats["nodes"].values()
    search = node["indices"]["search"]
    assert list(search).index("query_time") == list(search).index("query_time_in_millis") - 1
    assert isinstance(search["query_time"], str)
    assert node["indices"]["store"]["size"].endswith("b")
    health = http.get("/_cluster/health", params={"human": ""}).json()
    assert health["task_max_waiting_in_queue"] == "0s" and health["task_max_waiting_in_queue_millis"] == 0
    raw = http.get("/_nodes/stats").json()
    (plain,) = raw["nodes"].values()
    assert "query_time" not in plain["indices"]["search"]
    # sources are user data: never given human fields
    http.put(f"/{raw_index}/_doc/h?refresh=true", json={"wait_in_millis": 5})
    assert http.get(f"/{raw_index}/_doc/h", params={"human": "true"}).json()["_source"] == {
        "wait_in_millis": 5
    }
