"""Read-ahead of walks: a sequential scroll or PIT walk finds its next page already rendered, as
the same bytes the request would have rendered; other access patterns cost no speculative work,
and a context's pages go with it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from concurrency import wait_for
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from leafsearch.rest.render import to_json
from leafsearch.search import read_ahead as read_ahead_module

DOCS = 2_000
BATCH = 150


@pytest.fixture
def node(tmp_path: Path) -> Iterator[leafsearch.Node]:
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        admin.create_index(
            node,
            "logs",
            {
                "settings": {"number_of_shards": 2},
                "mappings": {"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}}},
            },
        )
        body = b"".join(b'{"index":{"_id":"d%d"}}\n{"n":%d,"k":"k%d"}\n' % (i, i, i % 3) for i in range(DOCS))
        assert not node.bulk(body, index="logs", refresh="true")["errors"]
        yield node


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pages rendered in the background."""
    count: list[int] = []
    original = read_ahead_module._render_held

    def counted(*args: Any) -> Any:
        count.append(1)
        return original(*args)

    monkeypatch.setattr(read_ahead_module, "_render_held", counted)
    return count


def settle(node: leafsearch.Node) -> None:
    """Wait until the pages scheduled so far are rendered, as a client's time parsing a page
    lets them be: the read-ahead worker is one thread, so a no-op submitted now runs after them."""
    pool = node.contexts.read_ahead._pool
    if pool is not None:
        pool.submit(lambda: None).result()


def rest_body(response: dict[str, Any]) -> dict[str, Any]:
    """The response as a REST client parses it (pages rendered to bytes included)."""
    body = orjson.loads(to_json(response))
    body.pop("took")
    return body


def scroll_walk(node: leafsearch.Node, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every batch of a scroll, as REST responses, until an empty one; then the scroll is cleared."""
    response = search(node, "logs", body, {"scroll": "1m"}, raw_hits=True)
    pages = [rest_body(response)]
    scroll_id = response["_scroll_id"]
    while pages[-1]["hits"]["hits"]:
        settle(node)
        pages.append(rest_body(node.scroll(scroll_id, "1m", raw_hits=True)))
        scroll_id = pages[-1]["_scroll_id"]
    node.clear_scroll([scroll_id])
    return pages


def pit_walk(node: leafsearch.Node, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every page of a `search_after` walk over a PIT, as REST responses."""
    pit = node.open_pit("logs", "1m")["id"]
    pages: list[dict[str, Any]] = []
    after = None
    while not pages or pages[-1]["hits"]["hits"]:
        request = {**body, "pit": {"id": pit}}
        if after is not None:
            request["search_after"] = after
        settle(node)
        pages.append(rest_body(search(node, None, request, {}, raw_hits=True)))
        if pages[-1]["hits"]["hits"]:
            after = pages[-1]["hits"]["hits"][-1]["sort"]
    node.close_pit(pit)
    return pages


@pytest.mark.parametrize("sort", [["_doc"], [{"n": "desc"}], [{"k": "asc"}, {"n": "asc"}]])
def test_a_scroll_walk_is_read_ahead_and_returns_the_same_pages(
    node: leafsearch.Node, renders: list[int], sort: list[Any]
) -> None:
    body = {"size": BATCH, "sort": sort}
    ahead = scroll_walk(node, body)
    batches = -(-DOCS // BATCH)
    # The search renders batch 0; the first scroll request (batch 1) could start anywhere, the
    # second (batch 2) continues it: batches 3 to the last are read ahead.
    assert len(renders) == batches - 3
    node.contexts.read_ahead.max_pages = 0  # every page read ahead is dropped at once: none used
    plain = scroll_walk(node, body)
    for page in ahead + plain:
        page.pop("_scroll_id")
    assert ahead == plain
    ids = [hit["_id"] for page in ahead for hit in page["hits"]["hits"]]
    assert sorted(ids) == sorted(f"d{i}" for i in range(DOCS))
    assert node.contexts.read_ahead.held() == 0  # cleared scrolls leave nothing behind


def test_a_pit_walk_is_read_ahead_and_returns_the_same_pages(
    node: leafsearch.Node, renders: list[int]
) -> None:
    body = {"size": BATCH, "sort": [{"n": "desc"}], "track_total_hits": False}
    ahead = pit_walk(node, body)
    # Page 1 continues page 0: pages 2 to the last are read ahead.
    assert len(renders) == -(-DOCS // BATCH) - 2
    node.contexts.read_ahead.max_pages = 0
    plain = pit_walk(node, body)
    for page in ahead + plain:
        page.pop("pit_id")
    assert ahead == plain
    assert [hit["_source"]["n"] for page in ahead for hit in page["hits"]["hits"]] == list(
        range(DOCS - 1, -1, -1)
    )


def test_asking_for_the_same_page_again_reads_nothing_ahead(
    node: leafsearch.Node, renders: list[int]
) -> None:
    pit = node.open_pit("logs", "1m")["id"]
    body = {"size": BATCH, "sort": [{"n": "asc"}], "pit": {"id": pit}, "search_after": [500]}
    first = rest_body(search(node, None, body, {}, raw_hits=True))
    for _ in range(5):
        assert rest_body(search(node, None, body, {}, raw_hits=True)) == first
    assert renders == []
    assert node.contexts.read_ahead.held() == 0


def test_a_page_of_another_shape_is_rendered_for_its_request(
    node: leafsearch.Node, renders: list[int]
) -> None:
    """The read-ahead page carries `_source`; the request that comes asks for none."""
    pit = node.open_pit("logs", "1m")["id"]
    body: dict[str, Any] = {"size": BATCH, "sort": [{"n": "asc"}], "pit": {"id": pit}}
    after = None
    for _ in range(3):
        page = rest_body(
            search(node, None, {**body, **({"search_after": after} if after else {})}, {}, raw_hits=True)
        )
        after = page["hits"]["hits"][-1]["sort"]
    assert renders  # the fourth page is being read ahead, with its sources
    bare = rest_body(search(node, None, {**body, "search_after": after, "_source": False}, {}, raw_hits=True))
    assert [hit["_id"] for hit in bare["hits"]["hits"]] == [f"d{i}" for i in range(3 * BATCH, 4 * BATCH)]
    assert all("_source" not in hit for hit in bare["hits"]["hits"])


def test_a_scroll_keeps_its_snapshot_while_pages_are_read_ahead(node: leafsearch.Node) -> None:
    response = search(node, "logs", {"size": BATCH, "sort": ["_doc"]}, {"scroll": "1m"}, raw_hits=True)
    seen = [hit["_id"] for hit in rest_body(response)["hits"]["hits"]]
    scroll_id = response["_scroll_id"]
    for step in range(4):
        batch = rest_body(node.scroll(scroll_id, "1m", raw_hits=True))
        seen += [hit["_id"] for hit in batch["hits"]["hits"]]
        scroll_id = batch["_scroll_id"]
        # Writes, deletes and refreshes between batches change nothing the scroll returns.
        node.index_doc("logs", f"new{step}", b'{"n": -1}')
        node.delete_doc("logs", f"d{DOCS - 1 - step}")
        node.indices["logs"].refresh()
    while True:
        batch = rest_body(node.scroll(scroll_id, "1m", raw_hits=True))
        if not batch["hits"]["hits"]:
            break
        seen += [hit["_id"] for hit in batch["hits"]["hits"]]
        scroll_id = batch["_scroll_id"]
    assert sorted(seen) == sorted(f"d{i}" for i in range(DOCS))


def test_ended_contexts_and_the_page_limit_bound_what_is_held(node: leafsearch.Node) -> None:
    node.contexts.read_ahead.max_pages = 2
    scrolls = [
        search(node, "logs", {"size": 100, "sort": ["_doc"]}, {"scroll": "1m"}, raw_hits=True)["_scroll_id"]
        for _ in range(4)
    ]
    seen: dict[str, list[str]] = {sid: [] for sid in scrolls}
    latest = {sid: sid for sid in scrolls}
    for _ in range(5):  # interleaved walks: each reads ahead, only the two latest pages are kept
        for sid in scrolls:
            batch = rest_body(node.scroll(latest[sid], "1m", raw_hits=True))
            seen[sid] += [h["_id"] for h in batch["hits"]["hits"]]
            latest[sid] = batch["_scroll_id"]
            assert node.contexts.read_ahead.held() <= 2
    for ids in seen.values():
        assert ids == seen[scrolls[0]] and len(set(ids)) == 500
    node.clear_scroll(["_all"])
    assert node.contexts.read_ahead.held() == 0


class _Page:
    def nbytes(self) -> int:
        return 1


def test_within_after_reply_a_page_is_prepared_once_the_block_ends() -> None:
    """A search worker's task reads ahead only after its reply went out: inside the block the
    page is not being prepared (a request asking for it then renders its own), after it the
    page is prepared and taken."""
    ahead = read_ahead_module.ReadAhead()
    prepared: list[bytes] = []

    def preparing(key: bytes) -> Callable[[], _Page]:
        return lambda: (prepared.append(key), _Page())[1]

    try:
        ahead.continue_walk(1, "w", b"a", b"b", [], preparing(b"b"))
        with read_ahead_module.after_reply():
            ahead.continue_walk(1, "w", b"b", b"c", [], preparing(b"c"))
            assert ahead.held() == 1
            assert ahead.take(1, "w", b"c") is None  # not started: the caller renders it
        assert prepared == []
        with read_ahead_module.after_reply():
            ahead.continue_walk(1, "w", b"c", b"d", [], preparing(b"d"))
        wait_for(lambda: ahead.held_bytes() == {1: 1})
        assert isinstance(ahead.take(1, "w", b"d"), _Page)
        assert prepared == [b"d"] and ahead.held() == 0
    finally:
        ahead.close()


def test_within_an_inline_after_reply_a_page_is_prepared_by_its_thread_when_the_block_ends() -> None:
    """A kept scroll's next batch is rendered by the thread that wrote the last one (parking.py):
    ready when the block ends, without the read-ahead thread."""
    ahead = read_ahead_module.ReadAhead()
    threads: list[int] = []

    def prepare() -> _Page:
        threads.append(threading.get_ident())
        return _Page()

    try:
        ahead.continue_walk(1, "w", b"a", b"b", [], prepare)  # the walk's first page: nothing ahead
        with read_ahead_module.after_reply(inline=True):
            ahead.continue_walk(1, "w", b"b", b"c", [], prepare)
            assert threads == []
        assert threads == [threading.get_ident()]
        assert ahead.held_bytes() == {1: 1}
        assert isinstance(ahead.take(1, "w", b"c"), _Page)
    finally:
        ahead.close()


def test_a_page_being_prepared_calls_when_it_is_ready() -> None:
    """`when_ready` (a parked walk's request that found its page read ahead) calls at once for a
    page prepared, from the preparing thread as it ends for one being prepared, with None for
    one that failed; not at all for a page not started or not read ahead (the caller renders)."""
    ahead = read_ahead_module.ReadAhead()
    gate = threading.Event()
    sizes: list[tuple[int | None, str]] = []

    def record(size: int | None) -> None:
        sizes.append((size, threading.current_thread().name))

    def held_back() -> _Page:
        gate.wait(30)
        return _Page()

    def failing() -> _Page:
        raise RuntimeError("the snapshot went")

    try:
        ahead.continue_walk(1, "w", b"a", b"b", [], held_back)
        ahead.continue_walk(1, "w", b"b", b"c", [], held_back)
        wait_for(lambda: ahead.when_ready(1, "w", b"c", record))  # running: called when it ends
        assert sizes == []
        assert not ahead.when_ready(1, "other walk", b"c", record)
        assert not ahead.when_ready(2, "w", b"c", record)
        gate.set()
        wait_for(lambda: len(sizes) == 1)
        assert sizes[0][0] == 1 and sizes[0][1].startswith("leafsearch-read-ahead")
        assert ahead.when_ready(1, "w", b"c", record) and sizes[1] == (1, "MainThread")  # ready: at once
        assert isinstance(ahead.take(1, "w", b"c"), _Page)
        assert not ahead.when_ready(1, "w", b"c", record)  # taken
        ahead.continue_walk(1, "w", b"c", b"d", [], failing)
        wait_for(lambda: ahead.when_ready(1, "w", b"d", record))
        wait_for(lambda: len(sizes) == 3)
        assert sizes[2][0] is None
    finally:
        ahead.close()
