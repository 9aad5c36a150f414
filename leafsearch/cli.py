"""The command line: `leafsearch serve` runs one node behind an HTTP server.

Start-up must stay well under a second on an empty folder (`python -m bench.startup` measures
it), so the socket is bound first (a busy port fails at once) and the line announcing the address
is printed only when it accepts. Only what serving needs is imported before that; the search
workers start, and the rest of the package is imported (common/preload.py), in the background once
the first request is answered (or `WARM_UP_AFTER` seconds after the server accepts, when none
came): the server then never imports a module lazily while it runs, so reinstalling the package
beside it (`pip install -e ".[test]"` after `pip install .`) cannot break it. SIGINT/SIGTERM stop
uvicorn gracefully; the node is closed afterwards, which flushes and releases the data folder's
lock.

The server creates every file 0600 and every folder 0700 (umask 077). It refuses to listen on an
address other than loopback unless requests are authenticated (the data folder holds users, made
with `leafsearch users add`) and encrypted (`--tls-cert`/`--tls-key`), or `--insecure` says the
operator knows; even then it warns.
"""

from __future__ import annotations

import gc
import getpass
import logging
import os
import signal
import socket
import sys
import threading
from typing import Any

import click

log = logging.getLogger("leafsearch")

IDLE_CONNECTION_SECONDS = 3600
#: What the server makes is its owner's alone: files 0600, folders 0700.
PRIVATE_UMASK = 0o077
#: Seconds after the server accepts before the workers start and the package is preloaded,
#: when no request came first (the first answer starts them at once).
WARM_UP_AFTER = 0.25


CONTEXT = {"help_option_names": ["-h", "--help"]}
LOG_LEVELS = ("debug", "info", "warning", "error")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from leafsearch.version import VERSION

    try:
        own = version("leafsearch")
    except PackageNotFoundError:
        own = "unknown"
    return f"{own} (Elasticsearch {VERSION} API)"


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """`--version`: only it reads the installed package's metadata (importing importlib.metadata
    would cost every `serve` some 15 ms of its start-up)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"leafsearch {_version()}")
        ctx.exit()


@click.group(context_settings=CONTEXT)
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def main() -> None:
    """leafsearch: an Elasticsearch-compatible search server."""


@main.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar="LEAFSEARCH_HOST",
    show_envvar=True,
    help="Address to listen on.",
)
@click.option(
    "--port",
    default=9200,
    show_default=True,
    type=click.IntRange(0, 65535),
    envvar="LEAFSEARCH_PORT",
    show_envvar=True,
    help="Port to listen on (0 picks a free one).",
)
@click.option(
    "--data",
    "data",
    default="./data",
    show_default=True,
    type=click.Path(file_okay=False),
    envvar="LEAFSEARCH_DATA",
    show_envvar=True,
    help="Data folder (created when missing).",
)
@click.option(
    "--path-repo",
    "path_repo",
    multiple=True,
    type=click.Path(file_okay=False),
    envvar="LEAFSEARCH_PATH_REPO",
    show_envvar=True,
    help="A folder snapshot repositories may be registered in (Elasticsearch's path.repo); repeat "
    "it for several. In the environment, folders separated by spaces. Without it, no repository can "
    "be registered.",
)
@click.option(
    "--max-content-length",
    default="100mb",
    show_default=True,
    envvar="LEAFSEARCH_HTTP_MAX_CONTENT_LENGTH",
    show_envvar=True,
    help="http.max_content_length: largest request body accepted, e.g. 100mb.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, exists=True),
    envvar="LEAFSEARCH_TLS_CERT",
    show_envvar=True,
    help="PEM certificate (chain).",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, exists=True),
    envvar="LEAFSEARCH_TLS_KEY",
    show_envvar=True,
    help="PEM private key.",
)
@click.option(
    "--insecure",
    is_flag=True,
    envvar="LEAFSEARCH_INSECURE",
    show_envvar=True,
    help="Listen on a non-loopback address without authentication or TLS (a warning is logged).",
)
@click.option(
    "-E",
    "--setting",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    envvar="LEAFSEARCH_SETTINGS",
    show_envvar=True,
    help="A node setting, as Elasticsearch's -E (http.cors.enabled, http.cors.allow-origin, ...); "
    "in the environment, pairs separated by spaces.",
)
@click.option(
    "--search-workers",
    type=click.IntRange(min=0),
    default=None,
    envvar="LEAFSEARCH_SEARCH_WORKERS",
    show_envvar=True,
    help="Processes that run searches, so that concurrent searches and the slices of an export use "
    "every core [default: the number of cores]; 0 runs searches in the server process.",
)
@click.option(
    "--ray",
    "ray_address",
    default=None,
    metavar="auto|local|ADDRESS",
    envvar="LEAFSEARCH_RAY",
    show_envvar=True,
    help="Coordinate a Ray cluster: new indices keep their shards in Ray actors spread over its "
    "nodes (needs the leafsearch[ray] extra). auto: the cluster running on this machine; local: a "
    "one-node cluster started here; else the cluster's address. Search workers are not used then.",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    envvar="LEAFSEARCH_LOG_LEVEL",
    show_envvar=True,
    help="Least severe message of the server's log (standard error).",
)
@click.option(
    "--access-log",
    metavar="FILE|-",
    envvar="LEAFSEARCH_ACCESS_LOG",
    show_envvar=True,
    help="Log every request (client, method, path, status, bytes, ms) to FILE, or - for standard "
    "error. Off when not given.",
)
@click.option(
    "--slow-log",
    metavar="FILE|-",
    default="-",
    show_default=True,
    envvar="LEAFSEARCH_SLOW_LOG",
    show_envvar=True,
    help="Where the search and indexing slow logs go (Elasticsearch's JSON lines; an index's "
    "index.search.slowlog.threshold.* and index.indexing.slowlog.threshold.* settings turn them on).",
)
def serve(
    host: str,
    port: int,
    data: str,
    path_repo: tuple[str, ...],
    max_content_length: str,
    tls_cert: str | None,
    tls_key: str | None,
    insecure: bool,
    settings: tuple[str, ...],
    search_workers: int | None,
    ray_address: str | None,
    log_level: str,
    access_log: str | None,
    slow_log: str,
) -> None:
    """Serve the node in DATA over HTTP (HTTPS with --tls-cert and --tls-key).

    Every option can also be given by the environment variable shown beside it."""
    import uvicorn

    from leafsearch.common.settings import parse_byte_size
    from leafsearch.errors import ElasticError
    from leafsearch.node.node import Node, NodeLocked, RayUnavailable
    from leafsearch.rest.access import is_loopback_host
    from leafsearch.rest.access_log import AccessLog
    from leafsearch.rest.app import create_app
    from leafsearch.rest.connections import counting_protocol
    from leafsearch.rest.stopping import PromptServer
    from leafsearch.search.workers import zygote
    from leafsearch.search.workers.entry import NOT_IN_WORKERS

    workers = 0 if ray_address else (os.cpu_count() or 1) if search_workers is None else search_workers
    # While this process has one thread and no file open: each worker is a fork of its copy.
    processes = zygote.start(NOT_IN_WORKERS, umask=PRIVATE_UMASK) if workers else None
    _configure_logs(log_level, access_log, slow_log)
    os.umask(PRIVATE_UMASK)
    try:
        limit = parse_byte_size(max_content_length, "http.max_content_length")
    except ElasticError as exc:
        raise click.BadParameter(exc.reason, param_hint="--max-content-length") from None
    node_settings = _node_settings(settings)
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if not is_loopback_host(host):
        _check_exposure(host, data, tls_cert is not None, insecure)
    try:
        sock = _bind(host, port)
    except OSError as exc:
        click.echo(f"leafsearch: cannot listen on {host}:{port}: {exc.strerror}", err=True)
        sys.exit(1)
    try:
        # The workers start once the server has answered (`_WarmUp`).
        node = Node(
            data,
            search_workers=workers,
            defer_workers=True,
            ray=ray_address,
            path_repo=list(path_repo),
            worker_processes=processes,
        )
    except (NodeLocked, RayUnavailable) as exc:
        sock.close()
        click.echo(f"leafsearch: {exc}", err=True)
        sys.exit(1)
    _tune_gc()
    try:
        warm_up = _WarmUp(node)
        app = create_app(node, max_content_length=limit, bind_host=host, node_settings=node_settings)
        if access_log is not None:
            app = AccessLog(app)
            node.http_connections.security_stamp = None  # every request logged here: none parked
        app = _WarmUpTrigger(app, warm_up)
        config = uvicorn.Config(
            app,
            ssl_certfile=tls_cert,
            ssl_keyfile=tls_key,
            workers=1,
            lifespan="on",  # only `_WarmUpTrigger` sees it
            # Elasticsearch speaks no WebSocket: an upgrade request is answered as HTTP, and the
            # start does not import a WebSocket implementation (`auto`: wsproto, 0.03 s of CPU).
            ws="none",
            access_log=False,
            log_level="warning",
            timeout_graceful_shutdown=5,
            # Elasticsearch never closes an idle keep-alive connection; clients that hold one
            # (http.client, elasticdump's agents) would see "remote end closed" after uvicorn's 5 s.
            timeout_keep_alive=IDLE_CONNECTION_SECONDS,
            http=counting_protocol(node.http_connections, _max_header_size(node_settings)),
        )
        server = PromptServer(config)

        def stop(signum: int, frame: object) -> None:
            server.should_exit = True

        # Installed before the address is announced, so a signal sent right after still shuts down
        # cleanly; uvicorn re-raises the signal it caught once it stops, which lands here again.
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        scheme = "https" if tls_cert else "http"
        auth = "on" if node.security.enabled else "off (no users in the data folder)"
        log.info(
            "leafsearch listening on %s://%s:%d (data %s, authentication %s)",
            scheme,
            shown,
            bound_port,
            node.path,
            auth,
        )
        server.run(sockets=[sock])
    finally:
        node.close()
        log.info("leafsearch stopped")


class _WarmUp:
    """Run once, in a background thread: start the node's search workers, then import the rest
    of the package (common/preload.py) and freeze what it made out of the cycle collector's work,
    as `_tune_gc` froze what start-up made."""

    def __init__(self, node: Any) -> None:
        self._node = node
        self._once = threading.Lock()

    def __call__(self) -> None:
        if self._once.acquire(blocking=False):
            threading.Thread(target=self._run, name="leafsearch-warm-up", daemon=True).start()

    def _run(self) -> None:
        from leafsearch.common.preload import preload

        if self._node.search_workers is not None:
            self._node.search_workers.start()
        count, seconds = preload()
        gc.freeze()
        log.debug("preloaded %d modules in %.0f ms", count, seconds * 1000)


class _WarmUpTrigger:
    """The ASGI app, which calls `callback` once it has answered its first request, or
    `WARM_UP_AFTER` seconds after the server starts accepting when no request came first (its
    lifespan's start-up comes just before)."""

    def __init__(self, app: Any, callback: Any) -> None:
        self.app = app
        self._callback = callback
        self._waiting = True

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif not self._waiting:
            await self.app(scope, receive, send)
        else:
            try:
                await self.app(scope, receive, send)
            finally:
                self._waiting = False
                self._callback()

    async def _lifespan(self, receive: Any, send: Any) -> None:
        import asyncio

        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                asyncio.get_running_loop().call_later(WARM_UP_AFTER, self._callback)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def _log_handler(destination: str) -> logging.Handler:
    """`-` is standard error; anything else a file appended to."""
    if destination == "-":
        return logging.StreamHandler(sys.stderr)
    return logging.FileHandler(destination, encoding="utf-8")


def _configure_logs(level: str, access_log: str | None, slow_log: str) -> None:
    """The server's log on standard error at `level`; the access log (timestamped lines) and the
    slow logs (Elasticsearch's JSON lines, which carry their own timestamp) each where its flag
    says, not repeated in the server's log."""
    from leafsearch.node.slowlog import ALL_LOGGERS
    from leafsearch.rest.access_log import ACCESS_LOGGER

    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if access_log is not None:
        handler = _log_handler(access_log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        ACCESS_LOGGER.addHandler(handler)
        ACCESS_LOGGER.setLevel(logging.INFO)
        ACCESS_LOGGER.propagate = False
    slow = _log_handler(slow_log)
    slow.setFormatter(logging.Formatter("%(message)s"))
    for logger in ALL_LOGGERS:
        logger.addHandler(slow)
        logger.propagate = False


def _node_settings(pairs: tuple[str, ...]) -> dict[str, str]:
    """`-E key=value` pairs, each a known node setting with a valid value."""
    from leafsearch.common.settings import NODE_SETTINGS
    from leafsearch.errors import ElasticError

    values: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        setting = NODE_SETTINGS.get(key)
        if not equals or setting is None:
            known = ", ".join(sorted(NODE_SETTINGS))
            raise click.BadParameter(f"[{pair}]: expected KEY=VALUE with KEY one of {known}", param_hint="-E")
        try:
            setting.parse(value, key)
        except ElasticError as exc:
            raise click.BadParameter(exc.reason, param_hint="-E") from None
        values[key] = value
    return values


def _max_header_size(node_settings: dict[str, str]) -> int:
    """`http.max_header_size` (`-E`, already checked by `_node_settings`), in bytes."""
    from leafsearch.common.settings import NODE_SETTINGS

    setting = NODE_SETTINGS["http.max_header_size"]
    return int(setting.parse(node_settings.get(setting.key, setting.default), setting.key))


def _check_exposure(host: str, data: str, tls: bool, insecure: bool) -> None:
    """Refuse a non-loopback address without authentication and TLS, unless --insecure."""
    from pathlib import Path

    from leafsearch.security.store import UserFile

    missing = []
    if not UserFile(Path(data) / "security").load():
        missing.append("authentication (add a user with `leafsearch users add`)")
    if not tls:
        missing.append("TLS (--tls-cert and --tls-key)")
    if not missing:
        return
    what = " and ".join(missing)
    if not insecure:
        click.echo(
            f"leafsearch: refusing to listen on {host}, which is not a loopback address, without {what}; "
            "pass --insecure to do it anyway",
            err=True,
        )
        sys.exit(1)
    log.warning("listening on %s without %s (--insecure): anyone who can reach it can use it", host, what)


@main.group()
def users() -> None:
    """Manage the users of a data folder (authentication turns on with the first user).

    A running node sees changes at once. Passwords are stored as Argon2id hashes."""


_DATA_OPTION = click.option(
    "--data",
    default="./data",
    show_default=True,
    type=click.Path(file_okay=False),
    envvar="LEAFSEARCH_DATA",
    show_envvar=True,
    help="Data folder.",
)


def _user_file(data: str):  # -> UserFile
    from pathlib import Path

    from leafsearch.security.store import UserFile

    os.umask(PRIVATE_UMASK)
    return UserFile(Path(data) / "security")


def _roles(values: tuple[str, ...]) -> list[str]:
    from leafsearch.errors import ElasticError
    from leafsearch.security.subject import check_role

    try:
        return [check_role(role) for role in values]
    except ElasticError as exc:
        raise click.BadParameter(exc.reason, param_hint="--role") from None


def _password(given: str | None, name: str) -> str:
    """The password from --password-stdin's line, or asked twice on the terminal."""
    if given is not None:
        return given
    first = getpass.getpass(f"password for [{name}]: ")
    if first != getpass.getpass("again: "):
        raise click.ClickException("the passwords differ")
    return first


def _read_stdin_password(flag: bool) -> str | None:
    return sys.stdin.readline().rstrip("\r\n") if flag else None


@users.command("add")
@_DATA_OPTION
@click.argument("name")
@click.option(
    "--role",
    "roles",
    multiple=True,
    required=True,
    help="superuser, viewer, read:<index pattern> or write:<index pattern> (repeatable).",
)
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
def users_add(data: str, name: str, roles: tuple[str, ...], password_stdin: bool) -> None:
    """Add user NAME (or replace its password and roles)."""
    store = _user_file(data)
    checked = _roles(roles)
    if not name or ":" in name:
        raise click.BadParameter("a user name is not empty and has no ':'", param_hint="NAME")
    password = _password(_read_stdin_password(password_stdin), name)
    if len(password) < 6:
        raise click.ClickException("passwords must be at least [6] characters long")
    store.put(name, password, checked)
    click.echo(f"user [{name}] saved with roles [{','.join(checked)}]")


@users.command("passwd")
@_DATA_OPTION
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
def users_passwd(data: str, name: str, password_stdin: bool) -> None:
    """Change the password of user NAME."""
    store = _user_file(data)
    existing = store.load().get(name)
    if existing is None:
        raise click.ClickException(f"no user [{name}]")
    password = _password(_read_stdin_password(password_stdin), name)
    if len(password) < 6:
        raise click.ClickException("passwords must be at least [6] characters long")
    store.put(name, password, existing["roles"])
    click.echo(f"password of [{name}] changed")


@users.command("roles")
@_DATA_OPTION
@click.argument("name")
@click.option("--role", "roles", multiple=True, required=True, help="The user's new roles (repeatable).")
def users_roles(data: str, name: str, roles: tuple[str, ...]) -> None:
    """Replace the roles of user NAME."""
    store = _user_file(data)
    users_now = store.load()
    if name not in users_now:
        raise click.ClickException(f"no user [{name}]")
    users_now[name]["roles"] = _roles(roles)
    store.save(users_now)
    click.echo(f"user [{name}] now has roles [{','.join(users_now[name]['roles'])}]")


@users.command("delete")
@_DATA_OPTION
@click.argument("name")
def users_delete(data: str, name: str) -> None:
    """Delete user NAME (its API keys stop working). The last user cannot be deleted: that would
    turn authentication off."""
    store = _user_file(data)
    users_now = store.load()
    if name not in users_now:
        raise click.ClickException(f"no user [{name}]")
    if len(users_now) == 1:
        raise click.ClickException(
            f"[{name}] is the last user: deleting it would turn authentication off; "
            "delete the data folder's security/users.json to do that deliberately"
        )
    del users_now[name]
    store.save(users_now)
    click.echo(f"user [{name}] deleted")


@users.command("list")
@_DATA_OPTION
def users_list(data: str) -> None:
    """List the users and their roles."""
    for name, user in sorted(_user_file(data).load().items()):
        click.echo(f"{name}\t{','.join(user['roles'])}")


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


def _register_transfer_commands() -> None:
    from leafsearch.transfer.commands import export_command, import_command

    main.add_command(export_command)
    main.add_command(import_command)


_register_transfer_commands()
