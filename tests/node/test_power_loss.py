"""Every acknowledged write survives a power loss, not only `kill -9`.

After `kill -9` the page cache still holds every byte written, so those tests (test_durability.py)
pass even if an fsync is missing. Here the node runs in this process over a `PowerLossDisk`
(tests/power_loss.py), which keeps what each fsync of a file or folder made durable; a power loss
then leaves the data folder as fsync(2) promises it (unsynced bytes, creations, renames and
removals gone), and a new node opened on that folder must hold every write acknowledged before.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from power_loss import PowerLossDisk

import leafsearch
import leafsearch.index.shard as shard_module
from leafsearch.client import Client
from leafsearch.index import merge_worker

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the simulated disk reads /proc/self/fd")

MAPPINGS = {"properties": {"n": {"type": "long"}, "tag": {"type": "keyword"}}}
NO_REFRESH = {"number_of_shards": 2, "refresh_interval": "-1"}


def merge_here(
    parts: list[tuple[Path, Any]], folder: Path, index_sort: Any = None, codec: str = "zstd"
) -> Any:
    """The merge worker's work, done in this process, where the simulated disk sees its fsyncs."""
    return merge_worker._merge_folders([(str(p), live) for p, live in parts], str(folder), index_sort, codec)


class Acknowledged:
    """The writes a client had answered, applied to a model of each index's documents."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.docs: dict[str, dict[str, dict[str, Any]]] = {}  # index -> id -> source
        self.ids: dict[str, set[str]] = {}  # index -> every id written, deleted ones too

    def create(self, index: str) -> None:
        self.client.indices.create(index=index, settings=NO_REFRESH, mappings=MAPPINGS)
        self.docs[index], self.ids[index] = {}, set()

    def index(self, index: str, docs: dict[str, dict[str, Any]], **params: Any) -> None:
        operations = [line for i, doc in docs.items() for line in ({"index": {"_id": i}}, doc)]
        assert not self.client.bulk(operations=operations, index=index, **params)["errors"]
        self.docs[index].update(docs)
        self.ids[index].update(docs)

    def update(self, index: str, doc_id: str, changes: dict[str, Any]) -> None:
        assert self.client.update(index=index, id=doc_id, doc=changes)["result"] == "updated"
        self.docs[index][doc_id] = {**self.docs[index][doc_id], **changes}

    def delete(self, index: str, doc_id: str) -> None:
        assert self.client.delete(index=index, id=doc_id)["result"] == "deleted"
        del self.docs[index][doc_id]


def writes_of_every_kind(node: leafsearch.Node, acked: Acknowledged) -> None:
    """Unrefreshed writes on top of committed segments, buffers the flush thread wrote and
    committed, a refresh, a merge (which rolls the translog and drops what its commit covers),
    more writes after it, and an index created last."""
    acked.create("docs")
    for start in range(0, 300, 100):  # past the buffer limit: buffers handed over and committed
        acked.index("docs", {f"d{i}": {"n": i, "tag": "first"} for i in range(start, start + 100)})
    for i in range(0, 60, 3):
        acked.update("docs", f"d{i}", {"tag": "updated"})
    for i in range(1, 60, 3):
        acked.delete("docs", f"d{i}")
    for r in range(12):  # small refreshed segments, for the merge policy
        acked.index("docs", {f"s{r}-{j}": {"n": j, "tag": "small"} for j in range(4)}, refresh="true")
    merged = False
    for shard in node.indices["docs"].shards:
        while shard.maybe_merge():
            merged = True
    assert merged, "the merge policy did not merge"
    for i in range(300, 340):
        acked.index("docs", {f"d{i}": {"n": i, "tag": "after the merge"}})
    acked.update("docs", "d2", {"tag": "again"})
    acked.delete("docs", "s0-0")
    acked.create("late")
    acked.index("late", {"only": {"n": 1, "tag": "late"}})


def test_every_acknowledged_write_survives_a_power_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, after = tmp_path / "data", tmp_path / "after-power-loss"
    data.mkdir()
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 64)
    disk = PowerLossDisk(data)
    with disk.installed(monkeypatch), leafsearch.Node(data, background=False) as node:
        monkeypatch.setattr(node.shard_services.merges, "merge", merge_here)
        acked = Acknowledged(Client(node=node))
        writes_of_every_kind(node, acked)
        disk.power_loss(after)
        node_id = node.node_id

    with Client(after, background=False) as client:
        assert client.node.node_id == node_id
        for index, docs in acked.docs.items():
            assert client.indices.exists(index=index)
            found = client.mget(index=index, ids=sorted(acked.ids[index]))["docs"]
            assert {d["_id"]: d["_source"] for d in found if d["found"]} == docs
            client.indices.refresh(index=index)
            assert client.count(index=index)["count"] == len(docs)
            assert client.indices.get_mapping(index=index)[index]["mappings"] == MAPPINGS
        # The recovered node takes writes after what it replayed.
        assert client.index(index="docs", id="d2", document={"n": 0}, refresh="true")["result"] == "updated"
