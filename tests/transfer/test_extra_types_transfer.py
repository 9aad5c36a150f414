"""`leafsearch export` and `import` of an index mapping `rank_feature(s)`, `binary`, `completion`
(with category and geo contexts), `percolator` and `dense_vector` fields: the copy answers the
same queries, suggestions, percolations and kNN searches."""

from __future__ import annotations

from pathlib import Path

import orjson
from elasticsearch import Elasticsearch
from elasticsearch.helpers import bulk
from test_transfer import cli, documents, read_lines

from tests import web

MAPPING = {
    "properties": {
        "rank": {"type": "rank_feature"},
        "topics": {"type": "rank_features"},
        "blob": {"type": "binary", "doc_values": True},
        "suggest": {
            "type": "completion",
            "contexts": [{"name": "kind", "type": "category"}, {"name": "at", "type": "geo", "precision": 4}],
        },
        "v": {"type": "dense_vector", "dims": 3, "similarity": "l2_norm"},
        "query": {"type": "percolator"},
        "n": {"type": "long"},
    }
}


def answers(es: Elasticsearch, index: str) -> list:
    ranked = es.search(
        index=index, query={"rank_feature": {"field": "topics.t", "log": {"scaling_factor": 1}}}, size=50
    )
    suggested = es.search(
        index=index,
        suggest={"s": {"prefix": "it", "completion": {"field": "suggest", "contexts": {"kind": "odd"}}}},
    )
    percolated = es.search(
        index=index, query={"percolate": {"field": "query", "document": {"n": 20}}}, size=50
    )
    near = {"at": {"lat": 10, "lon": 20}}
    placed = es.search(
        index=index, suggest={"s": {"prefix": "it", "completion": {"field": "suggest", "contexts": near}}}
    )
    knn = es.search(index=index, knn={"field": "v", "query_vector": [3, 1, 0], "k": 5, "num_candidates": 20})
    return [
        [(h["_id"], h["_score"]) for h in ranked["hits"]["hits"]],
        [(o["_id"], o["_score"]) for o in suggested["suggest"]["s"][0]["options"]],
        sorted(h["_id"] for h in percolated["hits"]["hits"]),
        [(o["_id"], o["_score"], o["contexts"]) for o in placed["suggest"]["s"][0]["options"]],
        [(h["_id"], h["_score"]) for h in knn["hits"]["hits"]],
    ]


def test_export_and_import_keep_every_type(server: str, tmp_path: Path) -> None:
    es = Elasticsearch(server)
    source, copy = "extra-types-source", "extra-types-copy"
    es.indices.create(index=source, mappings=MAPPING)
    try:
        docs = [
            {
                "_index": source,
                "_id": str(i),
                "rank": 1 + i,
                "topics": {"t": 0.5 + i},
                "blob": "aGVsbG8=",
                "suggest": {
                    "input": f"item {i}",
                    "weight": i,
                    "contexts": {"kind": "odd" if i % 2 else "even", "at": {"lat": 10 + i % 3, "lon": 20}},
                },
                "query": {"range": {"n": {"gte": i}}},
                "v": [i % 7, i % 3, 1],
            }
            for i in range(40)
        ]
        bulk(es, docs, refresh=True)
        exported = tmp_path / "extra.ndjson"
        cli("export", source, str(exported), "--url", server, "--slices", "2")
        mapping = tmp_path / "mapping.json"
        mapping.write_bytes(orjson.dumps(MAPPING))
        cli("import", str(exported), copy, "--url", server, "--mapping", str(mapping))
        again = tmp_path / "again.ndjson"
        cli("export", copy, str(again), "--url", server)
        assert documents(read_lines(again)) == documents(read_lines(exported))
        assert len(documents(read_lines(exported))) == 40
        assert answers(es, copy) == answers(es, source)
        found = answers(es, source)
        assert found[2] == [str(i) for i in sorted(range(21), key=str)]
        assert found[3] and all(o[2] == {"at": ["s3y0"]} for o in found[3])  # the cell of (10, 20)
        assert {h[0] for h in found[4][:2]} == {"10", "31"}  # [3, 1, 1], the nearest vectors
    finally:
        web.delete(f"{server}/{source}", timeout=60)
        web.delete(f"{server}/{copy}", timeout=60)
