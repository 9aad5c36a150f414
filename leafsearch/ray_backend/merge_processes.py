"""How a machine actor's merge worker processes start: spawned, without Ray's worker script.

A spawned process re-runs its parent's main script before it unpickles anything (multiprocessing's
main fix-up, so that what the script defines can be found); in a Ray actor that script is Ray's
`default_worker.py`, so each merge process imported Ray: 0.47 s of CPU of its 0.7 s start, paid
again for every machine actor and each of its restarts (bench/RESULTS.md "The test suite",
"Session 21"). A merge runs functions of `leafsearch.index` only, which name no class of the
script. So the actor's processes are spawned as if its main module had no script: for the start
of each (a few milliseconds), `sys.modules["__main__"]` is a bare module, which the spawn's
preparation finds without a path or a name to send, and the child starts from
`multiprocessing.spawn` alone. Nothing of the actor reads `__main__` meanwhile (its calls come as
pickles of leafsearch's classes, channel.py); the lock keeps two starts from restoring each
other's stand-in.
"""

from __future__ import annotations

import sys
import threading
import types
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

#: Held while `sys.modules["__main__"]` is set aside: one process start at a time.
_MAIN_ASIDE = threading.Lock()


class _ProcessWithoutMain(SpawnProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        with _MAIN_ASIDE:
            main = sys.modules["__main__"]
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                return SpawnProcess._Popen(process_obj)
            finally:
                sys.modules["__main__"] = main


class SpawnWithoutMain(SpawnContext):
    """multiprocessing's `spawn` context, whose processes do not run the parent's main script."""

    Process = _ProcessWithoutMain
