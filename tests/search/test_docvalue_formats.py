"""`docvalue_fields` naming one field several times: each entry's values, in its own format,
one after the other in the hit's list (issue 11)."""

from __future__ import annotations

from collections.abc import Callable

import httpx


def test_one_field_with_several_formats_shows_each(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index(mappings={"properties": {"d": {"type": "date"}, "n": {"type": "long"}}})
    docs = {
        "one": {"d": "2021-05-01T10:11:12.123Z", "n": 1234},
        "two": {"d": ["2020-01-01", "2022-02-02"], "n": 7},
    }
    for doc_id, source in docs.items():
        assert http.put(f"/{name}/_doc/{doc_id}", json=source).status_code == 201
    http.post(f"/{name}/_refresh")
    response = http.post(
        f"/{name}/_search",
        json={
            "sort": ["_doc"],
            "docvalue_fields": [
                {"field": "d", "format": "strict_date_optional_time"},
                {"field": "n"},
                {"field": "d", "format": "epoch_millis"},
                {"field": "d", "format": "yyyy"},
                {"field": "n", "format": "#,##0.0"},
            ],
        },
    )
    assert response.status_code == 200, response.text
    fields = [hit["fields"] for hit in response.json()["hits"]["hits"]]
    assert fields == [
        {"d": ["2021-05-01T10:11:12.123Z", "1619863872123", "2021"], "n": [1234, "1,234.0"]},
        {
            "d": [
                "2020-01-01T00:00:00.000Z",
                "2022-02-02T00:00:00.000Z",
                "1577836800000",
                "1643760000000",
                "2020",
                "2022",
            ],
            "n": [7, "7.0"],
        },
    ]
