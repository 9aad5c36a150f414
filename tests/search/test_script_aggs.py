"""Scripts in aggregations, through the official client: a `script` in place of `field` gives
the buckets and metrics computed from the documents (over columns or per document alike), a
value script sees each value as `_value`, `value_type` says what the values are, stored scripts
run by `id`, concurrent clients aggregate by scripts while writers run, and bad scripts are
400s naming the problem."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from elasticsearch import Elasticsearch

from tests import web
from tests.concurrency import readers_beside_a_writer

DOCS = 300
MAPPING = {
    "properties": {
        "n": {"type": "long"},
        "price": {"type": "double"},
        "tag": {"type": "keyword"},
        "day": {"type": "date"},
    }
}


def doc(i: int) -> dict[str, Any]:
    return {"n": i, "price": (i % 8) * 1.25, "tag": f"t{i % 4}", "day": f"2024-0{1 + i % 3}-1{i % 9}"}


def fill(http: httpx.Client, index: str, start: int = 0, count: int = DOCS) -> None:
    lines = b"".join(
        orjson.dumps({"index": {"_index": index, "_id": str(i)}}) + b"\n" + orjson.dumps(doc(i)) + b"\n"
        for i in range(start, start + count)
    )
    response = http.post(
        "/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert not response.json()["errors"]


@pytest.fixture
def index(http: httpx.Client, new_index: Callable[..., str]) -> str:
    name = new_index(settings={"number_of_shards": 2}, mappings=MAPPING)
    fill(http, name)
    return name


def aggs_of(es: Elasticsearch, index: str, aggs: dict[str, Any]) -> dict[str, Any]:
    return es.search(index=index, size=0, aggs=aggs)["aggregations"]


def buckets(agg: dict[str, Any]) -> dict[Any, int]:
    return {b["key"]: b["doc_count"] for b in agg["buckets"]}


def test_terms_by_a_script_and_by_a_value_script(es: Elasticsearch, index: str) -> None:
    found = aggs_of(
        es,
        index,
        {
            "strings": {"terms": {"script": "doc['tag'].value + '/' + (doc['n'].value % 2)", "size": 20}},
            "longs": {
                "terms": {
                    "script": {"source": "doc['n'].value % params.m", "params": {"m": 5}},
                    "value_type": "long",
                }
            },
            "upper": {"terms": {"field": "tag", "script": "_value.toUpperCase()"}},
            "several": {"terms": {"script": "[doc['tag'].value, 'all']", "size": 10}},
        },
    )
    assert buckets(found["strings"]) == dict(Counter(f"t{i % 4}/{i % 2}" for i in range(DOCS)))
    assert buckets(found["longs"]) == dict(Counter(i % 5 for i in range(DOCS)))
    assert buckets(found["upper"]) == dict(Counter(f"T{i % 4}" for i in range(DOCS)))
    assert buckets(found["several"]) == {**Counter(f"t{i % 4}" for i in range(DOCS)), "all": DOCS}


def test_metrics_histograms_and_ranges_by_scripts(es: Elasticsearch, index: str) -> None:
    values = [i + (i % 8) * 1.25 for i in range(DOCS)]
    found = aggs_of(
        es,
        index,
        {
            "avg": {"avg": {"script": "doc['n'].value + doc['price'].value"}},
            "sum": {"sum": {"field": "n", "script": {"source": "_value * params.k", "params": {"k": 3}}}},
            "min": {"min": {"script": "doc['n'].value - doc['price'].value"}},
            "max": {"max": {"script": "def x = doc['n'].value; return x * 2;"}},  # per document
            "stats": {"stats": {"script": "doc['n'].value + doc['price'].value"}},
            "count": {"value_count": {"script": "doc['tag'].value"}},
            "distinct": {"cardinality": {"script": "doc['tag'].value + doc['n'].value % 3"}},
            "hist": {"histogram": {"script": "doc['price'].value * 2", "interval": 5}},
            "range": {
                "range": {
                    "script": "doc['n'].value * 2",
                    "ranges": [{"to": 100}, {"from": 100, "to": 400}, {"from": 400}],
                }
            },
            "months": {
                "date_histogram": {
                    "script": "doc['day'].value",
                    "calendar_interval": "month",
                    "format": "yyyy-MM",
                }
            },
        },
    )
    assert found["avg"]["value"] == pytest.approx(sum(values) / DOCS)
    assert found["sum"]["value"] == 3 * sum(range(DOCS))
    assert found["min"]["value"] == min(i - (i % 8) * 1.25 for i in range(DOCS))
    assert found["max"]["value"] == 2 * (DOCS - 1)
    assert found["stats"]["count"] == DOCS and found["stats"]["sum"] == pytest.approx(sum(values))
    assert found["count"]["value"] == DOCS
    assert found["distinct"]["value"] == 12
    assert buckets(found["hist"]) == dict(Counter(float((i % 8) * 2.5 // 5 * 5) for i in range(DOCS)))
    assert [b["doc_count"] for b in found["range"]["buckets"]] == [50, 150, 100]
    assert {b["key_as_string"]: b["doc_count"] for b in found["months"]["buckets"]} == {
        "2024-01": 100,
        "2024-02": 100,
        "2024-03": 100,
    }


def test_a_stored_script_runs_in_an_aggregation_by_id(es: Elasticsearch, index: str) -> None:
    es.put_script(id="agg-key", script={"lang": "painless", "source": "doc['n'].value % params.m"})
    try:
        found = aggs_of(
            es,
            index,
            {
                "by": {
                    "terms": {"script": {"id": "agg-key", "params": {"m": 3}}, "value_type": "long"},
                    "aggs": {"top": {"max": {"script": {"id": "agg-key", "params": {"m": 1000}}}}},
                }
            },
        )
        assert buckets(found["by"]) == {0: 100, 1: 100, 2: 100}
        assert {b["key"]: b["top"]["value"] for b in found["by"]["buckets"]} == {0: 297.0, 1: 298.0, 2: 299.0}
    finally:
        es.delete_script(id="agg-key")


def test_clients_aggregate_by_scripts_while_writers_run(http: httpx.Client, index: str) -> None:
    stop = threading.Event()
    failures: list[str] = []

    def write() -> None:
        with web.Client(base_url=str(http.base_url)) as own:
            start = DOCS
            while not stop.is_set():
                fill(own, index, start, 20)
                start += 20

    def read() -> None:
        with web.Client(base_url=str(http.base_url)) as own:
            for _ in range(6):
                body = {
                    "size": 0,
                    "query": {"range": {"n": {"lt": DOCS}}},
                    "aggs": {
                        "by": {
                            "terms": {"script": "doc['tag'].value"},
                            "aggs": {"s": {"sum": {"script": "doc['n'].value * 2"}}},
                        }
                    },
                }
                answer = own.post(f"/{index}/_search", json=body)
                if answer.status_code != 200:
                    failures.append(answer.text)
                    continue
                got = {b["key"]: b["s"]["value"] for b in answer.json()["aggregations"]["by"]["buckets"]}
                want = {f"t{r}": float(sum(2 * i for i in range(r, DOCS, 4))) for r in range(4)}
                if got != want:
                    failures.append(f"{got} != {want}")

    readers_beside_a_writer(write, [read] * 3, stop)
    assert not failures, failures[:2]


@pytest.mark.parametrize(
    ("agg", "status", "kind"),
    [
        ({"avg": {"script": "'x'"}}, 400, "illegal_argument_exception"),
        ({"avg": {"script": "doc['n'].value +"}}, 400, "script_exception"),
        ({"sum": {"script": "doc['n'].value / 0"}}, 400, "script_exception"),
        ({"terms": {"script": "1", "value_type": "zzz"}}, 400, "illegal_argument_exception"),
        ({"avg": {"script": "1", "value_type": "string"}}, 400, "illegal_argument_exception"),
        ({"avg": {"script": {"id": "no-such-script"}}}, 404, "resource_not_found_exception"),
        ({"avg": {"script": {"source": "1", "lang": "expression"}}}, 400, "illegal_argument_exception"),
        ({"avg": {"script": 5}}, 400, "parsing_exception"),
    ],
)
def test_bad_aggregation_scripts_are_refused(
    http: httpx.Client, index: str, agg: dict[str, Any], status: int, kind: str
) -> None:
    response = http.post(f"/{index}/_search", json={"size": 0, "aggs": {"x": agg}})
    assert response.status_code == status, response.text
    assert response.json()["error"]["root_cause"][0]["type"] == kind, response.text


def test_top_hits_sorted_by_a_script_inline_or_stored(es: Elasticsearch, index: str) -> None:
    es.put_script(id="neg-n", script={"lang": "painless", "source": "-doc['n'].value * params.k"})
    try:
        for script in ("-doc['n'].value", {"id": "neg-n", "params": {"k": 1}}):
            sort = [{"_script": {"type": "number", "script": script}}]
            found = aggs_of(
                es,
                index,
                {"by": {"terms": {"field": "tag"}, "aggs": {"top": {"top_hits": {"size": 2, "sort": sort}}}}},
            )
            tops = {b["key"]: [h["sort"] for h in b["top"]["hits"]["hits"]] for b in found["by"]["buckets"]}
            assert tops == {f"t{r}": [[-float(n)] for n in (DOCS - 4 + r, DOCS - 8 + r)] for r in range(4)}
    finally:
        es.delete_script(id="neg-n")


def test_composite_sources_by_scripts_page_every_bucket_once(es: Elasticsearch, index: str) -> None:
    sources = [
        {"tag": {"terms": {"script": "doc['tag'].value.toUpperCase()"}}},
        {"odd": {"terms": {"script": "doc['n'].value % 2", "value_type": "long"}}},
        {"band": {"histogram": {"script": "doc['n'].value * 2", "interval": 150}}},
    ]
    seen: dict[tuple, int] = {}
    after = None
    while True:
        composite: dict[str, Any] = {"size": 5, "sources": sources}
        if after is not None:
            composite["after"] = after
        found = aggs_of(es, index, {"c": {"composite": composite}})["c"]
        if not found["buckets"]:
            break
        for bucket in found["buckets"]:
            key = (bucket["key"]["tag"], bucket["key"]["odd"], bucket["key"]["band"])
            assert key not in seen
            seen[key] = bucket["doc_count"]
        after = found["after_key"]
    assert list(seen) == sorted(seen)
    assert seen == dict(Counter((f"T{i % 4}", i % 2, float(i * 2 // 150 * 150)) for i in range(DOCS)))
