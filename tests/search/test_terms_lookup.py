"""Terms lookup: `terms` whose values are read from a document, through the HTTP API and the
official client, with the lookup document rewritten while searches run."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch, NotFoundError


@pytest.fixture
def people(es: Elasticsearch, new_index: Callable[..., str]) -> tuple[str, str]:
    """`users` (u1..u6, keyword `user`) and `lists`, whose documents hold the lookup values."""
    users = new_index(
        settings={"number_of_shards": 2, "index.max_terms_count": 4},
        mappings={"properties": {"user": {"type": "keyword"}, "n": {"type": "long"}}},
        suffix="-users",
    )
    lists = new_index(settings={"number_of_shards": 3}, mappings={"dynamic": False}, suffix="-lists")
    for i in range(1, 7):
        es.index(index=users, id=f"u{i}", document={"user": f"u{i}", "n": i})
    es.index(index=lists, id="flat", document={"followers": ["u2", "u3"]})
    es.index(
        index=lists,
        id="deep",
        document={"groups": [{"members": ["u1", {"nested": "x"}, None]}, {"members": "u4"}], "a.b": ["u5"]},
    )
    es.index(index=lists, id="numbers", document={"ns": [2, 6]}, routing="r1")
    es.index(index=lists, id="many", document={"followers": ["u1", "u2", "u3", "u4", "u5"]})
    es.indices.refresh(index=f"{users},{lists}")
    return users, lists


def _ids(response) -> list[str]:
    return sorted(hit["_id"] for hit in response["hits"]["hits"])


def test_lookup_values_become_the_terms(es: Elasticsearch, people: tuple[str, str]) -> None:
    users, lists = people

    def lookup(field: str, doc: str, path: str, **extra: str) -> dict:
        return {"terms": {field: {"index": lists, "id": doc, "path": path, **extra}}}

    assert _ids(es.search(index=users, query=lookup("user", "flat", "followers"))) == ["u2", "u3"]
    # Through arrays of objects; objects and nulls at the path are skipped; a key holding a dot.
    assert _ids(es.search(index=users, query=lookup("user", "deep", "groups.members"))) == ["u1", "u4"]
    assert _ids(es.search(index=users, query=lookup("user", "deep", "a.b"))) == ["u5"]
    # Routing reaches the document; numbers match a numeric field.
    assert _ids(es.search(index=users, query=lookup("n", "numbers", "ns", routing="r1"))) == ["u2", "u6"]
    # A missing document or path gives no values: nothing matches.
    assert es.count(index=users, query=lookup("user", "absent", "followers"))["count"] == 0
    assert es.count(index=users, query=lookup("user", "flat", "nope"))["count"] == 0
    # In a bool, a post_filter and a count.
    query = {
        "bool": {"filter": [lookup("user", "flat", "followers")], "must_not": [{"term": {"user": "u3"}}]}
    }
    assert _ids(es.search(index=users, query=query)) == ["u2"]
    found = es.search(index=users, post_filter=lookup("user", "flat", "followers"))
    assert _ids(found) == ["u2", "u3"]
    # An unrefreshed rewrite of the lookup document is read (a realtime get).
    es.index(index=lists, id="flat", document={"followers": ["u6"]})
    assert _ids(es.search(index=users, query=lookup("user", "flat", "followers"))) == ["u6"]


def test_lookup_refusals(es: Elasticsearch, http: httpx.Client, people: tuple[str, str]) -> None:
    users, lists = people
    with pytest.raises(NotFoundError) as missing:
        es.search(index=users, query={"terms": {"user": {"index": f"{lists}-none", "id": "x", "path": "p"}}})
    assert missing.value.body["error"]["type"] == "index_not_found_exception"
    # The values meet the searched index's `index.max_terms_count` (4).
    too_many = http.post(
        f"/{users}/_search",
        json={"query": {"terms": {"user": {"index": lists, "id": "many", "path": "followers"}}}},
    )
    assert too_many.status_code == 400
    assert (
        "The number of terms [5] used in the Terms Query request has exceeded"
        in (too_many.json()["error"]["root_cause"][0]["reason"])
    )
    for lookup, reason in (
        ({"index": lists, "id": "flat"}, "Required [path]"),
        ({"index": lists, "id": "flat", "path": "p", "size": 3}, "[terms_lookup] unknown field [size]"),
        (
            {"index": lists, "id": ["flat"], "path": "p"},
            "[terms_lookup] id doesn't support values of type: START_ARRAY",
        ),
    ):
        response = http.post(f"/{users}/_search", json={"query": {"terms": {"user": lookup}}})
        assert response.status_code == 400, lookup
        assert error_of(response)["reason"] == reason
    in_agg = http.post(
        f"/{users}/_search",
        json={
            "size": 0,
            "aggs": {
                "f": {"filter": {"terms": {"user": {"index": lists, "id": "flat", "path": "followers"}}}}
            },
        },
    )
    assert in_agg.status_code == 400


def test_delete_by_query_with_a_lookup(es: Elasticsearch, people: tuple[str, str]) -> None:
    users, lists = people
    done = es.delete_by_query(
        index=users,
        query={"terms": {"user": {"index": lists, "id": "flat", "path": "followers"}}},
        refresh=True,
    )
    assert done["deleted"] == 2
    assert es.count(index=users)["count"] == 4


def test_lookups_beside_rewrites_of_the_lookup_document(es: Elasticsearch, people: tuple[str, str]) -> None:
    """Readers search while a writer swaps the lookup document between two lists: every answer is
    exactly one of the two lists' matches, never a mix."""
    users, lists = people
    first, second = ["u1", "u2"], ["u4", "u5", "u6"]
    es.index(index=lists, id="swap", document={"followers": first})
    query = {"terms": {"user": {"index": lists, "id": "swap", "path": "followers"}}}
    stop = threading.Event()
    seen: list[list[str]] = []
    errors: list[BaseException] = []

    def writer() -> None:
        flip = 0
        while not stop.is_set():
            flip ^= 1
            es.index(index=lists, id="swap", document={"followers": second if flip else first})

    def reader() -> None:
        try:
            for _ in range(40):
                seen.append(_ids(es.search(index=users, query=query, size=10)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads[1:]:
        thread.join()
    stop.set()
    threads[0].join()
    assert not errors
    assert len(seen) == 120
    assert all(ids in (first, second) for ids in seen), [ids for ids in seen if ids not in (first, second)]
