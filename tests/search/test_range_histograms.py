"""`histogram` and `date_histogram` over range fields, through HTTP with the official client: a
document counts once in every bucket one of its intervals overlaps; `hard_bounds` clips the
intervals; an interval over more buckets than `search.max_buckets` is refused."""

from __future__ import annotations

import math

import httpx
import pytest
from elasticsearch import BadRequestError, Elasticsearch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MAPPING = {
    "properties": {"r": {"type": "integer_range"}, "d": {"type": "date_range"}, "f": {"type": "double_range"}}
}
DAY = 86_400_000


def buckets(found: dict) -> dict:
    return {b["key"]: b["doc_count"] for b in found["aggregations"]["h"]["buckets"]}


@pytest.fixture
def ranges(es: Elasticsearch, new_index) -> str:
    name = new_index(mappings=MAPPING)
    docs = [
        {
            "r": {"gte": 1, "lte": 12},
            "d": {"gte": "2020-01-01", "lt": "2020-03-05"},
            "f": {"gte": 0.5, "lt": 2.5},
        },
        {"r": [{"gte": 7, "lte": 8}, {"gte": 9, "lte": 9}], "d": {"gte": "2020-02-10", "lte": "2020-02-11"}},
        {"r": {"gte": 30, "lte": 31}},
    ]
    for i, doc in enumerate(docs):
        es.index(index=name, id=str(i), document=doc)
    es.indices.refresh(index=name)
    return name


def test_histogram_counts_every_overlapped_bucket(es: Elasticsearch, ranges: str) -> None:
    found = es.search(index=ranges, size=0, aggs={"h": {"histogram": {"field": "r", "interval": 5}}})
    # Empty buckets between the first and last key are filled, as for any histogram.
    assert buckets(found) == {0.0: 1, 5.0: 2, 10.0: 1, 15.0: 0, 20.0: 0, 25.0: 0, 30.0: 1}
    doubles = es.search(index=ranges, size=0, aggs={"h": {"histogram": {"field": "f", "interval": 1}}})
    assert buckets(doubles) == {0.0: 1, 1.0: 1, 2.0: 1}


def test_date_histogram_over_date_ranges(es: Elasticsearch, ranges: str) -> None:
    aggs = {"h": {"date_histogram": {"field": "d", "calendar_interval": "month"}}}
    found = es.search(index=ranges, size=0, aggs=aggs)["aggregations"]["h"]["buckets"]
    assert [(b["key_as_string"], b["doc_count"]) for b in found] == [
        ("2020-01-01T00:00:00.000Z", 1),
        ("2020-02-01T00:00:00.000Z", 2),
        ("2020-03-01T00:00:00.000Z", 1),
    ]


def test_hard_bounds_clip_the_intervals(es: Elasticsearch, ranges: str) -> None:
    aggs = {"h": {"histogram": {"field": "r", "interval": 5, "hard_bounds": {"min": 6, "max": 9}}}}
    assert buckets(es.search(index=ranges, size=0, aggs=aggs)) == {5.0: 2}


def test_unbounded_intervals_are_refused_unless_hard_bounds_clip_them(
    es: Elasticsearch, new_index, http: httpx.Client
) -> None:
    name = new_index(mappings=MAPPING)
    es.index(index=name, id="1", document={"r": {"gte": 100}}, refresh=True)
    with pytest.raises(BadRequestError) as refused:
        es.search(index=name, size=0, aggs={"h": {"histogram": {"field": "r", "interval": 1}}})
    assert refused.value.body["error"]["root_cause"][0]["type"] == "too_many_buckets_exception"
    clipped = {"h": {"histogram": {"field": "r", "interval": 1, "hard_bounds": {"min": 99, "max": 101}}}}
    assert buckets(es.search(index=name, size=0, aggs=clipped)) == {100.0: 1, 101.0: 1}
    ip = new_index(mappings={"properties": {"i": {"type": "ip_range"}}}, suffix="-ip")
    with pytest.raises(BadRequestError):
        es.search(index=ip, size=0, aggs={"h": {"histogram": {"field": "i", "interval": 1}}})


INTERVALS = st.lists(st.tuples(st.integers(-20, 20), st.integers(0, 15)), min_size=1, max_size=3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(INTERVALS, max_size=10),
    interval=st.integers(1, 7),
    offset=st.integers(0, 3),
)
def test_matches_brute_force(
    es: Elasticsearch, http: httpx.Client, index_name: str, docs, interval, offset
) -> None:
    offset %= interval
    name = f"{index_name}-bf"
    http.delete(f"/{name}")
    es.indices.create(index=name, mappings=MAPPING, settings={"number_of_shards": 2})
    try:
        operations: list[dict] = []
        for i, spans in enumerate(docs):
            operations += [{"index": {"_id": str(i)}}, {"r": [{"gte": lo, "lte": lo + n} for lo, n in spans]}]
        if operations:
            es.bulk(index=name, operations=operations, refresh=True)
        expected: dict[float, int] = {}
        for spans in docs:
            keys = set()
            for lo, n in spans:
                first = math.floor((lo - offset) / interval)
                last = math.floor((lo + n - offset) / interval)
                keys.update(float(k * interval + offset) for k in range(first, last + 1))
            for key in keys:
                expected[key] = expected.get(key, 0) + 1
        aggs = {
            "h": {"histogram": {"field": "r", "interval": interval, "offset": offset, "min_doc_count": 1}}
        }
        assert buckets(es.search(index=name, size=0, aggs=aggs)) == expected
    finally:
        http.delete(f"/{name}")
