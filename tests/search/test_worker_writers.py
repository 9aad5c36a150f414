"""The threads a search worker writes clients' sockets on (`process._Writers`): a task never waits
behind another (an export writes as slowly as its client reads), and an idle thread takes the
next task instead of a new thread starting per page."""

from __future__ import annotations

import threading

from leafsearch.search.workers.process import _Writers


def test_tasks_run_at_once_and_an_idle_thread_takes_the_next() -> None:
    writers = _Writers()
    release = threading.Event()
    started = threading.Barrier(3)
    names: list[int] = []

    def slow() -> None:
        names.append(threading.get_ident())
        started.wait(timeout=10)  # both slow tasks run at once, or this breaks
        release.wait(timeout=10)

    writers.start(slow)
    writers.start(slow)
    started.wait(timeout=10)
    release.set()
    done = threading.Event()
    while True:  # until both threads are idle again
        with writers._lock:
            if writers._idle == 2:
                break
        threading.Event().wait(0.001)
    writers.start(lambda: (names.append(threading.get_ident()), done.set()))
    assert done.wait(timeout=10)
    assert len(set(names[:2])) == 2 and names[2] in names[:2]


def test_an_idle_thread_ends_after_its_idle_time() -> None:
    writers = _Writers(idle_seconds=0.01)
    ran: list[threading.Thread] = []
    done = threading.Event()
    writers.start(lambda: (ran.append(threading.current_thread()), done.set()))
    assert done.wait(timeout=10)
    ran[0].join(timeout=10)
    assert not ran[0].is_alive() and writers._idle == 0
