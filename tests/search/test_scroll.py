"""Scroll through the HTTP API: opening, batches, keep-alive and expiry, clearing, refusals, limits,
the official client's helpers, `_cat/search_contexts` and `_nodes/stats`.

Errors that Elasticsearch raises on the shards come wrapped in a `search_phase_execution_exception`
whose root cause and status are the shard's: tests read the root cause, as clients do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import ClockedNode, running_server
from elasticsearch import Elasticsearch, NotFoundError, helpers

from tests import web

NDJSON = {"content-type": "application/x-ndjson"}
MAPPING = {"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}, "v": {"type": "long"}}}


def root_cause(response: httpx.Response) -> tuple[int, str, str]:
    """(status, root cause type, root cause reason) of an Elasticsearch error response."""
    body = response.json()
    assert body["status"] == response.status_code
    cause = body["error"]["root_cause"][0]
    return response.status_code, cause["type"], cause["reason"]


def fill(es: Elasticsearch, index: str, n: int, start: int = 0, **fields: Any) -> None:
    helpers.bulk(
        es,
        (
            {"_index": index, "_id": str(i), "_source": {"n": i, "k": f"k{i % 4}", **fields}}
            for i in range(start, n)
        ),
        refresh=True,
    )


def delete(es: Elasticsearch, index: str, ids: range) -> None:
    helpers.bulk(es, ({"_op_type": "delete", "_index": index, "_id": str(i)} for i in ids), refresh=True)


@pytest.fixture
def docs(es: Elasticsearch, new_index: Callable[..., str]) -> str:
    """An index of 3 shards holding documents 0..199 (`n` = id, `k` = one of 4 keywords, `v` = 0)."""
    index = new_index(settings={"number_of_shards": 3}, mappings=MAPPING)
    fill(es, index, 200, v=0)
    return index


def open_scroll(
    http: httpx.Client, index: str, body: dict[str, Any], keep_alive: str = "1m"
) -> dict[str, Any]:
    response = http.post(f"/{index}/_search", params={"scroll": keep_alive}, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def next_batch(http: httpx.Client, scroll_id: str, keep_alive: str | None = "1m") -> httpx.Response:
    body = {"scroll_id": scroll_id} if keep_alive is None else {"scroll_id": scroll_id, "scroll": keep_alive}
    return http.post("/_search/scroll", json=body)


def drain(http: httpx.Client, first: dict[str, Any]) -> list[dict[str, Any]]:
    """Every hit of a scroll, batch after batch until an empty one; the context is then cleared."""
    hits, scroll_id, batch = [], first["_scroll_id"], first
    while batch["hits"]["hits"]:
        hits += batch["hits"]["hits"]
        response = next_batch(http, scroll_id)
        assert response.status_code == 200, response.text
        batch = response.json()
        assert batch["_scroll_id"] != scroll_id  # each id names the position after its batch
        scroll_id = batch["_scroll_id"]
    # Exhausted, still clearable, by any of its ids.
    assert http.delete(f"/_search/scroll/{first['_scroll_id']}").status_code == 200
    return hits


def contexts(http: httpx.Client) -> list[dict[str, str]]:
    return http.get("/_cat/search_contexts", params={"format": "json"}).json()


def search_stats(http: httpx.Client, path: str = "/_nodes/stats/indices/search") -> dict[str, int]:
    nodes = http.get(path).json()["nodes"]
    assert len(nodes) == 1
    return next(iter(nodes.values()))["indices"]["search"]


# ---- opening and batches ---------------------------------------------------------------------


def test_doc_order_scroll_returns_every_document_once(
    http: httpx.Client, es: Elasticsearch, docs: str
) -> None:
    delete(es, docs, range(150, 200))
    first = open_scroll(http, docs, {"sort": ["_doc"], "size": 16})
    assert first["hits"]["total"] == {"value": 150, "relation": "eq"}
    assert first["hits"]["max_score"] is None
    assert all(hit["_score"] is None and len(hit["sort"]) == 1 for hit in first["hits"]["hits"])
    ids = [int(hit["_id"]) for hit in drain(http, first)]
    assert sorted(ids) == list(range(150))


def test_sorted_scroll_keeps_its_order_across_batches(http: httpx.Client, docs: str) -> None:
    first = open_scroll(http, docs, {"sort": [{"k": "desc"}, {"n": "asc"}], "size": 7})
    seen = [(hit["_source"]["k"], hit["_source"]["n"]) for hit in drain(http, first)]
    assert seen == sorted(((f"k{i % 4}", i) for i in range(200)), key=lambda kn: (-int(kn[0][1]), kn[1]))


def test_total_is_exact_beyond_ten_thousand(
    http: httpx.Client, es: Elasticsearch, new_index: Callable
) -> None:
    index = new_index(mappings=MAPPING)
    fill(es, index, 10_050)
    plain = http.post(f"/{index}/_search", json={"size": 0}).json()
    assert plain["hits"]["total"] == {"value": 10_000, "relation": "gte"}
    first = open_scroll(http, index, {"size": 1, "sort": ["_doc"]})
    assert first["hits"]["total"] == {"value": 10_050, "relation": "eq"}
    later = next_batch(http, first["_scroll_id"], None).json()
    assert later["hits"]["total"] == {"value": 10_050, "relation": "eq"}


def test_aggregations_come_only_with_the_first_batch(http: httpx.Client, docs: str) -> None:
    first = open_scroll(http, docs, {"size": 50, "aggs": {"keys": {"terms": {"field": "k"}}}})
    assert {b["key"]: b["doc_count"] for b in first["aggregations"]["keys"]["buckets"]} == {
        f"k{i}": 50 for i in range(4)
    }
    second = next_batch(http, first["_scroll_id"]).json()
    assert len(second["hits"]["hits"]) == 50
    assert "aggregations" not in second
    http.delete(f"/_search/scroll/{first['_scroll_id']}")


def test_writes_after_opening_never_show_up(http: httpx.Client, es: Elasticsearch, docs: str) -> None:
    first = open_scroll(http, docs, {"sort": ["_doc"], "size": 30})
    delete(es, docs, range(100))
    fill(es, docs, 400, start=150, v=1)  # updates 150..199, adds 200..399
    hits = drain(http, first)
    assert sorted(int(hit["_id"]) for hit in hits) == list(range(200))
    assert {hit["_source"]["v"] for hit in hits} == {0}
    assert first["hits"]["total"]["value"] == 200


def test_concurrent_writes_during_a_scan_never_appear(es: Elasticsearch, docs: str) -> None:
    stop = threading.Event()
    progress = threading.Condition()
    written: list[int] = []  # one entry per (new document, update of an old one) the writer completed

    def write() -> None:
        n = 1000
        while not stop.is_set():
            es.index(index=docs, id=str(n), document={"n": n, "k": "new", "v": 1}, refresh=True)
            es.index(index=docs, id=str(n % 200), document={"n": n % 200, "k": "changed", "v": 1})
            with progress:
                written.append(n)
                progress.notify_all()
            n += 1

    writer = threading.Thread(target=write)
    scan = helpers.scan(es, index=docs, size=9, scroll="1m")
    hits = [next(scan)]
    writer.start()
    try:
        for hit in scan:
            hits.append(hit)
            if len(hits) % 9 == 0:  # a whole batch read: the writer lands a write before the next one
                with progress:
                    assert progress.wait_for(lambda done=len(written): len(written) > done, timeout=60)
        during = len(written)
    finally:
        stop.set()
        writer.join()
    assert during >= 200 // 9 - 1  # a write between every two batches
    assert sorted(int(hit["_id"]) for hit in hits) == list(range(200))
    for hit in hits:
        n = int(hit["_id"])
        assert hit["_source"] == {"n": n, "k": f"k{n % 4}", "v": 0}
    es.indices.refresh(index=docs)
    assert es.count(index=docs)["count"] == 200 + len(written)
    changed = es.count(index=docs, query={"term": {"k": "changed"}})["count"]
    assert changed == min(len(written), 200)


def test_scroll_over_several_indices(http: httpx.Client, es: Elasticsearch, new_index: Callable) -> None:
    a, b = new_index(mappings=MAPPING, suffix="-a"), new_index(mappings=MAPPING, suffix="-b")
    fill(es, a, 20)
    fill(es, b, 30)
    hits = drain(http, open_scroll(http, f"{a},{b}", {"size": 8, "sort": ["_doc"]}))
    assert sorted((hit["_index"], int(hit["_id"])) for hit in hits) == sorted(
        [(a, i) for i in range(20)] + [(b, i) for i in range(30)]
    )


# ---- next-batch forms, keep-alive, freeing ---------------------------------------------------


def test_next_batch_forms(http: httpx.Client, docs: str) -> None:
    scroll_id = open_scroll(http, docs, {"sort": ["n"], "size": 5})["_scroll_id"]
    forms: list[Callable[[str], httpx.Response]] = [
        lambda sid: http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": sid}),
        lambda sid: http.request("GET", "/_search/scroll", json={"scroll": "1m", "scroll_id": sid}),
        lambda sid: http.get("/_search/scroll", params={"scroll": "1m", "scroll_id": sid}),
        lambda sid: http.get(f"/_search/scroll/{sid}", params={"scroll": "1m"}),
        lambda sid: http.post(f"/_search/scroll/{sid}", params={"scroll": "1m"}),
        # The body wins over the query string (Elasticsearch's scroll/10_basic.yml).
        lambda sid: http.post(
            "/_search/scroll", params={"scroll_id": "invalid"}, json={"scroll_id": sid, "scroll": "1m"}
        ),
    ]
    pages = []
    for form in forms:
        page = form(scroll_id).json()
        pages.append(page)
        scroll_id = page["_scroll_id"]
    assert [[h["_source"]["n"] for h in page["hits"]["hits"]] for page in pages] == [
        list(range(5 * i, 5 * i + 5)) for i in range(1, 7)
    ]
    as_int = http.get("/_search/scroll", params={"scroll_id": scroll_id, "rest_total_hits_as_int": "true"})
    assert as_int.json()["hits"]["total"] == 200


def test_a_request_without_scroll_returns_its_batch_and_frees_the_context(
    http: httpx.Client, docs: str
) -> None:
    scroll_id = open_scroll(http, docs, {"sort": ["n"], "size": 10})["_scroll_id"]
    last = next_batch(http, scroll_id, keep_alive=None)
    assert [h["_source"]["n"] for h in last.json()["hits"]["hits"]] == list(range(10, 20))
    status, kind, reason = root_cause(next_batch(http, scroll_id))
    assert (status, kind) == (404, "search_context_missing_exception")
    assert reason.startswith("No search context found for id [") and "cleared" not in reason
    assert scroll_id not in {row["id"] for row in contexts(http)}


def test_exhausted_scroll_stays_until_cleared(http: httpx.Client, docs: str) -> None:
    first = open_scroll(http, docs, {"size": 200})
    scroll_id = first["_scroll_id"]
    for _ in range(2):
        empty = next_batch(http, scroll_id).json()
        assert empty["hits"]["hits"] == [] and empty["hits"]["total"]["value"] == 200
    cleared = http.request("DELETE", "/_search/scroll", json={"scroll_id": scroll_id})
    assert (cleared.status_code, cleared.json()) == (200, {"succeeded": True, "num_freed": 1})


@pytest.fixture
def clocked_docs(clocked: ClockedNode) -> str:
    """Documents 0..19 in an index of the in-process node on a fake clock (see `clocked`)."""
    assert clocked.http.put("/clocked", json={"mappings": MAPPING}).status_code == 200
    lines = b"".join(b'{"index":{"_id":"%d"}}\n{"n":%d}\n' % (i, i) for i in range(20))
    bulk = clocked.http.post("/clocked/_bulk", params={"refresh": "true"}, content=lines, headers=NDJSON)
    assert bulk.status_code == 200 and not bulk.json()["errors"]
    return "clocked"


def test_scroll_resets_the_expiry(clocked: ClockedNode, clocked_docs: str) -> None:
    http, clock = clocked.http, clocked.clock
    scroll_id = open_scroll(http, clocked_docs, {"size": 1}, keep_alive="2s")["_scroll_id"]
    clock.advance(1.5)
    second = next_batch(http, scroll_id, "30s")
    assert second.status_code == 200
    clock.advance(29.0)  # far past the first keep-alive, within the second
    clocked.node.contexts.reap()
    third = next_batch(http, second.json()["_scroll_id"], "30s")
    assert third.status_code == 200
    row = next(row for row in contexts(http) if row["id"] == third.json()["_scroll_id"])
    assert (row["keep_alive"], row["requests"], row["time_left"]) == ("30s", "3", "30s")
    assert http.delete(f"/_search/scroll/{scroll_id}").json()["num_freed"] == 1


def test_the_reaper_frees_expired_contexts_without_being_asked(
    clocked: ClockedNode, clocked_docs: str
) -> None:
    http, clock = clocked.http, clocked.clock
    before = search_stats(http)
    scroll_id = open_scroll(http, clocked_docs, {"size": 1}, keep_alive="250ms")["_scroll_id"]
    clock.advance(0.25)
    clocked.node.contexts.reap()
    assert [row["id"] for row in contexts(http)] == [scroll_id]  # whole until it has passed
    clock.advance(0.25)
    clocked.node.contexts.reap()
    assert contexts(http) == []
    after = search_stats(http)
    assert (after["scroll_total"], after["scroll_current"]) == (before["scroll_total"] + 1, 0)
    assert after["scroll_time_in_millis"] == before["scroll_time_in_millis"] + 500  # on the node's clock
    status, kind, reason = root_cause(next_batch(http, scroll_id))
    assert (status, kind) == (404, "search_context_missing_exception")
    assert "expired" in reason
    cleared = http.delete(f"/_search/scroll/{scroll_id}")
    assert (cleared.status_code, cleared.json()) == (404, {"succeeded": True, "num_freed": 0})


def test_unknown_cleared_and_malformed_ids(http: httpx.Client, es: Elasticsearch, docs: str) -> None:
    scroll_id = open_scroll(http, docs, {"size": 1})["_scroll_id"]
    assert http.delete(f"/_search/scroll/{scroll_id}").status_code == 200
    status, kind, reason = root_cause(next_batch(http, scroll_id))
    assert (status, kind) == (404, "search_context_missing_exception")
    assert "cleared" in reason
    with pytest.raises(NotFoundError):
        es.scroll(scroll_id=scroll_id, scroll="1m")
    status, kind, reason = root_cause(next_batch(http, "not-a-scroll-id"))
    assert (status, kind, reason) == (400, "illegal_argument_exception", "Cannot parse scroll id")
    pit_id = http.post(f"/{docs}/_pit", params={"keep_alive": "1m"}).json()["id"]
    assert root_cause(next_batch(http, pit_id))[:2] == (400, "illegal_argument_exception")
    http.request("DELETE", "/_pit", json={"id": pit_id})


def test_keep_alive_limits(http: httpx.Client, docs: str) -> None:
    limits = {"search.default_keep_alive": "30s", "search.max_keep_alive": "1m"}
    assert http.put("/_cluster/settings", json={"transient": limits}).status_code == 200
    try:
        too_long = http.post(f"/{docs}/_search", params={"scroll": "2m"}, json={"size": 1})
        assert root_cause(too_long) == (
            400,
            "illegal_argument_exception",
            "Keep alive for request (2m) is too large. It must be less than (1m). This limit can be set by "
            "changing the [search.max_keep_alive] cluster level setting.",
        )
        scroll_id = open_scroll(http, docs, {"size": 1})["_scroll_id"]
        refused = next_batch(http, scroll_id, "3m")
        assert root_cause(refused)[:2] == (400, "illegal_argument_exception")
        # As in Elasticsearch, a scroll whose next request is refused this way is freed.
        assert root_cause(next_batch(http, scroll_id))[:2] == (404, "search_context_missing_exception")
    finally:
        reset = {"search.default_keep_alive": None, "search.max_keep_alive": None}
        http.put("/_cluster/settings", json={"transient": reset})


def test_deleting_the_index_frees_its_scrolls(http: httpx.Client, es: Elasticsearch, index_name: str) -> None:
    es.indices.create(index=index_name, mappings=MAPPING)
    fill(es, index_name, 5)
    scroll_id = open_scroll(http, index_name, {"size": 1})["_scroll_id"]
    es.indices.delete(index=index_name)
    status, kind, reason = root_cause(next_batch(http, scroll_id))
    assert (status, kind) == (404, "search_context_missing_exception")
    assert "index was deleted" in reason


# ---- clear scroll ----------------------------------------------------------------------------


def test_clear_scroll_forms(http: httpx.Client, docs: str) -> None:
    ids = [open_scroll(http, docs, {"size": 1})["_scroll_id"] for _ in range(7)]
    forms = [
        http.request("DELETE", "/_search/scroll", json={"scroll_id": ids[0]}),
        http.request("DELETE", "/_search/scroll", json={"scroll_id": [ids[1], ids[2]]}),
        http.delete(f"/_search/scroll/{ids[3]},{ids[4]}"),
        http.delete("/_search/scroll", params={"scroll_id": ids[5]}),
        # A body replaces the query string's ids (Elasticsearch's scroll/11_clear.yml).
        http.request(
            "DELETE", "/_search/scroll", params={"scroll_id": "invalid"}, json={"scroll_id": [ids[6]]}
        ),
    ]
    assert [(r.status_code, r.json()["num_freed"]) for r in forms] == [
        (200, 1),
        (200, 2),
        (200, 2),
        (200, 1),
        (200, 1),
    ]
    again = http.delete(f"/_search/scroll/{ids[0]}")
    assert (again.status_code, again.json()) == (404, {"succeeded": True, "num_freed": 0})
    assert root_cause(http.delete("/_search/scroll/garbage")) == (
        400,
        "illegal_argument_exception",
        "Cannot parse scroll id",
    )


def test_clear_all_scrolls_leaves_points_in_time(http: httpx.Client, docs: str) -> None:
    scroll_ids = {open_scroll(http, docs, {"size": 1})["_scroll_id"] for _ in range(3)}
    pit_id = http.post(f"/{docs}/_pit", params={"keep_alive": "1m"}).json()["id"]
    cleared = http.delete("/_search/scroll/_all")
    assert cleared.status_code == 200 and cleared.json()["num_freed"] >= 3
    left = {row["id"]: row["type"] for row in contexts(http)}
    assert not scroll_ids & left.keys()
    assert left[pit_id] == "pit"
    again = http.delete("/_search/scroll/_all")  # nothing left to free: still 200, as Elasticsearch
    assert (again.status_code, again.json()["num_freed"]) == (200, 0)
    assert http.request("DELETE", "/_pit", json={"id": pit_id}).json()["num_freed"] == 1


# ---- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "params", "reason"),
    [
        ({"from": 5}, {}, "using [from] is not allowed in a scroll context"),
        ({"size": 0}, {}, "[size] cannot be [0] in a scroll context"),
        ({"sort": ["n"], "search_after": [3]}, {}, "[search_after] cannot be used in a scroll context"),
        ({"track_total_hits": False}, {}, "disabling [track_total_hits] is not allowed in a scroll context"),
        ({"track_total_hits": 100}, {}, "disabling [track_total_hits] is not allowed in a scroll context"),
        ({}, {"request_cache": "true"}, "[request_cache] cannot be used in a scroll context"),
    ],
)
def test_refused_scroll_requests(
    http: httpx.Client, docs: str, body: dict[str, Any], params: dict[str, str], reason: str
) -> None:
    response = http.post(f"/{docs}/_search", params={"scroll": "1m", **params}, json=body)
    assert root_cause(response) == (
        400,
        "action_request_validation_exception",
        f"Validation Failed: 1: {reason};",
    )


def test_scroll_with_a_point_in_time_is_refused(http: httpx.Client, docs: str) -> None:
    pit_id = http.post(f"/{docs}/_pit", params={"keep_alive": "1m"}).json()["id"]
    response = http.post("/_search", params={"scroll": "1m"}, json={"pit": {"id": pit_id}})
    status, kind, reason = root_cause(response)
    assert (status, kind) == (400, "action_request_validation_exception")
    assert "using [point in time] is not allowed in a scroll context" in reason
    http.request("DELETE", "/_pit", json={"id": pit_id})


def test_from_zero_is_accepted_as_elasticdump_sends_it(http: httpx.Client, docs: str) -> None:
    first = open_scroll(http, docs, {"from": 0, "size": 150})
    assert len(first["hits"]["hits"]) == 150
    http.delete(f"/_search/scroll/{first['_scroll_id']}")


def test_batch_size_is_limited_by_max_result_window(
    http: httpx.Client, es: Elasticsearch, new_index: Callable
) -> None:
    index = new_index(mappings=MAPPING)
    fill(es, index, 3)
    assert root_cause(http.post(f"/{index}/_search", params={"scroll": "1m"}, json={"size": 10_010})) == (
        400,
        "illegal_argument_exception",
        "Batch size is too large, size must be less than or equal to: [10000] but was [10010]. Scroll batch "
        "sizes cost as much memory as result windows so they are controlled by the [index.max_result_window] "
        "index level setting.",
    )
    assert len(open_scroll(http, index, {"size": 10_000})["hits"]["hits"]) == 3
    es.indices.put_settings(index=index, settings={"index.max_result_window": 2})
    assert root_cause(http.post(f"/{index}/_search", params={"scroll": "1m"}, json={"size": 3}))[0] == 400
    assert len(open_scroll(http, index, {"size": 2})["hits"]["hits"]) == 2
    http.delete("/_search/scroll/_all")


# ---- the official client's helpers ------------------------------------------------------------


@pytest.mark.parametrize("preserve_order", [False, True])
def test_helpers_scan(es: Elasticsearch, docs: str, preserve_order: bool) -> None:
    hits = list(
        helpers.scan(
            es,
            index=docs,
            query={"query": {"range": {"n": {"gte": 20}}}, "sort": [{"n": "desc"}]},
            size=13,
            scroll="30s",
            preserve_order=preserve_order,
        )
    )
    ns = [hit["_source"]["n"] for hit in hits]
    assert sorted(ns) == list(range(20, 200))
    if preserve_order:
        assert ns == list(range(199, 19, -1))


def test_helpers_reindex(es: Elasticsearch, http: httpx.Client, docs: str, index_name: str) -> None:
    target = f"{index_name}-copy"
    try:
        ok, errors = helpers.reindex(es, docs, target, query={"query": {"term": {"k": "k1"}}}, chunk_size=17)
        assert (ok, errors) == (50, 0)
        es.indices.refresh(index=target)
        copied = {hit["_id"]: hit["_source"] for hit in helpers.scan(es, index=target)}
        assert copied == {str(i): {"n": i, "k": "k1", "v": 0} for i in range(1, 200, 4)}
    finally:
        http.delete(f"/{target}")


# ---- visibility: _cat/search_contexts and _nodes/stats -----------------------------------------


def test_cat_search_contexts_shows_scrolls_and_points_in_time(http: httpx.Client, docs: str) -> None:
    opened = open_scroll(http, docs, {"size": 1})["_scroll_id"]
    scroll_id = next_batch(http, opened, "2m").json()["_scroll_id"]
    pit_id = http.post(f"/{docs}/_pit", params={"keep_alive": "5m"}).json()["id"]
    rows = {row["id"]: row for row in contexts(http)}
    scroll_row, pit_row = rows[scroll_id], rows[pit_id]
    assert {k: scroll_row[k] for k in ("type", "indices", "keep_alive", "requests", "docs")} == {
        "type": "scroll",
        "indices": docs,
        "keep_alive": "2m",
        "requests": "2",
        "docs": "200",
    }
    assert int(scroll_row["segments"]) >= 1
    assert scroll_row["time_left"].endswith(("s", "m"))
    assert (pit_row["type"], pit_row["keep_alive"]) == ("pit", "5m")
    text = http.get("/_cat/search_contexts", params={"v": "true", "h": "type,indices,requests"}).text
    lines = text.splitlines()
    assert lines[0].split() == ["type", "indices", "requests"]
    assert ["scroll", docs, "2"] in [line.split() for line in lines[1:]]
    help_text = http.get("/_cat/search_contexts", params={"help": "true"}).text
    assert [line.split("|")[0].strip() for line in help_text.splitlines()] == [
        "id",
        "type",
        "owner",
        "indices",
        "age",
        "keep_alive",
        "time_left",
        "requests",
        "docs",
        "segments",
    ]
    http.delete(f"/_search/scroll/{scroll_id}")
    http.request("DELETE", "/_pit", json={"id": pit_id})


@pytest.mark.parametrize(
    "path",
    [
        "/_nodes/stats",
        "/_nodes/stats/indices",
        "/_nodes/stats/indices/search",
        "/_nodes/_local/stats/indices/search",
        "/_nodes/_all/stats/indices",
    ],
)
def test_nodes_stats_count_contexts_and_phases(http: httpx.Client, docs: str, path: str) -> None:
    before = search_stats(http, path)
    scroll_id = open_scroll(http, docs, {"size": 1})["_scroll_id"]
    pit_id = http.post(f"/{docs}/_pit", params={"keep_alive": "1m"}).json()["id"]
    during = search_stats(http, path)
    assert during["open_contexts"] == before["open_contexts"] + 2
    assert during["scroll_current"] == before["scroll_current"] + 1
    assert during["query_total"] > before["query_total"] and during["fetch_total"] > before["fetch_total"]
    next_batch(http, scroll_id)
    http.delete(f"/_search/scroll/{scroll_id}")
    http.request("DELETE", "/_pit", json={"id": pit_id})
    after = search_stats(http, path)
    assert after["open_contexts"] == before["open_contexts"]
    assert after["scroll_current"] == before["scroll_current"]
    assert after["scroll_total"] == before["scroll_total"] + 1
    assert after["scroll_time_in_millis"] >= before["scroll_time_in_millis"]
    assert {"query_time_in_millis", "query_current", "fetch_time_in_millis", "fetch_current"} <= after.keys()


def test_nodes_stats_sections_and_node_info(http: httpx.Client) -> None:
    node_id, stats = next(iter(http.get("/_nodes/stats").json()["nodes"].items()))
    assert {"docs", "store", "indexing", "search"} <= stats["indices"].keys()
    only_search = http.get(f"/_nodes/{node_id}/stats/indices/search").json()["nodes"][node_id]
    assert list(only_search["indices"]) == ["search"]
    assert http.get("/_nodes/other-node/stats").json()["nodes"] == {}
    info = http.get("/_nodes").json()
    assert list(info["nodes"]) == [node_id]


# ---- the open-scroll limit, on a server of its own --------------------------------------------


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server no other test opens contexts on, with a small index."""
    data: Path = tmp_path_factory.mktemp("scroll-limits") / "data"
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=60) as client:
        client.put("/limits", json={"mappings": MAPPING})
        client.post("/limits/_doc/1?refresh=true", json={"n": 1})
        yield client


def open_or_refuse(client: httpx.Client, keep_alive: str = "1m") -> httpx.Response:
    return client.post("/limits/_search", params={"scroll": keep_alive}, json={"size": 1})


def test_the_501st_scroll_is_refused_until_one_is_freed(private: httpx.Client) -> None:
    ids = []
    for _ in range(500):
        response = open_or_refuse(private)
        assert response.status_code == 200, response.text
        ids.append(response.json()["_scroll_id"])
    assert root_cause(open_or_refuse(private)) == (
        429,
        "too_many_scroll_contexts_exception",
        "Trying to create too many scroll contexts. Must be less than or equal to: [500]. This limit can "
        "be set by changing the [search.max_open_scroll_context] setting.",
    )
    # A point in time is not a scroll: still allowed.
    pit = private.post("/limits/_pit", params={"keep_alive": "1m"})
    assert pit.status_code == 200
    private.request("DELETE", "/_pit", json={"id": pit.json()["id"]})
    assert private.delete(f"/_search/scroll/{ids.pop()}").status_code == 200
    replacement = open_or_refuse(private, keep_alive="1s")
    assert replacement.status_code == 200
    assert open_or_refuse(private).status_code == 429
    time.sleep(1.5)  # the replacement expires; the reaper frees its place
    assert open_or_refuse(private).status_code == 200
    assert private.delete("/_search/scroll/_all").json()["num_freed"] == 500
    assert search_stats(private)["scroll_current"] == 0


def test_the_limit_is_a_dynamic_cluster_setting(private: httpx.Client) -> None:
    private.delete("/_search/scroll/_all")
    settings = {"persistent": {"search.max_open_scroll_context": 2}}
    assert private.put("/_cluster/settings", json=settings).status_code == 200
    try:
        assert [open_or_refuse(private).status_code for _ in range(3)] == [200, 200, 429]
        assert "less than or equal to: [2]" in root_cause(open_or_refuse(private))[2]
    finally:
        private.put("/_cluster/settings", json={"persistent": {"search.max_open_scroll_context": None}})
        private.delete("/_search/scroll/_all")
    assert open_or_refuse(private).status_code == 200
