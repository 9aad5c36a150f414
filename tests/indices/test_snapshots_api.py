"""Snapshot and restore over HTTP into a shared-filesystem repository under `--path-repo`:
register, create (incremental), list, status, restore (renamed), delete (blobs no snapshot
needs go), a snapshot taken while writers run is a point in time, and `kill -9` during a
snapshot leaves a readable repository that lists no unfinished snapshot."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from conftest import error_of, running_server

from leafsearch.testing import Server
from tests import web
from tests.server_zygote import SERVER_ZYGOTE


@pytest.fixture(scope="module")
def repo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("repos")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, repo_root: Path) -> Iterator[httpx.Client]:
    """A server of this module's own, with `--path-repo`."""
    data = tmp_path_factory.mktemp("snapshot-node") / "data"
    with (
        Server(
            data, args=["--path-repo", str(repo_root), "--search-workers", "0"], popen=SERVER_ZYGOTE.popen
        ) as server,
        web.Client(base_url=server.url, timeout=120) as client,
    ):
        yield client


def ok(response: httpx.Response) -> dict:
    assert response.status_code in (200, 201), response.text
    return response.json()


def bulk(http: httpx.Client, index: str, docs: dict[str, dict], *, refresh: bool = True) -> None:
    lines = b"".join(
        orjson.dumps({"index": {"_index": index, "_id": i}}) + b"\n" + orjson.dumps(d) + b"\n"
        for i, d in docs.items()
    )
    response = http.post(
        "/_bulk",
        content=lines,
        params={"refresh": "true"} if refresh else {},
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and not response.json()["errors"], response.text


def blobs(root: Path, location: str) -> set[str]:
    return {p.name for p in (root / location / "blobs").iterdir()}


def test_repository_register_get_delete(node: httpx.Client, repo_root: Path) -> None:
    assert ok(node.put("/_snapshot/r1", json={"type": "fs", "settings": {"location": "r1"}})) == {
        "acknowledged": True
    }
    got = ok(node.get("/_snapshot/r1"))
    assert got["r1"]["type"] == "fs" and got["r1"]["settings"] == {"location": "r1"}
    assert "r1" in ok(node.get("/_snapshot/_all"))
    assert "r1" in ok(node.get("/_snapshot"))
    assert (repo_root / "r1" / "blobs").is_dir()
    missing = node.get("/_snapshot/nope")
    assert missing.status_code == 404
    assert error_of(missing) == {
        "root_cause": error_of(missing)["root_cause"],
        "type": "repository_missing_exception",
        "reason": "[nope] missing",
    }
    assert node.delete("/_snapshot/nope").status_code == 404
    twin = node.put("/_snapshot/r1-twin", json={"type": "fs", "settings": {"location": "r1"}})
    assert twin.status_code == 400
    assert error_of(twin)["reason"] == "[r1-twin] location [r1] is already the location of repository [r1]"
    assert ok(node.delete("/_snapshot/r1")) == {"acknowledged": True}
    assert node.get("/_snapshot/r1").status_code == 404


@pytest.mark.parametrize(
    ("body", "kind", "part"),
    [
        (
            {"type": "fs", "settings": {"location": "/etc"}},
            "repository_exception",
            "doesn't match any of the locations",
        ),
        ({"type": "fs", "settings": {"location": "../escape"}}, "repository_exception", "doesn't match any"),
        ({"type": "fs", "settings": {}}, "repository_exception", "missing location"),
        (
            {"type": "s3", "settings": {"bucket": "b"}},
            "repository_exception",
            "repository type [s3] does not exist",
        ),
        ({"settings": {"location": "x"}}, "action_request_validation_exception", "type is missing"),
        (
            {"type": "fs", "settings": {"location": "x"}, "extra": 1},
            "illegal_argument_exception",
            "unknown field [extra]",
        ),
    ],
)
def test_bad_repositories_are_400_and_register_nothing(
    node: httpx.Client, repo_root: Path, body: dict, kind: str, part: str
) -> None:
    response = node.put("/_snapshot/bad", json=body)
    assert response.status_code == 400, response.text
    assert error_of(response)["type"] == kind and part in error_of(response)["reason"]
    assert node.get("/_snapshot/bad").status_code == 404
    assert not (repo_root.parent / "escape").exists()


def test_create_list_status_restore_delete(node: httpx.Client, repo_root: Path) -> None:
    ok(node.put("/_snapshot/main", json={"type": "fs", "settings": {"location": "main"}}))
    ok(
        node.put(
            "/books",
            json={"settings": {"number_of_shards": 2}, "mappings": {"properties": {"t": {"type": "text"}}}},
        )
    )
    ok(node.post("/_aliases", json={"actions": [{"add": {"index": "books", "alias": "library"}}]}))
    bulk(node, "books", {str(i): {"t": f"word{i % 7} book", "n": i} for i in range(300)})
    node.delete("/books/_doc/5", params={"refresh": "true"})
    first = ok(
        node.put("/_snapshot/main/one", params={"wait_for_completion": "true"}, json={"indices": "books"})
    )
    info = first["snapshot"]
    assert info["snapshot"] == "one" and info["state"] == "SUCCESS" and info["indices"] == ["books"]
    assert info["shards"] == {"total": 2, "failed": 0, "successful": 2}
    listed = ok(node.get("/_snapshot/main/_all"))
    assert [s["snapshot"] for s in listed["snapshots"]] == ["one"] and listed["total"] == 1
    status = ok(node.get("/_snapshot/main/one/_status"))["snapshots"][0]
    assert status["state"] == "SUCCESS" and status["shards_stats"]["done"] == 2
    total = status["stats"]["total"]["size_in_bytes"]
    assert status["stats"]["incremental"]["size_in_bytes"] > 0

    # 1% of the documents change: the second snapshot copies only the new segment's files
    bulk(node, "books", {str(i): {"t": "changed", "n": -i} for i in range(0, 300, 100)})
    ok(node.put("/_snapshot/main/two", params={"wait_for_completion": "true"}))
    second = ok(node.get("/_snapshot/main/two/_status"))["snapshots"][0]["stats"]
    assert 0 < second["incremental"]["size_in_bytes"] < total / 2
    assert second["total"]["size_in_bytes"] >= total

    # restore under a new name: the documents of the first snapshot, the alias renamed along
    restored = ok(
        node.post(
            "/_snapshot/main/one/_restore",
            params={"wait_for_completion": "true"},
            json={
                "indices": "books",
                "rename_pattern": "(.+)",
                "rename_replacement": "restored_$1",
                "include_aliases": False,
            },
        )
    )
    assert restored["snapshot"]["indices"] == ["restored_books"]
    node.post("/restored_books/_refresh")
    assert ok(node.get("/restored_books/_count"))["count"] == 299
    hit = ok(node.post("/restored_books/_search", json={"query": {"term": {"n": 100}}}))["hits"]["hits"]
    assert hit[0]["_source"] == {"t": "word2 book", "n": 100}
    mapping = ok(node.get("/restored_books/_mapping"))["restored_books"]["mappings"]
    assert mapping["properties"]["t"] == {"type": "text"}
    # the restored index takes writes and searches like any other
    ok(node.put("/restored_books/_doc/new", params={"refresh": "true"}, json={"t": "fresh", "n": 1000}))
    assert ok(node.get("/restored_books/_count"))["count"] == 300
    clash = node.post("/_snapshot/main/one/_restore", params={"wait_for_completion": "true"})
    assert clash.status_code == 400 and error_of(clash)["type"] == "snapshot_restore_exception"
    assert "an open index with same name already exists" in error_of(clash)["reason"]

    # deleting the only snapshot naming blobs removes them; those the other still needs stay
    before = blobs(repo_root, "main")
    ok(node.delete("/_snapshot/main/one"))
    after = blobs(repo_root, "main")
    assert after < before
    assert node.get("/_snapshot/main/one").status_code == 404
    ok(node.delete("/books"))
    ok(node.post("/_snapshot/main/two/_restore", params={"wait_for_completion": "true"}))
    assert ok(node.get("/books/_count"))["count"] == 299
    assert "books" in ok(node.get("/library/_alias"))  # aliases come back with the index
    ok(node.delete("/_snapshot/main/two"))
    assert blobs(repo_root, "main") == set()
    for name in ("books", "restored_books"):
        node.delete(f"/{name}")


@pytest.mark.parametrize(
    ("path", "body", "status", "kind"),
    [
        ("/_snapshot/nope/s", None, 404, "repository_missing_exception"),
        ("/_snapshot/errs/UPPER", None, 400, "invalid_snapshot_name_exception"),
        ("/_snapshot/errs/_x", None, 400, "invalid_snapshot_name_exception"),
        ("/_snapshot/errs/s", {"indices": 5}, 400, "illegal_argument_exception"),
        ("/_snapshot/errs/s", {"bogus": 1}, 400, "illegal_argument_exception"),
        ("/_snapshot/errs/s", {"indices": "no-such-index"}, 404, "index_not_found_exception"),
    ],
)
def test_malformed_snapshot_requests(
    node: httpx.Client, path: str, body: dict | None, status: int, kind: str
) -> None:
    ok(node.put("/_snapshot/errs", json={"type": "fs", "settings": {"location": "errs"}}))
    response = node.put(path, params={"wait_for_completion": "true"}, json=body)
    assert response.status_code == status, response.text
    assert error_of(response)["type"] == kind
    assert ok(node.get("/_snapshot/errs/_all"))["snapshots"] == []


def test_restore_errors(node: httpx.Client) -> None:
    ok(node.put("/_snapshot/rerr", json={"type": "fs", "settings": {"location": "rerr"}}))
    missing = node.post("/_snapshot/rerr/none/_restore")
    assert missing.status_code == 404 and error_of(missing)["reason"] == "[rerr:none] is missing"
    ok(node.put("/rerr-src", json={}))
    ok(node.put("/_snapshot/rerr/s", params={"wait_for_completion": "true"}, json={"indices": "rerr-src"}))
    for body, part in (
        ({"rename_pattern": "(", "rename_replacement": "x"}, "invalid [rename_pattern]"),
        ({"rename_pattern": "(.+)"}, "must be strings, and given together"),
        ({"indices": "absent"}, "not found in snapshot"),
        ({"what": 1}, "Unknown parameter what"),
    ):
        response = node.post("/_snapshot/rerr/s/_restore", json=body)
        assert response.status_code == 400, response.text
        assert part in error_of(response)["reason"]
    node.delete("/rerr-src")


def test_a_snapshot_taken_while_writers_run_is_a_point_in_time(node: httpx.Client) -> None:
    """Each writer writes its ids in order, each acknowledged before the next, into one shard (its
    routing): a point in time of each shard holds, of each writer, a prefix of its sequence, and
    every document acknowledged before the snapshot began."""
    ok(node.put("/_snapshot/busy", json={"type": "fs", "settings": {"location": "busy"}}))
    ok(node.put("/busy", json={"settings": {"number_of_shards": 2, "refresh_interval": "50ms"}}))
    stop = threading.Event()
    written: dict[int, int] = {}

    def writer(w: int) -> None:
        with web.Client(base_url=str(node.base_url), timeout=60) as client:
            n = 0
            while not stop.is_set() and n < 2000:
                assert (
                    client.put(
                        f"/busy/_doc/{w}-{n}", params={"routing": str(w)}, json={"w": w, "n": n}
                    ).status_code
                    == 201
                )
                written[w] = n
                n += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    try:
        while sum(written.values()) < 60:
            stop.wait(0.01)
        acked_before = dict(written)
        ok(
            node.put(
                "/_snapshot/busy/during", params={"wait_for_completion": "true"}, json={"indices": "busy"}
            )
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    ok(
        node.post(
            "/_snapshot/busy/during/_restore",
            params={"wait_for_completion": "true"},
            json={"rename_pattern": "busy", "rename_replacement": "busy-copy"},
        )
    )
    hits = ok(node.post("/busy-copy/_search", json={"size": 10000, "_source": ["w", "n"]}))["hits"]["hits"]
    by_writer: dict[int, list[int]] = {}
    for hit in hits:
        by_writer.setdefault(hit["_source"]["w"], []).append(hit["_source"]["n"])
    for w in range(3):
        ns = sorted(by_writer.get(w, []))
        assert ns == list(range(len(ns))), f"writer {w}: a gap in {ns[:20]}..."
        assert len(ns) >= acked_before.get(w, -1) + 1  # all acknowledged before the snapshot began
    for name in ("busy", "busy-copy"):
        node.delete(f"/{name}")


def test_kill_9_during_a_snapshot_leaves_a_readable_repository(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    repos.mkdir()
    data = tmp_path / "data"
    with (
        running_server(data, "--path-repo", str(repos), "--search-workers", "0") as (url, process),
        web.Client(base_url=url, timeout=120) as client,
    ):
        ok(client.put("/_snapshot/k", json={"type": "fs", "settings": {"location": "k"}}))
        for part in range(4):
            bulk(client, "big", {f"{part}-{i}": {"text": f"some words {i} " * 20} for i in range(3000)})
        ok(client.put("/_snapshot/k/early", params={"wait_for_completion": "true"}))
        ok(client.post("/big/_doc", json={"text": "one more"}, params={"refresh": "true"}))
        assert ok(client.put("/_snapshot/k/cut")) == {"accepted": True}
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    with (
        running_server(data, "--path-repo", str(repos), "--search-workers", "0") as (url, _),
        web.Client(base_url=url, timeout=120) as client,
    ):
        listed = ok(client.get("/_snapshot/k/_all"))["snapshots"]
        assert {s["snapshot"] for s in listed} <= {"early", "cut"}
        assert all(s["state"] == "SUCCESS" for s in listed)
        ok(client.delete("/big"))
        ok(client.post("/_snapshot/k/early/_restore", params={"wait_for_completion": "true"}))
        assert ok(client.get("/big/_count"))["count"] == 12000
        ok(client.put("/_snapshot/k/after", params={"wait_for_completion": "true"}))
        for name in [s["snapshot"] for s in listed] + ["after"]:
            ok(client.delete(f"/_snapshot/k/{name}"))
        assert list((repos / "k" / "blobs").iterdir()) == []  # leftovers of the cut snapshot too


def test_a_snapshot_cut_short_is_never_listed_and_its_blobs_go(tmp_path: Path, monkeypatch) -> None:
    """In process: the copy fails half way (as a crash would stop it): no manifest, so nothing is
    listed; the repository takes the next snapshot, and a delete collects the orphaned blobs."""
    from leafsearch.client import Client
    from leafsearch.indices import snapshots

    repos = tmp_path / "repos"
    repos.mkdir()
    with Client(tmp_path / "data", background=False, path_repo=[repos]) as client:
        client.perform_request("PUT", "/_snapshot/r", body={"type": "fs", "settings": {"location": "r"}})
        client.bulk(
            [
                {"index": {"_index": "i", "_id": str(n)}} if k == 0 else {"n": n}
                for n in range(50)
                for k in (0, 1)
            ],
            refresh=True,
        )
        real = snapshots._store_file
        calls = []

        def failing(repo, path, digest):
            calls.append(path)
            if len(calls) == 3:
                raise OSError(28, "No space left on device")
            return real(repo, path, digest)

        monkeypatch.setattr(snapshots, "_store_file", failing)
        with pytest.raises(OSError):
            client.perform_request("PUT", "/_snapshot/r/cut", params={"wait_for_completion": True})
        monkeypatch.setattr(snapshots, "_store_file", real)
        assert client.perform_request("GET", "/_snapshot/r/_all")["snapshots"] == []
        orphans = list((repos / "r" / "blobs").iterdir())
        assert len(orphans) == 2
        client.perform_request("PUT", "/_snapshot/r/whole", params={"wait_for_completion": True})
        client.perform_request("DELETE", "/_snapshot/r/whole")
        assert list((repos / "r" / "blobs").iterdir()) == []


def test_a_data_stream_comes_back_by_its_name(node: httpx.Client) -> None:
    ok(node.put("/_snapshot/streams", json={"type": "fs", "settings": {"location": "streams"}}))
    ok(node.put("/_index_template/metrics", json={"index_patterns": ["metrics-*"], "data_stream": {}}))
    for n in range(5):
        ok(node.post("/metrics-cpu/_doc", json={"@timestamp": f"2024-01-0{n + 1}T00:00:00Z", "v": n}))
    ok(node.post("/metrics-cpu/_rollover"))
    ok(node.post("/metrics-cpu/_doc", json={"@timestamp": "2024-02-01T00:00:00Z", "v": 9}))
    before = ok(node.get("/_data_stream/metrics-cpu"))["data_streams"][0]
    taken = ok(
        node.put(
            "/_snapshot/streams/s", params={"wait_for_completion": "true"}, json={"indices": "metrics-cpu"}
        )
    )
    assert taken["snapshot"]["data_streams"] == ["metrics-cpu"]
    ok(node.delete("/_data_stream/metrics-cpu"))
    restored = ok(
        node.post(
            "/_snapshot/streams/s/_restore",
            params={"wait_for_completion": "true"},
            json={"indices": "metrics-cpu"},
        )
    )
    assert sorted(restored["snapshot"]["indices"]) == sorted(i["index_name"] for i in before["indices"])
    after = ok(node.get("/_data_stream/metrics-cpu"))["data_streams"][0]
    assert [i["index_name"] for i in after["indices"]] == [i["index_name"] for i in before["indices"]]
    assert after["generation"] == before["generation"]
    node.post("/metrics-cpu/_refresh")
    assert ok(node.get("/metrics-cpu/_count"))["count"] == 6
    written = ok(node.post("/metrics-cpu/_doc", json={"@timestamp": "2024-03-01T00:00:00Z", "v": 10}))
    assert written["_index"] == before["indices"][-1]["index_name"]
    refused = node.post("/metrics-cpu/_doc", json={"v": 11})
    assert refused.status_code == 400 and error_of(refused)["type"] == "document_parsing_exception"
    again = node.post("/_snapshot/streams/s/_restore", json={"indices": "metrics-cpu"})
    assert again.status_code == 400
    ok(node.delete("/_data_stream/metrics-cpu"))
    ok(node.delete("/_index_template/metrics"))


def test_a_repository_outside_path_repo_after_a_restart_is_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    with running_server(tmp_path / "data", "--path-repo", str(first)) as (url, _):
        ok(web.put(f"{url}/_snapshot/r", json={"type": "fs", "settings": {"location": "r"}}))
        ok(web.put(f"{url}/_snapshot/a", json={"type": "fs", "settings": {"location": str(first / "a")}}))
    with running_server(tmp_path / "data", "--path-repo", str(second)) as (url, _):
        response = web.put(f"{url}/_snapshot/r/s", params={"wait_for_completion": "true"})
        assert response.status_code == 400
        assert error_of(response)["reason"] == "[r] location [r] moved: register the repository again"
        response = web.put(f"{url}/_snapshot/a/s", params={"wait_for_completion": "true"})
        assert response.status_code == 400
        assert "doesn't match any of the locations specified by path.repo" in error_of(response)["reason"]
    assert not (second / "r").exists()
    assert list((first / "a" / "snapshots").iterdir()) == []


def test_cat_snapshots(node: httpx.Client) -> None:
    ok(node.put("/_snapshot/catted", json={"type": "fs", "settings": {"location": "catted"}}))
    ok(node.put("/cat-src", json={"settings": {"number_of_shards": 2}}))
    ok(node.put("/_snapshot/catted/s1", params={"wait_for_completion": "true"}, json={"indices": "cat-src"}))
    rows = ok(
        node.get("/_cat/snapshots/catted", params={"format": "json", "h": "id,status,indices,total_shards"})
    )
    assert rows == [{"id": "s1", "status": "SUCCESS", "indices": "1", "total_shards": "2"}]
    assert node.get("/_cat/snapshots/none").status_code == 404
    node.delete("/cat-src")


def test_closed_indices_are_left_out_of_wildcards_and_refused_by_name(node: httpx.Client) -> None:
    ok(node.put("/_snapshot/closing", json={"type": "fs", "settings": {"location": "closing"}}))
    ok(node.put("/shut-one", json={}))
    ok(node.put("/open-one", json={}))
    ok(node.post("/shut-one/_close"))
    taken = ok(node.put("/_snapshot/closing/all", params={"wait_for_completion": "true"}))
    assert "shut-one" not in taken["snapshot"]["indices"] and "open-one" in taken["snapshot"]["indices"]
    named = node.put(
        "/_snapshot/closing/named", params={"wait_for_completion": "true"}, json={"indices": "shut-one"}
    )
    assert named.status_code == 400 and error_of(named)["type"] == "snapshot_exception"
    assert "Indices [shut-one] are closed" in error_of(named)["reason"]
    for name in ("shut-one", "open-one"):
        node.delete(f"/{name}")


def test_a_restore_missing_a_blob_fails_whole(node: httpx.Client, repo_root: Path) -> None:
    ok(node.put("/_snapshot/torn", json={"type": "fs", "settings": {"location": "torn"}}))
    bulk(node, "torn-a", {str(i): {"n": i} for i in range(20)})
    bulk(node, "torn-b", {str(i): {"n": i + 100} for i in range(20)})
    ok(
        node.put(
            "/_snapshot/torn/s", params={"wait_for_completion": "true"}, json={"indices": "torn-a,torn-b"}
        )
    )
    manifest = orjson.loads(next((repo_root / "torn" / "snapshots").glob("*.json")).read_bytes())
    segment = manifest["indices"]["torn-b"]["shards"]["0"]["segments"][0]
    (repo_root / "torn" / "blobs" / segment["files"]["_source.bin"]["blob"]).unlink()  # torn-b's alone
    response = node.post(
        "/_snapshot/torn/s/_restore",
        params={"wait_for_completion": "true"},
        json={"rename_pattern": "torn", "rename_replacement": "mended"},
    )
    assert response.status_code == 400
    assert "is missing from the repository" in error_of(response)["reason"]
    assert node.head("/mended-a").status_code == 404 and node.head("/mended-b").status_code == 404
    for name in ("torn-a", "torn-b"):
        node.delete(f"/{name}")


def test_nested_documents_are_snapshotted_and_restored_with_their_parents(node: httpx.Client) -> None:
    ok(node.put("/_snapshot/nest", json={"type": "fs", "settings": {"location": "nest"}}))
    mapping = {"properties": {"c": {"type": "nested", "properties": {"r": {"type": "nested"}}}}}
    ok(node.put("/shelf", json={"mappings": mapping}))
    bulk(node, "shelf", {str(i): {"c": [{"a": f"a{i}", "r": [{"z": i}]}, {"a": "all"}]} for i in range(20)})
    ok(node.put("/_snapshot/nest/s", params={"wait_for_completion": "true"}, json={"indices": "shelf"}))
    ok(node.delete("/shelf"))
    ok(node.post("/_snapshot/nest/s/_restore", params={"wait_for_completion": "true"}))
    deep = {"query": {"nested": {"path": "c.r", "query": {"term": {"c.r.z": 7}}}}}
    assert [h["_id"] for h in ok(node.post("/shelf/_search", json=deep))["hits"]["hits"]] == ["7"]
    shared = {"query": {"nested": {"path": "c", "query": {"term": {"c.a": "all"}}}}}
    assert ok(node.post("/shelf/_count", json=shared))["count"] == 20
    ok(node.delete("/shelf"))
