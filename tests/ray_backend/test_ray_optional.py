"""Ray is optional: the default install and the embedded node never import it, and asking for
the Ray backend without it says how to install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from leafsearch import Node
from leafsearch.node.node import RayUnavailable


def test_the_server_and_the_embedded_node_never_import_ray(tmp_path: Path) -> None:
    script = (
        "import sys, leafsearch, leafsearch.cli, leafsearch.rest.app\n"
        "from leafsearch import Client\n"
        f"client = Client({str(tmp_path / 'data')!r})\n"
        "client.index(index='i', id='1', document={'a': 1}, refresh='true')\n"
        "assert client.count(index='i')['count'] == 1\n"
        "client.close()\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_ray_backend_without_ray_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.startswith("leafsearch.ray_backend")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with pytest.raises(RayUnavailable, match=r'pip install "leafsearch\[ray\]"'):
        Node(tmp_path, ray="auto", background=False)
    with Node(tmp_path, background=False) as node:  # the folder was not left locked
        assert node.indices == {}
