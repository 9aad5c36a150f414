"""The router's kept matches (rest/router.py `Router.candidates`): a path's routes are matched
once, and every request still gets values of its own."""

from __future__ import annotations

from leafsearch.rest.access import MAX_HOST_NAME, is_loopback_host
from leafsearch.rest.router import MATCHED_PATH_LENGTH, Router
from leafsearch.rest.routes import ROUTES


def test_a_path_asked_again_gets_the_same_routes_with_values_of_its_own() -> None:
    router = Router(ROUTES)
    first = router.candidates("/logs/_doc/a%2Fb")
    first[0][1]["id"] = "changed by a handler"
    again = router.candidates("/logs/_doc/a%2Fb")
    assert [route for route, _ in again] == [route for route, _ in first]
    assert again[0][1] == {"index": "logs", "id": "a/b"}


def test_a_path_longer_than_those_kept_is_matched_as_any() -> None:
    router = Router(ROUTES)
    name = "x" * MATCHED_PATH_LENGTH
    (route, captured), *_ = router.candidates(f"/{name}/_search")
    assert captured == {"index": name} and route.path == "/{index}/_search"


def test_host_names_answer_the_same_asked_once_or_again() -> None:
    for _ in range(2):
        assert is_loopback_host("127.0.0.1") and is_loopback_host("[::1]") and is_loopback_host("a.localhost")
        assert not is_loopback_host("192.0.2.1") and not is_loopback_host("example.com")
    assert not is_loopback_host("a" * (MAX_HOST_NAME + 1))
