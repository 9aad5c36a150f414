"""Two nodes in one process share nothing of their shards: each hears only its own shards'
events (released snapshots, deleted segment files), and each owns its flush thread and merge
worker, which end when it closes while the other node keeps flushing and merging."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pytest
from inprocess import search

import leafsearch
import leafsearch.index.shard as shard_module
from leafsearch.index.searcher import Searcher
from leafsearch.indices import admin


def busy(node: leafsearch.Node, index: str) -> None:
    """Writes (which hand full buffers to the flush thread when buffers are small), refreshes that
    release snapshots, a merge that deletes segment folders."""
    fill(node, index, 12)
    shard = node.indices[index].shards[0]
    merged = False
    while shard.maybe_merge():
        merged = True
    assert merged, "the merge policy did not merge"
    node.indices[index].refresh()


def fill(node: leafsearch.Node, index: str, rounds: int) -> None:
    """`rounds` refreshed bulk requests of twelve documents each."""
    for r in range(rounds):
        lines = b"".join(b'{"index":{"_id":"%d-%d"}}\n{"n":%d}\n' % (r, i, i) for i in range(12))
        node.bulk(lines, index=index, refresh="true")


def flush_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("leafsearch-flush")}


@pytest.fixture
def small_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 10)  # every bulk hands a buffer over


def test_each_node_hears_only_its_own_shards(tmp_path: Path) -> None:
    with (
        leafsearch.Node(tmp_path / "first", background=False) as first,
        leafsearch.Node(tmp_path / "second", background=False) as second,
    ):
        closed: dict[str, list[Searcher]] = {"first": [], "second": []}
        deleted: dict[str, list[Path]] = {"first": [], "second": []}
        for name, node in (("first", first), ("second", second)):
            node.shard_services.events.on_snapshot_closed(closed[name].append)
            node.shard_services.events.on_files_deleted(deleted[name].append)
            admin.create_index(node, "docs", {"settings": {"number_of_shards": 1}})
            busy(node, "docs")
        first.drop_index("docs")
        for name, node in (("first", first), ("second", second)):
            assert closed[name] and deleted[name], f"{name} heard nothing of its own shards"
            folders = {view.segment.folder for searcher in closed[name] for view in searcher.views}
            assert all(folder.is_relative_to(node.path) for folder in folders | set(deleted[name]))
        # The index the first node dropped: its whole folder, told to the first node only.
        assert any(not folder.name.startswith("seg_") for folder in deleted["first"])
        assert all(folder.name.startswith("seg_") for folder in deleted["second"])


def test_a_released_snapshot_leaves_the_other_nodes_hit_lists(tmp_path: Path) -> None:
    """A node's HitLists go with its own released snapshots, never with another node's."""
    with (
        leafsearch.Node(tmp_path / "first", background=False) as first,
        leafsearch.Node(tmp_path / "second", background=False) as second,
    ):
        for node in (first, second):
            admin.create_index(node, "docs", {"settings": {"number_of_shards": 1}})
            fill(node, "docs", 2)
        pits = {node: node.open_pit("docs", "1m")["id"] for node in (first, second)}
        for node, pit_id in pits.items():
            # terminate_after is served from a list of every match (kept, unlike a walk's page)
            search(
                node,
                None,
                {"pit": {"id": pit_id}, "sort": [{"n": "desc"}], "size": 3, "terminate_after": 100},
            )
            assert len(node.hitlists.lists()) == 1
        # The PIT closed and a refresh replaced its snapshot: the second node's snapshot is gone.
        second.close_pit(pits[second])
        fill(second, "docs", 1)
        assert len(second.hitlists.lists()) == 0
        assert len(first.hitlists.lists()) == 1
        first.close_pit(pits[first])
        fill(first, "docs", 1)
        assert len(first.hitlists.lists()) == 0


def test_each_node_owns_its_flush_thread_and_merge_worker(tmp_path: Path, small_buffers: None) -> None:
    before_threads, before_children = flush_threads(), set(multiprocessing.active_children())
    second = leafsearch.Node(tmp_path / "second", background=False)
    try:
        with leafsearch.Node(tmp_path / "first", background=False) as first:
            for node in (first, second):
                admin.create_index(node, "docs", {"settings": {"number_of_shards": 1}})
                busy(node, "docs")
            assert len(flush_threads() - before_threads) == 2
            assert len(set(multiprocessing.active_children()) - before_children) == 2
        # The first node closed: its thread and process ended, the second node's go on.
        (thread,) = flush_threads() - before_threads
        (process,) = set(multiprocessing.active_children()) - before_children
        busy(second, "docs")
        assert flush_threads() - before_threads == {thread}
        assert set(multiprocessing.active_children()) - before_children == {process}
    finally:
        second.close()
    assert flush_threads() == before_threads
    assert set(multiprocessing.active_children()) == before_children
