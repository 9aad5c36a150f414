"""Building a segment's sort order fails (memory) in one request only (issue 24): that request
gets the error and nothing of the order is kept, the next request builds it; an order built but
whose file cannot be written serves its request from memory and leaves no partial file; and in a
search worker process, the worker goes on serving (it is not replaced)."""

from __future__ import annotations

from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

import leafsearch
from leafsearch.index import derived_files, order_files
from leafsearch.indices import admin
from leafsearch.search import top_hits
from leafsearch.search.workers import entry, process
from leafsearch.search.workers.pool import LONE_REQUESTS_IN_SERVER
from tests.index.test_background_failures import Fault
from tests.inprocess import search

DOCS = 300
SORTED = {"query": {"match_all": {}}, "sort": [{"n": "desc"}], "size": 5}
FIRST_PAGE = [str(DOCS - 1 - i) for i in range(5)]


def _fill(node: leafsearch.Node) -> None:
    admin.create_index(node, "t", {"settings": {"number_of_shards": 1}})
    lines = b"".join(b'{"index":{"_id":"%d"}}\n{"n":%d}\n' % (i, (i * 7) % DOCS) for i in range(DOCS))
    node.bulk(lines, index="t", refresh="true")


def _page(node: leafsearch.Node) -> list[str]:
    hits = search(node, "t", SORTED)["hits"]["hits"]
    return [str(h["sort"][0]) for h in hits]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[leafsearch.Node]:
    with leafsearch.Node(tmp_path / "n", background=False) as n:
        _fill(n)
        yield n


def test_an_order_that_cannot_be_built_fails_its_request_only(node, monkeypatch):
    fault = Fault(top_hits.build_order, error=MemoryError("Unable to allocate 1.00 GiB for an array"))
    monkeypatch.setattr(top_hits, "build_order", fault)
    with pytest.raises(MemoryError):
        _page(node)
    assert node.sort_orders.stats()["count"] == 0  # nothing kept of the failed build
    assert _page(node) == FIRST_PAGE
    assert fault.calls == 2 and node.sort_orders.stats()["built"] == 1
    assert _page(node) == FIRST_PAGE
    assert fault.calls == 2  # kept: not built again


def test_an_order_whose_file_cannot_be_written_serves_its_request_from_memory(node, monkeypatch):
    """Writing the order's file runs out of memory half way (its arrays written into the
    temporary file): the request is answered from the order in memory, the temporary file is
    gone, and once the cache forgets the order, the next build writes the file."""
    monkeypatch.setattr(derived_files, "MIN_DOCS", 0)
    fault = Fault(memoryview, at=2)  # the second array written into the file
    monkeypatch.setattr(derived_files, "memoryview", fault, raising=False)
    assert _page(node) == FIRST_PAGE
    assert fault.fired == 1
    stats = node.sort_orders.stats()
    assert (stats["built"], stats["files_written"], stats["mapped_count"]) == (1, 0, 0)
    folders = [view.segment.folder for view in node.indices["t"].shards[0].published_views()]
    assert not [p for folder in folders for p in folder.iterdir() if "partial" in p.name]
    assert not [p for folder in folders for p in folder.glob(f"{order_files.PREFIX}*")]
    assert _page(node) == FIRST_PAGE and node.sort_orders.stats()["built"] == 1
    node.sort_orders.clear()
    assert _page(node) == FIRST_PAGE
    stats = node.sort_orders.stats()
    assert (stats["built"], stats["files_written"], stats["mapped_count"]) == (2, 1, 1)


def _worker_whose_first_order_fails(conn: Connection, config: dict, security: Any) -> None:
    """A search worker process (`entry.main`) whose first sort order build runs out of memory."""
    top_hits.build_order = Fault(top_hits.build_order, error=MemoryError("Unable to allocate"))
    process.main(conn, process.WorkerConfig(**config), security)


def test_an_order_that_cannot_be_built_in_a_worker_fails_its_request_and_the_worker_goes_on(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(entry, "main", _worker_whose_first_order_fails)
    with leafsearch.Node(tmp_path / "n", background=False, search_workers=1) as node:
        node.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "false"}})
        _fill(node)
        pool = node.search_workers
        assert pool is not None and pool.wait_ready(60)
        (before,) = pool.stats()["workers"]
        with pytest.raises(Exception, match="MemoryError") as failed:
            _page(node)
        assert "in the search worker" in str(failed.value)
        assert _page(node) == FIRST_PAGE
        stats = pool.stats()
        (after,) = stats["workers"]
        assert (stats["started"], stats["lost"], after["pid"]) == (1, 0, before["pid"])
        assert after["sort_orders"]["built"] == 1 and after["sort_orders"]["count"] == 1
        assert node.sort_orders.stats()["built"] == 0  # served by the worker, not here
