"""elasticdump, unmodified, copying an index with its aliases from one leafsearch node to another."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import running_server
from js_helpers import NEEDS_NODE, elasticdump, install_node_modules

from tests import web

pytestmark = [NEEDS_NODE, pytest.mark.external]
NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def node_modules() -> Path:
    return install_node_modules()


def test_elasticdump_copies_an_index_with_its_aliases(node_modules: Path, tmp_path: Path) -> None:
    """Settings, mapping, data and aliases (`--type=alias`: `GET <index>/_alias/*`, then
    `POST /_aliases`) copied server to server; the copy's filtered alias filters as the source's."""
    aliases = {
        "books": {"is_write_index": True},
        "old-books": {"filter": {"range": {"year": {"lt": 1900}}}, "routing": "r"},
    }
    with (
        running_server(tmp_path / "source") as (source, _),
        running_server(tmp_path / "target") as (target, _),
        web.Client(base_url=source, timeout=60) as src,
        web.Client(base_url=target, timeout=60) as dst,
    ):
        assert src.put("/library", json={"aliases": aliases}).status_code == 200
        lines = "".join(
            f'{{"index":{{"_id":"{n}"}}}}\n{{"year":{1800 + 50 * n}}}\n' for n in range(5)
        )  # 1800 .. 2000
        assert not src.post("/books/_bulk?refresh=true", content=lines, headers=NDJSON).json()["errors"]
        for kind in ("settings", "mapping", "data", "alias"):
            elasticdump(f"--input={source}/library", f"--output={target}/library", f"--type={kind}")
        dst.post("/library/_refresh")
        assert dst.get("/library/_alias").json() == src.get("/library/_alias").json()
        assert dst.get("/old-books/_count").json()["count"] == 2
        assert dst.put("/books/_doc/new", json={"year": 2024}).json()["_index"] == "library"
