"""HTTP behaviour shared by every endpoint: routing errors, media types, parameters, rendering."""

from __future__ import annotations

import gzip

import httpx
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch

VND = "application/vnd.elasticsearch+json; compatible-with=8"


def test_root_describes_an_elasticsearch_8_node(http: httpx.Client, es: Elasticsearch) -> None:
    body = http.get("/").json()
    assert body["version"]["number"] == "8.17.0"
    assert body["version"]["build_flavor"] == "default"
    assert body["version"]["build_snapshot"] is False
    assert body["tagline"] == "You Know, for Search"
    assert {"name", "cluster_name", "cluster_uuid"} <= set(body)
    assert {
        "lucene_version",
        "minimum_wire_compatibility_version",
        "minimum_index_compatibility_version",
        "build_hash",
        "build_date",
        "build_type",
    } <= set(body["version"])
    assert es.info()["version"]["number"] == "8.17.0"
    head = http.head("/")
    assert head.status_code == 200
    assert head.content == b""
    assert es.ping()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("HEAD", "/"),
        ("GET", "/no/such/path/here"),
        ("POST", "/x"),
        ("HEAD", "/missing-index"),
        ("GET", "/missing-index"),
    ],
)
def test_every_response_carries_the_product_header(http: httpx.Client, method: str, path: str) -> None:
    assert http.request(method, path).headers["x-elastic-product"] == "Elasticsearch"


def test_unknown_path_is_400_no_handler(http: httpx.Client) -> None:
    response = http.get("/a/b/c/d/e?pretty")
    assert response.status_code == 400
    assert response.json() == {"error": "no handler found for uri [/a/b/c/d/e?pretty] and method [GET]"}


def test_known_path_with_wrong_method_is_405_with_allow(http: httpx.Client) -> None:
    response = http.post("/some-index")
    assert response.status_code == 405
    assert response.json() == {
        "error": "Incorrect HTTP method for uri [/some-index] and method [POST], "
        "allowed: [DELETE, GET, HEAD, PUT]",
        "status": 405,
    }
    assert response.headers["allow"] == "DELETE,GET,HEAD,PUT"
    doc = http.put("/some-index/_doc")
    assert doc.status_code == 405
    assert doc.headers["allow"] == "POST"


def test_options_lists_the_allowed_methods(http: httpx.Client) -> None:
    response = http.options("/_search")
    assert response.status_code == 200
    assert set(response.headers["allow"].split(",")) >= {"GET", "POST"}


def test_paths_fall_through_to_the_index_routes_like_elasticsearch(http: httpx.Client) -> None:
    # PUT /_search is "create index _search", refused for its name, as Elasticsearch does
    error = error_of(http.put("/_search"))
    assert error["type"] == "invalid_index_name_exception"
    assert error["reason"] == "Invalid index name [_search], must not start with '_', '-', or '+'"


def test_unrecognized_parameters_are_refused_with_suggestions(http: httpx.Client) -> None:
    response = http.get("/_search", params={"sizee": "1"})
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "illegal_argument_exception"
    assert (
        error["reason"]
        == "request [/_search] contains unrecognized parameter: [sizee] -> did you mean [size]?"
    )
    several = error_of(http.get("/_cluster/health", params={"foo": "1", "bar": "2"}))
    assert several["reason"] == "request [/_cluster/health] contains unrecognized parameters: [bar], [foo]"


def test_boolean_parameters_accept_only_true_false_or_empty(http: httpx.Client) -> None:
    assert http.get("/_cluster/settings?flat_settings").status_code == 200
    assert http.get("/_cluster/settings?flat_settings=false").status_code == 200
    error = error_of(http.get("/_cluster/settings?flat_settings=yes"))
    assert error["reason"] == "Failed to parse value [yes] as only [true] or [false] are allowed."


def test_response_parameters_are_accepted_everywhere(http: httpx.Client) -> None:
    response = http.get(
        "/_cluster/health",
        params={"pretty": "", "human": "true", "error_trace": "false", "filter_path": "status"},
    )
    assert response.status_code == 200
    assert response.text.startswith("{\n  ")
    assert response.text.endswith("}\n")
    assert set(response.json()) == {"status"}


def test_filter_path_includes_wildcards_and_exclusions(http: httpx.Client) -> None:
    body = http.get("/", params={"filter_path": "version.number,tagline"}).json()
    assert body == {"version": {"number": "8.17.0"}, "tagline": "You Know, for Search"}
    body = http.get("/", params={"filter_path": "version.*_version"}).json()
    assert set(body["version"]) == {
        "lucene_version",
        "minimum_wire_compatibility_version",
        "minimum_index_compatibility_version",
    }
    assert http.get("/", params={"filter_path": "**.number"}).json() == {"version": {"number": "8.17.0"}}
    assert "version" not in http.get("/", params={"filter_path": "-version"}).json()
    assert http.get("/", params={"filter_path": "nothing.matches"}).json() == {}


def test_errors_are_not_filtered(http: httpx.Client) -> None:
    response = http.get("/missing-index-for-filter", params={"filter_path": "status"})
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "index_not_found_exception"


def test_unsupported_content_type_is_406(http: httpx.Client) -> None:
    response = http.post("/_search", content=b"{}", headers={"content-type": "text/plain"})
    assert response.status_code == 406
    assert response.json() == {"error": "Content-Type header [text/plain] is not supported", "status": 406}
    form = http.post("/_search", content=b"{}", headers={"content-type": "application/x-www-form-urlencoded"})
    assert form.status_code == 406


def test_compatibility_media_types_are_answered_in_kind(http: httpx.Client) -> None:
    answer = http.get("/", headers={"accept": f"text/html, {VND}"})
    assert answer.headers["content-type"] == "application/vnd.elasticsearch+json;compatible-with=8"
    plain = http.get("/")
    assert plain.headers["content-type"] == "application/json"
    mismatch = http.put(
        "/_cluster/settings",
        content=b"{}",
        headers={"content-type": VND, "accept": "application/vnd.elasticsearch+json; compatible-with=7"},
    )
    assert mismatch.status_code == 400
    assert mismatch.json()["error"]["type"] == "media_type_header_exception"


def test_get_with_body_and_bodyless_requests(http: httpx.Client, new_index) -> None:
    name = new_index()
    get_with_body = http.request("GET", f"/{name}/_count", json={"query": {"match_all": {}}})
    assert get_with_body.status_code == 200, get_with_body.text
    bodyless_post = http.post(f"/{name}/_refresh", headers={"content-type": "application/json"})
    assert bodyless_post.status_code == 200
    empty = http.post(f"/{name}/_refresh", content=b"", headers={"content-length": "0"})
    assert empty.status_code == 200


def test_malformed_json_body_is_400(http: httpx.Client, index_name: str) -> None:
    response = http.put(
        f"/{index_name}", content=b'{"settings": ', headers={"content-type": "application/json"}
    )
    error = error_of(response)
    assert response.status_code == 400
    assert error["type"] == "x_content_parse_exception"
    assert error["reason"].startswith("[1:")
    assert http.head(f"/{index_name}").status_code == 404


def test_json_body_of_the_wrong_kind_is_a_parsing_exception(http: httpx.Client) -> None:
    error = error_of(http.post("/_search", json=[1, 2]))
    assert error["type"] == "parsing_exception"
    assert error["reason"] == "Expected [START_OBJECT] but found [START_ARRAY]"


def test_source_query_parameter_stands_for_the_body(http: httpx.Client, index_name: str) -> None:
    for doc_id, value in (("1", "sent"), ("2", "other")):
        http.put(f"/{index_name}/_doc/{doc_id}", params={"refresh": "true"}, json={"k": value})
    params = {"source": '{"query": {"term": {"k": "sent"}}}', "source_content_type": "application/json"}
    found = http.get(f"/{index_name}/_search", params=params).json()
    assert [hit["_id"] for hit in found["hits"]["hits"]] == ["1"]
    assert http.get(f"/{index_name}/_count", params=params).json()["count"] == 1
    # A body, when there is one, is the request; `source` is not read.
    with_body = http.post(f"/{index_name}/_count", params=params, json={"query": {"match_all": {}}})
    assert with_body.json()["count"] == 2
    # Only read APIs take it, as in Elasticsearch: elsewhere it is an unknown parameter.
    error = error_of(http.get("/_cluster/health", params=params))
    assert error["type"] == "illegal_argument_exception"
    assert "unrecognized parameter" in error["reason"]
    http.delete(f"/{index_name}")


def test_gzip_request_bodies_are_inflated(http: httpx.Client, index_name: str) -> None:
    body = gzip.compress(b'{"settings": {"number_of_replicas": 0}}')
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    assert http.put(f"/{index_name}", content=body, headers=headers).status_code == 200
    settings = http.get(f"/{index_name}/_settings").json()[index_name]["settings"]["index"]
    assert settings["number_of_replicas"] == "0"
    http.delete(f"/{index_name}")
    broken = http.put(f"/{index_name}", content=b"not gzip", headers=headers)
    assert broken.status_code == 400
    assert error_of(broken)["type"] == "parse_exception"
