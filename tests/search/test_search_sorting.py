"""Sorting through the HTTP API (SPEC 2.1): every form of `sort`, its options, the sort values each
hit carries, and the refusals Elasticsearch gives.

The corpus is five documents on one shard, so `_doc` order is indexing order and expected orders
can be written out by hand; cross-shard merging is covered in test_multishard.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from elasticsearch import BadRequestError, Elasticsearch, helpers

LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)

MAPPINGS = {
    "properties": {
        "n": {"type": "long"},
        "f": {"type": "double"},
        "name": {"type": "keyword"},
        "nums": {"type": "long"},
        "d": {"type": "date"},
        "dn": {"type": "date_nanos"},
        "title": {"type": "text"},
    }
}

# id: n, f, name, nums, d, dn
DOCS: dict[str, dict[str, Any]] = {
    "a": {
        "n": 3,
        "f": 1.5,
        "name": "pear",
        "nums": [4, 1],
        "d": "2024-03-01",
        "dn": "2024-03-01T00:00:00.000000001Z",
        "title": "fox",
    },
    "b": {
        "n": 1,
        "f": -2.0,
        "name": "apple",
        "nums": [10],
        "d": "2023-12-31T23:59:59.999Z",
        "dn": "2023-12-31T23:59:59.999999999Z",
        "title": "fox fox",
    },
    "c": {"n": 2, "name": "Zebra", "nums": [2, 7, 4], "d": "2024-01-01", "title": "quick fox"},
    "d": {"f": 0.5, "name": "banana", "dn": "2024-01-01T00:00:00Z", "title": "dog"},
    "e": {
        "n": 5,
        "f": 9.0,
        "nums": [6, 5, 5, 20],
        "d": "2024-02-01T12:00:00Z",
        "title": "the fox and the dog",
    },
}


@pytest.fixture(scope="module")
def docs(es: Elasticsearch, http: httpx.Client) -> Iterator[str]:
    name = f"sorting-{uuid.uuid4().hex[:8]}"
    es.indices.create(index=name, settings={"number_of_shards": 1}, mappings=MAPPINGS)
    helpers.bulk(es, ({"_index": name, "_id": i, "_source": d} for i, d in DOCS.items()), refresh=True)
    yield name
    http.delete(f"/{name}")


def search(es: Elasticsearch, index: str, sort: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return es.search(index=index, sort=sort, source=False, size=10, **kwargs)["hits"]["hits"]


def order(hits: list[dict[str, Any]]) -> list[str]:
    return [h["_id"] for h in hits]


def sort_values(hits: list[dict[str, Any]]) -> list[Any]:
    return [h["sort"] for h in hits]


@pytest.mark.parametrize(
    "sort",
    ["n", ["n"], {"n": "asc"}, [{"n": "asc"}], [{"n": {"order": "asc"}}], {"n": {"order": "ASC"}}],
    ids=str,
)
def test_ascending_forms(es: Elasticsearch, docs: str, sort) -> None:
    hits = search(es, docs, sort)
    assert order(hits) == ["b", "c", "a", "e", "d"]
    assert sort_values(hits) == [[1], [2], [3], [5], [LONG_MAX]]


@pytest.mark.parametrize(
    "sort", [{"n": "desc"}, [{"n": {"order": "desc"}}], [{"n": {"order": "DESC"}}]], ids=str
)
def test_descending_forms(es: Elasticsearch, docs: str, sort) -> None:
    hits = search(es, docs, sort)
    assert order(hits) == ["e", "a", "c", "b", "d"]
    assert sort_values(hits) == [[5], [3], [2], [1], [LONG_MIN]]


def test_url_sort_parameter(http: httpx.Client, docs: str) -> None:
    response = http.get(f"/{docs}/_search", params={"sort": "name:desc,n", "_source": "false"}).json()
    assert order(response["hits"]["hits"]) == ["a", "d", "b", "c", "e"]
    assert sort_values(response["hits"]["hits"])[0] == ["pear", 3]


@pytest.mark.parametrize(
    ("sort", "expected", "values"),
    [
        ({"n": {"missing": "_last"}}, ["b", "c", "a", "e", "d"], [1, 2, 3, 5, LONG_MAX]),
        ({"n": {"missing": "_first"}}, ["d", "b", "c", "a", "e"], [LONG_MIN, 1, 2, 3, 5]),
        ({"n": {"order": "desc", "missing": "_first"}}, ["d", "e", "a", "c", "b"], [LONG_MAX, 5, 3, 2, 1]),
        ({"n": {"missing": 4}}, ["b", "c", "a", "d", "e"], [1, 2, 3, 4, 5]),
        ({"n": {"order": "desc", "missing": "4"}}, ["e", "d", "a", "c", "b"], [5, 4, 3, 2, 1]),
        ({"f": "asc"}, ["b", "d", "a", "e", "c"], [-2.0, 0.5, 1.5, 9.0, "Infinity"]),
        ({"f": "desc"}, ["e", "a", "d", "b", "c"], [9.0, 1.5, 0.5, -2.0, "-Infinity"]),
        ({"f": {"missing": 1.0}}, ["b", "d", "c", "a", "e"], [-2.0, 0.5, 1.0, 1.5, 9.0]),
        ({"name": "asc"}, ["c", "b", "d", "a", "e"], ["Zebra", "apple", "banana", "pear", None]),
        (
            {"name": {"order": "desc", "missing": "_first"}},
            ["e", "a", "d", "b", "c"],
            [None, "pear", "banana", "apple", "Zebra"],
        ),
        ({"name": {"missing": "b"}}, ["c", "b", "e", "d", "a"], ["Zebra", "apple", "b", "banana", "pear"]),
    ],
    ids=str,
)
def test_missing_values(es: Elasticsearch, docs: str, sort, expected, values) -> None:
    hits = search(es, docs, [sort])
    assert order(hits) == expected
    assert [v[0] for v in sort_values(hits)] == values


@pytest.mark.parametrize(
    ("sort", "expected", "values"),
    [
        ({"nums": "asc"}, ["a", "c", "e", "b"], [1, 2, 5, 10]),  # min for ascending
        ({"nums": "desc"}, ["e", "b", "c", "a"], [20, 10, 7, 4]),  # max for descending
        ({"nums": {"mode": "min", "order": "desc"}}, ["b", "e", "c", "a"], [10, 5, 2, 1]),
        ({"nums": {"mode": "max"}}, ["a", "c", "b", "e"], [4, 7, 10, 20]),
        ({"nums": {"mode": "sum"}}, ["a", "b", "c", "e"], [5, 10, 13, 36]),
        # Rounding of avg and median values: test_avg_and_median_of_longs_round_half_up.
        ({"nums": {"mode": "avg", "order": "desc"}}, ["b", "e", "c", "a"], None),
        ({"nums": {"mode": "median"}}, ["a", "c", "e", "b"], None),
    ],
    ids=str,
)
def test_modes_for_multi_valued_fields(es: Elasticsearch, docs: str, sort, expected, values) -> None:
    hits = search(es, docs, [sort], query={"exists": {"field": "nums"}})
    assert order(hits) == expected
    if values is not None:
        assert [v[0] for v in sort_values(hits)] == values


def test_avg_and_median_of_longs_round_half_up(es: Elasticsearch, docs: str) -> None:
    avg = search(es, docs, [{"nums": {"mode": "avg"}}], query={"ids": {"values": ["a"]}})
    median = search(es, docs, [{"nums": {"mode": "median"}}], query={"ids": {"values": ["e"]}})
    assert (avg[0]["sort"], median[0]["sort"]) == ([3], [6])


def test_dates_sort_as_epoch_millis_and_nanos(es: Elasticsearch, docs: str) -> None:
    by_date = search(es, docs, [{"d": "asc"}])
    assert order(by_date) == ["b", "c", "e", "a", "d"]
    assert sort_values(by_date)[:4] == [[1704067199999], [1704067200000], [1706788800000], [1709251200000]]
    by_nanos = search(es, docs, [{"dn": "asc"}])
    assert order(by_nanos)[:3] == ["b", "d", "a"]
    assert sort_values(by_nanos)[:3] == [[1704067199999999999], [1704067200000000000], [1709251200000000001]]


def test_format_renders_date_sort_values(es: Elasticsearch, docs: str) -> None:
    by_date = search(
        es, docs, [{"d": {"order": "desc", "format": "yyyy-MM-dd"}}], query={"exists": {"field": "d"}}
    )
    assert sort_values(by_date) == [["2024-03-01"], ["2024-02-01"], ["2024-01-01"], ["2023-12-31"]]
    by_nanos = search(
        es,
        docs,
        [{"dn": {"format": "strict_date_optional_time_nanos"}}],
        query={"ids": {"values": ["a", "b"]}},
    )
    assert sort_values(by_nanos) == [["2023-12-31T23:59:59.999999999Z"], ["2024-03-01T00:00:00.000000001Z"]]


@pytest.fixture
def mixed_resolution(es: Elasticsearch, new_index) -> str:
    """`ts` is a date in one index and a date_nanos in the other (SPEC 4.1 rule 13)."""
    millis = new_index(mappings={"properties": {"ts": {"type": "date"}}}, suffix="-millis")
    nanos = new_index(mappings={"properties": {"ts": {"type": "date_nanos"}}}, suffix="-nanos")
    es.index(index=millis, id="x1", document={"ts": "2024-01-01T00:00:00.001Z"})
    es.index(index=millis, id="x3", document={"ts": "2024-01-01T00:00:00.003Z"})
    es.index(index=nanos, id="y0", document={"ts": "2024-01-01T00:00:00.000000500Z"})
    es.index(index=nanos, id="y2", document={"ts": "2024-01-01T00:00:00.002000001Z"})
    es.indices.refresh(index=f"{millis},{nanos}")
    return f"{millis},{nanos}"


def test_numeric_type_sorts_date_and_date_nanos_on_one_resolution(
    es: Elasticsearch, mixed_resolution: str
) -> None:
    nanos = search(es, mixed_resolution, [{"ts": {"order": "asc", "numeric_type": "date_nanos"}}])
    assert order(nanos) == ["y0", "x1", "y2", "x3"]
    base = 1704067200000000000
    assert sort_values(nanos) == [[base + 500], [base + 1_000_000], [base + 2_000_001], [base + 3_000_000]]
    millis = search(es, mixed_resolution, [{"ts": {"order": "desc", "numeric_type": "date"}}])
    assert order(millis) == ["x3", "y2", "x1", "y0"]
    assert sort_values(millis) == [
        [base // 10**6 + 3],
        [base // 10**6 + 2],
        [base // 10**6 + 1],
        [base // 10**6],
    ]
    formatted = search(
        es,
        mixed_resolution,
        [{"ts": {"numeric_type": "date_nanos", "format": "strict_date_optional_time_nanos"}}],
    )
    # Java's fraction printer (3 to 9 digits) drops trailing zeros past the third digit.
    assert sort_values(formatted)[0] == ["2024-01-01T00:00:00.0000005Z"]
    assert sort_values(formatted)[2] == ["2024-01-01T00:00:00.002000001Z"]


def test_numeric_type_double_and_long(es: Elasticsearch, docs: str) -> None:
    as_double = search(es, docs, [{"n": {"numeric_type": "double"}}], query={"exists": {"field": "n"}})
    assert sort_values(as_double) == [[1.0], [2.0], [3.0], [5.0]]
    assert all(isinstance(v[0], float) for v in sort_values(as_double))
    as_long = search(
        es, docs, [{"f": {"numeric_type": "long", "order": "desc"}}], query={"exists": {"field": "f"}}
    )
    assert order(as_long) == ["e", "a", "d", "b"]


def test_unmapped_fields(es: Elasticsearch, docs: str) -> None:
    with pytest.raises(BadRequestError) as info:
        search(es, docs, [{"no_such_field": "asc"}])
    error = info.value.body["error"]
    assert error["type"] == "search_phase_execution_exception"
    assert error["root_cause"][0]["type"] == "query_shard_exception"
    assert error["root_cause"][0]["reason"] == "No mapping found for [no_such_field] in order to sort on"
    hits = search(es, docs, [{"no_such_field": {"unmapped_type": "long"}}, {"n": "desc"}])
    assert order(hits) == ["e", "a", "c", "b", "d"]
    assert [v[0] for v in sort_values(hits)] == [LONG_MAX] * 5


def test_text_fields_cannot_be_sorted(es: Elasticsearch, docs: str) -> None:
    with pytest.raises(BadRequestError) as info:
        search(es, docs, [{"title": "asc"}])
    error = info.value.body["error"]
    assert error["type"] == "search_phase_execution_exception"
    assert error["root_cause"][0]["type"] == "illegal_argument_exception"
    assert "Text fields are not optimised for operations" in error["root_cause"][0]["reason"]


def test_text_field_refusal_is_worded_as_elasticsearch_8(es: Elasticsearch, docs: str) -> None:
    with pytest.raises(BadRequestError) as info:
        search(es, docs, [{"title": "asc"}])
    assert info.value.body["error"]["root_cause"][0]["reason"] == (
        f"Fielddata is disabled on [title] in [{docs}]. Text fields are not optimised for operations that "
        "require per-document field data like aggregations and sorting, so these operations are disabled by "
        "default. Please use a keyword field instead. Alternatively, set fielddata=true on [title] in order "
        "to load field data by uninverting the inverted index. Note that this can use significant memory."
    )


@pytest.mark.parametrize(
    ("sort", "error_type"),
    [
        ([{"n": {"bogus": 1}}], "x_content_parse_exception"),
        ([{"n": {"order": "sideways"}}], "x_content_parse_exception"),
        ([{"n": {"mode": "first"}}], "x_content_parse_exception"),
        ([{"n": {"numeric_type": "int"}}], "x_content_parse_exception"),
        ([42], "illegal_argument_exception"),
    ],
    ids=str,
)
def test_malformed_sorts_are_refused(es: Elasticsearch, docs: str, sort, error_type) -> None:
    with pytest.raises(BadRequestError) as info:
        search(es, docs, sort)
    assert info.value.body["error"]["type"] == error_type


def test_scores_are_null_when_sorting_by_a_field(es: Elasticsearch, docs: str) -> None:
    response = es.search(index=docs, query={"match": {"title": "fox"}}, sort=[{"n": "asc"}])
    assert response["hits"]["max_score"] is None
    assert {h["_score"] for h in response["hits"]["hits"]} == {None}
    assert all("sort" in h for h in response["hits"]["hits"])
    tracked = es.search(index=docs, query={"match": {"title": "fox"}}, sort=[{"n": "asc"}], track_scores=True)
    scores = [h["_score"] for h in tracked["hits"]["hits"]]
    assert all(isinstance(s, float) and s > 0 for s in scores)
    assert tracked["hits"]["max_score"] == max(scores)
    unsorted = es.search(index=docs, query={"match": {"title": "fox"}})
    assert all("sort" not in h for h in unsorted["hits"]["hits"])


def test_score_and_doc_sorts(es: Elasticsearch, docs: str) -> None:
    relevance = es.search(index=docs, query={"match": {"title": "fox"}})["hits"]
    assert order(relevance["hits"]) == ["b", "a", "c", "e"]
    # `_score` descending alone is no sort at all in Elasticsearch (SortBuilder.buildSort): no sort values.
    by_score = es.search(index=docs, query={"match": {"title": "fox"}}, sort=["_score"])["hits"]
    assert order(by_score["hits"]) == order(relevance["hits"])
    assert all("sort" not in h for h in by_score["hits"])
    assert by_score["max_score"] == relevance["max_score"]
    ascending = es.search(index=docs, query={"match": {"title": "fox"}}, sort=[{"_score": "asc"}])["hits"][
        "hits"
    ]
    assert order(ascending) == order(relevance["hits"])[::-1]
    by_doc = search(es, docs, "_doc")
    assert order(by_doc) == ["a", "b", "c", "d", "e"]
    assert sort_values(by_doc) == [[0], [1], [2], [3], [4]]
    reverse = search(es, docs, [{"_doc": "desc"}])
    assert order(reverse) == ["e", "d", "c", "b", "a"]


def test_lists_of_sorts_break_ties_in_order(es: Elasticsearch, docs: str, new_index) -> None:
    index = new_index(mappings={"properties": {"g": {"type": "keyword"}, "k": {"type": "long"}}})
    rows = [("1", "x", 3), ("2", "y", 1), ("3", "x", 1), ("4", "y", 2), ("5", "x", 2)]
    helpers.bulk(
        es, ({"_index": index, "_id": i, "_source": {"g": g, "k": k}} for i, g, k in rows), refresh=True
    )
    hits = search(es, index, ["g", {"k": "desc"}])
    assert order(hits) == ["1", "5", "3", "4", "2"]
    assert sort_values(hits) == [["x", 3], ["x", 2], ["x", 1], ["y", 2], ["y", 1]]
    mixed = search(es, index, [{"k": {"order": "asc"}}, "_score", {"g": "desc"}], query={"match_all": {}})
    assert order(mixed) == ["2", "3", "4", "5", "1"]
    assert sort_values(mixed)[0] == [1, 1.0, "y"]


def test_keyword_sort_on_an_empty_index(es: Elasticsearch, new_index) -> None:
    index = new_index(mappings={"properties": {"g": {"type": "keyword"}}})
    response = es.search(index=index, sort=[{"g": "asc"}])
    assert response["hits"]["hits"] == []


def test_numeric_sort_on_an_empty_index(es: Elasticsearch, new_index) -> None:
    index = new_index(mappings={"properties": {"v": {"type": "long"}}})
    response = es.search(index=index, sort=[{"v": "asc"}, "_doc"])
    assert response["hits"] == {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []}
