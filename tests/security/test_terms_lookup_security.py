"""A terms lookup reads its document as the caller: only from an index the caller may read."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from conftest import error_of, running_server
from security_helpers import add_user

from tests import web

ADMIN = ("admin", "admin-secret")
READER = ("rita", "rita-secret")  # read:logs-*


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("secured-lookup") / "data"
    with running_server(data) as (url, _):
        add_user(data, *ADMIN, "superuser")
        add_user(data, *READER, "read:logs-*")
        yield url


def test_lookup_needs_read_on_the_lookup_index(secured: str) -> None:
    with (
        web.Client(base_url=secured, auth=ADMIN) as admin,
        web.Client(base_url=secured, auth=READER) as rita,
    ):
        for name in ("logs-users", "logs-lists", "secret-lists"):
            admin.delete(f"/{name}")
        admin.put("/logs-users/_doc/1?refresh=true", json={"user": "u1"})
        admin.put("/logs-users/_doc/2?refresh=true", json={"user": "u2"})
        admin.put("/logs-lists/_doc/l?refresh=true", json={"ids": ["u1"]})
        admin.put("/secret-lists/_doc/l?refresh=true", json={"ids": ["u2"]})
        admin.post("/_aliases", json={"actions": [{"add": {"index": "secret-lists", "alias": "logs-alias"}}]})

        def lookup(index: str) -> httpx.Response:
            query = {"terms": {"user.keyword": {"index": index, "id": "l", "path": "ids"}}}
            return rita.post("/logs-users/_search", json={"query": query})

        allowed = lookup("logs-lists")
        assert allowed.status_code == 200
        assert [hit["_id"] for hit in allowed.json()["hits"]["hits"]] == ["1"]
        refused = lookup("secret-lists")
        assert refused.status_code == 403
        assert error_of(refused)["reason"] == (
            "action [indices:data/read/get] is unauthorized for user [rita] with effective roles "
            "[read:logs-*] on indices [secret-lists], this action is granted by the index privileges "
            "[read,write]"
        )
        # An alias is authorized by its own name, as a get through it is.
        assert lookup("logs-alias").status_code == 200
        counted = rita.post(
            "/logs-users/_count",
            json={"query": {"terms": {"user.keyword": {"index": "secret-lists", "id": "l", "path": "ids"}}}},
        )
        assert counted.status_code == 403
