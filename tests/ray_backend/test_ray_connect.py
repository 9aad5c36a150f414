"""`serve --ray auto|ADDRESS` where no Ray cluster runs says what to run and exits 1, without a
traceback (and without waiting for a cluster that is not there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, free_port, serve_command, server_env

ADVICE = "Start one with `ray start --head` (then `leafsearch serve --ray auto`), or run a one-node cluster"

#: `serve --ray auto` with Ray's discovery finding no cluster: neither `RAY_ADDRESS`, nor the file
#: `ray start` records its cluster in, nor a raylet process. Other Ray clusters may run on this
#: machine during the suite, so the subprocess is told that its discovery finds none.
NO_CLUSTER_HERE = (
    "import sys, ray._private.services as services\n"
    "services._find_address_from_flag = lambda flag: set()\n"
    "services.find_bootstrap_address = lambda temp_dir: None\n"
    "from leafsearch.cli import main\n"
    "sys.argv = ['leafsearch', *sys.argv[1:]]\n"
    "main()\n"
)


def _serve(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def _refused(done: subprocess.CompletedProcess[str], where: str, data: Path) -> None:
    assert done.returncode == 1, done.stderr
    assert f"leafsearch: no Ray cluster is running {where}. {ADVICE}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (data / "ray-shards").exists()


def test_serve_ray_auto_with_no_cluster_says_what_to_run(tmp_path: Path) -> None:
    env = server_env()
    env.pop("RAY_ADDRESS", None)
    data = tmp_path / "data"
    argv = serve_command(data, free_port(), "--ray", "auto")
    done = _serve([sys.executable, "-c", NO_CLUSTER_HERE, *argv[3:]], env)
    _refused(done, "on this machine", data)


def test_serve_ray_auto_where_ray_address_names_no_cluster_says_what_to_run(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    env = {**server_env(), "RAY_ADDRESS": f"127.0.0.1:{port}"}
    data = tmp_path / "data"
    done = _serve(serve_command(data, free_port(), "--ray", "auto"), env)
    assert done.returncode == 1, done.stderr
    assert "leafsearch: no Ray cluster is running at " in done.stderr
    assert f":{port}. {ADVICE}" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_ray_address_with_no_cluster_there_says_what_to_run(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    env = server_env()
    env.pop("RAY_ADDRESS", None)
    data = tmp_path / "data"
    _refused(_serve(serve_command(data, free_port(), "--ray", address), env), f"at {address}", data)
    # the folder is not left locked: a node without Ray starts on it
    plain = f"from leafsearch import Node; Node({str(data)!r}, background=False).close()"
    done = _serve([sys.executable, "-c", plain], env)
    assert done.returncode == 0, done.stderr
