"""Helpers of the Node.js tests: the pinned npm packages, and running a script or elasticdump.

The scripts in tests/clients/js/ print one JSON object and exit 0 (see tests/clients/js/common.mjs); the npm
packages are pinned in tests/clients/js/package-lock.json and installed with `npm ci` on first use.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

JS = Path(__file__).resolve().parent / "js"
ELASTICDUMP = JS / "node_modules" / "elasticdump" / "bin" / "elasticdump"

#: The mark of every Node.js test module: skipped where Node.js or npm is missing.
NEEDS_NODE = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="Node.js and npm are needed"
)


def install_node_modules() -> Path:
    """`npm ci` when tests/clients/js/node_modules is missing or older than the lock file; one
    process at a time (pytest-xdist workers, or two runs of the suite on one checkout: `npm ci`
    first deletes node_modules), under an exclusive `flock` of the lock file."""
    installed = JS / "node_modules" / ".package-lock.json"  # written by npm at the end of an install
    lock = JS / "package-lock.json"
    with lock.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
        if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=JS,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return JS / "node_modules"


def run_script(script: str, *args: str) -> dict[str, Any]:
    """Run tests/clients/js/<script> and return the JSON object it printed."""
    done = subprocess.run(
        ["node", script, *args], cwd=JS, capture_output=True, text=True, timeout=180, check=False
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(lines[-1])


def run_elasticdump(*args: str) -> tuple[int, str]:
    """Run the elasticdump CLI: its exit status and its log (stdout, then stderr)."""
    done = subprocess.run(
        ["node", str(ELASTICDUMP), *args], cwd=JS, capture_output=True, text=True, timeout=180, check=False
    )
    return done.returncode, done.stdout + done.stderr


def elasticdump(*args: str) -> str:
    """Run the elasticdump CLI; its log, after checking it completed."""
    status, log = run_elasticdump(*args)
    complete = status == 0 and "dump complete" in log and "Error Emitted" not in log
    assert complete, f"elasticdump {' '.join(args)}:\n{log}"
    return log
