"""External versioning (`version` + `version_type=external|external_gte`) of index, delete and
bulk writes, and the refusals of internal `version` checks, as Elasticsearch 8 has them."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from tests.conftest import error_of


def _put(http: httpx.Client, name: str, version: int, version_type: str = "external") -> httpx.Response:
    return http.put(
        f"/{name}/_doc/1", params={"version": version, "version_type": version_type}, json={"v": version}
    )


def test_external_versions_only_move_forward(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    created = _put(http, name, 5)
    assert (created.status_code, created.json()["_version"], created.json()["result"]) == (201, 5, "created")
    for stale in (4, 5):
        refused = _put(http, name, stale)
        assert refused.status_code == 409
        assert error_of(refused)["reason"] == (
            f"[1]: version conflict, current version [5] is higher or equal to the one provided [{stale}]"
        )
    # external_gte takes an equal version, not a lower one.
    assert _put(http, name, 5, "external_gte").json()["_version"] == 5
    lower = _put(http, name, 4, "external_gte")
    assert (
        error_of(lower)["reason"]
        == "[1]: version conflict, current version [5] is higher than the one provided [4]"
    )
    assert _put(http, name, 10).json()["_version"] == 10
    assert http.get(f"/{name}/_doc/1").json()["_source"] == {"v": 10}


def test_version_zero_is_a_version(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    assert _put(http, name, 0).json()["_version"] == 0
    assert _put(http, name, 0).status_code == 409
    assert _put(http, name, 6).json()["_version"] == 6


def test_deletes_keep_their_external_version(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    _put(http, name, 5)
    old = http.delete(f"/{name}/_doc/1", params={"version": 3, "version_type": "external"})
    assert old.status_code == 409
    deleted = http.delete(f"/{name}/_doc/1", params={"version": 7, "version_type": "external"})
    assert (deleted.status_code, deleted.json()["result"], deleted.json()["_version"]) == (200, "deleted", 7)
    # A late write older than the delete is refused; a newer one recreates the document.
    assert _put(http, name, 6).status_code == 409
    assert _put(http, name, 8).json()["result"] == "created"


def test_versioning_refusals(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    cases = [
        (
            {"version": 2},
            "Validation Failed: 1: internal versioning can not be used for optimistic concurrency control. "
            "Please use `if_seq_no` and `if_primary_term` instead;",
        ),
        (
            {"version_type": "external"},
            "Validation Failed: 1: illegal version value [-3] for version type [EXTERNAL];",
        ),
        (
            {"version": 2, "version_type": "external", "if_seq_no": 0, "if_primary_term": 1},
            "Validation Failed: 1: compare and write operations can not use versioning;",
        ),
        ({"version": 2, "version_type": "bogus"}, "No version type match [bogus]"),
    ]
    for params, reason in cases:
        response = http.put(f"/{name}/_doc/1", params=params, json={})
        assert response.status_code == 400, params
        assert error_of(response)["reason"] == reason
    auto_id = http.post(f"/{name}/_doc", params={"version": 2, "version_type": "external"}, json={})
    assert error_of(auto_id)["reason"] == (
        "Validation Failed: 1: an id must be provided if version type or value are set;"
    )
    assert http.get(f"/{name}/_count").json()["count"] == 0


def test_bulk_items_carry_external_versions(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    lines = [
        {"index": {"_index": name, "_id": "a", "version": 3, "version_type": "external"}},
        {"n": 1},
        {"index": {"_index": name, "_id": "a", "version": 2, "version_type": "external"}},
        {"n": 2},
        {"delete": {"_index": name, "_id": "a", "version": 9, "version_type": "external_gte"}},
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    items = http.post("/_bulk", content=body, headers={"content-type": "application/x-ndjson"}).json()[
        "items"
    ]
    assert items[0]["index"]["_version"] == 3
    assert items[1]["index"]["status"] == 409
    assert (items[2]["delete"]["result"], items[2]["delete"]["_version"]) == ("deleted", 9)
