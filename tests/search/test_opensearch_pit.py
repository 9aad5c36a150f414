"""OpenSearch's point-in-time API (issue 11): create, search, list and delete PITs in OpenSearch's
shapes, over the same contexts as Elasticsearch's `_pit`. Each test runs on its own in-process
node (`clocked`), so `_all` sees only the test's own PITs."""

from __future__ import annotations

import time

import httpx

from tests.conftest import ClockedNode, error_of


def _index_docs(http: httpx.Client, name: str, n: int) -> None:
    lines = "".join(f'{{"index":{{"_index":"{name}","_id":"{i}"}}}}\n{{"n":{i}}}\n' for i in range(n))
    response = http.post(
        "/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 200 and not response.json()["errors"]


def _create(http: httpx.Client, target: str, keep_alive: str = "1m") -> dict:
    response = http.post(f"/{target}/_search/point_in_time", params={"keep_alive": keep_alive})
    assert response.status_code == 200, response.text
    return response.json()


def test_create_search_list_and_delete(clocked: ClockedNode) -> None:
    http = clocked.http
    _index_docs(http, "logs", 3)
    before = int(time.time() * 1000)
    created = _create(http, "logs")
    assert list(created) == ["pit_id", "_shards", "creation_time"]
    assert created["_shards"] == {"total": 1, "successful": 1, "skipped": 0, "failed": 0}
    assert before <= created["creation_time"] <= int(time.time() * 1000)
    pit_id = created["pit_id"]

    # The PIT keeps its snapshot: a document written later is not seen through it.
    _index_docs(http, "logs", 5)
    page = http.post("/_search", json={"pit": {"id": pit_id, "keep_alive": "2m"}, "sort": ["_shard_doc"]})
    assert page.status_code == 200, page.text
    assert page.json()["hits"]["total"]["value"] == 3
    assert page.json()["pit_id"] == pit_id

    listed = http.get("/_search/point_in_time/_all").json()
    assert listed == {
        "pits": [{"pit_id": pit_id, "creation_time": created["creation_time"], "keep_alive": 120000}]
    }

    deleted = http.request("DELETE", "/_search/point_in_time", json={"pit_id": [pit_id]})
    assert deleted.status_code == 200
    assert deleted.json() == {"pits": [{"successful": True, "pit_id": pit_id}]}
    gone = http.post("/_search", json={"pit": {"id": pit_id}})
    assert gone.status_code == 404
    assert gone.json()["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
    assert http.get("/_search/point_in_time/_all").json() == {"pits": []}


def test_pits_opened_either_way_are_one_set(clocked: ClockedNode) -> None:
    http = clocked.http
    _index_docs(http, "a", 1)
    es_pit = http.post("/a/_pit", params={"keep_alive": "1m"}).json()["id"]
    os_pit = _create(http, "a")["pit_id"]
    listed = [p["pit_id"] for p in http.get("/_search/point_in_time/_all").json()["pits"]]
    assert listed == [es_pit, os_pit]
    # An OpenSearch PIT closes through Elasticsearch's API and the other way round.
    closed = http.request("DELETE", "/_pit", json={"id": os_pit})
    assert closed.json() == {"succeeded": True, "num_freed": 1}
    deleted = http.request("DELETE", "/_search/point_in_time", json={"pit_id": es_pit})
    assert deleted.json() == {"pits": [{"successful": True, "pit_id": es_pit}]}
    assert clocked.node.contexts.open_count() == 0


def test_delete_all_frees_every_pit_and_keeps_scrolls(clocked: ClockedNode) -> None:
    http = clocked.http
    _index_docs(http, "b", 4)
    ids = [_create(http, "b")["pit_id"] for _ in range(3)]
    scroll = http.post("/b/_search", params={"scroll": "1m"}, json={"size": 1}).json()["_scroll_id"]
    deleted = http.delete("/_search/point_in_time/_all")
    assert deleted.status_code == 200
    assert sorted(p["pit_id"] for p in deleted.json()["pits"]) == sorted(ids)
    assert all(p["successful"] for p in deleted.json()["pits"])
    assert http.get("/_search/point_in_time/_all").json() == {"pits": []}
    assert http.post("/_search/scroll", json={"scroll_id": scroll}).status_code == 200


def test_expired_pits_are_not_listed(clocked: ClockedNode) -> None:
    http = clocked.http
    _index_docs(http, "c", 1)
    short = _create(http, "c", "10s")["pit_id"]
    long = _create(http, "c", "5m")["pit_id"]
    clocked.clock.advance(11)
    assert [p["pit_id"] for p in http.get("/_search/point_in_time/_all").json()["pits"]] == [long]
    assert short != long


def test_refusals(clocked: ClockedNode) -> None:
    http = clocked.http
    _index_docs(http, "d", 1)
    no_keep_alive = http.post("/d/_search/point_in_time")
    assert no_keep_alive.status_code == 400
    assert error_of(no_keep_alive)["type"] == "action_request_validation_exception"
    assert error_of(no_keep_alive)["reason"] == "Validation Failed: 1: keep alive not specified;"
    missing_index = http.post("/nope/_search/point_in_time", params={"keep_alive": "1m"})
    assert missing_index.status_code == 404
    assert error_of(missing_index)["type"] == "index_not_found_exception"
    empty = http.request("DELETE", "/_search/point_in_time", json={})
    assert empty.status_code == 400
    assert error_of(empty)["reason"] == "Validation Failed: 1: no pit ids specified;"
    unknown_key = http.request("DELETE", "/_search/point_in_time", json={"id": "x"})
    assert unknown_key.status_code == 400
    assert error_of(unknown_key)["type"] == "illegal_argument_exception"
    assert clocked.node.contexts.open_count() == 0
