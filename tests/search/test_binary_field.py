"""`binary` fields over HTTP with the official client: base64 values kept and returned as sent,
checked when the field keeps them (`store` or `doc_values`, as Elasticsearch checks them), never
searchable, in `_mapping` and `_field_caps`."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from elasticsearch import BadRequestError, Elasticsearch

MAPPING = {
    "properties": {
        "blob": {"type": "binary"},
        "kept": {"type": "binary", "doc_values": True},
        "name": {"type": "keyword"},
    }
}


def test_values_are_returned_as_sent(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=MAPPING)
    data = base64.b64encode(bytes(range(256))).decode()
    es.index(index=index, id="1", document={"blob": data, "kept": [data, "aGk="], "name": "a"}, refresh=True)
    assert es.get(index=index, id="1")["_source"] == {"blob": data, "kept": [data, "aGk="], "name": "a"}
    found = es.search(index=index, query={"term": {"name": "a"}})
    assert found["hits"]["hits"][0]["_source"]["kept"] == [data, "aGk="]


def test_mapping_and_field_caps(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=MAPPING)
    properties = es.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    assert properties["blob"] == {"type": "binary"}
    assert properties["kept"] == {"type": "binary", "doc_values": True}
    caps = es.field_caps(index=index, fields=["blob", "kept"])["fields"]
    assert caps["blob"]["binary"]["searchable"] is False
    assert caps["blob"]["binary"]["aggregatable"] is False
    assert caps["kept"]["binary"]["aggregatable"] is True
    with pytest.raises(BadRequestError) as e:
        es.indices.create(
            index=f"{index}-bad", mappings={"properties": {"b": {"type": "binary", "index": True}}}
        )
    assert "unknown parameter [index] on mapper [b] of type [binary]" in str(e.value.info)


def test_values_are_checked_where_kept(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"blob": "not base64!"}, refresh=True)  # neither stored nor kept
    with pytest.raises(BadRequestError) as e:
        es.index(index=index, id="2", document={"kept": "not base64!"})
    assert e.value.info["error"]["type"] == "document_parsing_exception"
    assert "failed to parse field [kept] of type [binary]" in e.value.info["error"]["reason"]
    assert "Illegal character ' '" in e.value.info["error"]["caused_by"]["reason"]
    with pytest.raises(BadRequestError):
        es.index(index=index, id="3", document={"kept": {"a": 1}})
    assert es.count(index=index)["count"] == 1


@pytest.mark.parametrize(
    "query",
    [
        {"term": {"blob": "aGk="}},
        {"terms": {"kept": ["aGk="]}},
        {"match": {"blob": "aGk="}},
        {"range": {"blob": {"gte": "a"}}},
    ],
)
def test_queries_are_refused(es: Elasticsearch, new_index: Callable[..., str], query: dict) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"blob": "aGk=", "kept": "aGk="}, refresh=True)
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, query=query)
    assert "Binary fields do not support searching" in str(e.value.info)


def test_doc_values_of_a_field_without_them_are_refused(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"blob": "aGk="}, refresh=True)
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, docvalue_fields=["blob"])
    assert (
        "Can't load fielddata on [blob] because fielddata is unsupported on fields of type [binary]. "
        "Use doc values instead." in str(e.value.info)
    )


def test_doc_values_are_read_where_kept(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """`docvalue_fields` of a binary field with doc values: each document's values deduplicated
    and sorted by their bytes, in base64, as Elasticsearch's binary doc values show them."""
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"kept": ["eHl6", "YWJj", "eHl6"], "name": "a"})
    es.index(index=index, id="2", document={"kept": "AAE=", "name": "b"})
    es.index(index=index, id="3", document={"name": "c"}, refresh=True)
    found = es.search(index=index, docvalue_fields=["kept"], sort=["name"])
    assert [h.get("fields") for h in found["hits"]["hits"]] == [
        {"kept": ["YWJj", "eHl6"]},
        {"kept": ["AAE="]},
        None,
    ]
    with pytest.raises(BadRequestError) as e:
        es.search(index=index, sort=["kept"])
    assert "sorting on or aggregating the binary field [kept] is not supported by leafsearch" in str(
        e.value.info
    )


def test_exists_finds_kept_values(es: Elasticsearch, new_index: Callable[..., str]) -> None:
    """As Elasticsearch: a binary field with doc values is found by `exists`; one it neither
    stores nor keeps is not."""
    index = new_index(mappings=MAPPING)
    es.index(index=index, id="1", document={"kept": "aGk=", "blob": "aGk="})
    es.index(index=index, id="2", document={"kept": [], "name": "b"}, refresh=True)
    assert [
        h["_id"] for h in es.search(index=index, query={"exists": {"field": "kept"}})["hits"]["hits"]
    ] == ["1"]
    assert es.search(index=index, query={"exists": {"field": "blob"}})["hits"]["total"]["value"] == 0
