"""`_delete_by_query`, `_update_by_query`, `_reindex` and `_tasks` through the real HTTP API: raw
requests, the official client, its `helpers.reindex` and the DSL's `Search.delete()`.

Operations that must be caught mid-way run throttled (`requests_per_second` far below one batch a
second) with `scroll_size=1`: after its first batch the operation waits, which the test sees in
the task's status (`throttled_until_millis`); the test then acts (writes, cancels) and lifts the
throttle with `_rethrottle`, which wakes the wait at once. No test sleeps for a duration.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from elasticsearch import Elasticsearch, helpers

from tests.conftest import error_of

SLOW = "0.0001"  # requests per second: one document, then a wait of hours unless rethrottled


def fill(http: httpx.Client, index: str, n: int, *, start: int = 0) -> None:
    lines = []
    for i in range(start, start + n):
        lines.append(orjson.dumps({"index": {"_index": index, "_id": str(i)}}))
        lines.append(orjson.dumps({"n": i, "tag": "even" if i % 2 == 0 else "odd", "text": f"doc {i}"}))
    response = http.post("/_bulk?refresh=true", content=b"\n".join(lines) + b"\n", headers=_NDJSON)
    assert response.status_code == 200 and not response.json()["errors"], response.text


_NDJSON = {"content-type": "application/x-ndjson"}


def docs_of(http: httpx.Client, index: str) -> dict[str, dict[str, Any]]:
    http.post(f"/{index}/_refresh")
    body = http.post(f"/{index}/_search", json={"size": 1000, "version": True}).json()
    return {h["_id"]: {"_source": h["_source"], "_version": h["_version"]} for h in body["hits"]["hits"]}


def task_status(http: httpx.Client, task: str) -> dict[str, Any]:
    response = http.get(f"/_tasks/{task}")
    assert response.status_code == 200, response.text
    return response.json()


def until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll a condition on the server's state (a task's status) until it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def waiting_after(http: httpx.Client, task: str, batches: int) -> dict[str, Any]:
    """The task's status once it has written `batches` batches and waits in its throttle."""

    def check() -> dict[str, Any] | None:
        body = task_status(http, task)
        status = body["task"].get("status", {})
        if body["completed"]:
            raise AssertionError(f"the task ended before it was caught: {body}")
        if status.get("batches") == batches and status.get("throttled_until_millis", 0) > 0:
            return status
        return None

    return until(check, f"task {task} throttled after batch {batches}")


def start_slow(http: httpx.Client, path: str, body: dict[str, Any], **params: str) -> str:
    query = {"scroll_size": "1", "requests_per_second": SLOW, "wait_for_completion": "false", **params}
    response = http.post(path, params=query, json=body)
    assert response.status_code == 200, response.text
    return response.json()["task"]


def unthrottle(http: httpx.Client, api: str, task: str) -> None:
    response = http.post(f"/{api}/{task}/_rethrottle", params={"requests_per_second": "-1"})
    assert response.status_code == 200, response.text
    assert task in next(iter(response.json()["nodes"].values()))["tasks"]


def result_of(http: httpx.Client, task: str) -> dict[str, Any]:
    response = http.get(f"/_tasks/{task}", params={"wait_for_completion": "true", "timeout": "60s"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["completed"] is True
    return body


# ---- delete by query --------------------------------------------------------------------------


def test_delete_by_query_deletes_the_matches_and_answers_elasticsearch_counts(http, new_index):
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index, 10)
    response = http.post(f"/{index}/_delete_by_query?refresh=true", json={"query": {"term": {"tag": "odd"}}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == [
        "took",
        "timed_out",
        "total",
        "deleted",
        "batches",
        "version_conflicts",
        "noops",
        "retries",
        "throttled_millis",
        "requests_per_second",
        "throttled_until_millis",
        "failures",
    ]
    assert body["timed_out"] is False
    assert (body["total"], body["deleted"], body["batches"], body["version_conflicts"]) == (5, 5, 1, 0)
    assert body["retries"] == {"bulk": 0, "search": 0}
    assert body["requests_per_second"] == -1 and body["failures"] == []
    assert sorted(docs_of(http, index), key=int) == ["0", "2", "4", "6", "8"]


def test_delete_by_query_with_q_max_docs_and_scroll_size(http, new_index):
    index = new_index(settings={"number_of_shards": 1})
    fill(http, index, 9)
    body = http.post(f"/{index}/_delete_by_query?q=tag:even&scroll_size=2&refresh=true").json()
    assert (body["total"], body["deleted"], body["batches"]) == (5, 5, 3)
    body = http.post(
        f"/{index}/_delete_by_query?max_docs=1&refresh=true", json={"query": {"match_all": {}}}
    ).json()
    assert (body["total"], body["deleted"]) == (1, 1)
    body = http.post(
        f"/{index}/_delete_by_query?refresh", json={"query": {"match_all": {}}, "max_docs": 2}
    ).json()
    assert (body["total"], body["deleted"]) == (2, 2)
    assert len(docs_of(http, index)) == 1


def test_delete_by_query_through_the_client_and_the_dsl(es: Elasticsearch, http, new_index):
    index = new_index()
    fill(http, index, 6)
    body = es.delete_by_query(index=index, query={"range": {"n": {"gte": 4}}}, refresh=True)
    assert body["deleted"] == 2
    try:
        from elasticsearch.dsl import Search
    except ImportError:
        from elasticsearch_dsl import Search
    response = Search(using=es, index=index).query("term", tag="even").params(refresh=True).delete()
    assert response.deleted == 2
    assert sorted(docs_of(http, index), key=int) == ["1", "3"]


def test_sliced_delete_by_query_answers_each_slice(http, new_index):
    index = new_index(settings={"number_of_shards": 3})
    fill(http, index, 30)
    body = http.post(
        f"/{index}/_delete_by_query?slices=auto&refresh", json={"query": {"match_all": {}}}
    ).json()
    assert [s["slice_id"] for s in body["slices"]] == [0, 1, 2]
    assert body["deleted"] == sum(s["deleted"] for s in body["slices"]) == 30
    assert all(s["deleted"] > 0 for s in body["slices"])
    assert body["batches"] == 3
    assert docs_of(http, index) == {}
    fill(http, index, 30)
    body = http.post(
        f"/{index}/_delete_by_query?slices=5&max_docs=12", json={"query": {"match_all": {}}}
    ).json()
    assert len(body["slices"]) == 5
    assert [s["total"] for s in body["slices"]] == [3, 3, 2, 2, 2]
    assert body["deleted"] == 12


# ---- update by query -----------------------------------------------------------------------------


def test_update_by_query_reindexes_each_match_in_place(es: Elasticsearch, http, new_index):
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index, 8)
    before = docs_of(http, index)
    body = es.update_by_query(index=index, query={"term": {"tag": "even"}}, refresh=True)
    assert (body["total"], body["updated"], body["version_conflicts"]) == (4, 4, 0)
    assert "created" not in body and body["deleted"] == 0
    after = docs_of(http, index)
    assert {k: v["_source"] for k, v in after.items()} == {k: v["_source"] for k, v in before.items()}
    assert {k for k, v in after.items() if v["_version"] == 2} == {"0", "2", "4", "6"}
    assert {k for k, v in after.items() if v["_version"] == 1} == {"1", "3", "5", "7"}


def test_update_by_query_picks_up_a_new_mapping_field(http, new_index):
    """The use of an update by query without a script: documents indexed before a field was
    mapped become searchable on it."""
    index = new_index(mappings={"dynamic": False, "properties": {"n": {"type": "long"}}})
    fill(http, index, 4)
    assert http.post(f"/{index}/_count", json={"query": {"term": {"tag": "even"}}}).json()["count"] == 0
    response = http.put(f"/{index}/_mapping", json={"properties": {"tag": {"type": "keyword"}}})
    assert response.status_code == 200
    body = http.post(f"/{index}/_update_by_query?refresh=true").json()
    assert body["updated"] == 4
    assert http.post(f"/{index}/_count", json={"query": {"term": {"tag": "even"}}}).json()["count"] == 2


def test_update_by_query_with_a_script_that_does_not_compile_changes_nothing(http, new_index):
    index = new_index()
    fill(http, index, 3)
    response = http.post(
        f"/{index}/_update_by_query",
        json={"query": {"match_all": {}}, "script": {"source": "ctx._source.n +="}},
    )
    assert response.status_code == 400
    error = error_of(response)
    assert (error["type"], error["reason"]) == ("script_exception", "compile error")
    assert {v["_version"] for v in docs_of(http, index).values()} == {1}


@pytest.mark.parametrize(
    ("path", "params", "body", "status", "error_type", "reason"),
    [
        (
            "dbq",
            {"conflicts": "cat"},
            {"query": {"match_all": {}}},
            400,
            "illegal_argument_exception",
            'conflicts may only be "proceed" or "abort" but was [cat]',
        ),
        (
            "dbq",
            {"max_docs": "-4"},
            {"query": {"match_all": {}}},
            400,
            "illegal_argument_exception",
            "[max_docs] parameter cannot be negative, found [-4]",
        ),
        (
            "dbq",
            {"max_docs": "5"},
            {"query": {"match_all": {}}, "max_docs": 4},
            400,
            "illegal_argument_exception",
            "[max_docs] set to two different values [4] and [5]",
        ),
        (
            "dbq",
            {"max_docs": "1", "slices": "2"},
            {"query": {"match_all": {}}},
            400,
            "action_request_validation_exception",
            "Validation Failed: 1: [max_docs] should be >= [slices];",
        ),
        (
            "dbq",
            {"slices": "junk"},
            {"query": {"match_all": {}}},
            400,
            "illegal_argument_exception",
            '[slices] must be a positive integer or the string "auto", but was [junk]',
        ),
        (
            "dbq",
            {"slices": "0"},
            {"query": {"match_all": {}}},
            400,
            "illegal_argument_exception",
            '[slices] must be a positive integer or the string "auto", but was [0]',
        ),
        (
            "dbq",
            {"requests_per_second": "0"},
            {"query": {"match_all": {}}},
            400,
            "illegal_argument_exception",
            "[requests_per_second] must be a float greater than 0. Use -1 to disable throttling.",
        ),
        (
            "dbq",
            {"requests_per_second": "unlimited"},
            {"query": {"match_all": {}}},
            400,
            "illegal_argument_exception",
            "[requests_per_second] must be a float greater than 0. Use -1 to disable throttling.",
        ),
        (
            "dbq",
            {"scroll_size": "asdf"},
            {"query": {"match_all": {}}},
            400,
            "illegal_argument_exception",
            "Failed to parse int parameter [scroll_size] with value [asdf]",
        ),
        (
            "dbq",
            {},
            {},
            400,
            "action_request_validation_exception",
            "Validation Failed: 1: query is missing;",
        ),
        (
            "dbq",
            {"refresh": "wait_for"},
            {"query": {"match_all": {}}},
            400,
            "illegal_argument_exception",
            "Failed to parse value [wait_for] as only [true] or [false] are allowed.",
        ),
        (
            "ubq",
            {"wait_for_active_shards": "abc"},
            None,
            400,
            "illegal_argument_exception",
            "cannot parse ActiveShardCount[abc]",
        ),
        (
            "ubq",
            {"size": "3"},
            None,
            400,
            "illegal_argument_exception",
            "invalid parameter [size], use [max_docs] instead",
        ),
        (
            "ubq",
            {},
            {"stored_fields": ["_id"]},
            400,
            "action_request_validation_exception",
            "Validation Failed: 1: stored_fields is not supported in this context;",
        ),
    ],
)
def test_by_query_refusals(http, new_index, path, params, body, status, error_type, reason):
    index = new_index()
    fill(http, index, 2)
    api = "_delete_by_query" if path == "dbq" else "_update_by_query"
    response = http.post(f"/{index}/{api}", params=params, json=body)
    assert response.status_code == status, response.text
    error = error_of(response)
    assert (error["type"], error["reason"]) == (error_type, reason)
    assert {v["_version"] for v in docs_of(http, index).values()} == {1}


# ---- reindex ---------------------------------------------------------------------------------------


def test_reindex_gives_the_documents_helpers_reindex_gives(es: Elasticsearch, http, new_index):
    source = new_index(settings={"number_of_shards": 3}, suffix="-src")
    fill(http, source, 40)
    query = {"range": {"n": {"gte": 5, "lt": 35}}}
    server_side = es.reindex(
        source={"index": source, "query": query, "size": 7}, dest={"index": f"{source}-server"}, refresh=True
    )
    client_side = helpers.reindex(es, source, f"{source}-client", query={"query": query})
    try:
        assert (server_side["total"], server_side["created"], server_side["updated"]) == (30, 30, 0)
        assert server_side["batches"] == 5
        assert client_side[0] == 30
        server_docs = docs_of(http, f"{source}-server")
        client_docs = docs_of(http, f"{source}-client")
        assert len(server_docs) == 30
        assert {k: v["_source"] for k, v in server_docs.items()} == {
            k: v["_source"] for k, v in client_docs.items()
        }
        again = es.reindex(source={"index": source, "query": query}, dest={"index": f"{source}-server"})
        assert (again["created"], again["updated"]) == (0, 30)
    finally:
        es.indices.delete(index=f"{source}-server,{source}-client", ignore_unavailable=True)


def test_reindex_source_filter_max_docs_slices_and_routing(es: Elasticsearch, http, new_index):
    source = new_index(settings={"number_of_shards": 2}, suffix="-src")
    fill(http, source, 20)
    dest = f"{source}-dest"
    try:
        body = http.post(
            "/_reindex?refresh=true&slices=2",
            json={
                "source": {"index": [source], "_source": ["n"]},
                "dest": {"index": dest, "routing": "=r1"},
                "max_docs": 10,
            },
        ).json()
        assert body["created"] == 10 and len(body["slices"]) == 2
        hits = http.post(f"/{dest}/_search", json={"size": 100}).json()["hits"]["hits"]
        assert len(hits) == 10
        assert all(set(h["_source"]) == {"n"} and h["_routing"] == "r1" for h in hits)
        # op_type create: the existing copies are version conflicts, the others are created
        response = http.post(
            "/_reindex?refresh=true",
            json={
                "source": {"index": source},
                "dest": {"index": dest, "op_type": "create"},
                "conflicts": "proceed",
            },
        )
        body = response.json()
        assert response.status_code == 200
        assert (body["created"], body["version_conflicts"], body["failures"]) == (10, 10, [])
        response = http.post(
            "/_reindex", json={"source": {"index": source}, "dest": {"index": dest, "op_type": "create"}}
        )
        assert response.status_code == 409
        failure = response.json()["failures"][0]
        assert failure["status"] == 409 and failure["cause"]["type"] == "version_conflict_engine_exception"
        assert failure["index"] == dest
    finally:
        es.indices.delete(index=dest, ignore_unavailable=True)


@pytest.mark.parametrize(
    ("params", "body", "error_type", "reason"),
    [
        ({}, {"junk": {}}, "x_content_parse_exception", "[reindex] unknown field [junk]"),
        (
            {},
            {"source": {"index": "a"}, "dest": {"junk": 1}},
            "x_content_parse_exception",
            "[dest] unknown field [junk]",
        ),
        (
            {},
            {"source": {"index": "a"}, "dest": {}},
            "action_request_validation_exception",
            "Validation Failed: 1: index must be specified;",
        ),
        (
            {},
            {"source": {"index": "a"}, "dest": {"index": "b"}, "conflicts": "cat"},
            "illegal_argument_exception",
            'conflicts may only be "proceed" or "abort" but was [cat]',
        ),
        (
            {},
            {"source": {"index": "a"}, "dest": {"index": "b"}, "size": 4, "max_docs": 5},
            "illegal_argument_exception",
            "[max_docs] set to two different values [4] and [5]",
        ),
        (
            {},
            {"source": {"index": "a", "_source": False}, "dest": {"index": "b"}},
            "action_request_validation_exception",
            "Validation Failed: 1: _source:false is not supported in this context;",
        ),
        (
            {},
            {"source": {"index": "a", "remote": {"host": "http://h:9200"}}, "dest": {"index": "b"}},
            "illegal_argument_exception",
            "reindex from a [remote] cluster is not supported by leafsearch",
        ),
        (
            {},
            {"source": {"index": "a"}, "dest": {"index": "b"}, "script": {"source": "x +"}},
            "script_exception",
            "compile error",
        ),
        (
            {},
            {"source": {"index": "a"}, "dest": {"index": "b", "op_type": "upsert"}},
            "illegal_argument_exception",
            "opType must be 'create' or 'index', found: [upsert]",
        ),
        (
            {"slices": "junk"},
            {"source": {"index": "a"}, "dest": {"index": "b"}},
            "illegal_argument_exception",
            '[slices] must be a positive integer or the string "auto", but was [junk]',
        ),
    ],
)
def test_reindex_refusals(http, params, body, error_type, reason):
    response = http.post("/_reindex", params=params, json=body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert (error["type"], error["reason"]) == (error_type, reason)


def test_reindex_into_its_own_source_is_refused(http, new_index):
    index = new_index()
    fill(http, index, 2)
    response = http.post("/_reindex", json={"source": {"index": index}, "dest": {"index": index}})
    assert response.status_code == 400
    assert error_of(response)["reason"] == (
        f"Validation Failed: 1: reindex cannot write into an index its reading from [{index}];"
    )


# ---- snapshot and concurrency ------------------------------------------------------------------------


@pytest.mark.parametrize("conflicts", ["proceed", "abort"])
def test_writers_during_an_update_by_query_are_version_conflicts(http, new_index, conflicts):
    """Documents changed after the operation read them are not overwritten: each is a version
    conflict, counted with `proceed`, the end of the operation (409 failures) with `abort`.
    A document created meanwhile is not in the snapshot and is left alone."""
    index = new_index(settings={"number_of_shards": 1})
    fill(http, index, 6)
    task = start_slow(http, f"/{index}/_update_by_query", {"query": {"match_all": {}}}, conflicts=conflicts)
    status = waiting_after(http, task, 1)
    assert (status["total"], status["updated"]) == (6, 1)
    for doc in ("3", "5"):
        assert http.put(f"/{index}/_doc/{doc}", json={"n": -1, "tag": "changed"}).status_code == 200
    assert http.put(f"/{index}/_doc/new", json={"n": 99}).status_code == 201
    unthrottle(http, "_update_by_query", task)
    response = result_of(http, task)["response"]
    docs = docs_of(http, index)
    assert docs["new"]["_version"] == 1
    assert docs["3"]["_source"]["tag"] == "changed" and docs["3"]["_version"] == 2
    if conflicts == "proceed":
        assert (response["updated"], response["version_conflicts"], response["failures"]) == (4, 2, [])
        assert {k for k, v in docs.items() if v["_version"] == 2} == {"0", "1", "2", "3", "4", "5"}
    else:
        # the batch holding document 3 fails the operation: 4 and 5 are never written
        assert (response["updated"], response["version_conflicts"]) == (3, 1)
        [failure] = response["failures"]
        assert (failure["index"], failure["id"], failure["status"]) == (index, "3", 409)
        assert failure["cause"]["type"] == "version_conflict_engine_exception"
        assert failure["cause"]["reason"].startswith("[3]: version conflict, required seqNo [")
        assert docs["4"]["_version"] == 1


def test_a_version_conflict_answers_409_with_its_failures(http, new_index):
    """The synchronous answer: 409, the counts and the failure, as Elasticsearch gives them."""
    index = new_index(settings={"number_of_shards": 1})
    fill(http, index, 4)
    answer: dict[str, httpx.Response] = {}

    def run() -> None:
        answer["r"] = http.post(
            f"/{index}/_delete_by_query",
            params={"scroll_size": "1", "requests_per_second": SLOW},
            json={"query": {"match_all": {}}},
        )

    thread = threading.Thread(target=run)
    thread.start()
    try:
        task = until(
            lambda: next(
                (
                    t
                    for t, info in _listed(http, "indices:data/write/delete/byquery").items()
                    if info["description"] == f"delete-by-query [{index}]"
                ),
                None,
            ),
            "the delete by query to be listed",
        )
        waiting_after(http, task, 1)
        assert http.put(f"/{index}/_doc/2", json={"n": 2}).status_code == 200
        unthrottle(http, "_delete_by_query", task)
    finally:
        thread.join()
    response = answer["r"]
    assert response.status_code == 409
    body = response.json()
    assert (body["deleted"], body["version_conflicts"], body["batches"]) == (2, 1, 3)
    assert [(f["id"], f["status"]) for f in body["failures"]] == [("2", 409)]
    assert set(docs_of(http, index)) == {"2", "3"}


def _listed(http: httpx.Client, actions: str) -> dict[str, Any]:
    body = http.get("/_tasks", params={"actions": actions, "detailed": "true"}).json()
    return {tid: info for node in body["nodes"].values() for tid, info in node["tasks"].items()}


def test_concurrent_update_by_queries_count_every_write_once(http, new_index):
    """Several operations over the same documents at once: every document's version grows by
    the updates that succeeded on it, and each other attempt is a counted conflict."""
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index, 200)
    results: list[dict[str, Any]] = []
    barrier = threading.Barrier(4)

    def run() -> None:
        barrier.wait()
        response = http.post(f"/{index}/_update_by_query?conflicts=proceed&scroll_size=20")
        assert response.status_code == 200, response.text
        results.append(response.json())

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    assert all(r["updated"] + r["version_conflicts"] == 200 for r in results)
    docs = docs_of(http, index)
    assert sum(v["_version"] - 1 for v in docs.values()) == sum(r["updated"] for r in results)


# ---- tasks --------------------------------------------------------------------------------------------


def test_async_reindex_is_a_task_with_its_status_then_its_result(es: Elasticsearch, http, new_index):
    source = new_index(settings={"number_of_shards": 1}, suffix="-src")
    fill(http, source, 3)
    dest = f"{source}-dest"
    try:
        response = es.reindex(
            source={"index": source, "size": 1},
            dest={"index": dest},
            wait_for_completion=False,
            requests_per_second=float(SLOW),
        )
        task = response["task"]
        node_id = task.split(":")[0]
        status = waiting_after(http, task, 1)
        assert status["created"] == 1
        listed = es.tasks.list(actions="*reindex", detailed=True)
        info = listed["nodes"][node_id]["tasks"][task]
        assert info["action"] == "indices:data/write/reindex"
        assert info["description"] == f"reindex from [{source}] to [{dest}]"
        assert info["cancellable"] is True and info["status"]["total"] == 3
        plain = es.tasks.list(actions="*reindex")["nodes"][node_id]["tasks"][task]
        assert "status" not in plain and "description" not in plain
        assert es.tasks.list(actions="*byquery")["nodes"] == {}
        running = es.tasks.get(task_id=task)
        assert running["completed"] is False and running["task"]["id"] == int(task.split(":")[1])
        unthrottle(http, "_reindex", task)
        done = es.tasks.get(task_id=task, wait_for_completion=True)
        assert done["completed"] is True
        assert (done["response"]["created"], done["response"]["batches"]) == (3, 3)
        assert done["task"]["status"]["created"] == 3
        assert task not in _listed(http, "*reindex")
    finally:
        es.indices.delete(index=dest, ignore_unavailable=True)


def test_cancel_stops_an_operation_between_batches(es: Elasticsearch, http, new_index):
    index = new_index(settings={"number_of_shards": 1})
    fill(http, index, 5)
    task = start_slow(http, f"/{index}/_delete_by_query", {"query": {"match_all": {}}})
    waiting_after(http, task, 1)
    response = http.get(f"/_tasks/{task}", params={"wait_for_completion": "true", "timeout": "0s"})
    assert response.status_code == 500
    error = error_of(response)
    assert (error["type"], error["reason"]) == (
        "elasticsearch_timeout_exception",
        f"Timed out waiting for completion of [{task}]",
    )
    cancelled = es.tasks.cancel(task_id=task)
    [info] = [t for node in cancelled["nodes"].values() for t in node["tasks"].values()]
    assert info["cancelled"] is True and info["action"] == "indices:data/write/delete/byquery"
    done = result_of(http, task)
    assert done["response"]["canceled"] == "by user request"
    assert (done["response"]["deleted"], done["response"]["batches"]) == (1, 1)
    assert len(docs_of(http, index)) == 4


def test_cancel_reaches_every_slice(http, new_index):
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index, 10)
    task = start_slow(http, f"/{index}/_update_by_query", {}, slices="2")

    def both_waiting() -> bool:
        status = task_status(http, task)["task"]["status"]
        return all(
            s["throttled_until_millis"] > 0 for s in status.get("slices", [{"throttled_until_millis": 0}])
        )

    until(both_waiting, "both slices throttled")
    children = http.get("/_tasks", params={"parent_task_id": task, "group_by": "none"}).json()["tasks"]
    assert len(children) == 2 and all(c["parent_task_id"] == task for c in children)
    response = http.post(f"/_tasks/{task}/_cancel")
    assert response.status_code == 200
    result = result_of(http, task)["response"]
    assert result["canceled"] == "by user request"
    assert result["updated"] == 2 and [s["updated"] for s in result["slices"]] == [1, 1]


def test_task_refusals(http):
    node_id = next(iter(http.get("/_nodes").json()["nodes"]))
    response = http.get("/_tasks/nonsense")
    assert response.status_code == 400
    assert error_of(response)["reason"] == "malformed task id nonsense"
    response = http.get(f"/_tasks/{node_id}:999999")
    assert response.status_code == 404
    error = error_of(response)
    assert error["type"] == "resource_not_found_exception"
    assert error["reason"] == f"task [{node_id}:999999] isn't running and hasn't stored its results"
    response = http.post(f"/_tasks/{node_id}:999999/_cancel")
    assert response.status_code == 404
    assert error_of(response)["reason"] == f"task [{node_id}:999999] is not found"
    response = http.post(f"/_reindex/{node_id}:999999/_rethrottle")
    assert response.status_code == 400
    assert error_of(response)["reason"] == "requests_per_second is a required parameter"


def test_async_failure_is_stored_as_the_task_error(http):
    response = http.post(
        "/_reindex?wait_for_completion=false",
        json={"source": {"index": "no-such-index-x"}, "dest": {"index": "d"}},
    )
    assert response.status_code == 200
    done = result_of(http, response.json()["task"])
    assert done["error"]["type"] == "index_not_found_exception"
    assert "response" not in done


def test_by_query_writes_keep_each_document_routing(http, new_index):
    index = new_index(settings={"number_of_shards": 3})
    for i in range(6):
        assert http.put(f"/{index}/_doc/{i}?routing=user{i}", json={"n": i}).status_code == 201
    http.post(f"/{index}/_refresh")
    body = http.post(f"/{index}/_update_by_query?refresh=true").json()
    assert (body["updated"], body["failures"]) == (6, [])
    for i in range(6):
        doc = http.get(f"/{index}/_doc/{i}", params={"routing": f"user{i}"}).json()
        assert (doc["found"], doc["_version"], doc["_routing"]) == (True, 2, f"user{i}")
    body = http.post(
        f"/{index}/_delete_by_query?routing=user4&refresh=true", json={"query": {"term": {"n": 4}}}
    ).json()
    assert body["deleted"] == 1
    assert http.get(f"/{index}/_doc/4", params={"routing": "user4"}).json()["found"] is False


def test_max_docs_with_proceed_counts_successful_writes(http, new_index):
    """With `conflicts=proceed`, conflicts do not count toward `max_docs`: the walk goes on until
    that many documents were written. Documents 0 and 1 are changed after the last refresh, so
    the search reads their old versions and writing them conflicts."""
    index = new_index(settings={"number_of_shards": 1, "refresh_interval": "-1"})
    fill(http, index, 6)
    for doc in ("0", "1"):
        assert http.put(f"/{index}/_doc/{doc}", json={"n": int(doc)}).status_code == 200
    response = http.post(
        f"/{index}/_delete_by_query",
        params={"conflicts": "proceed", "max_docs": "3", "scroll_size": "3"},
        json={"query": {"match_all": {}}},
    )
    body = response.json()
    assert response.status_code == 200
    assert (body["total"], body["deleted"], body["version_conflicts"], body["batches"]) == (3, 3, 2, 2)
    assert set(docs_of(http, index)) == {"0", "1", "5"}


# ---- the task listings of test fixtures and tools ---------------------------------------------


def test_cat_tasks_lists_a_running_operation_and_pending_tasks_is_empty(http, new_index):
    """`_cat/tasks` shows a running by-query task in Elasticsearch's columns and forgets it once it
    ends; `_cluster/pending_tasks` is empty on one node."""
    index = new_index()
    fill(http, index, 6)
    task = start_slow(http, f"/{index}/_update_by_query", {"query": {"match_all": {}}})
    waiting_after(http, task, 1)
    rows = http.get("/_cat/tasks", params={"format": "json", "detailed": "true"}).json()
    (row,) = [row for row in rows if row["task_id"] == task]
    assert row["action"] == "indices:data/write/update/byquery"
    assert (row["parent_task_id"], row["type"], row["ip"]) == ("-", "transport", "127.0.0.1")
    assert row["description"].startswith("update-by-query [")
    assert row["running_time"] and int(row["start_time"]) > 0
    text = http.get("/_cat/tasks", params={"v": "true", "h": "task_id,action"}).text
    assert text.splitlines()[0].split() == ["task_id", "action"]
    assert [task, "indices:data/write/update/byquery"] in [line.split() for line in text.splitlines()]
    assert http.get("/_cluster/pending_tasks").json() == {"tasks": []}
    unthrottle(http, "_update_by_query", task)
    result_of(http, task)
    rows = http.get("/_cat/tasks", params={"format": "json"}).json()
    assert task not in [row["task_id"] for row in rows]
