"""The pytest plugin (`pytest_leafsearch`) as an application's test suite uses it, and
`leafsearch.testing.Server` for other runners."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO, server_env

from leafsearch.testing import Server
from tests import web

SAMPLE_TESTS = """
import httpx


def test_search_through_the_official_client(leafsearch_client, leafsearch_index):
    name = leafsearch_index(mappings={"properties": {"title": {"type": "text"}}})
    leafsearch_client.index(index=name, document={"title": "hello world"}, refresh=True)
    hits = leafsearch_client.search(index=name, query={"match": {"title": "hello"}})["hits"]["hits"]
    assert [hit["_source"]["title"] for hit in hits] == ["hello world"]
    CREATED.append(name)


def test_indices_are_fresh_and_removed_after_each_test(leafsearch_client, leafsearch_index):
    assert not leafsearch_client.indices.exists(index=CREATED[0])
    name = leafsearch_index()
    assert name != CREATED[0]
    assert leafsearch_client.count(index=name)["count"] == 0


def test_url_and_server(leafsearch_url, leafsearch_server):
    assert httpx.get(leafsearch_url).json()["version"]["number"].startswith("8.")
    assert leafsearch_server.url == leafsearch_url
    assert leafsearch_server.data.is_dir()


CREATED = []
"""


def test_sample_project_uses_the_plugin_fixtures(tmp_path: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    (project / "test_app.py").write_text(SAMPLE_TESTS)
    # The plugin is named explicitly and entry points are off, so this runs the plugin of this
    # checkout whatever leafsearch is installed (the installed entry point loads the same module).
    env = server_env() | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "pytest_leafsearch", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout


def test_the_entry_point_names_the_plugin_module() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert '[project.entry-points.pytest11]\nleafsearch = "pytest_leafsearch"' in text


def test_server_context_manager_for_other_runners() -> None:
    with Server() as server:
        assert web.get(server.url, timeout=30).json()["tagline"] == "You Know, for Search"
        data = server.data
        assert data.is_dir()
        process = server.process
    assert process.returncode == 0  # SIGTERM: a clean shutdown
    assert not data.exists()  # the temporary data folder is removed


def test_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    with Server(tmp_path / "data"):
        second = Server(tmp_path / "data", log=tmp_path / "second.log")
        try:
            second.start()
        except RuntimeError as exc:
            assert "in use by another leafsearch node" in str(exc)
        else:
            second.stop()
            raise AssertionError("a second server on the same folder started")
