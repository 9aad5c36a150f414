"""Who may change templates, data streams and snapshots (superusers, as Elasticsearch's
`manage_index_templates`, `manage` and `create_snapshot` privileges), and how a data stream is
authorized: by its own name, as an alias is."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from conftest import error_of, running_server
from security_helpers import add_user

from tests import web

ADMIN = ("admin", "admin-secret")
LOGS = ("lou", "lou-secret")  # write:logs-*
READER = ("rita", "rita-secret")  # read:logs-*


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("secured-meta")
    (root / "repos").mkdir()
    with running_server(root / "data", "--path-repo", str(root / "repos")) as (url, _):
        add_user(root / "data", *ADMIN, "superuser")
        add_user(root / "data", *LOGS, "write:logs-*")
        add_user(root / "data", *READER, "read:logs-*")
        yield url


def client(url: str, user: tuple[str, str]) -> httpx.Client:
    return web.Client(base_url=url, auth=user, timeout=60)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/_index_template/t", {"index_patterns": ["logs-*"]}),
        ("PUT", "/_template/t", {"index_patterns": ["logs-*"]}),
        ("PUT", "/_component_template/c", {"template": {}}),
        ("DELETE", "/_index_template/t", None),
        ("PUT", "/_snapshot/r", {"type": "fs", "settings": {"location": "r"}}),
        ("PUT", "/_snapshot/r/s", None),
        ("POST", "/_snapshot/r/s/_restore", None),
        ("DELETE", "/_snapshot/r/s", None),
        ("PUT", "/_data_stream/logs-x", None),
        ("DELETE", "/_data_stream/logs-x", None),
    ],
)
def test_only_superusers_change_templates_streams_and_snapshots(
    secured: str, method: str, path: str, body: dict | None
) -> None:
    with client(secured, LOGS) as lou:
        response = lou.request(method, path, json=body)
    assert response.status_code == 403, response.text
    assert error_of(response)["type"] == "security_exception"


def test_a_stream_is_written_and_read_by_its_own_name(secured: str) -> None:
    with client(secured, ADMIN) as admin, client(secured, LOGS) as lou, client(secured, READER) as rita:
        template = {"index_patterns": ["logs-*", "other-*"], "data_stream": {}}
        assert admin.put("/_index_template/streams", json=template).status_code == 200
        doc = {"@timestamp": "2024-05-01T00:00:00Z", "m": "x"}
        assert lou.post("/logs-app/_doc", json=doc, params={"refresh": "true"}).status_code == 201
        assert lou.post("/other-app/_doc", json=doc).status_code == 403
        assert rita.get("/logs-app/_count").json()["count"] == 1
        assert rita.post("/logs-app/_doc", json=doc).status_code == 403
        assert admin.delete("/_data_stream/logs-app").status_code == 200
