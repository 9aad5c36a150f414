"""`GET /_cluster/state`: the sections clients read (metadata of the node's indices with their
settings, mappings, aliases and state; nodes; routing table; blocks), narrowed by metric and
index, with `filter_path`; what the Python DSL's `Index.save()` reads of an existing index."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch
from elasticsearch_dsl import Index, analyzer


def test_metadata_of_one_index(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index(settings={"number_of_shards": 2}, mappings={"properties": {"k": {"type": "keyword"}}})
    assert (
        http.post("/_aliases", json={"actions": [{"add": {"index": name, "alias": f"{name}-a"}}]}).status_code
        == 200
    )
    body = http.get(f"/_cluster/state/metadata/{name}").json()
    assert set(body) == {"cluster_name", "cluster_uuid", "metadata"}
    entry = body["metadata"]["indices"][name]
    assert list(body["metadata"]["indices"]) == [name]
    assert entry["state"] == "open"
    assert entry["settings"]["index"]["number_of_shards"] == "2"
    assert entry["mappings"] == {"_doc": {"properties": {"k": {"type": "keyword"}}}}
    assert entry["aliases"] == [f"{name}-a"]
    assert body["cluster_uuid"] == http.get("/").json()["cluster_uuid"]


def test_whole_state_sections_and_filter_path(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index(settings={"number_of_shards": 2})
    body = http.get("/_cluster/state").json()
    for section in ("version", "state_uuid", "master_node", "blocks", "nodes", "metadata", "routing_table"):
        assert section in body
    assert body["master_node"] in body["nodes"]
    shards = body["routing_table"]["indices"][name]["shards"]
    assert sorted(shards) == ["0", "1"] and shards["0"][0]["state"] == "STARTED" and shards["0"][0]["primary"]
    filtered = http.get("/_cluster/state", params={"filter_path": f"metadata.indices.{name}.state"}).json()
    assert filtered == {"metadata": {"indices": {name: {"state": "open"}}}}
    two = http.get(f"/_cluster/state/nodes,routing_table/{name}").json()
    assert set(two) == {"cluster_name", "cluster_uuid", "nodes", "routing_table"}
    assert list(two["routing_table"]["indices"]) == [name]


def test_a_closed_index_shows_closed_and_blocked(http: httpx.Client, new_index: Callable[..., str]) -> None:
    name = new_index()
    assert http.post(f"/{name}/_close").status_code == 200
    body = http.get(f"/_cluster/state/metadata,blocks/{name}", params={"expand_wildcards": "all"}).json()
    assert body["metadata"]["indices"][name]["state"] == "close"
    assert body["blocks"]["indices"][name]["4"]["description"] == "index closed"


def test_the_version_grows_when_metadata_changes(http: httpx.Client, new_index: Callable[..., str]) -> None:
    before = http.get("/_cluster/state/version").json()["version"]
    new_index()
    assert http.get("/_cluster/state/version").json()["version"] > before


@pytest.mark.parametrize("path", ["/_cluster/state/nope", "/_cluster/state/metadata,nope/x"])
def test_an_unknown_metric_is_400(http: httpx.Client, path: str) -> None:
    response = http.get(path)
    assert response.status_code == 400
    assert error_of(response)["reason"] == f"request [{path}] contains unrecognized metric: [nope]"


def test_a_missing_index_narrows_to_nothing(http: httpx.Client) -> None:
    body = http.get("/_cluster/state/metadata/no-such-index-anywhere").json()
    assert body["metadata"]["indices"] == {}


def test_dsl_index_save_on_an_existing_index_with_analysis(es: Elasticsearch, index_name: str) -> None:
    """`Index.save()` reads the cluster state's metadata of an existing index to compare analysis."""
    index = Index(index_name, using=es)
    index.settings(number_of_shards=1)
    index.analyzer(analyzer("lower_kw", tokenizer="keyword", filter=["lowercase"]))
    try:
        index.save()
        index.save()  # the second time the index exists: the DSL reads `_cluster/state/metadata/<index>`
        state = es.cluster.state(index=index_name, metric="metadata")
        assert state["metadata"]["indices"][index_name]["settings"]["index"]["analysis"]["analyzer"][
            "lower_kw"
        ]
    finally:
        es.indices.delete(index=index_name)
