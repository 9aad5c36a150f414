"""Search endpoints over HTTP: where parameters and ids come from, and the statuses of the answers.

The paging semantics themselves are tested with the search engine; these tests hold the REST
contract that clients depend on (query string, body, path forms, 404 for nothing freed).
"""

from __future__ import annotations

import httpx
import pytest
from conftest import error_of
from elasticsearch import Elasticsearch, NotFoundError, helpers


@pytest.fixture
def docs_index(es: Elasticsearch, index_name: str) -> str:
    helpers.bulk(
        es, ({"_index": index_name, "_id": str(i), "_source": {"n": i}} for i in range(30)), refresh=True
    )
    return index_name


def test_search_body_and_url_parameters(http: httpx.Client, docs_index: str) -> None:
    by_body = http.post(f"/{docs_index}/_search", json={"size": 3, "sort": [{"n": "asc"}]}).json()
    assert [h["_source"]["n"] for h in by_body["hits"]["hits"]] == [0, 1, 2]
    by_url = http.get(f"/{docs_index}/_search", params={"size": "2", "from": "1", "sort": "n:desc"}).json()
    assert [h["_source"]["n"] for h in by_url["hits"]["hits"]] == [28, 27]
    as_int = http.get(f"/{docs_index}/_search", params={"rest_total_hits_as_int": "true", "size": "0"}).json()
    assert as_int["hits"]["total"] == 30
    filtered = http.get(
        f"/{docs_index}/_search", params={"filter_path": "hits.hits._id", "size": "1", "sort": "n"}
    ).json()
    assert filtered == {"hits": {"hits": [{"_id": "0"}]}}


def test_search_parameter_values_are_validated(http: httpx.Client, docs_index: str) -> None:
    response = http.get(f"/{docs_index}/_search", params={"size": "many"})
    assert response.status_code == 400
    assert response.json()["status"] == 400  # the search module owns the exact error type


def test_count(es: Elasticsearch, http: httpx.Client, docs_index: str) -> None:
    assert es.count(index=docs_index)["count"] == 30
    assert http.get(f"/{docs_index}/_count", params={"q": "n:3"}).json()["count"] == 1
    assert http.post("/_count", json={"query": {"match_all": {}}}).status_code == 200


def test_scroll_through_the_client(es: Elasticsearch, docs_index: str) -> None:
    seen = [hit["_source"]["n"] for hit in helpers.scan(es, index=docs_index, size=7, scroll="1m")]
    assert sorted(seen) == list(range(30))


def test_scroll_id_in_body_path_and_query(http: httpx.Client, docs_index: str) -> None:
    first = http.post(
        f"/{docs_index}/_search", params={"scroll": "1m"}, json={"size": 5, "sort": ["n"]}
    ).json()
    scroll_id = first["_scroll_id"]
    by_body = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id}).json()
    assert [h["_source"]["n"] for h in by_body["hits"]["hits"]] == [5, 6, 7, 8, 9]
    scroll_id = by_body["_scroll_id"]
    by_path = http.get(f"/_search/scroll/{scroll_id}", params={"scroll": "1m"}).json()
    assert [h["_source"]["n"] for h in by_path["hits"]["hits"]] == [10, 11, 12, 13, 14]
    scroll_id = by_path["_scroll_id"]
    by_query = http.get(
        "/_search/scroll", params={"scroll": "1m", "scroll_id": scroll_id, "rest_total_hits_as_int": "true"}
    ).json()
    assert by_query["hits"]["total"] == 30
    cleared = http.request("DELETE", "/_search/scroll", json={"scroll_id": [by_query["_scroll_id"]]})
    assert cleared.status_code == 200
    assert cleared.json()["succeeded"] is True
    assert cleared.json()["num_freed"] >= 1


def test_scroll_request_errors(http: httpx.Client) -> None:
    missing = error_of(http.post("/_search/scroll", json={"scroll": "1m"}))
    assert missing["reason"] == "Validation Failed: 1: scrollId is missing;"
    bad_time = error_of(http.post("/_search/scroll", json={"scroll": "1x", "scroll_id": "abc"}))
    assert bad_time["reason"] == (
        "failed to parse setting [scroll] with value [1x] as a time value: unit is missing or unrecognized"
    )
    unknown = error_of(http.post("/_search/scroll", json={"scroll_id": "abc", "size": 3}))
    assert unknown["reason"].startswith("Unknown parameter [size] in request body")


def test_clear_scroll_forms_and_404_when_nothing_freed(
    es: Elasticsearch, http: httpx.Client, docs_index: str
) -> None:
    ids = [
        http.post(f"/{docs_index}/_search", params={"scroll": "1m"}, json={"size": 1}).json()["_scroll_id"]
        for _ in range(3)
    ]
    by_path = http.delete(f"/_search/scroll/{ids[0]},{ids[1]}")
    assert by_path.status_code == 200
    assert by_path.json() == {"succeeded": True, "num_freed": 2}
    by_query = http.delete("/_search/scroll", params={"scroll_id": ids[2]})
    assert by_query.json()["num_freed"] == 1
    again = http.delete(f"/_search/scroll/{ids[0]}")
    assert again.status_code == 404
    assert again.json()["num_freed"] == 0
    with pytest.raises(NotFoundError):
        es.clear_scroll(scroll_id=ids[1])
    nothing = error_of(http.delete("/_search/scroll"))
    assert nothing["reason"] == "Validation Failed: 1: no scroll ids specified;"


def test_point_in_time_open_search_close(es: Elasticsearch, http: httpx.Client, docs_index: str) -> None:
    pit = es.open_point_in_time(index=docs_index, keep_alive="1m")["id"]
    page = es.search(pit={"id": pit, "keep_alive": "1m"}, size=4, sort=[{"n": "asc"}])
    assert [h["_source"]["n"] for h in page["hits"]["hits"]] == [0, 1, 2, 3]
    closed = es.close_point_in_time(id=page["pit_id"])
    assert closed["succeeded"] is True
    again = http.request("DELETE", "/_pit", json={"id": page["pit_id"]})
    assert again.status_code == 404
    no_keep_alive = error_of(http.post(f"/{docs_index}/_pit"))
    assert no_keep_alive["reason"] == "Validation Failed: 1: [keep_alive] is not specified;"
    nothing = error_of(http.post("/_pit"))
    assert (
        nothing["reason"]
        == "Validation Failed: 1: [index] is not specified;2: [keep_alive] is not specified;"
    )
    by_param = http.post("/_pit", params={"index": docs_index, "keep_alive": "1m"})
    assert by_param.status_code == 200
    assert http.request("DELETE", "/_pit", json={"id": by_param.json()["id"]}).status_code == 200
    no_id = error_of(http.request("DELETE", "/_pit", json={}))
    assert no_id["type"] == "action_request_validation_exception"


def test_cat_search_contexts_lists_open_scrolls(http: httpx.Client, docs_index: str) -> None:
    scroll_id = http.post(f"/{docs_index}/_search", params={"scroll": "1m"}, json={"size": 1}).json()[
        "_scroll_id"
    ]
    try:
        listed = http.get("/_cat/search_contexts", params={"format": "json"})
        assert listed.status_code == 200
        assert len(listed.json()) >= 1
        assert http.get("/_cat/search_contexts", params={"v": "true"}).text.strip()
    finally:
        http.delete(f"/_search/scroll/{scroll_id}")


def test_clearing_every_scroll_answers_200_even_with_none_open(http: httpx.Client, docs_index: str) -> None:
    """`DELETE /_search/scroll/_all` is what test fixtures call to clean up: Elasticsearch answers 200
    whether or not a scroll was open (it counts the nodes that cleared theirs)."""
    opened = http.post(f"/{docs_index}/_search", params={"scroll": "1m"}, json={"size": 1}).json()[
        "_scroll_id"
    ]
    first = http.delete("/_search/scroll/_all")
    assert first.status_code == 200 and first.json()["succeeded"] is True
    assert http.get("/_search/scroll", params={"scroll_id": opened, "scroll": "1m"}).status_code == 404
    again = http.delete("/_search/scroll/_all")
    assert (again.status_code, again.json()) == (200, {"succeeded": True, "num_freed": 0})


def test_a_pit_is_closed_through_its_index_path_as_elasticdump_closes_it(
    http: httpx.Client, docs_index: str
) -> None:
    """elasticdump sends `DELETE /<index>/_pit` with the id in the body: the PIT is freed, not left
    open for its keep-alive; a second close finds nothing (404, as `DELETE /_pit` answers)."""
    pit = http.post(f"/{docs_index}/_pit", params={"keep_alive": "5m"}).json()["id"]
    closed = http.request("DELETE", f"/{docs_index}/_pit", json={"id": pit})
    assert (closed.status_code, closed.json()) == (200, {"succeeded": True, "num_freed": 1})
    gone = http.post("/_search", json={"pit": {"id": pit}})
    assert gone.status_code == 404
    again = http.request("DELETE", f"/{docs_index}/_pit", json={"id": pit})
    assert (again.status_code, again.json()["num_freed"]) == (404, 0)
