"""`POST [/<target>]/_export` (a leafsearch extension): a snapshot's matching documents streamed
as NDJSON, through HTTP against the session's server (its pages rendered in search workers).

Each line is `{"_index","_id"[,"_routing"],"_source","sort"}`; the last is
`{"_export": {"count", "complete": true[, "pit_id"]}}`. A line's `sort` is the cursor to resume
after it; over a PIT a resumed or sliced export is exactly once while writes go on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest
from concurrency import wait_for
from conftest import ClockedNode, bulk_index, error_of

from leafsearch.errors import ElasticError, SearchPhaseExecution
from leafsearch.request.export_request import EXPORT_PAGE
from leafsearch.search import export_pages
from tests import web

NDJSON = "application/x-ndjson"


def _export(http: httpx.Client, path: str, body: dict[str, Any] | None = None) -> tuple[list[dict], dict]:
    """The lines of a whole export and its trailer, after checking the response's shape."""
    response = http.post(path, json=body or {})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == NDJSON
    assert response.headers.get("transfer-encoding") == "chunked"
    assert response.content.endswith(b"\n")
    lines = [orjson.loads(line) for line in response.content.splitlines()]
    trailer = lines.pop()
    assert set(trailer) == {"_export"}, trailer
    assert trailer["_export"]["count"] == len(lines)
    assert trailer["_export"]["complete"] is True
    return lines, trailer["_export"]


def _docs(n: int) -> dict[str, dict[str, Any]]:
    return {f"d{i}": {"n": i, "tag": f"t{i % 5}", "body": {"a": i % 3, "b": "x" * (i % 7)}} for i in range(n)}


def _walks(http: httpx.Client) -> dict[str, Any]:
    return next(iter(http.get("/_nodes/stats/walks").json()["nodes"].values()))["walks"]


def _open_pit(http: httpx.Client, index: str) -> str:
    response = http.post(f"/{index}/_pit?keep_alive=5m")
    assert response.status_code == 200, response.text
    return response.json()["id"]


def test_an_export_streams_every_document_of_the_snapshot_in_index_order(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 3})
    docs = _docs(3 * EXPORT_PAGE + 17)  # several pages, and a last one that is not full
    bulk_index(http, index, docs)
    http.put(f"/{index}/_doc/routed?routing=r1&refresh=true", json={"n": -1})
    lines, summary = _export(http, f"/{index}/_export")
    assert "pit_id" not in summary
    assert len(lines) == len(docs) + 1
    by_id = {line["_id"]: line for line in lines}
    assert len(by_id) == len(lines)
    assert {k: v["_source"] for k, v in by_id.items() if k != "routed"} == docs
    assert by_id["routed"]["_routing"] == "r1"
    assert all("_routing" not in line for line in lines if line["_id"] != "routed")
    for line in lines:
        assert list(line) == [
            "_index",
            "_id",
            *(["_routing"] if "_routing" in line else []),
            "_source",
            "sort",
        ]
        assert line["_index"] == index
    sorts = [line["sort"] for line in lines]
    assert sorts == sorted(sorts)  # `_shard_doc` ascending: the snapshot's index order
    # Over plain HTTP the pages after the first were written to the socket by their renderer.
    assert _walks(http)["exports"]["written_by_renderer"] > 0


def test_a_query_a_sort_and_source_filtering_shape_the_lines(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    docs = _docs(2 * EXPORT_PAGE)
    bulk_index(http, index, docs)
    body = {
        "query": {"term": {"tag": "t3"}},
        "sort": [{"n": "desc"}],
        "_source": {"includes": ["n", "body.*"], "excludes": ["body.b"]},
    }
    lines, _ = _export(http, f"/{index}/_export", body)
    expected = sorted((d["n"] for d in docs.values() if d["tag"] == "t3"), reverse=True)
    assert [line["_source"]["n"] for line in lines] == expected
    assert all(
        line["_source"] == {"n": line["_source"]["n"], "body": {"a": line["_source"]["n"] % 3}}
        for line in lines
    )
    assert all(line["sort"][0] == line["_source"]["n"] and len(line["sort"]) == 2 for line in lines)
    lines, _ = _export(http, f"/{index}/_export", {"_source": False, "query": {"term": {"tag": "t0"}}})
    assert len(lines) == len(docs) // 5 and all("_source" not in line for line in lines)


def test_a_resumed_pit_export_gives_the_rest_exactly_once_while_writes_go_on(
    http: httpx.Client, server: str, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    docs = _docs(3 * EXPORT_PAGE)
    bulk_index(http, index, docs)
    pit = _open_pit(http, index)
    body = {"pit": {"id": pit, "keep_alive": "5m"}, "sort": [{"tag.keyword": "asc"}, {"n": "desc"}]}
    with _writers(server, index, len(docs)):
        whole, summary = _export(http, "/_export", body)
        assert summary["pit_id"] == pit
        assert sorted(line["_id"] for line in whole) == sorted(docs)
        for cut in (0, 1, EXPORT_PAGE - 1, EXPORT_PAGE, 2 * EXPORT_PAGE + 7, len(whole) - 2, len(whole) - 1):
            rest, _ = _export(http, "/_export", {**body, "search_after": whole[cut]["sort"]})
            assert rest == whole[cut + 1 :], cut
    http.request("DELETE", "/_pit", json={"id": pit})


def test_pit_slices_partition_the_export_while_writes_go_on(
    http: httpx.Client, server: str, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    docs = _docs(2 * EXPORT_PAGE + 333)
    bulk_index(http, index, docs)
    pit = _open_pit(http, index)
    with _writers(server, index, len(docs)):
        whole, _ = _export(http, "/_export", {"pit": {"id": pit}})
        parts = [
            _export(http, "/_export", {"pit": {"id": pit}, "slice": {"id": i, "max": 3}})[0] for i in range(3)
        ]
    ids = [line["_id"] for part in parts for line in part]
    assert len(ids) == len(set(ids)) == len(docs)
    assert sorted(ids) == sorted(line["_id"] for line in whole)
    assert all(part for part in parts)
    http.request("DELETE", "/_pit", json={"id": pit})


def test_an_export_of_its_own_snapshot_does_not_see_later_writes(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    """Pages after the first are read from the snapshot taken at the request."""
    index = new_index()
    bulk_index(http, index, _docs(2 * EXPORT_PAGE))
    with http.stream("POST", f"/{index}/_export", json={}) as response:
        chunks = response.iter_bytes()
        first = next(chunks)
        bulk_index(http, index, {f"late{i}": {"n": i} for i in range(50)})
        http.delete(f"/{index}/_doc/d{2 * EXPORT_PAGE - 1}?refresh=true")
        body = first + b"".join(chunks)
    lines = [orjson.loads(line) for line in body.splitlines()]
    assert lines[-1]["_export"]["count"] == 2 * EXPORT_PAGE
    assert {line["_id"] for line in lines[:-1]} == {f"d{i}" for i in range(2 * EXPORT_PAGE)}


@pytest.mark.parametrize(
    ("body", "error_type", "reason"),
    [
        ({"size": 10}, "parsing_exception", "Unknown key for a VALUE_NUMBER in [size]."),
        ({"from": 1}, "parsing_exception", "Unknown key for a VALUE_NUMBER in [from]."),
        ({"aggs": {}}, "parsing_exception", "Unknown key for a START_OBJECT in [aggs]."),
        ({"query": {"nope": {}}}, "parsing_exception", "unknown query [nope]"),
        ({"slice": {"id": 2, "max": 2}}, "x_content_parse_exception", None),
        ({"sort": 5}, None, None),
        ({"search_after": [1, 2, 3]}, None, None),
    ],
)
def test_bad_bodies_are_refused_before_the_first_byte(
    http: httpx.Client, new_index: Callable[..., str], body: dict, error_type: str | None, reason: str | None
) -> None:
    index = new_index()
    bulk_index(http, index, _docs(10))
    before = _walks(http)
    response = http.post(f"/{index}/_export", json=body)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    if error_type is not None:
        assert error["type"] == error_type
    if reason is not None:
        assert reason in error["reason"]
    after = _walks(http)
    assert after["exports"]["current"] == 0
    assert after["open_contexts"] == before["open_contexts"]


def test_targets_and_pits_are_checked_as_a_search_checks_them(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    bulk_index(http, index, _docs(10))
    response = http.post("/_export", json={})
    assert response.status_code == 400 and "[index] is not specified" in error_of(response)["reason"]
    response = http.post(f"/{index}-missing/_export", json={})
    assert response.status_code == 404 and error_of(response)["type"] == "index_not_found_exception"
    pit = _open_pit(http, index)
    response = http.post(f"/{index}/_export", json={"pit": {"id": pit}})
    assert response.status_code == 400 and "[indices] cannot be used with point in time" in response.text
    http.request("DELETE", "/_pit", json={"id": pit})
    response = http.post("/_export", json={"pit": {"id": pit}})
    assert response.status_code == 404
    assert response.json()["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
    json_type = {"content-type": "application/json"}
    response = http.post(f"/{index}/_export", content=b"{not json", headers=json_type)
    assert response.status_code == 400


def test_a_client_that_goes_away_mid_stream_frees_the_export(
    http: httpx.Client, server: str, new_index: Callable[..., str]
) -> None:
    """The stream is far larger than what the server renders ahead (a few pages): the producer
    waits for the socket, and a disconnect stops it and frees the export's snapshot."""
    index = new_index()
    big = "y" * 2000
    bulk_index(http, index, {f"d{i}": {"n": i, "big": big} for i in range(12 * EXPORT_PAGE)})
    before = _walks(http)
    contexts_before = before["open_contexts"]
    for attempt in range(3):
        wait_for(lambda: _walks(http)["exports"]["current"] == 0)  # the one before has stopped
        with (
            web.Client(base_url=server, timeout=60) as client,
            client.stream("POST", f"/{index}/_export", json={}) as response,
        ):
            assert response.status_code == 200
            chunks = response.iter_bytes()  # (kept: a dropped iterator closes the response)
            next(chunks)
            running = _walks(http)
            assert running["exports"]["current"] == 1, attempt
            assert running["open_contexts"] == contexts_before + 1
    wait_for(lambda: _walks(http)["exports"]["current"] == 0)
    walks = _walks(http)
    assert walks["open_contexts"] == contexts_before
    assert walks["exports"]["cancelled"] == before["exports"]["cancelled"] + 3


def test_repeated_exports_leave_nothing_held(http: httpx.Client, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"number_of_shards": 2})
    bulk_index(http, index, _docs(2 * EXPORT_PAGE))
    before = _walks(http)
    for _ in range(5):
        lines, _ = _export(http, f"/{index}/_export", {"sort": [{"n": "asc"}]})
        assert len(lines) == 2 * EXPORT_PAGE
    after = _walks(http)
    assert after["exports"]["current"] == 0
    assert after["open_contexts"] == before["open_contexts"]
    assert not [c for c in after["contexts"] if c["type"] == "export"]


def test_an_error_after_the_first_line_ends_the_stream_with_an_error_line(
    clocked: ClockedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page that fails once lines were sent: the status is sent, so the stream ends with
    Elasticsearch's error body as a line and no `_export` line; resuming after the last line
    received gives the rest. (An in-process node: its pages run here, where the fault is put.)"""
    http = clocked.http
    bulk_index(http, "failing", _docs(3 * EXPORT_PAGE))
    real_page = export_pages.page
    calls = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise SearchPhaseExecution(ElasticError("the third page failed", status=500))
        return real_page(*args, **kwargs)

    monkeypatch.setattr(export_pages, "page", failing)
    response = http.post("/failing/_export", json={})
    assert response.status_code == 200
    lines = [orjson.loads(line) for line in response.content.splitlines()]
    error = lines.pop()
    assert error["error"]["type"] == "search_phase_execution_exception" and error["status"] == 500
    assert not [line for line in lines if "_export" in line]
    assert len(lines) == 2 * EXPORT_PAGE
    rest, _ = _export(http, "/failing/_export", {"search_after": lines[-1]["sort"]})
    assert sorted(line["_id"] for line in lines + rest) == sorted(_docs(3 * EXPORT_PAGE))


# ---------------------------------------------------------------------------------------------


@contextmanager
def _writers(server: str, index: str, n: int) -> Iterator[None]:
    """Two clients updating, deleting and adding documents, with refreshes and a force merge,
    until the block ends (after each has done some work)."""
    stop = threading.Event()
    started = threading.Barrier(3)
    errors: list[str] = []

    def write(offset: int) -> None:
        with web.Client(base_url=server, timeout=60) as client:
            i = 0
            while True:
                k = (i * 2 + offset) % n
                lines = [
                    orjson.dumps({"index": {"_index": index, "_id": f"d{k}"}}),
                    orjson.dumps({"n": k + n, "tag": "changed"}),
                    orjson.dumps({"delete": {"_index": index, "_id": f"d{(k + 1) % n}"}}),
                    orjson.dumps({"index": {"_index": index, "_id": f"new{offset}-{i}"}}),
                    orjson.dumps({"n": -i, "tag": "t1"}),
                ]
                response = client.post(
                    "/_bulk", content=b"\n".join(lines) + b"\n", headers={"content-type": NDJSON}
                )
                if response.status_code != 200:
                    errors.append(response.text)
                client.post(f"/{index}/_refresh")
                if i % 5 == 4:
                    client.post(f"/{index}/_forcemerge?max_num_segments=1")
                i += 1
                if i == 3:
                    started.wait()
                if stop.is_set() and i >= 3:
                    return

    threads = [threading.Thread(target=write, args=(o,)) for o in range(2)]
    for thread in threads:
        thread.start()
    started.wait()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors
