"""Points in time and scrolls opened on segments that already hold deleted documents.

A snapshot holds the live-docs arrays it was given; a delete after it opened goes into a copy of
the segment's array (index/shard.py), never into the snapshot's. The copy matters only once a
segment has an array, that is once it holds a deleted document: these tests open their contexts
there, then update, delete (documents the context sees among them), index, refresh and
force-merge under them, before their first page and between pages. Every walk (a PIT sorted by a
field, by `_shard_doc` uncounted, sliced; a scroll in `_doc` order, sorted, sliced) must return
exactly the documents of the snapshot, each once, with the snapshot's sources, and totals that
count them.

Each test runs in-process (`leafsearch.Client` on a Node: its pages in the node's process, then in
a search worker process) and over HTTP (the official client, against a node served on a
loopback port with a search worker and `serve`'s settings: the walk that starts alone runs in the
server process, the ones opened beside it in the worker), where the test also reaches the node to
merge its shards.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import pytest
from conftest import serving_clocked
from elasticsearch import Elasticsearch

import leafsearch
from leafsearch.client import Client
from leafsearch.search.workers.pool import LONE_WALKS_IN_SERVER

SHARDS = 2
#: Segments each round of the corpus writes: ten per shard, which the merge policy merges at once.
ROUNDS = 10
PER_ROUND = 8
MAPPINGS = {"properties": {"n": {"type": "long"}, "tag": {"type": "keyword"}}}

_names = itertools.count()


@dataclass
class Cluster:
    """What a test drives: an Elasticsearch API (in-process or over HTTP) and the node behind it."""

    client: Client | Elasticsearch
    node: leafsearch.Node


@pytest.fixture(scope="module", params=["in-process", "search-worker", "http"])
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, worker_processes: BaseContext
) -> Iterator[Cluster]:
    """A node without background threads (the tests refresh and merge), reached in-process with
    its pages in its own process or every walk in a search worker, or over HTTP with a search
    worker and the settings `serve` starts with."""
    folder = tmp_path_factory.mktemp("isolation")
    if request.param == "http":
        with serving_clocked(folder, search_workers=1, worker_processes=worker_processes) as clocked:
            assert clocked.node.search_workers is not None
            assert clocked.node.search_workers.wait_ready(60)
            with Elasticsearch(str(clocked.http.base_url), request_timeout=60) as es:
                yield Cluster(es, clocked.node)
        return
    with leafsearch.Node(
        folder,
        background=False,
        search_workers=int(request.param == "search-worker"),
        worker_processes=worker_processes,
    ) as node:
        if node.search_workers is not None:  # even a walk that runs alone
            node.cluster_settings.update({"transient": {LONE_WALKS_IN_SERVER: "false"}})
            assert node.search_workers.wait_ready(60)
        yield Cluster(Client(node=node), node)


# ---------------------------------------------------------------------------------------------
# the index and what happens to it


def operations(index: str, docs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        line
        for doc_id, source in docs.items()
        for line in ({"index": {"_index": index, "_id": doc_id}}, source)
    ]


def new_corpus(cluster: Cluster) -> tuple[str, dict[str, dict[str, Any]]]:
    """An index of `ROUNDS` segments per shard, every shard with deleted documents in its
    segments (deletes and overwrites), and its documents as a search sees them now."""
    index = f"isolation-{next(_names)}"
    client = cluster.client
    client.indices.create(index=index, settings={"number_of_shards": SHARDS}, mappings=MAPPINGS)
    docs: dict[str, dict[str, Any]] = {}
    for r in range(ROUNDS):
        batch = {f"d{r}-{j}": {"n": r * PER_ROUND + j, "tag": "first"} for j in range(PER_ROUND)}
        client.bulk(operations=operations(index, batch), refresh=True)
        docs.update(batch)
    overwritten = {f"d{r}-1": {"n": 1000 + r, "tag": "overwritten"} for r in range(ROUNDS)}
    client.bulk(operations=operations(index, overwritten))
    docs.update(overwritten)
    for r in range(ROUNDS):
        for j in (0, 5):
            client.delete(index=index, id=f"d{r}-{j}")
            del docs[f"d{r}-{j}"]
    client.indices.refresh(index=index)
    for shard in cluster.node.indices[index].shards:
        assert any(view.live is not None for view in shard.published_views()), "a shard without deletions"
    return index, docs


def published_folders(node: leafsearch.Node, index: str) -> set[Path]:
    return {view.segment.folder for shard in node.indices[index].shards for view in shard.published_views()}


def force_merge(node: leafsearch.Node, index: str) -> None:
    """Ten more small segments on every shard, then every merge the policy asks for."""
    for r in range(ROUNDS):
        node.bulk(
            b"".join(b'{"index":{"_id":"pad%d-%d"}}\n{"n":-1}\n' % (r, j) for j in range(4)), index=index
        )
        node.indices[index].refresh()
    for shard in node.indices[index].shards:
        while shard.maybe_merge():
            pass
    node.indices[index].refresh()


class Disturber:
    """Changes the index under open contexts: each call updates and deletes documents of the
    snapshot that still exist (in segments holding deletions already), indexes new ones,
    refreshes and force-merges."""

    def __init__(self, cluster: Cluster, index: str, snapshot: dict[str, dict[str, Any]]) -> None:
        self.cluster, self.index = cluster, index
        self.current = dict(snapshot)  # the snapshot's documents not yet deleted or changed
        self.rounds = 0

    def __call__(self) -> None:
        client, index, n = self.cluster.client, self.index, self.rounds
        self.rounds += 1
        seen = sorted(self.current)
        changed = {doc_id: {"n": -100 - n, "tag": f"changed-{n}"} for doc_id in seen[0::6]}
        fresh = {f"new{n}-{j}": {"n": j, "tag": "new"} for j in range(6)}
        client.bulk(operations=operations(index, {**changed, **fresh}))
        for doc_id in seen[3::6]:
            client.delete(index=index, id=doc_id)
        for doc_id in [*seen[0::6], *seen[3::6]]:
            del self.current[doc_id]
        client.indices.refresh(index=index)
        force_merge(self.cluster.node, index)


def disturbed_after_first_page(disturb: Disturber) -> Callable[[int], None]:
    return lambda page: disturb() if page == 0 else None


# ---------------------------------------------------------------------------------------------
# walks


def pit_walk(
    client: Client | Elasticsearch,
    pit_id: str,
    body: dict[str, Any],
    size: int,
    between: Callable[[int], None],
) -> tuple[list[dict[str, Any]], set[int]]:
    """Every hit of a PIT walk with `search_after`, and the totals its pages reported."""
    hits: list[dict[str, Any]] = []
    totals: set[int] = set()
    after = None
    for page in range(10_000):
        extra = {"search_after": after} if after is not None else {}
        response = client.search(pit={"id": pit_id, "keep_alive": "5m"}, size=size, **body, **extra)
        if "total" in response["hits"]:
            totals.add(response["hits"]["total"]["value"])
        batch = response["hits"]["hits"]
        if not batch:
            return hits, totals
        hits.extend(batch)
        after = batch[-1]["sort"]
        between(page)
    raise AssertionError("the walk did not end")


def open_scroll(client: Client | Elasticsearch, index: str, body: dict[str, Any]) -> dict[str, Any]:
    return dict(client.search(index=index, scroll="5m", **body))


def drain(
    client: Client | Elasticsearch, first: dict[str, Any], between: Callable[[int], None]
) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    batch = first
    for page in range(10_000):
        if not batch["hits"]["hits"]:
            client.clear_scroll(scroll_id=batch["_scroll_id"])
            return hits
        hits.extend(batch["hits"]["hits"])
        between(page)
        batch = client.scroll(scroll_id=batch["_scroll_id"], scroll="5m")
    raise AssertionError("the scroll did not end")


def assert_the_snapshot(hits: list[dict[str, Any]], snapshot: dict[str, dict[str, Any]]) -> None:
    """Each document of the snapshot once, with its source as it was, and nothing else."""
    ids = [hit["_id"] for hit in hits]
    assert len(ids) == len(set(ids)), "a document came twice"
    assert sorted(ids) == sorted(snapshot)
    assert {hit["_id"]: dict(hit["_source"]) for hit in hits} == snapshot


# ---------------------------------------------------------------------------------------------
# the tests


def test_pit_walks_return_the_snapshot_whatever_happens_under_them(cluster: Cluster) -> None:
    index, snapshot = new_corpus(cluster)
    client, node = cluster.client, cluster.node
    held = published_folders(node, index)
    pit_id = client.open_point_in_time(index=index, keep_alive="5m")["id"]
    disturb = Disturber(cluster, index, snapshot)
    try:
        disturb()  # before the first page: nothing of the walk is computed yet
        # The merges replaced segments the PIT reads; their files stay while it holds them.
        assert held - published_folders(node, index)
        assert all(folder.exists() for folder in held)
        between = disturbed_after_first_page(disturb)

        by_n, totals = pit_walk(client, pit_id, {"sort": [{"n": "asc"}]}, 7, between)
        assert_the_snapshot(by_n, snapshot)
        assert [hit["sort"][0] for hit in by_n] == sorted(doc["n"] for doc in snapshot.values())
        assert totals == {len(snapshot)}

        uncounted, totals = pit_walk(
            client, pit_id, {"sort": [{"_shard_doc": "desc"}], "track_total_hits": False}, 5, between
        )
        assert_the_snapshot(uncounted, snapshot)
        assert not totals
        keys = [hit["sort"][0] for hit in uncounted]
        assert keys == sorted(keys, reverse=True)

        sliced: list[dict[str, Any]] = []
        for slice_id in range(3):
            body = {"sort": ["_shard_doc"], "slice": {"id": slice_id, "max": 3}}
            part, _ = pit_walk(client, pit_id, body, 4, between)
            sliced += part
        assert_the_snapshot(sliced, snapshot)
    finally:
        client.close_point_in_time(id=pit_id)
        client.indices.delete(index=index)
    assert disturb.rounds == 1 + 5
    assert node.contexts.open_count() == 0


def test_scrolls_return_the_snapshot_whatever_happens_under_them(cluster: Cluster) -> None:
    index, snapshot = new_corpus(cluster)
    client, node = cluster.client, cluster.node
    held = published_folders(node, index)
    try:
        by_doc = open_scroll(client, index, {"sort": ["_doc"], "size": 4})
        by_n = open_scroll(client, index, {"sort": [{"n": "desc"}], "size": 6})
        slices = [
            open_scroll(client, index, {"sort": ["_doc"], "size": 3, "slice": {"id": i, "max": 3}})
            for i in range(3)
        ]
        disturb = Disturber(cluster, index, snapshot)
        disturb()  # after each scroll's first batch, before the rest
        assert held - published_folders(node, index)
        assert all(folder.exists() for folder in held)
        between = disturbed_after_first_page(disturb)

        assert by_doc["hits"]["total"]["value"] == len(snapshot)
        assert_the_snapshot(drain(client, by_doc, between), snapshot)

        assert by_n["hits"]["total"]["value"] == len(snapshot)
        hits = drain(client, by_n, between)
        assert_the_snapshot(hits, snapshot)
        assert [hit["sort"][0] for hit in hits] == sorted(
            (doc["n"] for doc in snapshot.values()), reverse=True
        )

        sliced: list[dict[str, Any]] = []
        for part in slices:
            part_hits = drain(client, part, between)
            assert part["hits"]["total"]["value"] == len(part_hits)
            sliced += part_hits
        assert_the_snapshot(sliced, snapshot)
    finally:
        client.indices.delete(index=index)
    assert disturb.rounds == 1 + 5
    assert node.contexts.open_count() == 0
