"""Field names a client sends never become file names: names of any length and alphabet, with
`/` or NUL in them, and many fields, survive refresh, merge and restart (`kill -9` too)."""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
from conftest import running_server

import leafsearch
from leafsearch.indices import admin
from tests import web

POISON_NAMES = [
    "x" * 250,
    "é" * 130,
    "a/b",
    "up/escape/",
    "nul\u0000inside",
    "space and: colon*?",
    "日本語のフィールド",
]


def poison_doc(i: int) -> dict:
    doc = {name: f"v{i}" for name in POISON_NAMES}
    doc.update({f"many_{k}": k * i for k in range(60)})
    return doc


def term_count(http: httpx.Client, index: str, field: str, value: object) -> int:
    response = http.post(f"/{index}/_count", json={"query": {"term": {field: value}}})
    assert response.status_code == 200, response.text
    return response.json()["count"]


def check_searchable(http: httpx.Client, index: str, docs: int) -> None:
    for name in POISON_NAMES:
        keyword = f"{name}.keyword"  # dynamic strings are text with a keyword subfield
        assert term_count(http, index, keyword, "v3") == 1, name
        assert term_count(http, index, name, "v3") == 1, name
    assert term_count(http, index, "many_59", 59 * 5) == 1
    response = http.get(f"/{index}/_count")
    assert response.json()["count"] == docs


def test_poison_field_names_survive_refresh_and_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, process), web.Client(base_url=url, timeout=60) as http:
        for i in range(10):
            response = http.put(f"/poison/_doc/{i}", params={"refresh": "true"}, json=poison_doc(i))
            assert response.status_code == 201, response.text
        check_searchable(http, "poison", 10)
        mapped = http.get("/poison/_mapping").json()["poison"]["mappings"]["properties"]
        assert set(POISON_NAMES) <= set(mapped)
        # Unrefreshed writes too, then a crash.
        for i in range(10, 15):
            assert http.put(f"/poison/_doc/{i}", json=poison_doc(i)).status_code == 201
        process.kill()
        process.wait()
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=60) as http:
        assert http.post("/poison/_refresh").status_code == 200
        check_searchable(http, "poison", 15)
        assert orjson.loads(http.get("/poison/_doc/3").content)["_source"] == poison_doc(3)
    names = [p.name for p in data.rglob("*")]
    assert not [n for n in names if "escape" in n or "x" * 50 in n or "é" in n]


def test_poison_field_names_survive_a_merge(tmp_path: Path) -> None:
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "poison", {"settings": {"number_of_shards": 1}})
        for i in range(12):  # one segment per refresh, then merged into one
            node.index_doc("poison", str(i), orjson.dumps(poison_doc(i)), refresh="true")
        shard = node.indices["poison"].shards[0]
        assert len(shard.segments) >= 10
        while shard.maybe_merge():
            pass
        assert len(shard.segments) < 10
        merged = shard.segments[0]
        for name in POISON_NAMES:
            column = merged.column(f"{name}.keyword")
            assert column is not None and column.terms.tolist()[:2] == [b"v0", b"v1"], name
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        shard = node.indices["poison"].shards[0]
        assert sum(seg.max_doc for seg in shard.segments) == 12
        assert node.get_doc("poison", "7")["_source"].parsed() == poison_doc(7)
