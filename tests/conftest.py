"""Shared fixtures: one real server process for the session, and clients on it.

Tests share the server, so each test works in indices named after itself (`index_name`,
`new_index`), never in a fixed name another test could also use.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from elasticsearch import Elasticsearch

from leafsearch import Node
from leafsearch.rest.app import create_app
from leafsearch.rest.connections import counting_protocol
from leafsearch.testing import Server
from tests import web
from tests.bytecode import compile_packages, find_test_modules, rewrite_share
from tests.ray_cluster import LocalCluster, SharedCluster
from tests.scheduling import (
    MODULE_SECONDS,
    RAY_TESTS,
    REST_NICENESS,
    module_seconds,
    ordered,
    ray_groups,
    work_unit,
)
from tests.server_zygote import SERVER_ZYGOTE

REPO = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT = 30.0


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The `error` object of an Elasticsearch error body, after checking the body's shape."""
    body = response.json()
    assert body["status"] == response.status_code
    assert body["error"]["root_cause"][0]["type"] == body["error"]["type"]
    return body["error"]


def bulk_index(http: httpx.Client, index: str, docs: dict[str, dict[str, Any]]) -> None:
    """Index `docs` (id -> source) into `index` with one refreshed `_bulk` request."""
    lines = []
    for doc_id, source in docs.items():
        lines += [orjson.dumps({"index": {"_index": index, "_id": doc_id}}), orjson.dumps(source)]
    response = http.post(
        "/_bulk?refresh=true",
        content=b"\n".join(lines) + b"\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and not response.json()["errors"], response.text


def search_ok(http: httpx.Client, target: str, body: dict[str, Any]) -> dict[str, Any]:
    """`POST /<target>/_search`, which must answer 200."""
    response = http.post(f"/{target}/_search", json=body)
    assert response.status_code == 200, response.text
    return response.json()


class FakeClock:
    """A monotonic clock that moves only when the test advances it: a Node built with
    `clock=FakeClock()` lets a test expire reader contexts without sleeping."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_command(data: Path, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "leafsearch", "serve", "--port", str(port), "--data", str(data), *extra]


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def wait_until_up(process: subprocess.Popen, url: str, log: Path, timeout: float = STARTUP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"leafsearch exited with {process.returncode}:\n{log.read_text()}")
        try:
            # 401: a node whose data folder holds users is up, and asks who is calling.
            if web.get(url, timeout=1.0, verify=False).status_code in (200, 401):
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError(f"leafsearch did not answer on {url} within {timeout}s")


def start_server(data: Path, port: int, *extra: str, fresh_interpreter: bool = False) -> subprocess.Popen:
    """`leafsearch serve` started and left to the caller: its output (text) on `stdout`. A fork of
    `SERVER_ZYGOTE` (tests/server_zygote.py) unless `fresh_interpreter`."""
    popen = subprocess.Popen if fresh_interpreter else SERVER_ZYGOTE.popen
    return popen(
        serve_command(data, port, *extra),
        cwd=REPO,
        env=server_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


#: Search workers of a server started by `running_server` when its options do not say: one crosses
#: the process boundary as several do, and each is an interpreter importing the engine (about
#: 0.4 s of CPU at every start). The session's server keeps the default, one per core.
TEST_SERVER_WORKERS = 1


@contextmanager
def running_server(
    data: Path,
    *extra: str,
    preexec_fn: Callable[[], None] | None = None,
    search_workers: int | None = TEST_SERVER_WORKERS,
    fresh_interpreter: bool = False,
) -> Iterator[tuple[str, subprocess.Popen]]:
    """A server process on a free port (`leafsearch.testing.Server`, the one the pytest plugin
    starts), its output in `<data>.log`; stopped with SIGTERM on exit. `preexec_fn` runs in the
    child before the server starts (e.g. to set resource limits). `search_workers` unless `extra`
    names `--search-workers` (None: the server's default, one per core). A fork of `SERVER_ZYGOTE`
    unless `fresh_interpreter` (tests of what a new interpreter's start logs or does)."""
    args = list(extra)
    if search_workers is not None and "--search-workers" not in args:
        args = ["--search-workers", str(search_workers), *args]
    popen = subprocess.Popen if fresh_interpreter else SERVER_ZYGOTE.popen
    with Server(
        data, args=args, preexec_fn=preexec_fn, startup_timeout=STARTUP_TIMEOUT, popen=popen
    ) as server:
        yield server.url, server.process


@pytest.fixture(scope="session")
def worker_processes() -> BaseContext:
    """How the search workers and the merge worker of an in-process node start
    (`Node(worker_processes=...)`): as forks of one fork server per test process, which imported
    what a worker runs once (tests/worker_preload.py), as `leafsearch serve` forks its workers
    from its zygote (search/workers/zygote.py). A spawned worker is an interpreter importing the
    engine: 59 of them took 26 s of CPU in 13 modules (bench/RESULTS.md "The test suite",
    "Session 21"). The code a worker runs is the same; the nodes built without it
    (tests/search/test_worker_start.py among them) still spawn theirs."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.worker_preload"])
    return context


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With pytest-xdist's `--dist loadgroup` (pyproject.toml's default), the work units of
    tests/scheduling.py: the Ray tests in `RAY_GROUPS` groups (each in one worker, one cluster
    at a time), each module with a module-scoped fixture, every other test alone; handed out in
    collection order (`pytest_collection_modifyitems`: the Ray groups first), not xdist's
    largest-first by number of tests.

    Why by path rather than by `xdist_group` marks: pytest 9.2 no longer sees the group that
    pytest-xdist 3.8 writes into a marked test's node id, and runs the marked tests anywhere
    (pytest-dev/pytest-xdist#1386). Marks are still honoured where they work."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    config.option.loadscopereorder = False

    class InUnits(LoadGroupScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # (`schedule` sets `collection` before it asks)
                self.groups = ray_groups(self.collection or [], _module_seconds(config))
            return work_unit(nodeid, self.groups) or super()._split_scope(nodeid)

    return InUnits(config, log)


def _module_seconds(config: pytest.Config) -> dict[str, float]:
    cache = getattr(config, "cache", None)
    return module_seconds(cache.get(MODULE_SECONDS, {}) if cache is not None else {})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The work units in the order they should start (tests/scheduling.py: the Ray groups, then
    the units slowest in the last run, by pytest's cache), each unit's and each module's tests
    together and in their order: xdist hands the units out in collection order, so the long ones
    (the Ray groups, crash trials, the fuzzer, the bench runs) start early and the run ends on
    short ones on every worker. Without pytest's cache (`-p no:cacheprovider`, a first run), by the
    seconds recorded in tests/module_seconds.json."""
    shared = [item.nodeid for item in items if "shared_ray_cluster" in getattr(item, "fixturenames", ())]
    positions = ordered([item.nodeid for item in items], _module_seconds(config), shared)
    items[:] = [items[p] for p in positions]


def pytest_collection(session: pytest.Session) -> None:
    """In an xdist worker, before it collects: its share of the test modules' assertion rewriting
    (tests/bytecode.py), so that in a first run the workers do not each rewrite every module."""
    workerinput = getattr(session.config, "workerinput", {})
    worker = str(workerinput.get("workerid", "")).removeprefix("gw")
    if worker.isdigit() and workerinput.get("workercount", 1) > 1:
        here = session.config.invocation_params.dir
        roots = [here / arg.split("::", 1)[0] for arg in session.config.args]
        rewrite_share(session.config, find_test_modules(roots), int(worker), workerinput["workercount"])


#: Whether this xdist worker has lowered its priority (`pytest_runtest_setup`).
BELOW_RAY_GROUPS = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """In an xdist worker, before its first test outside the Ray groups: the worker's priority
    lowered by `REST_NICENESS` (tests/scheduling.py says why), and with it that of every server
    and client process its tests start from then on (they inherit it)."""
    config = item.config
    in_worker = hasattr(config, "workerinput")
    if in_worker and not item.nodeid.startswith(RAY_TESTS) and not config.stash.get(BELOW_RAY_GROUPS, False):
        os.nice(REST_NICENESS)
        config.stash[BELOW_RAY_GROUPS] = True


class ModuleSeconds:
    """Adds up each module's test seconds over the run and keeps their averages in pytest's
    cache at its end (in the controller of an xdist run, which sees every worker's reports)."""

    def __init__(self, cache: pytest.Cache) -> None:
        self.cache = cache
        self.totals: dict[str, list[float]] = {}  # module: [seconds, tests]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        total = self.totals.setdefault(report.nodeid.split("::", 1)[0], [0.0, 0])
        total[0] += report.duration
        total[1] += report.when == "call"

    def pytest_sessionfinish(self) -> None:
        if self.totals:
            seconds = self.cache.get(MODULE_SECONDS, {})
            seconds.update({module: s / max(n, 1) for module, (s, n) in self.totals.items()})
            self.cache.set(MODULE_SECONDS, seconds)


#: Where the tests' folders (`tmp_path` and the servers' data folders in them) go when it is a
#: RAM file system with room: the engine fsyncs every file and folder it makes durable, and on
#: the disk each fsync waited for the journal (about 1.5 ms) and cost system CPU, the more so
#: with other processes writing: tests/search/test_pit_property.py took 86 s (20 s of CPU) on
#: the disk and 14 s (9 s of CPU) there. The code run is the same; nothing a test checks needs
#: the disk (durability tests kill -9 the server, whose writes the page cache keeps either way,
#: or simulate the power loss: tests/power_loss.py). `LEAFSEARCH_TESTS_ON_DISK=1`, `--basetemp`
#: or `PYTEST_DEBUG_TEMPROOT` keep them elsewhere.
RAM_FOLDERS = Path("/dev/shm")
RAM_FOLDERS_MIN_FREE = 4 * 1024**3


def _tests_in_ram(config: pytest.Config) -> None:
    """pytest's temporary folders under `RAM_FOLDERS` (its numbered runs, the last 3 kept, as in
    the system's temporary folder) unless told otherwise or it lacks room."""
    if config.option.basetemp or "PYTEST_DEBUG_TEMPROOT" in os.environ:
        return
    if os.environ.get("LEAFSEARCH_TESTS_ON_DISK") == "1" or not _is_tmpfs(RAM_FOLDERS):
        return
    stats = os.statvfs(RAM_FOLDERS)
    if stats.f_bavail * stats.f_frsize >= RAM_FOLDERS_MIN_FREE and os.access(RAM_FOLDERS, os.W_OK):
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(RAM_FOLDERS)


def _is_tmpfs(folder: Path) -> bool:
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:  # not Linux
        return False
    return any(line.split()[1:3] == [str(folder), "tmpfs"] for line in mounts)


def pytest_unconfigure(config: pytest.Config) -> None:
    SERVER_ZYGOTE.close()


def pytest_configure(config: pytest.Config) -> None:
    _tests_in_ram(config)
    if hasattr(config, "workerinput"):
        return
    # In the controller (or a serial run), before any process of the run imports the package.
    compile_packages(REPO)
    cache = getattr(config, "cache", None)
    if cache is not None:
        config.pluginmanager.register(ModuleSeconds(cache), "leafsearch-module-seconds")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of the session's leafsearch server. Every search, count and walk goes to its
    search workers, even one that runs alone (which the server process would otherwise serve
    itself: the path the in-process Node tests take), so that every feature the suite tests
    over HTTP crosses the process boundary."""
    with running_server(tmp_path_factory.mktemp("leafsearch-data"), search_workers=None) as (url, _):
        to_workers = dict.fromkeys(
            ("search.workers.lone_requests_in_server", "search.workers.lone_walks_in_server"), False
        )
        response = web.put(f"{url}/_cluster/settings", json={"transient": to_workers}, timeout=60)
        assert response.status_code == 200, response.text
        yield url


@pytest.fixture(scope="session")
def es(server: str) -> Iterator[Elasticsearch]:
    client = Elasticsearch(server, request_timeout=60)
    yield client
    client.close()


@pytest.fixture(scope="session")
def http(server: str) -> Iterator[httpx.Client]:
    with web.Client(base_url=server, timeout=60) as client:
        yield client


@pytest.fixture
def index_name(request: pytest.FixtureRequest) -> str:
    """A valid index name unique to this test (the index is not created)."""
    stem = re.sub(r"[^a-z0-9_-]+", "-", request.node.name.lower()).strip("-_")[:60] or "t"
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@contextmanager
def creating_indices(
    http: httpx.Client, index_name: str, default_shards: int | None = None
) -> Iterator[Callable[..., str]]:
    """Factory: `create(settings=..., mappings=..., suffix=...)` creates an index, deleted after the
    block; with `default_shards`, that many shards unless the settings fix the number."""
    created: list[str] = []

    def create(
        settings: dict[str, Any] | None = None, mappings: dict[str, Any] | None = None, suffix: str = ""
    ) -> str:
        name = f"{index_name}{suffix}"
        body: dict[str, Any] = {}
        if default_shards is not None and not _fixes_shards(settings or {}):
            settings = {**(settings or {}), "number_of_shards": default_shards}
        if settings is not None:
            body["settings"] = settings
        if mappings is not None:
            body["mappings"] = mappings
        response = http.put(f"/{name}", json=body)
        assert response.status_code == 200, response.text
        created.append(name)
        return name

    try:
        yield create
    finally:
        for name in created:
            http.delete(f"/{name}")


def _fixes_shards(settings: dict[str, Any]) -> bool:
    nested = settings.get("index", {})
    return (
        "number_of_shards" in settings
        or "index.number_of_shards" in settings
        or (isinstance(nested, dict) and "number_of_shards" in nested)
    )


@pytest.fixture
def new_index(http: httpx.Client, index_name: str) -> Iterator[Callable[..., str]]:
    """Factory: `new_index(settings=..., mappings=..., suffix=...)` creates an index, deleted afterwards."""
    with creating_indices(http, index_name) as create:
        yield create


@dataclass
class ClockedNode:
    """An in-process node on a `FakeClock`, served over HTTP by uvicorn on a thread (`http` is a
    client of it). It runs no background threads: the test advances `clock` and calls
    `node.contexts.reap()` where the node's reaper thread would have run."""

    http: httpx.Client
    clock: FakeClock
    node: Node


@contextmanager
def serving_clocked(folder: Path, timeout: float = 60, **node_options: Any) -> Iterator[ClockedNode]:
    """An in-process node on a fake clock (`node_options`: more `Node` arguments) served over
    HTTP on a loopback port for the block."""
    import uvicorn

    clock = FakeClock()
    # Listening before the server thread starts: a request made at once waits in the backlog.
    sock = socket.create_server(("127.0.0.1", 0))
    with Node(folder, background=False, clock=clock, **node_options) as node:
        config = uvicorn.Config(
            create_app(node),
            lifespan="off",
            log_level="warning",
            http=counting_protocol(node.http_connections),
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="clocked-http")
        thread.start()
        try:
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            with web.Client(base_url=url, timeout=timeout) as http:
                yield ClockedNode(http, clock, node)
        finally:
            server.should_exit = True
            thread.join(timeout=60)
            sock.close()


@pytest.fixture
def clocked(tmp_path: Path) -> Iterator[ClockedNode]:
    with serving_clocked(tmp_path / "clocked") as clocked:
        yield clocked


@pytest.fixture
def cluster_setting(http: httpx.Client) -> Iterator[Callable[[str, Any], None]]:
    """Set transient cluster settings on the session's server for one test; removed afterwards."""
    changed: list[str] = []

    def put(key: str, value: Any) -> None:
        response = http.put("/_cluster/settings", json={"transient": {key: value}})
        assert response.status_code == 200, response.text
        changed.append(key)

    yield put
    if changed:
        http.put("/_cluster/settings", json={"transient": dict.fromkeys(changed)})


#: The xdist worker's `SharedCluster` (tests/ray_cluster.py), once a test has asked for it.
SHARED_CLUSTER = pytest.StashKey[SharedCluster]()


@pytest.fixture(scope="session")
def shared_ray_cluster(pytestconfig: pytest.Config) -> Iterator[SharedCluster]:
    """The worker's shared local Ray cluster: `take` it, `give_back` when done (`ray_cluster`)."""
    shared = pytestconfig.stash[SHARED_CLUSTER] = SharedCluster()
    yield shared
    shared.stop()


@pytest.fixture(scope="module")
def ray_cluster(shared_ray_cluster: SharedCluster) -> Iterator[LocalCluster]:
    """A local 3-node Ray cluster on loopback (tests/ray_cluster.py) for the module: the worker's
    shared one, reset after the module (`SharedCluster`). The Ray tests skip without Ray, and
    fail without it under LEAFSEARCH_REQUIRE_RAY=1."""
    yield shared_ray_cluster.take()
    shared_ray_cluster.give_back()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stops the worker's shared Ray cluster once no fixture holds it and the next test does not
    ask for it (a module starting a cluster of its own, or the rest of the suite)."""
    yield
    shared = item.config.stash.get(SHARED_CLUSTER, None)
    wanted = nextitem is not None and "shared_ray_cluster" in getattr(nextitem, "fixturenames", ())
    if shared is not None and not shared.holders and not wanted:
        shared.stop()
