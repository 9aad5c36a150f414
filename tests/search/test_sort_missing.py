"""Documents without the sort field: the sort value each hit shows and where it sorts, per field
type, as Lucene's sort fields in Elasticsearch give them (issue 11)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from conftest import bulk_index

INT_MAX, INT_MIN = 2**31 - 1, -(2**31)
LONG_MAX = 2**63 - 1


def _index(
    http: httpx.Client, new_index: Callable[..., str], field_type: str, suffix: str, docs: dict
) -> str:
    name = new_index(mappings={"properties": {"v": {"type": field_type}}}, suffix=suffix)
    bulk_index(http, name, docs)
    return name


def _sorted(http: httpx.Client, target: str, sort: list) -> list[tuple[str, list]]:
    response = http.post(f"/{target}/_search", json={"sort": sort, "size": 10})
    assert response.status_code == 200, response.text
    return [(hit["_id"], hit["sort"]) for hit in response.json()["hits"]["hits"]]


@pytest.mark.parametrize(
    ("field_type", "value"),
    [("date", "2021-05-01T10:00:00.000Z"), ("date_nanos", "2021-05-01T10:00:00.000000001Z")],
)
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_formatted_date_sort_value_of_a_missing_document_is_null(
    http: httpx.Client, new_index: Callable[..., str], field_type: str, value: str, order: str
) -> None:
    name = _index(http, new_index, field_type, "", {"has": {"v": value}, "none": {"other": 1}})
    fmt = "strict_date_optional_time_nanos" if field_type == "date_nanos" else "strict_date_optional_time"
    hits = _sorted(http, name, [{"v": {"order": order, "format": fmt, "missing": "_last"}}])
    assert hits == [("has", [value]), ("none", [None])]
    # The null is a cursor: after it nothing follows, before the first hit the missing one does.
    page = http.post(
        f"/{name}/_search",
        json={"sort": [{"v": {"order": order, "format": fmt}}], "search_after": [None]},
    )
    assert page.status_code == 200, page.text
    assert page.json()["hits"]["hits"] == []
    page = http.post(
        f"/{name}/_search",
        json={"sort": [{"v": {"order": order, "format": fmt}}], "search_after": [value]},
    )
    assert [hit["_id"] for hit in page.json()["hits"]["hits"]] == ["none"]


def test_unformatted_date_sort_keeps_the_long_sentinel(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = _index(http, new_index, "date", "", {"has": {"v": "2021-05-01"}, "none": {}})
    assert _sorted(http, name, [{"v": "asc"}]) == [("has", [1619827200000]), ("none", [LONG_MAX])]


@pytest.mark.parametrize("field_type", ["integer", "short", "byte"])
def test_int_types_sort_missing_documents_at_the_int_extremes(
    http: httpx.Client, new_index: Callable[..., str], field_type: str
) -> None:
    name = _index(http, new_index, field_type, "", {"one": {"v": 1}, "none": {}, "two": {"v": 2}})
    assert _sorted(http, name, [{"v": "asc"}]) == [("one", [1]), ("two", [2]), ("none", [INT_MAX])]
    assert _sorted(http, name, [{"v": {"order": "desc", "missing": "_first"}}]) == [
        ("none", [INT_MAX]),
        ("two", [2]),
        ("one", [1]),
    ]
    assert _sorted(http, name, [{"v": {"order": "asc", "missing": "_first"}}])[0] == ("none", [INT_MIN])
    # The rendered extreme is a cursor that resumes after the missing document.
    page = http.post(f"/{name}/_search", json={"sort": [{"v": "asc"}], "search_after": [INT_MAX]})
    assert page.json()["hits"]["hits"] == []


def test_missing_values_across_integer_and_long_indices(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    """Each index's missing documents sort at its own type's extreme: a long value above
    Integer.MAX_VALUE sorts after the integer index's missing document."""
    ints = _index(http, new_index, "integer", "-int", {"i1": {"v": 5}, "i-none": {}})
    longs = _index(http, new_index, "long", "-long", {"l1": {"v": 3_000_000_000}, "l-none": {}})
    hits = _sorted(http, f"{ints},{longs}", [{"v": "asc"}])
    assert hits == [
        ("i1", [5]),
        ("i-none", [INT_MAX]),
        ("l1", [3_000_000_000]),
        ("l-none", [LONG_MAX]),
    ]
    # Paging through with search_after yields the same order, one hit at a time.
    seen, after = [], None
    for _ in range(5):
        body: dict = {"sort": [{"v": "asc"}], "size": 1}
        if after is not None:
            body["search_after"] = after
        page = http.post(f"/{ints},{longs}/_search", json=body).json()["hits"]["hits"]
        if not page:
            break
        seen.append(page[0]["_id"])
        after = page[0]["sort"]
    assert seen == [h[0] for h in hits]
