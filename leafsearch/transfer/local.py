"""A data folder served in-process, so `--data PATH` exports and imports with no server running.

The node is opened as `leafsearch serve` would open it: its lock file refuses a folder a running
server (or another command) holds, so the command never reads files a live node is changing. It
is then served on a free loopback port by uvicorn on a thread, and the command talks HTTP to it
exactly as to a remote server: one code path, and the node is driven only through its REST API.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from leafsearch.transfer.client import TransferError


@contextmanager
def served_data_folder(path: str) -> Iterator[str]:
    """The URL of the node in `path`, served until the block ends (then closed, releasing the lock)."""
    import uvicorn

    from leafsearch.node.node import Node, NodeLocked
    from leafsearch.rest.app import create_app

    if not os.path.isdir(path):
        raise TransferError(f"no data folder at [{path}]")
    try:
        node = Node(path)
    except NodeLocked as exc:
        raise TransferError(f"{exc}; use --url to go through the server that holds it") from None
    sock = socket.create_server(("127.0.0.1", 0))
    try:
        config = uvicorn.Config(create_app(node), lifespan="off", log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="leafsearch-local-http")
        thread.start()
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
            thread.join()
    finally:
        sock.close()
        node.close()
