"""The data plane of a Ray cluster: a machine call's bytes on a direct socket, Ray for the rest.

Ray places the machine actors, restarts them and tells where they are; a machine call (the
pickled `ShardCall`s of one machine, `MachineActor.batch`) and its answer travel on a TCP
connection from the coordinator to the actor. Why: Ray's submission of a task cost the caller
about 0.4 ms of CPU per call, more than the rest of the call (bench/RESULTS.md "Shards as Ray
actors"); a framed message on an open socket costs a send and a receive.

- `ChannelServer` (in the machine actor): a listening socket on its Ray node's address, port 0,
  announced through Ray (`MachineActor.channel`). Each connection is authenticated with the
  cluster's secret (`multiprocessing.connection`'s HMAC challenge, both ways: pickles are only
  read from a peer holding the secret), then served on its own thread: a message in, its answer
  out, in turn.
- `Channels` (in the coordinator, one per `RayBackend`): per machine actor, its address (asked
  through Ray once, again after a failure: Ray restarted it, with a new address) and a pool of
  idle connections, one taken per call in flight (at most `MAX_CONNECTIONS` per machine).

Failures keep Ray's meaning (remote.py `UNAVAILABLE`): a connection refused, broken or closed
under a call raises `ChannelBroken`, a call not answered by its deadline `ChannelTimeout` (the
connection is dropped: its answer may still come). The caller resends a read (`MachineCall`),
never a write. TCP keepalive finds a peer whose machine vanished without closing the connection.
"""

from __future__ import annotations

import contextlib
import logging
import math
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import AuthenticationError, Connection, answer_challenge, deliver_challenge
from typing import Any

_log = logging.getLogger("leafsearch")

#: Connections one coordinator keeps to one machine actor at most: its calls in flight there
#: (the actor serves each connection on a thread of its own).
MAX_CONNECTIONS = 32
#: Seconds a new connection's authentication may take, on either side.
HANDSHAKE_SECONDS = 10.0
#: New connections a machine actor authenticates at once at most (each on a thread of its own
#: for up to `HANDSHAKE_SECONDS`): one more is closed at once, so peers that connect and never
#: authenticate cannot make it start threads without end. A coordinator opens at most
#: `MAX_CONNECTIONS` per machine, each authenticated in milliseconds.
MAX_HANDSHAKES = 64
#: TCP keepalive: probes after this many idle seconds, every `KEEPALIVE_INTERVAL`, and the
#: connection fails after `KEEPALIVE_PROBES` unanswered ones (a machine lost without a word).
KEEPALIVE_IDLE = 5
KEEPALIVE_INTERVAL = 2
KEEPALIVE_PROBES = 3

Address = tuple[str, int]


class ChannelBroken(ConnectionError):
    """The machine actor's connection could not be made, or broke under a call."""


class ChannelTimeout(TimeoutError):
    """The machine actor did not answer by the call's deadline."""


def _set_timeout(sock: socket.socket, seconds: float) -> None:
    """A blocking socket's receive timeout (0: none), kept on its descriptor: `Connection` reads
    the descriptor directly."""
    whole = int(seconds)
    option = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, option)


def _readable(conn: Connection, seconds: float) -> bool:
    """Whether `conn` has bytes to read (or its peer closed it) within `seconds`: one `poll`
    object, where `Connection.poll` builds a `selectors` selector each time (~2.5 us of CPU more;
    twice a call, and a search makes a call per machine plus the cluster version's)."""
    waiting = select.poll()
    waiting.register(conn.fileno(), select.POLLIN)
    return bool(waiting.poll(math.ceil(seconds * 1000)))


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", KEEPALIVE_IDLE),
        ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL),
        ("TCP_KEEPCNT", KEEPALIVE_PROBES),
    ):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


class ChannelServer:
    """A machine actor's listening socket (see the module's docstring); `handle` answers one
    message's bytes with the answer's."""

    def __init__(self, host: str, authkey: bytes, handle: Callable[[bytes], bytes]) -> None:
        self._authkey = authkey
        self._handle = handle
        self._socket = socket.create_server((host, 0), backlog=128)
        self.address: Address = self._socket.getsockname()[:2]
        self._closed = threading.Event()
        self._handshakes = threading.BoundedSemaphore(MAX_HANDSHAKES)
        threading.Thread(target=self._accept, name="leafsearch-channel", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                sock, _ = self._socket.accept()
            except OSError:  # closed
                return
            if not self._handshakes.acquire(blocking=False):
                _log.warning("machine channel: %d peers authenticating, another closed", MAX_HANDSHAKES)
                sock.close()
                continue
            threading.Thread(
                target=self._serve, args=(sock,), name="leafsearch-channel-conn", daemon=True
            ).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            conn = self._authenticate(sock)
        finally:
            self._handshakes.release()
        if conn is None:
            return
        try:
            while True:
                message = conn.recv_bytes()
                conn.send_bytes(self._handle(message))
        except (OSError, EOFError):  # the coordinator closed it (or went)
            pass
        finally:
            conn.close()

    def _authenticate(self, sock: socket.socket) -> Connection | None:
        """The connection once its peer proved it holds the secret (None: refused, closed)."""
        _tune(sock)
        _set_timeout(sock, HANDSHAKE_SECONDS)
        conn = Connection(sock.detach())
        try:
            deliver_challenge(conn, self._authkey)
            answer_challenge(conn, self._authkey)
        except (AuthenticationError, OSError, EOFError) as exc:  # a wrong secret, or a stalled peer
            _log.warning("machine channel: a connection was refused: %s", exc)
            conn.close()
            return None
        with socket.socket(fileno=conn.fileno()) as view:  # the same socket, to clear its timeout
            _set_timeout(view, 0)
            view.detach()
        return conn

    def close(self) -> None:
        self._closed.set()
        self._socket.close()


def connect(address: Address, authkey: bytes, timeout: float = HANDSHAKE_SECONDS) -> Connection:
    """An authenticated connection to a machine actor's channel (`ChannelBroken` when it cannot
    be made, or the actor refuses the secret; `ChannelTimeout` when it does not answer)."""
    try:
        sock = socket.create_connection(address, timeout=timeout)
    except OSError as exc:
        raise ChannelBroken(f"cannot connect to {address[0]}:{address[1]}: {exc}") from None
    sock.settimeout(None)
    _tune(sock)
    _set_timeout(sock, timeout)
    conn = Connection(sock.detach())
    try:
        answer_challenge(conn, authkey)
        deliver_challenge(conn, authkey)
    except BlockingIOError:  # (its receive timeout: the actor is there but does not answer)
        conn.close()
        raise ChannelTimeout(f"{address[0]}:{address[1]} did not answer the handshake in time") from None
    except (AuthenticationError, OSError, EOFError) as exc:
        conn.close()
        raise ChannelBroken(
            f"{address[0]}:{address[1]} refused the connection: {type(exc).__name__}"
        ) from None
    with socket.socket(fileno=conn.fileno()) as view:
        _set_timeout(view, 0)
        view.detach()
    return conn


class _Machine:
    """One machine actor's address and idle connections (under `Channels`' lock)."""

    def __init__(self) -> None:
        self.address: Address | None = None
        self.idle: list[Connection] = []
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)


class Pending:
    """A message sent on a connection, its answer not read yet (`answer`, once)."""

    def __init__(self, channels: Channels, machine: Any, conn: Connection) -> None:
        self._channels = channels
        self._machine = machine
        self._conn: Connection | None = conn

    def answer(self, deadline: float) -> bytes:
        """The answer's bytes; `ChannelBroken` / `ChannelTimeout` (deadline: monotonic)."""
        conn, self._conn = self._conn, None
        assert conn is not None, "answer read twice"
        channels, machine = self._channels, self._machine
        try:
            answer = conn.recv_bytes() if _readable(conn, max(0.0, deadline - time.monotonic())) else None
        except (OSError, EOFError) as exc:
            channels._drop(machine, conn, stale=True)
            raise ChannelBroken(f"the machine's connection broke: {type(exc).__name__}") from None
        except BaseException:
            channels._drop(machine, conn, stale=False)
            raise
        if answer is None:  # (its answer may still come: the connection cannot serve another)
            channels._drop(machine, conn, stale=False)
            raise ChannelTimeout("the machine did not answer in time")
        channels._give_back(machine, conn)
        return answer


class Channels:
    """A coordinator's connections to the machine actors (see the module's docstring).
    `authkey`: the cluster's secret; `locate`: a machine actor's channel address, asked through
    Ray (it waits while Ray restarts the actor, raising Ray's error when it cannot answer)."""

    def __init__(self, authkey: bytes, locate: Callable[[Any, float], Address]) -> None:
        self._authkey = authkey
        self._locate = locate
        self._lock = threading.Lock()
        self._machines: dict[Any, _Machine] = {}

    def _entry(self, machine: Any) -> _Machine:
        key = machine  # (a machine, cluster.py `Machine`, is its name; an actor handle its actor's id)
        with self._lock:
            entry = self._machines.get(key)
            if entry is None:
                entry = self._machines[key] = _Machine()
            return entry

    def send(self, machine: Any, message: bytes, deadline: float) -> Pending:
        """Send a message to a machine actor on an idle connection (a new one when none is;
        the address asked first when unknown); Ray's error when the address cannot be had,
        `ChannelBroken` when the message cannot be sent, `ChannelTimeout` when no connection
        frees by the deadline."""
        entry = self._entry(machine)
        if not entry.slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise ChannelTimeout("every connection to the machine is busy")
        try:
            conn = self._idle(entry) or self._open(machine, entry, deadline)
        except BaseException:
            entry.slots.release()
            raise
        try:
            conn.send_bytes(message)
        except OSError as exc:
            self._drop(machine, conn, stale=True)
            raise ChannelBroken(f"the machine's connection broke: {type(exc).__name__}") from None
        except BaseException:
            self._drop(machine, conn, stale=False)
            raise
        return Pending(self, machine, conn)

    def _idle(self, entry: _Machine) -> Connection | None:
        """An idle connection still open; one the actor closed (Ray restarted it: it is
        readable, at its end) drops them all, and the address."""
        while True:
            with self._lock:
                if not entry.idle:
                    return None
                conn = entry.idle.pop()
            try:
                closed = _readable(conn, 0)
            except OSError:
                closed = True
            if not closed:
                return conn
            conn.close()
            self._forget(entry)

    def _open(self, machine: Any, entry: _Machine, deadline: float) -> Connection:
        with self._lock:
            address = entry.address
        if address is None:
            address = self._locate(machine, deadline)
            with self._lock:
                entry.address = address
        try:
            return connect(address, self._authkey)
        except ChannelBroken:
            self._forget(entry)
            raise

    def _forget(self, entry: _Machine) -> None:
        """The actor's address is no longer trusted (its next call asks Ray), nor its idle
        connections."""
        with self._lock:
            entry.address = None
            idle, entry.idle = entry.idle, []
        for conn in idle:
            conn.close()

    def _give_back(self, machine: Any, conn: Connection) -> None:
        entry = self._entry(machine)
        with self._lock:
            entry.idle.append(conn)
        entry.slots.release()

    def _drop(self, machine: Any, conn: Connection, *, stale: bool) -> None:
        """A connection in use that cannot serve again, and its slot; `stale`: it broke, so the
        address goes too."""
        entry = self._entry(machine)
        conn.close()
        if stale:
            self._forget(entry)
        entry.slots.release()

    def close(self) -> None:
        with self._lock:
            machines, self._machines = list(self._machines.values()), {}
        for entry in machines:
            for conn in entry.idle:
                with contextlib.suppress(OSError):
                    conn.close()


def address_from_ray(actor: Any, deadline: float) -> Address:
    """An actor's channel address (its `channel` method), asked through Ray, which waits while
    it restarts; Ray's error when it cannot answer."""
    import ray

    asked = actor.channel.options(max_task_retries=-1).remote()
    return tuple(ray.get(asked, timeout=max(0.0, deadline - time.monotonic())))
