"""Bulk requests split and parsed in the search workers (leafsearch/write/bulk_offload.py).

A request that arrives while another holds the node's indexing slot has its body split, and its
documents parsed, in a worker; the server process applies them. Whatever the path, a client
must get the same items, errors and mappings, and the index the same documents, as from a node
that parses everything itself (`search_workers=0`). Here every bulk of the worker node is sent
while the test holds the slot, and the pool's job counter shows that a worker did the work.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import orjson
import pytest
from inprocess import search

from leafsearch.errors import ElasticError
from leafsearch.indices import admin
from leafsearch.node.node import Node
from leafsearch.search.workers import pool as pool_module
from leafsearch.search.workers.pool import WorkerPool
from leafsearch.services.idle_cpu import IdleCpu
from tests.concurrency import wait_for

MAPPING = {
    "properties": {
        "@timestamp": {"type": "date"},
        "status": {"type": "integer"},
        "service": {"type": "keyword"},
        "message": {"type": "text"},
        "bytes": {"type": "long"},
        "ratio": {"type": "double"},
    }
}


class Slot:
    """The node's indexing slot as a test holds it: `waiting` is set once a bulk request has done
    what it does before the slot (its worker jobs) and asks for it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting = threading.Event()

    def locked(self) -> bool:
        return self.lock.locked()

    def __enter__(self) -> Slot:
        self.waiting.set()
        self.lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def bulk_while_slot_busy(node: Node, body: bytes, between=None, **params: Any) -> dict[str, Any]:
    """`node.bulk(body)` sent while another request holds the indexing slot; `between()` runs
    after the request's worker jobs, before it gets the slot. Raises what the bulk raised."""
    slot = Slot()
    node.write_services.indexing = slot  # type: ignore[assignment]
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["response"] = node.bulk(body, **params)
        except BaseException as exc:  # handed to the test thread
            outcome["error"] = exc
        finally:
            slot.waiting.set()

    with slot.lock:
        thread = threading.Thread(target=run)
        thread.start()
        assert slot.waiting.wait(60)
        if between is not None:
            between()
    thread.join(60)
    assert not thread.is_alive()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["response"]


def jobs(node: Node) -> int:
    assert node.search_workers is not None
    return node.search_workers.stats()["jobs"]


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory, worker_processes: BaseContext
) -> Iterator[tuple[Node, Node]]:
    """(a node that parses everything itself, a node with 2 search workers taking any body)."""
    base = tmp_path_factory.mktemp("offload")
    with (
        Node(base / "here", background=False) as here,
        Node(
            base / "workers", background=False, search_workers=2, worker_processes=worker_processes
        ) as there,
    ):
        assert there.search_workers is not None and there.search_workers.wait_ready(60)
        any_time = {"indices.bulk.worker_parse_min_size": "1b", "indices.bulk.worker_parse_min_idle_cpu": "0"}
        there.cluster_settings.update({"persistent": any_time})
        yield here, there


def ndjson(*items: Any) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


def log_lines(start: int, count: int, index: str | None = None) -> list[Any]:
    lines: list[Any] = []
    for i in range(start, start + count):
        meta = {"_id": str(i)} if index is None else {"_index": index, "_id": str(i)}
        lines.append({"index": meta})
        lines.append(
            {
                "@timestamp": f"2024-01-{1 + i % 28:02d}T10:{i % 60:02d}:00.{i % 1000:03d}Z",
                "status": [200, 404, 500][i % 3],
                "service": f"svc-{i % 7}",
                "message": f"request {i} took word{i % 11} and word{i % 5} ms",
                "bytes": i * 37,
                "ratio": i / 8,
            }
        )
    return lines


def comparable(response: dict[str, Any]) -> dict[str, Any]:
    """A bulk response without what differs between two nodes: `took`, generated ids."""
    items = []
    for item in response["items"]:
        ((kind, result),) = item.items()
        result = dict(result)
        if "_id" in result and len(str(result["_id"])) == 20:  # generated: on either shard
            result["_id"] = "<generated>"
            result.pop("_seq_no", None)
        if "error" in result:
            result["error"] = {k: v for k, v in result["error"].items() if k != "index_uuid"}
        items.append({kind: result})
    return {"errors": response["errors"], "items": items}


def contents(node: Node, index: str) -> tuple[Any, list[Any]]:
    """(mapping, every document with its version and seq_no) of an index."""
    node.indices[index].refresh()
    mapping = node.indices[index].mapping.to_body()
    hits = search(node, index, {"size": 1000, "sort": ["_doc"], "seq_no_primary_term": True, "version": True})
    docs = sorted(
        (
            h["_id"] if len(h["_id"]) != 20 else "<generated>",
            h["_version"],
            h["_seq_no"] if len(h["_id"]) != 20 else -1,
            orjson.dumps(h["_source"].parsed()),
        )
        for h in hits["hits"]["hits"]
    )
    return mapping, docs


def test_bulks_parsed_in_workers_answer_and_store_what_the_server_process_would(
    nodes: tuple[Node, Node],
) -> None:
    here, there = nodes
    for node in nodes:
        admin.create_index(node, "logs", {"mappings": MAPPING, "settings": {"number_of_shards": 2}})
        admin.create_index(
            node, "other", {"mappings": MAPPING, "aliases": {"writes": {"is_write_index": True}}}
        )
    bodies = [
        ndjson(*log_lines(0, 300)),  # plain: parsed as one batch in a worker
        ndjson(
            *log_lines(300, 100), {"index": {"_id": "new"}}, {"status": 1, "brand_new": "field"}
        ),  # a new field
        ndjson(*log_lines(400, 50), {"index": {"_id": "bad"}}, {"status": "not a number"}),  # a refused value
        ndjson(*log_lines(450, 50), {"index": {"_id": "arr"}}, {"service": ["a", "b"], "status": None}),
        ndjson(
            *log_lines(500, 40),
            {"create": {"_id": "0"}},  # exists: a version conflict
            {"status": 1},
            {"delete": {"_id": "1"}},
            {"update": {"_id": "2"}},
            {"doc": {"status": 201}},
            {"index": {"_id": "x", "if_seq_no": 99, "if_primary_term": 1}},  # a seq_no conflict
            {"status": 3},
            {"index": {"_index": "other"}},  # a generated id (one shard: its seq_no is known)
            {"status": 2},
        ),
        ndjson(
            *log_lines(600, 80, index="writes"), *log_lines(700, 80, index="created-here")
        ),  # alias, auto-create
        ndjson(*log_lines(0, 60)),  # overwrites: version 2
        ndjson({"index": {"_id": "deep"}}, {"a": {"b": {"c": {"d": 1}}}}, *log_lines(800, 70)),
    ]
    before = jobs(there)
    for body in bodies:
        expected = here.bulk(body, index="logs")
        got = bulk_while_slot_busy(there, body, index="logs")
        assert comparable(got) == comparable(expected)
    # An index's documents parsed in a worker for each body, and the body with other than simple
    # index/create lines (updates, deletes, conditions) split there: the others split here.
    assert jobs(there) - before >= len(bodies) + 1
    for name in ("logs", "other", "created-here"):
        assert contents(there, name) == contents(here, name), name


def test_a_worker_batch_is_applied_without_parsing_in_the_server_process(
    nodes: tuple[Node, Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, there = nodes
    admin.create_index(there, "plain", {"mappings": MAPPING})
    index = there.indices["plain"]

    def refuse(sources: list[bytes]) -> None:
        raise AssertionError("the server process parsed a batch a worker had parsed")

    monkeypatch.setattr(index, "parse_batch", refuse)
    response = bulk_while_slot_busy(there, ndjson(*log_lines(0, 500)), index="plain")
    assert not response["errors"] and len(response["items"]) == 500
    assert contents(there, "plain")[1][0][:3] == ("0", 1, 0)
    hits = search(
        there, "plain", {"query": {"match": {"message": "word3"}}, "size": 0, "track_total_hits": True}
    )
    assert hits["hits"]["total"]["value"] == len([i for i in range(500) if i % 11 == 3 or i % 5 == 3])


def test_a_mapping_changed_after_the_worker_parsed_makes_the_server_process_parse(
    nodes: tuple[Node, Node],
) -> None:
    """The worker parsed against the mapping before `service.raw` existed: its batch is not used."""
    _, there = nodes
    admin.create_index(there, "moving", {"mappings": MAPPING})

    def add_subfield() -> None:
        body = {"properties": {"service": {"type": "keyword", "fields": {"raw": {"type": "keyword"}}}}}
        admin.put_mapping(there, "moving", body, _options())

    response = bulk_while_slot_busy(there, ndjson(*log_lines(0, 200)), between=add_subfield, index="moving")
    assert not response["errors"]
    there.indices["moving"].refresh()
    found = search(
        there, "moving", {"query": {"term": {"service.raw": "svc-3"}}, "size": 0, "track_total_hits": True}
    )
    assert found["hits"]["total"]["value"] == len([i for i in range(200) if i % 7 == 3])


def _options() -> Any:
    from leafsearch.request.search_request import parse_indices_options

    return parse_indices_options({}, None)


MALFORMED = [
    b'{"index":{"_id":"1"}}\n{"status":1}\n{"index":{"_id":"2"}\n{"status":2}\n',  # bad JSON action
    b'{"index":{"_id":"1"}}\n{"status":1}\n{"upsert":{"_id":"2"}}\n{"status":2}\n',  # unknown action
    b'{"index":{"_id":"1"}}\n{"status":1}\n{"index":{"_id":"2"}}\n{"status":2}',  # no final newline
    b'{"index":{"_id":"1"},"delete":{"_id":"2"}}\n{"status":1}\n',  # two actions in one line
    b'{"index":{"_id":"1","colour":"red"}}\n{"status":1}\n',  # an unknown parameter
    b'{"index":{"_id":"1"}}\n{"status":1}\n{"index":{"_id":"2"}}\n',  # a missing source line
    b'{"index":{"_id":"1","routing":{}}}\n{"status":1}\n',  # routing as an object
    b'{"update":{}}\n{"doc":{"status":1}}\n',  # an update without id
    b'{"delete":{"_id":"1","version":2,"version_type":"sideways"}}\n',  # a bad version type
    b'[]\n{"status":1}\n',  # an action that is no object
    b'{"index":"1"}\n{"status":1}\n',
    b"{}\n",
]


@pytest.mark.parametrize("body", MALFORMED)
def test_malformed_bodies_fail_in_a_worker_with_the_errors_of_the_server_process(
    nodes: tuple[Node, Node], body: bytes
) -> None:
    here, there = nodes
    padded = ndjson(*log_lines(0, 20)) + body  # the fault after a few good operations
    with pytest.raises(ElasticError) as expected:
        here.bulk(padded, index="refused")
    before = jobs(there)
    with pytest.raises(ElasticError) as got:
        bulk_while_slot_busy(there, padded, index="refused")
    assert jobs(there) == before + 1  # the worker split it, and refused it
    assert (got.value.status, got.value.error_type, got.value.reason) == (
        expected.value.status,
        expected.value.error_type,
        expected.value.reason,
    )
    assert got.value.body() == expected.value.body()
    assert "refused" not in there.indices  # nothing was created or written


def test_a_worker_killed_during_a_bulk_leaves_the_work_to_the_server_process(
    nodes: tuple[Node, Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker dies with the job sent: the server process splits and parses the body itself,
    every item is acknowledged and indexed, and the worker is replaced."""
    _, there = nodes
    pool = there.search_workers
    assert isinstance(pool, WorkerPool)
    admin.create_index(there, "survivor", {"mappings": MAPPING})
    submit = pool_module._Worker.submit_job
    killed: list[int] = []

    def submit_then_die(worker: Any, call_id: int, job: Any, indices: list[Any]) -> Any:
        call = submit(worker, call_id, job, indices)
        os.kill(worker.pid, signal.SIGKILL)
        killed.append(worker.pid)
        return call

    lost = pool.lost
    monkeypatch.setattr(pool_module._Worker, "submit_job", submit_then_die)
    response = bulk_while_slot_busy(there, ndjson(*log_lines(0, 400)), index="survivor")
    monkeypatch.undo()
    assert killed and not response["errors"]
    assert [item["index"]["_id"] for item in response["items"]] == [str(i) for i in range(400)]
    assert len(contents(there, "survivor")[1]) == 400
    wait_for(lambda: pool.lost >= lost + 1)  # (its reader thread sees the death, maybe after the answer)
    assert pool.wait_ready(60)
    before = jobs(there)
    again = bulk_while_slot_busy(there, ndjson(*log_lines(400, 100)), index="survivor")
    assert not again["errors"] and jobs(there) > before  # the replacement takes jobs


class FakeIdle:
    def __init__(self, cores: float | None) -> None:
        self.cores = cores

    def idle_cores(self) -> float | None:
        return self.cores


def test_bulks_stay_in_the_server_process_while_the_cores_are_busy(
    nodes: tuple[Node, Node], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With less idle CPU than `indices.bulk.worker_parse_min_idle_cpu` the moved work would only
    take CPU from other processes: the server process parses; with enough, or unknown, a worker."""
    _, there = nodes
    admin.create_index(there, "busy", {"mappings": MAPPING})
    there.cluster_settings.update({"persistent": {"indices.bulk.worker_parse_min_idle_cpu": "50"}})
    try:
        for cores, offloaded in ((0.2, False), (0.6, True), (None, True)):
            monkeypatch.setattr(there.write_services, "idle_cpu", FakeIdle(cores))
            before = jobs(there)
            response = bulk_while_slot_busy(there, ndjson(*log_lines(0, 100)), index="busy")
            assert not response["errors"]
            assert (jobs(there) > before) == offloaded, cores
    finally:
        there.cluster_settings.update({"persistent": {"indices.bulk.worker_parse_min_idle_cpu": "0"}})


def test_idle_cpu_is_the_idle_share_of_proc_stat_between_two_reads(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    now = [0.0]

    def write(idle: int, iowait: int, busy: int) -> None:
        stat.write_text(
            f"cpu  {busy} 0 0 {idle} {iowait} 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\ncpu1 1 0 0 1 0 0 0 0 0 0\n"
        )

    write(1000, 0, 1000)
    idle = IdleCpu(stat, clock=lambda: now[0])
    assert idle.idle_cores() is None  # no window yet
    write(1150, 50, 1200)  # 200 of 400 jiffies idle (iowait included), 2 cpus
    now[0] = 0.1
    assert idle.idle_cores() is None  # read again only after WINDOW_SECONDS
    now[0] = 1.0
    assert idle.idle_cores() == pytest.approx(1.0)
    write(1150, 50, 1600)  # none idle
    now[0] = 2.0
    assert idle.idle_cores() == 0.0
    assert IdleCpu(tmp_path / "missing", clock=lambda: now[0]).idle_cores() is None


def test_segments_written_by_a_worker_under_concurrent_bulks_hold_what_the_server_would(
    tmp_path: Path, worker_processes: BaseContext
) -> None:
    """Four bulk clients at once, refreshes and merges beside them, every buffer written as a
    segment by a search worker (index/buffer_wire.py): the index answers searches on every field
    as an index whose segments the server process wrote, and holds it all after a restart."""
    bodies = [ndjson(*log_lines(k * 500, 500)) for k in range(16)]
    queries = [
        {"match": {"message": "word3"}},
        {"term": {"service": "svc-4"}},
        {"range": {"bytes": {"gte": 37 * 4000}}},
        {"range": {"ratio": {"lt": 100.5}}},
        {"range": {"@timestamp": {"gte": "2024-01-20"}}},
    ]

    def load(node: Node, workers: bool) -> list[Any]:
        admin.create_index(node, "logs", {"mappings": MAPPING, "settings": {"number_of_shards": 2}})
        if workers:
            node.cluster_settings.update({"persistent": {"indices.segments.worker_build_min_docs": "100"}})
        failures: list[BaseException] = []
        stop = threading.Event()

        def client(part: list[bytes]) -> None:
            try:
                for body in part:
                    assert not node.bulk(body, index="logs")["errors"]
            except BaseException as exc:  # handed to the test thread
                failures.append(exc)

        def housekeeping() -> None:
            while not stop.is_set():
                node.indices["logs"].refresh()
                for shard in node.indices["logs"].shards:
                    shard.maybe_merge()

        clients = [threading.Thread(target=client, args=(bodies[k::4],)) for k in range(4)]
        beside = threading.Thread(target=housekeeping)
        beside.start()
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(120)
        stop.set()
        beside.join(120)
        assert not failures, failures[0]
        node.indices["logs"].refresh()
        return [search(node, "logs", {"query": q, "size": 0})["hits"]["total"]["value"] for q in queries]

    with Node(tmp_path / "here", background=False) as here:
        expected = load(here, workers=False)
    with Node(
        tmp_path / "workers", background=False, search_workers=1, worker_processes=worker_processes
    ) as there:
        assert there.search_workers is not None and there.search_workers.wait_ready(60)
        builder, built = there.shard_services.builder, []
        assert builder is not None

        def counted(job: Any) -> Any:
            answer = builder(job)
            built.append(job.folder)
            return answer

        there.shard_services.builder = counted
        assert load(there, workers=True) == expected
        assert len(built) >= 2  # segments written by the worker
        assert contents(there, "logs")[1][:5]  # documents readable with their sources
    with Node(tmp_path / "workers", background=False) as reopened:
        reopened.indices["logs"].refresh()
        totals = [
            search(reopened, "logs", {"query": q, "size": 0})["hits"]["total"]["value"] for q in queries
        ]
        assert totals == expected
        assert search(reopened, "logs", {"size": 0})["hits"]["total"]["value"] == 8000
