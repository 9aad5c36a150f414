"""The allocator tuning every process of the server applies at start, and the trim after a heavy
request (services/memory.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

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


#: Run in a fresh interpreter: in the test process, other tests' threads (a Ray driver's, a
#: server's) allocate meanwhile, so the collector may run on their allocations and move the cycle
#: to the oldest generation before the trim, or their frees may hide the request's growth. Prints
#: whether the cycle was collected and the oldest generation a collection traversed.
CYCLE = """
import gc, weakref
from leafsearch.services import memory
class Node:
    def __init__(self):
        self.me = self
        self.held = b"x" * (8 << 20)  # a heavy request's memory (resident), held by a cycle
trimmer = memory.Trimmer(growth=1 << 20)
generations = []
def seen(phase, info):
    if phase == "start":
        generations.append(info["generation"])
gc.callbacks.append(seen)
try:
    left = weakref.ref(Node())
    trimmer.after_request()
finally:
    gc.callbacks.remove(seen)
print(left() is None, max(generations, default=-1))
"""


def test_a_trim_collects_the_cycles_a_request_left_without_traversing_the_older_heap() -> None:
    ran = subprocess.run([sys.executable, "-c", CYCLE], capture_output=True, text=True, check=True)
    collected, oldest = ran.stdout.split()
    assert collected == "True"
    assert 0 <= int(oldest) < 2  # the long-lived heap (the buffers) is not traversed


#: Run in a fresh interpreter (no other thread allocating, as a Ray driver's would in the test
#: process): a trimmer's kept /proc/self/statm read before and after 96 MiB are touched and freed.
STATM = """
from leafsearch.services import memory
trimmer = memory.Trimmer(growth=32 << 20)
before = memory.anonymous_rss(trimmer._statm)
held = bytearray(96 << 20)
held[::4096] = b"x" * len(held[::4096])
grown = memory.anonymous_rss(trimmer._statm)
fresh = memory.anonymous_rss()
trimmer.after_request()
del held
print(before, grown, fresh, trimmer.trims, trimmer.baseline, memory.anonymous_rss(trimmer._statm))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/statm")
def test_the_trimmer_reads_the_heap_again_through_its_kept_statm_and_trims_after_growth() -> None:
    """A request's check reads /proc/self/statm through the file the trimmer keeps open: each
    read is the process's memory now (not the first read's), so growth past the threshold trims."""
    ran = subprocess.run([sys.executable, "-c", STATM], capture_output=True, text=True, check=True)
    before, grown, fresh, trims, baseline, freed = map(int, ran.stdout.split())
    assert grown - before >= 90 << 20
    assert abs(grown - fresh) < 8 << 20  # the same figure as a fresh read
    assert trims == 1 and baseline >= before + (90 << 20)
    assert freed < grown - (64 << 20)
