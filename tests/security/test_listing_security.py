"""What the APIs that list indices, aliases, statistics, tasks and contexts show a caller allowed
only some of them.

The node holds names on both sides of `read:logs-*` (rita) and `write:logs-*` (lou):
- `logs-app`, allowed, with the alias `payroll-logs`, a name they may not use;
- `secret-hr`, forbidden, with the alias `payroll-2024`, forbidden too;
- `secret-ops`, forbidden by its name, with the alias `logs-ops`, a name they may use. As
  Elasticsearch authorizes an alias by its own name, `logs-ops` stands for `secret-ops`: a listing
  shows it, as `GET /logs-ops/_search` answers its documents;
- `logs-old` and `secret-old`, closed.
They see exactly what they may use and nothing of `FORBIDDEN`; naming one of those is a 403. The
superuser's view of the same listings is checked too, so that each hidden name is really there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from conftest import error_of, running_server
from elasticsearch import Elasticsearch
from security_helpers import add_user

from tests import web

ADMIN = ("admin", "admin-secret")
READER = ("rita", "rita-secret")  # read:logs-*
WRITER = ("lou", "lou-secret")  # write:logs-*
CALLERS = {"read": READER, "write": WRITER}
FORBIDDEN = ("secret-hr", "secret-old", "payroll-2024", "payroll-logs")
DOCS = {"logs-app": 3, "secret-hr": 2, "secret-ops": 4}


@dataclass(frozen=True)
class Secured:
    url: str
    task: str  # the superuser's throttled update by query on secret-hr, still running


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    data = tmp_path_factory.mktemp("secured-listings") / "data"
    with running_server(data) as (url, _):
        add_user(data, *ADMIN, "superuser")
        add_user(data, *READER, "read:logs-*")
        add_user(data, *WRITER, "write:logs-*")
        with web.Client(base_url=url, auth=ADMIN, timeout=60) as admin:
            for name, count in DOCS.items():
                for i in range(count):
                    admin.put(f"/{name}/_doc/{i}", json={"n": i, "where": name}).raise_for_status()
            for name in ("logs-old", "secret-old"):
                admin.put(f"/{name}").raise_for_status()
                admin.post(f"/{name}/_close").raise_for_status()
            actions = [
                {"add": {"index": "secret-hr", "alias": "payroll-2024"}},
                {"add": {"index": "secret-ops", "alias": "logs-ops"}},
                {"add": {"index": "logs-app", "alias": "payroll-logs"}},
            ]
            admin.post("/_aliases", json={"actions": actions}).raise_for_status()
            admin.post("/_refresh").raise_for_status()
            admin.post("/secret-hr/_pit?keep_alive=10m").raise_for_status()
            throttled = {"wait_for_completion": "false", "scroll_size": "1", "requests_per_second": "0.0001"}
            task = admin.post("/secret-hr/_update_by_query", params=throttled).json()["task"]
            try:
                yield Secured(url, task)
            finally:
                admin.post(f"/_tasks/{task}/_cancel")


def client(node: Secured, user: tuple[str, str]) -> httpx.Client:
    return web.Client(base_url=node.url, auth=user, timeout=60)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def hides_the_forbidden(response: httpx.Response) -> httpx.Response:
    assert response.status_code == 200, response.text
    assert [name for name in FORBIDDEN if name in response.text] == []
    return response


def refused(response: httpx.Response, action: str, user: str, name: str) -> None:
    """A 403 in Elasticsearch's words, naming the action, the caller and the refused name (a
    HEAD request has no body to say it)."""
    assert response.status_code == 403, response.text
    if response.request.method != "HEAD":
        roles = {"rita": "read:logs-*", "lou": "write:logs-*"}[user]
        assert error_of(response)["reason"] == (
            f"action [{action}] is unauthorized for user [{user}] with effective roles [{roles}] on "
            f"indices [{name}], this action is granted by the index privileges [read,write]"
        )


def cat(http: httpx.Client, path: str, columns: str) -> list[tuple[str, ...]]:
    rows = ok(http.get(path, params={"format": "json", "h": columns}))
    return sorted(tuple(row[c] for c in columns.split(",")) for row in rows)


# ---- aliases ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", CALLERS)
def test_cat_aliases_lists_only_the_aliases_the_caller_may_use(node: Secured, role: str) -> None:
    user = CALLERS[role]
    with client(node, ADMIN) as admin, client(node, user) as caller:
        assert cat(admin, "/_cat/aliases", "alias,index") == [
            ("logs-ops", "secret-ops"),
            ("payroll-2024", "secret-hr"),
            ("payroll-logs", "logs-app"),
        ]
        hides_the_forbidden(caller.get("/_cat/aliases"))
        assert cat(caller, "/_cat/aliases", "alias,index") == [("logs-ops", "secret-ops")]
        assert cat(caller, "/_cat/aliases/logs-*,payroll-*", "alias,index") == [("logs-ops", "secret-ops")]
        assert cat(caller, "/_cat/aliases/payroll-*", "alias") == []
        for path, name in (
            ("/_cat/aliases/payroll-2024", "payroll-2024"),
            ("/_cat/aliases/logs-ops,payroll-logs", "payroll-logs"),
        ):
            refused(caller.get(path), "indices:admin/aliases/get", user[0], name)
    with Elasticsearch(node.url, basic_auth=user) as es:
        assert [(r["alias"], r["index"]) for r in es.cat.aliases(format="json")] == [
            ("logs-ops", "secret-ops")
        ]


@pytest.mark.parametrize("role", CALLERS)
def test_get_alias_lists_only_the_aliases_the_caller_may_use(node: Secured, role: str) -> None:
    user = CALLERS[role]
    mine = {
        "logs-app": {"aliases": {}},
        "logs-old": {"aliases": {}},
        "secret-ops": {"aliases": {"logs-ops": {}}},
    }
    with client(node, ADMIN) as admin, client(node, user) as caller:
        everything = ok(admin.get("/_alias"))
        assert everything["logs-app"] == {"aliases": {"payroll-logs": {}}}
        assert set(everything) == {*mine, "secret-hr", "secret-old"}
        with_aliases = {"secret-ops": mine["secret-ops"]}
        for path, expected in (
            ("/_alias", mine),
            ("/_aliases", mine),
            ("/*/_alias", mine),
            ("/_alias/*", with_aliases),
            ("/_alias/_all", with_aliases),
        ):
            assert hides_the_forbidden(caller.get(path)).json() == expected, path
        assert ok(caller.get("/logs-app/_alias")) == {"logs-app": {"aliases": {}}}
        assert ok(caller.get("/logs-app/_alias/payroll-*")) == {}
        assert ok(caller.get("/_alias/payroll-*")) == {}
        assert ok(caller.get("/logs-ops/_alias")) == {"secret-ops": mine["secret-ops"]}
        action = "indices:admin/aliases/get"
        refused(caller.get("/_alias/payroll-2024"), action, user[0], "payroll-2024")
        refused(caller.get("/_alias/_all,payroll-2024"), action, user[0], "payroll-2024")
        refused(caller.get("/logs-app/_alias/payroll-logs"), action, user[0], "payroll-logs")
        refused(caller.get("/secret-hr/_alias"), action, user[0], "secret-hr")
        refused(caller.head("/_alias/payroll-2024"), action, user[0], "payroll-2024")
        assert caller.head("/_alias/payroll-*").status_code == 404
        assert caller.head("/logs-app/_alias/payroll-*").status_code == 404
        assert admin.head("/logs-app/_alias/payroll-*").status_code == 200
        assert caller.head("/_alias/logs-ops").status_code == 200
    with Elasticsearch(node.url, basic_auth=user) as es:
        assert es.indices.get_alias().body == mine


# ---- index metadata -------------------------------------------------------------------------------


@pytest.mark.parametrize("role", CALLERS)
def test_index_metadata_lists_only_the_callers_indices_and_aliases(node: Secured, role: str) -> None:
    user = CALLERS[role]
    mine = {"logs-app", "secret-ops"}
    with client(node, ADMIN) as admin, client(node, user) as caller:
        assert ok(admin.get("/logs-app"))["logs-app"]["aliases"] == {"payroll-logs": {}}
        assert set(ok(admin.get("/_all"))) == {"logs-app", "secret-hr", "secret-ops"}
        for path in ("/_all", "/*", "/_mapping", "/*/_mapping", "/_settings", "/_settings/index.number_*"):
            assert set(hides_the_forbidden(caller.get(path)).json()) == mine, path
        indices = ok(caller.get("/_all"))
        assert indices["logs-app"]["aliases"] == {}
        assert indices["secret-ops"]["aliases"] == {"logs-ops": {}}
        assert ok(caller.get("/logs-app"))["logs-app"]["aliases"] == {}
        caps = hides_the_forbidden(caller.get("/_field_caps", params={"fields": "*"})).json()
        assert sorted(caps["indices"]) == sorted(mine)
        assert caller.head("/secret-*").status_code == 404
        assert caller.head("/logs-*").status_code == 200
        for path, action, name in (
            ("/secret-hr", "indices:admin/get", "secret-hr"),
            ("/secret-hr/_mapping", "indices:admin/mappings/get", "secret-hr"),
            ("/secret-hr/_settings", "indices:monitor/settings/get", "secret-hr"),
            ("/payroll-2024/_field_caps?fields=*", "indices:data/read/field_caps", "payroll-2024"),
        ):
            refused(caller.get(path), action, user[0], name)
    with Elasticsearch(node.url, basic_auth=user) as es:
        assert set(es.indices.get(index="*").body) == mine
        assert set(es.indices.get_mapping().body) == mine


# ---- statistics, cat tables, counts ---------------------------------------------------------------


def test_statistics_and_cat_tables_list_only_the_callers_indices(node: Secured) -> None:
    with client(node, ADMIN) as admin, client(node, READER) as rita:
        everything = {"logs-app", "logs-old", "secret-hr", "secret-old", "secret-ops"}
        assert {row[0] for row in cat(admin, "/_cat/indices", "index")} == everything
        assert {row[0] for row in cat(admin, "/_cat/shards", "index")} == everything
        mine = {"logs-app", "logs-old", "secret-ops"}
        for path in ("/_cat/indices", "/_cat/shards", "/_cat/indices/*", "/_cat/shards/*"):
            hides_the_forbidden(rita.get(path))
            assert {row[0] for row in cat(rita, path, "index")} == mine, path
        assert {row[0] for row in cat(rita, "/_cat/segments", "index")} == {"logs-app", "secret-ops"}
        for path in ("/_stats", "/_stats/docs?level=shards", "/*/_stats"):
            stats = hides_the_forbidden(rita.get(path)).json()
            assert set(stats["indices"]) == {"logs-app", "secret-ops"}, path
        visible = DOCS["logs-app"] + DOCS["secret-ops"]
        assert stats["_all"]["primaries"]["docs"]["count"] == visible
        assert cat(rita, "/_cat/count", "count") == [(str(visible),)]
        assert ok(rita.get("/_count"))["count"] == visible
        by_index = {"aggs": {"where": {"terms": {"field": "_index"}}}, "size": 0}
        buckets = ok(rita.post("/*/_search", json=by_index))["aggregations"]["where"]["buckets"]
        assert {b["key"]: b["doc_count"] for b in buckets} == {"logs-app": 3, "secret-ops": 4}
        for path, action, name in (
            ("/_cat/indices/secret-hr", "indices:monitor/stats", "secret-hr"),
            ("/_cat/shards/secret-old", "indices:monitor/stats", "secret-old"),
            ("/_cat/segments/secret-hr", "indices:monitor/segments", "secret-hr"),
            ("/_cat/count/payroll-2024", "indices:data/read/search", "payroll-2024"),
            ("/secret-hr/_stats", "indices:monitor/stats", "secret-hr"),
        ):
            refused(rita.get(path), action, "rita", name)


# ---- cluster monitoring -----------------------------------------------------------------------------


def test_cluster_health_and_node_stats_name_only_the_callers_indices(node: Secured) -> None:
    with client(node, ADMIN) as admin, client(node, READER) as rita:
        whole = ok(admin.get("/_cluster/health", params={"level": "indices"}))
        assert {"secret-hr", "secret-old"} <= set(whole["indices"])
        health = hides_the_forbidden(rita.get("/_cluster/health", params={"level": "indices"})).json()
        assert set(health["indices"]) == {"logs-app", "logs-old", "secret-ops"}
        # The cluster's own figures stay the cluster's, as `_cat/health` shows them to everyone.
        assert {k: v for k, v in health.items() if k != "indices"} == {
            k: v for k, v in whole.items() if k != "indices"
        }
        named = ok(rita.get("/_cluster/health/*", params={"level": "shards"}))
        assert set(named["indices"]) == {"logs-app", "secret-ops"}
        assert named["active_primary_shards"] == 2
        refused(rita.get("/_cluster/health/secret-hr"), "cluster:monitor/health", "rita", "secret-hr")
        # Per index, open ones; per shard, closed ones too (their shards are still on the node).
        for level, closed in (("indices", set()), ("shards", {"logs-old"})):
            params = {"level": level}
            (admin_stats,) = ok(admin.get("/_nodes/stats/indices", params=params))["nodes"].values()
            assert {"secret-hr", "logs-app"} | closed <= set(admin_stats["indices"][level])
            for path in ("/_nodes/stats", "/_nodes/stats/indices/docs", "/_nodes/_local/stats/_all"):
                (stats,) = hides_the_forbidden(rita.get(path, params=params)).json()["nodes"].values()
                assert set(stats["indices"][level]) == {"logs-app", "secret-ops"} | closed, (path, level)
        for path in ("/_cat/health", "/_cat/nodes?h=*"):
            hides_the_forbidden(rita.get(path))
    with Elasticsearch(node.url, basic_auth=READER) as es:
        (stats,) = es.nodes.stats(level="indices")["nodes"].values()
        assert set(stats["indices"]["indices"]) == {"logs-app", "secret-ops"}
        assert set(es.cluster.health(level="indices")["indices"]) == {"logs-app", "logs-old", "secret-ops"}


# ---- tasks and reader contexts -----------------------------------------------------------------------


def test_others_tasks_and_contexts_stay_hidden(node: Secured) -> None:
    with client(node, ADMIN) as admin, client(node, READER) as rita:
        assert node.task in admin.get("/_tasks", params={"detailed": "true"}).text
        assert "secret-hr" in admin.get("/_cat/search_contexts").text
        assert ok(rita.get("/_tasks", params={"detailed": "true"})) == {"nodes": {}}
        assert ok(rita.get("/_tasks", params={"detailed": "true", "group_by": "none"})) == {"tasks": []}
        assert rita.get(f"/_tasks/{node.task}").status_code == 404
        assert cat(rita, "/_cat/search_contexts", "type,indices") == []
        assert ok(rita.get("/_search/point_in_time/_all")) == {"pits": []}
        # Their own context lists what they reached, and only that.
        pit = ok(rita.post("/logs-*/_pit", params={"keep_alive": "1m"}))["id"]
        assert cat(rita, "/_cat/search_contexts", "type,indices") == [("pit", "logs-app,secret-ops")]
        assert rita.request("DELETE", "/_pit", json={"id": pit}).json()["num_freed"] == 1
