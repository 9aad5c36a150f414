"""The unmodified Node.js client (`auth`) and elasticdump (credentials in the URL) against a node
whose data folder holds users, so every request must authenticate.

Users are made with the `leafsearch users` command before the node starts. The scripts are in
tests/clients/js/ (see tests/clients/test_js_clients.py for how they run and report).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import running_server
from elasticsearch import Elasticsearch
from js_helpers import NEEDS_NODE, elasticdump, install_node_modules, run_elasticdump, run_script
from security_helpers import add_user

from tests import web

ADMIN = ("admin", "admin-secret")
WRITER = ("wanda", "wanda-secret")  # write:js-*
VIEWER = ("vera", "vera-secret")
CHALLENGE = 'Basic realm="security", charset="UTF-8", ApiKey'

pytestmark = [NEEDS_NODE, pytest.mark.external]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    install_node_modules()
    data = tmp_path_factory.mktemp("js-secured") / "data"
    add_user(data, *ADMIN, "superuser")
    add_user(data, *WRITER, "write:js-*")
    add_user(data, *VIEWER, "viewer")
    with running_server(data) as (url, _):
        yield url


def test_basic_auth_and_both_api_key_forms_index_search_and_walk_a_pit(secured: str) -> None:
    out = run_script("secured_walk.mjs", secured, "js-walk", *WRITER)
    key_id = out["keyId"]
    by_key = {"apiKeyEncoded", "apiKeyPair"}
    for name, result in out["results"].items():
        assert result["user"] == "wanda", name
        assert result["type"] == ("api_key" if name in by_key else "realm"), name
        assert result["apiKeyId"] == (key_id if name in by_key else None), name
        assert result["bulk"] == {"successful": 59, "failed": 0}, name
        assert result["searched"] == 50, name
        assert (result["walked"], result["pages"], result["duplicates"]) == (60, 9, []), name
        assert result["inOrder"], name
        assert result["closed"] == {"succeeded": True, "num_freed": 1}, name
    assert out["invalidated"] == [key_id]
    assert out["afterInvalidation"] == {"name": "ResponseError", "status": 401, "type": "security_exception"}
    with web.Client(base_url=secured, auth=ADMIN) as admin:
        counts = admin.get("/_cat/count/js-walk-*?h=count").text.split()
        assert counts == ["240"]
        assert admin.get("/_cat/search_contexts?h=id").text.split() == []


def test_refusals_are_the_clients_response_errors(secured: str) -> None:
    index = "js-refusals"
    with web.Client(base_url=secured, auth=WRITER) as wanda:
        assert wanda.put(f"/{index}/_doc/1?refresh=true", json={"n": 1}).status_code == 201
    out = run_script("secured_refusals.mjs", secured, index, *WRITER, *VIEWER)
    assert out["wrongPassword"] == {
        "name": "ResponseError",
        "status": 401,
        "type": "security_exception",
        "reason": "unable to authenticate user [wanda] for REST request [/js-refusals/_search]",
        "challenge": CHALLENGE,
    }
    wrong_key = out["wrongApiKey"]
    assert (wrong_key["name"], wrong_key["status"], wrong_key["type"]) == (
        "ResponseError",
        401,
        "security_exception",
    )
    assert out["viewerWrite"] == {
        "name": "ResponseError",
        "status": 403,
        "type": "security_exception",
        "reason": "action [indices:data/write/index] is unauthorized for user [vera] with effective roles "
        "[viewer] on indices [js-refusals], this action is granted by the index privileges [write]",
        "challenge": None,
    }
    (item,) = out["viewerBulk"]
    assert item["index"]["status"] == 403
    assert item["index"]["error"]["type"] == "security_exception"
    assert (
        "action [indices:data/write/bulk[s]] is unauthorized for user [vera]"
        in item["index"]["error"]["reason"]
    )
    assert out["viewerCount"] == 1
    assert out["viewerFound"]["status"] == 404  # the refused write wrote nothing
    with web.Client(base_url=secured, auth=ADMIN) as admin:
        assert admin.get(f"/{index}/_count").json()["count"] == 1


def test_elasticdump_exports_with_credentials_in_the_url(secured: str, tmp_path: Path) -> None:
    index = "js-dump"
    with Elasticsearch(secured, basic_auth=WRITER) as es:
        operations = [line for n in range(250) for line in ({"index": {"_id": f"d{n}"}}, {"n": n})]
        assert not es.bulk(index=index, operations=operations, refresh=True)["errors"]
    parts = urlsplit(secured)
    dumped = tmp_path / "data.json"

    def source(credentials: str) -> str:
        return f"--input={parts.scheme}://{credentials}{parts.netloc}/{index}"

    refusals = {
        "": "missing authentication credentials",
        f"{WRITER[0]}:wrong@": "unable to authenticate user",
    }
    for credentials, reason in refusals.items():
        status, log = run_elasticdump(source(credentials), f"--output={dumped}", "--type=data")
        assert status != 0 and "statusCode: 401" in log and reason in log, log
        assert not dumped.exists() or dumped.read_text() == ""

    log = elasticdump(source(f"{WRITER[0]}:{WRITER[1]}@"), f"--output={dumped}", "--type=data", "--limit=100")
    assert "Total Writes: 250" in log
    ids = [json.loads(line)["_id"] for line in dumped.read_text().splitlines() if line.strip()]
    assert sorted(ids) == sorted(f"d{n}" for n in range(250))
