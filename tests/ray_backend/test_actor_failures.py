"""A shard actor's background steps fail as a local shard's do (issue 24), run here on the
actor's class in this process (Ray only wraps it): a refresh that fails answers its error as a
value the coordinator raises, the next refresh succeeds, and closing or deleting a shard whose
flush fails still closes it (its operations in its translog) or deletes it."""

from __future__ import annotations

from pathlib import Path

import leafsearch.index.shard as shard_module
from leafsearch.errors import FlushFailed
from leafsearch.ray_backend.actor import Refusal, ShardActor
from leafsearch.search.workers.mirror import IndexState
from tests.index.test_background_failures import Fault, published
from tests.index.test_engine_shard import put

STATE = IndexState("uuid", "t", {"index.refresh_interval": "-1"}, {}, 1, 0)
DOCS = {str(i): {"n": i} for i in range(5)}


def _actor(folder: Path) -> ShardActor:
    actor = ShardActor(str(folder), STATE, 0)
    for doc_id, body in DOCS.items():
        put(actor.shard, doc_id, body)
    return actor


def test_a_refresh_that_fails_in_an_actor_answers_its_error_and_the_next_succeeds(tmp_path, monkeypatch):
    actor = _actor(tmp_path / "a")
    fault = Fault(shard_module.segment_from_buffer)
    monkeypatch.setattr(shard_module, "segment_from_buffer", fault)
    try:
        answer = actor.refresh()
        assert isinstance(answer, Refusal) and isinstance(answer.error, FlushFailed)
        assert published(actor.shard) == {}
        assert actor.refresh() is None
        assert published(actor.shard) == DOCS
    finally:
        actor.close_shard()


def test_a_shard_actor_whose_flush_fails_closes_all_the_same_and_reopens_everything(tmp_path, monkeypatch):
    actor = _actor(tmp_path / "a")
    monkeypatch.setattr(shard_module, "segment_from_buffer", Fault(shard_module.segment_from_buffer))
    actor.close_shard()  # logged, not raised: the coordinator ends the actor next
    assert actor.shard.closed
    monkeypatch.undo()
    reopened = ShardActor(str(tmp_path / "a"), STATE, 0)
    try:
        reopened.refresh()
        assert published(reopened.shard) == DOCS
    finally:
        reopened.close_shard()


def test_a_shard_actor_whose_flush_fails_is_deleted_all_the_same(tmp_path, monkeypatch):
    actor = _actor(tmp_path / "index" / "a")
    monkeypatch.setattr(shard_module, "segment_from_buffer", Fault(shard_module.segment_from_buffer))
    actor.destroy()
    assert not (tmp_path / "index").exists()
