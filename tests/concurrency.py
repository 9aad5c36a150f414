"""Running writers beside a refresher, or beside readers, as the concurrency tests do; a
process stopped for a test's moment."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from leafsearch.errors import ElasticError


def wait_for(condition: Callable[[], bool], attempts: int = 600) -> None:
    """Poll until `condition` holds (each attempt is a request to the server: no fixed sleep
    stands for the event), 50 ms apart; fail after `attempts`."""
    for _ in range(attempts):
        if condition():
            return
        threading.Event().wait(0.05)
    raise AssertionError("the condition never held")


def stop_process(pid: int) -> None:
    """SIGSTOP a process, returning once every thread of it is stopped: `kill` returns before
    the stop reaches the threads (one thread takes the signal and stops the others when it
    runs), and a thread woken meanwhile by data on a socket would go on to answer it."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):  # (a thread ended meanwhile)
                states.append((task / "stat").read_text().rpartition(")")[2].split()[0])
        return bool(states) and all(state in ("T", "t") for state in states)

    for _ in range(100_000):
        if stopped():
            return
        os.sched_yield()
    raise AssertionError(f"process {pid} never stopped")


def writers_beside_refresher(
    writers: Sequence[Callable[[], None]], refresh: Callable[[], None]
) -> list[ElasticError]:
    """Run each writer in a thread of its own while another thread calls `refresh` again and
    again until every writer has returned; raises the first error a writer raised, and returns
    the errors the refreshes raised (a test injecting failures asserts what they are)."""
    errors: list[BaseException] = []
    refresh_failures: list[ElasticError] = []
    done = threading.Event()

    def run(writer: Callable[[], None]) -> None:
        try:
            writer()
        except BaseException as exc:  # noqa: BLE001 - raised below, in the test's thread
            errors.append(exc)

    def refresher() -> None:
        while not done.is_set():
            try:
                refresh()
            except ElasticError as exc:
                refresh_failures.append(exc)

    threads = [threading.Thread(target=run, args=(writer,)) for writer in writers]
    background = threading.Thread(target=refresher)
    background.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    background.join()
    if errors:
        raise errors[0]
    return refresh_failures


def readers_beside_writers(
    writers: Sequence[Callable[[], None]], read: Callable[[], None], readers: int = 2
) -> None:
    """Run each writer in a thread of its own and `readers` threads calling `read` again and
    again (at least once each) until every writer has returned; raises the first error any of
    them raised, in the test's thread."""
    errors: list[BaseException] = []
    done = threading.Event()

    def guarded(body: Callable[[], None]) -> None:
        try:
            body()
        except BaseException as exc:  # noqa: BLE001 - raised below, in the test's thread
            errors.append(exc)

    def reading() -> None:
        read()
        while not done.is_set():
            read()

    writing = [threading.Thread(target=guarded, args=(writer,)) for writer in writers]
    reading_threads = [threading.Thread(target=guarded, args=(reading,)) for _ in range(readers)]
    for thread in (*writing, *reading_threads):
        thread.start()
    for thread in writing:
        thread.join()
    done.set()
    for thread in reading_threads:
        thread.join()
    if errors:
        raise errors[0]


def readers_beside_a_writer(
    write: Callable[[], None], readers: Sequence[Callable[[], None]], stop: threading.Event
) -> None:
    """Run `write` (which goes on until `stop` is set) in a thread of its own beside each reader
    in a thread of its own; once every reader has returned, set `stop` and wait for the writer.
    Raises the first error any of them raised, in the test's thread."""
    errors: list[BaseException] = []

    def guarded(body: Callable[[], None]) -> None:
        try:
            body()
        except BaseException as exc:  # noqa: BLE001 - raised below, in the test's thread
            errors.append(exc)

    writer = threading.Thread(target=guarded, args=(write,))
    reading = [threading.Thread(target=guarded, args=(reader,)) for reader in readers]
    writer.start()
    for thread in reading:
        thread.start()
    for thread in reading:
        thread.join()
    stop.set()
    writer.join()
    if errors:
        raise errors[0]
