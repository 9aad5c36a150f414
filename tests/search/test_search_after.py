"""`search_after` through the official client (SPEC 4.1 r4, r5, r8-r10, r14): the refusals, how
each kind of cursor value is read, where missing values sort, the partial-tiebreaker rule, and
the stateless walk without a point in time. Also the rendering and errors of the phases a page
goes through (float32 scores, no-doc-values sorts, fetch failures).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from elasticsearch import BadRequestError, Elasticsearch, helpers

LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)

MAPPINGS = {
    "properties": {
        "tb": {"type": "keyword"},
        "k": {"type": "keyword"},
        "n": {"type": "long"},
        "f": {"type": "double"},
        "ok": {"type": "boolean"},
        "d": {"type": "date"},
        "dn": {"type": "date_nanos"},
        "title": {"type": "text"},
        "raw": {"type": "long", "doc_values": False},
    }
}

# id -> source; `tb` is a unique tiebreaker with doc values, as SPEC 4.1 r11 advises.
DOCS: dict[str, dict[str, Any]] = {
    "a": {"tb": "a", "k": "pear", "n": 3, "f": 1.5, "ok": True, "d": "2024-01-10", "title": "fox"},
    "b": {"tb": "b", "k": "apple", "n": 1, "f": -2.0, "ok": False, "d": "2024-01-20", "title": "fox fox dog"},
    "c": {"tb": "c", "k": "pear", "n": 2, "ok": True, "d": "2024-01-15", "title": "quick brown fox"},
    "d": {"tb": "d", "n": 3, "f": 0.5, "ok": False, "title": "dog"},
    "e": {"tb": "e", "k": "fig", "f": 9.0, "d": "2024-01-01", "title": "the fox and the dog"},
    "f": {"tb": "f", "k": "apple", "ok": True, "d": "2024-01-15"},
}


@pytest.fixture
def docs(es: Elasticsearch, new_index: Callable[..., str]) -> str:
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS)
    helpers.bulk(es, ({"_index": index, "_id": i, "_source": s} for i, s in DOCS.items()), refresh=True)
    return index


def page(es: Elasticsearch, index: str, sort: list[Any], after: list[Any] | None = None, **body: Any):
    extra = {"search_after": after} if after is not None else {}
    return es.search(index=index, sort=sort, size=100, **extra, **body)["hits"]["hits"]


def walk(es: Elasticsearch, size: int, after: list[Any] | None = None, **body: Any) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    for _ in range(1000):
        extra = {"search_after": after} if after is not None else {}
        batch = es.search(size=size, **extra, **body)["hits"]["hits"]
        if not batch:
            return hits
        hits.extend(batch)
        after = batch[-1]["sort"]
    raise AssertionError("the walk did not end")


def ids(hits: list[dict[str, Any]]) -> list[str]:
    return [h["_id"] for h in hits]


def root_cause(error: BadRequestError) -> dict[str, Any]:
    return error.body["error"]["root_cause"][0]


# ---------------------------------------------------------------------------------------------
# refusals


def test_from_must_be_zero_or_minus_one(es: Elasticsearch, docs: str) -> None:
    with pytest.raises(BadRequestError) as info:
        page(es, docs, ["tb"], ["a"], from_=2)
    assert info.value.body["error"]["reason"] == (
        "Validation Failed: 1: [from] parameter must be set to 0 when [search_after] is used;"
    )
    for start in (0, -1):
        assert ids(page(es, docs, ["tb"], ["d"], from_=start)) == ["e", "f"]


def test_one_value_per_sort(es: Elasticsearch, docs: str) -> None:
    with pytest.raises(BadRequestError) as info:
        page(es, docs, ["n", "tb"], [1])
    assert info.value.body["error"]["type"] == "search_phase_execution_exception"
    assert root_cause(info.value)["type"] == "illegal_argument_exception"
    assert root_cause(info.value)["reason"] == "search_after has 1 value(s) but sort has 2."
    pit_id = es.open_point_in_time(index=docs, keep_alive="1m")["id"]
    try:
        # With a PIT, two sorts take three values (the tiebreaker) or two (no tiebreaker added).
        for after in ([1, "b", LONG_MAX], [1, "b"]):
            hits = es.search(pit={"id": pit_id}, sort=["n", "tb"], search_after=after)["hits"]["hits"]
            assert len(hits) == 5 and all(len(h["sort"]) == len(after) for h in hits)
        with pytest.raises(BadRequestError) as info:
            es.search(pit={"id": pit_id}, sort=["n", "tb"], search_after=[1, "b", 0, 0])
        assert root_cause(info.value)["reason"] == "search_after has 4 value(s) but sort has 2."
    finally:
        es.close_point_in_time(id=pit_id)


def test_a_sort_is_required(es: Elasticsearch, docs: str) -> None:
    with pytest.raises(BadRequestError) as info:
        es.search(index=docs, search_after=[1])
    assert info.value.body["error"]["type"] == "search_phase_execution_exception"
    assert root_cause(info.value)["reason"] == "Sort must contain at least one field."


# ---------------------------------------------------------------------------------------------
# cursor values per sort type


def test_keyword_number_and_boolean_cursors(es: Elasticsearch, docs: str) -> None:
    assert ids(page(es, docs, ["k", "tb"], ["fig", "e"])) == ["a", "c", "d"]
    assert ids(page(es, docs, [{"f": "desc"}, "tb"], [1.5, "a"])) == ["d", "b", "c", "f"]
    assert ids(page(es, docs, [{"n": "asc"}, "tb"], ["2", "c"])) == ["a", "d", "e", "f"]
    assert ids(page(es, docs, ["ok", "tb"], [False, "d"])) == ["a", "c", "f", "e"]
    assert ids(page(es, docs, ["ok", "tb"], ["true", "c"])) == ["f", "e"]


def test_null_is_the_cursor_of_a_missing_keyword(es: Elasticsearch, docs: str) -> None:
    last = page(es, docs, ["k", "tb"])
    assert ids(last) == ["b", "f", "e", "a", "c", "d"] and last[-1]["sort"] == [None, "d"]
    assert ids(page(es, docs, ["k", "tb"], [None, "c"])) == ["d"]
    first = page(es, docs, [{"k": {"order": "desc", "missing": "_first"}}, "tb"])
    assert ids(first) == ["d", "a", "c", "e", "b", "f"]
    assert ids(page(es, docs, [{"k": {"order": "desc", "missing": "_first"}}, "tb"], [None, "d"])) == [
        "a",
        "c",
        "e",
        "b",
        "f",
    ]


@pytest.mark.parametrize(
    "sort",
    [
        [{"n": "asc"}, "tb"],
        [{"n": "desc"}, "tb"],
        [{"n": {"order": "asc", "missing": "_first"}}, "tb"],
        [{"f": "asc"}, {"tb": "desc"}],
        [{"f": {"order": "desc", "missing": "_first"}}, "tb"],
        [{"d": "desc"}, "tb"],
    ],
    ids=str,
)
def test_walks_pass_documents_without_a_value_exactly_once(es: Elasticsearch, docs: str, sort) -> None:
    # A missing number renders as the value it sorts by (Long.MAX_VALUE, -Infinity, ...), and that
    # rendered value, sent back, resumes right after the document.
    expected = ids(page(es, docs, sort))
    assert ids(walk(es, 1, index=docs, sort=sort)) == expected
    assert sorted(expected) == sorted(DOCS)


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_a_pit_walk_by_a_keyword_some_documents_lack_passes_each_once(
    es: Elasticsearch, new_index: Callable[..., str], order: str
) -> None:
    # A PIT walk's pages come from a window of the next 8 pages' hits; a window holding only
    # documents with a value (those without sort last) still has the keys' missing flag column,
    # which the cursor's keys must have too.
    index = new_index(settings={"number_of_shards": 2}, mappings=MAPPINGS)
    sources = {f"v{i}": {"k": f"k{i % 3}"} for i in range(10)} | {"none1": {}, "none2": {"n": 1}}
    helpers.bulk(es, ({"_index": index, "_id": i, "_source": s} for i, s in sources.items()), refresh=True)
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    try:
        hits = walk(es, 1, pit={"id": pit, "keep_alive": "1m"}, sort=[{"k": order}])
    finally:
        es.close_point_in_time(id=pit)
    assert sorted(ids(hits)) == sorted(sources)
    values = sorted((s["k"] for s in sources.values() if "k" in s), reverse=order == "desc")
    assert [h["sort"][0] for h in hits] == [*values, None, None]


def test_missing_values_render_as_what_they_sort_by(es: Elasticsearch, docs: str) -> None:
    by_n = page(es, docs, [{"n": "asc"}, "tb"])
    assert [h["sort"][0] for h in by_n[-2:]] == [LONG_MAX, LONG_MAX]
    by_n_desc = page(es, docs, [{"n": "desc"}, "tb"])
    assert [h["sort"][0] for h in by_n_desc[-2:]] == [LONG_MIN, LONG_MIN]
    by_f = page(es, docs, [{"f": "asc"}, "tb"])
    assert [h["sort"][0] for h in by_f[-2:]] == ["Infinity", "Infinity"]


def test_a_custom_missing_value_changes_the_order(es: Elasticsearch, docs: str) -> None:
    zero = page(es, docs, [{"n": {"order": "asc", "missing": 0}}, "tb"])
    assert ids(zero) == ["e", "f", "b", "c", "a", "d"]
    assert [h["sort"][0] for h in zero] == [0, 0, 1, 2, 3, 3]
    between = page(es, docs, [{"n": {"order": "desc", "missing": 2}}, "tb"])
    assert ids(between) == ["a", "d", "c", "e", "f", "b"]
    # The rendered missing value is a cursor like any other: it ties with real values.
    assert ids(page(es, docs, [{"n": {"order": "desc", "missing": 2}}, "tb"], [2, "e"])) == ["f", "b"]
    keyword = page(es, docs, [{"k": {"order": "asc", "missing": "banana"}}, "tb"])
    assert ids(keyword) == ["b", "f", "d", "e", "a", "c"]
    assert keyword[2]["sort"] == ["banana", "d"]
    assert ids(page(es, docs, [{"k": {"missing": "banana"}}, "tb"], ["banana", "c"])) == ["d", "e", "a", "c"]


def test_dates_as_epoch_numbers_or_strings_in_the_sort_format(es: Elasticsearch, docs: str) -> None:
    plain = page(es, docs, ["d", "tb"], [1705276800000, "c"])  # 2024-01-15, doc c
    assert ids(plain) == ["f", "b", "d"]
    formatted_sort = [{"d": {"order": "asc", "format": "yyyy-MM-dd"}}, "tb"]
    formatted = page(es, docs, formatted_sort, ["2024-01-10", "a"])
    assert ids(formatted) == ["c", "f", "b", "d"]
    assert [h["sort"][0] for h in formatted[:3]] == ["2024-01-15", "2024-01-15", "2024-01-20"]


def test_date_nanos_cursors_are_exact_to_the_nanosecond(es: Elasticsearch, new_index) -> None:
    index = new_index(mappings=MAPPINGS)
    base = 1704067200_000000000  # 2024-01-01T00:00:00Z; a double cannot tell these apart
    stamps = {"x1": "2024-01-01T00:00:00.000000001Z", "x2": "2024-01-01T00:00:00.000000002Z"}
    stamps["x3"] = "2024-01-01T00:00:00.000000003Z"
    helpers.bulk(es, ({"_index": index, "_id": i, "dn": s} for i, s in stamps.items()), refresh=True)
    hits = page(es, index, ["dn"])
    assert [h["sort"] for h in hits] == [[base + 1], [base + 2], [base + 3]]
    assert ids(page(es, index, ["dn"], [base + 1])) == ["x2", "x3"]
    assert ids(page(es, index, ["dn"], [base + 2])) == ["x3"]
    nanos_format = [{"dn": {"format": "strict_date_optional_time_nanos"}}]
    assert ids(page(es, index, nanos_format, ["2024-01-01T00:00:00.000000002Z"])) == ["x3"]


def test_score_cursors_walk_a_relevance_order(es: Elasticsearch, docs: str) -> None:
    query = {"match": {"title": "fox dog"}}
    sort = [{"_score": "desc"}, "tb"]
    full = page(es, docs, sort, query=query)
    assert len(full) == 5 and [h["sort"][0] for h in full] == sorted(
        (h["sort"][0] for h in full), reverse=True
    )
    assert ids(walk(es, 2, index=docs, sort=sort, query=query)) == ids(full)
    assert ids(page(es, docs, sort, [full[1]["sort"][0], full[1]["sort"][1]], query=query)) == ids(full[2:])


def test_scores_print_as_float32(es: Elasticsearch, docs: str) -> None:
    response = es.search(index=docs, query={"match": {"title": "quick fox"}})
    scores = [h["_score"] for h in response["hits"]["hits"]] + [response["hits"]["max_score"]]
    assert all(float(str(np.float32(score))) == score for score in scores), scores
    assert response["hits"]["max_score"] == scores[0]


# ---------------------------------------------------------------------------------------------
# rules of the walk


def test_partial_tiebreaker_values_compare_as_byte_strings(es: Elasticsearch, new_index) -> None:
    """SPEC 4.1 r10: "654" is no stored value; it sorts just before "654323" (its extension), so an
    ascending walk resumes at that document and a descending walk just after it."""
    index = new_index(mappings=MAPPINGS)
    values = {"p": "600", "q": "654323", "r": "654", "s": "7"}
    helpers.bulk(es, ({"_index": index, "_id": i, "tb": v} for i, v in values.items()), refresh=True)
    es.delete(index=index, id="r", refresh=True)
    assert ids(page(es, index, ["tb"], ["654"])) == ["q", "s"]
    assert ids(page(es, index, [{"tb": "desc"}], ["654"])) == ["p"]
    assert ids(page(es, index, [{"tb": "desc"}], ["654323"])) == ["p"]
    assert ids(page(es, index, ["tb"], ["6543"])) == ["q", "s"]
    assert ids(page(es, index, [{"tb": "desc"}], ["6543"])) == ["p"]


def test_without_a_pit_each_page_reads_the_latest_snapshot(es: Elasticsearch, docs: str) -> None:
    first = page(es, docs, ["tb"])[:2]
    es.index(index=docs, id="aa", document={"tb": "aa"}, refresh=True)
    es.delete(index=docs, id="c", refresh=True)
    assert ids(page(es, docs, ["tb"], first[-1]["sort"])) == ["d", "e", "f"]
    assert ids(page(es, docs, ["tb"], first[0]["sort"])) == ["aa", "b", "d", "e", "f"]


def test_sorting_on_a_field_without_doc_values(es: Elasticsearch, docs: str) -> None:
    with pytest.raises(BadRequestError) as info:
        page(es, docs, ["raw"])
    assert info.value.body["error"]["type"] == "search_phase_execution_exception"
    assert root_cause(info.value) == {
        "type": "illegal_argument_exception",
        "reason": "Can't load fielddata on [raw] because fielddata is unsupported on fields of type [long]. "
        "Use doc values instead.",
    }


def test_fetch_failures_are_fetch_phase_failures(es: Elasticsearch, docs: str) -> None:
    with pytest.raises(BadRequestError) as info:
        es.search(index=docs, docvalue_fields=["title"])
    error = info.value.body["error"]
    assert error["type"] == "search_phase_execution_exception"
    assert error["phase"] == "fetch"
    assert error["root_cause"][0]["type"] == "illegal_argument_exception"
    assert "Text fields are not optimised" in error["root_cause"][0]["reason"]
