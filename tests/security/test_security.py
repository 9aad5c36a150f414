"""Authentication, roles and context ownership, through raw HTTP and the official client.

The node of this module starts without users (authentication off, as the quick start), then the
`leafsearch users` command adds them while it runs: authentication turns on at once.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import elasticsearch
import httpx
import pytest
from conftest import error_of, running_server
from elasticsearch import Elasticsearch
from security_helpers import add_user, leafsearch_cli

from tests import web

ADMIN = ("admin", "admin-secret")
VIEWER = ("vera", "vera-secret")
LOGS = ("lou", "lou-secret")  # write:logs-*
READER = ("rita", "rita-secret")  # read:logs-*
CHALLENGE = 'Basic realm="security", charset="UTF-8", ApiKey'


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data = tmp_path_factory.mktemp("secured") / "data"
    with running_server(data) as (url, _):
        add_user(data, *ADMIN, "superuser")
        add_user(data, *VIEWER, "viewer")
        add_user(data, *LOGS, "write:logs-*")
        add_user(data, *READER, "read:logs-*")
        admin = web.Client(base_url=url, auth=ADMIN, timeout=60)
        for name in ("logs-a", "secret"):
            assert admin.put(f"/{name}").status_code == 200
            for i in range(3):
                admin.put(f"/{name}/_doc/{i}", json={"n": i, "where": name})
            admin.post(f"/{name}/_refresh")
        admin.close()
        yield url, data


def client(url: str, user: tuple[str, str] | None = None) -> httpx.Client:
    return web.Client(base_url=url, auth=user, timeout=60)


def test_requests_without_credentials_are_401_with_a_challenge(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url) as anonymous:
        response = anonymous.get("/_search?size=1")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == CHALLENGE
    error = error_of(response)
    assert error["type"] == "security_exception"
    assert error["reason"] == "missing authentication credentials for REST request [/_search?size=1]"
    assert error["header"]["WWW-Authenticate"] == ['Basic realm="security", charset="UTF-8"', "ApiKey"]


@pytest.mark.parametrize(
    "authorization",
    [
        "Basic " + base64.b64encode(b"admin:wrong-password").decode(),
        "Basic " + base64.b64encode(b"nobody:admin-secret").decode(),
        "Basic !!!not-base64",
        "ApiKey " + base64.b64encode(b"made-up-id:made-up-key").decode(),
        "Bearer some-token",
        "garbage",
    ],
)
def test_wrong_or_garbage_credentials_are_401(secured: tuple[str, Path], authorization: str) -> None:
    url, _ = secured
    with client(url) as anonymous:
        headers = {"authorization": authorization}
        response = anonymous.put("/logs-a/_doc/forged", json={"x": 1}, headers=headers)
        assert response.status_code == 401
        assert error_of(response)["type"] == "security_exception"
        assert response.headers["www-authenticate"] == CHALLENGE
    with client(url, ADMIN) as admin:
        assert admin.get("/logs-a/_doc/forged").status_code == 404


def test_wrong_password_names_the_user(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url, ("admin", "nope")) as wrong:
        error = error_of(wrong.get("/"))
    assert error["reason"] == "unable to authenticate user [admin] for REST request [/]"


def test_official_client_basic_auth_and_its_refusals(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with Elasticsearch(url, basic_auth=ADMIN) as es:
        assert es.info()["version"]["number"].startswith("8.")
        assert es.security.authenticate()["username"] == "admin"
    with (
        Elasticsearch(url, basic_auth=("admin", "wrong")) as es,
        pytest.raises(elasticsearch.AuthenticationException),
    ):
        es.search(index="logs-a")
    with Elasticsearch(url) as es, pytest.raises(elasticsearch.AuthenticationException):
        es.info()
    with Elasticsearch(url, basic_auth=VIEWER) as es:
        with pytest.raises(elasticsearch.AuthorizationException) as refused:
            es.index(index="logs-a", id="v", document={"x": 1})
        assert refused.value.meta.status == 403
        assert es.count(index="logs-a")["count"] == 3


def test_authenticate_reports_the_user_and_its_roles(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url, LOGS) as lou:
        body = lou.get("/_security/_authenticate").json()
    assert body["username"] == "lou"
    assert body["roles"] == ["write:logs-*"]
    assert body["authentication_type"] == "realm"


def test_viewer_reads_everything_and_writes_nothing(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url, VIEWER) as vera:
        assert vera.get("/secret/_doc/1").status_code == 200
        assert vera.post("/_search", json={"size": 0}).json()["hits"]["total"]["value"] == 6
        response = vera.put("/secret/_doc/9", json={"x": 1})
        assert response.status_code == 403
        assert error_of(response)["reason"] == (
            "action [indices:data/write/index] is unauthorized for user [vera] with effective roles "
            "[viewer] on indices [secret], this action is granted by the index privileges [write]"
        )
        for method, path in (("DELETE", "/secret"), ("PUT", "/vera-new"), ("DELETE", "/secret/_doc/1")):
            assert vera.request(method, path).status_code == 403, (method, path)
        unsafe = {"persistent": {"action.destructive_requires_name": False}}
        refused = vera.put("/_cluster/settings", json=unsafe)
        assert refused.status_code == 403
        assert error_of(refused)["reason"] == (
            "action [cluster:admin/settings/update] is unauthorized for user [vera] with effective roles "
            "[viewer], this action is granted by the cluster privileges [all]"
        )
    with client(url, ADMIN) as admin:
        assert admin.get("/secret/_count").json()["count"] == 3
        settings = admin.get("/_cluster/settings").json()
        assert "action" not in settings["persistent"]


def test_index_patterns_narrow_wildcards_and_refuse_explicit_names(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url, READER) as rita:
        hits = rita.post("/*/_search", json={"size": 10}).json()["hits"]["hits"]
        assert {hit["_index"] for hit in hits} == {"logs-a"}
        assert rita.get("/_count").json()["count"] == 3
        assert set(rita.get("/_mapping").json()) == {"logs-a"}
        assert rita.get("/_cat/indices?h=index").text.split() == ["logs-a"]
        refused = rita.post("/secret/_search", json={})
        assert refused.status_code == 403
        assert error_of(refused)["reason"] == (
            "action [indices:data/read/search] is unauthorized for user [rita] with effective roles "
            "[read:logs-*] on indices [secret], this action is granted by the index privileges [read,write]"
        )
        assert rita.post("/logs-a,secret/_search", json={}).status_code == 403
        assert rita.put("/logs-a/_doc/r", json={"x": 1}).status_code == 403
        assert rita.post("/nomatch-*/_search", json={}).json()["hits"]["total"]["value"] == 0


def test_write_pattern_writes_its_indices_only(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url, LOGS) as lou:
        mappings = {"mappings": {"properties": {"n": {"type": "long"}}}}
        assert lou.put("/logs-b", json=mappings).status_code == 200
        assert lou.put("/logs-b/_doc/1?refresh=true", json={"n": 1}).status_code == 201
        assert lou.put("/secret/_doc/1", json={"n": 1}).status_code == 403
        assert lou.put("/other", json={}).status_code == 403
        body = (
            '{"index": {"_index": "logs-b", "_id": "2"}}\n{"n": 2}\n'
            '{"index": {"_index": "secret", "_id": "9"}}\n{"n": 2}\n'
        )
        response = lou.post("/_bulk", content=body, headers={"content-type": "application/x-ndjson"})
        items = response.json()["items"]
        assert items[0]["index"]["status"] == 201
        assert items[1]["index"]["status"] == 403
        assert items[1]["index"]["error"]["type"] == "security_exception"
        assert "indices:data/write/bulk[s]" in items[1]["index"]["error"]["reason"]
        wanted = [{"_index": "logs-b", "_id": "1"}, {"_index": "secret", "_id": "1"}]
        docs = lou.post("/_mget", json={"docs": wanted})
        found, refused = docs.json()["docs"]
        assert found["found"] is True
        assert refused["error"]["type"] == "security_exception"
        assert lou.delete("/logs-b").status_code == 200
    with client(url, ADMIN) as admin:
        assert admin.get("/secret/_doc/9").status_code == 404
        assert admin.get("/secret/_count").json()["count"] == 3


def _api_key(http: httpx.Client, name: str) -> dict[str, Any]:
    response = http.post("/_security/api_key", json={"name": name})
    assert response.status_code == 200, response.text
    return response.json()


def test_api_keys_authenticate_carry_their_owners_roles_and_can_be_invalidated(
    secured: tuple[str, Path],
) -> None:
    url, data = secured
    with client(url, READER) as rita:
        key = _api_key(rita, "rita-key")
        assert len(key["id"]) == 20 and len(key["api_key"]) == 22
        assert base64.b64decode(key["encoded"]).decode() == f"{key['id']}:{key['api_key']}"
        listed = rita.get("/_security/api_key").json()["api_keys"]
        assert [k["id"] for k in listed] == [key["id"]]
        assert "hash" not in listed[0] and "api_key" not in listed[0]
    with Elasticsearch(url, api_key=key["encoded"]) as es:
        me = es.security.authenticate()
        assert me["username"] == "rita" and me["api_key"]["id"] == key["id"]
        assert me["authentication_type"] == "api_key"
        assert es.count(index="logs-a")["count"] == 3
        with pytest.raises(elasticsearch.AuthorizationException) as refused:
            es.search(index="secret")
        assert f"is unauthorized for API key id [{key['id']}] of user [rita] on indices [secret]" in str(
            refused.value
        )
    with (
        Elasticsearch(url, api_key=(key["id"], "not-the-key")) as es,
        pytest.raises(elasticsearch.AuthenticationException),
    ):
        es.count(index="logs-a")
    # Other users neither see nor invalidate rita's key; rita does.
    with client(url, VIEWER) as vera:
        assert vera.get("/_security/api_key").json()["api_keys"] == []
        gone = vera.request("DELETE", "/_security/api_key", json={"ids": [key["id"]]}).json()
        assert gone["invalidated_api_keys"] == []
    with client(url, READER) as rita:
        gone = rita.request("DELETE", "/_security/api_key", json={"ids": [key["id"]]}).json()
        assert gone["invalidated_api_keys"] == [key["id"]]
        assert gone["previously_invalidated_api_keys"] == [] and gone["error_count"] == 0
    with client(url) as anonymous:
        response = anonymous.get("/_count", headers={"authorization": f"ApiKey {key['encoded']}"})
        assert response.status_code == 401
    stored = (data / "security" / "api_keys.json").read_text()
    assert key["api_key"] not in stored
    assert stat.S_IMODE(os.stat(data / "security" / "api_keys.json").st_mode) == 0o600


def test_an_api_key_reaches_only_itself_and_makes_no_other_key(secured: tuple[str, Path]) -> None:
    """Else a key that expires or is invalidated could leave a copy of itself behind."""
    url, _ = secured
    with client(url, LOGS) as lou:
        mine, sibling = _api_key(lou, "lou-1"), _api_key(lou, "lou-2")
    # The official client's (id, api_key) tuple form.
    with Elasticsearch(url, api_key=(mine["id"], mine["api_key"])) as es:
        assert es.security.authenticate()["api_key"]["id"] == mine["id"]
        assert es.count(index="logs-a")["count"] == 3
        with pytest.raises(elasticsearch.BadRequestError) as derived:
            es.security.create_api_key(name="copy")
        assert derived.value.meta.status == 400
        assert derived.value.error == "illegal_argument_exception"
        assert derived.value.body["error"]["reason"] == (
            "creating derived api keys requires an explicit role descriptor that is empty (has no privileges)"
        )
        assert [key["id"] for key in es.security.get_api_key(id=mine["id"])["api_keys"]] == [mine["id"]]
        for call in (
            lambda: es.security.get_api_key(),
            lambda: es.security.get_api_key(id=sibling["id"]),
            lambda: es.security.invalidate_api_key(ids=[sibling["id"]]),
            lambda: es.security.invalidate_api_key(name="lou-2"),
        ):
            with pytest.raises(elasticsearch.AuthorizationException) as refused:
                call()
            assert refused.value.body["error"]["reason"].startswith(
                "action [cluster:admin/xpack/security/api_key/"
            ), refused.value.body
            assert f"is unauthorized for API key id [{mine['id']}] of user [lou]" in str(refused.value)
        assert es.security.invalidate_api_key(ids=[mine["id"]])["invalidated_api_keys"] == [mine["id"]]
        with pytest.raises(elasticsearch.AuthenticationException):
            es.count(index="logs-a")
    with client(url, LOGS) as lou:
        listed = {key["id"]: key["invalidated"] for key in lou.get("/_security/api_key").json()["api_keys"]}
        assert listed == {mine["id"]: True, sibling["id"]: False}


def _scroll_id(http: httpx.Client) -> str:
    response = http.post("/logs-a/_search?scroll=1m", json={"size": 1})
    assert response.status_code == 200, response.text
    return response.json()["_scroll_id"]


def _decoded(context_id: str) -> list[str]:
    return base64.urlsafe_b64decode(context_id + "=" * (-len(context_id) % 4)).decode().split(":")


def _encoded(parts: list[str]) -> str:
    return base64.urlsafe_b64encode(":".join(parts).encode()).decode().rstrip("=")


def _tampered(parts: list[str]) -> str:
    """The id of `parts` with the first hex digit of its random token changed."""
    token = parts[-1]
    return _encoded([*parts[:-1], ("0" if token[0] != "0" else "1") + token[1:]])


def test_context_ids_are_random_and_none_derives_from_another(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url, ADMIN) as admin:
        first, second = _scroll_id(admin), _scroll_id(admin)
        a, b = _decoded(first), _decoded(second)
        assert len(bytes.fromhex(a[-1])) * 8 >= 128 and a[-1] != b[-1]
        # Another context's key with the first one's random part (its position kept) is unknown.
        guessed = _encoded([*a[:-3], b[-3], *a[-2:]])
        assert guessed != second
        missing = admin.post("/_search/scroll", json={"scroll_id": guessed, "scroll": "1m"})
        assert missing.status_code == 404
        assert missing.json()["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
        # A modified token or a forged id are unknown too (404), and never clear anything.
        for forged in (_tampered(b), _encoded(["leafsearch", "scroll", "x", "y", "1", "00" * 16])):
            missing = admin.post("/_search/scroll", json={"scroll_id": forged})
            assert missing.status_code == 404, missing.text
            assert missing.json()["error"]["root_cause"][0]["type"] == "search_context_missing_exception"
            cleared = admin.request("DELETE", "/_search/scroll", json={"scroll_id": forged})
            assert (cleared.status_code, cleared.json()["num_freed"]) == (404, 0)
        unparsable = admin.post("/_search/scroll", json={"scroll_id": "AAAA"})
        assert (unparsable.status_code, error_of(unparsable)["reason"]) == (400, "Cannot parse scroll id")
        for context_id in (first, second):
            assert (
                admin.post("/_search/scroll", json={"scroll_id": context_id, "scroll": "1m"}).status_code
                == 200
            )
        pit_a = admin.post("/logs-a/_pit?keep_alive=1m").json()["id"]
        pit_b = admin.post("/logs-a/_pit?keep_alive=1m").json()["id"]
        assert _decoded(pit_a)[-1] != _decoded(pit_b)[-1]
        forged_pit = _tampered(_decoded(pit_a))
        assert admin.post("/_search", json={"pit": {"id": forged_pit}}).status_code == 404
        closed = admin.request("DELETE", "/_pit", json={"id": forged_pit})
        assert (closed.status_code, closed.json()["num_freed"]) == (404, 0)
        for context_id in (pit_a, pit_b):
            assert admin.request("DELETE", "/_pit", json={"id": context_id}).json()["num_freed"] == 1
        cleared = admin.request("DELETE", "/_search/scroll", json={"scroll_id": [first, second]})
        assert cleared.json()["num_freed"] == 2


def test_contexts_belong_to_their_opener(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url, READER) as rita, client(url, VIEWER) as vera, client(url, ADMIN) as admin:
        opened = rita.post("/logs-a/_search?scroll=1m", json={"size": 1, "sort": [{"n": "asc"}]}).json()
        scroll_id = opened["_scroll_id"]
        assert [hit["_source"]["n"] for hit in opened["hits"]["hits"]] == [0]
        pit_id = rita.post("/logs-a/_pit?keep_alive=1m").json()["id"]
        # Another user: unknown, whatever the API, and nothing is freed or advanced.
        assert vera.post("/_search/scroll", json={"scroll_id": scroll_id, "scroll": "1m"}).status_code == 404
        assert vera.request("DELETE", "/_search/scroll", json={"scroll_id": scroll_id}).status_code == 404
        cleared_all = vera.request("DELETE", "/_search/scroll/_all")  # 200 as in Elasticsearch, none of hers
        assert (cleared_all.status_code, cleared_all.json()["num_freed"]) == (200, 0)
        assert vera.post("/_search", json={"pit": {"id": pit_id}}).status_code == 404
        assert vera.request("DELETE", "/_pit", json={"id": pit_id}).status_code == 404
        # Only a superuser sees the ids; others see their own contexts, ids hidden.
        assert scroll_id in admin.get("/_cat/search_contexts?h=id").text
        assert vera.get("/_cat/search_contexts?h=id").text.split() == []
        assert set(rita.get("/_cat/search_contexts?h=id").text.split()) == {"-"}
        # The opener goes on: the scroll is still at its second document.
        batch = rita.post("/_search/scroll", json={"scroll_id": scroll_id, "scroll": "1m"}).json()
        assert [hit["_source"]["n"] for hit in batch["hits"]["hits"]] == [1]
        assert rita.post("/_search", json={"pit": {"id": pit_id}, "size": 1}).status_code == 200
        # A superuser may use and clear anyone's.
        cleared = admin.request("DELETE", "/_search/scroll", json={"scroll_id": scroll_id})
        assert cleared.json()["num_freed"] == 1
        assert admin.request("DELETE", "/_pit", json={"id": pit_id}).json()["num_freed"] == 1


def test_users_command_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    add_user(data, "ann", "first-password", "superuser")
    add_user(data, "bob", "bob-password", "viewer", "write:logs-*")
    listed = leafsearch_cli("users", "list", "--data", str(data)).stdout.splitlines()
    assert listed == ["ann\tsuperuser", "bob\tviewer,write:logs-*"]
    users_file = data / "security" / "users.json"
    assert stat.S_IMODE(os.stat(users_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(data / "security").st_mode) == 0o700
    assert "first-password" not in users_file.read_text() and "$argon2id$" in users_file.read_text()
    bad_role = leafsearch_cli(
        "users", "add", "x", "--data", str(data), "--role", "admin", "--password-stdin", stdin="123456"
    )
    assert bad_role.returncode != 0 and "unknown role [admin]" in bad_role.stderr
    done = leafsearch_cli(
        "users", "passwd", "ann", "--data", str(data), "--password-stdin", stdin="second-password"
    )
    assert done.returncode == 0, done.stderr
    assert leafsearch_cli("users", "roles", "bob", "--data", str(data), "--role", "read:x").returncode == 0
    with running_server(data) as (url, _):
        with client(url, ("ann", "first-password")) as old:
            assert old.get("/").status_code == 401
        with client(url, ("ann", "second-password")) as ann:
            assert ann.get("/").status_code == 200
        with client(url, ("bob", "bob-password")) as bob:
            assert bob.get("/_security/_authenticate").json()["roles"] == ["read:x"]
        assert leafsearch_cli("users", "delete", "bob", "--data", str(data)).returncode == 0
        with client(url, ("bob", "bob-password")) as bob:
            assert bob.get("/").status_code == 401
        last = leafsearch_cli("users", "delete", "ann", "--data", str(data))
        assert last.returncode != 0 and "last user" in last.stderr
    log = data.with_name(data.name + ".log").read_text()
    for secret in ("first-password", "second-password", "bob-password"):
        assert secret not in log


def test_a_fresh_data_folder_is_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, _), client(url) as http:
        http.put("/private", json={"mappings": {"properties": {"n": {"type": "long"}}}})
        http.put("/private/_doc/1?refresh=true", json={"n": 1})
        http.post("/private/_flush")
    modes = {}
    for root, folders, files in os.walk(data):
        for name in folders + files:
            path = Path(root) / name
            modes[str(path.relative_to(data))] = (path.is_dir(), stat.S_IMODE(os.lstat(path).st_mode))
    modes["."] = (True, stat.S_IMODE(os.stat(data).st_mode))
    assert any(not is_dir for is_dir, _ in modes.values())
    wrong = {p: oct(mode) for p, (is_dir, mode) in modes.items() if mode != (0o700 if is_dir else 0o600)}
    assert wrong == {}


def test_security_apis_without_users_say_security_is_not_enabled(http: httpx.Client) -> None:
    for method, path in (("GET", "/_security/_authenticate"), ("GET", "/_security/api_key")):
        response = http.request(method, path)
        assert response.status_code == 400
        assert "Security must be explicitly enabled" in response.json()["error"]["reason"]


def test_msearch_checks_each_search_as_a_search(secured: tuple[str, Path]) -> None:
    """Each search of an `_msearch` is authorized on its own indices, as `_search` is: a refused
    index fails that search alone (403 in its place), wildcards are narrowed."""
    url, _ = secured
    body = b'{"index": "logs-a"}\n{}\n{"index": "secret"}\n{}\n{"index": "*"}\n{"size": 10}\n'
    headers = {"content-type": "application/x-ndjson"}
    with client(url, READER) as rita:
        allowed, refused, narrowed = rita.post("/_msearch", content=body, headers=headers).json()["responses"]
        assert allowed["status"] == 200 and allowed["hits"]["total"]["value"] == 3
        assert refused["status"] == 403 and refused["error"]["type"] == "security_exception"
        assert "on indices [secret]" in refused["error"]["reason"]
        assert {hit["_index"] for hit in narrowed["hits"]["hits"]} == {"logs-a"}
        in_path = rita.post("/secret/_msearch", content=b"{}\n{}\n", headers=headers).json()["responses"]
        assert in_path[0]["status"] == 403
        assert set(rita.get("/*/_field_caps?fields=where").json()["indices"]) == {"logs-a"}
        assert rita.get("/secret/_field_caps?fields=*").status_code == 403


def test_viewer_reads_statistics_and_closes_nothing(secured: tuple[str, Path]) -> None:
    url, _ = secured
    with client(url, VIEWER) as vera:
        assert vera.get("/secret/_stats/docs").json()["indices"]["secret"]["total"]["docs"]["count"] == 3
        assert vera.post("/_cat/shards/secret", params={"h": "index"}).status_code == 200
        refused = vera.post("/secret/_close")
        assert refused.status_code == 403
        assert error_of(refused)["reason"].startswith(
            "action [indices:admin/close] is unauthorized for user [vera] with effective roles [viewer] "
            "on indices [secret]"
        )
        assert vera.post("/secret/_open").status_code == 403
    with client(url, ADMIN) as admin:
        assert admin.get("/secret/_count").json()["count"] == 3
