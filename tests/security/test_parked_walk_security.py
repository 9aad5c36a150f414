"""Authorization on a PIT walk's connection kept by its search worker between pages
(search/workers/parking.py): still per request. Only the exact header bytes the server verified
are served there, and only while nothing in security changed: other, missing or wrong
credentials, an API key invalidated, a password changed are the general path's 401/404."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from concurrency import wait_for
from conftest import bulk_index, running_server
from raw_http import Conn
from security_helpers import add_user, leafsearch_cli

from tests import web

ADMIN = ("admin", "admin-secret")
READER = ("rita", "rita-secret")  # read:logs-*
OTHER = ("otto", "otto-secret")  # read:logs-*


def _basic(user: tuple[str, str]) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(":".join(user).encode()).decode()}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data = tmp_path_factory.mktemp("secured-parked") / "data"
    with running_server(data, search_workers=2) as (url, _):
        add_user(data, *ADMIN, "superuser")
        add_user(data, *READER, "read:logs-*")
        add_user(data, *OTHER, "read:logs-*")
        with web.Client(base_url=url, auth=ADMIN, timeout=60) as admin:
            bulk_index(admin, "logs-walk", {f"d{i}": {"n": i} for i in range(600)})
            wait_for(lambda: _ready(admin))
        yield url, data


def _ready(admin: httpx.Client) -> bool:
    stats = admin.get("/_nodes/stats/search_workers").json()
    workers = next(iter(stats["nodes"].values()))["search_workers"]
    return workers["ready"] == workers["count"]


def _parked_pages(url: str) -> int:
    stats = web.get(f"{url}/_nodes/stats/search_workers", auth=ADMIN, timeout=60).json()
    return next(iter(stats["nodes"].values()))["search_workers"]["parked_pages"]


def _page(pit: str, after: list[Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"size": 50, "pit": {"id": pit, "keep_alive": "1m"}, "sort": [{"n": "asc"}]}
    if after is not None:
        body["search_after"] = after
    return body


def _walk(url: str, headers: dict[str, str], pages: int = 3) -> tuple[Conn, str, list[Any]]:
    """A connection whose walk (a PIT opened with `headers`) went `pages` pages: it is parked."""
    pit = web.post(f"{url}/logs-walk/_pit?keep_alive=1m", headers=headers, timeout=60).json()["id"]
    conn, after = Conn(url), None
    for _ in range(pages):
        status, body = conn.ask(Conn.request("/_search", _page(pit, after), headers))[0]
        assert status == 200, body
        after = orjson.loads(body)["hits"]["hits"][-1]["sort"]
    return conn, pit, after


def _error_type(body: bytes) -> str:
    return orjson.loads(body)["error"]["root_cause"][0]["type"]


#: Credentials other than the opener's, and the general path's answer to them on its context.
OTHER_CREDENTIALS = [
    (_basic(OTHER), 404, "search_context_missing_exception"),  # not its context: as if none
    ({}, 401, "security_exception"),
    (_basic(("rita", "not-her-password")), 401, "security_exception"),
]


@pytest.mark.parametrize(("credentials", "status", "error"), OTHER_CREDENTIALS)
def test_other_credentials_on_a_parked_connection_get_the_general_paths_answer(
    secured: tuple[str, Path], credentials: dict[str, str], status: int, error: str
) -> None:
    url, _ = secured
    conn, pit, after = _walk(url, _basic(READER))
    before = _parked_pages(url)
    answered, body = conn.ask(Conn.request("/_search", _page(pit, after), credentials))[0]
    assert (answered, _error_type(body)) == (status, error)
    assert _parked_pages(url) == before
    conn.close()


def test_an_api_key_invalidated_while_its_walk_is_parked_ends_the_walk_with_a_401(
    secured: tuple[str, Path],
) -> None:
    url, _ = secured
    key = web.post(f"{url}/_security/api_key", auth=READER, json={"name": "walker"}, timeout=60).json()
    headers = {"authorization": f"ApiKey {key['encoded']}"}
    conn, pit, after = _walk(url, headers)
    served = _parked_pages(url)
    assert served > 0
    gone = web.request(
        "DELETE", f"{url}/_security/api_key", auth=READER, json={"ids": [key["id"]]}, timeout=60
    )
    assert gone.json()["invalidated_api_keys"] == [key["id"]]
    status, body = conn.ask(Conn.request("/_search", _page(pit, after), headers))[0]
    assert (status, _error_type(body)) == (401, "security_exception")
    conn.close()


def test_a_password_changed_while_a_walk_is_parked_ends_the_walk_with_a_401(
    secured: tuple[str, Path],
) -> None:
    url, data = secured
    user = ("paula", "paula-secret")
    add_user(data, *user, "read:logs-*")
    conn, pit, after = _walk(url, _basic(user))
    done = leafsearch_cli(
        "users", "passwd", "paula", "--data", str(data), "--password-stdin", stdin="paula-other"
    )
    assert done.returncode == 0, done.stderr
    status, body = conn.ask(Conn.request("/_search", _page(pit, after), _basic(user)))[0]
    assert (status, _error_type(body)) == (401, "security_exception")
    conn.close()


def test_an_api_key_that_expires_while_its_walk_is_parked_ends_the_walk_with_a_401(
    secured: tuple[str, Path],
) -> None:
    url, _ = secured
    for seconds in (4, 16, 64):  # a key that expired before its walk was parked: a longer one
        made = web.post(
            f"{url}/_security/api_key",
            auth=READER,
            json={"name": "brief", "expiration": f"{seconds}s"},
            timeout=60,
        ).json()
        headers = {"authorization": f"ApiKey {made['encoded']}"}
        try:
            conn, pit, after = _walk(url, headers)
            break
        except AssertionError:
            if time.time() * 1000 < made["expiration"]:
                raise
    else:
        pytest.fail("every key expired before its walk of 3 pages was parked")
    while time.time() * 1000 < made["expiration"]:  # the key's expiry is what is tested
        threading.Event().wait(0.1)
    status, body = conn.ask(Conn.request("/_search", _page(pit, after), headers))[0]
    assert (status, _error_type(body)) == (401, "security_exception")
    conn.close()


def _scroll(url: str, headers: dict[str, str]) -> tuple[Conn, str]:
    """A connection whose scroll (opened with `headers`) went two batches: it is kept."""
    conn = Conn(url)
    opening = Conn.request("/logs-walk/_search?scroll=1m", {"size": 50, "sort": ["_doc"]}, headers)
    status, body = conn.ask(opening)[0]
    assert status == 200, body
    scroll_id = orjson.loads(body)["_scroll_id"]
    for _ in range(2):
        status, body = conn.ask(_next_batch(scroll_id, headers))[0]
        assert status == 200, body
        scroll_id = orjson.loads(body)["_scroll_id"]
    return conn, scroll_id


def _next_batch(scroll_id: str, headers: dict[str, str]) -> bytes:
    return Conn.request("/_search/scroll", {"scroll": "1m", "scroll_id": scroll_id}, headers)


@pytest.mark.parametrize(("credentials", "status", "error"), OTHER_CREDENTIALS)
def test_other_credentials_on_a_kept_scroll_connection_get_the_general_paths_answer(
    secured: tuple[str, Path], credentials: dict[str, str], status: int, error: str
) -> None:
    url, _ = secured
    conn, scroll_id = _scroll(url, _basic(READER))
    before = _parked_pages(url)
    answered, body = conn.ask(_next_batch(scroll_id, credentials))[0]
    assert (answered, _error_type(body)) == (status, error)
    assert _parked_pages(url) == before
    answered, body = conn.ask(_next_batch(scroll_id, _basic(READER)))[0]  # its owner scrolls on
    assert answered == 200, body
    conn.close()


def test_an_api_key_invalidated_while_its_scroll_is_kept_ends_the_scroll_with_a_401(
    secured: tuple[str, Path],
) -> None:
    url, _ = secured
    key = web.post(f"{url}/_security/api_key", auth=READER, json={"name": "scroller"}, timeout=60).json()
    headers = {"authorization": f"ApiKey {key['encoded']}"}
    before = _parked_pages(url)
    conn, scroll_id = _scroll(url, headers)
    assert _parked_pages(url) > before
    gone = web.request(
        "DELETE", f"{url}/_security/api_key", auth=READER, json={"ids": [key["id"]]}, timeout=60
    )
    assert gone.json()["invalidated_api_keys"] == [key["id"]]
    status, body = conn.ask(_next_batch(scroll_id, headers))[0]
    assert (status, _error_type(body)) == (401, "security_exception")
    conn.close()
