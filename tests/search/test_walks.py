"""Walks page from their cursor: a PIT page, a scroll batch and a by-query batch are each the top
hits after the walk's cursor on its pinned snapshot, never a sort of every match, and they are
the pages a list of every match of that snapshot gives. Only a walk sorted by `_score` keeps a
list (built at its first page with a cursor), within `search.walks.max_memory`, reported in
`_nodes/stats` per context and freed with it; one that does not fit pages from its cursor.

What a user relies on: exactly once, in order, whatever is written, deleted and merged beside
the walk, whichever way each page is found."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from leafsearch.request.search_request import parse_search_request
from leafsearch.rest.render import to_json
from leafsearch.search import hitlist, phases, walks
from leafsearch.search.guard import SearchGuard
from leafsearch.write.by_query_request import UPDATE, parse_by_query

SHARDS = 3
DOCS = 240
MAPPINGS = {
    "properties": {
        "kw": {"type": "keyword"},
        "lg": {"type": "long"},
        "db": {"type": "double"},
        "dt": {"type": "date"},
        "t": {"type": "text"},
    }
}
#: Scores with many ties (a word repeated 1 to 3 times in messages of two lengths).
SCORED = {"match": {"t": "alpha"}}


def _doc(i: int, rng: random.Random) -> dict[str, Any]:
    doc: dict[str, Any] = {"kw": rng.choice("abcde"), "lg": rng.randint(0, 30), "t": "alpha " * (1 + i % 3)}
    if i % 4:
        doc["db"] = rng.choice([0.5, 1.5, -2.0])  # missing from a quarter of the documents
    if i % 5:
        doc["dt"] = 1_600_000_000_000 + rng.randint(0, 9) * 1000
    if i % 7 == 0:
        doc["t"] += "beta"
    return doc


def _bulk(node: leafsearch.Node, docs: dict[str, dict[str, Any]], **params: str) -> None:
    lines = [orjson.dumps(line) for i, d in docs.items() for line in ({"index": {"_id": i}}, d)]
    assert not node.bulk(b"\n".join(lines) + b"\n", index="logs", **params)["errors"]


@pytest.fixture
def node(tmp_path) -> Iterator[leafsearch.Node]:
    """DOCS documents in several segments of 3 shards, some deleted before any walk opens."""
    rng = random.Random(7)
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        settings = {"number_of_shards": SHARDS}
        admin.create_index(node, "logs", {"settings": settings, "mappings": MAPPINGS})
        for first in range(0, DOCS, 80):
            _bulk(node, {f"d{i}": _doc(i, rng) for i in range(first, first + 80)}, refresh="true")
        for i in range(0, DOCS, 11):
            node.delete_doc("logs", f"d{i}")
        node.indices["logs"].refresh()
        yield node


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the lists of every match built (for a walk's list or the node's HitList cache)."""
    built: list[int] = []
    original = hitlist.build_hitlist

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(hitlist, "build_hitlist", counted)
    monkeypatch.setattr(walks, "build_hitlist", counted)
    return built


def _beside(node: leafsearch.Node, rng: random.Random) -> Callable[[int], None]:
    """Writes between pages: new documents, updates, deletes, refreshes and merges."""

    def change(page: int) -> None:
        n = rng.randrange(10**6)
        _bulk(node, {f"new{n}": {"kw": "a", "lg": 5, "t": "alpha"}, f"d{n % DOCS}": {"lg": -1}})
        node.delete_doc("logs", f"d{(n * 7) % DOCS}")
        node.indices["logs"].refresh()
        if page % 3 == 2:
            for shard in node.indices["logs"].shards:
                while shard.maybe_merge():
                    pass
            node.indices["logs"].refresh()

    return change


def _pit_walk(
    node: leafsearch.Node, pit_id: str, body: dict[str, Any], size: int, between: Callable[[int], None]
) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    after = None
    for page in range(10_000):
        request = {**body, "size": size, "pit": {"id": pit_id}}
        if after is not None:
            request["search_after"] = after
        got = search(node, None, request)["hits"]["hits"]
        if not got:
            return hits
        hits += got
        after = got[-1]["sort"]
        between(page)
    raise AssertionError("the walk did not end")


def _listed(node: leafsearch.Node, pit_id: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every hit of the PIT's snapshot in the walk's order, from one list of every match."""
    request = parse_search_request({**body, "size": 10_000, "pit": {"id": pit_id}}, {})
    ctx = node.contexts.acquire(pit_id, "pit")
    try:
        services = node.search_services
        guard = SearchGuard(services.clock, None)
        hits = hitlist.build_hitlist(ctx.targets, request, now_millis=0, with_aggs=None, guard=guard)
        page = phases.fetch_page(services, hits, 0, len(hits), request)
    finally:
        node.contexts.release(ctx)
    return [{"_id": hit["_id"], "sort": hit["sort"]} for hit in page]


def _ids_and_sorts(hits: list[dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    return [(hit["_id"], hit["sort"]) for hit in hits]


def _walk_lists(node: leafsearch.Node) -> dict[str, Any]:
    """`GET _nodes/stats/walks` as the REST layer renders it."""
    return next(iter(orjson.loads(to_json(node.nodes_stats(["walks"])))["nodes"].values()))["walks"]


@pytest.mark.parametrize(
    "sort",
    [
        [{"kw": "asc"}],
        [{"lg": "desc"}, {"kw": "asc"}],
        [{"db": {"order": "asc", "missing": "_first"}}],
        [{"dt": "desc"}],
        ["_doc"],
        [{"_doc": "desc"}],
        [{"_shard_doc": "desc"}],
        [{"lg": "asc"}, {"_shard_doc": "desc"}],
    ],
)
def test_a_pit_walk_sorts_no_list_of_every_match_and_is_the_full_sort(
    node: leafsearch.Node, builds: list[int], sort: list[Any]
) -> None:
    pit_id = node.open_pit("logs", "5m")["id"]
    body = {"sort": sort, "query": {"bool": {"must_not": {"term": {"kw": "e"}}}}}
    expected = _listed(node, pit_id, body)
    builds.clear()
    walked = _pit_walk(node, pit_id, body, 13, _beside(node, random.Random(1)))
    assert _ids_and_sorts(walked) == _ids_and_sorts(expected)
    assert builds == [] and node.hitlists.lists() == []
    assert _walk_lists(node)["lists"] == 0
    node.close_pit(pit_id)


def test_a_sequential_walk_queries_once_a_window_and_any_cursor_gets_its_own_page(
    node: leafsearch.Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's query finds `WINDOW_PAGES` pages' worth of hits: the next pages of a walk are
    slices of them (one query per window), and a cursor anywhere (backwards, forwards, between
    two hits) gets exactly the page after it, from the window when it holds it."""
    queries: list[int] = []
    real = phases.query_phase

    def counted(*args: Any, **kwargs: Any) -> Any:
        queries.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(phases, "query_phase", counted)
    pit_id = node.open_pit("logs", "5m")["id"]
    body = {"sort": [{"lg": "desc"}, {"kw": "asc"}]}
    expected = _listed(node, pit_id, body)
    queries.clear()
    size = 7
    walked = _pit_walk(node, pit_id, body, size, lambda page: None)
    assert _ids_and_sorts(walked) == _ids_and_sorts(expected)
    pages = -(-len(expected) // size)
    assert len(queries) <= -(-pages // walks.WINDOW_PAGES) + 1
    stats = _walk_lists(node)
    assert stats["windows"] == 1 and stats["windows_in_bytes"] > 0
    assert stats["contexts"][0]["windows_in_bytes"] == stats["windows_in_bytes"]
    rng = random.Random(3)
    for position in [40, 12, 13, 90, 5, 6, 7, 200, 199, *rng.sample(range(1, len(expected)), 20)]:
        after = expected[position - 1]["sort"]
        request = {"sort": body["sort"], "size": size, "pit": {"id": pit_id}}
        got = search(node, None, {**request, "search_after": after})["hits"]["hits"]
        assert _ids_and_sorts(got) == _ids_and_sorts(expected[position : position + size]), position
        # A cursor between two hits (a `_shard_doc` no hit has) starts at the hit after it.
        between = [*after[:-1], after[-1] + 1]
        got = search(node, None, {**request, "search_after": between})["hits"]["hits"]
        later = [hit for hit in expected if _key(hit, body) > _key({"sort": between}, body)]
        assert _ids_and_sorts(got) == _ids_and_sorts(later[:size]), position
    node.close_pit(pit_id)
    assert _walk_lists(node)["windows"] == 0


def _key(hit: dict[str, Any], body: dict[str, Any]) -> tuple:
    """A hit's place in the walk sorted by `lg` desc, `kw` asc, then `_shard_doc` asc."""
    lg, kw, shard_doc = hit["sort"]
    return (-lg, kw, shard_doc)


def test_a_score_walk_keeps_its_list_from_its_second_page_until_its_pit_ends(
    node: leafsearch.Node, builds: list[int]
) -> None:
    pit_id = node.open_pit("logs", "5m")["id"]
    body = {"query": SCORED, "sort": ["_score"]}
    expected = _listed(node, pit_id, body)
    builds.clear()
    counts: list[int] = []
    walked = _pit_walk(node, pit_id, body, 17, lambda page: counts.append(len(builds)))
    assert counts[:3] == [0, 1, 1] and counts[-1] == 1  # top hits first, then one list for the walk
    assert _ids_and_sorts(walked) == _ids_and_sorts(expected)
    stats = _walk_lists(node)
    assert stats["lists"] == 1 and stats["lists_in_bytes"] > 0
    [context] = stats["contexts"]
    assert context["type"] == "pit" and context["lists_in_bytes"] == stats["lists_in_bytes"]
    assert context["held_in_bytes"] >= context["lists_in_bytes"]
    node.close_pit(pit_id)
    stats = _walk_lists(node)
    assert stats["lists"] == 0 and stats["lists_in_bytes"] == 0 and stats["contexts"] == []


def test_a_score_walk_whose_list_does_not_fit_pages_from_its_cursor(
    node: leafsearch.Node, builds: list[int]
) -> None:
    node.cluster_settings.update({"persistent": {walks.MAX_MEMORY: "1kb"}})
    pit_id = node.open_pit("logs", "5m")["id"]
    body = {"query": SCORED, "sort": [{"_score": "desc"}, {"kw": "desc"}]}
    expected = _listed(node, pit_id, body)
    builds.clear()
    walked = _pit_walk(node, pit_id, body, 9, _beside(node, random.Random(2)))
    assert _ids_and_sorts(walked) == _ids_and_sorts(expected)
    assert len(builds) == 1  # built once, refused, never built again
    stats = _walk_lists(node)
    assert stats["lists"] == 0 and stats["lists_refused"] == 1 and stats["limit_in_bytes"] == 1024
    node.close_pit(pit_id)


def test_the_slices_of_a_pit_walk_are_the_slices_of_its_full_sort(
    node: leafsearch.Node, builds: list[int]
) -> None:
    """A PIT slice without a field holds a contiguous range of the snapshot's live documents over
    every shard: its pages from the cursor hold the documents its list does, counted or not."""
    pit_id = node.open_pit("logs", "5m")["id"]
    for counted in (True, False):
        for i in range(4):
            body = {"sort": [{"lg": "asc"}], "slice": {"id": i, "max": 4}, "track_total_hits": counted}
            expected = _listed(node, pit_id, body)
            assert expected
            walked = _pit_walk(node, pit_id, body, 11, lambda page: None)
            assert _ids_and_sorts(walked) == _ids_and_sorts(expected)
    node.close_pit(pit_id)


def test_a_by_query_operation_reads_its_batches_from_a_cursor(
    node: leafsearch.Node, builds: list[int]
) -> None:
    live = search(node, "logs", {"size": 0, "track_total_hits": True})["hits"]["total"]["value"]
    for slices in ("1", "3"):
        params = {"scroll_size": "17", "slices": slices, "refresh": "true"}
        request = parse_by_query(UPDATE, "logs", None, params)
        done = node.bulk_by_query(request)
        assert done["updated"] == done["total"] == live and done["failures"] == []
    assert builds == []
