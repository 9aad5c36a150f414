"""Document and mapping APIs checked against Elasticsearch 8 (issue 11): `_source` disabled,
update responses, get parameters, settings and mapping updates, and the messages of refusals."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from tests.conftest import error_of

NDJSON = {"content-type": "application/x-ndjson"}


def test_disabled_source_is_not_returned(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index(mappings={"_source": {"enabled": False}, "properties": {"k": {"type": "keyword"}}})
    assert http.put(f"/{name}/_doc/1?refresh=true", json={"k": "x"}).status_code == 201
    got = http.get(f"/{name}/_doc/1")
    assert got.status_code == 200
    assert got.json()["found"] is True and "_source" not in got.json()
    source = http.get(f"/{name}/_source/1")
    assert source.status_code == 404
    assert error_of(source) == {
        "root_cause": [{"type": "resource_not_found_exception", "reason": f"Source not found [{name}]/[1]"}],
        "type": "resource_not_found_exception",
        "reason": f"Source not found [{name}]/[1]",
    }
    assert http.head(f"/{name}/_source/1").status_code == 404
    # The document is still searchable by its values; its hit has no source.
    hits = http.post(f"/{name}/_search", json={"query": {"term": {"k": "x"}}}).json()["hits"]["hits"]
    assert [(h["_id"], "_source" in h) for h in hits] == [("1", False)]
    mget = http.post(f"/{name}/_mget", json={"ids": ["1"]}).json()["docs"]
    assert mget[0]["found"] is True and "_source" not in mget[0]
    update = http.post(f"/{name}/_update/1", json={"doc": {"k": "y"}})
    assert update.status_code == 400
    assert error_of(update)["type"] == "document_source_missing_exception"
    assert error_of(update)["reason"] == "[1]: document source missing"


def test_update_returns_get_when_source_is_asked(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    assert http.put(f"/{name}/_doc/1", json={"a": 1, "b": {"c": 2}}).status_code == 201
    response = http.post(f"/{name}/_update/1", params={"_source": "b"}, json={"doc": {"a": 5}})
    assert response.status_code == 200
    body = response.json()
    assert body["result"] == "updated"
    assert body["get"] == {
        "_seq_no": body["_seq_no"],
        "_primary_term": 1,
        "found": True,
        "_source": {"b": {"c": 2}},
    }
    # In the body, `_source` wins over the URL; a noop also answers the document.
    noop = http.post(
        f"/{name}/_update/1", params={"_source": "false"}, json={"doc": {"a": 5}, "_source": True}
    )
    assert noop.json()["result"] == "noop"
    assert noop.json()["get"]["_source"] == {"a": 5, "b": {"c": 2}}
    plain = http.post(f"/{name}/_update/1", json={"doc": {"a": 6}})
    assert "get" not in plain.json()
    routed = http.post(
        f"/{name}/_update/2",
        params={"routing": "r", "_source_includes": "a"},
        json={"doc": {"a": 1}, "doc_as_upsert": True},
    )
    assert routed.status_code == 201
    assert routed.json()["get"] == {
        "_seq_no": routed.json()["_seq_no"],
        "_primary_term": 1,
        "_routing": "r",
        "found": True,
        "_source": {"a": 1},
    }


def test_update_of_a_missing_document_with_if_seq_no_is_not_found(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index()
    response = http.post(
        f"/{name}/_update/nope", params={"if_seq_no": 0, "if_primary_term": 1}, json={"doc": {"a": 1}}
    )
    assert response.status_code == 404
    assert error_of(response)["type"] == "document_missing_exception"
    assert error_of(response)["reason"] == "[nope]: document missing"
    # An existing document still checks its sequence number.
    http.put(f"/{name}/_doc/1", json={"a": 1})
    stale = http.post(
        f"/{name}/_update/1", params={"if_seq_no": 7, "if_primary_term": 1}, json={"doc": {"a": 2}}
    )
    assert stale.status_code == 409


def test_get_takes_stored_fields_and_version(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    http.put(f"/{name}/_doc/1", json={"a": 1})
    http.put(f"/{name}/_doc/1", json={"a": 2})
    # Stored fields other than `_source` leave the source out: nothing else is stored.
    got = http.get(f"/{name}/_doc/1", params={"stored_fields": "a"})
    assert got.status_code == 200
    assert got.json()["found"] is True and "_source" not in got.json() and "fields" not in got.json()
    assert http.get(f"/{name}/_doc/1", params={"stored_fields": "a,_source"}).json()["_source"] == {"a": 2}
    assert http.head(f"/{name}/_doc/1", params={"version": 2}).status_code == 200
    assert http.head(f"/{name}/_doc/1", params={"version": 1}).status_code == 409
    conflict = http.get(f"/{name}/_doc/1", params={"version": 1})
    assert conflict.status_code == 409
    assert error_of(conflict)["reason"] == (
        "[1]: version conflict, current version [2] is different than the one provided [1]"
    )
    assert http.get(f"/{name}/_doc/1", params={"version": 2, "version_type": "external"}).status_code == 200


def test_put_settings_preserve_existing(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index(settings={"index": {"refresh_interval": "3s"}})
    body = {"index": {"refresh_interval": "9s", "max_result_window": 500}}
    assert http.put(f"/{name}/_settings", params={"preserve_existing": "true"}, json=body).status_code == 200
    settings = http.get(f"/{name}/_settings").json()[name]["settings"]["index"]
    assert settings["refresh_interval"] == "3s"
    assert settings["max_result_window"] == "500"
    assert http.put(f"/{name}/_settings", json=body).status_code == 200
    assert http.get(f"/{name}/_settings").json()[name]["settings"]["index"]["refresh_interval"] == "9s"


def test_put_mapping_refusals_and_updates(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index(mappings={"properties": {"k": {"type": "keyword"}}})
    typed = http.put(f"/{name}/_mapping", json={"_doc": {"properties": {"z": {"type": "keyword"}}}})
    assert typed.status_code == 400
    assert error_of(typed)["type"] == "illegal_argument_exception"
    assert error_of(typed)["reason"] == "Types cannot be provided in put mapping requests"
    runtime = http.put(f"/{name}/_mapping", json={"runtime": {"r": {"type": "nope"}}})
    assert runtime.status_code == 400
    assert error_of(runtime)["type"] == "mapper_parsing_exception"
    assert error_of(runtime)["reason"] == (
        "Failed to parse mapping: The mapper type [nope] declared on runtime field [r] does not exist. "
        "It might have been created within a future version or requires a plugin to be installed. "
        "Check the documentation."
    )
    untyped = http.put(f"/{name}/_mapping", json={"runtime": {"r": {"script": "x"}}})
    assert error_of(untyped)["reason"] == "Failed to parse mapping: No type specified for runtime field [r]"
    assert http.put(f"/{name}/_mapping", json={"runtime": {"r": {"type": "long"}}}).status_code == 200
    split = {"properties": {"k": {"type": "keyword", "split_queries_on_whitespace": True}}}
    assert http.put(f"/{name}/_mapping", json=split).status_code == 200
    mapping = http.get(f"/{name}/_mapping").json()[name]["mappings"]
    assert mapping["properties"]["k"]["split_queries_on_whitespace"] is True
    assert http.get(f"/{name}/_mapping").json()[name]["mappings"]["properties"].keys() == {"k"}


def test_unknown_mapper_type_message(http: httpx.Client, index_name: str) -> None:
    response = http.put(f"/{index_name}", json={"mappings": {"properties": {"y": {"type": "x"}}}})
    assert response.status_code == 400
    assert error_of(response)["caused_by"] == {
        "type": "mapper_parsing_exception",
        "reason": "The mapper type [x] declared on field [y] does not exist. It might have been created "
        "within a future version or requires a plugin to be installed. Check the documentation.",
    }


def test_bulk_empty_id_and_empty_action(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    lines = [
        {"index": {"_index": name, "_id": ""}},
        {"f": 1},
        {"index": {"_index": name, "_id": "id"}},
        {"f": 2},
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    items = http.post("/_bulk", content=body, headers=NDJSON).json()["items"]
    assert items[0]["index"]["status"] == 400
    assert items[0]["index"]["error"] == {
        "type": "illegal_argument_exception",
        "reason": "if _id is specified it must not be empty",
    }
    assert items[1]["index"]["result"] == "created"
    # An update or delete without an id fails the request's validation, as a whole.
    for action in ({"delete": {"_index": name, "_id": ""}}, {"update": {"_index": name}}):
        lines = [{"index": {"_index": name, "_id": "x"}}, {"f": 1}, action, {"doc": {"f": 3}}]
        body = "".join(json.dumps(line) + "\n" for line in lines[: 3 if "delete" in action else 4])
        refused = http.post("/_bulk", content=body, headers=NDJSON)
        assert refused.status_code == 400
        assert error_of(refused)["reason"] == "Validation Failed: 1: id is missing;"
    assert http.get(f"/{name}/_doc/x").status_code == 404
    empty = http.post("/_bulk", content='{}\n{"f": 1}\n', headers=NDJSON)
    assert empty.status_code == 400
    assert (
        error_of(empty)["reason"]
        == "Malformed action/metadata line [1], expected FIELD_NAME but found [END_OBJECT]"
    )


def test_update_unknown_field_suggests_the_close_one(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index()
    response = http.post(f"/{name}/_update/1", json={"dac": {"foo": "baz"}, "upsert": {"foo": "bar"}})
    assert response.status_code == 400
    assert error_of(response) == {
        "root_cause": [
            {
                "type": "x_content_parse_exception",
                "reason": "[UpdateRequest] unknown field [dac] did you mean [doc]?",
            }
        ],
        "type": "x_content_parse_exception",
        "reason": "[UpdateRequest] unknown field [dac] did you mean [doc]?",
    }


def test_bulk_update_returns_get_when_source_is_asked(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index()
    http.put(f"/{name}/_doc/1", json={"foo": "bar", "bar": "foo"})
    http.put(f"/{name}/_doc/2", json={"foo": "qux", "bar": "pux"})
    lines = [
        {"update": {"_index": name, "_id": "1", "_source": {"includes": "bar"}}},
        {"doc": {"foo": "baz"}},
        {"update": {"_index": name, "_id": "2"}},
        {"_source": True, "doc": {"foo": "quux"}},
        {"update": {"_index": name, "_id": "1"}},
        {"doc": {"foo": "again"}},
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    items = http.post("/_bulk", content=body, headers=NDJSON).json()["items"]
    assert items[0]["update"]["get"]["_source"] == {"bar": "foo"}
    assert items[1]["update"]["get"]["_source"] == {"foo": "quux", "bar": "pux"}
    assert "get" not in items[2]["update"]
    # The request's `_source` parameters apply to every update that does not say otherwise.
    lines = [{"update": {"_id": "2"}}, {"doc": {"foo": "garply"}}]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    items = http.post(f"/{name}/_bulk", params={"_source_includes": "foo"}, content=body, headers=NDJSON)
    assert items.json()["items"][0]["update"]["get"]["_source"] == {"foo": "garply"}


def test_get_shows_stored_fields(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index(
        mappings={
            "properties": {
                "foo": {"type": "keyword", "store": True},
                "count": {"type": "integer", "store": True},
                "plain": {"type": "keyword"},
            }
        }
    )
    http.put(f"/{name}/_doc/1", json={"foo": "bar", "count": 1, "plain": "x"})
    one = http.get(f"/{name}/_doc/1", params={"stored_fields": "foo"}).json()
    assert one["fields"] == {"foo": ["bar"]} and "_source" not in one
    both = http.get(f"/{name}/_doc/1", params={"stored_fields": "foo,count,plain"}).json()
    assert both["fields"] == {"foo": ["bar"], "count": [1]}
    with_source = http.get(f"/{name}/_doc/1", params={"stored_fields": "foo,count,_source"}).json()
    assert with_source["fields"] == {"foo": ["bar"], "count": [1]}
    assert with_source["_source"] == {"foo": "bar", "count": 1, "plain": "x"}
