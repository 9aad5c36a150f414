"""Range field types through the HTTP API and the official client: mappings, intervals indexed
(objects of bounds, arrays, CIDR blocks), `range` queries by `relation`, `term` on a range field,
malformed values refused, and writers rewriting intervals while readers query them."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch, helpers

PROPERTIES = {
    "i": {"type": "integer_range"},
    "l": {"type": "long_range"},
    "f": {"type": "float_range"},
    "d": {"type": "double_range"},
    "t": {"type": "date_range", "format": "yyyy-MM-dd||epoch_millis"},
    "ip": {"type": "ip_range"},
}


@pytest.fixture
def ranges(es: Elasticsearch, index_name: str) -> Iterator[str]:
    es.indices.create(index=index_name, settings={"number_of_shards": 2}, mappings={"properties": PROPERTIES})
    docs = {
        "a": {
            "i": {"gte": 1, "lte": 5},
            "l": {"gt": 10, "lt": 20},
            "f": {"gte": 0.5, "lte": 1.5},
            "d": {"from": 1.0, "to": 2.0, "include_upper": False},
            "t": {"gte": "2020-01-01", "lte": "2020-01-31"},
            "ip": "10.0.0.0/8",
        },
        "b": {
            "i": {"gte": 3, "lte": 10},
            "l": {"gte": 15},
            "f": {"gt": 1.5},
            "d": {"lte": 0},
            "t": {"gte": "2020-01-15", "lt": "2020-03-01"},
            "ip": {"gte": "192.168.0.1", "lte": "192.168.0.9"},
        },
        "c": {"i": [{"gte": 20, "lte": 30}, {"gt": 40}], "l": None, "t": {"gte": 1577836800000}},
    }
    helpers.bulk(es, ({"_index": index_name, "_id": k, "_source": v} for k, v in docs.items()), refresh=True)
    yield index_name
    es.indices.delete(index=index_name)


def ids(es: Elasticsearch, index: str, query: dict) -> list[str]:
    return sorted(h["_id"] for h in es.search(index=index, query=query, size=10)["hits"]["hits"])


def test_mapping_and_source(es: Elasticsearch, ranges: str) -> None:
    mapped = es.indices.get_mapping(index=ranges)[ranges]["mappings"]["properties"]
    assert {name: body["type"] for name, body in mapped.items()} == {
        k: v["type"] for k, v in PROPERTIES.items()
    }
    assert es.get(index=ranges, id="a")["_source"]["ip"] == "10.0.0.0/8"  # the source as sent


@pytest.mark.parametrize(
    ("field", "query", "expected"),
    [
        ("i", {"gte": 2, "lte": 6}, ["a", "b"]),
        ("i", {"gte": 2, "lte": 6, "relation": "within"}, []),
        ("i", {"gte": 0, "lte": 6, "relation": "within"}, ["a"]),
        ("i", {"gte": 4, "lte": 4, "relation": "contains"}, ["a", "b"]),
        ("i", {"gt": 5, "lt": 20}, ["b"]),  # exclusive ends: 6..19
        ("i", {"gte": 100}, ["c"]),  # `gt: 40` is open above
        ("l", {"gte": 11, "lte": 11}, ["a"]),  # `gt: 10` starts at 11
        ("l", {"gte": 20, "lte": 20}, ["b"]),  # `lt: 20` ends at 19
        ("f", {"gte": 1.5, "lte": 1.5}, ["a"]),
        ("f", {"gt": 1.5}, ["b"]),
        ("d", {"gte": 2.0, "lte": 3.0}, []),  # `to: 2.0` excluded
        ("d", {"lte": -1e300}, ["b"]),
        ("t", {"gte": "2020-01-20", "lte": "2020-01-25", "relation": "contains"}, ["a", "b", "c"]),
        ("t", {"gte": "2020-02-01", "lte": "2020-02-01"}, ["b", "c"]),
        ("t", {"gte": "2019-01-01", "lte": "2021-01-01", "relation": "within"}, ["a", "b"]),
        ("ip", {"gte": "10.1.2.3", "lte": "10.1.2.3"}, ["a"]),
        ("ip", {"gte": "192.168.0.5", "lte": "192.168.0.20"}, ["b"]),
        ("ip", {"gte": "192.168.0.5", "lte": "192.168.0.20", "relation": "within"}, []),
    ],
)
def test_range_queries_by_relation(
    es: Elasticsearch, ranges: str, field: str, query: dict, expected: list
) -> None:
    assert ids(es, ranges, {"range": {field: query}}) == expected


def test_term_queries_and_bool(es: Elasticsearch, ranges: str) -> None:
    assert ids(es, ranges, {"term": {"i": 4}}) == ["a", "b"]
    assert ids(es, ranges, {"term": {"ip": "10.9.9.9"}}) == ["a"]
    assert ids(es, ranges, {"bool": {"filter": [{"term": {"i": 25}}], "must_not": [{"term": {"i": 4}}]}}) == [
        "c"
    ]
    assert ids(es, ranges, {"exists": {"field": "l"}}) == ["a", "b"]


def test_malformed_intervals_are_refused(http: httpx.Client, ranges: str) -> None:
    for source in (
        {"i": 5},
        {"i": {"gte": 10, "lte": 1}},
        {"i": {"above": 1}},
        {"i": {"gte": 2**40}},
        {"ip": "not-an-address"},
        {"t": {"gte": "yesterday"}},
    ):
        response = http.put(f"/{ranges}/_doc/bad", json=source)
        assert response.status_code == 400, source
        assert error_of(response)["type"] == "document_parsing_exception"
    assert http.get(f"/{ranges}/_doc/bad").status_code == 404
    bad_relation = http.post(
        f"/{ranges}/_search", json={"query": {"range": {"i": {"gte": 1, "relation": "over"}}}}
    )
    assert bad_relation.status_code == 400


def test_queries_beside_writers(es: Elasticsearch, ranges: str) -> None:
    """Writers move documents' intervals between two places while readers query: each document
    is found exactly where one of its versions put it, and never in both places at once."""
    stop = threading.Event()
    bad: list[object] = []

    def writer(w: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            doc = {"i": {"gte": 100, "lte": 110}} if n % 2 else {"i": {"gte": 200, "lte": 210}}
            es.index(index=ranges, id=f"w{w}", document=doc, refresh=n % 3 == 0)

    def reader() -> None:
        for _ in range(25):
            low = set(ids(es, ranges, {"range": {"i": {"gte": 100, "lte": 110, "relation": "within"}}}))
            # In one snapshot no writer's document holds both values: only `c` (open above) does.
            both = ids(es, ranges, {"bool": {"filter": [{"term": {"i": 105}}, {"term": {"i": 205}}]}})
            if (low - {"w0", "w1"}) or both != ["c"]:
                bad.append((low, both))

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in writers + readers:
        thread.start()
    for thread in readers:
        thread.join()
    stop.set()
    for thread in writers:
        thread.join()
    assert not bad


def test_what_range_fields_do_not_offer_yet_is_refused(http: httpx.Client, ranges: str) -> None:
    """Sorting and aggregating a range field other than by histogram answer "not supported by
    leafsearch" (never the stored terms)."""
    for body in ({"sort": ["i"]}, {"size": 0, "aggs": {"h": {"terms": {"field": "i"}}}}):
        response = http.post(f"/{ranges}/_search", json=body)
        assert response.status_code == 400
        assert (
            "range field [i] is not supported by leafsearch"
            in response.json()["error"]["root_cause"][0]["reason"]
        )


def test_a_pit_walk_of_a_range_query_is_exactly_once_beside_writers(
    es: Elasticsearch, index_name: str
) -> None:
    """A PIT walk of a `range` query by relation, in small `search_after` pages, while a client
    rewrites, deletes and adds intervals (refreshing) ahead of the walk's cursor, one write
    between pages: the walk gives exactly the documents that matched when the PIT opened, each
    once, in sort order."""
    es.indices.create(
        index=index_name,
        settings={"number_of_shards": 3},
        mappings={"properties": {"i": {"type": "integer_range"}, "n": {"type": "long"}}},
    )
    intervals = {k: (k % 97, k % 97 + k % 13) for k in range(300)}
    helpers.bulk(
        es,
        (
            {"_index": index_name, "_id": str(k), "_source": {"i": {"gte": lo, "lte": hi}, "n": k}}
            for k, (lo, hi) in intervals.items()
        ),
        refresh=True,
    )
    truth = sorted(k for k, (lo, hi) in intervals.items() if lo <= 60 and hi >= 40)  # intersects
    query = {"range": {"i": {"gte": 40, "lte": 60, "relation": "intersects"}}}
    pit = es.open_point_in_time(index=index_name, keep_alive="1m")["id"]
    stop = threading.Event()
    wrote = threading.Event()

    def writer() -> None:
        k = 0
        while not stop.is_set():
            k += 1
            n = 299 - k % 300  # ahead of the cursor: a walk off its snapshot would see each change
            if k % 3 == 0:
                es.options(ignore_status=404).delete(index=index_name, id=str(n), refresh=True)
            else:  # into the queried interval, or out of it, keeping its place in the sort
                lo = 50 if k % 2 else 90
                es.index(
                    index=index_name,
                    id=str(n),
                    document={"i": {"gte": lo, "lte": lo + 5}, "n": n},
                    refresh=True,
                )
            wrote.set()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen: list[int] = []
        after = None
        while True:
            body: dict = {
                "query": query,
                "sort": [{"n": "asc"}],
                "size": 7,
                "pit": {"id": pit, "keep_alive": "1m"},
            }
            if after is not None:
                body["search_after"] = after
            hits = es.search(**body)["hits"]["hits"]
            if not hits:
                break
            seen += [h["_source"]["n"] for h in hits]
            after = hits[-1]["sort"]
            wrote.clear()
            assert wrote.wait(60), "the writer wrote between two pages"
    finally:
        stop.set()
        thread.join()
        es.close_point_in_time(id=pit)
    assert seen == truth
