"""`_stats`, `_nodes/stats` (indices and http), `_cat/shards|segments|nodes|count`, `_close`/`_open`,
through raw HTTP and the official client."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
import pytest
from conftest import error_of, running_server
from elasticsearch import Elasticsearch, NotFoundError

from tests import web


@pytest.fixture
def filled(es: Elasticsearch, new_index: Callable[..., str]) -> str:
    """Two shards, three documents, one get that finds and one that does not, one search."""
    name = new_index(settings={"number_of_shards": 2})
    for i in range(3):
        es.index(index=name, id=str(i), document={"n": i})
    es.delete(index=name, id="2")
    es.get(index=name, id="0")
    with pytest.raises(NotFoundError):
        es.get(index=name, id="missing")
    es.indices.refresh(index=name)
    es.search(index=name, query={"match_all": {}})
    return name


def test_index_stats_count_what_happened(es: Elasticsearch, filled: str) -> None:
    stats = es.indices.stats(index=filled).body
    assert stats["_shards"] == {"total": 4, "successful": 2, "failed": 0}
    entry = stats["indices"][filled]
    assert entry["status"] == "open" and entry["health"] == "yellow" and entry["uuid"]
    total = entry["total"]
    assert total["docs"]["count"] == 2
    assert total["indexing"]["index_total"] == 3 and total["indexing"]["delete_total"] == 1
    assert total["get"]["total"] == 2
    assert (total["get"]["exists_total"], total["get"]["missing_total"]) == (1, 1)
    # One search reads both shards: each shard counts its query phase.
    assert total["search"]["query_total"] == 2
    assert total["refresh"]["total"] >= 1 and total["flush"]["total"] >= 1
    assert total["store"]["size_in_bytes"] > 0
    assert total["segments"]["count"] >= 1
    assert total["shard_stats"]["total_count"] == 2
    for zero in ("query_cache", "fielddata", "completion", "warmer", "request_cache", "recovery"):
        assert zero in total
    assert entry["primaries"] == total
    assert stats["_all"]["primaries"]["docs"]["count"] >= 2
    assert total["bulk"]["total_operations"] == 0
    es.bulk(operations=[{"index": {"_index": filled, "_id": "b"}}, {"n": 9}])
    bulk = es.indices.stats(index=filled, metric="bulk").body["indices"][filled]["total"]["bulk"]
    assert bulk["total_operations"] == 1 and bulk["total_size_in_bytes"] == len(b'{"n":9}')


def test_stats_metric_and_level(es: Elasticsearch, http: httpx.Client, filled: str) -> None:
    only = es.indices.stats(index=filled, metric="merge,docs").body["indices"][filled]["total"]
    assert list(only) == ["docs", "merges"]
    shards = es.indices.stats(index=filled, level="shards").body["indices"][filled]["shards"]
    assert sorted(shards) == ["0", "1"]
    assert shards["0"][0]["routing"]["primary"] is True
    assert sum(s[0]["docs"]["count"] for s in shards.values()) == 2
    cluster = http.get(f"/{filled}/_stats/docs", params={"level": "cluster"}).json()
    assert "indices" not in cluster and cluster["_all"]["total"]["docs"]["count"] >= 2
    level = http.get("/_stats", params={"level": "node"})
    assert level.status_code == 400 and error_of(level)["reason"] == (
        "Validation Failed: 1: level parameter must be one of [cluster] or [indices] or [shards] "
        "but was [node];"
    )
    bad = http.get("/_stats/doc")
    assert bad.status_code == 400
    assert (
        error_of(bad)["reason"]
        == "request [/_stats/doc] contains unrecognized metric: [doc] -> did you mean [docs]?"
    )


def test_node_stats_sections_and_http_connections(es: Elasticsearch, server: str, filled: str) -> None:
    node = next(iter(es.nodes.stats().body["nodes"].values()))
    for section in (
        "docs", "store", "indexing", "get", "search", "merges", "refresh", "flush", "warmer", "query_cache",
        "fielddata", "completion", "segments", "translog", "request_cache", "recovery",
    ):  # fmt: skip
        assert section in node["indices"], section
    assert node["indices"]["shard_stats"]["total_count"] >= 2
    merges = next(iter(es.nodes.stats(metric="indices", index_metric="merge").body["nodes"].values()))
    assert list(merges["indices"]) == ["merges"]
    by_index = es.nodes.stats(metric="indices", index_metric="docs", level="indices").body
    indices = next(iter(by_index["nodes"].values()))["indices"]["indices"]
    assert list(indices[filled]) == ["docs"] and indices[filled]["docs"]["count"] == 2
    by_shard = es.nodes.stats(metric="indices", index_metric="docs", level="shards").body
    shards = next(iter(by_shard["nodes"].values()))["indices"]["shards"][filled]
    assert sorted(next(iter(entry)) for entry in shards) == ["0", "1"]
    sized = es.nodes.stats(metric="indices", index_metric="segments", include_segment_file_sizes=True)
    assert next(iter(sized.body["nodes"].values()))["indices"]["segments"]["file_sizes"]

    def http_section(client: httpx.Client) -> dict:
        return next(iter(client.get("/_nodes/stats/http").json()["nodes"].values()))["http"]

    with web.Client(base_url=server) as first:
        before = http_section(first)
        # Keep-alive: more requests on the same connection open nothing new.
        assert http_section(first)["total_opened"] == before["total_opened"]
        with web.Client(base_url=server) as second:
            during = http_section(second)
            assert during["total_opened"] == before["total_opened"] + 1
            assert during["current_open"] >= 2


def test_http_clients_list_each_connection(server: str) -> None:
    """`http.clients`: each connection with its id, addresses, agent, last URI, request count and
    body bytes; a closed one is still listed, with the time it closed."""
    port = server.rsplit(":", 1)[1]

    def clients(client: httpx.Client) -> dict[int, dict]:
        section = next(iter(client.get("/_nodes/stats/http").json()["nodes"].values()))["http"]
        return {entry["id"]: entry for entry in section["clients"]}

    headers = {"user-agent": "conformance-agent/1", "x-opaque-id": "op-7", "x-forwarded-for": "10.0.0.9"}
    with web.Client(base_url=server, headers=headers) as watched:
        watched.post("/_search", json={"size": 0})
        mine = next(c for c in clients(watched).values() if c.get("agent") == "conformance-agent/1")
    assert mine["local_address"] == f"127.0.0.1:{port}"
    assert mine["remote_address"].startswith("127.0.0.1:")
    assert mine["last_uri"] == "/_nodes/stats/http"
    assert (mine["x_opaque_id"], mine["x_forwarded_for"]) == ("op-7", "10.0.0.9")
    assert mine["request_count"] == 2
    assert mine["request_size_bytes"] == len(b'{"size":0}')
    assert mine["last_request_time_millis"] >= mine["opened_time_millis"] > 0
    assert "closed_time_millis" not in mine
    with web.Client(base_url=server) as other:
        # The server sees the close when its event loop reads it: ask until it has.
        for _ in range(200):
            closed = clients(other)[mine["id"]]
            if "closed_time_millis" in closed:
                break
    assert closed["closed_time_millis"] >= closed["last_request_time_millis"]
    assert closed["request_count"] == 2


def test_cat_shards_segments_nodes_count(es: Elasticsearch, http: httpx.Client, filled: str) -> None:
    shards = es.cat.shards(index=filled, format="json", bytes="b").body
    assert [(r["shard"], r["prirep"], r["state"]) for r in shards] == [
        ("0", "p", "STARTED"),
        ("0", "r", "UNASSIGNED"),
        ("1", "p", "STARTED"),
        ("1", "r", "UNASSIGNED"),
    ]
    primaries = [r for r in shards if r["prirep"] == "p"]
    assert sum(int(r["docs"]) for r in primaries) == 2 and all(int(r["store"]) > 0 for r in primaries)
    # Client 9 sends every cat request as POST.
    text = http.post(
        f"/_cat/shards/{filled}", params={"v": "true", "h": "shard,prirep", "s": "shard:desc"}
    ).text
    assert text.splitlines()[0].split() == ["shard", "prirep"]
    assert text.splitlines()[1].split()[0] == "1"
    count = http.get(f"/_cat/count/{filled}", params={"v": "true", "bytes": "kb", "h": "count"})
    assert count.text == "count\n    2\n"
    segments = es.cat.segments(index=filled, format="json").body
    assert sum(int(s["docs.count"]) for s in segments) + sum(int(s["docs.deleted"]) for s in segments) == 3
    assert http.post(f"/_cat/segments/{filled}", params={"h": "index"}).text.strip().split("\n")[0] == filled
    nodes = es.cat.nodes(format="json").body
    assert len(nodes) == 1 and nodes[0]["master"] == "*" and nodes[0]["node.role"] == "dim"
    assert http.post("/_cat/nodes", params={"h": "name,uptime"}).text.startswith(nodes[0]["name"])
    assert (
        es.perform_request("POST", f"/_cat/count/{filled}", params={"format": "json"}).body[0]["count"] == "2"
    )
    listing = set(http.get("/_cat").text.splitlines())
    assert {"/_cat/shards", "/_cat/segments", "/_cat/nodes", "/_cat/count"} <= listing


def _closed(response: httpx.Response, name: str) -> bool:
    return response.status_code == 400 and error_of(response)["type"] == "index_closed_exception"


def test_close_and_open(es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    other = new_index(suffix="-other")
    es.index(index=name, id="1", document={"n": 1}, refresh=True)
    es.index(index=other, id="1", document={"n": 1}, refresh=True)
    pit = es.open_point_in_time(index=name, keep_alive="1m")["id"]
    closed = es.indices.close(index=name).body
    assert closed == {"acknowledged": True, "shards_acknowledged": True, "indices": {name: {"closed": True}}}

    search = http.post(f"/{name}/_search", json={})
    assert _closed(search, name)
    assert error_of(search)["reason"] == "closed" and error_of(search)["index"] == name
    assert _closed(http.get(f"/{name}/_doc/1"), name)
    assert _closed(http.put(f"/{name}/_doc/2", json={"n": 2}), name)
    assert _closed(http.get(f"/{name}/_stats"), name)
    bulk = es.bulk(operations=[{"index": {"_index": name, "_id": "3"}}, {"n": 3}]).body
    assert bulk["items"][0]["index"]["error"]["type"] == "index_closed_exception"
    # Its point in time was freed with it, as Elasticsearch frees a closed index's contexts.
    gone = http.post("/_search", json={"pit": {"id": pit}})
    assert gone.status_code == 404
    # Wildcards skip it unless they ask for closed indices; ignore_unavailable skips it by name.
    prefix = name.rsplit("-", 1)[0]
    assert es.count(index=f"{prefix}*")["count"] == 1
    assert es.count(index=f"{name},{other}", ignore_unavailable=True)["count"] == 1
    rows = es.cat.indices(index=f"{prefix}*", format="json", h="index,status").body
    assert {r["index"]: r["status"] for r in rows} == {name: "close", other: "open"}
    assert es.indices.open(index=f"{prefix}*").body == {"acknowledged": True, "shards_acknowledged": True}
    assert es.get(index=name, id="1")["_source"] == {"n": 1}
    assert es.count(index=name)["count"] == 1
    missing = http.post("/nothing-here/_close")
    assert missing.status_code == 404


def test_closed_state_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, _), web.Client(base_url=url) as http:
        assert http.put("/kept/_doc/1", json={"n": 1}).status_code == 201
        assert http.post("/kept/_close").status_code == 200
    with running_server(data) as (url, _), web.Client(base_url=url) as http:
        assert _closed(http.get("/kept/_doc/1"), "kept")
        assert http.get("/_cat/indices/kept", params={"h": "status"}).text.strip() == "close"
        assert http.post("/kept/_open").status_code == 200
        assert http.get("/kept/_doc/1").json()["_source"] == {"n": 1}


def test_close_under_writes_and_searches(server: str, new_index: Callable[..., str]) -> None:
    """Every request gets its answer or the closed error; no acknowledged write is lost."""
    name = new_index(settings={"number_of_shards": 2})
    acknowledged: list[set[str]] = [set(), set()]
    written = threading.Semaphore(0)  # released once per acknowledged write
    failures: list[str] = []
    stop = threading.Event()

    def write(slot: int) -> None:
        with web.Client(base_url=server, timeout=60) as client:
            i = 0
            while not stop.is_set():
                doc_id = f"{slot}-{i}"
                i += 1
                if i % 2:
                    response = client.put(f"/{name}/_doc/{doc_id}", json={"n": i})
                    if response.status_code in (200, 201):
                        acknowledged[slot].add(doc_id)
                        written.release()
                        continue
                else:
                    body = f'{{"index":{{"_id":"{doc_id}"}}}}\n{{"n":{i}}}\n'
                    response = client.post(
                        f"/{name}/_bulk", content=body, headers={"content-type": "application/x-ndjson"}
                    )
                    if response.status_code == 200:
                        item = response.json()["items"][0]["index"]
                        if item.get("status") in (200, 201):
                            acknowledged[slot].add(doc_id)
                            written.release()
                        elif item["error"]["type"] != "index_closed_exception":
                            failures.append(response.text)
                        continue
                if not _closed(response, name):
                    failures.append(response.text)

    def search() -> None:
        with web.Client(base_url=server, timeout=60) as client:
            while not stop.is_set():
                response = client.post(f"/{name}/_search", json={"size": 5})
                if response.status_code != 200 and not _closed(response, name):
                    failures.append(response.text)

    threads = [threading.Thread(target=write, args=(slot,)) for slot in range(2)]
    threads.append(threading.Thread(target=search))
    with web.Client(base_url=server, timeout=60) as admin:
        for thread in threads:
            thread.start()
        for _ in range(4):
            for _ in range(10):  # some writes land while it is open
                assert written.acquire(timeout=60)
            assert admin.post(f"/{name}/_close").status_code == 200
            assert admin.post(f"/{name}/_open").status_code == 200
        stop.set()
        for thread in threads:
            thread.join()
        assert not failures, failures[:3]
        admin.post(f"/{name}/_refresh")
        ids = {
            hit["_id"]
            for hit in admin.post(f"/{name}/_search", json={"size": 10_000, "_source": False}).json()["hits"][
                "hits"
            ]
        }
    every = set().union(*acknowledged)
    assert every and every <= ids


def test_doc_status_counts_every_write_by_status_family(
    es: Elasticsearch, http: httpx.Client, new_index
) -> None:
    """`indices.indexing.doc_status` (OpenSearch's): each single write and each bulk item counts
    once by its status family, with several writers at once; a refused bulk body counts nothing."""
    import threading

    name = new_index(settings={"number_of_shards": 2})

    def doc_status() -> dict[str, int]:
        node = next(iter(es.nodes.stats(metric="indices", index_metric="indexing")["nodes"].values()))
        return node["indices"]["indexing"]["doc_status"]

    before = doc_status()
    writers, per_writer = 4, 25

    def write(w: int) -> None:
        with web.Client(base_url=str(http.base_url)) as own:
            for i in range(per_writer):
                own.put(f"/{name}/_doc/{w}-{i}", json={"n": i})  # 201
                own.put(f"/{name}/_doc/{w}-{i}", params={"op_type": "create"}, json={"n": i})  # 409
            lines = [
                orjson.dumps(line)
                for i in range(per_writer)
                for line in (
                    {"delete": {"_index": name, "_id": f"{w}-{i}"}},
                    {"delete": {"_index": name, "_id": f"none-{w}-{i}"}},
                )
            ]
            own.post(
                "/_bulk", content=b"\n".join(lines) + b"\n", headers={"content-type": "application/x-ndjson"}
            )  # 200 and 404

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    http.post(
        "/_bulk", content=b'{"index": {}}\n', headers={"content-type": "application/x-ndjson"}
    )  # refused whole
    after = doc_status()
    total = writers * per_writer
    assert after.get("2xx", 0) - before.get("2xx", 0) == 2 * total
    assert after.get("4xx", 0) - before.get("4xx", 0) == 2 * total
