"""Hostile documents and write requests get Elasticsearch's 4xx and change nothing.

Each case was a 500 (or a silent acceptance that later broke the shard) before; here every one
is sent through HTTP and answered with Elasticsearch's error type, reason and status, and the index
is checked afterwards: same document count, same mapping, still refreshes, and (last test) the node
restarts from its data folder with everything it acknowledged.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from conftest import error_of, running_server
from elasticsearch import BadRequestError, Elasticsearch

from tests import web

NDJSON = {"content-type": "application/x-ndjson"}
JSON = {"content-type": "application/json"}


def nested(depth: int, leaf: Any = 1) -> dict[str, Any]:
    """`{"a": {"a": ... {"a": leaf}}}` with `depth` objects below the document."""
    doc: Any = leaf
    for _ in range(depth):
        doc = {"a": doc}
    return doc


def bulk(http: httpx.Client, *lines: Any, **params: str) -> httpx.Response:
    body = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    return http.post("/_bulk", content=body, headers=NDJSON, params=params)


def state(http: httpx.Client, index: str) -> tuple[int, dict[str, Any]]:
    """(document count after a refresh, mapping): what a refused write must leave as it was."""
    assert http.post(f"/{index}/_refresh").status_code == 200
    return http.get(f"/{index}/_count").json()["count"], http.get(f"/{index}/_mapping").json()


@contextmanager
def cluster_setting(http: httpx.Client, key: str, value: Any) -> Iterator[httpx.Response]:
    response = http.put("/_cluster/settings", json={"transient": {key: value}})
    try:
        yield response
    finally:
        http.put("/_cluster/settings", json={"transient": {key: None}})


# ---- depth ------------------------------------------------------------------------------------


def test_a_document_deeper_than_the_mapping_depth_limit_is_refused(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    http.put(f"/{index}/_doc/ok", json={"n": 1}, params={"refresh": "true"})
    before = state(http, index)
    response = http.put(f"/{index}/_doc/deep", json=nested(150))
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "illegal_argument_exception"
    assert error["reason"] == (
        f"Limit of mapping depth [20] has been exceeded due to object field [{'.'.join(['a'] * 20)}]"
    )
    # The same through bulk, and through dotted names.
    items = bulk(
        http,
        {"index": {"_index": index}},
        nested(21),
        {"index": {"_index": index}},
        {".".join(["b"] * 40): 1},
    ).json()["items"]
    assert [i["index"]["status"] for i in items] == [400, 400]
    assert {i["index"]["error"]["type"] for i in items} == {"illegal_argument_exception"}
    assert state(http, index) == before
    # 19 objects (depth 20) are within the limit.
    assert http.put(f"/{index}/_doc/deepest", json=nested(19)).status_code == 201


def test_json_nested_beyond_the_parser_is_a_parse_error_and_deep_arrays_are_values(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings={"properties": {"k": {"type": "keyword"}}})
    too_deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    response = http.put(f"/{index}/_doc/1", content=too_deep, headers=JSON)
    assert response.status_code == 400
    assert error_of(response)["type"] == "document_parsing_exception"
    # A keyword given a deeply nested object: refused, its preview rendered without recursion.
    deep_object = b'{"k":' + b'{"a":' * 900 + b"1" + b"}" * 901
    response = http.put(f"/{index}/_doc/1", content=deep_object, headers=JSON)
    assert response.status_code == 400
    assert error_of(response)["type"] == "document_parsing_exception"
    assert state(http, index)[0] == 0
    # Nested arrays are one list of values, however deep.
    deep_array = b'{"k":' + b"[" * 900 + b'"x"' + b"]" * 900 + b"}"
    assert http.put(f"/{index}/_doc/2", content=deep_array, headers=JSON).status_code == 201
    assert http.post(f"/{index}/_refresh").status_code == 200
    assert http.post(f"/{index}/_count", json={"query": {"term": {"k": "x"}}}).json()["count"] == 1


def test_mapping_limits_come_from_the_index_settings(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    deep = {"properties": {"a": {"properties": {"b": {"properties": {"c": {"type": "keyword"}}}}}}}
    body = {"settings": {"index.mapping.depth.limit": 2}, "mappings": deep}
    response = http.put("/too-deep-mapping", json=body)
    assert response.status_code == 400
    assert error_of(response)["reason"] == (
        "Limit of mapping depth [2] has been exceeded due to object field [a.b]"
    )
    assert http.head("/too-deep-mapping").status_code == 404

    index = new_index(
        settings={"index.mapping.field_name_length.limit": 5, "index.mapping.total_fields.limit": 3}
    )
    response = http.put(f"/{index}/_doc/1", json={"abcdef": 1})
    assert (response.status_code, error_of(response)["reason"]) == (
        400,
        "Field name [abcdef] is longer than the limit of [5] characters",
    )
    response = http.put(f"/{index}/_doc/1", json={"a": 1, "b": 2, "c": {"d": 1}})
    # Elasticsearch 8 counts new fields while it parses the document, and stops at the first one
    # past the limit: a document parsing error at that field, caused by the limit.
    limit = "Limit of total fields [3] has been exceeded while adding new fields [4]"
    error = error_of(response)
    assert (response.status_code, error["type"], error["reason"]) == (
        400,
        "document_parsing_exception",
        f"[1:23] failed to parse: {limit}",
    )
    assert error["caused_by"] == {"type": "illegal_argument_exception", "reason": limit}
    long = {"type": "long"}
    four_fields = {"properties": {"a": {"properties": {"b": long}}, "c": long, "d": long}}
    response = http.put(f"/{index}/_mapping", json=four_fields)
    assert response.status_code == 400
    assert state(http, index) == (0, {index: {"mappings": {}}})
    # The limits are dynamic: raised, the same document is taken.
    assert http.put(f"/{index}/_settings", json={"index.mapping.total_fields.limit": 10}).status_code == 200
    assert http.put(f"/{index}/_doc/1", json={"a": 1, "b": 2, "c": {"d": 1}}).status_code == 201
    response = http.put(f"/{index}/_settings", json={"index.mapping.depth.limit": 1000})
    assert response.status_code == 400
    assert error_of(response)["type"] == "illegal_argument_exception"


# ---- bulk action lines ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({"routing": {}}, "expected a simple value for field [routing] but found [START_OBJECT]"),
        ({"routing": [1]}, "expected a simple value for field [routing] but found [START_ARRAY]"),
        ({"_id": {"a": 1}}, "expected a simple value for field [_id] but found [START_OBJECT]"),
        ({"_index": ["x"]}, "expected a simple value for field [_index] but found [START_ARRAY]"),
        ({"pipeline": {}}, "expected a simple value for field [pipeline] but found [START_OBJECT]"),
    ],
)
def test_bulk_action_values_that_are_not_simple_fail_the_request(
    http: httpx.Client, new_index: Callable[..., str], meta: dict[str, Any], reason: str
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    before = state(http, index)
    response = bulk(
        http,
        {"index": {"_index": index, "_id": "1"}},
        {"f": 1},
        {"index": {"_index": index, **meta}},
        {"f": 2},
    )
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "illegal_argument_exception"
    assert error["reason"] == f"Malformed action/metadata line [3], {reason}"
    assert state(http, index) == before


def test_bulk_action_values_are_read_as_elasticsearch_reads_them(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    response = bulk(
        http,
        {"index": {"_index": index, "_id": 7, "routing": 5}},
        {"f": 1},
        {"create": {"_index": index, "_id": True, "routing": None}},
        {"f": 2},
        refresh="true",
    )
    assert response.status_code == 200, response.text
    assert [next(iter(i.values()))["_id"] for i in response.json()["items"]] == ["7", "true"]
    assert es.get(index=index, id="7", routing="5")["_routing"] == "5"
    assert es.count(index=index)["count"] == 2
    for meta, kind, reason in [
        ({"if_seq_no": "x"}, "illegal_argument_exception", 'For input string: "x"'),
        ({"if_seq_no": True}, "x_content_parse_exception", "not numeric"),
        ({"require_alias": 1}, "x_content_parse_exception", "not of boolean type"),
        ({"require_alias": "yes"}, "illegal_argument_exception", "only [true] or [false] are allowed"),
    ]:
        response = bulk(http, {"index": {"_index": index, "_id": "9", **meta}}, {"f": 3})
        assert response.status_code == 400
        assert error_of(response)["type"] == kind
        assert reason in error_of(response)["reason"]
    with pytest.raises(BadRequestError) as refused:
        es.bulk(operations=[{"index": {"_index": index, "routing": {"a": 1}}}, {"f": 4}])
    assert refused.value.error == "illegal_argument_exception"
    assert es.count(index=index)["count"] == 2


# ---- field names and terms --------------------------------------------------------------------


def test_field_names_elasticsearch_accepts_are_mapped_and_the_others_refused(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    accepted = ["a/b", "a\u0000b", "x" * 250, "é" * 130]
    for name in accepted:
        assert http.post(f"/{index}/_doc", json={name: 1}).status_code == 201, name
    properties = http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]
    assert sorted(properties) == sorted(accepted)
    for name, reason in [
        ("...", "field name cannot contain only dots"),
        ("", "Field name cannot be an empty string"),
    ]:
        response = http.post(f"/{index}/_doc", json={name: 1})
        assert response.status_code == 400
        error = error_of(response)
        assert error["type"] == "document_parsing_exception"
        assert error["caused_by"] == {"type": "illegal_argument_exception", "reason": reason}
    assert sorted(http.get(f"/{index}/_mapping").json()[index]["mappings"]["properties"]) == sorted(accepted)


def test_keyword_terms_longer_than_lucene_takes_are_refused(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(
        mappings={"properties": {"k": {"type": "keyword"}, "short": {"type": "keyword", "ignore_above": 100}}}
    )
    http.put(f"/{index}/_doc/ok", json={"k": "fine"}, params={"refresh": "true"})
    before = state(http, index)
    immense = "é" * 16384  # 32,768 UTF-8 bytes
    expected_cause = (
        'Document contains at least one immense term in field="k" (whose UTF8 encoding is longer than the '
        "max length 32766), all of which were skipped. Please correct the analyzer to not produce such "
        "terms. The prefix of the first immense term is: '[" + ", ".join(["-61, -87"] * 15) + "]...'"
    )
    response = http.put(f"/{index}/_doc/1", json={"k": immense})
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "document_parsing_exception"
    assert error["reason"].startswith(
        "[1:6] failed to parse field [k] of type [keyword] in document with id '1'"
    )
    assert error["caused_by"] == {"type": "illegal_argument_exception", "reason": expected_cause}
    # Through bulk (documents parsed together, then one by one), one bad document among good ones.
    response = bulk(
        http,
        {"index": {"_index": index, "_id": "2"}},
        {"k": "x" * 40000},
        {"index": {"_index": index, "_id": "3"}},
        {"k": "y"},
    )
    assert [next(iter(i.values()))["status"] for i in response.json()["items"]] == [400, 201]
    assert http.delete(f"/{index}/_doc/3").status_code == 200
    assert state(http, index) == before
    # `ignore_above` skips such values instead, and a dynamic string's `keyword` has it (256).
    long_values = {"short": "z" * 40000, "dynamic": "w" * 1_000_000}
    assert http.put(f"/{index}/_doc/4", json=long_values).status_code == 201


# ---- auto-create, deletes, wait_for_active_shards ---------------------------------------------


def test_auto_create_index_takes_every_form_elasticsearch_takes(http: httpx.Client, index_name: str) -> None:
    with cluster_setting(http, "action.auto_create_index", f"+{index_name}-logs*,-{index_name}-*") as set_:
        assert set_.status_code == 200
        assert http.post(f"/{index_name}-logs1/_doc", json={"a": 1}).status_code == 201
        response = http.post(f"/{index_name}-tmp/_doc", json={"a": 1})
        assert response.status_code == 404
        assert error_of(response)["reason"] == (
            f"no such index [{index_name}-tmp] and [action.auto_create_index] contains [-{index_name}-*] "
            "which forbids automatic creation of the index"
        )
        response = http.post("/other-name/_doc", json={"a": 1})
        assert response.status_code == 404
        assert "doesn't match" in error_of(response)["reason"]
    http.delete(f"/{index_name}-logs1")
    # A list is read as Elasticsearch's string setting reads it ("[a, b]"): a 404 for each write.
    with cluster_setting(http, "action.auto_create_index", [index_name]) as set_:
        assert set_.status_code == 200
        response = http.post(f"/{index_name}/_doc", json={"a": 1})
        assert response.status_code == 404
        assert error_of(response)["reason"] == (
            f"no such index [{index_name}] and [action.auto_create_index] ([[{index_name}]]) doesn't match"
        )
    for bad, reason in [
        (
            "a,,b",
            "Can't parse [a,,b] for setting [action.auto_create_index] must be either [true, false, "
            "or a comma separated list of index patterns]",
        ),
        (
            "a,-",
            "Can't parse [a,-] for setting [action.auto_create_index] must contain an index name after [-]",
        ),
    ]:
        with cluster_setting(http, "action.auto_create_index", bad) as set_:
            assert set_.status_code == 400
            assert error_of(set_)["reason"] == reason
    assert http.post(f"/{index_name}/_doc", json={"a": 1}, params={"refresh": "true"}).status_code == 201
    http.delete(f"/{index_name}")


def test_a_bulk_delete_never_creates_its_index(http: httpx.Client, index_name: str) -> None:
    response = bulk(http, {"delete": {"_index": index_name, "_id": "1"}})
    item = response.json()["items"][0]["delete"]
    assert item["status"] == 404
    assert item["error"]["type"] == "index_not_found_exception"
    assert item["error"]["reason"] == f"no such index [{index_name}]"
    assert http.head(f"/{index_name}").status_code == 404
    response = http.delete(f"/{index_name}/_doc/1")
    assert response.status_code == 404
    assert error_of(response)["type"] == "index_not_found_exception"
    assert http.head(f"/{index_name}").status_code == 404
    # An index operation beside it creates the index; the delete then finds no document.
    items = bulk(
        http,
        {"index": {"_index": index_name, "_id": "1"}},
        {"a": 1},
        {"delete": {"_index": index_name, "_id": "2"}},
    ).json()["items"]
    assert [next(iter(i.values()))["status"] for i in items] == [201, 404]
    http.delete(f"/{index_name}")


def test_wait_for_active_shards_is_checked_at_once(http: httpx.Client, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"number_of_replicas": 1})
    params: dict[str, str]
    for value, reason in [
        ("abc", "cannot parse ActiveShardCount[abc]"),
        ("-5", "shard count cannot be a negative value"),
        ("3", "invalid wait_for_active_shards[3]: cannot be greater than number of shard copies [2]"),
    ]:
        params = {"wait_for_active_shards": value}
        for response in (
            http.put(f"/{index}/_doc/1", json={"a": 1}, params=params),
            http.delete(f"/{index}/_doc/1", params=params),
            http.post(f"/{index}/_update/1", json={"doc": {"a": 1}, "doc_as_upsert": True}, params=params),
        ):
            assert response.status_code == 400, value
            assert error_of(response) == {
                "root_cause": [{"type": "illegal_argument_exception", "reason": reason}],
                "type": "illegal_argument_exception",
                "reason": reason,
            }
    response = http.put("/wfas-create", params={"wait_for_active_shards": "3"})
    assert error_of(response)["reason"] == (
        "invalid wait_for_active_shards[3]: cannot be greater than number of shard copies [2]"
    )
    assert http.head("/wfas-create").status_code == 404
    item = bulk(http, {"index": {"_index": index}}, {"a": 1}, wait_for_active_shards="3").json()["items"][0]
    assert item["index"]["status"] == 400
    assert state(http, index)[0] == 0
    for value in ("all", "1", "2", "0"):
        response = http.put(f"/{index}/_doc/1", json={"a": 1}, params={"wait_for_active_shards": value})
        assert response.status_code in (200, 201), value


# ---- gzip -------------------------------------------------------------------------------------


def test_a_gzip_body_of_several_members_is_inflated_whole(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    lines = [{"index": {"_index": index, "_id": str(i)}} if i % 2 == 0 else {"a": i} for i in range(4)]
    body = b"".join(gzip.compress(orjson.dumps(line) + b"\n") for line in lines)
    headers = {**NDJSON, "content-encoding": "gzip"}
    response = http.post("/_bulk", content=body, headers=headers, params={"refresh": "true"})
    assert response.status_code == 200
    assert len(response.json()["items"]) == 2
    assert state(http, index)[0] == 2


def test_the_size_limit_counts_every_gzip_member(tmp_path: Path) -> None:
    limited = running_server(tmp_path / "data", "--max-content-length", "1kb")
    with limited as (url, _), web.Client(base_url=url) as http:
        member = gzip.compress(b'{"a":"' + b"x" * 600 + b'"}')
        headers = {**JSON, "content-encoding": "gzip"}
        assert http.put("/limited/_doc/1", content=member, headers=headers).status_code == 201
        response = http.put("/limited/_doc/2", content=member + member, headers=headers)
        assert response.status_code == 413
        assert error_of(response)["type"] == "content_too_long_exception"


# ---- restart ----------------------------------------------------------------------------------


def test_after_hostile_writes_the_node_refreshes_and_restarts_with_what_it_acknowledged(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    index = "hostile"
    with running_server(data) as (url, process), web.Client(base_url=url, timeout=60) as http:
        body = {"settings": {"number_of_shards": 2}, "mappings": {"properties": {"k": {"type": "keyword"}}}}
        assert http.put(f"/{index}", json=body).status_code == 200
        routed = bulk(http, {"index": {"_index": index, "_id": "r", "routing": 5}}, {"k": "routed"})
        assert routed.status_code == 200
        assert http.put(f"/{index}/_doc/deep", json=nested(150)).status_code == 400
        assert bulk(http, {"index": {"_index": index, "routing": {}}}, {"k": 1}).status_code == 400
        assert http.put(f"/{index}/_doc/big", json={"k": "x" * 40000}).status_code == 400
        assert http.put(f"/{index}/_doc/ok", json={"k": "fine", "o": nested(5)}).status_code == 201
        mapping = http.get(f"/{index}/_mapping").json()
        assert http.post(f"/{index}/_refresh").status_code == 200
        process.kill()
        process.wait()
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=60) as http:
        assert http.get(f"/{index}/_mapping").json() == mapping
        assert http.get(f"/{index}/_doc/r", params={"routing": "5"}).json()["_source"] == {"k": "routed"}
        assert http.post(f"/{index}/_refresh").status_code == 200
        assert http.get(f"/{index}/_count").json()["count"] == 2
