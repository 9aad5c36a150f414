"""Who may export (`_export`, a leafsearch extension): a search's `read` on the indices it reads,
wildcards narrowed to them, and a PIT only by its opener (as test_by_query_security.py)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import orjson
import pytest
from conftest import error_of, running_server
from security_helpers import add_user

from tests import web

ADMIN = ("admin", "admin-secret")
READER = ("rita", "rita-secret")  # read:logs-*
OTHER = ("otto", "otto-secret")  # read:logs-*


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("secured-export") / "data"
    with running_server(data) as (url, _):
        add_user(data, *ADMIN, "superuser")
        add_user(data, *READER, "read:logs-*")
        add_user(data, *OTHER, "read:logs-*")
        yield url


def client(url: str, user: tuple[str, str]) -> httpx.Client:
    return web.Client(base_url=url, auth=user, timeout=60)


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    lines = [orjson.loads(line) for line in response.content.splitlines()]
    assert lines.pop()["_export"]["complete"] is True
    return sorted(line["_id"] for line in lines)


def test_an_export_needs_read_on_its_indices(secured: str) -> None:
    with client(secured, ADMIN) as admin, client(secured, READER) as rita, client(secured, OTHER) as otto:
        for name in ("logs-exp", "secret-exp"):
            admin.delete(f"/{name}")
            for i in range(3):
                assert admin.put(f"/{name}/_doc/{name}-{i}", json={"n": i}).status_code == 201
            admin.post(f"/{name}/_refresh")
        response = rita.post("/secret-exp/_export", json={})
        assert response.status_code == 403
        assert error_of(response)["reason"].startswith(
            "action [indices:data/read/search] is unauthorized for user [rita]"
        )
        assert _ids(rita.post("/*-exp/_export", json={})) == [f"logs-exp-{i}" for i in range(3)]
        pit = rita.post("/logs-exp/_pit?keep_alive=1m").json()["id"]
        assert _ids(rita.post("/_export", json={"pit": {"id": pit}})) == [f"logs-exp-{i}" for i in range(3)]
        response = otto.post("/_export", json={"pit": {"id": pit}})  # not its PIT: as if none
        assert response.status_code == 404
        assert response.json()["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
        assert web.post(f"{secured}/logs-exp/_export", json={}).status_code == 401
