"""What leafsearch lacks says so: Elasticsearch endpoints and features it does not have answer 400
"... is not supported by leafsearch" (through raw HTTP and the official client), names unknown to
Elasticsearch too keep Elasticsearch's own errors, and docs/unsupported.md lists every one."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest
from conftest import REPO, error_of
from elasticsearch import BadRequestError, Elasticsearch

from leafsearch.request.query_dsl import _PARSERS, _QUERY_NAMES
from leafsearch.unsupported import AGGREGATIONS, ENDPOINTS, FIELD_TYPES, METHOD_ENDPOINTS

DOC = (REPO / "docs" / "unsupported.md").read_text().replace("\\|", "|")  # unescape table cells


@pytest.mark.parametrize(
    ("method", "path", "feature"),
    [
        ("GET", "/_slm/policy", "snapshot lifecycle management"),
        ("GET", "/_ingest/pipeline", "ingest pipelines"),
        ("POST", "/_sql", "SQL"),
        ("POST", "/logs/_eql/search", "EQL"),
        (
            "GET",
            "/_cluster/stats",
            "this cluster API (leafsearch has health, settings, state and pending tasks)",
        ),
        ("GET", "/_nodes/hot_threads", "hot threads"),
        ("POST", "/logs/_explain/1", "explain"),
        ("GET", "/logs/_ilm/explain", "index lifecycle management"),
        ("GET", "/_security/user", "this security API (leafsearch has users, API keys and _authenticate)"),
        ("POST", "/_ml/anomaly_detectors/x/_open", "machine learning"),
        ("POST", "/logs/_forcemerge", "force merge (leafsearch merges on its own)"),
        ("POST", "/_search/template", "search templates"),
    ],
)
def test_endpoints_elasticsearch_has_say_they_are_not_supported(
    http: httpx.Client, method: str, path: str, feature: str
) -> None:
    response = http.request(method, path)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "illegal_argument_exception"
    assert error["reason"] == f"[{method} {path}] is not supported by leafsearch: {feature}"


def test_what_leafsearch_has_and_what_nobody_has_answer_as_before(http: httpx.Client) -> None:
    assert http.get("/_data_stream").status_code == 200
    assert http.get("/_cat/indices").status_code == 200
    assert http.get("/_cluster/health").status_code == 200
    # served by its handler (which says security is off on this node), not refused as missing
    assert "not supported by leafsearch" not in http.get("/_security/_authenticate").text
    unknown = http.get("/_no_such_api/x")
    assert unknown.status_code == 400
    assert unknown.json() == {"error": "no handler found for uri [/_no_such_api/x] and method [GET]"}
    # paths leafsearch has, with a method it lacks there: Elasticsearch's 405, not "not supported"
    assert http.post("/some-index").status_code == 405
    assert http.post("/_cluster/settings").status_code == 405
    assert http.put("/_cat/indices").status_code == 405


def test_the_official_client_gets_the_reason(es: Elasticsearch) -> None:
    for call in (
        lambda: es.slm.get_lifecycle(),
        lambda: es.ingest.get_pipeline(),
        lambda: es.sql.query(query="SELECT 1"),
    ):
        with pytest.raises(BadRequestError) as refused:
            call()
        assert "is not supported by leafsearch" in refused.value.body["error"]["reason"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"query": {"geo_grid": {"loc": {"geohash": "u0"}}}},
            "[geo_grid] query is not supported by leafsearch",
        ),
        (
            {"query": {"intervals": {"t": {"match": {"query": "x"}}}}},
            "[intervals] query is not supported by leafsearch",
        ),
        (
            {"query": {"span_term": {"n": 1}}},
            "[span_term] query is not supported by leafsearch",
        ),
        (
            {"rank": {"rrf": {}}},
            "[rank] is not supported by leafsearch",
        ),
        (
            {"sort": [{"_script": {"type": "version", "script": "'1'"}}]},
            "[_script] sort of [type] version is not supported by leafsearch",
        ),
        (
            {"aggs": {"p": {"percentiles": {"field": "n"}}}},
            "[percentiles] aggregation is not supported by leafsearch",
        ),
        ({"runtime_mappings": {"r": {"type": "long"}}}, "[runtime_mappings] is not supported by leafsearch"),
    ],
)
def test_features_say_they_are_not_supported(
    http: httpx.Client, new_index: Callable[..., str], body: dict, reason: str
) -> None:
    name = new_index(mappings={"properties": {"n": {"type": "long"}}})
    response = http.post(f"/{name}/_search", json=body)
    assert response.status_code == 400
    assert error_of(response)["reason"] == reason


def test_field_types_say_they_are_not_supported(http: httpx.Client, index_name: str) -> None:
    geo = http.put(f"/{index_name}", json={"mappings": {"properties": {"loc": {"type": "geo_shape"}}}})
    assert geo.status_code == 400
    assert error_of(geo)["type"] == "mapper_parsing_exception"
    assert error_of(geo)["reason"] == (
        "Failed to parse mapping: the field type [geo_shape] of field [loc] is not supported by leafsearch"
    )
    unknown = http.put(f"/{index_name}", json={"mappings": {"properties": {"loc": {"type": "geo_pint"}}}})
    assert (
        error_of(unknown)["reason"]
        == "Failed to parse mapping: The mapper type [geo_pint] declared on field [loc] does not exist. It "
        "might have been created within a future version or requires a plugin to be installed. Check the "
        "documentation."
    )
    http.delete(f"/{index_name}")


def test_the_docs_name_everything_refused() -> None:
    listed = set(re.findall(r"`([^`\n]+)`", DOC.replace("```", "")))
    assert listed >= FIELD_TYPES
    assert listed >= AGGREGATIONS
    assert set(_QUERY_NAMES) - set(_PARSERS) <= listed
    for pattern in [pattern for pattern, _ in ENDPOINTS] + [pattern for _, pattern, _ in METHOD_ENDPOINTS]:
        assert next(p for p in pattern if p not in ("*", "**")) in DOC, pattern
