"""A shard's commits: decided under the shard lock, written and fsynced after it.

A commit (`commit.json`: segments, live-docs files, the first translog generation still needed)
costs several fsyncs: each new live-docs file, the commit file, the folder. Written under the
shard lock, every write to the shard (and, for a bulk request, the node's indexing slot) waited
through them. So the shard only *decides* a commit under its lock (`CommitPlan`: what to write,
every array it names already final, since live-docs arrays are replaced, never changed) and queues
it here; `Commits.write` writes the queue without the shard lock, from the request that made it
(in `Shard.sync`, after its own translog fsync) or the refresh that did.

Why this cannot lose an acknowledged write or leave a commit naming what is not on disk:
- **Acknowledgement never depends on a commit.** A write is acknowledged once its translog
  record is fsynced; a commit only lets older translog generations go.
- **A commit never gets ahead of the translog.** Its live docs hold the deletes of every
  operation applied before it was decided (an overwrite retires the old version), and the
  generations it keeps are where a recovery finds those operations again. So their records are
  made durable (`CommitPlan.logged`) before anything of the plan is written: else a crash after a
  commit written by a refresh or a merge, before the overwrite's own fsync, would keep the old
  version's delete and lose the new version's record, and the acknowledged old version with it.
- **Plans are written one at a time, in the order they were decided**, and a plan that fails stays
  first in the queue (raised to whoever wrote it, tried again by the next writer): a later plan
  may name a live-docs file an earlier plan writes, so it must never be written before it.
- **Within a plan**: its new live-docs files are written and fsynced, then `commit.json.tmp`,
  fsynced, renamed over `commit.json`, and the folder fsynced. Only then are the translog
  generations it covers deleted and the live-docs files the previous commit named and it does not
  removed. A crash anywhere before the rename leaves the previous commit, whose translog
  generations and live-docs files are all still there; after it, the new commit, whose segments
  were fsynced by the flush thread before they were installed and whose generations are the
  newest ones.
- **Segment folders** are deleted only when no Searcher and no shard list holds them; a merge,
  the one thing that takes segments out of the shard's list, lets them go only once its commit is
  written (`CommitPlan.after`, run by whichever thread writes it), and closing a shard writes its
  commit before letting its segments go.
- **Recovery** (`reopen`) takes the same lock: a commit being written finishes first, the plans
  still queued (decided from the state recovery throws away) are dropped, and the commit read is
  the last one written.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from leafsearch.common.durable import fsync_dir, private
from leafsearch.index.shard_stats import ShardStats
from leafsearch.index.translog import Translog


@dataclass(slots=True)
class CommitPlan:
    """A commit decided under the shard lock."""

    body: dict[str, Any]  # commit.json
    new_live: dict[str, np.ndarray]  # live-docs files it names that no earlier plan writes
    translog: Translog
    keep_from: int  # the first translog generation it does not cover
    logged: int  # the translog's position when it was decided: synced before it is written
    started: int  # perf_counter_ns when it was decided (the flush time counts from there)
    #: Run once the plan is written (a merge's: let the merged segments go).
    after: list[Callable[[], None]] = field(default_factory=list)


class Commits:
    """The commits of one shard, queued in order and written by one thread at a time."""

    def __init__(self, folder: Path, stats: ShardStats) -> None:
        self.folder = folder
        self.stats = stats
        self._queue: deque[CommitPlan] = deque()
        self._lock = threading.Lock()  # one writer at a time; the queue's head belongs to it
        self._durable_live: set[str] = set()  # live-docs files the commit on disk names

    def reopen(self) -> dict[str, Any]:
        """The commit on disk ({} for a new shard), once any commit being written is; the plans
        still queued are dropped, their `after` with them (the caller holds the shard lock and
        reloads its segments from the commit on disk)."""
        with self._lock:
            self._queue.clear()
            path = self.folder / "commit.json"
            commit = orjson.loads(path.read_bytes()) if path.exists() else {}
            self._durable_live = set(commit.get("live", {}).values())
            return commit

    def add(self, plan: CommitPlan) -> None:
        """Queue a plan (caller holds the shard lock, so plans queue in the order decided)."""
        self._queue.append(plan)

    def write(self, *, wait: bool = True) -> None:
        """Write every queued plan, in order. `wait=False`: return at once when another thread is
        writing; it writes what is queued, this caller's plans included (it looks at the queue
        again after letting go of the lock, and a plan queued while it held the lock is seen)."""
        while self._queue:
            if not self._lock.acquire(blocking=wait):
                return
            try:
                while self._queue:
                    plan = self._queue[0]
                    self._write(plan)  # raises: the plan stays first
                    self._queue.popleft()
                    for done in plan.after:
                        done()
            finally:
                self._lock.release()

    def _write(self, plan: CommitPlan) -> None:
        plan.translog.sync(plan.logged)
        for name, live in plan.new_live.items():
            with open(self.folder / name, "wb", opener=private) as fh:
                np.save(fh, live)
                fh.flush()
                os.fsync(fh.fileno())
        tmp = self.folder / "commit.json.tmp"
        try:
            with open(tmp, "wb", opener=private) as fh:
                fh.write(orjson.dumps(plan.body))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.folder / "commit.json")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(self.folder)
        plan.translog.drop_before(plan.keep_from)
        named = set(plan.body["live"].values())
        for old in self._durable_live - named:
            (self.folder / old).unlink(missing_ok=True)
        self._durable_live = named
        self.stats.add(flush_total=1, flush_time=time.perf_counter_ns() - plan.started)
