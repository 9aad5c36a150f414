"""Search counters for `GET /_nodes/stats` (`indices.search`), as Elasticsearch names them."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from leafsearch.slowlog import phase_timed


class SearchStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters = {
            "query_total": 0,
            "query_time_in_millis": 0,
            "query_current": 0,
            "fetch_total": 0,
            "fetch_time_in_millis": 0,
            "fetch_current": 0,
            "scroll_total": 0,
            "scroll_time_in_millis": 0,
            "scroll_current": 0,
            "suggest_total": 0,
            "suggest_time_in_millis": 0,
            "suggest_current": 0,
        }

    @contextmanager
    def phase(self, name: str):
        """Count one query or fetch phase: `<name>_current` while it runs, then total and time."""
        with self._lock:
            self.counters[f"{name}_current"] += 1
        started = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            phase_timed(name, seconds)  # the request's slow log (leafsearch/slowlog.py)
            elapsed = int(seconds * 1000)
            with self._lock:
                self.counters[f"{name}_current"] -= 1
                self.counters[f"{name}_total"] += 1
                self.counters[f"{name}_time_in_millis"] += elapsed

    def scroll_opened(self) -> None:
        with self._lock:
            self.counters["scroll_current"] += 1

    def scroll_closed(self, lifetime_seconds: float) -> None:
        """Elasticsearch counts a scroll once, when it ends, with its whole lifetime as time."""
        with self._lock:
            self.counters["scroll_current"] -= 1
            self.counters["scroll_total"] += 1
            self.counters["scroll_time_in_millis"] += int(lifetime_seconds * 1000)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counters)
