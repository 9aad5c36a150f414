"""No cross-site requests: the shapes a web page can send from a browser are refused on every
write endpoint of the route table, and change nothing; allowed origins (`http.cors.*`) work."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import error_of, running_server

from leafsearch.rest.access import ACTIONS
from leafsearch.rest.routes import ROUTES
from leafsearch.security.subject import is_read_action
from tests import web

VICTIM = "xs-victim"
PLACEHOLDERS = {"index": VICTIM, "id": "1", "scroll_id": "x", "name": "n", "node_id": "_local"}


def _write_requests() -> list[tuple[str, str]]:
    """(method, path) of every route that changes something: not a read, not a GET or HEAD."""
    requests = []
    for route in ROUTES:
        action = ACTIONS[route.handler].name if route.handler in ACTIONS else "?"
        # `_analyze` changes nothing (and takes `source=` as Elasticsearch's does).
        if is_read_action(action) or action == "indices:admin/analyze":
            continue
        path = re.sub(r"\{(\w+)\}", lambda m: PLACEHOLDERS.get(m.group(1), m.group(1)), route.path)
        requests.extend((method, path) for method in sorted(route.methods - {"GET", "HEAD"}))
    return requests


WRITES = _write_requests()
DOC = '{"pwned": 1}'
SHAPES = {
    "text/plain": {"content": DOC, "headers": {"content-type": "text/plain"}},
    "form": {"content": "a=1", "headers": {"content-type": "application/x-www-form-urlencoded"}},
    "multipart": {
        "content": '--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n{"pwned": 1}\r\n--b--\r\n',
        "headers": {"content-type": "multipart/form-data; boundary=b"},
    },
    "empty body with source=": {
        "params": {"source": DOC, "source_content_type": "application/json"},
        "headers": {"content-type": "text/plain"},
    },
    "foreign Host": {"content": DOC, "headers": {"content-type": "application/json", "host": "evil.example"}},
    "foreign Origin": {
        "content": DOC,
        "headers": {"content-type": "application/json", "origin": "http://evil.example"},
    },
}


#: How each shape is refused: status, and the error type (or the start of a plain error string).
REFUSALS = {
    "text/plain": (406, "Content-Type header [text/plain] is not supported"),
    "form": (406, "Content-Type header [application/x-www-form-urlencoded] is not supported"),
    "multipart": (406, "Content-Type header [multipart/form-data; boundary=b] is not supported"),
    "empty body with source=": (400, "illegal_argument_exception"),
    "foreign Host": (403, "security_exception"),
    "foreign Origin": (403, "security_exception"),
}


def _refusal(response: httpx.Response) -> tuple[int, str]:
    """Status and error type; Elasticsearch's 406 has a plain string as its `error`."""
    if response.status_code == 406:
        return 406, response.json()["error"]
    return response.status_code, error_of(response)["type"]


def test_every_route_has_an_action_and_the_write_routes_are_all_there() -> None:
    assert [route.path for route in ROUTES if route.handler not in ACTIONS] == []
    assert len(WRITES) > 20
    assert ("PUT", f"/{VICTIM}/_doc/1") in WRITES and ("POST", "/_bulk") in WRITES
    assert ("PUT", "/_cluster/settings") in WRITES and ("DELETE", f"/{VICTIM}") in WRITES


def _state(http: httpx.Client) -> tuple:
    http.post("/_refresh")
    indices = http.get("/_cat/indices?h=index,docs.count&s=index").text
    return (
        indices,
        http.get(f"/{VICTIM}/_mapping").json(),
        http.get("/_cluster/settings").json(),
        http.get(f"/{VICTIM}/_doc/1").json().get("_source"),
    )


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A client of a server of this module's own, holding the victim: `_state` reads all of the
    server's indices and cluster settings, which the tests of other modules would change."""
    data = tmp_path_factory.mktemp("cross-site") / "data"
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=60) as http:
        assert http.put(f"/{VICTIM}/_doc/1?refresh=true", json={"kept": True}).status_code == 201
        yield http


@pytest.mark.parametrize("shape", list(SHAPES))
def test_cross_site_shapes_are_refused_on_every_write_route(own_server: httpx.Client, shape: str) -> None:
    before = _state(own_server)
    for method, path in WRITES:
        response = own_server.request(method, path, **SHAPES[shape])
        assert _refusal(response) == REFUSALS[shape], (method, path, response.text)
    assert _state(own_server) == before


def test_source_needs_source_content_type_even_on_reads(http: httpx.Client) -> None:
    response = http.get("/_search", params={"source": "{}"})
    assert response.status_code == 400
    assert error_of(response)["reason"] == (
        "Validation Failed: 1: source and source_content_type parameters are required;"
    )
    response = http.get("/_search", params={"source": "{}", "source_content_type": "text/plain"})
    assert error_of(response)["reason"] == (
        "Validation Failed: 1: Unknown value for source_content_type [text/plain];"
    )


@pytest.mark.parametrize("host", ["localhost", "localhost:9200", "127.0.0.1:1", "[::1]:9200", "a.localhost"])
def test_loopback_host_names_are_served(http: httpx.Client, host: str) -> None:
    assert http.get("/", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:9200", "10.0.0.1", "localhost.evil.example"])
def test_a_foreign_host_is_refused_even_for_reads(http: httpx.Client, host: str) -> None:
    response = http.get("/_search", headers={"host": host})
    assert response.status_code == 403
    assert "does not name a loopback address" in error_of(response)["reason"]


def test_an_origin_is_refused_without_cors(http: httpx.Client) -> None:
    for origin in ("http://evil.example", "null", "http://127.0.0.1:9200"):
        response = http.get("/", headers={"origin": origin})
        assert response.status_code == 403
        assert "access-control-allow-origin" not in response.headers


def test_allowed_origins_get_cors_headers_and_preflights(tmp_path: Path) -> None:
    origins = "/https?://app\\.example(:\\d+)?/"
    settings = ("-E", "http.cors.enabled=true", "-E", f"http.cors.allow-origin={origins}")
    with running_server(tmp_path / "data", *settings) as (url, _), web.Client(base_url=url) as http:
        allowed = http.get("/", headers={"origin": "https://app.example"})
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        preflight = http.options(
            "/_search", headers={"origin": "http://app.example:8080", "access-control-request-method": "POST"}
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-methods"] == "OPTIONS,HEAD,GET,POST,PUT,DELETE"
        assert "Authorization" in preflight.headers["access-control-allow-headers"]
        assert http.get("/", headers={"origin": "https://evil.example"}).status_code == 403
