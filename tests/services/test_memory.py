"""The allocator tuning every process of the server applies at start, and the trim after a heavy
request (services/memory.py)."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import pytest

from leafsearch.services import memory

#: Run in a fresh interpreter: 8 threads each allocate and free blocks from glibc's malloc (bytes
#: objects over pymalloc's 512 bytes) while the others hold theirs; then the thread arenas glibc
#: made are counted (their heaps start at a 64 MiB boundary, /proc/self/maps).
THREADS = """
import sys, threading
from leafsearch.services import memory
if sys.argv[1] == "tuned":
    memory.tune_allocator()
barrier = threading.Barrier(8)
def work():
    held = [bytes(4096) for _ in range(200)]
    barrier.wait()
    del held
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
heaps = 0
for line in open("/proc/self/maps"):
    fields = line.split()
    start = int(fields[0].split("-")[0], 16)
    if len(fields) == 5 and fields[1].startswith("rw") and start % (64 << 20) == 0:
        heaps += 1
print(heaps)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas, read from /proc")
def test_the_threads_of_a_tuned_process_share_the_arenas_they_allocate_from() -> None:
    def arenas(mode: str) -> int:
        run = subprocess.run(
            [sys.executable, "-c", THREADS, mode], capture_output=True, text=True, check=True
        )
        return int(run.stdout)

    assert arenas("tuned") <= 1  # ARENA_MAX: the main arena and one more
    assert arenas("default") > 1  # what the tuning changes: an arena of its own for most threads


def test_a_trim_collects_the_cycles_a_request_left_without_traversing_the_older_heap() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self
            self.held = b"x" * (8 << 20)  # a heavy request's memory (resident), held by a cycle

    trimmer = memory.Trimmer(growth=1 << 20)
    generations: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            generations.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        left = weakref.ref(Node())
        trimmer.after_request()
    finally:
        gc.callbacks.remove(seen)
    assert left() is None
    assert generations and max(generations) < 2  # the long-lived heap (the buffers) is not traversed
