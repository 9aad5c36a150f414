"""The start of search worker processes (search/workers/pool.py): a pool closed while its workers
start ends them without an error, a worker that dies while starting for another reason is an
error, and a pool told to wait (`Node(defer_workers=True)`, as `leafsearch serve` does) starts its
workers only when asked."""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from leafsearch.node.node import Node
from leafsearch.search.workers.pool import WorkerPool

LOGGER = "leafsearch.search_workers"


def _wait(condition: Any, what: str, timeout: float = 60.0) -> None:
    """Wait until `condition()` holds (state the pool's start threads change)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.001)


def _starting(pool: WorkerPool) -> list[Any]:
    """The processes started but not ready yet (each imports the engine: hundreds of ms)."""
    with pool._lock:
        return list(pool._starting.values())


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The pool's ERROR records so far."""
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]


def test_a_pool_closed_while_its_workers_start_ends_them_without_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    node = Node(tmp_path / "node", search_workers=2)
    pool = node.search_workers
    assert pool is not None
    _wait(lambda: _starting(pool), "a worker process is starting")
    starting = _starting(pool)
    node.close()
    assert all(not proc.is_alive() for proc in starting)  # ended, not left to the interpreter's exit
    records = [r for r in caplog.records if r.name == LOGGER]
    assert not [r for r in records if r.levelno >= logging.WARNING], [r.getMessage() for r in records]


def test_a_worker_that_dies_while_starting_is_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Node(tmp_path / "node", search_workers=1) as node:
        pool = node.search_workers
        assert pool is not None
        _wait(lambda: _starting(pool), "the worker process is starting")
        (proc,) = _starting(pool)
        proc.kill()
        _wait(lambda: not _starting(pool), "the pool saw the worker exit")
        # The start thread leaves `_starting` before it reaps the process and says why it ended
        # (one thread reaps a process: a `close()` meanwhile no longer sees it), so the record
        # comes a moment after.
        _wait(lambda: _errors(caplog), "the pool said why the worker ended")
        assert _errors(caplog) == [f"search worker 0 exited while starting (code {-signal.SIGKILL})"]
        assert pool.stats()["ready"] == 0  # its searches run in the server process


def test_a_deferred_pool_starts_its_workers_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Node(tmp_path / "node", search_workers=1, defer_workers=True) as node:
        pool = node.search_workers
        assert pool is not None
        assert pool.started == 0 and not pool.wait_ready(0)
        pool.start()
        pool.start()  # once
        assert pool.wait_ready(60)
        assert pool.started == 1
