"""Client 9, its DSL (`elasticsearch.dsl`) and eland (pandas on Elasticsearch) end to end against a
real server. They cannot share the project's environment (client 8), so they run in their own
virtual environment, tests/clients/client9/.venv, made on first use from its requirements.txt."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

#: The tools are installed from the package index on first use (see README, "Tests and benchmarks").
pytestmark = pytest.mark.external

HERE = Path(__file__).resolve().parent / "client9"
VENV = HERE / ".venv"


def _python() -> Path:
    """The tools' interpreter, installed when missing or older than the requirements; one
    process at a time (two runs of the suite on one checkout), under an exclusive `flock` of
    the requirements file."""
    python = VENV / "bin" / "python"
    marker = VENV / ".installed"
    requirements = HERE / "requirements.txt"
    with requirements.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
        if not marker.exists() or marker.stat().st_mtime < requirements.stat().st_mtime:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True, timeout=300)
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert done.returncode == 0, (
                f"installing the client 9 tools failed:\n{done.stdout}\n{done.stderr}"
            )
            marker.touch()
    return python


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
