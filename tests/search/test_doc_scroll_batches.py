"""A `_doc` scroll's batches read from live documents (execution._live_docs_batch): each batch
names the ends of the batches after it (what the scroll's record holds, and a worker keeping the
connection serves), which must be where those batches end, on segments with deletions, over
several shards, whole and sliced."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import orjson
import pytest

import leafsearch
from leafsearch.indices import admin
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import execution, phases
from leafsearch.search.execution import RECORDED_AHEAD, ScrollTask
from leafsearch.search.targets import release_targets


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    rng = random.Random(5)
    with leafsearch.Node(tmp_path_factory.mktemp("docbatches") / "node", background=False) as node:
        admin.create_index(node, "d", {"settings": {"number_of_shards": 2}})
        for batch in range(5):  # several segments per shard, deletions among them
            ids = [f"{batch}-{i}" for i in range(60)]
            for doc_id in ids:
                node.index_doc("d", doc_id, orjson.dumps({"n": rng.randint(0, 9)}))
            node.indices["d"].refresh()
            for doc_id in rng.sample(ids, 12):
                node.delete_doc("d", doc_id)
        node.indices["d"].refresh()
        yield node


@pytest.mark.parametrize("sliced", [None, {"id": 1, "max": 3}])
@pytest.mark.parametrize("size", [1, 7, 50])
def test_each_batch_names_where_the_next_ones_end(node: Any, sliced: dict | None, size: int) -> None:
    body: dict[str, Any] = {"sort": ["_doc"], "size": size}
    if sliced is not None:
        body["slice"] = sliced
    request = parse_search_request(body, {}, scroll="1m", indices="d")
    services = node.search_services
    targets = phases.resolve_targets(services, request)
    try:
        cursor, total, named, reached, ids = None, None, [], [], []
        while True:
            task = ScrollTask(targets, request, 0.0, False, 1, "s", cursor, total, cursor is None, False)
            body, cursor, total, ahead = execution.run(services, task)
            hits = body["hits"]["hits"]
            if not hits:
                break
            ids += [hit["_id"] for hit in hits]
            reached.append(cursor)
            named.append(ahead)
    finally:
        release_targets(targets)
    assert len(ids) == len(set(ids)) == total
    assert total < 240 if sliced else total == 240
    full = [
        end for end, count in zip(reached, range(len(reached)), strict=True) if (count + 1) * size <= total
    ]
    for k, ahead in enumerate(named):
        expected = full[k + 1 : k + 1 + RECORDED_AHEAD] if (k + 1) * size <= total else []
        assert ahead == expected


def test_a_batch_its_record_names_already_finds_no_ends_ahead(node: Any) -> None:
    """The ends ahead go into a new record: a batch the scroll's record names (`named`, as a
    worker serving it on a kept connection, or the server process, says) needs none."""
    request = parse_search_request({"sort": ["_doc"], "size": 3}, {}, scroll="1m", indices="d")
    services = node.search_services
    targets = phases.resolve_targets(services, request)
    try:
        opening = ScrollTask(targets, request, 0.0, False, 1, "s", None, None, True, False)
        _, cursor, total, ahead = execution.run(services, opening)
        assert len(ahead) == RECORDED_AHEAD
        for named, expected in ((0, ahead[1 : 1 + RECORDED_AHEAD]), (1, []), (5, [])):
            task = ScrollTask(targets, request, 0.0, False, 1, "s", cursor, total, False, False, named=named)
            body, after, _, found = execution.run(services, task)
            assert after == ahead[0] and len(body["hits"]["hits"]) == 3
            assert found[: len(expected)] == expected and (named == 0) == bool(found)
    finally:
        release_targets(targets)


@pytest.mark.parametrize("named", [1, 2, 30])
def test_a_batch_asked_to_extend_finds_the_ends_after_those_named(node: Any, named: int) -> None:
    """A kept scroll's batch with `extend` (search/workers/parking.py asks the server to extend
    the record with them) finds the ends of the next batches after the `named` ones from it on:
    where the opening's own ends ahead go on, up to `RECORDED_AHEAD` of them."""
    request = parse_search_request({"sort": ["_doc"], "size": 1}, {}, scroll="1m", indices="d")
    services = node.search_services
    targets = phases.resolve_targets(services, request)
    try:
        task = ScrollTask(targets, request, 0.0, False, 1, "s", None, None, True, False)
        body, cursor, total, ahead = execution.run(services, task)  # batch 1: ends of 2..65
        assert total == 240 and len(ahead) == RECORDED_AHEAD
        batch = ScrollTask(targets, request, 0.0, False, 1, "s", cursor, total, False, False, named=64)
        _, _, _, beyond = execution.run(services, batch)  # batch 2 and the 63 after it named
        assert beyond == []
        beyond = execution.run(services, dataclasses.replace(batch, extend=True))[3]
        assert len(beyond) == RECORDED_AHEAD  # (the ends of 66..129)
        cursor = ahead[-named - 1]  # the batch after it, and those up to 65, are named
        later = ScrollTask(targets, request, 0.0, False, 1, "s", cursor, total, False, False, named=named)
        found = execution.run(services, dataclasses.replace(later, extend=True))[3]
        assert found == beyond  # (the next `RECORDED_AHEAD`, wherever the batch is among those named)
    finally:
        release_targets(targets)
