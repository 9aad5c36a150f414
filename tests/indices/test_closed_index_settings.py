"""Static settings (analysis) on a closed index: accepted, used once the index is open again, kept
across a restart; refused on an open index with Elasticsearch's message; refused without change
when the mapping names an analyzer the new analysis lacks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import httpx
from conftest import error_of, running_server, search_ok
from elasticsearch import Elasticsearch

from tests import web

ENGLISH_DEFAULT = {"analysis": {"analyzer": {"default": {"type": "english"}}}}


def _hits(http: httpx.Client, index: str, query: dict) -> int:
    body = {"query": query, "track_total_hits": True}
    return search_ok(http, index, body)["hits"]["total"]["value"]


def test_analysis_set_on_a_closed_index_applies_when_opened(
    es: Elasticsearch, http: httpx.Client, new_index: Callable
) -> None:
    index = new_index(mappings={"properties": {"body": {"type": "text"}}})
    es.indices.close(index=index)
    es.indices.put_settings(index=index, settings=ENGLISH_DEFAULT)
    es.indices.open(index=index)
    settings = es.indices.get_settings(index=index)[index]["settings"]["index"]
    assert settings["analysis"]["analyzer"]["default"]["type"] == "english"
    http.put(f"/{index}/_doc/1?refresh=true", json={"body": "running dogs"})
    assert _hits(http, index, {"term": {"body": "run"}}) == 1
    assert _hits(http, index, {"match": {"body": "runs"}}) == 1
    tokens = es.indices.analyze(index=index, text="The dogs")["tokens"]
    assert [t["token"] for t in tokens] == ["dog"]


def test_static_settings_on_an_open_index_are_refused(http: httpx.Client, new_index: Callable) -> None:
    index = new_index()
    uuid = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]
    response = http.put(f"/{index}/_settings", json=ENGLISH_DEFAULT)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "illegal_argument_exception"
    assert error["reason"] == (
        "Can't update non dynamic settings [[index.analysis.analyzer.default.type]] for open indices "
        f"[[{index}/{uuid}]]"
    )
    assert "analysis" not in http.get(f"/{index}/_settings").json()[index]["settings"]["index"]


def test_analysis_the_mapping_cannot_use_is_refused_without_change(
    http: httpx.Client, new_index: Callable
) -> None:
    settings = {"analysis": {"analyzer": {"mine": {"type": "english"}}}}
    index = new_index(settings=settings, mappings={"properties": {"t": {"type": "text", "analyzer": "mine"}}})
    http.post(f"/{index}/_close")
    response = http.put(f"/{index}/_settings", json={"analysis": {"analyzer": {"mine": {"type": "nope"}}}})
    assert response.status_code == 400
    assert error_of(response)["reason"] == "Unknown analyzer type [nope] for [mine]"
    http.post(f"/{index}/_open")
    stored = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["analysis"]
    assert stored == {"analyzer": {"mine": {"type": "english"}}}
    http.put(f"/{index}/_doc/1?refresh=true", json={"t": "jumping"})
    assert _hits(http, index, {"term": {"t": "jump"}}) == 1


def test_closed_index_settings_survive_a_restart(tmp_path: Path) -> None:
    with running_server(tmp_path) as (url, _), web.Client(base_url=url, timeout=60) as http:
        assert (
            http.put("/kept", json={"mappings": {"properties": {"b": {"type": "text"}}}}).status_code == 200
        )
        assert http.post("/kept/_close").status_code == 200
        assert http.put("/kept/_settings", json=ENGLISH_DEFAULT).status_code == 200
    with running_server(tmp_path) as (url, _), web.Client(base_url=url, timeout=60) as http:
        assert http.post("/kept/_open").status_code == 200
        http.put("/kept/_doc/1?refresh=true", json={"b": "foxes"})
        assert _hits(http, "kept", {"match": {"b": "fox"}}) == 1


def test_settings_changes_beside_searches(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(mappings={"properties": {"body": {"type": "text"}}})
    http.put(f"/{index}/_doc/1?refresh=true", json={"body": "running"})
    stop = threading.Event()
    unexpected: list[str] = []

    def search() -> None:
        while not stop.is_set():
            r = http.post(f"/{index}/_search", json={"query": {"match": {"body": "running"}}})
            if r.status_code != 200 and error_of(r)["type"] != "index_closed_exception":
                unexpected.append(r.text)

    readers = [threading.Thread(target=search) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for analyzer in ("english", "standard", "english"):
            assert http.post(f"/{index}/_close").status_code == 200
            body = {"analysis": {"analyzer": {"default": {"type": analyzer}}}}
            assert http.put(f"/{index}/_settings", json=body).status_code == 200
            assert http.post(f"/{index}/_open").status_code == 200
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert unexpected == []
    http.put(f"/{index}/_doc/2?refresh=true", json={"body": "runs"})
    assert _hits(http, index, {"match": {"body": "running"}}) == 1  # both stemmed to "run" now


def test_final_settings_stay_fixed_on_a_closed_index(http: httpx.Client, new_index: Callable) -> None:
    index = new_index()
    http.post(f"/{index}/_close")
    for key, value in (("index.number_of_shards", 3), ("index.sort.field", "x")):
        response = http.put(f"/{index}/_settings", json={key: value})
        assert response.status_code == 400
        assert error_of(response)["reason"] == f"final index setting [{key}], not updateable"
    http.post(f"/{index}/_open")
    shards = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["number_of_shards"]
    assert shards == "1"
