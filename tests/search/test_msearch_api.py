"""`_msearch` through the official client, elasticsearch-dsl's MultiSearch and raw NDJSON: every
search answered in its place, failures included, PIT searches inside, while writes go on."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import orjson
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch
from elasticsearch_dsl import MultiSearch, Search

NDJSON = {"content-type": "application/x-ndjson"}


def _ndjson(*lines: dict) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


@pytest.fixture
def two_indices(es: Elasticsearch, new_index: Callable[..., str]) -> tuple[str, str]:
    a = new_index(mappings={"properties": {"tag": {"type": "keyword"}, "n": {"type": "long"}}}, suffix="-a")
    b = new_index(mappings={"properties": {"tag": {"type": "keyword"}, "n": {"type": "long"}}}, suffix="-b")
    for i in range(6):
        es.index(index=a, id=str(i), document={"tag": "x" if i % 2 else "y", "n": i})
        es.index(index=b, id=str(i), document={"tag": "x", "n": 10 + i})
    es.indices.refresh(index=f"{a},{b}")
    return a, b


def test_msearch_answers_each_search_in_place(es: Elasticsearch, two_indices: tuple[str, str]) -> None:
    a, b = two_indices
    response = es.msearch(
        searches=[
            {"index": a},
            {"query": {"term": {"tag": "x"}}, "sort": ["n"]},
            {"index": "does-not-exist"},
            {"query": {"match_all": {}}},
            {"index": [a, b]},
            {"size": 0, "aggs": {"top": {"max": {"field": "n"}}}},
            {},  # no index in the header: the searches run on every index, as `_search` does
            {"size": 0, "query": {"term": {"tag": "x"}}},
        ]
    ).body
    assert isinstance(response["took"], int)
    first, missing, both, everywhere = response["responses"]
    assert first["status"] == 200
    assert [hit["_source"]["n"] for hit in first["hits"]["hits"]] == [1, 3, 5]
    assert missing["status"] == 404
    assert missing["error"]["type"] == "index_not_found_exception"
    assert missing["error"]["reason"] == "no such index [does-not-exist]"
    assert both["aggregations"]["top"]["value"] == 15
    assert both["_shards"]["successful"] == both["_shards"]["total"] == 2
    assert everywhere["hits"]["total"]["value"] >= 9


def test_msearch_path_index_and_header_options(
    es: Elasticsearch, http: httpx.Client, two_indices: tuple[str, str]
) -> None:
    a, b = two_indices
    body = _ndjson(
        {},
        {"size": 0},
        {"index": b, "request_cache": "true", "preference": "_local", "search_type": "query_then_fetch"},
        {"size": 0},
        {"index": "nope-*", "allow_no_indices": False},
        {"size": 0},
        {"index": "nope", "ignore_unavailable": True},
        {"size": 0},
    )
    response = http.post(f"/{a}/_msearch", content=body, headers=NDJSON, params={"typed_keys": "true"})
    assert response.status_code == 200, response.text
    totals = [r.get("hits", {}).get("total", {}).get("value") for r in response.json()["responses"]]
    assert totals == [6, 6, None, 0]
    refused = response.json()["responses"][2]
    assert (refused["status"], refused["error"]["type"]) == (404, "index_not_found_exception")
    as_int = es.msearch(index=a, searches=[{}, {"query": {"match_all": {}}}], rest_total_hits_as_int=True)
    assert as_int["responses"][0]["hits"]["total"] == 6


def test_msearch_search_failures_keep_their_status(http: httpx.Client, two_indices: tuple[str, str]) -> None:
    a, _ = two_indices
    body = _ndjson({"index": a}, {"from": 1, "search_after": [1], "sort": ["n"]}, {"index": a}, {"size": 1})
    responses = http.post("/_msearch", content=body, headers=NDJSON).json()["responses"]
    assert responses[0]["status"] == 400
    assert responses[0]["error"]["type"] == "action_request_validation_exception"
    assert "[from] parameter must be set to 0 when [search_after] is used" in responses[0]["error"]["reason"]
    assert responses[1]["status"] == 200 and len(responses[1]["hits"]["hits"]) == 1


@pytest.mark.parametrize(
    ("body", "status", "error_type", "reason"),
    [
        (
            b'{"index": "x", "size": 1}\n{}\n',
            400,
            "illegal_argument_exception",
            "key [size] is not supported",
        ),
        (b"{}\n{}", 400, "illegal_argument_exception", "must be terminated by a newline"),
        (b"{}\n{not json}\n", 400, "x_content_parse_exception", "[2:"),
        (b'{}\n{"query": {"nope": {}}}\n', 400, "parsing_exception", "unknown query [nope]"),
        (
            b'{"request_cache": "maybe"}\n{}\n',
            400,
            "illegal_argument_exception",
            "[request_cache] to boolean",
        ),
        (b"\n", 400, "action_request_validation_exception", "no requests added"),
    ],
)
def test_msearch_request_errors_fail_the_whole_request(
    http: httpx.Client, body: bytes, status: int, error_type: str, reason: str
) -> None:
    response = http.post("/_msearch", content=body, headers=NDJSON)
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["type"] == error_type and reason in error["reason"], error


def test_msearch_max_concurrent_searches(
    es: Elasticsearch, http: httpx.Client, two_indices: tuple[str, str]
) -> None:
    a, b = two_indices
    searches = []
    for i in range(12):
        searches += [{"index": a if i % 2 else b}, {"query": {"term": {"n": i % 6 + (0 if i % 2 else 10)}}}]
    for limit in (1, 3, 50):
        responses = es.msearch(searches=searches, max_concurrent_searches=limit)["responses"]
        assert [r["hits"]["hits"][0]["_source"]["n"] for r in responses] == [
            i % 6 + (0 if i % 2 else 10) for i in range(12)
        ]
    refused = http.post("/_msearch?max_concurrent_searches=0", content=_ndjson({}, {}), headers=NDJSON)
    assert error_of(refused)["reason"] == "maxConcurrentSearchRequests must be positive"


def test_msearch_pit_searches(es: Elasticsearch, http: httpx.Client, two_indices: tuple[str, str]) -> None:
    a, _ = two_indices
    pit = es.open_point_in_time(index=a, keep_alive="1m")["id"]
    try:
        es.index(index=a, id="new", document={"tag": "x", "n": 99}, refresh=True)  # not in the PIT
        body = _ndjson(
            {},
            {"pit": {"id": pit, "keep_alive": "1m"}, "size": 100, "sort": ["n"]},
            {},
            {"pit": {"id": "bm90IGEgcGl0"}},
        )
        in_pit, unknown = http.post("/_msearch", content=body, headers=NDJSON).json()["responses"]
        assert [h["_source"]["n"] for h in in_pit["hits"]["hits"]] == [0, 1, 2, 3, 4, 5]
        assert in_pit["pit_id"]
        assert unknown["status"] >= 400 and "error" in unknown
        assert es.count(index=a)["count"] == 7
        # A PIT search that names indices (or routing, preference) fails the whole request, as
        # Elasticsearch's RestMultiSearchAction refuses it while reading the body.
        for header in ({"index": a}, {"routing": "r"}, {"preference": "_local"}):
            refused = http.post(
                "/_msearch", content=_ndjson({}, {}, header, {"pit": {"id": pit}}), headers=NDJSON
            )
            assert refused.status_code == 400
            error = error_of(refused)
            assert error["type"] == "action_request_validation_exception"
            assert "cannot be used with point in time" in error["reason"]
    finally:
        es.close_point_in_time(id=pit)


def test_dsl_multisearch(es: Elasticsearch, two_indices: tuple[str, str]) -> None:
    a, b = two_indices
    ms = MultiSearch(using=es, index=a)
    ms = ms.add(Search().filter("term", tag="y").sort("n"))
    ms = ms.add(Search(index=b).query("range", n={"gte": 14}).sort("-n"))
    first, second = ms.execute()
    assert [hit.n for hit in first] == [0, 2, 4]
    assert [hit.n for hit in second] == [15, 14]


def test_concurrent_msearch_beside_writes(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """Several msearch clients at once while a writer adds documents: every answer is whole (each
    search sees a snapshot whose total agrees with the hits it pages, and totals never go back)."""
    name = new_index(mappings={"properties": {"n": {"type": "long"}}})
    es.index(index=name, id="seed", document={"n": -1}, refresh=True)
    stop = threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(300):
                es.index(index=name, id=str(i), document={"n": i}, refresh=i % 10 == 0)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)
        finally:
            stop.set()

    def reader() -> None:
        last = [0, 0, 0]  # per position: a later request never sees fewer documents
        try:
            while not stop.is_set():
                searches = [{"index": name}, {"size": 1000, "track_total_hits": True}] * 3
                searches += [{"index": "missing-" + name}, {}]
                responses = es.msearch(searches=searches)["responses"]
                assert responses[-1]["status"] == 404
                for position, response in enumerate(responses[:-1]):
                    assert response["status"] == 200
                    total = response["hits"]["total"]["value"]
                    assert total == len(response["hits"]["hits"]) >= last[position]
                    last[position] = total
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    es.indices.refresh(index=name)
    final = es.msearch(searches=[{"index": name}, {"size": 0}])["responses"][0]
    assert final["hits"]["total"]["value"] == 301
