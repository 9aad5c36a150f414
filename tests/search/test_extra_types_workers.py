"""`rank_feature` queries, suggestions and percolations answered in search worker processes
answer what the server process computes."""

from __future__ import annotations

from multiprocessing.context import BaseContext
from pathlib import Path

import orjson
import pytest

from leafsearch.indices import admin
from leafsearch.node.node import Node
from leafsearch.search.workers.pool import LONE_REQUESTS_IN_SERVER
from tests.inprocess import search

MAPPING = {
    "properties": {
        "rank": {"type": "rank_feature"},
        "s": {"type": "completion"},
        "query": {"type": "percolator"},
        "msg": {"type": "text"},
    }
}
BODIES = [
    {"query": {"rank_feature": {"field": "rank"}}},
    {"suggest": {"s": {"prefix": "item1", "completion": {"field": "s"}}}},
    {
        "query": {"percolate": {"field": "query", "documents": [{"msg": "w1"}, {"msg": "w2 w1"}]}},
        "highlight": {"fields": {"msg": {}}},
    },
]


@pytest.mark.parametrize("body", BODIES)
def test_workers_answer_what_the_server_process_computes(
    tmp_path: Path, body: dict, worker_processes: BaseContext
) -> None:
    with Node(tmp_path / "node", search_workers=1, worker_processes=worker_processes) as node:
        node.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "false"}})
        admin.create_index(node, "t", {"settings": {"number_of_shards": 2}, "mappings": MAPPING})
        lines = [
            orjson.dumps(x)
            for i in range(20)
            for x in (
                {"index": {"_id": str(i)}},
                {
                    "rank": i + 1,
                    "s": {"input": f"item{i}", "weight": i},
                    "query": {"match": {"msg": f"w{i % 3}"}},
                },
            )
        ]
        node.bulk(b"\n".join(lines) + b"\n", index="t", refresh="true")
        assert node.search_workers is not None and node.search_workers.wait_ready(60)
        via_workers = search(node, "t", body)
        pool, node.search_services.workers = node.search_services.workers, None
        try:
            here = search(node, "t", body)
        finally:
            node.search_services.workers = pool
        via_workers.pop("took")
        here.pop("took")
        assert via_workers == here
        assert via_workers["hits"]["total"]["value"] > 0
        # The worker opened both shards' segments (a snapshot it was sent can be released since:
        # a merge beside replaces a shard's searcher).
        assert sum(w["segments_opened"] for w in node.search_workers.stats()["workers"]) >= 2
