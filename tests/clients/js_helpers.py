"""Helpers of the Node.js tests: the pinned npm packages, and running a script or elasticdump.

The scripts in tests/clients/js/ print one JSON object and exit 0 (see tests/clients/js/common.mjs); the npm
packages are pinned in tests/clients/js/package-lock.json and installed with `npm ci` on first use
(once per user: tests/clients/installed_tools.py).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from installed_tools import installed, link

JS = Path(__file__).resolve().parent / "js"
ELASTICDUMP = JS / "node_modules" / "elasticdump" / "bin" / "elasticdump"

#: The mark of every Node.js test module: skipped where Node.js or npm is missing.
NEEDS_NODE = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="Node.js and npm are needed"
)


def install_node_modules() -> Path:
    """tests/clients/js/node_modules: a link to the packages of the lock file, installed with `npm ci`
    in the user's cache of test tools when they are not there yet (tests/clients/installed_tools.py);
    one process of the checkout at a time, under an exclusive `flock` of the lock file."""
    files = [JS / "package.json", JS / "package-lock.json"]
    with files[1].open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
        folder = installed("npm", [path.read_bytes() for path in files], partial(_npm_ci, files))
        link(JS / "node_modules", folder / "node_modules")
    return JS / "node_modules"


def _npm_ci(files: list[Path], folder: Path) -> None:
    for path in files:
        shutil.copyfile(path, folder / path.name)
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"


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
