"""The node's task registry in-process: finished results are bounded in number and age (on the
node's clock, advanced by the test), and closing a node stops its running operations."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from conftest import FakeClock

from leafsearch import Node
from leafsearch.errors import ResourceNotFound
from leafsearch.services import tasks
from leafsearch.write.by_query_request import DELETE, UPDATE, parse_by_query


def _fill(node: Node, index: str, n: int) -> None:
    lines = []
    for i in range(n):
        lines += [orjson.dumps({"index": {"_index": index, "_id": str(i)}}), orjson.dumps({"n": i})]
    assert not node.bulk(b"\n".join(lines) + b"\n", refresh="true")["errors"]


def _finished(node: Node, task_id: str) -> dict:
    return node.tasks.get(task_id, wait=True, timeout=60)


def test_finished_results_are_bounded_in_number_and_age(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tasks, "MAX_RESULTS", 3)
    clock = FakeClock()
    with Node(tmp_path / "n", background=False, clock=clock) as node:
        _fill(node, "idx", 5)
        ids = []
        for _ in range(5):
            request = parse_by_query(UPDATE, "idx", None, {"refresh": "true"})
            ids.append(node.bulk_by_query(request, wait_for_completion=False)["task"])
            assert _finished(node, ids[-1])["response"]["updated"] == 5
        for old in ids[:2]:
            with pytest.raises(ResourceNotFound, match="isn't running and hasn't stored its results"):
                node.tasks.get(old, wait=False, timeout=None)
        assert all(node.tasks.get(t, wait=False, timeout=None)["completed"] for t in ids[2:])
        clock.advance(tasks.RESULT_TTL + 1)
        with pytest.raises(ResourceNotFound):
            node.tasks.get(ids[-1], wait=False, timeout=None)


def test_closing_the_node_cancels_its_running_operations(tmp_path: Path) -> None:
    node = Node(tmp_path / "n", background=False)
    try:
        _fill(node, "idx", 4)
        request = parse_by_query(
            DELETE, "idx", {"query": {"match_all": {}}}, {"scroll_size": "1", "requests_per_second": "0.0001"}
        )
        task_id = node.bulk_by_query(request, wait_for_completion=False)["task"]
        task = node.tasks.running(task_id)
    finally:
        node.close()  # returns only once the throttled task has stopped
    assert task.done.is_set() and task.cancel_reason == "node is closing"
