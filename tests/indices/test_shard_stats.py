"""Shard counters in-process: exact under concurrent requests, the translog's figures, the search
phases counted per shard."""

from __future__ import annotations

import threading
from pathlib import Path

from leafsearch import Node
from leafsearch.indices.stats import METRICS, indices_stats
from leafsearch.request.indices_options import IndicesOptions


def _total(node: Node, name: str) -> dict:
    return indices_stats(node, name, IndicesOptions(), METRICS)["indices"][name]["total"]


def test_counters_are_exact_under_concurrent_requests(tmp_path: Path) -> None:
    with Node(tmp_path / "n", background=False) as node:
        node.index_doc("i", "seed", b'{"n": 0}')
        start = threading.Barrier(4)

        def work(slot: int) -> None:
            start.wait()
            for i in range(200):
                node.index_doc("i", f"{slot}-{i}", b'{"n": 1}')
                node.get_doc("i", "seed")
                node.get_doc("i", "absent")

        threads = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        total = _total(node, "i")
        assert total["indexing"]["index_total"] == 801
        assert total["indexing"]["index_current"] == 0
        assert (total["get"]["total"], total["get"]["exists_total"], total["get"]["missing_total"]) == (
            1600,
            800,
            800,
        )
        assert total["get"]["current"] == 0


def test_translog_figures_follow_commits(tmp_path: Path) -> None:
    with Node(tmp_path / "n", background=False) as node:
        node.index_doc("t", "1", b'{"n": 1}')
        node.index_doc("t", "2", b'{"n": 2}')
        node.delete_doc("t", "1")
        translog = _total(node, "t")["translog"]
        assert translog["operations"] == translog["uncommitted_operations"] == 3
        assert translog["size_in_bytes"] > 0
        node.get_index("t").refresh()  # a refresh commits: the translog it covers goes
        assert _total(node, "t")["translog"]["operations"] == 0
        node.index_doc("t", "3", b'{"n": 3}')
        assert _total(node, "t")["translog"]["operations"] == 1
    with Node(tmp_path / "n", background=False) as node:  # a clean stop committed everything
        assert _total(node, "t")["translog"]["operations"] == 0
        assert _total(node, "t")["docs"]["count"] == 2
