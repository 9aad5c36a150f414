"""Index sorting (`index.sort.*`): settings refused as Elasticsearch refuses them, every segment
stored in index-sort order (flushes and merges, deletes carried over), searches answering exactly
what an unsorted index answers, ids still found on sorted segments, walks exactly once, and the
order kept across a crash."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest
from conftest import error_of, running_server
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from leafsearch.search import top_hits
from tests import web

MAPPING = {
    "properties": {
        "k": {"type": "keyword"},
        "id": {"type": "keyword"},
        "n": {"type": "long"},
        "x": {"type": "scaled_float", "scaling_factor": 10},
        "t": {"type": "text"},
        "nodv": {"type": "keyword", "doc_values": False},
    }
}
SORTED = {
    "index.sort.field": ["k", "n", "id"],
    "index.sort.order": ["asc", "desc", "asc"],
    "index.sort.missing": ["_first", "_last", "_last"],
}


# ---- settings, through HTTP ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"index.sort.field": "nope"}, "unknown index sort field:[nope]"),
        (
            {"index.sort.field": ["k", "n"], "index.sort.order": "asc"},
            "index.sort.field:[k, n] index.sort.order:[asc], size mismatch",
        ),
        (
            {"index.sort.field": "k", "index.sort.mode": ["min", "max"]},
            "index.sort.field:[k] index.sort.mode:[MIN, MAX], size mismatch",
        ),
        (
            {"index.sort.field": "k", "index.sort.missing": []},
            "index.sort.field:[k] index.sort.missing:[], size mismatch",
        ),
        ({"index.sort.order": "desc"}, "index.sort.field:[] index.sort.order:[desc], size mismatch"),
        ({"index.sort.field": "k", "index.sort.order": "up"}, "Illegal sort order:up"),
        ({"index.sort.field": "k", "index.sort.mode": "middle"}, "Illegal sort mode: middle"),
        (
            {"index.sort.field": "n", "index.sort.mode": "sum"},
            "Illegal index sort mode:[SUM], must be one of [MAX, MIN]",
        ),
        (
            {"index.sort.field": "k", "index.sort.missing": "0"},
            "Illegal missing value:[0], must be one of [_last, _first]",
        ),
        ({"index.sort.fields": "k"}, None),
    ],
)
def test_bad_index_sort_settings_are_refused(http: httpx.Client, index_name: str, settings, reason) -> None:
    response = http.put(f"/{index_name}", json={"settings": settings, "mappings": MAPPING})
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "illegal_argument_exception"
    if reason is not None:
        assert error["reason"] == reason
    else:
        assert error["reason"].startswith("unknown setting [index.sort.fields]")
    assert http.head(f"/{index_name}").status_code == 404


@pytest.mark.parametrize("field", ["t", "nodv"])
def test_a_sort_field_without_doc_values_is_refused(http: httpx.Client, index_name: str, field: str) -> None:
    response = http.put(f"/{index_name}", json={"settings": {"index.sort.field": field}, "mappings": MAPPING})
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "illegal_argument_exception"
    assert error["reason"] == f"docvalues not found for index sort field:[{field}]"
    assert error["root_cause"] == [{"type": "illegal_argument_exception", "reason": error["reason"]}]
    assert error["caused_by"]["type"] == "illegal_argument_exception"
    assert ("Fielddata is disabled" if field == "t" else "Use doc values instead") in error["caused_by"][
        "reason"
    ]
    assert http.head(f"/{index_name}").status_code == 404


def test_index_sort_settings_are_shown_and_final(http: httpx.Client, new_index) -> None:
    name = new_index(
        settings={
            "index.sort.field": "k,n",
            "index.sort.order": ["ASC", "desc"],
            "index.sort.mode": ["min", "MAX"],
        },
        mappings=MAPPING,
    )
    sort = http.get(f"/{name}/_settings").json()[name]["settings"]["index"]["sort"]
    assert sort == {"field": "k,n", "order": ["ASC", "desc"], "mode": ["min", "MAX"]}
    defaults = http.get(f"/{name}/_settings", params={"include_defaults": "true"}).json()[name]["defaults"]
    assert defaults["index"]["sort"] == {"missing": []}
    uuid = http.get(f"/{name}/_settings").json()[name]["settings"]["index"]["uuid"]
    for key, value in (("index.sort.field", "n"), ("index.sort.order", ["desc", "desc"])):
        response = http.put(f"/{name}/_settings", json={key: value})
        assert response.status_code == 400
        assert error_of(response)["reason"] == (
            f"Can't update non dynamic settings [[{key}]] for open indices [[{name}/{uuid}]]"
        )
    # The comma-separated field list sorts by both fields.
    bulk = b"".join(
        orjson.dumps({"index": {"_id": str(i)}}) + b"\n" + orjson.dumps(doc) + b"\n"
        for i, doc in enumerate([{"k": "b", "n": 1}, {"k": "a", "n": 1}, {"k": "a", "n": 5}, {"n": 9}])
    )
    response = http.post(
        f"/{name}/_bulk",
        params={"refresh": "true"},
        content=bulk,
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and not response.json()["errors"]
    hits = http.post(f"/{name}/_search", json={"sort": ["_doc"]}).json()["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["2", "1", "0", "3"]


# ---- the engine ---------------------------------------------------------------------------


def random_doc(rng: random.Random) -> dict[str, Any]:
    doc: dict[str, Any] = {"t": " ".join(rng.choices(["red", "green", "blue"], k=rng.randint(1, 3)))}
    if rng.random() < 0.85:
        doc["k"] = rng.choice(["a", "b", "c", "dd"]) if rng.random() < 0.9 else ["b", "zz"]
    if rng.random() < 0.85:
        doc["n"] = rng.randint(-3, 8) if rng.random() < 0.9 else [rng.randint(0, 9), rng.randint(0, 9)]
    if rng.random() < 0.7:
        doc["x"] = round(rng.uniform(-2, 2), 1)
    return doc


def expected_key(source: dict[str, Any]) -> tuple:
    """`SORTED` computed from a document's source: `k` ascending (min), missing first; `n`
    descending (max), missing last; `id` ascending, missing last."""
    k = source.get("k")
    k = min(k) if isinstance(k, list) else k
    n = source.get("n")
    n = max(n) if isinstance(n, list) else n
    doc_id = source.get("id")
    return (k is not None, (k or "").encode(), n is None, -(n or 0), doc_id is None, (doc_id or "").encode())


def assert_segments_sorted(shard) -> None:
    """Each segment's documents are in index-sort order, ties by seq_no (arrival order)."""
    for seg in shard.segments:
        docs = np.arange(seg.max_doc)
        keys = [
            expected_key(orjson.loads(s)) + (int(q),)
            for s, q in zip(seg.sources(docs), seg.seq_nos, strict=True)
        ]
        assert keys == sorted(keys), seg.name


def fill(node, names: list[str], rng: random.Random, batches: int = 12) -> None:
    """The same documents, deletes and updates into every index, one segment per batch."""
    for batch in range(batches):
        docs = [(f"{batch}-{i}", {**random_doc(rng), "id": f"{batch}-{i}"}) for i in range(25)]
        gone = rng.sample(range(25), 4)
        again = rng.sample(range(25), 3)  # re-indexed in the same buffer: the older copy is deleted
        for name in names:
            for doc_id, doc in docs:
                node.index_doc(name, doc_id, orjson.dumps(doc))
            for i in again:
                node.index_doc(name, f"{batch}-{i}", orjson.dumps({**docs[i][1], "n": 100 + i}))
            for i in gone:
                node.delete_doc(name, f"{batch}-{i}")
            if batch:
                node.delete_doc(name, f"{batch - 1}-{gone[0] ^ 1}")  # in a published segment
            node.indices[name].refresh()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    """Two single-shard indices with the same history, one index-sorted; merged, with deletes
    made while the merge was running."""
    rng = random.Random(11)
    with leafsearch.Node(tmp_path_factory.mktemp("isort") / "node", background=False) as node:
        admin.create_index(node, "plain", {"settings": {"number_of_shards": 1}, "mappings": MAPPING})
        admin.create_index(
            node, "sorted", {"settings": {"number_of_shards": 1, **SORTED}, "mappings": MAPPING}
        )
        fill(node, ["plain", "sorted"], rng)
        during = True
        merges = node.shard_services.merges
        real_merge = merges.merge

        def merge_then_delete(*args):
            nonlocal during
            origin = real_merge(*args)
            if during:  # the merge has read its parts: these deletes must be carried over
                for doc_id in ids(node, "plain", {"sort": ["_doc"], "size": 6}):
                    node.delete_doc("sorted", doc_id)
                    node.delete_doc("plain", doc_id)
                during = False
            return origin

        merges.merge = merge_then_delete  # type: ignore[method-assign]
        try:
            for name in ("sorted", "plain"):  # the deletes run during the sorted index's merge
                shard = node.indices[name].shards[0]
                assert len(shard.segments) >= 10
                assert shard.maybe_merge()
        finally:
            merges.merge = real_merge  # type: ignore[method-assign]
        fill(node, ["plain", "sorted"], random.Random(12), batches=2)  # and segments after it
        yield node


def ids(node, index: str, body: dict[str, Any]) -> list[str]:
    return [h["_id"] for h in search(node, index, body, {})["hits"]["hits"]]


def test_every_segment_is_stored_in_index_sort_order(pair) -> None:
    shard = pair.indices["sorted"].shards[0]
    assert any(seg.max_doc > 100 for seg in shard.segments)  # the merged one
    assert_segments_sorted(shard)
    plain = pair.indices["plain"].shards[0]
    assert sorted(s.max_doc for s in shard.segments) == sorted(s.max_doc for s in plain.segments)
    assert pair.indices["sorted"].doc_count() == pair.indices["plain"].doc_count()


def test_physical_order_is_the_index_sort_within_each_segment(pair) -> None:
    """`sort: _doc` walks segments in doc order: within each segment, the index sort."""
    hits = search(pair, "sorted", {"sort": ["_doc"], "size": 1000, "track_total_hits": True}, {})["hits"]
    keys = [expected_key(h["_source"].parsed()) for h in hits["hits"]]
    bounds = np.cumsum(
        [0] + [v.live_count for v in pair.indices["sorted"].shards[0].acquire_searcher().views]
    )
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        assert keys[lo:hi] == sorted(keys[lo:hi])
    assert len(keys) == hits["total"]["value"]


FULL = [{"k": {"order": "asc", "missing": "_first"}}, {"n": "desc"}, {"id": "asc"}]
#: (sort, whether the index sort covers it, whether it orders every document apart)
SORTS = [
    (FULL, True, True),
    ([{"k": {"order": "asc", "missing": "_first"}}], True, False),
    ([{"k": {"order": "asc", "missing": "_first"}}, {"n": {"order": "desc", "mode": "max"}}], True, False),
    ([*FULL, "_doc"], True, True),
    ([{"k": "asc"}], False, False),  # `missing` differs from the index sort's
    ([{"n": "desc"}], False, False),
    ([{"x": "asc"}, {"k": "desc"}, {"id": "desc"}], False, True),
    ([{"k": {"order": "desc", "missing": "_first"}}, {"n": "desc"}], False, False),
]


def sort_values(hits: list[dict[str, Any]]) -> list[list[Any]]:
    """The hits' sort values without `_doc` (the physical order is what index sorting changes)."""
    return [h["sort"][:3] for h in hits]


@pytest.mark.parametrize("seed", range(64))
def test_searches_answer_as_on_an_unsorted_index(pair, seed: int, monkeypatch) -> None:
    """Same pages (ties apart, which Elasticsearch also breaks by doc) as on an unsorted index,
    and the index sort's segments taken in their stored order, unsorted."""
    rng = random.Random(seed)
    presorted: list[bool] = []
    real_build = top_hits.build_order

    def spy(columns, **kwargs):
        presorted.append(kwargs.get("presorted", False))
        return real_build(columns, **kwargs)

    monkeypatch.setattr(top_hits, "build_order", spy)
    sort, covered, total_order = SORTS[seed % len(SORTS)]
    body: dict[str, Any] = {
        "query": rng.choice(
            [{"match_all": {}}, {"term": {"k": "b"}}, {"range": {"n": {"gte": 2}}}, {"match": {"t": "red"}}]
        ),
        "sort": sort,
        "from": rng.choice([0, 0, 4]),
        "size": rng.choice([1, 7, 30, 400]),
        "track_total_hits": True,
    }
    plain = search(pair, "plain", body, {})["hits"]
    limit = pair.sort_orders.max_bytes
    pair.sort_orders.resize(0)  # every segment's order is built again
    pair.sort_orders.resize(limit)
    presorted.clear()
    got = search(pair, "sorted", body, {})["hits"]
    assert presorted and all(presorted) if covered else not any(presorted)
    assert sort_values(got["hits"]) == sort_values(plain["hits"]), body
    if total_order:
        assert [h["_id"] for h in got["hits"]] == [h["_id"] for h in plain["hits"]]
    assert got["total"] == plain["total"]
    if plain["hits"]:
        cursor = plain["hits"][len(plain["hits"]) // 2]["sort"][: len(FULL)]
        after = {**body, "sort": sort[: len(FULL)], "from": 0, "search_after": cursor}
        expected = search(pair, "plain", after, {})["hits"]["hits"]
        assert sort_values(search(pair, "sorted", after, {})["hits"]["hits"]) == sort_values(expected)


def test_realtime_get_update_and_delete_find_ids_on_sorted_segments(pair) -> None:
    for doc_id in ("0-1", "5-9", "11-24", "12-3", "13-0", "3-5"):
        got, plain = pair.get_doc("sorted", doc_id), pair.get_doc("plain", doc_id)
        assert (got is None) == (plain is None)
        if got is not None:
            assert got["_source"].data == plain["_source"].data and got["_version"] == plain["_version"]
    found = pair.get_doc("sorted", "5-9") or pair.get_doc("sorted", "5-8")
    doc_id = found["_id"]
    pair.update_doc("sorted", doc_id, {"doc": {"n": 777}})
    after = pair.get_doc("sorted", doc_id)
    assert after["_version"] == found["_version"] + 1 and after["_source"].parsed()["n"] == 777
    before = pair.indices["sorted"].doc_count()
    pair.delete_doc("sorted", doc_id)
    assert pair.get_doc("sorted", doc_id) is None
    pair.indices["sorted"].refresh()
    assert pair.indices["sorted"].doc_count() == before - 1
    assert ids(pair, "sorted", {"query": {"ids": {"values": [doc_id]}}}) == []
    assert_segments_sorted(pair.indices["sorted"].shards[0])


def test_a_sorted_index_survives_a_crash(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(5)
    docs = {str(i): random_doc(rng) for i in range(60)}
    settings = {"number_of_shards": 2, **SORTED}
    with running_server(data) as (url, process), web.Client(base_url=url, timeout=60) as http:
        assert http.put("/logs", json={"settings": settings, "mappings": MAPPING}).status_code == 200
        for i, (doc_id, doc) in enumerate(docs.items()):
            refresh = "true" if i in (20, 40) else "false"
            assert http.put(f"/logs/_doc/{doc_id}", params={"refresh": refresh}, json=doc).status_code in (
                200,
                201,
            )
        process.kill()  # the last 19 documents only in the translog
        process.wait()
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=60) as http:
        stored = http.get("/logs/_settings").json()["logs"]["settings"]["index"]["sort"]
        assert stored == {
            "field": ["k", "n", "id"],
            "order": ["asc", "desc", "asc"],
            "missing": ["_first", "_last", "_last"],
        }
        assert http.post("/logs/_refresh").status_code == 200
        body = {"sort": FULL, "size": 100}
        hits = http.post("/logs/_search", json=body).json()["hits"]["hits"]
        assert sorted(h["_id"] for h in hits) == sorted(docs)
        keys = [expected_key(docs[h["_id"]]) for h in hits]
        assert keys == sorted(keys)
        for doc_id in ("0", "33", "59"):
            assert http.get(f"/logs/_doc/{doc_id}").json()["_source"] == docs[doc_id]
    with leafsearch.Node(data, background=False) as node:
        for shard in node.indices["logs"].shards:
            assert_segments_sorted(shard)


def test_pit_and_scroll_walks_give_every_document_once(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"number_of_shards": 2, **SORTED}, mappings=MAPPING)
    rng = random.Random(3)
    for part in range(4):
        bulk = b"".join(
            orjson.dumps({"index": {"_id": f"{part}-{i}"}}) + b"\n" + orjson.dumps(random_doc(rng)) + b"\n"
            for i in range(40)
        )
        response = http.post(
            f"/{name}/_bulk",
            params={"refresh": "true"},
            content=bulk,
            headers={"content-type": "application/x-ndjson"},
        )
        assert not response.json()["errors"]
    expected = sorted(f"{p}-{i}" for p in range(4) for i in range(40))
    pit = http.post(f"/{name}/_pit", params={"keep_alive": "1m"}).json()["id"]
    seen: list[str] = []
    body: dict[str, Any] = {"size": 17, "pit": {"id": pit}, "sort": FULL}
    while True:
        hits = http.post("/_search", json=body).json()["hits"]["hits"]
        if not hits:
            break
        seen.extend(h["_id"] for h in hits)
        body["search_after"] = hits[-1]["sort"]
    assert sorted(seen) == expected
    http.request("DELETE", "/_pit", json={"id": pit})
    for sort in (["_doc"], FULL):
        page = http.post(f"/{name}/_search", params={"scroll": "1m"}, json={"size": 23, "sort": sort}).json()
        seen = []
        while page["hits"]["hits"]:
            seen.extend(h["_id"] for h in page["hits"]["hits"])
            page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": page["_scroll_id"]}).json()
        assert sorted(seen) == expected
        http.request("DELETE", "/_search/scroll", json={"scroll_id": page["_scroll_id"]})
