"""What users' tools call to discover and read: `_field_caps`, `_mget` per-document options,
every `_source` option of current clients (elasticsearch-dsl 9's `exclude_vectors`), `_cat` by
POST and the `_cat` list."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch
from elasticsearch_dsl import Document, Keyword, Long, Text

MAPPINGS = {
    "properties": {
        "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "n": {"type": "long", "meta": {"unit": "ms"}},
        "user": {"properties": {"name": {"type": "keyword"}, "age": {"type": "integer", "index": False}}},
    }
}


@pytest.fixture
def docs_index(es: Elasticsearch, new_index: Callable[..., str]) -> str:
    name = new_index(mappings=MAPPINGS)
    es.index(index=name, id="1", document={"title": "t", "n": 1, "user": {"name": "a", "age": 3}})
    es.index(index=name, id="2", document={"title": "u", "n": 2}, routing="r", refresh=True)
    return name


def test_source_exclude_vectors_is_accepted(http: httpx.Client, docs_index: str) -> None:
    for source in ({"exclude_vectors": False}, {"exclude_vectors": "true", "includes": ["n"]}):
        response = http.post(f"/{docs_index}/_search", json={"_source": source, "sort": ["n"]})
        assert response.status_code == 200, response.text
        first = response.json()["hits"]["hits"][0]["_source"]
        assert first == (
            {"n": 1} if "includes" in source else {"title": "t", "n": 1, "user": {"name": "a", "age": 3}}
        )
    for bad, reason in (
        ({"exclude_vectors": 1}, "Unknown key for a VALUE_NUMBER in [exclude_vectors]."),
        ({"exclude_vectors": "yes"}, "Failed to parse value [yes] as only [true] or [false] are allowed."),
        ({"vectors": True}, "Unknown key for a VALUE_BOOLEAN in [vectors]."),
    ):
        assert error_of(http.post(f"/{docs_index}/_search", json={"_source": bad}))["reason"] == reason
    got = http.get(f"/{docs_index}/_doc/1", params={"_source_exclude_vectors": "false"})
    assert got.json()["_source"]["n"] == 1
    assert http.get(f"/{docs_index}/_doc/1", params={"_source_exclude_vectors": "no"}).status_code == 400


def test_dsl_document_search_with_exclude_vectors(es: Elasticsearch, docs_index: str) -> None:
    """elasticsearch-dsl 9's `Document.search()` always sends `_source: {exclude_vectors: false}`;
    with dsl 8 installed here, the same body is given through `extra`."""

    class Item(Document):
        title = Text()
        n = Long()
        user = Keyword()

        class Index:
            name = docs_index

    search = Item.search(using=es).extra(_source={"exclude_vectors": False}).sort("n")
    assert [item.n for item in search.execute()] == [1, 2]
    assert [item.meta.id for item in search.scan()] and search.count() == 2


def test_mget_per_document_options(es: Elasticsearch, http: httpx.Client, docs_index: str) -> None:
    docs = es.mget(
        index=docs_index,
        docs=[
            {"_id": "1", "_source": ["user.name"]},
            {"_id": "1", "_source": {"excludes": ["user"], "exclude_vectors": False}},
            {"_id": "1", "_source": False},
            {"_id": "1", "_source": "title"},
            {"_id": "1", "stored_fields": ["title"]},
            {"_id": "1", "stored_fields": ["_source"]},
            {"_id": "2", "routing": "r"},
            {"_id": "1"},
        ],
        source_excludes="title",
    )["docs"]
    assert docs[0]["_source"] == {"user": {"name": "a"}}
    assert docs[1]["_source"] == {"title": "t", "n": 1}
    assert "_source" not in docs[2] and docs[2]["found"]
    assert docs[3]["_source"] == {"title": "t"}
    # the request's `_source_excludes` is every document's `_source` option unless it has its own
    assert docs[4]["_source"] == docs[5]["_source"] == {"n": 1, "user": {"name": "a", "age": 3}}
    assert docs[6]["_routing"] == "r" and docs[6]["_source"] == {"n": 2}
    assert docs[7]["_source"] == {"n": 1, "user": {"name": "a", "age": 3}}
    bad = http.post(f"/{docs_index}/_mget", json={"docs": [{"_id": "1", "_source": {"nope": 1}}]})
    assert error_of(bad)["reason"] == "Unknown key for a VALUE_NUMBER in [nope]."
    stored = http.post(f"/{docs_index}/_mget?stored_fields=n", json={"ids": ["1"]}).json()["docs"][0]
    assert stored["found"] and "_source" not in stored  # stored_fields without `_source`: none
    listed = {"docs": [{"_id": "1", "stored_fields": "_source"}, {"_id": "1", "stored_fields": ["n"]}]}
    with_source, without = http.post(f"/{docs_index}/_mget", json=listed).json()["docs"]
    assert with_source["_source"]["n"] == 1 and "_source" not in without


def test_field_caps_describes_every_field(
    es: Elasticsearch, http: httpx.Client, docs_index: str, new_index: Callable[..., str]
) -> None:
    other = new_index(
        mappings={"properties": {"n": {"type": "keyword"}, "title": {"type": "text", "index": False}}},
        suffix="-other",
    )
    both = f"{docs_index},{other}"
    caps = es.field_caps(index=both, fields="*").body
    assert caps["indices"] == sorted([docs_index, other])
    fields = caps["fields"]
    assert fields["_id"] == {
        "_id": {"type": "_id", "metadata_field": True, "searchable": True, "aggregatable": False}
    }
    assert fields["_index"]["_index"]["aggregatable"] is True
    assert fields["n"] == {
        "long": {
            "type": "long",
            "metadata_field": False,
            "searchable": True,
            "aggregatable": True,
            "indices": [docs_index],
            "meta": {"unit": ["ms"]},
        },
        "keyword": {
            "type": "keyword",
            "metadata_field": False,
            "searchable": True,
            "aggregatable": True,
            "indices": [other],
        },
    }
    assert fields["title"]["text"] == {
        "type": "text",
        "metadata_field": False,
        "searchable": False,
        "aggregatable": False,
        "non_searchable_indices": [other],
    }
    assert fields["title.raw"]["keyword"]["aggregatable"] is True
    assert fields["user"] == {
        "object": {"type": "object", "metadata_field": False, "searchable": False, "aggregatable": False}
    }
    assert fields["user.age"]["integer"]["searchable"] is False

    unmapped = http.post(f"/{both}/_field_caps?include_unmapped=true", json={"fields": ["user.*"]}).json()
    assert unmapped["fields"]["user.name"]["unmapped"]["indices"] == [other]
    assert unmapped["fields"]["user.name"]["keyword"]["indices"] == [docs_index]

    filtered = es.field_caps(index=both, fields="*", index_filter={"term": {"user.name": "a"}}).body
    assert filtered["indices"] == [docs_index]
    no_meta = http.get(
        f"/{both}/_field_caps", params={"fields": "*", "filters": "-metadata,-multifield"}
    ).json()
    assert (
        "_id" not in no_meta["fields"] and "title.raw" not in no_meta["fields"] and "n" in no_meta["fields"]
    )
    only_keywords = http.get(f"/{docs_index}/_field_caps", params={"fields": "*", "types": "keyword"}).json()
    assert set(only_keywords["fields"]) == {"title.raw", "user.name", "user"}  # a text parent is no object


@pytest.mark.parametrize(
    ("request_kwargs", "status", "error_type", "reason"),
    [
        ({}, 400, "action_request_validation_exception", "specified fields can't be null or empty"),
        (
            {"params": {"fields": "*", "filters": "+nope"}},
            400,
            "illegal_argument_exception",
            "Unknown field caps filter [+nope]",
        ),
        (
            {"params": {"fields": "*"}, "json": {"fields": ["a"]}},
            400,
            "illegal_argument_exception",
            "can't specify a request body",
        ),
        (
            {"json": {"fields": "*", "index_filter": {"nope": {}}}},
            400,
            "parsing_exception",
            "unknown query [nope]",
        ),
        ({"json": {"fields": "*", "size": 1}}, 400, "x_content_parse_exception", "unknown field [size]"),
    ],
)
def test_field_caps_refusals(
    http: httpx.Client, docs_index: str, request_kwargs: dict, status: int, error_type: str, reason: str
) -> None:
    response = http.post(f"/{docs_index}/_field_caps", **request_kwargs)
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["type"] == error_type and reason in error["reason"]
    missing = http.get("/no-such-index-fc/_field_caps?fields=*")
    assert (missing.status_code, error_of(missing)["type"]) == (404, "index_not_found_exception")


def test_cat_answers_post_and_lists_its_endpoints(
    es: Elasticsearch, http: httpx.Client, docs_index: str
) -> None:
    assert http.post(f"/_cat/count/{docs_index}", params={"h": "count"}).text == "2\n"
    assert es.cat.count(index=docs_index, format="json")[0]["count"] == "2"
    assert http.post("/_cat/indices", params={"h": "index"}).status_code == 200
    listing = http.get("/_cat")
    assert listing.headers["content-type"].startswith("text/plain")
    lines = listing.text.splitlines()
    assert lines[0] == "=^.^="
    assert {
        "/_cat/indices",
        "/_cat/indices/{index}",
        "/_cat/count",
        "/_cat/count/{index}",
        "/_cat/health",
    } <= set(lines[1:])
