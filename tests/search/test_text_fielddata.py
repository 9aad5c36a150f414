"""`fielddata: true` on a text field, through the official client and HTTP: terms aggregations and
sorts over each document's analysed tokens (across shards and segments, with the field's
analyzer), enabled later by a mapping update, beside concurrent writers; without it, the
Elasticsearch 400 stays."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
from conftest import error_of, search_ok
from elasticsearch import Elasticsearch

MAPPINGS = {
    "properties": {
        "msg": {"type": "text", "fielddata": True},
        "stemmed": {"type": "text", "analyzer": "english", "fielddata": True},
        "plain": {"type": "text"},
    }
}
DOCS = ["The quick brown fox", "the lazy dog", "Quick quick fox", "zebra"]


def _index(http: httpx.Client, new_index: Callable) -> str:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS)
    for i, text in enumerate(DOCS):
        assert (
            http.put(f"/{index}/_doc/{i}", json={"msg": text, "stemmed": text, "plain": text}).status_code
            == 201
        )
        if i == 1:
            http.post(f"/{index}/_refresh")  # two segments on some shard
    http.post(f"/{index}/_refresh")
    return index


def _buckets(response: dict, name: str = "w") -> list[tuple[str, int]]:
    return [(b["key"], b["doc_count"]) for b in response["aggregations"][name]["buckets"]]


def test_terms_aggregation_over_tokens(es: Elasticsearch, http: httpx.Client, new_index: Callable) -> None:
    index = _index(http, new_index)
    response = es.search(index=index, size=0, aggs={"w": {"terms": {"field": "msg", "size": 20}}})
    assert _buckets(response) == [
        ("fox", 2),
        ("quick", 2),
        ("the", 2),
        ("brown", 1),
        ("dog", 1),
        ("lazy", 1),
        ("zebra", 1),
    ]
    stemmed = search_ok(http, index, {"size": 0, "aggs": {"w": {"terms": {"field": "stemmed", "size": 3}}}})
    assert _buckets(stemmed) == [("fox", 2), ("quick", 2), ("brown", 1)]  # no stop words, stemmed terms
    caps = http.get(f"/{index}/_field_caps?fields=msg,plain").json()["fields"]
    assert caps["msg"]["text"]["aggregatable"] is True
    assert caps["plain"]["text"]["aggregatable"] is False


def test_sort_by_smallest_or_largest_token(http: httpx.Client, new_index: Callable) -> None:
    index = _index(http, new_index)
    ascending = search_ok(http, index, {"sort": [{"msg": "asc"}], "_source": False})["hits"]["hits"]
    assert [(h["_id"], h["sort"]) for h in ascending] == [
        ("0", ["brown"]),
        ("1", ["dog"]),
        ("2", ["fox"]),
        ("3", ["zebra"]),
    ]
    descending = search_ok(http, index, {"sort": [{"msg": "desc"}], "_source": False})
    assert [h["sort"][0] for h in descending["hits"]["hits"]] == ["zebra", "the", "the", "quick"]


def test_without_fielddata_the_elasticsearch_error_stays(http: httpx.Client, new_index: Callable) -> None:
    index = _index(http, new_index)
    response = http.post(f"/{index}/_search", json={"size": 0, "aggs": {"w": {"terms": {"field": "plain"}}}})
    assert response.status_code == 400
    assert response.json()["error"]["root_cause"][0]["reason"].startswith(
        f"Fielddata is disabled on [plain] in [{index}]. Text fields are not optimised"
    )
    response = http.post(f"/{index}/_search", json={"sort": [{"plain": "asc"}]})
    assert response.status_code == 400


def test_enabled_by_a_mapping_update(http: httpx.Client, new_index: Callable) -> None:
    index = _index(http, new_index)
    response = http.put(
        f"/{index}/_mapping", json={"properties": {"plain": {"type": "text", "fielddata": True}}}
    )
    assert response.status_code == 200, response.text
    result = search_ok(http, index, {"size": 0, "aggs": {"w": {"terms": {"field": "plain", "size": 1}}}})
    assert _buckets(result) == [("fox", 2)]


def test_aggregations_beside_writers(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(mappings=MAPPINGS)
    errors: list[str] = []

    def write(worker: int) -> None:
        for i in range(20):
            r = http.put(f"/{index}/_doc/{worker}-{i}", json={"msg": f"common w{worker}"})
            if r.status_code != 201:
                errors.append(r.text)
            if i % 4 == 0:
                http.post(f"/{index}/_refresh")

    def read() -> None:
        for _ in range(20):
            r = http.post(f"/{index}/_search", json={"size": 0, "aggs": {"w": {"terms": {"field": "msg"}}}})
            if r.status_code != 200:
                errors.append(r.text)
                continue
            counts = dict(_buckets(r.json()))
            if counts and counts.get("common", 0) != counts.get("w0", 0) + counts.get("w1", 0):
                errors.append(str(counts))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    http.post(f"/{index}/_refresh")
    result = search_ok(http, index, {"size": 0, "aggs": {"w": {"terms": {"field": "msg"}}}})
    assert _buckets(result) == [("common", 40), ("w0", 20), ("w1", 20)]


def test_fielddata_must_be_a_boolean(http: httpx.Client, index_name: str) -> None:
    body = {"mappings": {"properties": {"t": {"type": "text", "fielddata": "sometimes"}}}}
    response = http.put(f"/{index_name}", json=body)
    assert response.status_code == 400
    assert error_of(response)["type"] == "mapper_parsing_exception"
