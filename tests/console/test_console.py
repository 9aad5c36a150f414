"""The console at `/_ui/`: its files as the node serves them, then the page itself in a headless
Chromium against a real server: the index list, a query and its hits, paging past the window, a
walk of thousands of documents exactly once while a client writes, sliced scrolls, an export,
the node's contexts, and the login with authentication on (a read-only user sees only its
indices and is refused a write)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import running_server
from security_helpers import add_user

from tests import web
from tests.console.conftest import WAIT_SECONDS, downloads

DOCS = 3000
ADMIN = ("admin", "admin-secret")
READER = ("rita", "rita-secret")  # read:logs*


def bulk_load(url: str, index: str, docs: int, auth: tuple[str, str] | None = None) -> None:
    lines = []
    for i in range(docs):
        lines.append(orjson.dumps({"index": {"_index": index, "_id": str(i)}}))
        lines.append(orjson.dumps({"msg": f"hello {i}", "level": ("info", "warn", "error")[i % 3], "n": i}))
    response = web.post(
        f"{url}/_bulk?refresh=true",
        content=b"\n".join(lines) + b"\n",
        headers={"content-type": "application/x-ndjson"},
        auth=auth,
        timeout=120,
    )
    assert response.status_code == 200 and not response.json()["errors"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("console") / "data"
    with running_server(data) as (url, _):
        bulk_load(url, "logs", DOCS)
        yield url


# ---- the files -------------------------------------------------------------------------------


def test_the_console_is_served_with_a_policy_that_keeps_it_to_its_own_origin(server: str) -> None:
    with web.Client(base_url=server) as http:
        moved = http.get("/_ui")
        assert moved.status_code == 301 and moved.headers["location"] == "/_ui/"
        page = http.get("/_ui/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert b'<script src="console.js"' in page.content
        policy = page.headers["content-security-policy"]
        assert "connect-src 'self'" in policy and "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy
        assert page.headers["x-frame-options"] == "DENY"
        script = http.get("/_ui/console.js")
        assert script.headers["content-type"].startswith("text/javascript")
        assert b"localStorage" not in script.content and b"sessionStorage" not in script.content
        # No other host is named (the SVG namespace is a name, not a request).
        named = script.content.replace(b'"http://www.w3.org/2000/svg"', b"")
        assert b"http://" not in named and b"https://" not in named and b"//cdn" not in named
        assert http.get("/_ui/console.css").headers["content-type"].startswith("text/css")


def test_no_path_below_the_console_names_another_file(server: str) -> None:
    with web.Client(base_url=server) as http:
        for path in ("/_ui/nope.js", "/_ui/static/index.html", "/_ui/%2e%2e/node.json", "/_ui/..%2fnode"):
            response = http.get(path)
            assert response.status_code == 404, path
            assert response.json()["status"] == 404
        refused = http.post("/_ui/", content=b"{}", headers={"content-type": "application/json"})
        assert refused.status_code == 405 and refused.headers["allow"] == "GET,HEAD"


def test_a_request_from_the_nodes_own_origin_is_same_origin_and_a_foreign_one_still_refused(
    server: str,
) -> None:
    with web.Client(base_url=server) as http:
        own = http.post("/logs/_count", json={}, headers={"origin": server})
        assert own.status_code == 200 and own.json()["count"] == DOCS
        assert "access-control-allow-origin" not in own.headers
        port = int(server.rsplit(":", 1)[1])
        for origin in (
            "http://evil.example",
            f"http://127.0.0.1:{port + 1}",
            f"https://{server.split('//')[1]}",
        ):
            refused = http.post("/logs/_count", json={}, headers={"origin": origin})
            assert refused.status_code == 403, origin
            assert refused.json()["error"]["type"] == "security_exception"


# ---- in the browser --------------------------------------------------------------------------


def js(driver: Any, script: str, *args: Any) -> Any:
    return driver.execute_script(script, *args)


def text(driver: Any, selector: str) -> str:
    """The text of the first element `selector` finds, "" when none (read in one script, so a
    view that redraws meanwhile cannot leave a stale element)."""
    found = cells(driver, selector)
    return found[0] if found else ""


def cells(driver: Any, selector: str, expression: str = "r.textContent") -> list[Any]:
    """`expression` of each element `selector` finds (as `r`)."""
    return js(driver, f"return [...document.querySelectorAll(arguments[0])].map(r => {expression})", selector)


def wait_for(driver: Any, condition: Callable[[], Any]) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.05).until(lambda _: condition())


def status(driver: Any, key: str) -> str:
    return text(driver, f'#walk-status dd[data-key="{key}"]')


def set_value(driver: Any, element_id: str, value: str) -> None:
    js(driver, "document.getElementById(arguments[0]).value = arguments[1]", element_id, value)


def click(driver: Any, selector: str) -> None:
    js(driver, "document.querySelector(arguments[0]).click()", selector)


def open_view(driver: Any, view: str) -> None:
    """Click the tab of `view` once the page has shown its tabs (after its first request)."""
    wait_for(driver, lambda: cells(driver, "#tabs", "r.hidden") == [False])
    click(driver, f'#tabs button[data-view="{view}"]')
    wait_for(driver, lambda: cells(driver, f"#view-{view}", "r.hidden") == [False])


def test_the_index_list_shows_each_index_and_its_fields(server: str, browser: Any, screenshot) -> None:
    web.post(f"{server}/_aliases", json={"actions": [{"add": {"index": "logs", "alias": "all-logs"}}]})
    browser.get(f"{server}/_ui/")
    wait_for(browser, lambda: text(browser, '#indices-table tr[data-index="logs"]'))
    row = cells(browser, '#indices-table tr[data-index="logs"] td')
    assert row[1:4] == ["open", "logs", f"{DOCS:,}"]
    assert row[7] == "all-logs"
    click(browser, '#indices-table tr[data-index="logs"]')
    wait_for(browser, lambda: text(browser, "#index-fields tbody"))
    fields = cells(browser, "#index-fields tbody tr", "[...r.children].map(c => c.textContent).slice(0, 2)")
    assert ["n", "long"] in fields and ["msg", "text"] in fields and ["level.keyword", "keyword"] in fields
    screenshot(browser, "indices")
    click(browser, '[data-detail="mappings"]')
    mappings = orjson.loads(text(browser, "#index-json"))
    assert mappings["logs"]["mappings"]["properties"]["n"] == {"type": "long"}


def test_a_query_shows_its_hits_its_aggregations_and_the_servers_errors(
    server: str, browser: Any, screenshot
) -> None:
    browser.get(f"{server}/_ui/")
    open_view(browser, "query")
    set_value(browser, "query-index", "logs")
    body = {
        "query": {"range": {"n": {"lt": 30}}},
        "sort": [{"n": "asc"}],
        "size": 10,
        "aggs": {"levels": {"terms": {"field": "level.keyword"}}},
    }
    set_value(browser, "query-body", orjson.dumps(body).decode())
    click(browser, "#query-run")
    wait_for(browser, lambda: text(browser, "#query-hits tbody"))
    ids = cells(browser, "#query-hits tbody tr", "r.dataset.id")
    assert ids == [str(i) for i in range(10)]
    assert text(browser, "#query-summary").startswith("30 hits")
    bars = cells(browser, "[data-agg=levels] .row", "[r.children[0].textContent, r.children[2].textContent]")
    assert sorted(bars) == [["error", "10"], ["info", "10"], ["warn", "10"]]
    screenshot(browser, "query")

    click(browser, "#query-next")
    wait_for(browser, lambda: cells(browser, "#query-hits tbody tr", "r.dataset.id")[:1] == ["10"])
    assert orjson.loads(js(browser, "return document.getElementById('query-body').value"))["from"] == 10

    # Past the result window the server's own error is shown.
    set_value(browser, "query-body", orjson.dumps({"from": 9995, "size": 10}).decode())
    click(browser, "#query-run")
    wait_for(browser, lambda: text(browser, "#query-error"))
    assert "illegal_argument_exception" in text(browser, "#query-error")
    assert "Result window is too large" in text(browser, "#query-error")

    set_value(browser, "query-body", '{"query": {"match_all": {}},, }')
    click(browser, "#query-run")
    wait_for(browser, lambda: "not JSON" in text(browser, "#query-error"))
    assert "line 1" in text(browser, "#query-error")


def test_a_walk_reads_every_document_of_its_point_in_time_once_while_a_client_writes(
    server: str, browser: Any, screenshot
) -> None:
    browser.get(f"{server}/_ui/")
    open_view(browser, "walk")
    set_value(browser, "walk-index", "logs")
    set_value(browser, "walk-size", "250")
    click(browser, "#walk-start")
    wait_for(browser, lambda: status(browser, "pages read") == "1")
    assert status(browser, "position") == f"250 of {DOCS:,}"
    stop = threading.Event()
    written: list[str] = []

    def writer() -> None:
        with web.Client(base_url=server, timeout=60) as http:
            i = 0
            while not stop.is_set():
                doc_id = f"new-{i}"
                http.put(f"/logs/_doc/{doc_id}?refresh=true", json={"msg": "during the walk", "n": -i})
                http.delete(f"/logs/_doc/{i}?refresh=true")
                written.append(doc_id)
                first.set()
                i += 1

    first = threading.Event()  # (the walk began with its first page: a write now is during it)
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        # The rest of the walk may take less than one write: it goes on once one is in.
        assert first.wait(timeout=60), "the writer could not write"
        click(browser, "#walk-all")
        wait_for(browser, lambda: status(browser, "state") == "done")
    finally:
        stop.set()
        thread.join()
    assert written, "the writer wrote nothing during the walk"
    assert status(browser, "position") == f"{DOCS:,} of {DOCS:,}"
    assert status(browser, "distinct documents") == f"{DOCS:,}"
    assert status(browser, "documents seen twice") == "0"
    assert status(browser, "point in time") == "closed"
    screenshot(browser, "walk")
    contexts = web.get(f"{server}/_cat/search_contexts?format=json").json()
    assert contexts == []
    # Put the index back as the other tests expect it.
    web.post(
        f"{server}/logs/_delete_by_query?refresh=true",
        json={"query": {"prefix": {"_id": "new-"}}},
        timeout=60,
    )
    bulk_load(server, "logs", DOCS)


def test_sliced_scrolls_and_an_export_read_the_whole_index(server: str, browser: Any, tmp_path: Path) -> None:
    browser.get(f"{server}/_ui/")
    open_view(browser, "walk")
    set_value(browser, "walk-index", "logs")
    set_value(browser, "walk-size", "400")
    set_value(browser, "walk-slices", "3")
    click(browser, "#scroll-run")
    wait_for(browser, lambda: status(browser, "state") in ("done", "failed"))
    assert text(browser, "#walk-error") == ""
    slices = [int(status(browser, f"slice {i}").replace(",", "")) for i in range(3)]
    assert sum(slices) == DOCS and all(slices)
    assert status(browser, "distinct documents") == f"{DOCS:,}"
    assert web.get(f"{server}/_cat/search_contexts?format=json").json() == []

    click(browser, "#export-run")
    wait_for(
        browser, lambda: text(browser, "#walk-error") or cells(browser, "#export-link", "r.hidden") == [False]
    )
    assert text(browser, "#walk-error") == ""
    saved = downloads(tmp_path) / "logs.ndjson"
    wait_for(browser, saved.exists)  # Chromium writes a .crdownload first, then renames it
    lines = [orjson.loads(line) for line in saved.read_bytes().splitlines()]
    assert sorted(int(line["_id"]) for line in lines) == list(range(DOCS))
    assert all(line["_index"] == "logs" and line["_source"]["n"] == int(line["_id"]) for line in lines)


def test_the_node_view_shows_open_contexts_workers_and_breakers(
    server: str, browser: Any, screenshot
) -> None:
    pit = web.post(f"{server}/logs/_pit?keep_alive=5m").json()["id"]
    try:
        browser.get(f"{server}/_ui/")
        open_view(browser, "node")
        wait_for(browser, lambda: text(browser, "#node-contexts tbody"))
        row = cells(browser, "#node-contexts tbody tr:first-child td")
        assert row[:3] == ["pit", "logs", "-"] and row[4] == "5m"
        breakers = cells(browser, "#node-breakers tbody tr td:first-child")
        assert "request" in breakers and "parent" in breakers
        assert int(text(browser, "#node-workers dd")) >= 0
        # Searches between two polls of the node's stats show in the rate and latency charts.
        with web.Client(base_url=server) as http:

            def searched() -> bool:
                http.post("/logs/_search", json={"query": {"match": {"msg": "hello"}}})
                return cells(browser, "#chart-search-rate", "Number(r.dataset.peak || 0)") != [0]

            wait_for(browser, searched)
        assert (
            cells(browser, "#chart-search-latency polyline", "r.getAttribute('points').split(' ').length")[0]
            >= 1
        )
        screenshot(browser, "node")
    finally:
        web.request("DELETE", f"{server}/_pit", json={"id": pit})


# ---- with authentication ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("console-secured") / "data"
    with running_server(data) as (url, _):
        add_user(data, *ADMIN, "superuser")
        add_user(data, *READER, "read:logs*")
        bulk_load(url, "logs", 50, auth=ADMIN)
        bulk_load(url, "secrets", 5, auth=ADMIN)
        yield url


def log_in(driver: Any, user: str, password: str) -> None:
    wait_for(driver, lambda: not js(driver, "return document.getElementById('login').hidden"))
    set_value(driver, "login-user", user)
    set_value(driver, "login-password", password)
    click(driver, "#login-submit")


def test_with_authentication_the_console_asks_for_a_login_and_keeps_nothing(
    secured: str, browser: Any, screenshot
) -> None:
    browser.get(f"{secured}/_ui/")
    screenshot(browser, "login")
    log_in(browser, ADMIN[0], "wrong")
    wait_for(browser, lambda: text(browser, "#login-error"))
    assert "Wrong user" in text(browser, "#login-error")
    log_in(browser, *ADMIN)
    wait_for(browser, lambda: text(browser, '#indices-table tr[data-index="secrets"]'))
    assert text(browser, "#who") == "admin"
    assert js(browser, "return document.getElementById('login-password').value") == ""
    assert js(browser, "return localStorage.length + sessionStorage.length") == 0
    assert js(browser, "return document.cookie") == ""
    browser.refresh()  # credentials live in the page's memory only: a reload asks again
    wait_for(browser, lambda: not js(browser, "return document.getElementById('login').hidden"))


def test_a_read_only_user_sees_only_its_indices_and_cannot_write(
    secured: str, browser: Any, screenshot
) -> None:
    browser.get(f"{secured}/_ui/")
    log_in(browser, *READER)
    wait_for(browser, lambda: text(browser, '#indices-table tr[data-index="logs"]'))
    shown = cells(browser, "#indices-table tbody tr", "r.dataset.index")
    assert shown == ["logs"]
    open_view(browser, "requests")
    js(browser, "document.getElementById('request-method').value = 'PUT'")
    set_value(browser, "request-path", "/logs/_doc/from-the-console")
    set_value(browser, "request-body", '{"msg": "should not be written"}')
    click(browser, "#request-send")
    wait_for(browser, lambda: text(browser, "#request-status"))
    assert text(browser, "#request-status").startswith("403")
    assert "security_exception" in text(browser, "#request-response")
    screenshot(browser, "requests")
    assert web.get(f"{secured}/logs/_doc/from-the-console", auth=ADMIN).status_code == 404
    open_view(browser, "query")
    set_value(browser, "query-index", "logs")
    set_value(browser, "query-body", '{"size": 3, "sort": ["n"]}')
    click(browser, "#query-run")
    wait_for(browser, lambda: text(browser, "#query-hits tbody"))
    assert cells(browser, "#query-hits tbody tr", "r.dataset.id") == ["0", "1", "2"]


def test_an_api_key_logs_in_as_the_user_who_made_it(secured: str, browser: Any) -> None:
    made = web.post(f"{secured}/_security/api_key", json={"name": "console"}, auth=READER)
    assert made.status_code == 200
    browser.get(f"{secured}/_ui/")
    wait_for(browser, lambda: cells(browser, "#login", "r.hidden") == [False])
    set_value(browser, "login-apikey", made.json()["encoded"])
    click(browser, "#login-submit")
    wait_for(browser, lambda: text(browser, '#indices-table tr[data-index="logs"]'))
    assert cells(browser, "#indices-table tbody tr", "r.dataset.index") == ["logs"]
    wait_for(browser, lambda: text(browser, "#who"))
    assert text(browser, "#who") == READER[0]
    assert js(browser, "return document.getElementById('login-apikey').value") == ""


def test_the_console_files_need_no_credentials_but_the_api_does(secured: str) -> None:
    assert web.get(f"{secured}/_ui/").status_code == 200
    refused = web.get(f"{secured}/_cat/indices")
    assert refused.status_code == 401
