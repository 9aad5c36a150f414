"""The shards of a Ray machine actor share its merge worker (ray_backend/actor.py `MachineActor`):
each spawned merge process is an interpreter that imports the segment code, so one per shard copy
spawned as many as the machine held; and they start without the actor's main script, Ray's worker
(ray_backend/merge_processes.py), which would import Ray in each.
Run here on the actor's class in this process (Ray only wraps it), as tests/ray_backend/
test_actor_failures.py: both shards merge in the shared worker, the end of one (its folder
deleted) waits for its own merge and leaves the worker to the other, which merges on in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from leafsearch.index.merge_policy import MERGE_FACTOR
from leafsearch.index.merge_worker import MergeWorker
from leafsearch.ray_backend.actor import ShardActor
from leafsearch.search.workers.mirror import IndexState
from tests.concurrency import wait_for
from tests.conftest import server_env
from tests.index.test_background_failures import published
from tests.index.test_engine_shard import put

STATE = IndexState("uuid", "t", {"index.refresh_interval": "-1"}, {}, 1, 0)


def _segments(actor: ShardActor, first: int, docs: dict[str, dict]) -> None:
    """`MERGE_FACTOR` segments of one document each (a merge's worth), numbered from `first`."""
    for n in range(first, first + MERGE_FACTOR):
        docs[str(n)] = {"n": n}
        put(actor.shard, str(n), docs[str(n)])
        assert actor.refresh() is None


def _merged(actor: ShardActor) -> bool:
    return len(actor.shard.segments) < MERGE_FACTOR


def test_a_machines_shards_merge_in_its_one_worker_and_one_shards_end_leaves_it_to_the_others(
    tmp_path: Path,
) -> None:
    merges = MergeWorker(workers=2)
    a = ShardActor(str(tmp_path / "index" / "a"), STATE, 0, merges)
    b = ShardActor(str(tmp_path / "b"), STATE, 1, merges)
    try:
        assert a.shard_services.merges is merges and b.shard_services.merges is merges
        docs_a: dict[str, dict] = {}
        docs_b: dict[str, dict] = {}
        _segments(a, 0, docs_a)
        _segments(b, 0, docs_b)
        wait_for(lambda: _merged(a) and _merged(b))  # (each shard's merge loop, every 0.5 s)
        assert published(a.shard) == docs_a and published(b.shard) == docs_b
        pool = merges._executor()
        assert len(pool._processes) <= 2  # (not one a shard)

        # a's end: its folder goes once its merge in flight is done; the worker stays b's.
        _segments(a, MERGE_FACTOR, docs_a)
        a.destroy()
        assert not (tmp_path / "index").exists()
        _segments(b, MERGE_FACTOR, docs_b)
        wait_for(lambda: _merged(b))
        assert published(b.shard) == docs_b
        assert merges._executor() is pool and len(pool._processes) <= 2
    finally:
        a.close_shard()
        b.close_shard()
        merges.close()


#: A stand-in for Ray's worker script (`default_worker.py`), the main script of a machine actor's
#: process: it starts a process of `context` and notes in the file `sys.argv[1]` names when a
#: spawned child runs it again (as multiprocessing's `__mp_main__`).
_ACTOR_SCRIPT = """
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

if __name__ == "__mp_main__":
    Path(sys.argv[1]).write_text("run again in " + str(os.getpid()))
else:
    from leafsearch.ray_backend.merge_processes import SpawnWithoutMain

    main = sys.modules["__main__"]
    context = SpawnWithoutMain() if sys.argv[2] == "without-main" else get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        assert pool.submit(os.getpid).result() != os.getpid()
    assert sys.modules["__main__"] is main
"""


@pytest.mark.parametrize("context", ["without-main", "spawn"])
def test_merge_processes_start_without_running_the_actors_main_script(tmp_path: Path, context: str) -> None:
    """Ray's worker script imports Ray: a merge process that ran it again paid that import (0.47 s
    of CPU) before its first merge. `spawn`, the control, shows that the script would run."""
    script = tmp_path / "worker_script.py"
    script.write_text(_ACTOR_SCRIPT)
    marker = tmp_path / "run-again"
    done = subprocess.run(
        [sys.executable, str(script), str(marker), context],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert marker.exists() is (context == "spawn")
