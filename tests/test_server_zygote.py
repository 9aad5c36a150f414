"""The tests' servers forked from a zygote (tests/server_zygote.py) are the servers a new
interpreter would have been, to the test: processes of their own (their pid signalled, kill -9, exit
codes), their output where it went, the caller's environment, folder, umask and niceness; what
cannot follow a fork starts a new interpreter; starts from several threads at once each get theirs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from leafsearch.testing import child_env
from tests import web
from tests.conftest import REPO, free_port, running_server, serve_command, server_env, start_server
from tests.ray_cluster import LOOPBACK_ENV, import_ray
from tests.search.test_worker_zygote import _parent, _ready
from tests.server_zygote import SERVER_ZYGOTE, ForkedPopen, ServerZygote


def _zygote_pid() -> int:
    process = SERVER_ZYGOTE._process
    assert process is not None, "no server was forked yet"
    return process.pid


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Threads:")).split()[1])


def test_forked_servers_are_processes_of_their_own_started_from_threads_at_once(tmp_path: Path) -> None:
    def serve(n: int) -> tuple[int, int, int, str]:
        with running_server(tmp_path / f"data{n}") as (url, process):
            assert isinstance(process, ForkedPopen)
            # Each its own node, answering on its own port.
            assert web.put(f"{url}/only-{n}").status_code == 200
            names = sorted(web.get(f"{url}/_cat/indices?h=index").text.split())
            return process.pid, _parent(process.pid), process.returncode, " ".join(names)

    with ThreadPoolExecutor(4) as pool:
        started = list(pool.map(serve, range(4)))
    zygote = _zygote_pid()
    assert len({pid for pid, *_ in started}) == 4
    assert all(parent == zygote and pid != zygote for pid, parent, _, _ in started)
    assert [names for *_, names in started] == [f"only-{n}" for n in range(4)]
    assert _threads(zygote) == 1  # as it was when it forked each
    for n in range(4):  # SIGTERM: a clean stop, logged where a new interpreter's log went
        log = (tmp_path / f"data{n}.log").read_text()
        assert "leafsearch listening on" in log and "leafsearch stopped" in log
    with running_server(tmp_path / "data0") as (_, process):
        pass
    assert process.returncode == 0


def test_kill_9_and_the_exit_codes_are_the_servers(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", search_workers=1) as (url, process):
        with web.Client(base_url=url, timeout=60) as http:
            (worker,) = _ready(http, 1)["workers"]
        # The product's own zygote is the forked server's child, its workers that zygote's.
        assert _parent(_parent(worker["pid"])) == process.pid
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        forked = start_server(tmp_path / "forked", port)
        fresh = start_server(tmp_path / "fresh", port, fresh_interpreter=True)
        outputs = [forked.communicate(timeout=60)[0], fresh.communicate(timeout=60)[0]]
    assert isinstance(forked, ForkedPopen) and not isinstance(fresh, ForkedPopen)
    assert forked.returncode == fresh.returncode == 1
    assert outputs[0] == outputs[1] and f"cannot listen on 127.0.0.1:{port}" in outputs[0]


def test_the_callers_environment_folder_umask_and_niceness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEAFSEARCH_HTTP_MAX_CONTENT_LENGTH", "1kb")  # read by the command line
    found: dict[str, object] = {}

    def start() -> None:  # in a thread of its own: Linux keeps a niceness per thread
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, min(os.getpriority(os.PRIO_PROCESS, me) + 1, 19))
        found["niceness"] = os.getpriority(os.PRIO_PROCESS, me)
        access = Path("access.log")  # relative: in the folder asked for
        command = serve_command(
            Path("data"), free_port(), "--access-log", str(access), "--search-workers", "0"
        )
        process = SERVER_ZYGOTE.popen(
            command,
            cwd=tmp_path,
            env=server_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        found["process"] = process
        found["first line"] = process.stdout.readline()
        found["server niceness"] = os.getpriority(os.PRIO_PROCESS, process.pid)

    umask = os.umask(0o027)
    try:
        thread = threading.Thread(target=start)
        thread.start()
        thread.join()
    finally:
        os.umask(umask)
    process = found["process"]
    assert isinstance(process, ForkedPopen)
    try:
        url = str(found["first line"]).split("listening on ", 1)[1].split()[0]
        assert web.put(f"{url}/small", content=b"{}", headers={"content-type": "application/json"}).is_success
        too_large = web.post(f"{url}/small/_doc", json={"text": "x" * 2048})
        assert too_large.status_code == 413
        assert found["server niceness"] == found["niceness"]
        assert (tmp_path / "data").is_dir()
        assert (tmp_path / "access.log").stat().st_mode & 0o777 == 0o640  # opened before it sets its own
    finally:
        process.terminate()
        output = process.communicate(timeout=60)[0]
    assert process.returncode == 0, output


@pytest.mark.parametrize(
    "change",
    ["preexec_fn", "interpreter flag", "PYTHONHASHSEED", "start_new_session"],
)
def test_what_cannot_follow_a_fork_gets_a_new_interpreter(tmp_path: Path, change: str) -> None:
    command = serve_command(tmp_path / "data", free_port(), "--search-workers", "0")
    options: dict[str, object] = {"env": server_env(), "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
    if change == "preexec_fn":
        options["preexec_fn"] = os.getpid
    elif change == "interpreter flag":
        command.insert(1, "-X")
        command.insert(2, "dev")
    elif change == "PYTHONHASHSEED":
        options["env"] = {**server_env(), "PYTHONHASHSEED": "7"}
    else:
        options["start_new_session"] = True
    process = SERVER_ZYGOTE.popen(command, text=True, **options)
    try:
        assert type(process) is subprocess.Popen
        assert _parent(process.pid) == os.getpid()
        assert "leafsearch listening on" in process.stdout.readline()
    finally:
        process.terminate()
        process.communicate(timeout=60)
    assert process.returncode == 0
    assert sys.executable in process.args


def test_a_coordinator_forks_from_a_zygote_that_imported_ray_once_under_its_variables(tmp_path: Path) -> None:
    """The zygote imports Ray before its first `serve --ray` fork (each coordinator's start then
    skips that import), under the Ray variables that start was given; a coordinator asked for
    with other Ray variables gets a new interpreter. Each refuses an address where no cluster
    runs as a new interpreter does."""
    import_ray()  # (skips without Ray; fails under LEAFSEARCH_REQUIRE_RAY=1)
    zygote = ServerZygote(child_env(), REPO)  # its own: which Ray variables it imported with is this test's
    env = {**server_env(), **LOOPBACK_ENV}
    env.pop("RAY_ADDRESS", None)
    address = f"127.0.0.1:{free_port()}"  # no cluster there: each start refuses it at once

    def coordinator(n: int, env: dict[str, str]) -> subprocess.CompletedProcess:
        command = serve_command(tmp_path / f"data{n}", free_port(), "--ray", address)
        return zygote.run(command, env=env, capture_output=True, text=True, timeout=60)

    try:
        assert (
            zygote.run(
                [sys.executable, "-m", "leafsearch", "--help"], env=env, capture_output=True
            ).returncode
            == 0
        )
        pid = zygote._process.pid
        threads = _threads(pid)
        assert not _maps_ray(pid)
        forked = [coordinator(n, env) for n in range(2)]
        assert _maps_ray(pid) and _threads(pid) == threads  # Ray imported, no thread started
        other = {**env, "RAY_BACKEND_LOG_LEVEL": "debug"}
        with zygote.popen(
            serve_command(tmp_path / "other", free_port(), "--ray", address), env=other
        ) as process:
            assert type(process) is subprocess.Popen and _parent(process.pid) == os.getpid()
        fresh = subprocess.run(
            serve_command(tmp_path / "fresh", free_port(), "--ray", address),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        zygote.close()
    assert fresh.returncode == 1 and f"no Ray cluster is running at {address}" in fresh.stderr
    for done in forked:
        assert (done.returncode, done.stderr.replace(str(tmp_path), "")) == (
            1,
            fresh.stderr.replace(str(tmp_path), ""),
        )


def _maps_ray(pid: int) -> bool:
    """Whether a process has Ray's native library (`_raylet`) loaded."""
    return "_raylet" in Path(f"/proc/{pid}/maps").read_text()
