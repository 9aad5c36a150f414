"""The pytest plugin installed with leafsearch (entry point `pytest11`): test an application that
uses Elasticsearch against a real leafsearch server, without Docker or a JVM.

Fixtures:
- `leafsearch_server` (session): a `leafsearch.testing.Server` on a free port with a temporary
  data folder, started on first use, stopped at the end of the session;
- `leafsearch_url` (session): its base URL;
- `leafsearch_client` (session): an `elasticsearch.Elasticsearch` client of it;
- `leafsearch_index` (per test): a factory making a fresh index named after the test,
  `leafsearch_index(mappings=..., settings=...)`, deleted when the test ends.

This module imports nothing from `leafsearch` until a fixture is used, so loading the plugin
costs a pytest run nothing (and never decides which `leafsearch` a project's own tests import).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def leafsearch_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A leafsearch server process for the whole session (`leafsearch.testing.Server`)."""
    from leafsearch.testing import Server

    with Server(tmp_path_factory.mktemp("leafsearch") / "data") as server:
        yield server


@pytest.fixture(scope="session")
def leafsearch_url(leafsearch_server: Any) -> str:
    """The session server's base URL, e.g. `http://127.0.0.1:38211`."""
    return leafsearch_server.url


@pytest.fixture(scope="session")
def leafsearch_client(leafsearch_server: Any) -> Iterator[Any]:
    """The official `elasticsearch` client of the session server."""
    try:
        client = leafsearch_server.client()
    except ImportError:
        pytest.fail("leafsearch_client needs the official client: pip install 'elasticsearch>=8,<9'")
    yield client
    client.close()


@pytest.fixture
def leafsearch_index(leafsearch_server: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """Factory of fresh indices for one test: `name = leafsearch_index(mappings=None, settings=None)`
    creates an index whose name is unique to the test and deletes it afterwards."""
    import httpx

    stem = re.sub(r"[^a-z0-9_-]+", "-", request.node.name.lower()).strip("-_")[:60] or "t"
    created: list[str] = []

    def create(mappings: dict[str, Any] | None = None, settings: dict[str, Any] | None = None) -> str:
        name = f"{stem}-{uuid.uuid4().hex[:8]}"
        body = {key: value for key, value in (("mappings", mappings), ("settings", settings)) if value}
        response = httpx.put(f"{leafsearch_server.url}/{name}", json=body, timeout=60)
        if response.status_code != 200:
            raise AssertionError(f"creating index [{name}] failed: {response.text}")
        created.append(name)
        return name

    yield create
    for name in created:
        httpx.delete(f"{leafsearch_server.url}/{name}", timeout=60)
