"""tests/web.py: the tests' httpx clients and one-request calls share the process's TLS context
instead of reading the CA bundle again for each. (That a call's own `verify` is kept, and that the
shared context refuses a certificate it does not trust, tests/rest/test_tls_and_exposure.py shows
through them against a TLS server.)"""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import web


@pytest.fixture
def bundle_reads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every CA bundle read into a TLS context from here on (`load_verify_locations`)."""
    reads: list[Any] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        reads.append(args or kwargs)
        load(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return reads


def test_clients_and_requests_read_no_bundle_of_their_own(server: str, bundle_reads: list[Any]) -> None:
    context = web.tls_context()
    bundle_reads.clear()
    for _ in range(3):
        with web.Client(base_url=server, timeout=60) as client:
            assert client.get("/").status_code == 200
        assert web.get(server, timeout=60).status_code == 200
        assert web.request("GET", server, timeout=60).status_code == 200
    assert bundle_reads == []
    assert web.tls_context() is context
    # (what each of them cost before: httpx reads the bundle for every client it builds)
    httpx.Client(base_url=server).close()
    assert len(bundle_reads) == 1


#: httpx's calls that build a client.
BUILDS = re.compile(r"\bhttpx\.(Client|AsyncClient|get|post|put|delete|head|patch|options|request|stream)\(")
#: The sample application's tests in test_pytest_plugin.py: text, run in a project of its own.
SAMPLE_LINE = ("test_pytest_plugin.py", "    assert httpx.get(leafsearch_url)")


def test_the_tests_build_httpx_clients_only_here() -> None:
    """A test module calling httpx's own client or request functions would read the bundle again
    at each call."""
    folder = Path(__file__).parent
    found = [
        f"{path.relative_to(folder)}:{number}"
        for path in sorted(folder.rglob("*.py"))
        if path.name not in ("web.py", "test_web.py")
        # (installed packages: a client's node_modules, a checkout's old virtualenv)
        and not any(part == "node_modules" or part.startswith(".") for part in path.relative_to(folder).parts)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BUILDS.search(line) and (path.name, line[: len(SAMPLE_LINE[1])]) != SAMPLE_LINE
    ]
    assert found == []
