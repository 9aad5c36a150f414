"""Restart safety: what a server acknowledged is still there after `kill -9`, and nothing is torn.

Every test runs its own server process on its own data folder, kills it with SIGKILL (no
shutdown hook runs, nothing is flushed or committed), starts a new process on the same folder
and checks what a client sees.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import orjson
from conftest import REPO, error_of, running_server, server_env
from elasticsearch import Elasticsearch, helpers

from tests import web

NO_REFRESH = {"index": {"refresh_interval": "-1", "number_of_replicas": 0}}


@contextmanager
def client(url: str) -> Iterator[httpx.Client]:
    with web.Client(base_url=url, timeout=60) as http:
        yield http


def kill_9(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()


def body_of(i: int) -> dict[str, Any]:
    return {"n": i, "tag": f"t{i % 7}", "msg": f"document number {i} of the set", "nested": {"v": i * 2}}


def mget_sources(http: httpx.Client, index: str, ids: list[str]) -> dict[str, Any]:
    """Realtime sources of the ids that exist (realtime get reads unrefreshed writes too)."""
    docs = http.post(f"/{index}/_mget", json={"ids": ids}).json()["docs"]
    return {d["_id"]: d["_source"] for d in docs if d["found"]}


def count(http: httpx.Client, index: str, query: dict | None = None) -> int:
    body = {"query": query} if query else None
    response = http.post(f"/{index}/_count", json=body) if body else http.get(f"/{index}/_count")
    assert response.status_code == 200, response.text
    return response.json()["count"]


def test_acknowledged_bulk_without_refresh_survives_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = [str(i) for i in range(2000)]
    with running_server(data) as (url, process):
        es = Elasticsearch(url)
        es.indices.create(index="acked", settings=NO_REFRESH)
        actions = ({"_index": "acked", "_id": i, "_source": body_of(int(i))} for i in ids[:1900])
        ok, errors = helpers.bulk(es, actions, chunk_size=500, refresh=False)
        assert (ok, errors) == (1900, [])
        for i in ids[1900:]:
            assert (
                es.index(index="acked", id=i, document=body_of(int(i)), refresh=False)["result"] == "created"
            )
        with client(url) as http:
            # Nothing was refreshed: searches do not see the documents yet, a realtime get does.
            assert count(http, "acked") == 0
        es.close()
        kill_9(process)
    with running_server(data) as (url, _), client(url) as http:
        sources = mget_sources(http, "acked", ids)
        assert sources == {i: body_of(int(i)) for i in ids}
        assert http.post("/acked/_refresh").status_code == 200
        assert count(http, "acked") == 2000
        assert count(http, "acked", {"term": {"tag": "t3"}}) == sum(1 for i in range(2000) if i % 7 == 3)
        assert count(http, "acked", {"match": {"msg": "number"}}) == 2000
        assert count(http, "acked", {"range": {"nested.v": {"gte": 3000}}}) == 500


def test_updates_and_deletes_survive_kill_9_and_a_second_crash(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, process), client(url) as http:
        assert http.put("/ud", json={"settings": NO_REFRESH}).status_code == 200
        lines = b"".join(b'{"index":{"_id":"%d"}}\n%s\n' % (i, orjson.dumps(body_of(i))) for i in range(300))
        assert not http.post("/ud/_bulk?refresh=true", content=lines, headers=NDJSON).json()["errors"]
        # Unrefreshed changes on top of committed segments: partial updates, overwrites, deletes.
        for i in range(0, 50):
            assert (
                http.post(f"/ud/_update/{i}", json={"doc": {"tag": "updated"}}).json()["result"] == "updated"
            )
        for i in range(50, 100):
            assert http.put(f"/ud/_doc/{i}", json={"n": -i}).json()["_version"] == 2
        for i in range(100, 150):
            assert http.delete(f"/ud/_doc/{i}").json()["result"] == "deleted"
        mixed = b'{"delete":{"_id":"150"}}\n{"update":{"_id":"151"}}\n{"doc":{"tag":"bulk"}}\n'
        mixed += b'{"index":{"_id":"new"}}\n{"n":1000}\n'
        assert not http.post("/ud/_bulk", content=mixed, headers=NDJSON).json()["errors"]
        recreated = http.put("/ud/_doc/120", json={"n": 120, "back": True}).json()
        assert (recreated["result"], recreated["_version"]) == ("created", 3)
        last = http.get("/ud/_doc/new").json()
        kill_9(process)
    with running_server(data) as (url, process), client(url) as http:
        expected = {str(i): body_of(i) for i in range(300)}
        for i in range(50):
            expected[str(i)]["tag"] = "updated"
        for i in range(50, 100):
            expected[str(i)] = {"n": -i}
        for i in range(100, 151):
            del expected[str(i)]
        expected["151"]["tag"] = "bulk"
        expected["new"] = {"n": 1000}
        expected["120"] = {"n": 120, "back": True}
        everything = [*map(str, range(300)), "new"]
        assert mget_sources(http, "ud", everything) == expected
        assert http.get("/ud/_doc/7").json()["_version"] == 2
        assert http.get("/ud/_doc/120").json()["_version"] == 3
        assert http.get("/ud/_doc/140").status_code == 404
        http.post("/ud/_refresh")
        assert count(http, "ud") == len(expected)
        assert count(http, "ud", {"term": {"tag": "updated"}}) == 50
        # Sequence numbers continue after recovery; a compare-and-set from before the crash holds.
        cas = http.put(
            "/ud/_doc/new",
            params={"if_seq_no": last["_seq_no"], "if_primary_term": last["_primary_term"]},
            json={"n": 1001},
        )
        assert cas.status_code == 200, cas.text
        assert cas.json()["_seq_no"] > last["_seq_no"]
        assert http.delete("/ud/_doc/0").json()["result"] == "deleted"
        kill_9(process)
    with running_server(data) as (url, _), client(url) as http:
        assert http.get("/ud/_source/new").json() == {"n": 1001}
        assert http.get("/ud/_doc/0").status_code == 404
        http.post("/ud/_refresh")
        assert count(http, "ud") == len(expected) - 1


MAPPING = {
    "properties": {
        "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "when": {"type": "date", "format": "yyyy/MM/dd"},
        "price": {"type": "scaled_float", "scaling_factor": 100},
    }
}


def test_index_created_just_before_kill_9_keeps_its_settings_and_mapping(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, process), client(url) as http:
        settings = {"index": {"number_of_shards": 3, "number_of_replicas": 0, "refresh_interval": "-1"}}
        assert http.put("/mapped", json={"settings": settings, "mappings": MAPPING}).status_code == 200
        assert http.put("/empty", json={"settings": {"number_of_shards": 2}}).status_code == 200
        doc = {
            "title": "Hello",
            "when": "2024/01/31",
            "price": 1.5,
            "extra": 5,
            "obj": {"flag": True, "s": "x"},
        }
        assert http.put("/mapped/_doc/1", json=doc).status_code == 201
        mapping_before = http.get("/mapped/_mapping").json()
        assert set(mapping_before["mapped"]["mappings"]["properties"]) == {
            "title",
            "when",
            "price",
            "extra",
            "obj",
        }
        kill_9(process)
    with running_server(data) as (url, _), client(url) as http:
        assert http.get("/mapped/_mapping").json() == mapping_before
        settings_after = http.get("/mapped/_settings", params={"flat_settings": "true"}).json()
        assert settings_after["mapped"]["settings"]["index.number_of_shards"] == "3"
        assert http.get("/empty").status_code == 200
        assert count(http, "empty") == 0
        assert http.get("/mapped/_source/1").json() == doc
        # The recovered mapping still types and refuses values as before the crash.
        for bad in ({"when": "31.01.2024"}, {"extra": "five"}, {"obj": {"flag": "maybe"}}):
            refused = http.put("/mapped/_doc/2", json=bad)
            assert refused.status_code == 400, (bad, refused.text)
            assert error_of(refused)["type"] == "document_parsing_exception"
        http.post("/mapped/_refresh")
        assert count(http, "mapped", {"range": {"when": {"gte": "2024/01/01"}}}) == 1
        assert count(http, "mapped", {"term": {"title.raw": "Hello"}}) == 1
        assert count(http, "mapped", {"term": {"obj.flag": True}}) == 1


NDJSON = {"content-type": "application/x-ndjson"}
BIG_BULK_DOCS = 50_000


def _translog_bytes(data: Path) -> int:
    """Bytes in the translog files right now; a file rolled away between listing and stat counts 0.

    Only the translog folders are listed: segment folders come and go under a walk of the tree.
    """
    total = 0
    for path in data.glob("indices/*/*/translog/*.tlog"):
        with suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


def test_kill_9_in_the_middle_of_a_large_bulk_keeps_a_prefix_of_whole_documents(tmp_path: Path) -> None:
    data = tmp_path / "data"
    body = b"".join(
        b'{"index":{"_id":"d%06d"}}\n%s\n' % (i, orjson.dumps(body_of(i))) for i in range(BIG_BULK_DOCS)
    )
    outcome: dict[str, Any] = {}
    with running_server(data) as (url, process):
        with client(url) as http:
            assert http.put("/big", json={"settings": NO_REFRESH}).status_code == 200
        start = _translog_bytes(data)

        def send() -> None:
            try:
                outcome["response"] = web.post(f"{url}/big/_bulk", content=body, headers=NDJSON, timeout=120)
            except httpx.TransportError as exc:
                outcome["error"] = exc

        sender = threading.Thread(target=send)
        sender.start()
        deadline = time.monotonic() + 60
        # Kill as soon as the server has logged a good part of the operations, long before the end.
        while _translog_bytes(data) < start + 256 * 1024 and "response" not in outcome:
            assert time.monotonic() < deadline, "the bulk never reached the translog"
            time.sleep(0.001)
        kill_9(process)
        sender.join()
    acknowledged = "response" in outcome and outcome["response"].status_code == 200
    with running_server(data) as (url, _), client(url) as http:
        http.post("/big/_refresh")
        present = count(http, "big")
        assert 0 < present <= BIG_BULK_DOCS
        if acknowledged:
            assert present == BIG_BULK_DOCS
        # A prefix of the bulk order: documents 0..present-1 and none after them.
        assert count(http, "big", {"range": {"n": {"lt": present}}}) == present
        assert http.head(f"/big/_doc/d{present - 1:06d}").status_code == 200
        assert http.head(f"/big/_doc/d{present:06d}").status_code == 404
        # Whole documents: every recovered source is the one sent, and fully indexed.
        seen = 0
        page = http.post(
            "/big/_search", params={"scroll": "1m"}, json={"size": 10_000, "sort": ["_doc"]}
        ).json()
        while page["hits"]["hits"]:
            for hit in page["hits"]["hits"]:
                assert hit["_source"] == body_of(int(hit["_id"][1:])), hit
            seen += len(page["hits"]["hits"])
            page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": page["_scroll_id"]}).json()
        assert seen == present
        assert count(http, "big", {"match": {"msg": "set"}}) == present
        assert count(http, "big", {"term": {"tag": "t0"}}) == len(range(0, present, 7))
        # The recovered index takes new writes after the torn tail.
        assert http.put("/big/_doc/after", json={"n": -1}, params={"refresh": "true"}).status_code == 201
        assert count(http, "big") == present + 1


_MERGE_THEN_CRASH = """
import os, signal, sys
from leafsearch.node.node import Node
node = Node(sys.argv[1], background=False)
for b in range(11):
    lines = b"".join(b'{"index":{"_id":"%d-%d"}}\\n{"n":%d}\\n' % (b, i, i) for i in range(5))
    node.bulk(lines, index="m", refresh="true")
node.index_doc("m", "late", b'{"n": 99}')
node.delete_doc("m", "10-0")
shard = node.indices["m"].shards[0]
merged = False
while shard.maybe_merge():
    merged = True
assert merged, "the merge policy did not merge"
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_writes_acknowledged_before_a_merge_survive_a_crash_after_it(tmp_path: Path) -> None:
    crashed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_MERGE_THEN_CRASH), str(tmp_path / "node")],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        timeout=60,
    )
    assert crashed.returncode == -9, crashed.stderr.decode()
    from leafsearch.node.node import Node

    with Node(tmp_path / "node", background=False) as node:
        assert node.get_doc("m", "late") is not None
        assert node.get_doc("m", "10-0") is None
