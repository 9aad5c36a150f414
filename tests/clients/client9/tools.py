"""Run inside tests/clients/client9/.venv by tests/clients/test_client9.py: the official client 9, its DSL and
eland against a leafsearch server (argv: URL, index). Prints one JSON object of what they got."""

from __future__ import annotations

import json
import sys
import warnings

import eland as ed
from elasticsearch import Elasticsearch, helpers
from elasticsearch.dsl import Document, Keyword, Long, Search, Text

url, index = sys.argv[1], sys.argv[2]
es = Elasticsearch(url)
out: dict = {"version": es.info()["version"]["number"]}
es.indices.create(
    index=index,
    mappings={"properties": {"n": {"type": "long"}, "s": {"type": "keyword"}, "t": {"type": "text"}}},
    aliases={f"{index}-alias": {}},
)
actions = ({"_index": index, "_id": str(i), "n": i, "s": "ab"[i % 2], "t": "hello world"} for i in range(100))
out["bulk"] = helpers.bulk(es, actions, refresh=True)[0]
out["count"] = es.count(index=index)["count"]
out["cat_count"] = es.cat.count(index=index, format="json")[0]["count"]  # client 9 sends POST
out["stats_docs"] = es.indices.stats(index=index)["_all"]["primaries"]["docs"]["count"]
out["analyze"] = [t["token"] for t in es.indices.analyze(text="Hello World")["tokens"]]
out["alias"] = sorted(es.indices.get_alias(name=f"{index}-alias"))
out["msearch"] = [
    r["hits"]["total"]["value"] for r in es.msearch(searches=[{"index": index}, {"size": 0}])["responses"]
]
out["field_caps"] = sorted(es.field_caps(index=index, fields="*")["fields"])


class Item(Document):
    n = Long()
    s = Keyword()
    t = Text()

    class Index:
        name = index


out["dsl_search"] = sorted(
    hit.n for hit in Item.search(using=es).filter("term", s="b").filter("range", n={"lt": 10})
)
out["dsl_scan"] = len(list(Item.search(using=es).filter("term", s="b").scan()))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # eland warns that the server's major version is 8
    frame = ed.DataFrame(es, es_index_pattern=index)
    out["eland_shape"] = list(frame.shape)
    out["eland_sum"] = int(frame["n"].sum())
    out["eland_rows"] = sorted(frame.to_pandas()["n"].tolist())[:3]
out["dsl_delete"] = Search(using=es, index=index).filter("range", n={"gte": 90}).delete()["deleted"]
es.indices.refresh(index=index)
out["after_delete"] = es.count(index=index)["count"]
out["reindex"] = es.reindex(source={"index": index}, dest={"index": f"{index}-copy"}, refresh=True)["created"]
out["update_by_query"] = es.update_by_query(index=f"{index}-copy", query={"term": {"s": "a"}})["updated"]
out["tasks"] = "nodes" in es.tasks.list()
out["cat_aliases"] = [row["alias"] for row in es.cat.aliases(format="json")]
out["close"] = es.indices.close(index=f"{index}-copy")["acknowledged"]
out["open"] = es.indices.open(index=f"{index}-copy")["acknowledged"]
out["nodes_stats"] = "indices" in next(iter(es.nodes.stats()["nodes"].values()))
es.indices.delete(index=f"{index}-copy")
es.indices.delete(index=index)
print(json.dumps(out))
