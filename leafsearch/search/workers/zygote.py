"""Search workers forked from a template of the server process (a zygote), not spawned.

A spawned worker is a new interpreter that imports the engine (numpy, the index, the search
phases): about 0.5 s of CPU at every start, each worker of each server, and again for a worker that
replaces one that died. `leafsearch serve` instead forks itself once, as it starts: after its
imports and before it has a second thread (uvicorn, the node's refresh and merge threads), so
the copy holds no lock another thread took. The copy closes every file the server had open, imports
what a worker runs (common/preload.py, the modules a worker never runs left out) and becomes
multiprocessing's fork server; the server's `forkserver` context then starts each worker as a fork
of it. A worker costs a fork and the pages it writes; everything else is as with `spawn` (the
same entry point, arguments and pipes, sent over the fork server's socket), and the pool sees a
`Process` with its pid and exit code as before.

The fork server ends when the server does (every holder of its "alive" pipe is gone: the server
and the workers), and if it died the `forkserver` context starts a new one the standard way (a
fresh interpreter), so a worker still starts. This relies on the fields of multiprocessing's
`ForkServer` that its `ensure_running` keeps (the same from Python 3.11 to 3.13); where they differ,
or the caller already runs threads, `start` returns None and the workers are spawned.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
import threading
from multiprocessing import connection, forkserver, get_context, util
from multiprocessing.context import BaseContext

#: What `ForkServer.ensure_running` reads and writes to find a running fork server.
_FIELDS = ("_forkserver_address", "_forkserver_alive_fd", "_forkserver_pid")


def start(exclude: tuple[str, ...], umask: int | None = None) -> BaseContext | None:
    """Fork this process into the fork server of multiprocessing's `forkserver` context, which
    imports every module of the package but those in `exclude` first, and whose workers create
    files with `umask` (None: this process's); that context (None: the process has threads, or
    this Python's fork server keeps other fields: spawn instead)."""
    server = forkserver._forkserver
    if (
        threading.active_count() > 1
        or not hasattr(os, "fork")
        or not all(hasattr(server, field) for field in _FIELDS)
        or server._forkserver_pid is not None
    ):
        return None
    listener = socket.socket(socket.AF_UNIX)
    address = connection.arbitrary_address("AF_UNIX")
    listener.bind(address)
    if not util.is_abstract_socket_namespace(address):
        os.chmod(address, 0o600)  # the server's user alone asks for workers
    listener.listen()
    alive_r, alive_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    # Ctrl-C reaches the whole process group, and the server stops its workers itself: the copy
    # ignores SIGINT from its first instruction on.
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
    pid = os.fork()
    if pid == 0:
        if umask is not None:
            os.umask(umask)
        _serve(listener.detach(), alive_r, alive_w, exclude)
    signal.signal(signal.SIGINT, interrupt)
    os.close(alive_r)
    listener.close()
    server._forkserver_address = address
    server._forkserver_alive_fd = alive_w
    server._forkserver_pid = pid
    return get_context("forkserver")


def _serve(listener: int, alive_r: int, alive_w: int, exclude: tuple[str, ...]) -> None:
    """The fork server's life; never returns."""
    code = 0
    try:
        os.close(alive_w)
        _close_all_but({0, 1, 2, listener, alive_r})
        from leafsearch.common.preload import preload

        preload(exclude=exclude)
        gc.freeze()  # the workers' forks share these objects' pages: no collection writes to them
        forkserver.main(listener, alive_r, [])
    except SystemExit:  # the server and every worker are gone
        pass
    except BaseException:
        code = 1
        sys.excepthook(*sys.exc_info())
        sys.stderr.flush()
    finally:
        os._exit(code)


def _close_all_but(keep: set[int]) -> None:
    """Close every file descriptor not in `keep` (the server's log files, its data folder's lock,
    anything an import opened): the fork server and its workers hold only what they are sent."""
    start = 0
    for fd in [*sorted(keep), os.sysconf("SC_OPEN_MAX")]:
        if start < fd:  # (`closerange(0, 0)` would close every descriptor)
            os.closerange(start, fd)
        start = fd + 1
