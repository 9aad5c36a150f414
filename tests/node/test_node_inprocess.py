"""`leafsearch.Node(path)` used in-process: the document operations without HTTP, reopening,
frozen snapshots, and shard placement as Elasticsearch computes it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from inprocess import count, search

import leafsearch
from leafsearch.errors import ElasticError, IndexNotFound, VersionConflict
from leafsearch.index.routing import default_routing_num_shards, routing_hash
from leafsearch.indices import admin
from leafsearch.node.node import NodeLocked


def source(doc: dict | None) -> dict | None:
    return None if doc is None else doc["_source"].parsed()


def test_document_operations_then_reopen(tmp_path: Path) -> None:
    path = tmp_path / "node"
    with leafsearch.Node(path, background=False) as node:
        admin.create_index(
            node,
            "books",
            {"settings": {"number_of_shards": 2}, "mappings": {"properties": {"title": {"type": "text"}}}},
        )
        created = node.index_doc("books", "1", b'{"title": "Dune", "year": 1965}')
        assert (created["result"], created["_version"]) == ("created", 1)
        auto = node.index_doc("books", None, b'{"title": "Emma", "year": 1815}')
        assert len(auto["_id"]) == 20
        with pytest.raises(VersionConflict):
            node.index_doc("books", "1", b'{"title": "again"}', op_type="create")
        updated = node.update_doc("books", "1", {"doc": {"rating": 5}})
        assert (updated["result"], updated["_version"]) == ("updated", 2)
        assert source(node.get_doc("books", "1")) == {"title": "Dune", "year": 1965, "rating": 5}
        result = node.bulk(
            b'{"index":{"_id":"2"}}\n{"title":"Ulysses","year":1922}\n'
            b'{"delete":{"_id":"1"}}\n'
            b'{"update":{"_id":"3"}}\n{"doc":{"title":"Walden","year":1854},"doc_as_upsert":true}\n',
            index="books",
            refresh="true",
        )
        assert not result["errors"]
        assert [next(iter(i.values()))["result"] for i in result["items"]] == [
            "created",
            "deleted",
            "created",
        ]
        assert node.get_doc("books", "1") is None
        assert node.delete_doc("books", "missing")["result"] == "not_found"
        node.indices["books"].refresh()  # the bulk refreshed only the shards it wrote to
        assert count(node, "books", None, {})["count"] == 3
        hits = search(node, "books", {"query": {"range": {"year": {"lt": 1900}}}, "sort": ["year"]}, {})
        assert [h["_id"] for h in hits["hits"]["hits"]] == [auto["_id"], "3"]
        with pytest.raises(ElasticError) as refused:
            node.index_doc("books", "4", b'{"year": "long ago"}')
        assert refused.value.error_type == "document_parsing_exception"
        # Unrefreshed writes and a dynamic field right before closing.
        node.index_doc("books", "5", b'{"title": "Beloved", "year": 1987, "isbn": "x"}')
        with pytest.raises(NodeLocked):
            leafsearch.Node(path, background=False)
    with leafsearch.Node(path, background=False) as node:
        assert source(node.get_doc("books", "5")) == {"title": "Beloved", "year": 1987, "isbn": "x"}
        assert source(node.get_doc("books", "2")) == {"title": "Ulysses", "year": 1922}
        assert node.get_doc("books", "1") is None
        assert node.get_doc("books", "3")["_version"] == 1
        assert count(node, "books", None, {})["count"] == 4
        assert node.indices["books"].num_shards == 2
        properties = node.indices["books"].mapping.to_body()["properties"]
        assert properties["title"] == {"type": "text"}
        assert properties["year"] == {"type": "long"}
        assert properties["isbn"]["type"] == "text"
        with pytest.raises(IndexNotFound):
            node.get_doc("nope", "1")


def _segment_folders(node, name: str) -> set[Path]:
    shard = node.indices[name].shards[0]
    return {p for p in shard.folder.iterdir() if p.is_dir() and p.name != "translog"}


def _snapshot_sources(searcher) -> dict[str, dict]:
    out = {}
    for view in searcher.views:
        docs = view.live_docs
        for doc_id, raw in zip(view.segment.doc_ids(docs), view.segment.sources(docs), strict=True):
            out[doc_id] = orjson.loads(raw)
    return out


def test_a_searcher_is_a_frozen_snapshot_until_released(tmp_path: Path) -> None:
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        for batch in range(12):
            lines = b"".join(
                b'{"index":{"_id":"%d-%d"}}\n{"batch":%d,"i":%d}\n' % (batch, i, batch, i) for i in range(10)
            )
            node.bulk(lines, index="snap", refresh="true")
        shard = node.indices["snap"].shards[0]
        old = shard.acquire_searcher()
        before = _snapshot_sources(old)
        old_folders = {view.segment.folder for view in old.views}
        assert _segment_folders(node, "snap") == old_folders and len(old_folders) == 12
        for batch in range(12):
            node.delete_doc("snap", f"{batch}-0")
            node.index_doc("snap", f"{batch}-1", b'{"batch": -1}')
            node.update_doc("snap", f"{batch}-2", {"doc": {"i": 99}})
        node.indices["snap"].refresh()
        merges = 0
        while shard.maybe_merge():
            merges += 1
        node.indices["snap"].refresh()
        assert merges > 0
        now_folders = {segment.folder for segment in shard.segments}
        assert len(now_folders) < 12
        # The old snapshot still returns every old document with its old source.
        assert _snapshot_sources(old) == before
        assert len(before) == 120 and before["3-0"] == {"batch": 3, "i": 0}
        assert all(folder.exists() for folder in old_folders)
        # The current state is the new one.
        assert node.get_doc("snap", "3-0") is None
        assert source(node.get_doc("snap", "3-2")) == {"batch": 3, "i": 99}
        assert count(node, "snap", None, {})["count"] == 108
        old.release()
        # Released: the segments only the old snapshot held are gone from disk, nothing else is.
        assert old_folders - now_folders
        assert _segment_folders(node, "snap") == now_folders


# Elasticsearch's Murmur3HashFunctionTests: the hash of a routing value (UTF-16 code units).
MURMUR3 = {
    "": 0x00000000,
    "h": 0x3FB8BA02,
    "he": 0xCE30A49F,
    "hel": 0x0C7CEE6B,
    "hell": 0x5A0CB7C3,
    "hello": 0xD7C31989,
    "hello w": 0x22AB2984,
    "hello wo": 0xDF0CA123,
    "hello wor": 0xE7744D61,
    "hello worl": 0x51837EC6,
    "hello world": 0x64B256A4,
    "hello world!": 0xDA1575E5,
    "Γειά σου Κόσμε": 0x8DED82BE,
    "Supplementary planes too 🙂": 0x8274606C,
    "The quick brown fox jumps over the lazy dog": 0xE07DB09C,
    "The quick brown fox jumps over the lazy cog": 0x4E63D2AD,
}

# Elasticsearch's IndexRoutingTests.testBWC: 8 shards, 8 routing shards; the shard of each value,
# used as an id or as a custom routing value.
BWC_8_SHARDS = {
    "sEERfFzPSI": 1, "cNRiIrjzYd": 7, "BgfLBXUyWT": 5, "cnepjZhQnb": 3, "OKCmuYkeCK": 6, "OutXGRQUja": 5,
    "yCdyocKWou": 1, "KXuNWWNgVj": 2, "DGJOYrpESx": 4, "upLDybdTGs": 5, "yhZhzCPQby": 1, "EyCVeiCouA": 1,
    "tFyVdQauWR": 6, "nyeRYDnDQr": 6, "hswhrppvDH": 0, "BSiWvDOsNE": 5, "YHicpFBSaY": 1, "EquPtdKaBZ": 4,
    "rSjLZHCDfT": 5, "qoZALVcite": 7, "yDCCPVBiCm": 7, "ngizYtQgGK": 5, "FYQRIBcNqz": 0, "EBzEDAPODe": 2,
    "YePigbXgKb": 1, "PeGJjomyik": 3, "cyQIvDmyYD": 7, "yIEfZrYfRk": 5, "kblouyFUbu": 7, "xvIGbRiGJF": 3,
    "KWimwsREPf": 4, "wsNavvIcdk": 7, "xkWaPcCmpT": 0, "FKKTOnJMDy": 7, "RuLzobYixn": 2, "mFohLeFRvF": 4,
    "aAMXnamRJg": 7, "zKBMYJDmBI": 0, "ElSVuJQQuw": 7, "pezPtTQAAm": 7, "zBjjNEjAex": 2, "PGgHcLNPYX": 7,
    "hOkpeQqTDF": 3, "chZXraUPBH": 7, "FAIcSmmNXq": 5, "EZmDicyayC": 0, "GRIueBeIyL": 7, "qCChjGZYLp": 3,
    "IsSZQwwnUT": 3, "MGlxLFyyCK": 3, "YmscwrKSpB": 0, "czSljcjMop": 5, "XhfGWwNlng": 1, "cWpKJjlzgj": 7,
    "eDzIfMKbvk": 1, "WFFWYBfnTb": 0, "oDdHJxGxja": 7, "PDOQQqgIKE": 1, "bGEIEBLATe": 6, "xpRkJPWVpu": 2,
    "kTwZnPEeIi": 2, "DifcuqSsKk": 1, "CEmLmljpXe": 5, "cuNKtLtyJQ": 7, "yNjiAnxAmt": 5, "bVDJDCeaFm": 2,
    "vdnUhGLFtl": 0, "LnqSYezXbr": 5, "EzHgydDCSR": 3, "ZSKjhJlcpn": 1, "WRjUoZwtUz": 3, "RiBbcCdIgk": 4,
    "yizTqyjuDn": 4, "QnFjcpcZUT": 4, "agYhXYUUpl": 7, "UOjiTugjNC": 7, "nICGuWTdfV": 0, "NrnSmcnUVF": 2,
    "ZSzFcbpDqP": 3, "YOhahLSzzE": 5, "iWswCilUaT": 1, "zXAamKsRwj": 2, "aqGsrUPHFq": 5, "eDItImYWTS": 1,
    "JAYDZMRcpW": 4, "lmvAaEPflK": 7, "IKuOwPjKCx": 5, "schsINzlYB": 1, "OqbFNxrKrF": 2, "QrklDfvEJU": 6,
    "VLxKRKdLbx": 4, "imoydNTZhV": 1, "uFZyTyOMRO": 4, "nVAZVMPNNx": 3, "rPIdESYaAO": 5, "nbZWPWJsIM": 0,
    "wRZXPSoEgd": 3, "nGzpgwsSBc": 4, "AITyyoyLLs": 4,
}  # fmt: skip


def _stored_ids(index) -> dict[int, set[str]]:
    """The ids each shard actually stores, read from its current snapshot."""
    out: dict[int, set[str]] = {}
    for shard in index.shards:
        searcher = shard.acquire_searcher()
        try:
            out[shard.shard_id] = {i for v in searcher.views for i in v.segment.doc_ids(v.live_docs)}
        finally:
            searcher.release()
    return out


@pytest.mark.parametrize(("value", "expected"), MURMUR3.items())
def test_routing_hash_is_elasticsearch_murmur3(value: str, expected: int) -> None:
    assert routing_hash(value) & 0xFFFFFFFF == expected


def test_documents_are_stored_on_the_shards_elasticsearch_chooses(tmp_path: Path) -> None:
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        settings = {"number_of_shards": 8, "number_of_routing_shards": 8}
        admin.create_index(node, "by-id", {"settings": settings})
        admin.create_index(node, "by-routing", {"settings": settings})
        body = b"".join(b'{"index":{"_id":"%s"}}\n{}\n' % k.encode() for k in BWC_8_SHARDS)
        node.bulk(body, index="by-id", refresh="true")
        # The same values as custom routing, on other ids (and through the single-document API).
        for n, key in enumerate(BWC_8_SHARDS):
            node.index_doc("by-routing", f"doc{n}", b"{}", routing=key)
        node.indices["by-routing"].refresh()
        expected: dict[int, set[str]] = {s: set() for s in range(8)}
        routed: dict[int, set[str]] = {s: set() for s in range(8)}
        for n, (key, shard) in enumerate(BWC_8_SHARDS.items()):
            expected[shard].add(key)
            routed[shard].add(f"doc{n}")
        assert _stored_ids(node.indices["by-id"]) == expected
        assert _stored_ids(node.indices["by-routing"]) == routed
        for n, key in enumerate(BWC_8_SHARDS):
            assert node.get_doc("by-routing", f"doc{n}", routing=key)["_routing"] == key


# Elasticsearch's MetadataCreateIndexServiceTests.testCalculateNumRoutingShards.
DEFAULT_ROUTING_SHARDS = {1: 1024, 2: 1024, 3: 768, 9: 576, 512: 1024, 1024: 2048}


@pytest.mark.parametrize(("shards", "routing_shards"), DEFAULT_ROUTING_SHARDS.items())
def test_default_number_of_routing_shards(shards: int, routing_shards: int) -> None:
    assert default_routing_num_shards(shards) == routing_shards


@pytest.mark.parametrize("shards", [2, 3, 5, 8])
def test_default_placement_uses_the_routing_shards_like_elasticsearch(tmp_path: Path, shards: int) -> None:
    """shard = floorMod(murmur3(routing), routing_shards) / (routing_shards / shards), as in IndexRouting."""
    with leafsearch.Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "idx", {"settings": {"number_of_shards": shards}})
        index = node.indices["idx"]
        routing_shards = default_routing_num_shards(shards)
        body = b"".join(b'{"index":{"_id":"%s"}}\n{}\n' % k.encode() for k in BWC_8_SHARDS)
        node.bulk(body, index="idx", refresh="true")
        expected: dict[int, set[str]] = {s: set() for s in range(shards)}
        for key in BWC_8_SHARDS:
            expected[(routing_hash(key) % routing_shards) // (routing_shards // shards)].add(key)
        assert _stored_ids(index) == expected
        # With the default routing shards, placement differs from a plain modulo of the shard count.
        if shards == 8:
            assert expected != {s: {k for k, v in BWC_8_SHARDS.items() if v == s} for s in range(8)}
