"""Helpers of the security tests: users made through the `leafsearch users` command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO, server_env

from tests.server_zygote import SERVER_ZYGOTE


def leafsearch_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return SERVER_ZYGOTE.run(
        [sys.executable, "-m", "leafsearch", *args],
        cwd=REPO,
        env=server_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def add_user(data: Path, name: str, password: str, *roles: str) -> None:
    role_args = [arg for role in roles for arg in ("--role", role)]
    done = leafsearch_cli(
        "users", "add", name, "--data", str(data), *role_args, "--password-stdin", stdin=password
    )
    assert done.returncode == 0, done.stderr
