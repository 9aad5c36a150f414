"""Points in time and scrolls that survive a restart, and scroll batches that can be asked again.

Each test runs its own server on its own data folder, with a writer updating, deleting and adding
documents (and refreshing) beside the walks. A walk is interrupted by `kill -9` at random pages,
the server restarted on the same folder, and the walk finished with the same ids: every document
of the snapshot exactly once, with its `_source` as it was when the context opened. Seeds are
printed on failure (the assertion message).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from elasticsearch import Elasticsearch, NotFoundError, helpers

from leafsearch.testing import Server
from tests import web
from tests.server_zygote import SERVER_ZYGOTE

N = 600
PAGE = 25
SLICES = 4
SETTINGS = {"number_of_shards": 3, "number_of_replicas": 0, "refresh_interval": "50ms"}
MAPPING = {"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}, "v": {"type": "long"}}}


def source(i: int, v: int = 0) -> dict[str, Any]:
    return {"n": i, "k": f"k{i % 5}", "v": v, "text": f"document {i} version {v}"}


def fill(es: Elasticsearch, index: str) -> dict[str, dict[str, Any]]:
    """N documents; their sources by id (the ground truth of a context opened now)."""
    truth = {str(i): source(i) for i in range(N)}
    helpers.bulk(es, ({"_index": index, "_id": i, "_source": s} for i, s in truth.items()), refresh=True)
    return truth


class Writer:
    """Updates, deletes and new documents with refreshes, until stopped; survives the server's
    death (its requests then fail) and goes on against a new URL."""

    def __init__(self, index: str, seed: int) -> None:
        self.index, self.rng = index, random.Random(seed)
        self.url = ""
        self.stop_event = threading.Event()
        self.ops = 0
        self.thread: threading.Thread | None = None

    def start(self, url: str) -> None:
        self.url = url
        self.stop_event.clear()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=60)
            assert not self.thread.is_alive()

    def _run(self) -> None:
        with web.Client(base_url=self.url, timeout=30) as http:
            version = 1
            while not self.stop_event.is_set():
                lines = []
                for _ in range(20):
                    i = self.rng.randrange(N + 200)
                    if self.rng.random() < 0.2:
                        lines.append({"delete": {"_index": self.index, "_id": str(i)}})
                    else:
                        lines += [{"index": {"_index": self.index, "_id": str(i)}}, source(i, version)]
                body = b"".join(httpx.Request("POST", "/", json=line).content + b"\n" for line in lines)
                try:
                    http.post(
                        "/_bulk",
                        content=body,
                        params={"refresh": "true"},
                        headers={"content-type": "application/x-ndjson"},
                    )
                except httpx.TransportError:
                    return  # the server was killed
                self.ops += 1
                version += 1


@contextmanager
def server(data: Path) -> Iterator[Server]:
    with Server(data, args=["--search-workers", "0"], popen=SERVER_ZYGOTE.popen) as running:
        yield running


def kill_9(running: Server) -> None:
    assert running.process is not None
    running.process.kill()
    running.process.wait()


def pit_page(es: Elasticsearch, pit_id: str, after: list | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"search_after": after} if after is not None else {}
    return es.search(pit={"id": pit_id, "keep_alive": "5m"}, size=PAGE, sort=["_shard_doc"], **kwargs).body


@pytest.mark.parametrize("trial", range(3))
def test_pit_walk_and_sliced_scroll_survive_kill_9(tmp_path: Path, trial: int) -> None:
    seed = 1000 + trial
    rng = random.Random(seed)
    data = tmp_path / "data"
    writer = Writer("docs", seed)
    rounds = N // SLICES // PAGE + 2  # the walks take turns, a page each per round
    kills = sorted(rng.sample(range(1, rounds), 2))  # after which rounds the server dies
    pit_hits: list[dict[str, Any]] = []
    slice_hits: list[list[dict[str, Any]]] = [[] for _ in range(SLICES)]
    servers = [Server(data, args=["--search-workers", "0"], popen=SERVER_ZYGOTE.popen).start()]
    try:
        es = servers[-1].client()
        es.indices.create(index="docs", settings=SETTINGS, mappings=MAPPING)
        truth = fill(es, "docs")
        pit_id = es.open_point_in_time(index="docs", keep_alive="5m").body["id"]
        scroll_ids = []
        for i in range(SLICES):
            first = es.search(
                index="docs", scroll="5m", size=PAGE, slice={"id": i, "max": SLICES}, sort=["_doc"]
            ).body
            slice_hits[i] += first["hits"]["hits"]
            scroll_ids.append(first["_scroll_id"])
        writer.start(servers[-1].url)
        after: list | None = None
        pit_done = False
        done = [False] * SLICES
        turn = 0
        while not (pit_done and all(done)):
            # A PIT page, then a batch of each slice not yet exhausted.
            if not pit_done:
                result = pit_page(es, pit_id, after)
                pit_id = result["pit_id"]
                pit_hits += result["hits"]["hits"]
                pit_done = len(result["hits"]["hits"]) < PAGE
                after = result["hits"]["hits"][-1]["sort"] if result["hits"]["hits"] else after
            for i in range(SLICES):
                if not done[i]:
                    batch = es.scroll(scroll_id=scroll_ids[i], scroll="5m").body
                    slice_hits[i] += batch["hits"]["hits"]
                    scroll_ids[i] = batch["_scroll_id"]
                    done[i] = not batch["hits"]["hits"]
            turn += 1
            if kills and turn >= kills[0]:
                kills.pop(0)
                writer.stop()
                kill_9(servers[-1])
                servers.append(
                    Server(data, args=["--search-workers", "0"], popen=SERVER_ZYGOTE.popen).start()
                )
                es = servers[-1].client()
                writer.start(servers[-1].url)
        writer.stop()
        assert not kills and writer.ops > 0, f"seed {seed}"
        for walk in [pit_hits, *slice_hits]:
            ids = [hit["_id"] for hit in walk]
            assert len(ids) == len(set(ids)), f"seed {seed}: a document came twice"
        assert sorted(h["_id"] for h in pit_hits) == sorted(truth), f"seed {seed}: the PIT walk missed some"
        sliced = [hit for hits in slice_hits for hit in hits]
        assert sorted(h["_id"] for h in sliced) == sorted(truth), f"seed {seed}: the slices missed some"
        for hit in pit_hits + sliced:
            assert hit["_source"] == truth[hit["_id"]], f"seed {seed}: a source changed"
        assert es.close_point_in_time(id=pit_id).body["num_freed"] == 1
        assert es.clear_scroll(scroll_id=scroll_ids).body["num_freed"] == SLICES
    finally:
        writer.stop()
        for running in servers:
            running.stop()


def test_every_scroll_batch_asked_twice_is_the_same_bytes_and_each_document_comes_once(
    tmp_path: Path,
) -> None:
    seed = 7
    rng = random.Random(seed)
    writer = Writer("docs", seed)
    with server(tmp_path / "data") as running, web.Client(base_url=running.url, timeout=60) as http:
        es = running.client()
        es.indices.create(index="docs", settings=SETTINGS, mappings=MAPPING)
        truth = fill(es, "docs")
        opened = http.post("/docs/_search", params={"scroll": "1m"}, json={"size": PAGE, "sort": ["n"]})
        assert opened.status_code == 200
        writer.start(running.url)
        ids = [hit["_id"] for hit in opened.json()["hits"]["hits"]]
        scroll_id = opened.json()["_scroll_id"]
        first_id, older = scroll_id, None
        while True:
            answers = [http.post("/_search/scroll", json={"scroll_id": scroll_id, "scroll": "1m"})]
            for _ in range(rng.choice((1, 1, 2))):  # asked again: the response was "lost"
                answers.append(http.post("/_search/scroll", json={"scroll_id": scroll_id, "scroll": "1m"}))
            assert {a.status_code for a in answers} == {200}
            assert len({a.content for a in answers}) == 1, f"seed {seed}: a replayed batch differs"
            batch = answers[0].json()
            if older is not None:  # the newer id was used: the batch before it is let go
                gone = http.post("/_search/scroll", json={"scroll_id": older, "scroll": "1m"})
                assert gone.status_code == 404
                assert "moved past this batch" in gone.json()["error"]["root_cause"][0]["reason"]
            older, scroll_id = scroll_id, batch["_scroll_id"]
            if not batch["hits"]["hits"]:
                break
            ids += [hit["_id"] for hit in batch["hits"]["hits"]]
            for hit in batch["hits"]["hits"]:
                assert hit["_source"] == truth[hit["_id"]]
        writer.stop()
        assert ids == sorted(truth, key=int), f"seed {seed}"
        # Any id of the scroll clears it.
        cleared = http.request("DELETE", "/_search/scroll", json={"scroll_id": first_id})
        assert cleared.json() == {"succeeded": True, "num_freed": 1}
        assert http.post("/_search/scroll", json={"scroll_id": scroll_id, "scroll": "1m"}).status_code == 404


def test_helpers_scan_across_a_restart_and_a_replay_after_one(tmp_path: Path) -> None:
    """`helpers.scan` sees nothing new; the last batch asked again after a clean restart is the
    same bytes, and the scroll goes on where it was."""
    data = tmp_path / "data"
    with server(data) as running:
        es = running.client()
        es.indices.create(index="docs", settings=SETTINGS, mappings=MAPPING)
        truth = fill(es, "docs")
        scanned = list(helpers.scan(es, index="docs", size=50, scroll="1m"))
        assert sorted(h["_id"] for h in scanned) == sorted(truth)
        with web.Client(base_url=running.url, timeout=60) as http:
            first = http.post(
                "/docs/_search", params={"scroll": "1m"}, json={"size": 100, "sort": ["n"]}
            ).json()
            asked = {"scroll_id": first["_scroll_id"], "scroll": "1m"}
            second = http.post("/_search/scroll", json=asked)
    with server(data) as running, web.Client(base_url=running.url, timeout=60) as http:
        again = http.post("/_search/scroll", json=asked)
        assert again.content == second.content
        third = http.post("/_search/scroll", json={"scroll_id": second.json()["_scroll_id"], "scroll": "1m"})
        assert [h["_source"]["n"] for h in third.json()["hits"]["hits"]] == list(range(200, 300))


def context_disk(es: Elasticsearch) -> int:
    stats = es.nodes.stats(metric="indices", index_metric="store").body["nodes"]
    return next(iter(stats.values()))["indices"]["store"]["contexts_size_in_bytes"]


def merged_away(es: Elasticsearch, http: httpx.Client) -> bool:
    """No deleted document is left in the index's segments and no merge is running (the
    refresh shows searches the merges installed so far)."""
    http.post("/docs/_refresh").raise_for_status()
    totals = es.indices.stats(index="docs", metric="docs,merge").body["_all"]["primaries"]
    return totals["docs"]["deleted"] == 0 and totals["merges"]["current"] == 0


def test_a_pit_keeps_its_files_through_merges_and_a_restart_until_closed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with server(data) as running:
        es = running.client()
        es.indices.create(index="docs", settings={**SETTINGS, "refresh_interval": "-1"}, mappings=MAPPING)
        truth = fill(es, "docs")
        pit_id = es.open_point_in_time(index="docs", keep_alive="5m").body["id"]
        pins_only = context_disk(es)
        assert pins_only > 0  # the pin files
        helpers.bulk(
            es, ({"_index": "docs", "_id": str(i), "_source": source(i, 9)} for i in range(N)), refresh=True
        )
        # Every document of the first segments is deleted now: the background merges drop them
        # from the index on every shard (each merge committed once it is no longer current),
        # and only the PIT keeps their files.
        with web.Client(base_url=running.url, timeout=60) as http:
            waited = 0
            while not merged_away(es, http):
                assert waited < 600, "the fully deleted segments were never merged away"
                http.get("/_cluster/health", params={"wait_for_events": "languid", "timeout": "100ms"})
                waited += 1
            assert context_disk(es) > pins_only
            # The merged index committed, so that the restart finds the same index beside the PIT.
            http.post("/docs/_flush").raise_for_status()
        held = context_disk(es)
        kill_9(running)
    with server(data) as running:
        es = running.client()
        assert context_disk(es) == held
        hits = pit_page(es, pit_id, None)["hits"]["hits"]
        assert len(hits) == PAGE and [h["_source"] for h in hits] == [truth[h["_id"]] for h in hits]
        assert es.close_point_in_time(id=pit_id).body["num_freed"] == 1
        assert context_disk(es) == 0
        with pytest.raises(NotFoundError) as gone:
            pit_page(es, pit_id, None)
        assert "cleared" in gone.value.body["error"]["root_cause"][0]["reason"]
    for folder in (data / "indices").glob("*/*/pins"):  # no pin is left
        assert not any(folder.iterdir())
