"""Unmodified Node.js tools against leafsearch: `@elastic/elasticsearch` 8.x and elasticdump.

The scripts in tests/clients/js/ use the clients exactly as their documentation shows, print one JSON
object, and these tests assert on it: every document exactly once, in order where the request
promises an order, and no search context left behind (`open_contexts` of `_nodes/stats` and the
`_cat/search_contexts` listing). The npm packages are pinned in tests/clients/js/package-lock.json and
installed with `npm ci` on first use.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from js_helpers import NEEDS_NODE, elasticdump, install_node_modules, run_script

from tests import web

CORPUS_DOCS = 3000
pytestmark = [NEEDS_NODE, pytest.mark.external]


@pytest.fixture(scope="session")
def node_modules() -> Path:
    return install_node_modules()


def contexts(http: httpx.Client, timeout: float = 5.0) -> list[dict[str, Any]]:
    """The open reader contexts; `open_contexts` of the node stats must agree with the listing.

    The listing and the stats are two requests, and the keep-alive reaper may free a context
    between them: the stats are read between two listings and held to them once both listings
    show the same contexts (read again until they do, within `timeout`).
    """
    deadline = time.monotonic() + timeout
    while True:
        rows = http.get("/_cat/search_contexts", params={"format": "json"}).json()
        stats = http.get("/_nodes/stats/indices/search").json()
        again = http.get("/_cat/search_contexts", params={"format": "json"}).json()
        if {row["id"] for row in rows} == {row["id"] for row in again}:
            (node,) = stats["nodes"].values()
            assert node["indices"]["search"]["open_contexts"] == len(rows), rows
            return rows
        assert time.monotonic() < deadline, f"the open contexts kept changing: {rows} then {again}"
        time.sleep(0.05)


def left_behind(http: httpx.Client, before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Contexts open now that were not open in `before`."""
    known = {row["id"] for row in before}
    return [row for row in contexts(http) if row["id"] not in known]


def wait_for_no_context_on(http: httpx.Client, index: str, timeout: float = 15.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        rows = [row for row in contexts(http) if index in row["indices"].split(",")]
        if not rows or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def unique_index(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def corpus(server: str, node_modules: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A 2-shard index of CORPUS_DOCS documents loaded by the Node.js bulk helper, read-only after."""
    index = unique_index("js-corpus")
    loaded = run_script("bulk_load.mjs", server, index, str(CORPUS_DOCS))
    yield index, loaded
    web.delete(f"{server}/{index}")


@pytest.fixture
def loaded_index(server: str, node_modules: Path, index_name: str) -> Iterator[str]:
    """A small index of its own (d0..d499) for a test that changes documents."""
    assert run_script("bulk_load.mjs", server, index_name, "500")["count"] == 500
    yield index_name
    web.delete(f"{server}/{index_name}")


def test_bulk_helper_loads_every_document(corpus: tuple[str, dict[str, Any]]) -> None:
    _, loaded = corpus
    assert loaded["version"].startswith("8.")  # what the client's product check read
    assert loaded == {
        "version": loaded["version"],
        "total": CORPUS_DOCS,
        "successful": CORPUS_DOCS,
        "failed": 0,
        "aborted": False,
        "failures": [],
        "count": CORPUS_DOCS,
    }


def test_bulk_helper_drops_failed_items_with_their_cause(server: str, loaded_index: str) -> None:
    out = run_script("bulk_errors.mjs", server, loaded_index)
    assert (out["total"], out["successful"], out["failed"]) == (4, 2, 2)
    conflict, unparsable = out["dropped"]
    assert conflict["status"] == 409
    assert conflict["type"] == "version_conflict_engine_exception"
    assert conflict["reason"] == "[d1]: version conflict, document already exists (current version [1])"
    assert conflict["title"] == "already there"
    assert unparsable["status"] == 400
    assert unparsable["type"] == "document_parsing_exception"
    assert "failed to parse field [n] of type [integer]" in unparsable["reason"]
    assert out["found"] == {"extra-1": True, "extra-2": True, "bad-n": False}
    assert out["d1Title"] == "document number 1"  # the refused `create` changed nothing


def test_scroll_helpers_return_every_document_once(
    server: str, http: httpx.Client, corpus: tuple[str, Any]
) -> None:
    index, _ = corpus
    before = contexts(http)
    out = run_script("scroll_helpers.mjs", server, index)

    by_doc = out["byDoc"]
    assert (by_doc["count"], by_doc["unique"], by_doc["duplicates"]) == (CORPUS_DOCS, CORPUS_DOCS, [])
    assert by_doc["pages"] == [500] * (CORPUS_DOCS // 500)
    assert by_doc["withScrollId"] == len(by_doc["pages"])
    assert by_doc["totals"] == [json.dumps({"value": CORPUS_DOCS, "relation": "eq"}, separators=(",", ":"))]

    by_n = out["byN"]
    assert (by_n["count"], by_n["unique"], by_n["duplicates"]) == (CORPUS_DOCS, CORPUS_DOCS, [])
    assert by_n["descending"] and (by_n["first"], by_n["last"]) == (CORPUS_DOCS - 1, 0)

    in_group = len(range(3, CORPUS_DOCS, 7))
    assert out["asInt"] == {"count": in_group, "totals": [in_group]}
    assert out["stopped"] == {"pages": 1, "hits": 100}
    assert left_behind(http, before) == []


def test_sliced_scrolls_and_pit_slices_in_parallel(
    server: str, http: httpx.Client, corpus: tuple[str, Any]
) -> None:
    index, _ = corpus
    before = contexts(http)
    out = run_script("sliced_scroll.mjs", server, index, "4")
    for walk in (out["scroll"], out["pit"]):
        assert (walk["count"], walk["unique"], walk["duplicates"]) == (CORPUS_DOCS, CORPUS_DOCS, [])
        assert len(walk["sizes"]) == 4 and all(walk["sizes"]), walk["sizes"]
    assert out["pit"]["closed"] == {"succeeded": True, "num_freed": 1}
    assert left_behind(http, before) == []


def test_pit_search_after_walks(server: str, http: httpx.Client, loaded_index: str) -> None:
    before = contexts(http)
    out = run_script("pit_search_after.mjs", server, loaded_index)
    assert out["openShards"] == {"total": 2, "successful": 2, "skipped": 0, "failed": 0}
    for name in ("byN", "byGroup"):
        walk = out[name]
        assert (walk["count"], walk["unique"], walk["duplicates"]) == (500, 500, []), name
        assert walk["ordered"], name
        assert walk["sortLengths"] == [2], name  # the sort value and the implicit _shard_doc
        assert len(walk["pitIds"]) == 1, name
        assert (walk["hasD0"], walk["hasLate"]) == (True, False), name  # the PIT's view, not the index's
    stateless = out["stateless"]
    assert (stateless["count"], stateless["unique"], stateless["duplicates"]) == (500, 500, [])
    assert stateless["ordered"] and stateless["sortLengths"] == [1] and stateless["pitIds"] == []
    assert (stateless["hasD0"], stateless["hasLate"]) == (False, True)
    assert out["closed"] == {"succeeded": True, "num_freed": 1}
    # Elasticsearch's shards fail with search_context_missing_exception, reported as all shards failed.
    assert out["afterClose"] == {"status": 404, "type": "search_phase_execution_exception"}
    assert left_behind(http, before) == []


def _documents(http: httpx.Client, index: str) -> dict[str, Any]:
    body = {"size": CORPUS_DOCS + 10, "query": {"match_all": {}}}
    hits = http.post(f"/{index}/_search", json=body).json()["hits"]["hits"]
    return {hit["_id"]: hit["_source"] for hit in hits}


def _dumped_ids(path: Path) -> list[str]:
    return [json.loads(line)["_id"] for line in path.read_text().splitlines() if line.strip()]


def test_elasticdump_copies_an_index(
    server: str, http: httpx.Client, corpus: tuple[str, Any], index_name: str, tmp_path: Path
) -> None:
    """Settings, mapping and data out to files (data by scroll and by PIT), then into a new index.

    elasticdump never clears its scroll (it stops reading once it has `hits.total` documents): the
    scroll export leaves one context until the keep-alive it asked for runs out, as it would on
    Elasticsearch, and the test holds leafsearch to that keep-alive. It closes its PIT with
    `DELETE /<index>/_pit`, a route Elasticsearch does not have (a 405 there, so the PIT stays):
    leafsearch takes that form, so the PIT export leaves nothing.
    """
    index, _ = corpus
    source = f"{server}/{index}"
    target = f"{server}/{index_name}"
    before = contexts(http)
    for kind in ("settings", "mapping"):
        elasticdump(f"--input={source}", f"--output={tmp_path / kind}.json", f"--type={kind}")
    scrolled, by_pit = tmp_path / "data.json", tmp_path / "pit.json"
    log = elasticdump(
        f"--input={source}", f"--output={scrolled}", "--type=data", "--limit=500", "--scrollTime=2s"
    )
    assert f"Total Writes: {CORPUS_DOCS}" in log
    assert [(row["type"], row["keep_alive"]) for row in left_behind(http, before)] == [("scroll", "2s")]
    elasticdump(
        f"--input={source}",
        f"--output={by_pit}",
        "--type=data",
        "--limit=700",
        "--searchAfter",
        "--pit",
        "--pitKeepAlive=2s",
    )
    assert "pit" not in [row["type"] for row in left_behind(http, before)]
    for dumped in (scrolled, by_pit):
        ids = _dumped_ids(dumped)
        assert len(ids) == len(set(ids)) == CORPUS_DOCS, dumped.name
    assert wait_for_no_context_on(http, index) == []
    assert left_behind(http, before) == []

    try:
        for kind in ("settings", "mapping"):
            elasticdump(f"--input={tmp_path / kind}.json", f"--output={target}", f"--type={kind}")
        elasticdump(f"--input={scrolled}", f"--output={target}", "--type=data", "--limit=500")
        http.post(f"/{index_name}/_refresh")
        settings = http.get(f"/{index_name}/_settings").json()[index_name]["settings"]["index"]
        assert settings["number_of_shards"] == "2"
        mappings = http.get(f"/{index}/_mapping").json()[index]
        assert http.get(f"/{index_name}/_mapping").json()[index_name] == mappings
        copied = _documents(http, index_name)
        assert len(copied) == CORPUS_DOCS
        assert copied == _documents(http, index)
    finally:
        http.delete(f"/{index_name}")
