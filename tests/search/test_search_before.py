"""`search_before` (a leafsearch extension): the page before a cursor, in the request's own order.

The property: on a point in time, whatever is written meanwhile, walking backwards from the last
hit with `search_before` gives exactly the forward `search_after` walk (same documents, sort
values and sources), for any sort (missing values at either end, `_score`, an explicit
`_shard_doc` either way), any page sizes and slices; in this process and in a search worker.
Then, through HTTP and the official client: pages without a PIT, the refusals, and a backward
walk beside writers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from multiprocessing.context import BaseContext
from typing import Any

import httpx
import pytest
from conftest import bulk_index, search_ok
from elasticsearch import BadRequestError, Elasticsearch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inprocess import search

import leafsearch
from tests import web
from tests.search.test_pit_property import (
    OPERATIONS,
    QUERY,
    bulk,
    documents,
    mutate,
    pit_walk,
    sort_body,
    sort_specs,
    to_source,
    walking_node,
)
from tests.search.test_pit_property import new_index as new_node_index


@pytest.fixture(scope="module", params=[0, 1], ids=["in-process", "search-worker"])
def node(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, worker_processes: BaseContext
) -> Iterator[leafsearch.Node]:
    """A node without background threads; its pages run in its process, then in a search worker."""
    folder = tmp_path_factory.mktemp("before-node")
    with walking_node(folder, request.param, worker_processes=worker_processes) as instance:
        yield instance


def backward_walk(
    node: leafsearch.Node, pit_id: str, body: dict[str, Any], last: dict[str, Any], sizes: list[int], between
) -> list[dict[str, Any]]:
    """Every hit up to `last` (included), found from the end with `search_before`."""
    hits = [last]
    for page_no in range(100_000):
        request = {**body, "pit": {"id": pit_id}, "size": sizes[page_no % len(sizes)]}
        request["search_before"] = hits[0]["sort"]
        response = search(node, None, request, {})
        assert response["pit_id"] == pit_id
        batch = response["hits"]["hits"]
        if not batch:
            return hits
        hits = batch + hits
        between(page_no)
    raise AssertionError("the walk did not end")


#: 15 examples a run (each walks both ways, writing between pages: about 0.5 s of CPU); the forward
#: walk it mirrors has 30 in test_pit_property.py, and every run draws new ones.
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(documents, min_size=1, max_size=40),
    specs=sort_specs,
    explicit=st.sampled_from([None, None, "asc", "desc"]),
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=4),
    ops=st.lists(st.sampled_from(OPERATIONS), max_size=4),
    shards=st.integers(1, 3),
    slices=st.integers(1, 3),
)
def test_a_backward_walk_is_the_forward_walk_reversed(
    node: leafsearch.Node, docs, specs, explicit, sizes, ops, shards, slices
) -> None:
    index = new_node_index(node, shards)
    try:
        indexed = {f"d{i}": doc for i, doc in enumerate(docs)}
        bulk(node, index, indexed)
        node.indices[index].refresh()
        pit_id = node.open_pit(index, "5m")["id"]
        live = dict(indexed)

        def writes(page: int) -> None:
            for op in ops:
                mutate(node, index, op, live)

        walks = []
        for slice_id in range(slices):
            body: dict[str, Any] = {"query": QUERY, "sort": sort_body(specs, explicit)}
            if slices > 1:
                body["slice"] = {"id": slice_id, "max": slices}
            forward = pit_walk(node, pit_id, body, sizes, writes)
            backward = backward_walk(node, pit_id, body, forward[-1], sizes, writes) if forward else []
            walks.append((forward, backward))
        node.close_pit(pit_id)
    finally:
        node.drop_index(index)
    seen = []
    for forward, backward in walks:
        assert [(h["_id"], h["sort"]) for h in backward] == [(h["_id"], h["sort"]) for h in forward]
        assert [h["_source"].parsed() for h in backward] == [to_source(indexed[h["_id"]]) for h in forward]
        seen += [h["_id"] for h in forward]
    assert sorted(seen) == sorted(indexed)


# ---------------------------------------------------------------------------------------------
# through HTTP


@pytest.fixture
def numbers(http: httpx.Client, new_index) -> str:
    """30 documents over 3 shards: `n` 0..29 (none for every seventh), `k` their parity."""
    name = new_index(
        settings={"number_of_shards": 3},
        mappings={"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}, "t": {"type": "date"}}},
    )
    docs = {}
    for i in range(30):
        doc: dict[str, Any] = {"k": "odd" if i % 2 else "even", "t": f"2024-01-{i + 1:02d}"}
        if i % 7:
            doc["n"] = i
        docs[str(i)] = doc
    bulk_index(http, name, docs)
    return name


def test_a_page_without_a_pit_is_the_hits_just_before_the_cursor(http: httpx.Client, numbers: str) -> None:
    sort = [{"n": {"order": "desc"}}, {"t": {"order": "asc", "format": "yyyy-MM-dd"}}]
    everything = search_ok(http, numbers, {"size": 30, "sort": sort})["hits"]["hits"]
    for at in (0, 1, 12, 29):
        page = search_ok(http, numbers, {"size": 5, "sort": sort, "search_before": everything[at]["sort"]})
        assert [h["_id"] for h in page["hits"]["hits"]] == [h["_id"] for h in everything[max(0, at - 5) : at]]
        assert page["hits"]["total"] == {"value": 30, "relation": "eq"}
    # The formatted date parses as `search_after` parses it; missing values render and parse back.
    last = everything[-1]
    assert last["sort"][0] == -(2**63)
    before_last = search_ok(http, numbers, {"size": 1, "sort": sort, "search_before": last["sort"]})
    assert before_last["hits"]["hits"] == [everything[-2]]


def test_the_official_client_sends_search_before_in_the_body(es: Elasticsearch, numbers: str) -> None:
    pit = es.open_point_in_time(index=numbers, keep_alive="1m")["id"]
    try:
        body = {"size": 4, "sort": [{"n": "asc"}], "pit": {"id": pit, "keep_alive": "1m"}}
        forward = es.search(body={**body, "size": 30})["hits"]["hits"]
        page = es.search(body={**body, "search_before": forward[10]["sort"]})
        assert [h["_id"] for h in page["hits"]["hits"]] == [h["_id"] for h in forward[6:10]]
        raw = es.perform_request(
            "POST",
            "/_search",
            headers={"content-type": "application/json", "accept": "application/json"},
            body={**body, "search_before": forward[4]["sort"]},
        )
        assert [h["_id"] for h in raw["hits"]["hits"]] == [h["_id"] for h in forward[0:4]]
    finally:
        es.close_point_in_time(id=pit)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"sort": ["n"], "search_before": [1], "search_after": [2]},
            "Validation Failed: 1: [search_before] cannot be used with [search_after];",
        ),
        (
            {"sort": ["n"], "search_before": [1], "from": 3},
            "Validation Failed: 1: [from] parameter must be set to 0 when [search_before] is used;",
        ),
        ({"search_before": [1]}, "Sort must contain at least one field."),
        ({"sort": ["n"], "search_before": []}, "Values must contains at least one value."),
        (
            {"sort": ["n"], "search_before": [{"a": 1}]},
            "Expected [VALUE_STRING] or [VALUE_NUMBER] or [VALUE_BOOLEAN] or [VALUE_NULL] but found "
            "[START_OBJECT] inside search_before.",
        ),
    ],
)
def test_bad_search_before_requests_are_refused(http: httpx.Client, numbers: str, body, reason) -> None:
    response = http.post(f"/{numbers}/_search", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["root_cause"][0]["reason"] == reason
    # Nothing was opened or changed: the index answers as before.
    assert search_ok(http, numbers, {"size": 0})["hits"]["total"]["value"] == 30


def test_search_before_is_refused_in_a_scroll(es: Elasticsearch, numbers: str) -> None:
    with pytest.raises(BadRequestError) as info:
        es.search(index=numbers, scroll="1m", body={"sort": ["n"], "search_before": [3]})
    assert "[search_before] cannot be used in a scroll context" in str(info.value)


def pit_search(http: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = http.post("/_search", json=body)
    assert response.status_code == 200, response.text
    return response.json()["hits"]["hits"]


def test_a_backward_walk_beside_writers_sees_its_snapshot(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"number_of_shards": 2}, mappings={"properties": {"n": {"type": "long"}}})
    bulk_index(http, name, {str(i): {"n": i % 50} for i in range(300)})
    pit = http.post(f"/{name}/_pit", params={"keep_alive": "1m"}).json()["id"]
    stop = threading.Event()

    def write(offset: int) -> None:
        with web.Client(base_url=str(http.base_url)) as writer:
            i = 0
            while not stop.is_set():
                doc_id = str((offset + i * 7) % 300)
                writer.put(f"/{name}/_doc/{doc_id}", json={"n": -i}, params={"refresh": "true"})
                if i % 5 == 0:
                    writer.delete(f"/{name}/_doc/{(offset + i) % 300}")
                i += 1

    writers = [threading.Thread(target=write, args=(k,)) for k in range(2)]
    for thread in writers:
        thread.start()
    try:
        body = {"sort": [{"n": "desc"}], "pit": {"id": pit}, "size": 300}
        forward = pit_search(http, body)
        assert len(forward) == 300
        hits = [forward[-1]]
        while True:
            page = pit_search(http, {**body, "size": 17, "search_before": hits[0]["sort"]})
            if not page:
                break
            hits = page + hits
    finally:
        stop.set()
        for thread in writers:
            thread.join()
        http.request("DELETE", "/_pit", json={"id": pit})
    assert [h["_id"] for h in hits] == [h["_id"] for h in forward]
    assert [h["_source"] for h in hits] == [h["_source"] for h in forward]


@pytest.mark.parametrize(
    "body",
    [
        {"sort": ["_shard_doc"], "track_total_hits": False},  # pages of live documents
        {"sort": [{"_shard_doc": "desc"}]},
        {"sort": ["_doc"]},
        {"sort": [{"k": "asc"}], "query": {"range": {"n": {"gte": 5}}}},
    ],
)
def test_special_sorts_walk_backwards_on_a_pit(http: httpx.Client, numbers: str, body: dict[str, Any]):
    pit = http.post(f"/{numbers}/_pit", params={"keep_alive": "1m"}).json()["id"]
    try:
        request = {**body, "pit": {"id": pit}}
        forward = pit_search(http, {**request, "size": 100})
        assert forward
        hits = [forward[-1]]
        while page := pit_search(http, {**request, "size": 4, "search_before": hits[0]["sort"]}):
            hits = page + hits
    finally:
        http.request("DELETE", "/_pit", json={"id": pit})
    assert [(h["_id"], h["sort"]) for h in hits] == [(h["_id"], h["sort"]) for h in forward]
