"""How much of the machine's CPU was idle lately: the cores' worth of idle time between two reads
of /proc/stat, read again at most every `WINDOW_SECONDS`.

Why: work moved from the server process to a worker process (bulk_offload.py) costs more CPU in
all (pickling both ways), so it only pays where a core would otherwise idle. On a machine whose
cores are busy (other processes, client processes on the same machine) it takes that CPU from
them. Where /proc/stat cannot be read (not Linux), nothing is known and the caller decides.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

#: How old a figure may be before the next call reads /proc/stat again.
WINDOW_SECONDS = 0.5


class IdleCpu:
    """The node's view of idle CPU (`WriteServices.idle_cpu`); thread-safe."""

    def __init__(self, path: Path = Path("/proc/stat"), clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._sample = self._read()
        self._when = clock()
        self._idle: float | None = None

    def idle_cores(self) -> float | None:
        """Cores' worth of CPU idle over the last window (1.5: one and a half cores idled); None
        when unknown (no /proc/stat, or no window measured yet)."""
        with self._lock:
            now = self._clock()
            if now - self._when >= WINDOW_SECONDS:
                sample = self._read()
                if sample is not None and self._sample is not None:
                    idle = sample[0] - self._sample[0]
                    total = sample[1] - self._sample[1]
                    self._idle = idle / total * sample[2] if total > 0 else None
                self._sample, self._when = sample, now
            return self._idle

    def _read(self) -> tuple[int, int, int] | None:
        """(idle jiffies, all jiffies, cpus) from /proc/stat: its first line sums every cpu
        (user nice system idle iowait irq softirq steal ...; idle and iowait are idle time)."""
        try:
            lines = self._path.read_text().splitlines()
        except OSError:
            return None
        fields = lines[0].split() if lines else []
        if len(fields) < 5 or fields[0] != "cpu":
            return None
        values = [int(v) for v in fields[1:9]]
        cpus = sum(1 for line in lines[1:] if line.startswith("cpu"))
        return values[3] + values[4], sum(values), max(cpus, 1)
