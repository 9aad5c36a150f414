"""Document APIs over HTTP: status codes, bodies and parameters as Elasticsearch answers them."""

from __future__ import annotations

import httpx
import pytest
from conftest import error_of
from elasticsearch import ConflictError, Elasticsearch, NotFoundError, helpers


def test_index_get_exists_delete_through_the_client(es: Elasticsearch, index_name: str) -> None:
    created = es.index(index=index_name, id="1", document={"title": "hello", "n": 1}, refresh=True)
    assert created["result"] == "created"
    assert created["_version"] == 1
    assert created.meta.status == 201
    updated = es.index(index=index_name, id="1", document={"title": "again", "n": 2})
    assert updated["result"] == "updated"
    assert updated.meta.status == 200
    got = es.get(index=index_name, id="1")
    assert got["found"] is True
    assert got["_source"] == {"title": "again", "n": 2}
    assert got["_version"] == 2
    assert es.exists(index=index_name, id="1")
    assert not es.exists(index=index_name, id="2")
    assert es.get_source(index=index_name, id="1").body == {"title": "again", "n": 2}
    deleted = es.delete(index=index_name, id="1")
    assert deleted["result"] == "deleted"
    with pytest.raises(NotFoundError):
        es.get(index=index_name, id="1")
    es.indices.delete(index=index_name)


def test_source_bytes_are_returned_as_sent(http: httpx.Client, index_name: str) -> None:
    raw = b'{"b": 2,   "a": [1.0, 2.50], "s" : "x"}'
    put = http.put(f"/{index_name}/_doc/raw", content=raw, headers={"content-type": "application/json"})
    assert put.status_code == 201, put.text
    assert http.get(f"/{index_name}/_source/raw").content == raw
    assert raw in http.get(f"/{index_name}/_doc/raw").content


def test_missing_documents_and_indices(http: httpx.Client, new_index, index_name: str) -> None:
    name = new_index()
    missing = http.get(f"/{name}/_doc/nope")
    assert missing.status_code == 404
    assert missing.json() == {"_index": name, "_id": "nope", "found": False}
    assert http.head(f"/{name}/_doc/nope").status_code == 404
    source = http.get(f"/{name}/_source/nope")
    assert source.status_code == 404
    assert error_of(source)["type"] == "resource_not_found_exception"
    assert error_of(source)["reason"] == f"Document not found [{name}]/[nope]"
    deleted = http.delete(f"/{name}/_doc/nope")
    assert deleted.status_code == 404
    assert deleted.json()["result"] == "not_found"
    no_index = http.get(f"/{index_name}-absent/_doc/1")
    assert no_index.status_code == 404
    assert error_of(no_index)["type"] == "index_not_found_exception"


def test_the_source_api_refuses_to_disable_the_source(http: httpx.Client, new_index) -> None:
    name = new_index()
    http.put(f"/{name}/_doc/1", json={"a": 1, "b": 2})
    for params in ({"_source": "false"}, {"_source": "false", "_source_includes": "a"}):
        refused = http.get(f"/{name}/_source/1", params=params)
        assert refused.status_code == 400
        assert error_of(refused)["type"] == "action_request_validation_exception"
        assert error_of(refused)["reason"] == "Validation Failed: 1: fetching source can not be disabled;"
        assert http.head(f"/{name}/_source/1", params=params).status_code == 400
    assert http.get(f"/{name}/_source/1", params={"_source": "true"}).json() == {"a": 1, "b": 2}
    assert http.get(f"/{name}/_source/1", params={"_source_excludes": "*"}).json() == {}


def test_auto_id_and_create(http: httpx.Client, index_name: str) -> None:
    posted = http.post(f"/{index_name}/_doc", json={"a": 1})
    assert posted.status_code == 201
    assert posted.json()["result"] == "created"
    assert len(posted.json()["_id"]) == 20
    first = http.put(f"/{index_name}/_create/x", json={"a": 1})
    assert first.status_code == 201
    again = http.put(f"/{index_name}/_create/x", json={"a": 2})
    assert again.status_code == 409
    assert error_of(again)["type"] == "version_conflict_engine_exception"
    op_type = http.put(f"/{index_name}/_doc/x", params={"op_type": "create"}, json={"a": 3})
    assert op_type.status_code == 409


def test_optimistic_concurrency_parameters(es: Elasticsearch, http: httpx.Client, index_name: str) -> None:
    first = es.index(index=index_name, id="c", document={"v": 1})
    seq_no, term = first["_seq_no"], first["_primary_term"]
    ok = es.index(index=index_name, id="c", document={"v": 2}, if_seq_no=seq_no, if_primary_term=term)
    assert ok["result"] == "updated"
    with pytest.raises(ConflictError):
        es.index(index=index_name, id="c", document={"v": 3}, if_seq_no=seq_no, if_primary_term=term)
    bad = error_of(http.put(f"/{index_name}/_doc/c", params={"if_seq_no": "abc"}, json={"v": 4}))
    assert bad["reason"] == "Failed to parse long parameter [if_seq_no] with value [abc]"


def test_write_parameters_are_validated(http: httpx.Client, index_name: str) -> None:
    refresh = error_of(http.put(f"/{index_name}/_doc/1", params={"refresh": "sometimes"}, json={}))
    assert refresh["reason"] == "Unknown value for refresh: [sometimes]."
    timeout = error_of(http.put(f"/{index_name}/_doc/1", params={"timeout": "5"}, json={}))
    assert "as a time value: unit is missing or unrecognized" in timeout["reason"]
    accepted = http.put(
        f"/{index_name}/_doc/1",
        params={"timeout": "1m", "wait_for_active_shards": "1", "refresh": "wait_for"},
        json={"a": 1},
    )
    assert accepted.status_code == 201, accepted.text
    empty = error_of(http.put(f"/{index_name}/_doc/2", headers={"content-type": "application/json"}))
    assert empty["type"] == "parse_exception"
    assert empty["reason"] == "request body is required"


def test_get_source_filtering_parameters(http: httpx.Client, index_name: str) -> None:
    http.put(f"/{index_name}/_doc/1", json={"user": {"name": "a", "age": 3}, "title": "t"})
    got = http.get(f"/{index_name}/_doc/1", params={"_source_includes": "user.name"}).json()
    assert got["_source"] == {"user": {"name": "a"}}
    got = http.get(f"/{index_name}/_doc/1", params={"_source_excludes": "user"}).json()
    assert got["_source"] == {"title": "t"}
    got = http.get(f"/{index_name}/_doc/1", params={"_source": "false"}).json()
    assert "_source" not in got and got["found"] is True
    got = http.get(f"/{index_name}/_doc/1", params={"_source": "title"}).json()
    assert got["_source"] == {"title": "t"}


def test_update(es: Elasticsearch, index_name: str) -> None:
    es.index(index=index_name, id="u", document={"a": 1, "b": {"c": 1}})
    updated = es.update(index=index_name, id="u", doc={"b": {"d": 2}})
    assert updated["result"] == "updated"
    assert es.get(index=index_name, id="u")["_source"] == {"a": 1, "b": {"c": 1, "d": 2}}
    upserted = es.update(index=index_name, id="new", doc={"x": 1}, doc_as_upsert=True)
    assert upserted["result"] == "created"
    assert upserted.meta.status == 201
    with pytest.raises(NotFoundError) as caught:
        es.update(index=index_name, id="absent", doc={"x": 1})
    assert caught.value.error == "document_missing_exception"


def test_bulk_through_the_helpers(es: Elasticsearch, index_name: str) -> None:
    actions = ({"_index": index_name, "_id": str(i), "_source": {"n": i}} for i in range(250))
    ok, errors = helpers.bulk(es, actions, chunk_size=100, refresh=True)
    assert ok == 250 and errors == []
    assert es.get(index=index_name, id="249")["_source"] == {"n": 249}


def test_bulk_raw_ndjson_and_item_errors(http: httpx.Client, index_name: str) -> None:
    body = b'{"index":{"_id":"1"}}\n{"a":1}\n{"create":{"_id":"1"}}\n{"a":2}\n{"delete":{"_id":"2"}}\n'
    response = http.post(
        f"/{index_name}/_bulk", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 200
    result = response.json()
    assert result["errors"] is True
    statuses = [next(iter(item.values()))["status"] for item in result["items"]]
    assert statuses == [201, 409, 404]
    compat = http.post(
        "/_bulk",
        content=f'{{"index":{{"_index":"{index_name}","_id":"3"}}}}\n{{"a":3}}\n'.encode(),
        headers={
            "content-type": "application/vnd.elasticsearch+x-ndjson; compatible-with=8",
            "accept": "application/vnd.elasticsearch+json; compatible-with=8",
        },
    )
    assert compat.status_code == 200
    assert compat.json()["errors"] is False
    empty = error_of(http.post("/_bulk", headers={"content-type": "application/x-ndjson"}))
    assert empty["reason"] == "request body is required"


def test_mget_docs_and_ids(es: Elasticsearch, http: httpx.Client, index_name: str) -> None:
    es.index(index=index_name, id="1", document={"a": 1})
    es.index(index=index_name, id="2", document={"a": 2})
    by_ids = es.mget(index=index_name, ids=["1", "3"])
    assert [d["found"] for d in by_ids["docs"]] == [True, False]
    assert by_ids["docs"][0]["_source"] == {"a": 1}
    docs = http.post(
        "/_mget",
        json={"docs": [{"_index": index_name, "_id": "2"}, {"_index": f"{index_name}-absent", "_id": "1"}]},
    ).json()["docs"]
    assert docs[0]["_source"] == {"a": 2}
    assert docs[1]["error"]["type"] == "index_not_found_exception"
    missing_index = error_of(http.post("/_mget", json={"docs": [{"_id": "1"}]}))
    assert missing_index["reason"] == "Validation Failed: 1: index is missing for doc 0;"
    nothing = error_of(http.post(f"/{index_name}/_mget", json={"docs": []}))
    assert nothing["reason"] == "Validation Failed: 1: no documents to get;"
