"""Single-document APIs over HTTP, beyond the basics of test_rest_documents.py: realtime reads,
refresh policies, versions and sequence numbers, routing and shard placement, updates, and
values that do not fit their field."""

from __future__ import annotations

import httpx
import orjson
import pytest
from conftest import error_of
from elasticsearch import BadRequestError, Elasticsearch

WRITE_KEYS = {"_index", "_id", "_version", "result", "_shards", "_seq_no", "_primary_term"}


def count(http: httpx.Client, index: str, query: dict | None = None) -> int:
    response = http.post(f"/{index}/_count", json={"query": query}) if query else http.get(f"/{index}/_count")
    assert response.status_code == 200, response.text
    return response.json()["count"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("PUT", "/_doc/a", 201),
        ("POST", "/_doc/a", 201),
        ("PUT", "/_create/a", 201),
        ("POST", "/_create/a", 201),
        ("POST", "/_doc", 201),
    ],
)
def test_every_write_form_answers_the_same_shape(
    http: httpx.Client, new_index, method: str, path: str, status: int
) -> None:
    name = new_index(settings={"number_of_replicas": 0})
    response = http.request(method, f"/{name}{path}", json={"v": 1})
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == WRITE_KEYS
    assert body["_index"] == name
    assert (body["_version"], body["result"], body["_seq_no"], body["_primary_term"]) == (1, "created", 0, 1)
    assert body["_shards"] == {"total": 1, "successful": 1, "failed": 0}
    assert http.get(f"/{name}/_source/{body['_id']}").json() == {"v": 1}


def test_versions_and_sequence_numbers_follow_every_change(http: httpx.Client, new_index) -> None:
    name = new_index()
    steps = [
        http.put(f"/{name}/_doc/1", json={"v": 1}),
        http.put(f"/{name}/_doc/1", json={"v": 2}),
        http.post(f"/{name}/_update/1", json={"doc": {"w": 1}}),
        http.delete(f"/{name}/_doc/1"),
        http.put(f"/{name}/_doc/1", json={"v": 3}),
    ]
    assert [r.status_code for r in steps] == [201, 200, 200, 200, 201]
    assert [r.json()["result"] for r in steps] == ["created", "updated", "updated", "deleted", "created"]
    assert [r.json()["_version"] for r in steps] == [1, 2, 3, 4, 5]
    assert [r.json()["_seq_no"] for r in steps] == [0, 1, 2, 3, 4]
    got = http.get(f"/{name}/_doc/1").json()
    assert (got["_version"], got["_seq_no"], got["_primary_term"]) == (5, 4, 1)
    # A create on a deleted id is allowed; on a live one it conflicts and changes nothing.
    http.delete(f"/{name}/_doc/1")
    assert http.put(f"/{name}/_create/1", json={"v": 4}).status_code == 201
    conflict = http.post(f"/{name}/_create/1", json={"v": 5})
    assert conflict.status_code == 409
    error = error_of(conflict)
    assert error["type"] == "version_conflict_engine_exception"
    assert error["reason"] == "[1]: version conflict, document already exists (current version [7])"
    assert (error["index"], error["shard"]) == (name, "0")
    assert http.get(f"/{name}/_source/1").json() == {"v": 4}


def test_get_is_realtime_while_search_waits_for_a_refresh(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"refresh_interval": "-1"})
    http.put(f"/{name}/_doc/gone", json={"v": 1}, params={"refresh": "true"})
    http.put(f"/{name}/_doc/1", json={"v": 1})
    http.put(f"/{name}/_doc/1", json={"v": 2})
    http.delete(f"/{name}/_doc/gone")
    assert http.get(f"/{name}/_doc/1").json()["_source"] == {"v": 2}
    assert http.get(f"/{name}/_source/1").json() == {"v": 2}
    assert http.head(f"/{name}/_doc/1").status_code == 200
    assert http.get(f"/{name}/_doc/gone").status_code == 404
    assert http.head(f"/{name}/_source/gone").status_code == 404
    # Searches and non-realtime gets read the last refresh.
    assert count(http, name) == 1
    assert http.get(f"/{name}/_doc/1", params={"realtime": "false"}).status_code == 404
    assert http.get(f"/{name}/_doc/gone", params={"realtime": "false"}).json()["found"] is True
    http.post(f"/{name}/_refresh")
    assert count(http, name) == 1
    assert http.get(f"/{name}/_doc/1", params={"realtime": "false"}).json()["_source"] == {"v": 2}
    assert http.get(f"/{name}/_doc/gone", params={"realtime": "false"}).status_code == 404


@pytest.mark.parametrize("refresh", ["true", "", "wait_for"])
def test_refresh_parameter_makes_the_write_searchable(http: httpx.Client, new_index, refresh: str) -> None:
    name = new_index(settings={"refresh_interval": "-1", "number_of_shards": 2})
    http.put(f"/{name}/_doc/quiet", json={"v": 0}, params={"refresh": "false"})
    assert count(http, name) == 0
    written = http.put(f"/{name}/_doc/loud", json={"v": 1}, params={"refresh": refresh})
    assert written.status_code == 201
    assert written.json().get("forced_refresh", False) is (refresh != "wait_for")
    assert count(http, name, {"term": {"v": 1}}) == 1
    deleted = http.delete(f"/{name}/_doc/loud", params={"refresh": refresh})
    assert deleted.status_code == 200
    assert count(http, name, {"term": {"v": 1}}) == 0
    updated = http.post(
        f"/{name}/_update/new", json={"doc": {"v": 2}, "doc_as_upsert": True}, params={"refresh": refresh}
    )
    assert updated.status_code == 201
    assert count(http, name, {"term": {"v": 2}}) == 1


def test_routing_places_and_finds_documents(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"number_of_shards": 5, "number_of_routing_shards": 5})
    # From Elasticsearch's own REST tests: with 5 shards, routing values "4" and "5" land apart.
    http.put(f"/{name}/_doc/1", params={"routing": "5"}, json={"foo": "bar"})
    docs = http.post(
        f"/{name}/_mget",
        json={"docs": [{"_id": "1"}, {"_id": "1", "routing": "4"}, {"_id": "1", "routing": "5"}]},
    ).json()["docs"]
    assert [d["found"] for d in docs] == [False, False, True]
    assert docs[2]["_routing"] == "5"
    assert http.get(f"/{name}/_doc/1", params={"routing": "5"}).json()["_routing"] == "5"
    assert http.get(f"/{name}/_source/1", params={"routing": "5"}).json() == {"foo": "bar"}
    updated = http.post(f"/{name}/_update/1", params={"routing": "5"}, json={"doc": {"foo": "baz"}})
    assert updated.json()["result"] == "updated"
    assert http.delete(f"/{name}/_doc/1", params={"routing": "4"}).status_code == 404
    assert http.delete(f"/{name}/_doc/1", params={"routing": "5"}).status_code == 200


def test_ids_land_on_the_shards_elasticsearch_puts_them_on(http: httpx.Client, new_index) -> None:
    # Elasticsearch's scroll/12_slices.yml: 5 shards, ids "1".."4"; with two slices, slice 0
    # reads shards 0, 2 and 4 and holds ids 2, 3 and 4, slice 1 reads shards 1 and 3 and holds id 1.
    name = new_index(settings={"number_of_shards": 5, "number_of_routing_shards": 5})
    for i in "1234":
        http.put(f"/{name}/_doc/{i}", json={"foo": int(i)})
    http.post(f"/{name}/_refresh")
    sliced = []
    for slice_id in (0, 1):
        page = http.post(
            f"/{name}/_search",
            params={"scroll": "1m"},
            json={"slice": {"id": slice_id, "max": 2}, "sort": ["foo"], "size": 10},
        ).json()
        sliced.append([hit["_id"] for hit in page["hits"]["hits"]])
        http.request("DELETE", "/_search/scroll", json={"scroll_id": page["_scroll_id"]})
    assert sliced == [["2", "3", "4"], ["1"]]


def test_routing_required_by_the_mapping(http: httpx.Client, new_index) -> None:
    name = new_index(mappings={"_routing": {"required": True}})
    refused = http.put(f"/{name}/_doc/1", json={"a": 1})
    assert refused.status_code == 400
    assert error_of(refused)["type"] == "routing_missing_exception"
    assert error_of(refused)["reason"] == f"routing is required for [{name}]/[1]"
    assert http.put(f"/{name}/_doc/1", params={"routing": "r"}, json={"a": 1}).status_code == 201
    for method, path, body in (
        ("GET", "_doc/1", None),
        ("DELETE", "_doc/1", None),
        ("POST", "_update/1", {"doc": {"a": 2}}),
    ):
        response = http.request(method, f"/{name}/{path}", json=body)
        assert response.status_code == 400, (method, path, response.text)
        assert error_of(response)["type"] == "routing_missing_exception"
    bulk = http.post(
        f"/{name}/_bulk",
        content=b'{"index":{"_id":"2"}}\n{"a":1}\n{"delete":{"_id":"1"}}\n',
        headers={"content-type": "application/x-ndjson"},
    ).json()
    assert [next(iter(i.values()))["status"] for i in bulk["items"]] == [400, 400]
    assert http.get(f"/{name}/_source/1", params={"routing": "r"}).json() == {"a": 1}


def test_compare_and_set_on_every_write(http: httpx.Client, new_index) -> None:
    name = new_index()
    first = http.put(f"/{name}/_doc/1", json={"v": 1}).json()
    stale = {"if_seq_no": first["_seq_no"], "if_primary_term": first["_primary_term"]}
    assert http.post(f"/{name}/_update/1", params=stale, json={"doc": {"v": 2}}).status_code == 200
    for method, path, body in (
        ("PUT", "_doc/1", {"v": 3}),
        ("POST", "_update/1", {"doc": {"v": 3}}),
        ("DELETE", "_doc/1", None),
    ):
        response = http.request(method, f"/{name}/{path}", params=stale, json=body)
        assert response.status_code == 409, (method, response.text)
        assert error_of(response)["reason"] == (
            "[1]: version conflict, required seqNo [0], primary term [1]. current document has seqNo [1] and "
            "primary term [1]"
        )
    wrong_term = http.delete(f"/{name}/_doc/1", params={"if_seq_no": 1, "if_primary_term": 2})
    assert wrong_term.status_code == 409
    assert http.delete(f"/{name}/_doc/1", params={"if_seq_no": 1, "if_primary_term": 1}).status_code == 200
    absent = http.put(f"/{name}/_doc/1", params={"if_seq_no": 1, "if_primary_term": 1}, json={"v": 9})
    assert error_of(absent)["reason"] == (
        "[1]: version conflict, required seqNo [1], primary term [1]. but no document was found"
    )


def test_op_type(http: httpx.Client, new_index) -> None:
    name = new_index()
    assert http.put(f"/{name}/_doc/1", params={"op_type": "create"}, json={"v": 1}).status_code == 201
    assert http.put(f"/{name}/_doc/1", params={"op_type": "index"}, json={"v": 2}).status_code == 200
    assert http.put(f"/{name}/_doc/1", params={"op_type": "create"}, json={"v": 3}).status_code == 409
    bogus = http.put(f"/{name}/_doc/1", params={"op_type": "upsert"}, json={"v": 4})
    assert error_of(bogus)["reason"] == "opType must be 'create' or 'index', found: [upsert]"
    assert http.get(f"/{name}/_source/1").json() == {"v": 2}


def test_require_alias_refuses_a_plain_index(http: httpx.Client, new_index) -> None:
    name = new_index()
    refused = http.put(f"/{name}/_doc/1", params={"require_alias": "true"}, json={"v": 1})
    assert refused.status_code == 404
    error = error_of(refused)
    assert error["type"] == "index_not_found_exception"
    assert error["reason"] == (
        f"no such index [{name}] and [require_alias] request flag is [true] and [{name}] is not an alias"
    )
    assert http.get(f"/{name}/_doc/1").status_code == 404


def test_update_forms(http: httpx.Client, new_index) -> None:
    name = new_index()
    created = http.post(f"/{name}/_update/1", json={"doc": {"ignored": True}, "upsert": {"a": {"b": 1}}})
    assert (created.status_code, created.json()["result"]) == (201, "created")
    assert http.get(f"/{name}/_source/1").json() == {"a": {"b": 1}}
    merged = http.post(f"/{name}/_update/1", json={"doc": {"a": {"c": 2}, "d": [1]}, "upsert": {"x": 0}})
    assert (merged.status_code, merged.json()["result"], merged.json()["_version"]) == (200, "updated", 2)
    assert http.get(f"/{name}/_source/1").json() == {"a": {"b": 1, "c": 2}, "d": [1]}
    as_upsert = http.post(f"/{name}/_update/1", json={"doc": {"d": [2]}, "doc_as_upsert": True})
    assert as_upsert.json()["result"] == "updated"
    assert http.get(f"/{name}/_source/1").json() == {"a": {"b": 1, "c": 2}, "d": [2]}
    noop = http.post(f"/{name}/_update/1", json={"doc": {"d": [2]}})
    assert (noop.json()["result"], noop.json()["_version"]) == ("noop", 3)
    forced = http.post(f"/{name}/_update/1", json={"doc": {"d": [2]}, "detect_noop": False})
    assert (forced.json()["result"], forced.json()["_version"]) == ("updated", 4)
    missing = http.post(f"/{name}/_update/2", json={"doc": {"a": 1}})
    assert missing.status_code == 404
    assert error_of(missing)["type"] == "document_missing_exception"
    assert error_of(missing)["reason"] == "[2]: document missing"


def test_writes_create_missing_indices(http: httpx.Client, index_name: str) -> None:
    writes = [
        ("PUT", "_doc/1", {"a": 1}),
        ("POST", "_doc", {"a": 1}),
        ("PUT", "_create/1", {"a": 1}),
        ("POST", "_update/1", {"doc": {"a": 1}, "doc_as_upsert": True}),
    ]
    for n, (method, path, body) in enumerate(writes):
        name = f"{index_name}-{n}"
        response = http.request(method, f"/{name}/{path}", json=body)
        assert response.status_code == 201, (method, path, response.text)
        assert http.get(f"/{name}/_mapping").json()[name]["mappings"]["properties"] == {"a": {"type": "long"}}
        http.delete(f"/{name}")
    # A delete does not create the index it names.
    assert http.delete(f"/{index_name}-gone/_doc/1").status_code == 404
    assert http.head(f"/{index_name}-gone").status_code == 404


MAPPED = {"properties": {"n": {"type": "integer"}, "when": {"type": "date"}, "flag": {"type": "boolean"}}}


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"n": "twelve", "new_field": "x"}, "n"),
        ({"n": 1, "new_field": "x", "when": "not a date"}, "when"),
        ({"flag": "perhaps", "other": {"deep": 1}}, "flag"),
        ({"n": {"nested": 1}}, "n"),
        ({"n": 3_000_000_000}, "n"),
    ],
)
def test_a_value_that_does_not_fit_its_field_changes_nothing(
    http: httpx.Client, new_index, doc: dict, field: str
) -> None:
    name = new_index(mappings=MAPPED)
    http.put(f"/{name}/_doc/kept", json={"n": 1}, params={"refresh": "true"})
    before = http.get(f"/{name}/_mapping").json()
    refused = http.put(f"/{name}/_doc/bad", json=doc, params={"refresh": "true"})
    assert refused.status_code == 400, refused.text
    error = error_of(refused)
    assert error["type"] == "document_parsing_exception"
    assert f"failed to parse field [{field}]" in error["reason"]
    update = http.post(f"/{name}/_update/kept", json={"doc": doc}, params={"refresh": "true"})
    assert update.status_code == 400
    assert error_of(update)["type"] == "document_parsing_exception"
    assert http.get(f"/{name}/_mapping").json() == before
    assert http.get(f"/{name}/_doc/bad").status_code == 404
    assert http.get(f"/{name}/_source/kept").json() == {"n": 1}
    assert http.get(f"/{name}/_doc/kept").json()["_version"] == 1
    assert count(http, name) == 1


def test_document_parsing_error_through_the_client(es: Elasticsearch, new_index) -> None:
    name = new_index(mappings=MAPPED)
    with pytest.raises(BadRequestError) as raised:
        es.index(index=name, id="1", document={"n": "x"})
    assert raised.value.error == "document_parsing_exception"
    assert raised.value.meta.status == 400


def test_count_forms(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"number_of_shards": 3})
    for i in range(20):
        http.put(f"/{name}/_doc/{i}", json={"i": i, "even": i % 2 == 0})
    http.post(f"/{name}/_refresh")
    assert http.get(f"/{name}/_count").json() == {
        "count": 20,
        "_shards": {"total": 3, "successful": 3, "skipped": 0, "failed": 0},
    }
    assert http.get(f"/{name}/_count", params={"q": "even:true"}).json()["count"] == 10
    assert http.post(f"/{name}/_count", json={"query": {"range": {"i": {"gte": 15}}}}).json()["count"] == 5
    with_body = http.request("GET", f"/{name}/_count", json={"query": {"term": {"i": 3}}})
    assert with_body.json()["count"] == 1


def test_ids_are_validated(http: httpx.Client, index_name: str) -> None:
    long_id = "x" * 513
    refused = http.put(f"/{index_name}/_doc/{long_id}", json={"a": 1})
    assert refused.status_code == 400
    assert error_of(refused)["reason"] == (
        f"Validation Failed: 1: id [{long_id}] is too long, must be no longer than 512 bytes but was: 513;"
    )
    fits = "é" * 256  # 512 bytes in UTF-8
    assert http.put(f"/{index_name}/_doc/{fits}", json={"a": 1}).status_code == 201
    assert http.get(f"/{index_name}/_source/{fits}").json() == {"a": 1}


def test_an_id_ending_with_nul_is_refused_by_every_write_and_changes_no_other_document(
    http: httpx.Client, new_index
) -> None:
    """Ids are kept as NUL-padded byte strings, where `a` + NUL is `a`: every write of such an id
    is refused (400) and document `a` keeps its version and source; a read finds nothing."""
    name = new_index(settings={"number_of_shards": 1})
    assert http.put(f"/{name}/_doc/a?refresh=true", json={"v": 1}).status_code == 201
    nul = "a\x00"
    escaped = "a%00"  # (in a URL)
    for method, path, body in [
        ("PUT", f"/{name}/_doc/{escaped}", {"v": 2}),
        ("PUT", f"/{name}/_create/{escaped}", {"v": 2}),
        ("POST", f"/{name}/_update/{escaped}", {"doc": {"v": 2}, "doc_as_upsert": True}),
        ("DELETE", f"/{name}/_doc/{escaped}", None),
    ]:
        refused = http.request(method, path, json=body)
        assert refused.status_code == 400, (method, path, refused.text)
        assert error_of(refused)["type"] == "illegal_argument_exception"
        assert "must not end with the NUL character" in error_of(refused)["reason"]
    lines = []
    for action, doc in [
        ("index", {"v": 3}),
        ("create", {"v": 3}),
        ("update", {"doc": {"v": 3}}),
        ("delete", None),
    ]:
        lines.append(orjson.dumps({action: {"_index": name, "_id": nul}}))
        if doc is not None:
            lines.append(orjson.dumps(doc))
    lines.append(orjson.dumps({"index": {"_index": name, "_id": "b"}}))
    lines.append(orjson.dumps({"v": 4}))
    answer = http.post(
        "/_bulk?refresh=true",
        content=b"\n".join(lines) + b"\n",
        headers={"content-type": "application/x-ndjson"},
    ).json()
    assert answer["errors"] is True
    *refused_items, kept = answer["items"]
    for item in refused_items:
        (result,) = item.values()
        assert result["status"] == 400 and result["error"]["type"] == "illegal_argument_exception"
    assert kept["index"]["status"] == 201
    # A plain index-only bulk (the column path) refuses it too, and writes the others.
    plain = b"".join(
        orjson.dumps({"index": {"_id": doc_id}}) + b"\n" + orjson.dumps({"v": 5}) + b"\n"
        for doc_id in (nul, "c")
    )
    items = http.post(
        f"/{name}/_bulk?refresh=true", content=plain, headers={"content-type": "application/x-ndjson"}
    ).json()["items"]
    assert [item["index"]["status"] for item in items] == [400, 201]
    document = http.get(f"/{name}/_doc/a").json()
    assert (document["_version"], document["_source"]) == (1, {"v": 1})
    assert http.get(f"/{name}/_doc/{escaped}").status_code == 404
    assert count(http, name) == 3  # a, b, c
