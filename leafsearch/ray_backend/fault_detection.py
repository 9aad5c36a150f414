"""Which machines of a Ray cluster have failed, as one coordinator sees them: Elasticsearch's
follower checks, run by each coordinator over the machines its indices' copies are on.

- **A check** is a ping on a connection of its own to the machine actor's channel (channel.py;
  the actor answers it on that connection's thread, beside its pool: a machine busy with
  searches still answers), answered with the actor's incarnation (a new one each time Ray starts
  it). One thread per machine checks it every `interval` after the last answer, or at once when
  a request to it failed (`suspect`). Cost: a send and a receive a second per machine.
- **Failed** (`failed`) means, as Elasticsearch's leader removing a follower: the machine did not
  answer `retry_count` checks in a row, each within `timeout`; or its connection broke or could
  not be made (the process died: Elasticsearch fails a disconnected node at once); or Ray no
  longer lists a node with its resource (it left); or it answered as another incarnation (Ray
  restarted its actor: its copies reopened from disk, but a write caught by the crash may be in
  one copy's translog and not another's, so its primaries are failed as a restarted node's
  are). **One slow answer never fails a machine**: the request it fails fails alone (a search
  shard in `_shards.failed`, a write 503), and the shard map is left alone.
- **On a failure** each listener (`listen`: every `RemoteIndex`) is told once, on the check's
  thread: it promotes an in-sync replica in place of each primary there (replication.py). A
  machine that answers again is no longer failed; its copies left out of the in-sync set catch
  up from their primary (remote.py `reconcile`).
- **Settings** (cluster settings, dynamic in leafsearch, static node settings in Elasticsearch):
  `cluster.fault_detection.follower_check.interval` (1s), `.timeout` (10s), `.retry_count` (3):
  a machine that stops answering is failed after about 3 × 11 s, one killed within `interval`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Protocol

from leafsearch.ray_backend.channel import Address, ChannelTimeout, connect

if TYPE_CHECKING:
    from leafsearch.common.settings import ClusterSettings

_log = logging.getLogger("leafsearch")

#: A check's message: a machine actor answers it with its incarnation (actor.py `MachineActor`).
PING = b"leafsearch-follower-check"
#: How soon a changed `interval` applies to a check waiting for its next.
SETTINGS_SECONDS = 1.0
#: How long `close` waits for a check in flight.
CLOSE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class FollowerCheck:
    """The checks' settings (Elasticsearch's `cluster.fault_detection.follower_check.*`)."""

    interval: float = 1.0
    timeout: float = 10.0
    retry_count: int = 3


def follower_check(settings: ClusterSettings) -> FollowerCheck:
    """The checks' settings as the cluster's settings say now."""
    key = "cluster.fault_detection.follower_check."
    return FollowerCheck(
        settings.get(key + "interval"), settings.get(key + "timeout"), settings.get(key + "retry_count")
    )


class Unanswered(TimeoutError):
    """The machine did not answer a check within its timeout."""


class Disconnected(ConnectionError):
    """The machine's connection broke or could not be made."""


class Listener(Protocol):
    def machine_failed(self, machine: str) -> None: ...


class MachineLink:
    """A machine's check connection (see the module's docstring): `locate` tells the actor's
    channel address (through Ray: it waits while Ray restarts the actor, and raises when the
    machine left). A check not answered in time leaves its answer owed on the connection: the
    next check reads it first, so a stalled machine is never reconnected to (a connection's
    handshake would stall too)."""

    def __init__(self, locate: Callable[[float], Address], authkey: bytes) -> None:
        self._locate = locate
        self._authkey = authkey
        self._conn: Connection | None = None
        self._owed = 0

    def ping(self, deadline: float) -> bytes:
        """The machine's incarnation; `Unanswered` or `Disconnected`."""
        try:
            if self._conn is None:
                address = self._locate(deadline)
                self._conn = connect(address, self._authkey, max(0.01, deadline - time.monotonic()))
                self._owed = 0
            conn = self._conn
            conn.send_bytes(PING)
            while True:
                if not conn.poll(max(0.0, deadline - time.monotonic())):
                    self._owed += 1
                    raise Unanswered("the machine did not answer its check in time")
                answer = conn.recv_bytes()
                if not self._owed:
                    return answer
                self._owed -= 1
        except (TimeoutError, ChannelTimeout) as exc:  # (Ray's GetTimeoutError is one)
            raise Unanswered(str(exc)) from None
        except Exception as exc:  # broken, refused, its actor ended or unschedulable, its machine left
            self.close()
            raise Disconnected(f"{type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()


class _Watched:
    """A machine's checks' state (under `FailureDetector._lock`)."""

    def __init__(self, name: str, link: MachineLink) -> None:
        self.name = name
        self.link = link
        self.incarnation: bytes | None = None
        self.misses = 0
        #: Why it failed (None: it did not).
        self.failure: str | None = None
        self.started = 0  # checks started ...
        self.checks = 0  # ... and done (`verdict` waits for one started after it asked)
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None


class FailureDetector:
    """A coordinator's follower checks (see the module's docstring). `link`: a machine's
    `MachineLink`; `members`: the machines Ray lists an alive node of; `settings`: the checks'
    current settings. `background` False: no threads, a caller runs `check` (tests)."""

    def __init__(
        self,
        link: Callable[[str], MachineLink],
        members: Callable[[], set[str]],
        settings: Callable[[], FollowerCheck],
        *,
        background: bool = True,
    ) -> None:
        self._link = link
        self._members = members
        self.settings = settings
        self._background = background
        self._lock = threading.Condition()
        self._watched: dict[str, _Watched] = {}
        self._listeners: weakref.WeakSet[Listener] = weakref.WeakSet()
        self._stop = threading.Event()

    def listen(self, listener: Listener) -> None:
        """`listener.machine_failed(machine)` on each failure from now on (held weakly)."""
        with self._lock:
            self._listeners.add(listener)

    def watch(self, machine: str) -> None:
        """Check `machine` from now on (its first check at once)."""
        with self._lock:
            if machine in self._watched or self._stop.is_set():
                return
            watched = self._watched[machine] = _Watched(machine, self._link(machine))
            if self._background:
                watched.thread = threading.Thread(
                    target=self._run, args=(watched,), name="leafsearch-follower-check", daemon=True
                )
                watched.thread.start()

    def failed(self, machine: str) -> bool:
        """Whether the machine is failed now (one not watched has not)."""
        watched = self._watched.get(machine)
        return watched is not None and watched.failure is not None

    def failures(self) -> dict[str, str]:
        """The failed machines, each with why."""
        with self._lock:
            return {name: w.failure for name, w in self._watched.items() if w.failure is not None}

    def suspect(self, machine: str) -> None:
        """A request to the machine failed: check it now rather than at its next interval."""
        watched = self._watched.get(machine)
        if watched is not None:
            watched.wake.set()

    def verdict(self, machine: str, deadline: float) -> bool:
        """Whether the machine is failed, after a check started now, waited for until `deadline`
        (monotonic; past it, what is known then)."""
        watched = self._watched.get(machine)
        if watched is None:
            return False
        with self._lock:
            needed = watched.started + 1  # (not one in flight: it may have been answered before)
            watched.wake.set()
            while watched.checks < needed and watched.failure is None:
                left = deadline - time.monotonic()
                if left <= 0 or not self._lock.wait(left):
                    break
            return watched.failure is not None

    def _run(self, watched: _Watched) -> None:
        while not self._stop.is_set():
            try:
                self.check(watched.name)
            except Exception:  # pragma: no cover - a listener's failure: the next check goes on
                _log.exception("checking machine [%s] failed", watched.name)
            checked = time.monotonic()
            while not (self._stop.is_set() or watched.wake.is_set()):
                left = checked + self.settings().interval - time.monotonic()
                if left <= 0:
                    break
                watched.wake.wait(min(left, SETTINGS_SECONDS))
            watched.wake.clear()

    def check(self, machine: str) -> None:
        """One check of a watched machine (see the module's docstring); listeners told of a
        failure."""
        watched = self._watched[machine]
        settings = self.settings()
        with self._lock:
            watched.started += 1
        failure = None
        try:
            incarnation = watched.link.ping(time.monotonic() + settings.timeout)
        except Unanswered:
            watched.misses += 1
            if watched.misses >= settings.retry_count:
                failure = f"no answer to {watched.misses} checks in a row"
            elif machine not in self._members():
                failure = "left the cluster"
        except Disconnected as exc:
            failure = "left the cluster" if machine not in self._members() else f"disconnected ({exc})"
        else:
            watched.misses = 0
            if watched.incarnation not in (None, incarnation):
                failure = "restarted"
            watched.incarnation = incarnation
        with self._lock:
            newly = failure is not None and watched.failure is None
            if failure == "restarted" or (failure is None and watched.failure is not None):
                _log.warning("machine [%s] answers again", machine)
                watched.failure = None  # (a restart: failed once, now serving again)
            elif failure is not None and watched.failure is None:
                watched.failure = failure
            watched.checks += 1
            self._lock.notify_all()
            listeners = list(self._listeners) if newly and not self._stop.is_set() else []
        if newly:
            _log.warning("machine [%s] failed: %s", machine, failure)
        for listener in listeners:
            listener.machine_failed(machine)

    def close(self) -> None:
        """Stop the checks and close their connections."""
        self._stop.set()
        with self._lock:
            watched = list(self._watched.values())
        for each in watched:
            each.wake.set()
        for each in watched:
            if each.thread is not None:
                each.thread.join(timeout=CLOSE_SECONDS)
            each.link.close()
