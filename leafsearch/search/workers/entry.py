"""A search worker process's entry point, kept light to import.

A spawned process unpickles its target and arguments before it runs anything, importing their
modules: were the target in process.py, the child would import the whole engine first. Here the
worker first ignores SIGINT (a Ctrl-C in a terminal reaches every process of the group, and the
server process stops its workers itself: a worker it reached while importing would print a
`KeyboardInterrupt` traceback), then imports every module a worker can run (common/preload.py),
so that it never imports one later from an installation that may have changed meanwhile, and
serves (process.py). It reports itself ready only then; until it does, the server process runs the
searches it would have run. (`leafsearch serve` forks its workers from a copy of itself that has
imported all of this already, zygote.py: there the imports cost nothing.)
"""

from __future__ import annotations

import signal
from multiprocessing.connection import Connection
from typing import Any

#: What a worker never runs: the HTTP front, the node, the command line and the clients.
NOT_IN_WORKERS = (
    "leafsearch.cli",
    "leafsearch.client",
    "leafsearch.node",
    "leafsearch.rest",
    "leafsearch.testing",
    "leafsearch.transfer",
)


def main(conn: Connection, config: dict[str, Any], security: Any = None) -> None:
    """Serve `conn` with the `process.WorkerConfig` whose fields are `config`; `security`: the
    server's shared security generation (parking.py)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from leafsearch.common.preload import preload
    from leafsearch.search.workers import process

    preload(exclude=NOT_IN_WORKERS)
    process.main(conn, process.WorkerConfig(**config), security)
