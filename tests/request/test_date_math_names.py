"""Date math in index names (issue 11): `<logs-{now/d}>`, URL-encoded, names today's index in
index creation, writes, bulk items and searches; the resolver itself is checked at a fixed `now`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import quote

import httpx
import pytest

from leafsearch.errors import ElasticError
from leafsearch.request.date_math_names import resolve_expression, resolve_name
from tests.conftest import error_of

# 2024-03-01T22:30:00Z
NOW = int(datetime(2024, 3, 1, 22, 30, tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize(
    ("expression", "name"),
    [
        ("<logs-{now/d}>", "logs-2024.03.01"),
        ("<logs-{now/M{yyyy.MM}}>", "logs-2024.03"),
        ("<logs-{now-1d/d}>", "logs-2024.02.29"),
        ("<logs-{now/d{yyyy.MM.dd|+12:00}}>", "logs-2024.03.02"),
        ("<logs-{now{yyyy.MM.dd-HH|Europe/Paris}}>", "logs-2024.03.01-23"),
        ("<a\\{b\\}-{now/y{yyyy}}>", "a{b}-2024"),
        ("plain", "plain"),
    ],
)
def test_names_resolve_at_now(expression: str, name: str) -> None:
    assert resolve_name(expression, NOW) == name


def test_an_expression_resolves_each_part() -> None:
    assert resolve_expression("<a-{now/d}>,b,-<c-{now/d}>", NOW) == "a-2024.03.01,b,-c-2024.03.01"


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        (
            "<logs-{now/d>",
            "invalid dynamic name expression [logs-{now/d]. date math placeholder is open ended",
        ),
        (
            "<logs-}>",
            "invalid dynamic name expression [logs-}]. invalid character at position [6]. `{` and `}` are "
            "reserved characters and should be escaped when used as part of the index name using `\\` "
            "(e.g. `\\{text\\}`)",
        ),
        ("<{now/d{}}>", "invalid dynamic name expression [now/d{}]. missing date format"),
    ],
)
def test_malformed_names_are_refused(expression: str, reason: str) -> None:
    with pytest.raises(ElasticError) as caught:
        resolve_name(expression, NOW)
    assert (caught.value.status, caught.value.error_type, caught.value.reason) == (
        400,
        "parse_exception",
        reason,
    )


@pytest.fixture
def todays(http: httpx.Client) -> Iterator[str]:
    """A unique prefix; every index it names is deleted afterwards."""
    prefix = f"dm-{datetime.now(UTC).strftime('%H%M%S%f')}"
    yield prefix
    http.delete(f"/{prefix}-*")


def _today_names(prefix: str, before: datetime, after: datetime) -> set[str]:
    return {f"{prefix}-{moment.strftime('%Y.%m.%d')}" for moment in (before, after)}


def test_create_write_bulk_and_search_by_date_math(http: httpx.Client, todays: str) -> None:
    expression = quote(f"<{todays}-{{now/d}}>", safe="")
    before = datetime.now(UTC)
    created = http.put(f"/{expression}")
    assert created.status_code == 200, created.text
    written = http.put(f"/{expression}/_doc/1", params={"refresh": "true"}, json={"n": 1})
    assert written.status_code == 201, written.text
    bulk = "".join(
        json.dumps(line) + "\n"
        for line in ({"index": {"_index": f"<{todays}-{{now/d}}>", "_id": "2"}}, {"n": 2})
    )
    items = http.post(
        "/_bulk?refresh=true", content=bulk, headers={"content-type": "application/x-ndjson"}
    ).json()
    found = http.post(f"/{expression}/_search", json={"sort": ["n"]}).json()
    after = datetime.now(UTC)
    names = _today_names(todays, before, after)
    assert created.json()["index"] in names
    assert written.json()["_index"] == created.json()["index"]
    assert items["items"][0]["index"]["_index"] == created.json()["index"]
    assert [(h["_index"], h["_id"]) for h in found["hits"]["hits"]] == [
        (created.json()["index"], "1"),
        (created.json()["index"], "2"),
    ]


def test_malformed_name_in_a_request(http: httpx.Client) -> None:
    response = http.post(f"/{quote('<x-{now/d>', safe='')}/_search")
    assert response.status_code == 400
    assert error_of(response)["type"] == "parse_exception"


def test_msearch_header_names_by_date_math(http: httpx.Client, todays: str) -> None:
    expression = f"<{todays}-{{now/d}}>"
    created = http.put(f"/{quote(expression, safe='')}").json()["index"]
    http.put(f"/{created}/_doc/1?refresh=true", json={"n": 1})
    body = json.dumps({"index": expression}) + "\n" + json.dumps({"query": {"match_all": {}}}) + "\n"
    responses = http.post("/_msearch", content=body, headers={"content-type": "application/x-ndjson"}).json()
    assert [h["_index"] for h in responses["responses"][0]["hits"]["hits"]] == [created]
