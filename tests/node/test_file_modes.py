"""What an in-process node writes is its owner's alone: every file 0600 and every folder 0700, as
the README promises, whatever the process's umask (a library cannot rely on `serve`'s umask 077)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from leafsearch import Node
from leafsearch.client import Client


def modes_other_than_private(root: Path) -> list[str]:
    wrong = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            mode = stat.S_IMODE(path.stat().st_mode)
            if mode != (0o700 if path.is_dir() else 0o600):
                wrong.append(f"{oct(mode)} {path.relative_to(root)}")
    return wrong


@pytest.fixture
def open_umask() -> object:
    previous = os.umask(0o022)  # the usual umask, which made these files 0644 and folders 0755
    yield
    os.umask(previous)


def test_every_file_and_folder_of_a_node_is_private(tmp_path: Path, open_umask: object) -> None:
    data = tmp_path / "data"
    data.mkdir()  # made by the user with the open umask: the node closes it
    node = Node(data)
    try:
        client = Client(node=node)
        client.indices.create(index="modes", settings={"number_of_shards": 2})
        for i in range(50):
            client.index(index="modes", id=str(i), document={"n": i, "text": "hello world"})
        client.indices.refresh(index="modes")
        client.perform_request("POST", "/modes/_flush")
        client.delete(index="modes", id="3")
        client.indices.refresh(index="modes")
        client.perform_request("PUT", "/modes/_alias/modes-alias")
        client.perform_request("PUT", "/_cluster/settings", body={"persistent": {"search.max_buckets": 1000}})
        template = {"index_patterns": ["logs-*"], "data_stream": {}}
        client.perform_request("PUT", "/_index_template/logs", body=template)
        client.perform_request("PUT", "/_data_stream/logs-app")
        client.perform_request("POST", "/logs-app/_doc", body={"@timestamp": "2026-11-29T00:00:00Z", "n": 1})
    finally:
        node.close()
    assert {p.name for p in data.iterdir()} >= {"indices", "aliases.json", "cluster_settings.json"}
    assert modes_other_than_private(data) == []
