"""`_script` sorts and stored scripts in searches, through the official client: the order and
sort values a script gives equal those computed from the documents, `search_after` and PIT and
scroll walks visit every document once in that order while clients write, stored scripts (by
`id`) run wherever inline ones do, and bad scripts or sorts are 400s that name what is wrong."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
import orjson
import pytest
from elasticsearch import Elasticsearch, NotFoundError

from tests import web
from tests.concurrency import readers_beside_a_writer

DOCS = 240
SCORE = "doc['n'].value % 13 * params.f + doc['price'].value"


def fill(http: httpx.Client, index: str, docs: int = DOCS, start: int = 0) -> None:
    lines = b"".join(
        orjson.dumps({"index": {"_index": index, "_id": str(i)}})
        + b"\n"
        + orjson.dumps({"n": i, "price": (i % 5) * 0.5, "tag": f"t{i % 9}"})
        + b"\n"
        for i in range(start, start + docs)
    )
    response = http.post(
        "/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert not response.json()["errors"]


def number_key(i: int, f: int = 3) -> float:
    return float(i % 13 * f + (i % 5) * 0.5)


def number_sort(order: str = "desc", f: int = 3, script: dict[str, Any] | None = None) -> list[dict]:
    script = script or {"source": SCORE, "params": {"f": f}}
    return [{"_script": {"type": "number", "script": script, "order": order}}, {"n": "asc"}]


def test_a_number_script_sort_orders_by_the_script_and_renders_doubles(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings={"properties": {"tag": {"type": "keyword"}}})
    fill(http, index)
    expected = sorted(range(DOCS), key=lambda i: (-number_key(i), i))
    hits = es.search(index=index, size=50, sort=number_sort())["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == [str(i) for i in expected[:50]]
    assert [hit["sort"] for hit in hits] == [[number_key(i), i] for i in expected[:50]]
    ascending = es.search(index=index, size=10, sort=number_sort("asc"))["hits"]["hits"]
    assert [hit["_id"] for hit in ascending] == [
        str(i) for i in sorted(range(DOCS), key=lambda i: (number_key(i), i))[:10]
    ]
    # A script that is not one column expression runs per document: the same order.
    looped = {
        "source": "def x = doc['n'].value % 13; return x * params.f + doc['price'].value;",
        "params": {"f": 3},
    }
    hits = es.search(index=index, size=50, sort=number_sort(script=looped))["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == [str(i) for i in expected[:50]]


def test_search_after_walks_a_script_sort_exactly_once(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 3})
    fill(http, index)
    seen: list[str] = []
    after = None
    while True:
        extra = {} if after is None else {"search_after": after}
        hits = es.search(index=index, size=17, sort=number_sort(), **extra)["hits"]["hits"]
        if not hits:
            break
        seen += [hit["_id"] for hit in hits]
        after = hits[-1]["sort"]
    assert seen == [str(i) for i in sorted(range(DOCS), key=lambda i: (-number_key(i), i))]


def test_a_string_script_sort_compares_strings(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2}, mappings={"properties": {"tag": {"type": "keyword"}}})
    fill(http, index)
    sort = [
        {"_script": {"type": "string", "script": "doc['tag'].value + '/' + doc['n'].value", "order": "desc"}}
    ]
    keys = sorted((f"t{i % 9}/{i}" for i in range(DOCS)), reverse=True)
    seen: list[list[Any]] = []
    after = None
    while len(seen) < DOCS:
        extra = {} if after is None else {"search_after": after}
        hits = es.search(index=index, size=40, sort=sort, **extra)["hits"]["hits"]
        assert hits
        seen += [hit["sort"] for hit in hits]
        after = hits[-1]["sort"]
    assert seen == [[key] for key in keys]


def test_a_pit_walk_and_a_scroll_by_a_script_sort_see_their_snapshot_once_while_clients_write(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index)
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            with web.Client(base_url=str(http.base_url)) as own:
                round_ = 0
                while not stop.is_set():
                    start = DOCS + 1000 * worker + 20 * round_
                    fill(own, index, 20, start)
                    own.delete(f"/{index}/_doc/{round_ % DOCS}?refresh=true")
                    round_ += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(w,)) for w in range(2)]
    for thread in writers:
        thread.start()
    try:
        pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
        seen: list[str] = []
        after = None
        while True:
            extra = {} if after is None else {"search_after": after}
            page = es.search(pit={"id": pit, "keep_alive": "1m"}, size=25, sort=number_sort(), **extra)
            hits = page["hits"]["hits"]
            if not hits:
                break
            seen += [hit["_id"] for hit in hits]
            after = hits[-1]["sort"]
        es.close_point_in_time(id=pit)
        scrolled = es.search(index=index, scroll="1m", size=30, sort=number_sort("asc"))
        ids = [hit["_id"] for hit in scrolled["hits"]["hits"]]
        snapshot_total = scrolled["hits"]["total"]["value"]
        while True:
            scrolled = es.scroll(scroll_id=scrolled["_scroll_id"], scroll="1m")
            if not scrolled["hits"]["hits"]:
                break
            ids += [hit["_id"] for hit in scrolled["hits"]["hits"]]
        es.clear_scroll(scroll_id=scrolled["_scroll_id"])
    finally:
        stop.set()
        for thread in writers:
            thread.join()
    assert not errors
    assert len(seen) == len(set(seen)) and len(ids) == len(set(ids)) == snapshot_total
    keys = [number_key(int(i)) for i in seen]
    assert keys == sorted(keys, reverse=True)
    original = [i for i in seen if int(i) < DOCS]
    assert original == [str(i) for i in sorted(map(int, original), key=lambda i: (-number_key(i), i))]


def test_scripts_stored_by_id_run_in_queries_script_fields_and_sorts(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index)
    es.put_script(id="sort-key", script={"lang": "painless", "source": SCORE})
    es.put_script(id="keep", script={"lang": "painless", "source": "doc['n'].value % params.m == 0"})
    try:
        body = {
            "query": {
                "script_score": {
                    "query": {"script": {"script": {"id": "keep", "params": {"m": 4}}}},
                    "script": {"id": "sort-key", "params": {"f": 1}},
                }
            },
            "script_fields": {"key": {"script": {"id": "sort-key", "params": {"f": 2}}}},
            "size": 100,
        }
        hits = es.search(index=index, **body)["hits"]["hits"]
        kept = [i for i in range(DOCS) if i % 4 == 0]
        assert sorted(int(hit["_id"]) for hit in hits) == kept
        for hit in hits:
            i = int(hit["_id"])
            assert hit["_score"] == pytest.approx(number_key(i, 1))
            assert hit["fields"]["key"] == [number_key(i, 2)]
        by_id = es.search(
            index=index, size=5, sort=number_sort(script={"id": "sort-key", "params": {"f": 3}})
        )
        inline = es.search(index=index, size=5, sort=number_sort())
        assert [h["sort"] for h in by_id["hits"]["hits"]] == [h["sort"] for h in inline["hits"]["hits"]]
        assert es.count(index=index, query={"script": {"script": {"id": "keep", "params": {"m": 4}}}})[
            "count"
        ] == len(kept)
        # A stored script replaced runs its new source in the next search.
        es.put_script(id="keep", script={"lang": "painless", "source": "doc['n'].value < params.m"})
        assert (
            es.count(index=index, query={"script": {"script": {"id": "keep", "params": {"m": 4}}}})["count"]
            == 4
        )
        exported = http.post(
            f"/{index}/_export", json={"query": {"script": {"script": {"id": "keep", "params": {"m": 4}}}}}
        )
        assert exported.status_code == 200, exported.text
        rows = [orjson.loads(line) for line in exported.text.splitlines() if line]
        assert sorted(int(row["_id"]) for row in rows if "_id" in row) == [0, 1, 2, 3]
        with pytest.raises(NotFoundError) as missing:
            es.search(index=index, query={"script": {"script": {"id": "nope"}}})
        assert missing.value.body["error"]["type"] == "resource_not_found_exception"
        assert missing.value.body["error"]["reason"] == "unable to find script [nope] in cluster state"
    finally:
        es.delete_script(id="sort-key")
        es.delete_script(id="keep")


def test_scripted_searches_from_several_clients_while_writers_run(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index)
    stop = threading.Event()
    failures: list[str] = []

    def write() -> None:
        with web.Client(base_url=str(http.base_url)) as own:
            round_ = 0
            while not stop.is_set():
                fill(own, index, 10, DOCS + 10 * round_)
                round_ += 1

    def read(worker: int) -> None:
        with web.Client(base_url=str(http.base_url)) as own:
            for _ in range(8):
                body = {
                    "size": 20,
                    "track_scores": True,
                    "query": {
                        "script_score": {
                            "query": {
                                "script": {
                                    "script": {
                                        "source": "doc['n'].value % 2 == params.r",
                                        "params": {"r": worker % 2},
                                    }
                                }
                            },
                            "script": {"source": SCORE, "params": {"f": 3}},
                        }
                    },
                    "sort": number_sort("asc"),
                }
                answer = own.post(f"/{index}/_search", json=body)
                if answer.status_code != 200:
                    failures.append(answer.text)
                    continue
                hits = answer.json()["hits"]["hits"]
                if any(
                    int(h["_id"]) % 2 != worker % 2 or h["_score"] != pytest.approx(number_key(int(h["_id"])))
                    for h in hits
                ):
                    failures.append(f"wrong hits {hits[:2]}")
                keys = [h["sort"][0] for h in hits]
                if keys != sorted(keys):
                    failures.append(f"out of order {keys}")

    readers_beside_a_writer(write, [partial(read, w) for w in range(4)], stop)
    assert not failures, failures[:3]


@pytest.mark.parametrize(
    ("sort", "kind", "reason"),
    [
        (
            {"_script": {"type": "nmber", "script": "1"}},
            "x_content_parse_exception",
            "[_script] failed to parse field [type]",
        ),
        ({"_script": {"script": "1"}}, "illegal_argument_exception", "Required [type]"),
        ({"_script": {"type": "number"}}, "illegal_argument_exception", "Required [script]"),
        (
            {"_script": {"type": "number", "script": "1", "size": 2}},
            "x_content_parse_exception",
            "[_script] unknown field [size]",
        ),
        (
            {"_script": {"type": "number", "script": "'a'"}},
            "illegal_argument_exception",
            "script sort of type [number] must return a number, got ['a']",
        ),
        (
            {"_script": {"type": "string", "script": "doc['n'].value"}},
            "illegal_argument_exception",
            "script sort of type [string] must return a string, got [0]",
        ),
        ({"_script": {"type": "number", "script": "doc['n'].value +"}}, "script_exception", "compile error"),
        (
            {"_script": {"type": "number", "script": "doc['n'].value / 0"}},
            "script_exception",
            "runtime error",
        ),
        (
            {"_script": {"type": "number", "script": {"id": "x", "lang": "painless"}}},
            "x_content_parse_exception",
            "[_script] failed to parse field [script]",
        ),
    ],
)
def test_bad_script_sorts_are_400s_naming_the_problem(
    http: httpx.Client, new_index: Callable[..., str], sort: dict, kind: str, reason: str
) -> None:
    index = new_index()
    fill(http, index, 5)
    response = http.post(f"/{index}/_search", json={"sort": [sort]})
    assert response.status_code == 400, response.text
    root = response.json()["error"]["root_cause"][0]
    assert (root["type"], root["reason"]) == (kind, reason)
    if kind == "script_exception":
        assert root["script_stack"][1].endswith("^---- HERE") and "position" in root
