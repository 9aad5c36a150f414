"""The shards of a Ray machine actor share its merge worker (ray_backend/actor.py `MachineActor`):
each spawned merge process is an interpreter that imports Ray again (multiprocessing re-runs the
actor's main script, Ray's worker), so one per shard copy spawned as many as the machine held.
Run here on the actor's class in this process (Ray only wraps it), as tests/ray_backend/
test_actor_failures.py: both shards merge in the shared worker, the end of one (its folder
deleted) waits for its own merge and leaves the worker to the other, which merges on in it."""

from __future__ import annotations

from pathlib import Path

from leafsearch.index.merge_policy import MERGE_FACTOR
from leafsearch.index.merge_worker import MergeWorker
from leafsearch.ray_backend.actor import ShardActor
from leafsearch.search.workers.mirror import IndexState
from tests.concurrency import wait_for
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
