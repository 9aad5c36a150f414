"""The command line: `leafsearch serve` runs one node behind an HTTP server.

Start-up must stay well under a second on an empty folder, so the socket is bound first (a busy
port fails at once) and the line announcing the address is printed only when it accepts.
SIGINT/SIGTERM stop uvicorn gracefully; the node is closed afterwards, which flushes and releases
the data folder's lock.
"""

from __future__ import annotations

import gc
import logging
import signal
import socket
import sys

import click

log = logging.getLogger("leafsearch")

IDLE_CONNECTION_SECONDS = 3600


@click.group()
def main() -> None:
    """leafsearch: an Elasticsearch-compatible search server."""


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=9200,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0 picks a free one).",
)
@click.option(
    "--data",
    "data",
    default="./data",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Data folder (created when missing).",
)
@click.option(
    "--max-content-length",
    default="100mb",
    show_default=True,
    envvar="LEAFSEARCH_HTTP_MAX_CONTENT_LENGTH",
    help="http.max_content_length: largest request body accepted, e.g. 100mb.",
)
def serve(host: str, port: int, data: str, max_content_length: str) -> None:
    """Serve the node in DATA over HTTP."""
    import uvicorn

    from leafsearch.errors import ElasticError
    from leafsearch.node import Node, NodeLocked
    from leafsearch.rest.app import create_app
    from leafsearch.settings import parse_byte_size

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        limit = parse_byte_size(max_content_length, "http.max_content_length")
    except ElasticError as exc:
        raise click.BadParameter(exc.reason, param_hint="--max-content-length") from None
    try:
        sock = _bind(host, port)
    except OSError as exc:
        click.echo(f"leafsearch: cannot listen on {host}:{port}: {exc.strerror}", err=True)
        sys.exit(1)
    try:
        node = Node(data)
    except NodeLocked as exc:
        sock.close()
        click.echo(f"leafsearch: {exc}", err=True)
        sys.exit(1)
    _tune_gc()
    try:
        config = uvicorn.Config(
            create_app(node, max_content_length=limit),
            workers=1,
            lifespan="off",
            access_log=False,
            log_level="warning",
            timeout_graceful_shutdown=5,
            # Elasticsearch never closes an idle keep-alive connection; clients that hold one
            # (http.client, elasticdump's agents) would see "remote end closed" after uvicorn's 5 s.
            timeout_keep_alive=IDLE_CONNECTION_SECONDS,
        )
        server = uvicorn.Server(config)

        def stop(signum: int, frame: object) -> None:
            server.should_exit = True

        # Installed before the address is announced, so a signal sent right after still shuts down
        # cleanly; uvicorn re-raises the signal it caught once it stops, which lands here again.
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        log.info("leafsearch listening on http://%s:%d (data %s)", shown, bound_port, node.path)
        server.run(sockets=[sock])
    finally:
        node.close()
        log.info("leafsearch stopped")


def _tune_gc() -> None:
    """Indexing allocates millions of short-lived lists and tuples; with CPython's default
    thresholds the cycle collector keeps rescanning them (about 12% of bulk throughput). Objects
    alive after start-up are frozen out of collection, and young collections run less often."""
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only disables Nagle (TCP_NODELAY) on accepted sockets whose
    # protocol says TCP, and without that every response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock
