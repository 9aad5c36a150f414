"""The renewal of a recovery's claim by its owner while the recovery runs (replication.py
`renew_recovery`; remote.py `RemoteIndex.recover`).

`LeaseRenewal` renews on a thread of its own, every `interval` seconds, until the recovery ends
(`stop`, or the block's end). A renewal refused (the claim is not its owner's any more, or it
expired: another coordinator may have taken it over) loses the claim at once; a renewal that
fails (the metadata actor restarting, a compare-and-set lost to other coordinators' changes too
often) is tried again at the next interval, and loses the claim only once the lease renewed last
has run out, when another coordinator may claim it. Either way `lost` is called once, on the
renewal's thread, and the renewals end: the owner stops its copy there (the primary's
`cancel_recovery`), since its stages could no longer apply. Why a thread rather than renewals
between the recovery's steps: its longest step is one call (the primary's copy of every file),
which the recovering thread waits for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

_log = logging.getLogger("leafsearch")


class LeaseRenewal:
    """Renews a lease of `lease` seconds every `interval` seconds (`renew`: whether it was
    renewed; it may raise) until `stop`; calls `lost` once if a renewal is refused, or if
    none succeeded for `lease` seconds (see the module's docstring). `clock`: monotonic seconds."""

    def __init__(
        self,
        renew: Callable[[], bool],
        lost: Callable[[], None],
        interval: float,
        lease: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._renew = renew
        self._lost = lost
        self._interval = interval
        self._lease = lease
        self._clock = clock
        self._stopped = threading.Event()
        #: Whether the lease was lost (then `lost` was called).
        self.lost = False
        self._thread = threading.Thread(target=self._run, name="leafsearch-recovery-lease", daemon=True)

    def __enter__(self) -> LeaseRenewal:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """No more renewals (the one running, if any, ends first)."""
        self._stopped.set()
        if self._thread.ident is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        renewed = self._clock()
        while not self._stopped.wait(self._interval):
            try:
                if self._renew():
                    renewed = self._clock()
                    continue
            except Exception as exc:  # (tried again next time, while the lease renewed last holds)
                _log.warning("a recovery's claim was not renewed: %s", exc)
                if self._clock() - renewed < self._lease:
                    continue
            if self._stopped.is_set():  # (the recovery ended meanwhile: its claim with it)
                return
            self.lost = True
            self._lost()
            return
