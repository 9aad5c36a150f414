"""Index administration through the official client and raw HTTP."""

from __future__ import annotations

import httpx
import pytest
from conftest import error_of
from elasticsearch import BadRequestError, Elasticsearch, NotFoundError


def test_create_get_exists_delete(es: Elasticsearch, index_name: str) -> None:
    created = es.indices.create(
        index=index_name, settings={"number_of_shards": 2}, mappings={"properties": {"n": {"type": "long"}}}
    )
    assert created.body == {"acknowledged": True, "shards_acknowledged": True, "index": index_name}
    assert es.indices.exists(index=index_name)
    got = es.indices.get(index=index_name)[index_name]
    assert got["aliases"] == {}
    assert got["mappings"]["properties"]["n"]["type"] == "long"
    settings = got["settings"]["index"]
    assert settings["number_of_shards"] == "2"
    assert settings["number_of_replicas"] == "1"
    assert settings["provided_name"] == index_name
    assert settings["uuid"] and settings["creation_date"].isdigit()
    assert es.indices.delete(index=index_name).body == {"acknowledged": True}
    assert not es.indices.exists(index=index_name)


def test_create_twice_is_resource_already_exists(http: httpx.Client, new_index) -> None:
    name = new_index()
    uuid = http.get(f"/{name}/_settings").json()[name]["settings"]["index"]["uuid"]
    response = http.put(f"/{name}")
    error = error_of(response)
    assert response.status_code == 400
    assert error["type"] == "resource_already_exists_exception"
    assert error["reason"] == f"index [{name}/{uuid}] already exists"
    assert error["index"] == name and error["index_uuid"] == uuid


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/Upper", "Invalid index name [Upper], must be lowercase"),
        ("/-dash", "Invalid index name [-dash], must not start with '_', '-', or '+'"),
        ("/a%23b", "Invalid index name [a#b], must not contain '#'"),
        ("/a%00", "Invalid index name [a\0], must not contain the NUL character ['\\u0000']"),
    ],
)
def test_invalid_names_over_http(http: httpx.Client, path: str, reason: str) -> None:
    error = error_of(http.put(path))
    assert error["type"] == "invalid_index_name_exception"
    assert error["reason"] == reason


def test_nul_is_refused_wherever_a_name_is_made(http: httpx.Client, index_name: str) -> None:
    """By a write that would create the index, and as an alias name; nothing is created."""
    reason = f"Invalid index name [{index_name}\0], must not contain the NUL character ['\\u0000']"
    response = http.put(f"/{index_name}%00/_doc/1", json={"a": 1})
    assert (response.status_code, error_of(response)["reason"]) == (400, reason)
    assert http.head(f"/{index_name}%00").status_code == 404
    assert http.put(f"/{index_name}").status_code == 200
    try:
        response = http.put(f"/{index_name}/_alias/al%00")
        error = error_of(response)
        assert (response.status_code, error["type"]) == (400, "invalid_alias_name_exception")
        assert error["reason"] == "Invalid alias name [al\0]: must not contain the NUL character ['\\u0000']"
    finally:
        http.delete(f"/{index_name}")


def test_create_body_errors(http: httpx.Client, index_name: str) -> None:
    unknown_key = error_of(http.put(f"/{index_name}", json={"setings": {}}))
    assert unknown_key["type"] == "parse_exception"
    assert unknown_key["reason"] == "unknown key [setings] for create index"
    unknown_setting = error_of(http.put(f"/{index_name}", json={"settings": {"index.foo": 1}}))
    assert unknown_setting["reason"].startswith("unknown setting [index.foo] please check")
    bad_value = error_of(http.put(f"/{index_name}", json={"settings": {"number_of_shards": "x"}}))
    assert bad_value["reason"] == "Failed to parse value [x] for setting [index.number_of_shards]"
    assert http.head(f"/{index_name}").status_code == 404


def test_missing_index_is_404(es: Elasticsearch, http: httpx.Client, index_name: str) -> None:
    with pytest.raises(NotFoundError) as caught:
        es.indices.get(index=index_name)
    assert caught.value.error == "index_not_found_exception"
    error = error_of(http.delete(f"/{index_name}"))
    assert error["reason"] == f"no such index [{index_name}]"
    assert error["resource.id"] == index_name
    assert http.get(f"/{index_name}", params={"ignore_unavailable": "true"}).json() == {}


def test_wildcard_and_all_deletes_are_refused_by_default(http: httpx.Client, new_index) -> None:
    name = new_index()
    for target in ("_all", "*", f"{name[:5]}*", f"{name},other*"):
        error = error_of(http.delete(f"/{target}"))
        assert error["reason"] == "Wildcard expressions or all indices are not allowed"
    assert http.head(f"/{name}").status_code == 200


def test_wildcard_delete_allowed_when_destructive_requires_name_is_off(http: httpx.Client, new_index) -> None:
    first, second = new_index(suffix="-1"), new_index(suffix="-2")
    flip = {"transient": {"action.destructive_requires_name": False}}
    assert http.put("/_cluster/settings", json=flip).status_code == 200
    try:
        assert http.delete(f"/{first[:-2]}-*").json() == {"acknowledged": True}
    finally:
        http.put("/_cluster/settings", json={"transient": {"action.destructive_requires_name": None}})
    assert http.head(f"/{first}").status_code == 404
    assert http.head(f"/{second}").status_code == 404


def test_get_and_put_mapping(es: Elasticsearch, new_index) -> None:
    name = new_index(mappings={"properties": {"a": {"type": "keyword"}}})
    assert es.indices.put_mapping(index=name, properties={"b": {"type": "long"}}).body == {
        "acknowledged": True
    }
    mappings = es.indices.get_mapping(index=name)[name]["mappings"]["properties"]
    assert mappings["a"]["type"] == "keyword"
    assert mappings["b"]["type"] == "long"
    assert name in es.indices.get_mapping().body


def test_get_settings_forms(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"index": {"refresh_interval": "5s"}, "number_of_replicas": 0})
    nested = http.get(f"/{name}/_settings").json()[name]["settings"]["index"]
    assert nested["refresh_interval"] == "5s"
    assert nested["number_of_replicas"] == "0"
    flat = http.get(f"/{name}/_settings", params={"flat_settings": "true"}).json()[name]["settings"]
    assert flat["index.refresh_interval"] == "5s"
    named = http.get(f"/{name}/_settings/index.number_of_*").json()[name]["settings"]["index"]
    assert set(named) == {"number_of_shards", "number_of_replicas"}
    defaults = http.get(
        f"/{name}/_settings", params={"include_defaults": "true", "flat_settings": "true"}
    ).json()
    assert defaults[name]["defaults"]["index.max_result_window"] == "10000"
    assert name in http.get("/_settings").json()


def test_put_settings_dynamic_static_unknown_and_reset(http: httpx.Client, new_index) -> None:
    name = new_index()
    assert http.put(f"/{name}/_settings", json={"index": {"max_result_window": 50}}).json() == {
        "acknowledged": True
    }
    assert (
        http.put(f"/{name}/_settings", json={"settings": {"index.max_slices_per_scroll": 8}}).status_code
        == 200
    )
    flat = http.get(f"/{name}/_settings?flat_settings").json()[name]["settings"]
    assert flat["index.max_result_window"] == "50"
    assert flat["index.max_slices_per_scroll"] == "8"

    uuid = flat["index.uuid"]
    static = error_of(http.put(f"/{name}/_settings", json={"number_of_shards": 3}))
    assert static["reason"] == (
        f"Can't update non dynamic settings [[index.number_of_shards]] for open indices [[{name}/{uuid}]]"
    )
    bad = error_of(http.put(f"/{name}/_settings", json={"max_result_window": "lots"}))
    assert bad["reason"] == "Failed to parse value [lots] for setting [index.max_result_window]"
    unknown = error_of(http.put(f"/{name}/_settings", json={"index.nope": 1}))
    assert unknown["reason"].startswith("unknown setting [index.nope]")

    assert http.put(f"/{name}/_settings", json={"index.max_result_window": None}).status_code == 200
    flat = http.get(f"/{name}/_settings?flat_settings").json()[name]["settings"]
    assert "index.max_result_window" not in flat


def test_a_settings_list_holds_only_values(http: httpx.Client, new_index, index_name: str) -> None:
    name = new_index()
    before = http.get(f"/{name}/_settings").json()
    deep: list = [1]
    for _ in range(60):  # nested lists once grew their string form exponentially (a MemoryError)
        deep = [deep]
    for value in (deep, [["a"]], [{"a": 1}], [None]):
        for response in (
            http.put(f"/{name}/_settings", json={"index.number_of_replicas": value}),
            http.put(f"/{index_name}-new", json={"settings": {"index.number_of_replicas": value}}),
            http.put("/_cluster/settings", json={"transient": {"indices.fuzz.list": value}}),
        ):
            assert response.status_code == 400, response.text
            assert error_of(response)["type"] == "illegal_argument_exception"
            assert error_of(response)["reason"] == "only value lists are allowed in serialized settings"
    assert http.get(f"/{name}/_settings").json() == before
    assert http.head(f"/{index_name}-new").status_code == 404


def test_refresh_and_flush_report_shards(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"number_of_shards": 2, "number_of_replicas": 0})
    for path in (f"/{name}/_refresh", f"/{name}/_flush"):
        assert http.post(path).json() == {"_shards": {"total": 2, "successful": 2, "failed": 0}}
    with_replicas = new_index(settings={"number_of_shards": 1}, suffix="-r")
    assert http.get(f"/{with_replicas}/_refresh").json()["_shards"] == {
        "total": 2,
        "successful": 1,
        "failed": 0,
    }
    assert http.post("/_refresh").status_code == 200
    assert http.post("/_flush").status_code == 200


def test_cat_indices_text_and_json(http: httpx.Client, new_index) -> None:
    name = new_index(settings={"number_of_replicas": 0})
    text = http.get(f"/_cat/indices/{name}", params={"v": "true"})
    assert text.headers["content-type"].startswith("text/plain")
    header, row, *rest = text.text.split("\n")
    assert header.split() == [
        "health",
        "status",
        "index",
        "uuid",
        "pri",
        "rep",
        "docs.count",
        "docs.deleted",
        "store.size",
        "pri.store.size",
        "dataset.size",
    ]
    assert row.split()[:7] == ["green", "open", name, row.split()[3], "1", "0", "0"]
    assert rest == [""]
    as_json = http.get(f"/_cat/indices/{name}", params={"format": "json", "bytes": "b"}).json()
    assert as_json[0]["index"] == name
    assert as_json[0]["docs.count"] == "0"
    assert as_json[0]["store.size"].isdigit()
    chosen = http.get(f"/_cat/indices/{name}", params={"h": "index,dc", "format": "json"}).json()
    assert chosen == [{"index": name, "docs.count": "0"}]


def test_cat_indices_sorting(http: httpx.Client, new_index) -> None:
    first, second = new_index(suffix="-a"), new_index(suffix="-b")
    rows = http.get(f"/_cat/indices/{first},{second}", params={"h": "index", "s": "index:desc"}).text.split()
    assert rows == [second, first]
    error = error_of(http.get("/_cat/indices", params={"s": "nope"}))
    assert error["type"] == "illegal_argument_exception"


def test_cat_count_and_health(http: httpx.Client, new_index) -> None:
    name = new_index()
    count = http.get(f"/_cat/count/{name}", params={"format": "json"}).json()
    assert count[0]["count"] == "0"
    health = http.get("/_cat/health", params={"v": "true", "h": "cluster,status,node.total"}).text.split("\n")
    assert health[0].split() == ["cluster", "status", "node.total"]
    assert health[1].split()[1] in ("green", "yellow")


def test_cluster_health_is_green_without_replicas_yellow_with(http: httpx.Client, new_index) -> None:
    green = new_index(settings={"number_of_replicas": 0}, suffix="-g")
    yellow = new_index(settings={"number_of_replicas": 1}, suffix="-y")
    body = http.get(f"/_cluster/health/{green}").json()
    assert body["status"] == "green"
    assert body["number_of_nodes"] == 1
    assert body["active_primary_shards"] == 1
    assert body["timed_out"] is False
    body = http.get(f"/_cluster/health/{yellow}", params={"level": "indices"}).json()
    assert body["status"] == "yellow"
    assert body["unassigned_shards"] == 1
    assert body["indices"][yellow]["status"] == "yellow"
    assert http.get("/_cluster/health", params={"wait_for_status": "yellow"}).status_code == 200


def test_health_by_shard_and_closed_indices(es: Elasticsearch, http: httpx.Client, new_index) -> None:
    """`level=shards` adds each shard's section; a closed index keeps its health (its replicas are
    still unassignable on one node); `_cat/indices?health=` filters on it, any case, and refuses
    an unknown status."""
    green = new_index(settings={"number_of_shards": 2, "number_of_replicas": 0}, suffix="-g")
    yellow = new_index(settings={"number_of_replicas": 1}, suffix="-y")
    body = es.cluster.health(index=f"{green},{yellow}", level="shards").body
    assert body["indices"][green]["shards"] == {
        str(n): {
            "status": "green",
            "primary_active": True,
            "active_shards": 1,
            "relocating_shards": 0,
            "initializing_shards": 0,
            "unassigned_shards": 0,
            "unassigned_primary_shards": 0,
        }
        for n in range(2)
    }
    assert body["indices"][yellow]["shards"]["0"]["status"] == "yellow"
    assert body["indices"][yellow]["shards"]["0"]["unassigned_shards"] == 1
    assert "shards" not in es.cluster.health(index=green, level="indices")["indices"][green]
    es.indices.close(index=yellow)
    assert es.cluster.health(index=yellow, level="indices")["indices"][yellow]["status"] == "yellow"
    pattern = f"{green[:-2]}-*"
    for health, expected in (("green", green), ("YELLOW", yellow)):
        listed = http.get(f"/_cat/indices/{pattern}", params={"health": health, "h": "index"}).text.split()
        assert listed == [expected]
    refused = http.get("/_cat/indices", params={"health": "invalid-health-value"})
    assert refused.status_code == 400
    assert error_of(refused)["reason"] == "unknown cluster health status [invalid-health-value]"


def test_cluster_health_times_out_with_408(http: httpx.Client, new_index, index_name: str) -> None:
    yellow = new_index(suffix="-y")
    waited = http.get(f"/_cluster/health/{yellow}", params={"wait_for_status": "green", "timeout": "200ms"})
    assert waited.status_code == 408
    assert waited.json()["timed_out"] is True
    missing = http.get(f"/_cluster/health/{index_name}-missing", params={"timeout": "100ms"})
    assert missing.status_code == 408
    assert missing.json()["status"] == "red"


def test_cluster_settings_round_trip(es: Elasticsearch, http: httpx.Client) -> None:
    try:
        answer = es.cluster.put_settings(persistent={"search.max_open_scroll_context": 600})
        assert answer.body == {
            "acknowledged": True,
            "persistent": {"search": {"max_open_scroll_context": "600"}},
            "transient": {},
        }
        got = es.cluster.get_settings()
        assert got["persistent"]["search"]["max_open_scroll_context"] == "600"
        flat = http.get("/_cluster/settings", params={"flat_settings": "true"}).json()
        assert flat["persistent"]["search.max_open_scroll_context"] == "600"
        defaults = http.get("/_cluster/settings", params={"include_defaults": "true"}).json()["defaults"]
        assert defaults["search"]["default_keep_alive"] == "5m"
        with pytest.raises(BadRequestError) as caught:
            es.cluster.put_settings(persistent={"search.bogus": 1})
        assert caught.value.body["error"]["reason"] == "persistent setting [search.bogus], not recognized"
    finally:
        es.cluster.put_settings(persistent={"search.max_open_scroll_context": None})
    assert "max_open_scroll_context" not in http.get("/_cluster/settings").json()["persistent"].get(
        "search", {}
    )


def test_aliases_empty_and_a_missing_data_stream(http: httpx.Client, new_index) -> None:
    name = new_index()
    assert http.get(f"/{name}/_alias").json() == {name: {"aliases": {}}}
    assert http.get("/_aliases").json()[name] == {"aliases": {}}
    missing_alias = http.get("/_alias/nope")
    assert missing_alias.status_code == 404
    assert missing_alias.json() == {"error": "alias [nope] missing", "status": 404}
    stream = http.get("/_data_stream/logs-nope")
    assert stream.status_code == 404
    assert stream.json()["error"]["type"] == "index_not_found_exception"
    assert "logs-nope" not in {s["name"] for s in http.get("/_data_stream").json()["data_streams"]}


def test_nodes_endpoints(http: httpx.Client) -> None:
    for path in (
        "/_nodes",
        "/_nodes/_local",
        "/_nodes/stats",
        "/_nodes/stats/indices",
        "/_nodes/stats/indices/search",
        "/_nodes/_local/stats/indices/search",
    ):
        response = http.get(path)
        assert response.status_code == 200, (path, response.text)
        assert response.json()["nodes"], path
    assert http.get("/_nodes/not-this-node/stats").json()["nodes"] == {}
    # leafsearch's own index metric (the sort orders per segment) is one a path may name too
    (stats,) = http.get("/_nodes/stats/indices/sort_orders,search").json()["nodes"].values()
    assert set(stats["indices"]) == {"sort_orders", "search"}
    assert stats["indices"]["sort_orders"]["limit_size_in_bytes"] > 0
    error = error_of(http.get("/_nodes/stats/bogus"))
    assert error["reason"] == "request [/_nodes/stats/bogus] contains unrecognized metric: [bogus]"
    error = error_of(http.get("/_nodes/stats/indices/serch"))
    assert error["reason"] == (
        "request [/_nodes/stats/indices/serch] contains unrecognized index metric: [serch] "
        "-> did you mean [search]?"
    )
