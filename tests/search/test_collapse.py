"""`collapse` with any sort, paged with `search_after` or `from` (Elasticsearch refuses a cursor
unless the sort is the collapse field alone).

The property: on a point in time, whatever is written meanwhile, a collapsed walk equals a
brute-force grouping of the same snapshot: the snapshot's hits in sort order (its uncollapsed walk),
each collapse key's first one, in that order; every key once, the group without a value included.
Then, through HTTP and the official client: `inner_hits`, the refusals, and a walk beside writers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from multiprocessing.context import BaseContext
from typing import Any

import httpx
import pytest
from conftest import bulk_index, search_ok
from elasticsearch import Elasticsearch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from inprocess import search

import leafsearch
from leafsearch.search.workers.pool import LONE_REQUESTS_IN_SERVER
from tests import web
from tests.search.test_pit_property import (
    NANOS_BASE,
    OPERATIONS,
    QUERY,
    bulk,
    documents,
    mutate,
    pit_walk,
    sort_body,
    sort_specs,
    walking_node,
)
from tests.search.test_pit_property import new_index as new_node_index


@pytest.fixture(scope="module", params=[0, 1], ids=["in-process", "search-worker"])
def node(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, worker_processes: BaseContext
) -> Iterator[leafsearch.Node]:
    """A node without background threads; its pages run in its process, then in a search worker."""
    more = {LONE_REQUESTS_IN_SERVER: "false"}
    folder = tmp_path_factory.mktemp("collapse-node")
    with walking_node(folder, request.param, more, worker_processes=worker_processes) as instance:
        yield instance


def first_of_each_key(
    hits: list[dict[str, Any]], field: str, sources: dict[str, dict[str, Any]]
) -> list[str]:
    seen: set[Any] = set()
    out = []
    for hit in hits:
        key = sources[hit["_id"]].get(field)
        if key not in seen:
            seen.add(key)
            out.append(hit["_id"])
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(documents, max_size=40),
    field=st.sampled_from(["kw", "lg", "db"]),
    specs=sort_specs,
    explicit=st.sampled_from([None, "asc", "desc"]),
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    ops=st.lists(st.sampled_from(OPERATIONS), max_size=4),
    shards=st.integers(1, 3),
    offsets=st.booleans(),
)
@example(  # always: the documents without a keyword sort value all go with their key's first hit
    docs=[{"db": -1.5, "dn": NANOS_BASE + 3, "kw": "ab"}, {"db": 0.25}, {"lg": -1, "kw": "b"}],
    field="lg",
    specs=[("kw", "desc", "default"), ("dn", "desc", "_last")],
    explicit="asc",
    sizes=[1],
    ops=[],
    shards=1,
    offsets=True,
)
def test_a_collapsed_walk_is_the_grouped_snapshot(
    node: leafsearch.Node, docs, field, specs, explicit, sizes, ops, shards, offsets
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

        body: dict[str, Any] = {"query": QUERY, "sort": sort_body(specs, explicit)}
        everything = pit_walk(node, pit_id, body, [7], writes)
        collapsed = pit_walk(node, pit_id, {**body, "collapse": {"field": field}}, sizes, writes)
        paged: list[dict[str, Any]] = []
        if offsets:  # the same groups by `from`
            size = sizes[0]
            for _ in range(len(docs) + 2):
                request = {**body, "collapse": {"field": field}, "pit": {"id": pit_id}, "from": len(paged)}
                page = search(node, None, {**request, "size": size}, {})["hits"]["hits"]
                if not page:
                    break
                paged += page
                writes(0)
        node.close_pit(pit_id)
    finally:
        node.drop_index(index)
    expected = first_of_each_key(everything, field, indexed)
    assert [h["_id"] for h in collapsed] == expected
    assert [h["fields"][field] for h in collapsed] == [[indexed[i].get(field)] for i in expected]
    assert [h["sort"] for h in collapsed] == [h["sort"] for h in everything if h["_id"] in set(expected)]
    if offsets:
        assert [h["_id"] for h in paged] == expected


# ---------------------------------------------------------------------------------------------
# through HTTP

MAPPINGS = {
    "properties": {
        "user": {"type": "keyword"},
        "n": {"type": "long"},
        "score": {"type": "double"},
        "text": {"type": "text"},
        "nodv": {"type": "keyword", "doc_values": False},
    }
}


def post_docs() -> dict[str, dict[str, Any]]:
    """40 posts by 6 users (and some by nobody)."""
    docs = {}
    for i in range(40):
        doc: dict[str, Any] = {"n": i, "score": (i * 37) % 11, "text": f"post {i}"}
        if i % 8:
            doc["user"] = f"u{i % 6}"
        docs[str(i)] = doc
    return docs


@pytest.fixture
def posts(http: httpx.Client, new_index) -> str:
    """`post_docs` over 2 shards."""
    name = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS)
    bulk_index(http, name, post_docs())
    return name


def test_inner_hits_as_elasticsearch_has_them(es: Elasticsearch, posts: str) -> None:
    response = es.search(
        index=posts,
        size=3,
        sort=[{"score": "desc"}, {"n": "asc"}],
        collapse={
            "field": "user",
            "inner_hits": [
                {"name": "latest", "size": 2, "sort": [{"n": "desc"}], "_source": False},
                {"name": "rest", "from": 1, "size": 1, "sort": ["n"], "version": True},
            ],
        },
    ).body
    everything = es.search(index=posts, size=100, sort=[{"score": "desc"}, {"n": "asc"}])["hits"]["hits"]
    assert response["hits"]["total"] == {"value": 40, "relation": "eq"}
    hits = response["hits"]["hits"]
    assert list(hits[0]) == ["_index", "_id", "_score", "_source", "fields", "sort", "inner_hits"]
    for hit in hits:
        key = hit["fields"]["user"][0]
        group = [h for h in everything if h["_source"].get("user") == key]
        assert hit["_id"] == group[0]["_id"]
        by_n = sorted(group, key=lambda h: h["_source"]["n"])
        latest = hit["inner_hits"]["latest"]["hits"]
        assert latest["total"] == {"value": len(group), "relation": "eq"}
        assert [h["_id"] for h in latest["hits"]] == [h["_id"] for h in by_n[::-1][:2]]
        assert all("_source" not in h for h in latest["hits"])
        rest = hit["inner_hits"]["rest"]["hits"]["hits"]
        assert [h["_id"] for h in rest] == [by_n[1]["_id"]]
        assert rest[0]["_version"] == 1


def test_the_group_without_a_value_and_numeric_keys(http: httpx.Client, posts: str) -> None:
    hits = search_ok(http, posts, {"size": 20, "sort": ["n"], "collapse": {"field": "user"}})["hits"]["hits"]
    assert [h["fields"]["user"] for h in hits] == [[None], ["u1"], ["u2"], ["u3"], ["u4"], ["u5"], ["u0"]]
    assert [h["_id"] for h in hits] == ["0", "1", "2", "3", "4", "5", "6"]
    numeric = search_ok(http, posts, {"sort": [{"n": "desc"}], "collapse": {"field": "score"}, "size": 20})
    keys = [h["fields"]["score"][0] for h in numeric["hits"]["hits"]]
    assert sorted(keys) == [float(k) for k in range(11)]


@pytest.mark.parametrize(
    ("body", "params", "reason"),
    [
        (
            {"collapse": {"field": "text"}},
            {},
            "collapse is not supported for the field [text] of the type [text]",
        ),
        ({"collapse": {"field": "nope"}}, {}, "no mapping found for `nope` in order to collapse on"),
        ({"collapse": {"field": "nodv"}}, {}, "cannot collapse on field `nodv` without `doc_values`"),
        (
            {"collapse": {"field": "user"}, "sort": ["n"]},
            {"scroll": "1m"},
            "cannot use `collapse` in a scroll context",
        ),
        (
            {"collapse": {"field": "user"}, "rescore": {"query": {"rescore_query": {"match_all": {}}}}},
            {},
            "cannot use `collapse` in conjunction with `rescore`",
        ),
        (
            {"collapse": {"field": "user"}, "sort": ["n"], "search_before": [3]},
            {},
            "cannot use `collapse` in conjunction with `search_before`",
        ),
        (
            {"collapse": {"field": "user", "inner_hits": {"name": "x", "size": 101}}},
            {},
            "Inner result window is too large, the inner hit definition's [x]'s from + size must be less "
            "than or equal to: [100] but was [101]. This limit can be set by changing the "
            "[index.max_inner_result_window] index level setting.",
        ),
        (
            {"collapse": {"field": "user", "inner_hits": [{"name": "x"}, {"name": "x"}]}},
            {},
            "[inner_hits] already contains an entry for key [x]",
        ),
        ({"collapse": {"inner_hits": {}}}, {}, "[collapse] Required [field]"),
    ],
)
def test_bad_collapse_requests_are_refused(http: httpx.Client, posts: str, body, params, reason) -> None:
    response = http.post(f"/{posts}/_search", json=body, params=params)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["root_cause"][0]["reason"] == reason
    assert http.get("/_nodes/stats/indices/search").status_code == 200
    assert search_ok(http, posts, {"size": 0})["hits"]["total"]["value"] == 40


def test_a_multi_valued_key_is_refused(http: httpx.Client, new_index) -> None:
    name = new_index(mappings={"properties": {"tags": {"type": "keyword"}}})
    bulk_index(http, name, {"1": {"tags": "a"}, "2": {"tags": ["a", "b"]}})
    response = http.post(f"/{name}/_search", json={"collapse": {"field": "tags"}})
    assert response.status_code == 400
    reason = response.json()["error"]["root_cause"][0]["reason"]
    assert reason.startswith("failed to collapse ") and reason.endswith(
        ", the collapse field must be single valued"
    )


def test_the_official_client_walks_collapsed_with_search_after(es: Elasticsearch, posts: str) -> None:
    pit = es.open_point_in_time(index=posts, keep_alive="1m")["id"]
    try:
        keys, after = [], None
        while True:
            extra = {} if after is None else {"search_after": after}
            page = es.search(
                pit={"id": pit}, size=2, sort=[{"score": "asc"}], collapse={"field": "user"}, **extra
            )["hits"]["hits"]
            if not page:
                break
            keys += [h["fields"]["user"][0] for h in page]
            after = page[-1]["sort"]
    finally:
        es.close_point_in_time(id=pit)
    assert sorted(keys, key=str) == sorted([None, "u0", "u1", "u2", "u3", "u4", "u5"], key=str)


def test_a_collapsed_walk_beside_writers_groups_its_snapshot(http: httpx.Client, posts: str) -> None:
    pit = http.post(f"/{posts}/_pit", params={"keep_alive": "1m"}).json()["id"]
    stop = threading.Event()

    def write(offset: int) -> None:
        with web.Client(base_url=str(http.base_url)) as writer:
            i = 0
            while not stop.is_set():
                doc_id = str((offset + i * 3) % 40)
                writer.put(f"/{posts}/_doc/{doc_id}", json={"user": f"new{i % 3}", "n": -i, "score": 99})
                writer.post(f"/{posts}/_refresh")
                i += 1

    def walk(body: dict[str, Any]) -> list[dict[str, Any]]:
        hits: list[dict[str, Any]] = []
        while True:
            request = {**body, "pit": {"id": pit}, "size": 3}
            if hits:
                request["search_after"] = hits[-1]["sort"]
            response = http.post("/_search", json=request)
            assert response.status_code == 200, response.text
            page = response.json()["hits"]["hits"]
            if not page:
                return hits
            hits += page

    writers = [threading.Thread(target=write, args=(k,)) for k in range(2)]
    for thread in writers:
        thread.start()
    try:
        sort = [{"score": "desc"}]
        collapsed = walk({"sort": sort, "collapse": {"field": "user"}})
        everything = walk({"sort": sort})
    finally:
        stop.set()
        for thread in writers:
            thread.join()
        http.request("DELETE", "/_pit", json={"id": pit})
    sources = {h["_id"]: h["_source"] for h in everything}
    assert len(everything) == 40
    assert [h["_id"] for h in collapsed] == first_of_each_key(everything, "user", sources)


def test_the_keyword_global_ordinals_of_a_collapse_are_cached(tmp_path) -> None:
    """The list of every match reads keyword keys through global ordinals over its segments: the
    node keeps them (an empty cache once counted as none, so it was never filled)."""
    with leafsearch.Node(tmp_path, background=False) as node:
        index = new_node_index(node, 1)
        for part in range(2):  # two segments
            bulk(node, index, {f"p{part}-{i}": {"kw": f"k{i % 5}", "lg": i} for i in range(10)})
            node.indices[index].refresh()
        before = len(node.global_ordinals)
        hits = search(node, index, {"sort": ["lg"], "collapse": {"field": "kw"}}, {})["hits"]["hits"]
        assert sorted(h["fields"]["kw"][0] for h in hits) == ["k0", "k1", "k2", "k3", "k4"]
        assert len(node.global_ordinals) == before + 1


def test_the_request_breaker_counts_the_grouping(http: httpx.Client, new_index, cluster_setting) -> None:
    """A shard's list of every match reserves its arrays before it builds them, the collapse key
    and its grouping included: a limit the plain list fits in refuses the collapsed one, and holds
    nothing. (One shard: each shard groups its own matches, collapse_shards.py.)"""
    posts = new_index(settings={"number_of_shards": 1}, mappings=MAPPINGS)
    bulk_index(http, posts, post_docs())
    plain = {"sort": ["n"], "terminate_after": 1000}  # (`terminate_after`: the list of every match)
    cluster_setting("indices.breaker.request.limit", "3000b")
    assert search_ok(http, posts, plain)["hits"]["total"]["value"] == 40
    response = http.post(f"/{posts}/_search", json={**plain, "collapse": {"field": "user"}})
    assert response.status_code == 429, response.text
    assert response.json()["error"]["type"] == "circuit_breaking_exception"
    breaker = next(iter(http.get("/_nodes/stats/breaker").json()["nodes"].values()))["breakers"]["request"]
    assert breaker["estimated_size_in_bytes"] == 0
