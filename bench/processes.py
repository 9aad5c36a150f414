"""Where the benchmarks' client processes come from."""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext


def client_processes(*modules: str) -> BaseContext:
    """The multiprocessing context of client processes: a fork server, which imports the bench
    (and `modules`: the module of the clients' functions) once, in a new interpreter, and forks a
    client from it on each start. A client inherits none of the caller's sockets or threads, as
    a spawned one would, but starts in milliseconds instead of importing the bench, numpy and the
    official client again (about 0.6 s of CPU each; a smoke run starts some forty). The first
    call of a run chooses what the server imports."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["bench.workloads", *modules])
    return context
