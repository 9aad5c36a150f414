"""Client 9, its DSL (`elasticsearch.dsl`) and eland (pandas on Elasticsearch) end to end against a
real server. They cannot share the project's environment (client 8), so they run in their own
virtual environment, made on first use from its requirements.txt in the user's cache of test tools
(tests/clients/installed_tools.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from installed_tools import installed

#: The tools are installed from the package index on first use (see README, "Tests and benchmarks").
pytestmark = pytest.mark.external

HERE = Path(__file__).resolve().parent / "client9"


def _python() -> Path:
    """The tools' interpreter: a venv of the requirements for this Python, made in the user's cache
    of test tools when it is not there yet (tests/clients/installed_tools.py)."""
    requirements = HERE / "requirements.txt"
    inputs = [requirements.read_bytes(), sys.version.encode(), sys.base_prefix.encode()]
    return installed("client9-venv", inputs, partial(_make_venv, requirements)) / "bin" / "python"


def _make_venv(requirements: Path, folder: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True, timeout=300)
    done = subprocess.run(
        [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"installing the client 9 tools failed:\n{done.stdout}\n{done.stderr}"


def _run_tools(server: str, index: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(_python()), str(HERE / "tools.py"), server, index], capture_output=True, text=True, timeout=300
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"tools.py failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(lines[-1])


def test_client_9_its_dsl_and_eland_read_and_write_an_index(server: str, index_name: str) -> None:
    got = _run_tools(server, index_name)
    assert got["bulk"] == 100 and got["count"] == 100
    assert got["cat_count"] == "100" and got["stats_docs"] == 100
    assert got["analyze"] == ["hello", "world"]
    assert got["alias"] == [index_name]
    assert got["msearch"][0] == 100
    assert {"n", "s", "t"} <= set(got["field_caps"])
    assert got["dsl_search"] == [1, 3, 5, 7, 9]
    assert got["dsl_scan"] == 50
    assert got["eland_shape"] == [100, 3] and got["eland_sum"] == sum(range(100))
    assert got["eland_rows"] == [0, 1, 2]
    assert got["dsl_delete"] == 10 and got["after_delete"] == 90
    assert got["reindex"] == 90 and got["update_by_query"] == 45
    assert got["tasks"] and f"{index_name}-alias" in got["cat_aliases"]
    assert got["close"] and got["open"] and got["nodes_stats"]
