"""Index aliases through the real HTTP API and the official client: the alias APIs, searches and
writes through an alias (filters, routing, the write index, `require_alias`), their errors in
Elasticsearch's words, a restart, and an alias swap under concurrent searches."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from conftest import error_of, running_server
from elasticsearch import Elasticsearch, NotFoundError
from security_helpers import add_user

from tests import web

NDJSON = {"content-type": "application/x-ndjson"}
NO_WRITE_INDEX = (
    "no write index is defined for alias [{}]. The write index may be explicitly disabled using "
    "is_write_index=false or the alias points to multiple indices without one being designated as a "
    "write index"
)


@pytest.fixture
def two(new_index: Callable[..., str], http: httpx.Client) -> Iterator[tuple[str, str, str]]:
    """Two indices with documents (`k` says which; `n` numbers them) and an alias name for the test."""
    first, second = new_index(suffix="-1"), new_index(suffix="-2")
    lines = []
    for index, count in ((first, 3), (second, 2)):
        for n in range(count):
            lines += [f'{{"index":{{"_index":"{index}","_id":"{index}-{n}"}}}}', f'{{"k":"{index}","n":{n}}}']
    response = http.post("/_bulk?refresh=true", content="\n".join(lines) + "\n", headers=NDJSON)
    assert response.status_code == 200 and not response.json()["errors"]
    yield first, second, f"{first}-alias"  # deleting the indices (new_index) removes the alias


def _error(response: httpx.Response) -> dict:
    """The error object without its root causes (which repeat it)."""
    return {k: v for k, v in error_of(response).items() if k != "root_cause"}


def _actions(http: httpx.Client, *actions: dict) -> httpx.Response:
    return http.post("/_aliases", json={"actions": list(actions)})


def _count(http: httpx.Client, expr: str, **params: str) -> int:
    response = http.get(f"/{expr}/_count", params=params)
    assert response.status_code == 200, response.text
    return response.json()["count"]


def test_add_search_get_and_remove(http: httpx.Client, two: tuple[str, str, str]) -> None:
    first, second, alias = two
    added = _actions(http, {"add": {"indices": [first, second], "alias": alias}})
    assert added.status_code == 200
    assert added.json() == {"acknowledged": True, "errors": False}
    assert _count(http, alias) == 5
    hits = http.post(f"/{alias}/_search", json={"size": 10, "sort": ["n"]}).json()["hits"]["hits"]
    assert sorted(hit["_index"] for hit in hits) == [first] * 3 + [second] * 2
    assert http.get(f"/_alias/{alias}").json() == {
        first: {"aliases": {alias: {}}},
        second: {"aliases": {alias: {}}},
    }
    assert http.get(f"/{first}/_alias").json() == {first: {"aliases": {alias: {}}}}
    assert http.get(f"/{first}").json()[first]["aliases"] == {alias: {}}
    assert set(http.get(f"/{alias}").json()) == {first, second}  # GET <alias> shows its indices
    assert http.head(f"/_alias/{alias}").status_code == 200
    assert http.get(f"/{first}/_mapping").json().keys() == {first}

    by_alias = http.delete(f"/{alias}")
    assert by_alias.status_code == 400
    assert error_of(by_alias)["reason"] == (
        f"The provided expression [{alias}] matches an alias, specify the corresponding concrete "
        "indices instead."
    )
    assert _actions(http, {"remove_index": {"index": alias}}).status_code == 400
    assert _count(http, alias) == 5
    assert _actions(http, {"remove": {"index": second, "alias": alias}}).status_code == 200
    assert _count(http, alias) == 3
    assert http.delete(f"/{first}/_alias/{alias}").json() == {"acknowledged": True, "errors": False}
    assert http.head(f"/_alias/{alias}").status_code == 404
    missing = http.get(f"/_alias/{alias}")
    assert missing.status_code == 404
    assert missing.json() == {"error": f"alias [{alias}] missing", "status": 404}
    assert http.get(f"/{alias}/_search").status_code == 404


def test_filtered_alias_is_anded_into_searches_and_counts(
    http: httpx.Client, two: tuple[str, str, str]
) -> None:
    first, second, alias = two
    assert (
        _actions(
            http, {"add": {"index": first, "alias": alias, "filter": {"range": {"n": {"gte": 1}}}}}
        ).status_code
        == 200
    )
    assert _count(http, alias) == 2
    assert _count(http, first) == 3  # the index itself is not filtered
    body = {"query": {"term": {"n": 2}}, "size": 10}
    assert [h["_id"] for h in http.post(f"/{alias}/_search", json=body).json()["hits"]["hits"]] == [
        f"{first}-2"
    ]
    body = {"query": {"term": {"n": 0}}}
    assert http.post(f"/{alias}/_search", json=body).json()["hits"]["total"]["value"] == 0
    # every shape of walk respects the filter: a _doc scroll, a _shard_doc walk without counting, a PIT
    scroll = http.post(
        f"/{alias}/_search", params={"scroll": "1m"}, json={"sort": ["_doc"], "size": 10}
    ).json()
    assert len(scroll["hits"]["hits"]) == 2
    http.request("DELETE", "/_search/scroll", json={"scroll_id": scroll["_scroll_id"]})
    pit = http.post(f"/{alias}/_pit", params={"keep_alive": "1m"}).json()["id"]
    walk = {"pit": {"id": pit}, "sort": ["_shard_doc"], "track_total_hits": False, "size": 10}
    assert len(http.post("/_search", json=walk).json()["hits"]["hits"]) == 2
    http.request("DELETE", "/_pit", json={"id": pit})
    # named directly as well as through the alias: the index is read whole
    assert _count(http, f"{alias},{first}") == 3
    # a filter is checked when the alias is added
    bad = _actions(http, {"add": {"index": first, "alias": f"{alias}-bad", "filter": {"nope": {}}}})
    assert bad.status_code == 400
    error = bad.json()["error"]
    assert (error["type"], error["reason"]) == (
        "illegal_argument_exception",
        f"failed to parse filter for alias [{alias}-bad]",
    )
    assert error["caused_by"]["type"] == error["root_cause"][0]["type"] == "parsing_exception"
    # msearch, mget-free reads and field_caps name the alias as an index
    ndjson = f'{{"index":"{alias}"}}\n{{"size":0}}\n'
    responses = http.post("/_msearch", content=ndjson, headers=NDJSON)
    assert responses.json()["responses"][0]["hits"]["total"]["value"] == 2
    assert http.get(f"/{alias}/_field_caps", params={"fields": "n"}).json()["indices"] == [first]


def test_writes_go_to_the_write_index(http: httpx.Client, two: tuple[str, str, str]) -> None:
    first, second, alias = two
    assert _actions(http, {"add": {"index": first, "alias": alias}}).status_code == 200
    created = http.put(f"/{alias}/_doc/w1", params={"refresh": "true"}, json={"n": 10})
    assert created.status_code == 201 and created.json()["_index"] == first  # its only index
    assert http.get(f"/{alias}/_doc/w1").json()["_index"] == first
    (doc,) = http.post("/_mget", json={"docs": [{"_index": alias, "_id": "w1"}]}).json()["docs"]
    assert (doc["_index"], doc["found"]) == (first, True)
    assert http.get(f"/_cat/count/{alias}", params={"h": "count"}).text.strip() == "4"

    assert _actions(http, {"add": {"index": second, "alias": alias}}).status_code == 200
    refused = http.put(f"/{alias}/_doc/w2", json={"n": 11})
    assert refused.status_code == 400
    assert _error(refused) == {"type": "illegal_argument_exception", "reason": NO_WRITE_INDEX.format(alias)}
    single = http.get(f"/{alias}/_doc/w1")
    assert single.status_code == 400
    assert error_of(single)["reason"] == (
        f"alias [{alias}] has more than one index associated with it [{first}, {second}], "
        "can't execute a single index op"
    )

    assert (
        _actions(http, {"add": {"index": second, "alias": alias, "is_write_index": True}}).status_code == 200
    )
    assert http.put(f"/{alias}/_doc/w2", json={"n": 11}).json()["_index"] == second
    assert http.post(f"/{alias}/_update/w2", json={"doc": {"n": 12}}).json()["_index"] == second
    bulk = "".join(
        [
            f'{{"index":{{"_index":"{alias}","_id":"b1"}}}}\n{{"n":1}}\n',
            f'{{"delete":{{"_index":"{alias}","_id":"w2"}}}}\n',
            f'{{"index":{{"_index":"{first}","_id":"b2","require_alias":true}}}}\n{{"n":2}}\n',
        ]
    )
    items = http.post("/_bulk", content=bulk, headers=NDJSON).json()["items"]
    assert items[0]["index"]["_index"] == second and items[0]["index"]["status"] == 201
    assert items[1]["delete"]["result"] == "deleted" and items[1]["delete"]["_index"] == second
    assert items[2]["index"]["status"] == 404
    assert items[2]["index"]["error"]["reason"] == (
        f"no such index [{first}] and [require_alias] request flag is [true] and [{first}] is not an alias"
    )
    assert http.put(f"/{alias}/_doc/r", params={"require_alias": "true"}, json={}).status_code == 201
    missing = http.put(f"/{alias}-nope/_doc/r", params={"require_alias": "true"}, json={})
    assert missing.status_code == 404
    assert http.get(f"/{alias}-nope").status_code == 404  # not auto-created

    conflicting = _actions(http, {"add": {"index": first, "alias": alias, "is_write_index": True}})
    assert conflicting.status_code == 500
    assert _error(conflicting) == {
        "type": "illegal_state_exception",
        "reason": f"alias [{alias}] has more than one write index [{first},{second}]",
    }


def test_routing_through_an_alias(http: httpx.Client, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"number_of_shards": 4})
    alias = f"{index}-routed"
    assert _actions(http, {"add": {"index": index, "alias": alias, "routing": "r1"}}).status_code == 200
    for n in range(8):
        written = http.put(f"/{alias}/_doc/{n}", json={"n": n})
        assert written.status_code == 201
    http.post(f"/{index}/_refresh")
    got = http.get(f"/{index}/_doc/3", params={"routing": "r1"}).json()
    assert got["found"] and got["_routing"] == "r1"
    assert _count(http, alias) == 8  # search routing: the one shard of r1, which holds every document
    searched = http.post(f"/{alias}/_search", json={"size": 0}).json()
    assert searched["_shards"]["total"] == 1
    assert http.post(f"/{index}/_search", json={"size": 0}).json()["_shards"]["total"] == 4
    clash = http.put(f"/{alias}/_doc/x", params={"routing": "r2"}, json={})
    assert clash.status_code == 400
    assert error_of(clash)["reason"] == (
        f"Alias [{alias}] has index routing associated with it [r1], and was provided with routing value "
        "[r2], rejecting operation"
    )
    several = _actions(http, {"add": {"index": index, "alias": f"{alias}2", "index_routing": "a,b"}})
    assert (
        error_of(several)["reason"] == f"alias [{alias}2] has several index routing values associated with it"
    )
    assert http.get(f"/_cat/aliases/{alias}", params={"format": "json"}).json() == [
        {
            "alias": alias,
            "index": index,
            "filter": "-",
            "routing.index": "r1",
            "routing.search": "r1",
            "is_write_index": "-",
        }
    ]


def test_actions_apply_all_or_nothing(http: httpx.Client, two: tuple[str, str, str]) -> None:
    first, second, alias = two
    failed = _actions(
        http,
        {"add": {"index": first, "alias": alias}},
        {"add": {"index": f"{first}-missing", "alias": alias}},
    )
    assert failed.status_code == 404
    assert error_of(failed)["type"] == "index_not_found_exception"
    assert http.head(f"/_alias/{alias}").status_code == 404
    twice = _actions(
        http,
        {"add": {"index": first, "alias": alias, "is_write_index": True}},
        {"add": {"index": second, "alias": alias, "is_write_index": True}},
    )
    assert twice.status_code == 500
    assert http.head(f"/_alias/{alias}").status_code == 404
    # the swap: remove and add in one request
    assert _actions(http, {"add": {"index": first, "alias": alias}}).status_code == 200
    swapped = _actions(
        http, {"remove": {"index": first, "alias": alias}}, {"add": {"index": second, "alias": alias}}
    )
    assert swapped.status_code == 200
    assert http.get(f"/_alias/{alias}").json() == {second: {"aliases": {alias: {}}}}


def test_removals_and_their_errors(http: httpx.Client, two: tuple[str, str, str]) -> None:
    first, second, alias = two
    nothing = _actions(http, {"remove": {"index": first, "alias": alias}})
    assert nothing.status_code == 404
    assert _error(nothing) == {
        "type": "aliases_not_found_exception",
        "reason": f"aliases [{alias}] missing",
        "resource.type": "aliases",
        "resource.id": [alias],
    }
    assert _actions(http, {"add": {"index": first, "alias": alias}}).status_code == 200
    partial = _actions(
        http, {"remove": {"index": first, "alias": alias}}, {"remove": {"index": second, "alias": alias}}
    )
    assert partial.status_code == 200
    assert partial.json()["errors"] is True
    assert [r["status"] for r in partial.json()["action_results"]] == [200, 404]
    assert partial.json()["action_results"][1]["action"] == {
        "type": "remove",
        "indices": [second],
        "aliases": [alias],
    }
    required = _actions(http, {"remove": {"index": first, "alias": alias, "must_exist": True}})
    assert required.status_code == 404
    assert _error(required) == {
        "type": "resource_not_found_exception",
        "reason": f"required alias [{alias}] does not exist",
    }
    missing = http.delete(f"/{first}/_alias/{alias}")
    assert missing.status_code == 404 and error_of(missing)["type"] == "aliases_not_found_exception"
    empty = http.post("/_aliases", json={"actions": []})
    assert empty.status_code == 400
    assert error_of(empty)["reason"] == "Validation Failed: 1: Must specify at least one alias action;"
    no_alias = _actions(http, {"add": {"index": first}})
    assert error_of(no_alias)["reason"] == "One of [alias] or [aliases] is required"


def test_alias_names_follow_index_name_rules(http: httpx.Client, two: tuple[str, str, str]) -> None:
    first, second, alias = two
    same = _actions(http, {"add": {"index": first, "alias": second}})
    assert same.status_code == 400
    assert _error(same) == {
        "type": "invalid_alias_name_exception",
        "reason": f"Invalid alias name [{second}]: an index or data stream exists with the same name as "
        "the alias",
    }
    upper = http.put(f"/{first}/_alias/Upper")
    assert _error(upper) == {
        "type": "invalid_alias_name_exception",
        "reason": "Invalid alias name [Upper]: must be lowercase",
    }
    underscore = _actions(http, {"add": {"index": first, "alias": "_x"}})
    assert error_of(underscore)["reason"] == "Invalid alias name [_x]: must not start with '_', '-', or '+'"
    assert http.put(f"/{first}/_alias/{alias}").status_code == 200
    taken = http.put(f"/{alias}")
    assert taken.status_code == 400
    assert error_of(taken)["reason"] == f"Invalid index name [{alias}], already exists as alias"


def test_aliases_at_creation_and_removed_with_their_index(http: httpx.Client, index_name: str) -> None:
    body = {
        "aliases": {
            f"{index_name}-a": {},
            f"{index_name}-f": {"filter": {"term": {"k": "x"}}, "is_write_index": True},
        }
    }
    assert http.put(f"/{index_name}", json=body).status_code == 200
    try:
        assert http.get(f"/{index_name}/_alias").json() == {
            index_name: {
                "aliases": {
                    f"{index_name}-a": {},
                    f"{index_name}-f": {"filter": {"term": {"k": "x"}}, "is_write_index": True},
                }
            }
        }
        http.put(f"/{index_name}-f/_doc/1", params={"refresh": "true"}, json={"k": "x"})
        http.put(f"/{index_name}-f/_doc/2", params={"refresh": "true"}, json={"k": "y"})
        assert _count(http, f"{index_name}-f") == 1
        assert _count(http, f"{index_name}-a") == 2
        text = http.get("/_cat/aliases", params={"v": "true", "h": "alias,index,filter,is_write_index"}).text
        assert f"{index_name}-f {index_name} *      true" in text
        assert text.splitlines()[0].split() == ["alias", "index", "filter", "is_write_index"]
    finally:
        http.delete(f"/{index_name}")
    assert http.head(f"/_alias/{index_name}-a").status_code == 404
    assert f"{index_name}-a" not in http.get("/_cat/aliases").text
    # remove_index deletes the index with the rest of the actions
    http.put(f"/{index_name}")
    assert _actions(http, {"remove_index": {"index": index_name}}).status_code == 200
    assert http.head(f"/{index_name}").status_code == 404


def test_official_client(es: Elasticsearch, two: tuple[str, str, str]) -> None:
    first, second, alias = two
    assert es.indices.put_alias(index=first, name=alias, filter={"term": {"n": 0}})["acknowledged"]
    assert es.indices.exists_alias(name=alias)
    assert es.indices.get_alias(name=alias).body == {
        first: {"aliases": {alias: {"filter": {"term": {"n": 0}}}}}
    }
    assert es.count(index=alias)["count"] == 1
    es.indices.update_aliases(
        actions=[{"remove": {"index": first, "alias": alias}}, {"add": {"index": second, "alias": alias}}]
    )
    assert es.count(index=alias)["count"] == 2
    assert [row["index"] for row in es.cat.aliases(name=alias, format="json")] == [second]
    es.indices.delete_alias(index=second, name=alias)
    assert not es.indices.exists_alias(name=alias)
    with pytest.raises(NotFoundError):
        es.indices.get_alias(name=alias)


def test_aliases_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=60) as http:
        http.put("/logs-1", json={"aliases": {"logs": {"is_write_index": True}}})
        http.put("/logs-2")
        _actions(http, {"add": {"index": "logs-2", "alias": "logs", "filter": {"term": {"k": "b"}}}})
        http.put("/logs/_doc/1", params={"refresh": "true"}, json={"k": "a"})
        http.put("/logs-2/_doc/2", params={"refresh": "true"}, json={"k": "a"})
        http.delete("/logs-2")
        http.put("/logs-2")  # a new index of the same name has none of the old one's aliases
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=60) as http:
        assert http.get("/_alias/logs").json() == {"logs-1": {"aliases": {"logs": {"is_write_index": True}}}}
        assert http.get("/logs-2/_alias").json() == {"logs-2": {"aliases": {}}}
        assert _count(http, "logs") == 1
        assert http.put("/logs/_doc/3", json={"k": "c"}).json()["_index"] == "logs-1"


def test_alias_swap_under_concurrent_searches(
    http: httpx.Client, server: str, two: tuple[str, str, str]
) -> None:
    """Every search through an alias being swapped answers from exactly one of its two indices."""
    first, second, alias = two
    assert _actions(http, {"add": {"index": first, "alias": alias}}).status_code == 200
    expected = {3: first, 2: second}
    stop = threading.Event()
    seen: list[tuple[int, str]] = []
    failures: list[str] = []

    def search() -> None:
        with web.Client(base_url=server, timeout=60) as client:
            while not stop.is_set():
                response = client.post(f"/{alias}/_search", json={"size": 10})
                if response.status_code != 200:
                    failures.append(response.text)
                    continue
                hits = response.json()["hits"]
                indices = {hit["_index"] for hit in hits["hits"]}
                seen.append((hits["total"]["value"], ",".join(sorted(indices))))

    threads = [threading.Thread(target=search) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for i in range(30):
            old, new = (first, second) if i % 2 == 0 else (second, first)
            response = _actions(
                http, {"remove": {"index": old, "alias": alias}}, {"add": {"index": new, "alias": alias}}
            )
            assert response.status_code == 200
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert failures == []
    assert seen
    assert all(expected.get(total) == indices for total, indices in seen), set(seen)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("secured-aliases") / "data"
    with running_server(data) as (url, _):
        add_user(data, "admin", "admin-secret", "superuser")
        add_user(data, "rita", "rita-secret", "read:logs-*")
        with web.Client(base_url=url, auth=("admin", "admin-secret"), timeout=60) as admin:
            admin.put("/secret", json={"aliases": {"logs-public": {"filter": {"term": {"public": True}}}}})
            admin.put("/secret/_doc/1", json={"public": True})
            admin.put("/secret/_doc/2", params={"refresh": "true"}, json={"public": False})
        yield url


def test_an_alias_the_caller_may_use_resolves(secured: str) -> None:
    with web.Client(base_url=secured, auth=("rita", "rita-secret"), timeout=60) as rita:
        assert _count(rita, "logs-public") == 1
        assert _count(rita, "*") == 1  # the wildcard keeps the alias, not the index behind it
        assert rita.post("/secret/_search").status_code == 403
        refused = _actions(rita, {"add": {"index": "secret", "alias": "logs-all"}})
        assert refused.status_code == 403
        assert "action [indices:admin/aliases] is unauthorized for user [rita]" in error_of(refused)["reason"]


def test_alias_names_written_as_date_math_are_resolved(
    es: Elasticsearch, http: httpx.Client, index_name: str
) -> None:
    """`<name-{now/M}>` as an alias of a new index, or of an `add` action, names the resolved alias
    (Elasticsearch's date math in alias names); a malformed expression is a 400 that creates nothing."""
    import re

    try:
        es.indices.create(index=index_name, aliases={f"<{index_name}-m-{{now/M}}>": {}})
        (month,) = es.indices.get_alias(index=index_name)[index_name]["aliases"]
        assert re.fullmatch(rf"{index_name}-m-\d{{4}}\.\d{{2}}\.01", month)
        es.indices.update_aliases(
            actions=[{"add": {"index": index_name, "alias": f"<{index_name}-d-{{now/d}}>"}}]
        )
        names = set(es.indices.get_alias(index=index_name)[index_name]["aliases"]) - {month}
        assert len(names) == 1 and re.fullmatch(rf"{index_name}-d-\d{{4}}\.\d{{2}}\.\d{{2}}", names.pop())
        refused = http.put(f"/{index_name}-bad", json={"aliases": {f"<{index_name}-{{now/M>": {}}})
        assert refused.status_code == 400
        assert error_of(refused)["type"] == "parse_exception"
        assert http.head(f"/{index_name}-bad").status_code == 404
    finally:
        http.delete(f"/{index_name}")
