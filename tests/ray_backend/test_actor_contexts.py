"""A shard actor's PIT and scroll contexts across its restart, on the actor's class in this process
(Ray only wraps it; a restart is a new actor on the same folder): a context opened with a name
keeps its snapshot on disk, a new actor serves the coordinator's id of it by that name, with the
documents of the moment it opened; freeing it deletes the pin; a coordinator that started asks it
to free every context of before that it does not hold, and only those."""

from __future__ import annotations

import time
from pathlib import Path

from leafsearch.ray_backend.actor import ShardActor
from leafsearch.search.shard_api import ShardContextId
from tests.index.test_engine_shard import put
from tests.ray_backend.test_actor_failures import STATE

DOCS = 5


def _actor(folder: Path) -> ShardActor:
    actor = ShardActor(str(folder), STATE, 0)
    for i in range(DOCS):
        put(actor.shard, str(i), {"n": i})
    actor.refresh()
    return actor


def _pins(folder: Path) -> list[str]:
    return sorted(p.stem for p in (folder / "shard" / "pins").glob("*.npz"))


def _restart(actor: ShardActor) -> ShardActor:
    """The actor's process ends (its pins stay on disk) and Ray starts it again on its folder."""
    actor.close_shard()
    return ShardActor(str(actor.folder), STATE, 0)


def test_a_restarted_actor_serves_a_named_context_by_its_name_with_its_snapshot(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    actor = _actor(folder)
    context = actor.open_context(None, "ab12")
    assert isinstance(context, ShardContextId) and _pins(folder) == ["ab12"]
    put(actor.shard, "later", {"n": 99})
    actor.refresh()
    actor = _restart(actor)
    try:
        assert actor.shard.doc_count() == DOCS + 1
        # The coordinator's id names the old process's session: found by its name.
        assert actor._pinned(context, None).searcher.max_doc == DOCS
        assert actor._pinned(context, None).searcher.max_doc == DOCS  # taken back once
        assert actor.stats()["open_contexts"] == 1
        # An unnamed context of the old process (a one-shot search's) is gone.
        unnamed = ShardContextId(context.session, context.number + 1)
        assert actor.free_context(unnamed) is False
        assert actor.free_context(context) is True and _pins(folder) == []
        assert actor.stats()["open_contexts"] == 0
        assert actor.free_context(context) is False
    finally:
        actor.close_shard()


def test_a_pin_never_taken_back_is_freed_by_its_name(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    actor = _actor(folder)
    context = actor.open_context(None, "cd34")
    actor = _restart(actor)
    try:
        assert _pins(folder) == ["cd34"]
        assert actor.free_context(context) is True and _pins(folder) == []
    finally:
        actor.close_shard()


def test_retain_frees_the_contexts_of_before_the_coordinator_does_not_hold(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    actor = _actor(folder)
    kept = actor.open_context(None, "aa")
    actor.open_context(None, "bb")  # freed by the coordinator while the actor was down
    actor = _restart(actor)
    try:
        live = actor.open_context(None, "cc")  # taken back before the coordinator restarted
        actor._pinned(ShardContextId("", 0, name="cc"), None)
        one_shot = actor.open_context(None)  # a search of the coordinator that died
        since = time.time()
        newer = actor.open_context(None, "dd")  # the new coordinator's, should retain come late
        assert actor.retain_contexts(["aa"], since) == 3  # bb (on disk), cc, the one-shot
        assert _pins(folder) == ["aa", "dd"]
        assert actor._pinned(kept, None).searcher.max_doc == DOCS
        assert actor._pinned(newer, None).searcher.max_doc == DOCS
        assert actor.free_context(one_shot) is False and actor.free_context(live) is False
    finally:
        actor.close_shard()
