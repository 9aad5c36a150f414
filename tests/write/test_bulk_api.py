"""The bulk API: NDJSON in, one item per action out, in request order, each with its own outcome."""

from __future__ import annotations

import httpx
import orjson
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch, helpers

NDJSON = {"content-type": "application/x-ndjson"}


def ndjson(*objects: object) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objects)


def outcome(item: dict) -> tuple[str, str | None, int]:
    """(action, _id, status) of one response item."""
    ((action, result),) = item.items()
    return action, result["_id"], result["status"]


def test_every_action_gets_its_item_in_request_order_across_shards_and_indices(
    http: httpx.Client, new_index
) -> None:
    a = new_index(settings={"number_of_shards": 3}, suffix="-a")
    b = new_index(settings={"number_of_shards": 2}, suffix="-b")
    http.put(f"/{a}/_doc/existing", json={"n": 0})
    body = ndjson(
        {"index": {"_index": b, "_id": "0"}},
        {"n": 1},
        {"create": {"_index": a, "_id": "existing"}},
        {"n": 2},
        {"index": {"_index": b, "_id": "x"}},
        {"n": 3},
        {"update": {"_index": a, "_id": "existing"}},
        {"doc": {"m": 1}},
        {"update": {"_index": b, "_id": "absent"}},
        {"doc": {"m": 1}},
        {"delete": {"_index": a, "_id": "absent"}},
        {"delete": {"_index": b, "_id": "x"}},
        {"create": {"_index": a, "_id": "y"}},
        {"n": 4},
        {"index": {"_index": a}},
        {"n": 5},
    )
    response = http.post("/_bulk", content=body, headers=NDJSON)
    assert response.status_code == 200
    result = response.json()
    assert result["errors"] is True
    assert isinstance(result["took"], int)
    items = result["items"]
    assert [outcome(i)[:2] for i in items[:-1]] == [
        ("index", "0"),
        ("create", "existing"),
        ("index", "x"),
        ("update", "existing"),
        ("update", "absent"),
        ("delete", "absent"),
        ("delete", "x"),
        ("create", "y"),
    ]
    assert [outcome(i)[2] for i in items] == [201, 409, 201, 200, 404, 404, 200, 201, 201]
    assert [next(iter(i.values()))["_index"] for i in items] == [b, a, b, a, b, a, b, a, a]
    conflict = items[1]["create"]["error"]
    assert conflict["type"] == "version_conflict_engine_exception"
    assert conflict["reason"] == "[existing]: version conflict, document already exists (current version [1])"
    assert items[4]["update"]["error"]["type"] == "document_missing_exception"
    # A delete of a missing document is a result, not an error.
    assert items[5]["delete"]["result"] == "not_found" and "error" not in items[5]["delete"]
    assert items[6]["delete"]["result"] == "deleted"
    assert len(items[8]["index"]["_id"]) == 20
    for item in items:
        result_body = next(iter(item.values()))
        if "error" not in result_body:
            assert {
                "_index",
                "_id",
                "_version",
                "result",
                "_shards",
                "_seq_no",
                "_primary_term",
                "status",
            } <= set(result_body)
    assert http.get(f"/{a}/_source/existing").json() == {"n": 0, "m": 1}
    assert http.get(f"/{b}/_doc/x").status_code == 404


def test_errors_is_false_when_every_item_succeeds(http: httpx.Client, index_name: str) -> None:
    body = ndjson({"index": {"_id": "1"}}, {"a": 1}, {"delete": {"_id": "nope"}})
    result = http.post(f"/{index_name}/_bulk", content=body, headers=NDJSON).json()
    assert result["errors"] is False
    assert [outcome(i)[2] for i in result["items"]] == [201, 404]


def test_a_bad_document_fails_only_its_item_and_adds_no_field(http: httpx.Client, new_index) -> None:
    name = new_index(mappings={"properties": {"n": {"type": "long"}}})
    body = (
        ndjson({"index": {"_id": "1"}}, {"n": 1})
        + ndjson({"index": {"_id": "2"}}, {"n": "not a number", "sneaky": "field"})
        + b'{"index":{"_id":"3"}}\n{"n": 3,\n'
        + ndjson({"index": {"_id": "4"}})
        + b"[1, 2]\n"
        + ndjson({"update": {"_id": "1"}}, {"doc": {"n": {"object": True}}})
        + ndjson({"index": {"_id": "5"}}, {"n": 5})
    )
    result = http.post(f"/{name}/_bulk", params={"refresh": "true"}, content=body, headers=NDJSON).json()
    assert result["errors"] is True
    assert [outcome(i) for i in result["items"]] == [
        ("index", "1", 201),
        ("index", "2", 400),
        ("index", "3", 400),
        ("index", "4", 400),
        ("update", "1", 400),
        ("index", "5", 201),
    ]
    for item in result["items"][1:5]:
        assert next(iter(item.values()))["error"]["type"] == "document_parsing_exception"
    assert http.get(f"/{name}/_count").json()["count"] == 2
    assert http.get(f"/{name}/_source/1").json() == {"n": 1}
    assert http.get(f"/{name}/_mapping").json()[name]["mappings"] == {"properties": {"n": {"type": "long"}}}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            b'{"index":{"_id":"1"}}\n{"a":1}\n{"bogus":{"_id":"2"}}\n{"a":2}\n',
            "Malformed action/metadata line [3]",
        ),
        (b'{"index":{"_id":"1"}}\n{"a":1}\nnot json\n{"a":2}\n', "Malformed action/metadata line [3]"),
        (b'{"index":{"_id":"1"}}\n{"a":1}\n{"index":{"_id":"2"},"delete":{}}\n', "Malformed action/metadata"),
        (
            b'{"index":{"_id":"1"}}\n{"a":1}\n{"index":{"_id":"2","bogus":1}}\n{"a":2}\n',
            "unknown parameter [bogus]",
        ),
        (b'{"index":{"_id":"1"}}\n{"a":1}', "The bulk request must be terminated by a newline [\\n]"),
    ],
)
def test_a_malformed_action_line_fails_the_whole_request(
    http: httpx.Client, index_name: str, body: bytes, reason: str
) -> None:
    response = http.post(f"/{index_name}/_bulk", content=body, headers=NDJSON)
    assert response.status_code == 400
    assert reason in error_of(response)["reason"]
    # Nothing before the bad line was applied either.
    assert http.get(f"/{index_name}/_doc/1").status_code == 404


COMPATIBLE = "application/vnd.elasticsearch+{}; compatible-with=8"


@pytest.mark.parametrize(
    "headers",
    [
        {"content-type": "application/x-ndjson"},
        {"content-type": "application/json"},
        {"content-type": "application/json; charset=UTF-8"},
        {"content-type": COMPATIBLE.format("x-ndjson"), "accept": COMPATIBLE.format("json")},
        {"content-type": COMPATIBLE.format("json"), "accept": COMPATIBLE.format("json")},
    ],
)
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_ndjson_is_read_whatever_the_json_content_type(
    http: httpx.Client, index_name: str, headers: dict[str, str], method: str
) -> None:
    other = {"index": {"_index": f"{index_name}-other", "_id": "2"}}
    body = ndjson({"index": {"_id": "1"}}, {"a": 1}, other, {"a": 2})
    response = http.request(method, f"/{index_name}/_bulk", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert [next(iter(i.values()))["_index"] for i in response.json()["items"]] == [
        index_name,
        f"{index_name}-other",
    ]
    assert http.get(f"/{index_name}-other/_source/2").json() == {"a": 2}
    http.delete(f"/{index_name}-other")


def test_missing_indices_are_created_with_dynamic_mappings(http: httpx.Client, index_name: str) -> None:
    body = ndjson({"index": {"_index": index_name, "_id": "1"}}, {"when": "2024-05-01", "n": 3, "s": "text"})
    assert http.head(f"/{index_name}").status_code == 404
    assert http.put("/_bulk", content=body, headers=NDJSON).json()["errors"] is False
    properties = http.get(f"/{index_name}/_mapping").json()[index_name]["mappings"]["properties"]
    assert properties["when"] == {"type": "date"}
    assert properties["n"] == {"type": "long"}
    assert properties["s"]["type"] == "text"


def test_bulk_metadata_routing_compare_and_set_and_upserts(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"number_of_shards": 4})
    first = http.post(
        f"/{name}/_bulk",
        content=ndjson(
            {"index": {"_id": "r", "routing": "user-7"}}, {"v": 1}, {"index": {"_id": "c"}}, {"v": 1}
        ),
        headers=NDJSON,
    ).json()["items"]
    seq_no, term = first[1]["index"]["_seq_no"], first[1]["index"]["_primary_term"]
    assert http.get(f"/{name}/_doc/r", params={"routing": "user-7"}).json()["_routing"] == "user-7"
    body = ndjson(
        {"index": {"_id": "c", "if_seq_no": seq_no, "if_primary_term": term}},
        {"v": 2},
        {"index": {"_id": "c", "if_seq_no": seq_no, "if_primary_term": term}},
        {"v": 3},
        {"update": {"_id": "u1"}},
        {"doc": {"v": 1}, "doc_as_upsert": True},
        {"update": {"_id": "u2"}},
        {"doc": {"v": 1}, "upsert": {"v": 0}},
        {"update": {"_id": "u2"}},
        {"doc": {"v": 1}, "upsert": {"v": 0}},
        {"update": {"_id": "u2"}},
        {"doc": {"v": 1}},
        {"delete": {"_id": "r", "routing": "user-7"}},
    )
    items = http.post(f"/{name}/_bulk", content=body, headers=NDJSON).json()["items"]
    assert [outcome(i)[2] for i in items] == [200, 409, 201, 201, 200, 200, 200]
    assert [next(iter(i.values())).get("result") for i in items] == [
        "updated",
        None,
        "created",
        "created",
        "updated",
        "noop",
        "deleted",
    ]
    assert items[1]["index"]["error"]["type"] == "version_conflict_engine_exception"
    assert http.get(f"/{name}/_source/c").json() == {"v": 2}
    assert http.get(f"/{name}/_source/u1").json() == {"v": 1}
    assert http.get(f"/{name}/_source/u2").json() == {"v": 1}
    assert http.get(f"/{name}/_doc/r", params={"routing": "user-7"}).status_code == 404


@pytest.mark.parametrize("refresh", ["true", "wait_for"])
def test_refresh_makes_the_whole_bulk_searchable(http: httpx.Client, new_index, refresh: str) -> None:
    name = new_index(settings={"number_of_shards": 3, "refresh_interval": "-1"})
    body = b"".join(ndjson({"index": {"_id": str(i)}}, {"i": i}) for i in range(30))
    http.post(f"/{name}/_bulk", content=body, headers=NDJSON)
    assert http.get(f"/{name}/_count").json()["count"] == 0
    # The refreshing bulk writes to every shard, so all of them are refreshed before it answers.
    body = b"".join(ndjson({"index": {"_id": f"r{i}"}}, {"i": i}) for i in range(30))
    response = http.post(f"/{name}/_bulk", params={"refresh": refresh}, content=body, headers=NDJSON)
    assert response.status_code == 200
    assert http.get(f"/{name}/_count").json()["count"] == 60


def test_helpers_bulk_indexes_a_few_thousand_documents(es: Elasticsearch, new_index) -> None:
    name = new_index(settings={"number_of_shards": 2})
    actions = (
        {"_index": name, "_id": f"doc-{i}", "_source": {"i": i, "even": i % 2 == 0}} for i in range(3000)
    )
    ok, errors = helpers.bulk(es, actions, chunk_size=700, refresh="wait_for")
    assert (ok, errors) == (3000, [])
    assert es.count(index=name)["count"] == 3000
    assert es.count(index=name, query={"term": {"even": True}})["count"] == 1500
    assert es.get(index=name, id="doc-2999")["_source"] == {"i": 2999, "even": False}
    deletes = ({"_op_type": "delete", "_index": name, "_id": f"doc-{i}"} for i in range(0, 3000, 3))
    assert helpers.bulk(es, deletes, refresh=True) == (1000, [])
    assert es.count(index=name)["count"] == 2000


def test_streaming_bulk_reports_each_item(es: Elasticsearch, new_index) -> None:
    name = new_index(mappings={"properties": {"n": {"type": "integer"}}})
    es.index(index=name, id="taken", document={"n": 0})
    actions = [
        {"_index": name, "_id": "1", "_source": {"n": 1}},
        {"_index": name, "_id": "2", "_source": {"n": "two"}},
        {"_op_type": "create", "_index": name, "_id": "taken", "_source": {"n": 3}},
        {"_op_type": "update", "_index": name, "_id": "missing", "doc": {"n": 4}},
        {"_op_type": "delete", "_index": name, "_id": "1"},
        {"_index": name, "_id": "5", "_source": {"n": 5}},
    ]
    results = list(helpers.streaming_bulk(es, actions, chunk_size=4, raise_on_error=False))
    assert [ok for ok, _ in results] == [True, False, False, False, True, True]
    statuses = [next(iter(item.values()))["status"] for _, item in results]
    assert statuses == [201, 400, 409, 404, 200, 201]
    assert next(iter(results[1][1].values()))["error"]["type"] == "document_parsing_exception"
    with pytest.raises(helpers.BulkIndexError) as raised:
        helpers.bulk(es, actions[1:3])
    assert [next(iter(e.values()))["_id"] for e in raised.value.errors] == ["2", "taken"]


def test_an_index_action_with_op_type_create_is_a_create(http: httpx.Client, new_index) -> None:
    """`{"index": {"op_type": "create"}}` is answered under `create` and refuses an existing id."""
    name = new_index()
    body = ndjson(
        {"index": {"_index": name, "_id": ""}},
        {"f": 1},
        {"index": {"_index": name, "op_type": "create"}},
        {"f": 2},
        {"index": {"_index": name, "_id": "a", "op_type": "create"}},
        {"f": 3},
        {"index": {"_index": name, "_id": "a", "op_type": "create"}},
        {"f": 4},
    )
    items = http.post("/_bulk?refresh=true", content=body, headers=NDJSON).json()["items"]
    assert items[0]["index"]["error"] == {
        "type": "illegal_argument_exception",
        "reason": "if _id is specified it must not be empty",
    }
    assert [outcome(item)[0] for item in items[1:]] == ["create", "create", "create"]
    assert [item["create"]["status"] for item in items[1:]] == [201, 201, 409]
    assert http.get(f"/{name}/_count").json()["count"] == 2
    refused = ndjson({"index": {"_index": name, "op_type": "upsert"}}, {"f": 5})
    bad = http.post("/_bulk", content=refused, headers=NDJSON)
    assert bad.status_code == 400
    assert error_of(bad)["reason"] == "opType must be 'create' or 'index', found: [upsert]"
