"""A run of plain index/create operations of one shard is applied and answered by column
(`IndexColumns`, `bulk_items`): every item must be what the per-operation path answers, in
request order, with the same rules (conflicts, ids, routing, repeated ids), and realtime reads and
seq_nos must see each write."""

from __future__ import annotations

import threading

import httpx
import orjson
import pytest

from tests import web

NDJSON = {"content-type": "application/x-ndjson"}


def ndjson(*objects: object) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objects)


def bulk(http: httpx.Client, index: str, body: bytes, **params: str) -> dict:
    response = http.post(f"/{index}/_bulk", content=body, headers=NDJSON, params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("shards", [1, 3])
def test_plain_writes_answer_item_by_item_as_elasticsearch_does(
    http: httpx.Client, new_index, shards
) -> None:
    index = new_index(settings={"number_of_shards": shards})
    odd_ids = [
        'quote"d',
        "back\\slash",
        "tab\there",
        "line\nbreak",
        "del\x7f",
        "nbsp\xa0",
        "üñï",
        "x" * 200,
        "a/b",
    ]
    first = bulk(http, index, ndjson(*[x for i in odd_ids for x in ({"index": {"_id": i}}, {"n": 1})]))
    assert first["errors"] is False
    assert [item["index"]["_id"] for item in first["items"]] == odd_ids
    assert {item["index"]["result"] for item in first["items"]} == {"created"}
    body = ndjson(
        {"index": {"_id": "new"}},
        {"n": 2},
        {"index": {"_id": 'quote"d'}},  # overwrites: version 2
        {"n": 3},
        {"create": {"_id": "back\\slash"}},  # exists: a conflict, in its place
        {"n": 4},
        {"index": {}},  # a generated id: created
        {"n": 5},
        {"index": {"_id": "x" * 513}},  # too long: refused alone
        {"n": 6},
        {"create": {"_id": "fresh"}},
        {"n": 7},
    )
    answer = bulk(http, index, body)
    assert answer["errors"] is True
    items = answer["items"]
    assert [next(iter(item)) for item in items] == ["index", "index", "create", "index", "index", "create"]
    new, over, conflict, auto, long_id, fresh = (next(iter(item.values())) for item in items)
    assert (new["result"], new["status"], new["_version"]) == ("created", 201, 1)
    assert (over["result"], over["status"], over["_version"]) == ("updated", 200, 2)
    assert over["_shards"] == {"total": 2, "successful": 1, "failed": 0} and over["_primary_term"] == 1
    assert conflict["status"] == 409
    assert conflict["error"]["type"] == "version_conflict_engine_exception"
    assert (
        conflict["error"]["reason"]
        == "[back\\slash]: version conflict, document already exists (current version [1])"
    )
    assert (auto["result"], auto["status"], len(auto["_id"])) == ("created", 201, 20)
    assert long_id["status"] == 400 and long_id["error"]["type"] == "action_request_validation_exception"
    assert (fresh["result"], fresh["status"]) == ("created", 201)
    got = http.get(f"/{index}/_doc/quote%22d").json()  # realtime: before any refresh
    assert (got["_version"], got["_seq_no"], got["_source"]) == (2, over["_seq_no"], {"n": 3})
    assert http.get(f"/{index}/_doc/back%5Cslash").json()["_source"] == {
        "n": 1
    }  # the conflict changed nothing


def test_an_id_twice_in_one_bulk_sees_its_first_write(http: httpx.Client, new_index) -> None:
    index = new_index()
    answer = bulk(
        http,
        index,
        ndjson(
            {"index": {"_id": "a"}},
            {"n": 1},
            {"index": {"_id": "a"}},
            {"n": 2},
            {"create": {"_id": "a"}},
            {"n": 3},
        ),
    )
    first, second, third = (next(iter(item.values())) for item in answer["items"])
    assert (first["result"], first["_version"]) == ("created", 1)
    assert (second["result"], second["_version"], second["_seq_no"]) == ("updated", 2, first["_seq_no"] + 1)
    assert third["status"] == 409
    assert http.get(f"/{index}/_doc/a").json()["_source"] == {"n": 2}


def test_routing_required_refuses_only_the_operations_without_one(http: httpx.Client, new_index) -> None:
    index = new_index(mappings={"_routing": {"required": True}})
    answer = bulk(
        http,
        index,
        ndjson({"index": {"_id": "1", "routing": "r"}}, {"n": 1}, {"index": {"_id": "2"}}, {"n": 2}),
    )
    routed, missing = (next(iter(item.values())) for item in answer["items"])
    assert routed["status"] == 201
    assert missing["status"] == 400 and missing["error"]["type"] == "routing_missing_exception"


@pytest.mark.parametrize(
    "line",
    [b'{"index":{"_index":"a""_id":"x"}}', b'{"index":{"_index":"a",}}', b'{"index":{,"_id":"x"}}'],
)
def test_a_malformed_action_line_still_fails_the_request(http: httpx.Client, new_index, line: bytes) -> None:
    index = new_index()
    response = http.post(f"/{index}/_bulk", content=line + b'\n{"n":1}\n', headers=NDJSON)
    assert response.status_code == 400
    assert http.get(f"/{index}/_count").json()["count"] == 0


def test_an_action_line_naming_its_index_goes_there(http: httpx.Client, new_index) -> None:
    a, b = new_index(suffix="-a"), new_index(suffix="-b")
    answer = bulk(
        http, a, ndjson({"index": {"_index": b, "_id": "x"}}, {"n": 1}, {"create": {"_id": "y"}}, {"n": 2})
    )
    assert [next(iter(item.values()))["_index"] for item in answer["items"]] == [b, a]


def test_filter_path_and_pretty_read_the_rendered_items(http: httpx.Client, new_index) -> None:
    index = new_index()
    body = ndjson({"index": {"_id": "1"}}, {"n": 1}, {"create": {"_id": "1"}}, {"n": 1})
    filtered = http.post(
        f"/{index}/_bulk", content=body, headers=NDJSON, params={"filter_path": "items.*.error.type"}
    )
    assert filtered.json() == {
        "items": [{"create": {"error": {"type": "version_conflict_engine_exception"}}}]
    }
    pretty = http.post(f"/{index}/_bulk", content=body, headers=NDJSON, params={"pretty": "true"})
    assert b'"_id" : "1"' in pretty.content and pretty.json()["items"][0]["index"]["_version"] == 2


def test_concurrent_bulks_with_refreshes_keep_versions_and_seq_nos(
    http: httpx.Client, server: str, new_index
) -> None:
    """Four clients overwrite the same 200 ids while refreshes run: every write is acknowledged
    once with its own seq_no, increasing within a bulk; each id ends at version = its number of
    writes; a realtime get right after a client's bulk sees that write or a later one."""
    index = new_index()
    rounds, ids = 10, [f"id-{i}" for i in range(200)]
    seq_nos: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def writer(client: int) -> None:
        with web.Client(base_url=server, timeout=60) as own:
            for r in range(rounds):
                body = ndjson(
                    *[x for i in ids for x in ({"index": {"_id": i}}, {"client": client, "round": r})]
                )
                answer = bulk(own, index, body)
                mine = [item["index"]["_seq_no"] for item in answer["items"]]
                if answer["errors"] or mine != sorted(mine):
                    failures.append(f"errors or order: {answer['errors']}")
                with lock:
                    seq_nos.extend(mine)
                seen = own.get(f"/{index}/_doc/{ids[r]}").json()
                if seen["_seq_no"] < mine[r]:
                    failures.append(f"stale get {seen}")

    def refresher() -> None:
        with web.Client(base_url=server, timeout=60) as own:
            while not done.is_set():
                own.post(f"/{index}/_refresh")

    threads = [threading.Thread(target=writer, args=(c,)) for c in range(4)]
    background = threading.Thread(target=refresher)
    background.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    background.join()
    assert failures == []
    assert sorted(seq_nos) == list(range(4 * rounds * len(ids)))
    http.post(f"/{index}/_refresh")
    hits = http.post(f"/{index}/_search", json={"size": 1000, "version": True}).json()["hits"]["hits"]
    assert len(hits) == len(ids)
    assert {hit["_version"] for hit in hits} == {4 * rounds}
