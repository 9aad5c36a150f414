"""The field types of their own modules (`binary`, `completion`, `percolator`, `rank_features`,
`geo_point`) through the index APIs, over HTTP with the official client: dynamic templates that
map an object to one of them (as Elasticsearch's templates capture objects), and PIT walks of an
index mapping them that see each document exactly once while writers add documents beside."""

from __future__ import annotations

import threading
from collections.abc import Callable

from elasticsearch import Elasticsearch
from elasticsearch.helpers import bulk

from tests.concurrency import readers_beside_a_writer

TEMPLATES = [
    {"points": {"match": "*_pt", "mapping": {"type": "geo_point"}}},
    {"suggestions": {"match": "*_sug", "mapping": {"type": "completion"}}},
    {"queries": {"match": "*_query", "mapping": {"type": "percolator"}}},
    {"features": {"match": "*_features", "mapping": {"type": "rank_features"}}},
    {"words": {"match": "*_kw", "mapping": {"type": "keyword"}}},
]


def test_dynamic_templates_map_objects_to_the_types_taking_them(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index(mappings={"dynamic_templates": TEMPLATES, "properties": {"tag": {"type": "keyword"}}})
    document = {
        "home_pt": {"lat": 41.12, "lon": -71.34},
        "title_sug": {"input": ["Nevermind", "Nirvana"], "weight": 7},
        "alert_query": {"term": {"tag": "red"}},
        "topics_features": {"music": 3.5, "art": 1.0},
        "meta_kw": {"a": "b"},  # a keyword template leaves an object an object
        "tag": "red",
    }
    es.index(index=index, id="1", document=document, refresh=True)
    properties = es.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    assert {name: properties[name]["type"] for name in document if "type" in properties[name]} == {
        "home_pt": "geo_point",
        "title_sug": "completion",
        "alert_query": "percolator",
        "topics_features": "rank_features",
        "tag": "keyword",
    }
    assert list(properties["meta_kw"]) == ["properties"]
    caps = es.field_caps(index=index, fields=["*_pt", "*_sug", "*_query", "*_features"])["fields"]
    assert {name: list(kinds) for name, kinds in caps.items()} == {
        "home_pt": ["geo_point"],
        "title_sug": ["completion"],
        "alert_query": ["percolator"],
        "topics_features": ["rank_features"],
    }
    near = {"geo_distance": {"distance": "1km", "home_pt": {"lat": 41.12, "lon": -71.34}}}
    assert es.count(index=index, query=near)["count"] == 1
    suggest = {"s": {"prefix": "nir", "completion": {"field": "title_sug"}}}
    assert es.search(index=index, suggest=suggest)["suggest"]["s"][0]["options"][0]["_score"] == 7.0
    percolate = {"percolate": {"field": "alert_query", "document": {"tag": "red"}}}
    assert es.count(index=index, query=percolate)["count"] == 1
    feature = {"rank_feature": {"field": "topics_features.music"}}
    assert es.count(index=index, query=feature)["count"] == 1


def test_pit_walks_see_each_document_once_with_a_writer_beside(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    """A PIT walk of a `percolate` query over an index with binary, completion and percolator
    fields: every document of the PIT's snapshot once, none a writer adds meanwhile."""
    mapping = {
        "properties": {
            "n": {"type": "long"},
            "blob": {"type": "binary", "doc_values": True},
            "s": {"type": "completion", "contexts": [{"name": "at", "type": "geo", "precision": 3}]},
            "q": {"type": "percolator"},
        }
    }
    index = new_index(settings={"number_of_shards": 2}, mappings=mapping)

    def doc(i: int) -> dict:
        return {
            "_index": index, "_id": str(i), "n": i, "blob": "aGVsbG8=", "q": {"range": {"n": {"lte": i}}},
            "s": {"input": f"item {i}", "contexts": {"at": [i % 90, i % 45]}},
        }  # fmt: skip

    bulk(es, (doc(i) for i in range(400)), refresh=True)
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    stop = threading.Event()
    seen: list[str] = []

    def write() -> None:
        i = 400
        while not stop.is_set():
            bulk(es, (doc(j) for j in range(i, i + 25)))
            es.indices.refresh(index=index)
            i += 25

    def walk() -> None:
        after = None
        query = {"percolate": {"field": "q", "document": {"n": 0}}}  # every stored query matches n = 0
        while True:
            page = es.search(
                pit={"id": pit, "keep_alive": "1m"},
                query=query,
                sort=[{"n": "desc"}],
                size=70,
                search_after=after,
            )
            hits = page["hits"]["hits"]
            if not hits:
                return
            seen.extend(h["_id"] for h in hits)
            after = hits[-1]["sort"]

    try:
        readers_beside_a_writer(write, [walk], stop)
    finally:
        es.close_point_in_time(id=pit)
    assert seen == [str(i) for i in range(399, -1, -1)]
