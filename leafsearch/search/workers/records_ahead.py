"""The server process's thread that extends kept scrolls' records (`scroll_pit.extend_record`).

A search worker serving a scroll on a kept connection (parking.py) asks, halfway through the
batches the scroll's record names, for the record to name the next ones too; the record's write
and `fdatasync` happen here, off the worker reader thread that read the ask (it reads every
task's reply) and off the scroll's way: the worker goes on serving the batches named already, and
serves the new ones once the answer arrived. At most one ask per context is pending: another
meanwhile is answered None at once.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("leafsearch.search_workers")


class RecordsAhead:
    """One thread writing the records asked for, in turn; `written` counts those written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: set[int] = set()  # context numbers with an ask queued or being written
        self._queue: queue.SimpleQueue[tuple[int, Callable[[], Any], Callable[[Any], None]] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None
        self._closed = False
        self.written = 0

    def ask(self, ctx_id: int, write: Callable[[], Any], answer: Callable[[Any], None]) -> None:
        """Have `write` run on the thread, then `answer` called with its result (None when it
        failed, or when an ask of the same context is pending or the thread is closed: at once)."""
        with self._lock:
            refused = self._closed or ctx_id in self._pending
            if not refused:
                self._pending.add(ctx_id)
                if self._thread is None:
                    name = "leafsearch-records-ahead"
                    self._thread = threading.Thread(target=self._run, name=name, daemon=True)
                    self._thread.start()
                self._queue.put((ctx_id, write, answer))
        if refused:
            answer(None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=10)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            ctx_id, write, answer = item
            try:
                result = write()
            except Exception:  # noqa: BLE001 - the worker hands the connection back at the window's end
                log.exception("a kept scroll's record could not be extended")
                result = None
            with self._lock:
                self._pending.discard(ctx_id)
                if result is not None:
                    self.written += 1
            answer(result)
