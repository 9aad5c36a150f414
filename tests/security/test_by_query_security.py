"""Who may run by-query operations and reindex, and whose tasks a caller sees.

The node starts without users; `leafsearch users` adds them while it runs (as test_security.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from conftest import error_of, running_server
from security_helpers import add_user

from tests import web

ADMIN = ("admin", "admin-secret")
VIEWER = ("vera", "vera-secret")
LOGS = ("lou", "lou-secret")  # write:logs-*
READER = ("rita", "rita-secret")  # read:logs-*


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("secured-byquery") / "data"
    with running_server(data) as (url, _):
        add_user(data, *ADMIN, "superuser")
        add_user(data, *VIEWER, "viewer")
        add_user(data, *LOGS, "write:logs-*")
        add_user(data, *READER, "read:logs-*")
        yield url


def client(url: str, user: tuple[str, str]) -> httpx.Client:
    return web.Client(base_url=url, auth=user, timeout=60)


def _fill(admin: httpx.Client, *names: str) -> None:
    for name in names:
        admin.delete(f"/{name}")
        assert admin.put(f"/{name}").status_code == 200
        for i in range(4):
            admin.put(f"/{name}/_doc/{i}", json={"n": i})
        admin.post(f"/{name}/_refresh")


def _count(admin: httpx.Client, name: str) -> int:
    admin.post(f"/{name}/_refresh")
    return admin.get(f"/{name}/_count").json()["count"]


def test_by_query_needs_write_on_its_indices_and_narrows_wildcards(secured: str) -> None:
    with client(secured, ADMIN) as admin, client(secured, LOGS) as lou, client(secured, READER) as rita:
        _fill(admin, "logs-dbq", "secret-dbq")
        response = lou.post("/secret-dbq/_delete_by_query", json={"query": {"match_all": {}}})
        assert response.status_code == 403
        assert error_of(response)["reason"].startswith(
            "action [indices:data/write/delete/byquery] is unauthorized for user [lou]"
        )
        response = rita.post("/logs-dbq/_update_by_query")
        assert response.status_code == 403
        assert "action [indices:data/write/update/byquery]" in error_of(response)["reason"]
        body = lou.post("/*-dbq/_delete_by_query?refresh=true", json={"query": {"match_all": {}}}).json()
        assert body["deleted"] == 4
        assert (_count(admin, "logs-dbq"), _count(admin, "secret-dbq")) == (0, 4)


def test_reindex_needs_read_on_the_source_and_write_on_the_destination(secured: str) -> None:
    with client(secured, ADMIN) as admin, client(secured, LOGS) as lou, client(secured, READER) as rita:
        _fill(admin, "logs-src", "secret-src")
        response = lou.post(
            "/_reindex", json={"source": {"index": "secret-src"}, "dest": {"index": "logs-copy"}}
        )
        assert response.status_code == 403
        assert error_of(response)["reason"].startswith("action [indices:data/read/search] is unauthorized")
        response = rita.post(
            "/_reindex", json={"source": {"index": "logs-src"}, "dest": {"index": "logs-copy"}}
        )
        assert response.status_code == 403
        assert error_of(response)["reason"].startswith("action [indices:data/write/index] is unauthorized")
        response = lou.post(
            "/_reindex?refresh=true", json={"source": {"index": "*-src"}, "dest": {"index": "logs-copy"}}
        )
        assert response.status_code == 200, response.text
        assert response.json()["created"] == 4  # the wildcard reached logs-src only
        assert admin.head("/logs-copy").status_code == 200


def test_tasks_belong_to_whoever_started_them(secured: str) -> None:
    with client(secured, ADMIN) as admin, client(secured, LOGS) as lou, client(secured, VIEWER) as vera:
        _fill(admin, "logs-task")
        response = lou.post(
            "/logs-task/_update_by_query",
            params={"wait_for_completion": "false", "scroll_size": "1", "requests_per_second": "0.0001"},
        )
        task = response.json()["task"]
        assert vera.get(f"/_tasks/{task}").status_code == 404
        assert vera.post(f"/_tasks/{task}/_cancel").status_code == 404
        assert vera.post(f"/_update_by_query/{task}/_rethrottle?requests_per_second=-1").status_code == 404
        listed = vera.get("/_tasks", params={"actions": "*byquery"}).json()
        assert listed == {"nodes": {}}
        assert admin.get(f"/_tasks/{task}").json()["completed"] is False
        assert lou.post(f"/_tasks/{task}/_cancel").status_code == 200
        done = lou.get(f"/_tasks/{task}?wait_for_completion=true").json()
        assert done["response"]["canceled"] == "by user request"
        assert vera.get(f"/_tasks/{task}").status_code == 404
        assert admin.get(f"/_tasks/{task}").json()["completed"] is True
