"""A machine actor's channel server alone, in a child process the tests stop and kill: the
machine the channel tests (test_channel.py) and the check link's (test_fault_detection.py) talk
to."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from leafsearch.ray_backend.channel import ChannelServer

KEY = b"k" * 32
#: What the test server's handler does with a message that says so: it never answers.
HANG = b"hang"


class Machine:
    """Stands for a machine (`Channels` keys its connections by it)."""


def _serve(ready: Any) -> None:  # a child process: a machine actor's channel alone
    release = threading.Event()

    def handle(message: bytes) -> bytes:
        if message == HANG:
            release.wait()
        return message.upper() + str(os.getpid()).encode()

    server = ChannelServer("127.0.0.1", KEY, handle)
    ready.send(server.address)
    release.wait()


class Child:
    """A channel server in a child process, started anew by `start` (a restarted actor: a new
    address)."""

    def __init__(self) -> None:
        self.process: Any = None
        self.address: tuple[str, int] | None = None
        self.located = 0

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        ours, theirs = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(theirs,), daemon=True)
        self.process.start()
        self.address = tuple(ours.recv())

    def locate(self, machine: Any, deadline: float) -> tuple[str, int]:
        self.located += 1
        assert self.address is not None
        return self.address

    def kill(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join()


@pytest.fixture
def child() -> Iterator[Child]:
    """A machine actor's channel server alone, in a child process (SIGKILL ends it stopped or
    not)."""
    child = Child()
    child.start()
    yield child
    if child.process.is_alive():
        child.kill()
