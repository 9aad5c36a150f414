"""Reader contexts behind the shard interface: a PIT or a scroll pins one shard context per shard,
a walk's pages are query and fetch phases on those pins (through pickled messages too, as to
shards in another process), and freeing or expiring the context releases every pin.

What a user relies on: a walk over a PIT returns exactly the documents of the snapshot it was
opened on, each once and in sort order, while writers add, delete and refresh beside it."""

from __future__ import annotations

import random
import threading
from multiprocessing.context import BaseContext
from pathlib import Path

import orjson
import pytest
from conftest import FakeClock
from pickled_shard import PickledShard

import leafsearch
from leafsearch.indices import admin
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import hitlist, phases, top_hits, walks
from leafsearch.search.fetch_phase import last_sort_values
from leafsearch.search.guard import SearchGuard
from leafsearch.search.workers.pool import LONE_WALKS_IN_SERVER

SHARDS = 3


def _create(node, name: str = "logs") -> None:
    mapping = {"properties": {"ts": {"type": "long"}, "k": {"type": "keyword"}}}
    admin.create_index(node, name, {"settings": {"number_of_shards": SHARDS}, "mappings": mapping})


def _write(node, rng: random.Random, first: int, count: int, name: str = "logs") -> None:
    for i in range(first, first + count):
        doc = {"ts": rng.randint(0, 40), "k": rng.choice("abc")}  # many ties on `ts`
        node.index_doc(name, f"d{i}", orjson.dumps(doc))
    node.indices[name].refresh()


def _interface_page(node, pit_id: str, body: dict) -> list[dict]:
    """A page of a PIT search whose every shard message is pickled, on the PIT's shard contexts."""
    request = parse_search_request({**body, "pit": {"id": pit_id}}, {})
    ctx = node.contexts.acquire(pit_id, "pit")
    try:
        shards = [PickledShard(shard) for shard in top_hits.shard_handles(node.search_services, ctx.targets)]
        hits, _ = phases.query_phase(
            node.search_services, ctx.targets, request, aggs=False, shards=shards, contexts=ctx.shard_contexts
        )
        assert hits.contexts == ctx.shard_contexts
        start, end = phases.page_bounds(hits, request)
        page = phases.fetch_page(
            node.search_services, hits, start, end, request, raw_hits=True, shards=shards
        )
        assert all(shard.calls.get("query") == 1 for shard in shards)
        return orjson.loads(page.data) if end > start else []
    finally:
        node.contexts.release(ctx)


def _walk(page, size: int, sort: list, *, counted: bool = False) -> list[dict]:
    hits: list[dict] = []
    after = None
    while True:
        body: dict = {"size": size, "sort": sort, "track_total_hits": counted}
        if after is not None:
            body["search_after"] = after
        got = page(body)
        hits += got
        if len(got) < size:
            return hits
        after = got[-1]["sort"]


@pytest.mark.parametrize("seed", range(6))
def test_a_pit_walk_through_pickled_shards_returns_its_snapshot_once_beside_writers(tmp_path, seed) -> None:
    rng = random.Random(seed)
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        _create(node)
        _write(node, rng, 0, 150)
        _write(node, rng, 150, 60)  # two segments per shard
        pit_id = node.open_pit("logs", "1m")["id"]
        order = rng.choice(["asc", "desc"])
        sort = [{"ts": order}]
        snapshot = {f"d{i}" for i in range(210)}
        written = [210]

        def page(body: dict) -> list[dict]:
            # Beside the walk: new documents, deletions and refreshes, none of which it may see.
            first = written[0]
            _write(node, rng, first, 5)
            written[0] += 5
            node.delete_doc("logs", f"d{rng.randrange(first)}")
            node.indices["logs"].refresh()
            return _interface_page(node, pit_id, body)

        # And at the same time, a writer thread that refreshes after every document.
        stop = threading.Event()

        def writer() -> None:
            number = 0
            while not stop.is_set():
                node.index_doc("logs", f"w{number}", orjson.dumps({"ts": number % 40, "k": "c"}))
                node.indices["logs"].refresh()
                number += 1

        thread = threading.Thread(target=writer, name="test-writer")
        thread.start()
        try:
            hits = _walk(page, rng.choice([7, 20, 64]), sort)
        finally:
            stop.set()
            thread.join()
        ids = [h["_id"] for h in hits]
        assert len(ids) == len(set(ids)) == len(snapshot)
        assert set(ids) == snapshot
        keys = [(h["sort"][0], h["sort"][1]) for h in hits]  # (ts, the implicit `_shard_doc` asc)
        sign = -1 if order == "desc" else 1
        assert keys == sorted(keys, key=lambda key: (sign * key[0], key[1]))
        node.close_pit(pit_id)


@pytest.mark.parametrize(
    "sort",
    [[{"k": "desc"}, {"ts": "asc"}], [{"ts": "desc"}], ["_shard_doc"], [{"_shard_doc": "desc"}], ["_doc"]],
)
def test_pit_pages_on_shard_contexts_equal_the_walk_over_a_list_of_every_match(tmp_path, sort) -> None:
    """A PIT walk answered by the node (each page its top hits from the cursor), and as query
    and fetch phases through pickled shard messages on the PIT's shard contexts: the pages a
    list of every match of the snapshot in sort order gives, byte for byte."""
    rng = random.Random(5)
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        _create(node)
        _write(node, rng, 0, 120)
        _write(node, rng, 120, 80)
        node.delete_doc("logs", "d7")
        node.indices["logs"].refresh()
        pit_id = node.open_pit("logs", "1m")["id"]

        def through_node(body: dict) -> list[dict]:
            request = parse_search_request({**body, "pit": {"id": pit_id}}, {})
            return orjson.loads(orjson.dumps(node.search(request)["hits"]["hits"], default=_raw))

        # Counted: uncounted `_shard_doc` pages are ranges of live documents, not top hits.
        listed = _walk(lambda body: _list_page(node, pit_id, body), 30, sort, counted=True)
        assert len(listed) == 199
        assert _walk(through_node, 30, sort, counted=True) == listed
        assert _walk(lambda body: _interface_page(node, pit_id, body), 30, sort, counted=True) == listed
        assert _walk(through_node, 30, sort) == listed
        assert not node.hitlists.lists()


def _list_page(node, pit_id: str, body: dict) -> list[dict]:
    """A page of a PIT walk read from a list of every match of its snapshot, in sort order."""
    request = parse_search_request({**body, "pit": {"id": pit_id}}, {})
    ctx = node.contexts.acquire(pit_id, "pit")
    try:
        services = node.search_services
        hits = hitlist.build_hitlist(
            ctx.targets, request, now_millis=0, with_aggs=None, guard=SearchGuard(services.clock, None)
        )
        start, end = phases.page_bounds(hits, request)
        page = phases.fetch_page(services, hits, start, end, request, raw_hits=True)
        return orjson.loads(page.data) if end > start else []
    finally:
        node.contexts.release(ctx)


def _raw(value):
    return orjson.Fragment(value.data)


def test_closing_a_pit_or_clearing_a_scroll_frees_its_shard_contexts(tmp_path) -> None:
    rng = random.Random(1)
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        _create(node)
        _write(node, rng, 0, 50)
        pit_id = node.open_pit("logs", "1m")["id"]
        ctx = node.contexts.get(pit_id, "pit")
        pinned = [t.searcher for t in ctx.targets]
        assert node.shard_contexts.open_count() == SHARDS
        _write(node, rng, 50, 10)  # the shards move to new snapshots: only the pins hold the old ones
        assert not any(s.closed for s in pinned)
        request = parse_search_request({"size": 10, "sort": ["_doc"]}, {"scroll": "1m"}, indices="logs")
        scroll_id = node.search(request)["_scroll_id"]
        assert node.shard_contexts.open_count() == 2 * SHARDS
        node.close_pit(pit_id)
        assert node.shard_contexts.open_count() == SHARDS
        assert all(s.closed for s in pinned)
        node.clear_scroll([scroll_id])
        assert node.shard_contexts.open_count() == 0


def test_an_expired_pit_releases_its_pins(tmp_path) -> None:
    clock = FakeClock()
    rng = random.Random(2)
    with leafsearch.Node(tmp_path / "node", background=False, clock=clock) as node:
        _create(node)
        _write(node, rng, 0, 30)
        pit_id = node.open_pit("logs", "30s")["id"]
        pinned = [t.searcher for t in node.contexts.get(pit_id, "pit").targets]
        _write(node, rng, 30, 10)
        clock.advance(31.0)
        node.contexts.reap()
        assert node.shard_contexts.open_count() == 0
        assert all(s.closed for s in pinned)


def test_a_freed_shard_context_is_missing_and_frees_once(tmp_path) -> None:
    rng = random.Random(3)
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        _create(node)
        _write(node, rng, 0, 20)
        targets = phases.acquire_index_targets(node.search_services, "logs", IndicesOptions(), None)
        try:
            shard = PickledShard(top_hits.shard_handles(node.search_services, targets)[0])
            context = shard.open_context()
            assert shard.free_context(context) is True
            assert shard.free_context(context) is False
            with pytest.raises(leafsearch.errors.SearchContextMissing):
                node.shard_contexts.get(context)
        finally:
            for target in targets:
                target.searcher.release()


@pytest.mark.parametrize("sort", [["_doc"], [{"ts": "desc"}, {"k": "asc"}]])
def test_scroll_batches_fetched_through_pickled_shards_equal_the_in_process_ones(tmp_path, sort) -> None:
    """A scroll's batches, each the walk's page after its cursor on the scroll's pinned shard
    contexts through pickled messages, fetched the same way while writers change the index: the
    bytes of the in-process fetch, every document of the snapshot once."""
    rng = random.Random(4)
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        _create(node)
        _write(node, rng, 0, 90)
        _write(node, rng, 90, 40)
        request = parse_search_request({"size": 17, "sort": sort}, {"scroll": "1m"}, indices="logs")
        targets = phases.resolve_targets(node.search_services, request)
        shards = [PickledShard(shard) for shard in top_hits.shard_handles(node.search_services, targets)]
        contexts = [shard.open_context() for shard in shards]
        for target in targets:  # the pins hold the snapshots now
            target.searcher.release()
        ids: list[str] = []
        cursor, first = None, 130
        while True:
            _write(node, rng, first, 3)  # beside the scroll
            first += 3
            walk, shown = walks.walk_request(request, cursor)
            page, _ = phases.query_phase(
                node.search_services, targets, walk, aggs=False, shards=shards, contexts=contexts
            )
            start, _ = phases.page_bounds(page, walk)
            end = min(start + walk.size, len(page))
            if end <= start:
                break
            cursor = last_sort_values(page, end)
            page.columns = page.columns[:shown]
            remote = phases.fetch_page(
                node.search_services, page, start, end, request, raw_hits=True, shards=shards
            )
            local = phases.fetch_page(node.search_services, page, start, end, request, raw_hits=True)
            assert remote.data == local.data
            ids += [hit["_id"] for hit in orjson.loads(remote.data)]
        assert sorted(ids) == sorted(f"d{i}" for i in range(130))
        assert all(shard.free_context(context) for shard, context in zip(shards, contexts, strict=True))


def test_pit_pages_in_a_search_worker_equal_the_walk_over_a_list_of_every_match(
    tmp_path: Path, worker_processes: BaseContext
) -> None:
    """In a search worker the PIT's snapshots are rebuilt from manifests; its pages are top hits
    from the cursor on them, the pages a list of every match gives, while writes go on."""
    rng = random.Random(6)
    with leafsearch.Node(
        tmp_path / "node", background=False, search_workers=1, worker_processes=worker_processes
    ) as node:
        _create(node)
        _write(node, rng, 0, 120)
        _write(node, rng, 120, 50)
        assert node.search_workers is not None and node.search_workers.wait_ready(60)
        node.cluster_settings.update({"transient": {LONE_WALKS_IN_SERVER: "false"}})  # into the worker
        pit_id = node.open_pit("logs", "1m")["id"]
        sort = [{"ts": "asc"}]

        def through_node(body: dict) -> list[dict]:
            request = parse_search_request({**body, "pit": {"id": pit_id}}, {})
            return orjson.loads(
                orjson.dumps(node.search(request, raw_hits=True)["hits"]["hits"], default=_raw)
            )

        listed = _walk(lambda body: _list_page(node, pit_id, body), 25, sort)
        _write(node, rng, 170, 10)  # beside the walk
        assert _walk(through_node, 25, sort) == listed
        assert len(listed) == 170
