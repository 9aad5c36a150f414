"""A copy refuses writes of a primary term older than one it has seen (a replaced primary that
does not know it yet), and a recovering copy takes its primary's files in pieces, inside its own
folder only: run on the actor's classes in this process (Ray only wraps them)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from leafsearch.errors import ElasticError
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.shard_write import IndexColumns, ShardWrite
from leafsearch.ray_backend.actor import RecoveringCopy, Refusal, ShardActor
from leafsearch.ray_backend.replication import Replicated, Replication
from leafsearch.search.workers.mirror import IndexState
from tests.index.test_replicated_writes import put

STATE = IndexState("uuid", "t", {"index.refresh_interval": "-1"}, {}, 1, 0)


def column_write(actor: ShardActor, doc_id: str) -> ShardWrite:
    batch = parse_batch(actor.index.mapping, [orjson.dumps({"n": 1})])
    return ShardWrite("t", "uuid", 0, (), batch, IndexColumns([doc_id], [None], [False], [False], [0]))


def test_a_copy_refuses_an_older_primary_term_and_changes_nothing(tmp_path: Path) -> None:
    source = ShardActor(str(tmp_path / "source"), STATE, 0)
    copy = ShardActor(str(tmp_path / "copy"), STATE, 0)
    try:
        assert copy.replicate(put(source.shard, "a", {"n": 1}), 2) is None and copy.term == 2
        answer = copy.replicate(put(source.shard, "b", {"n": 2}), 1)
        assert isinstance(answer, Refusal) and "primary term [1] is too old" in str(answer.error)
        assert copy.shard.current("b") is None and copy.shard.current("a") is not None
        # As a primary, it refuses a coordinator's write of an older term too, before applying it.
        refused = copy.write(column_write(copy, "c"), Replication(1, ()))
        assert isinstance(refused, Refusal) and copy.shard.current("c") is None
        # The current term, no replica to reach: applied, answered with no copy failed.
        done = copy.write(column_write(copy, "c"), Replication(2, ()))
        assert isinstance(done, Replicated) and done.failed == () and copy.shard.current("c") is not None
    finally:
        source.close_shard()
        copy.close_shard()


def test_a_recovering_copy_takes_files_in_pieces_and_only_inside_its_folder(tmp_path: Path) -> None:
    copy = RecoveringCopy(str(tmp_path / "copy"), STATE, 0, 1)
    try:
        copy.recovery_file("seg_1/postings", 0, b"abc")
        copy.recovery_file("seg_1/postings", 3, b"def")
        copy.recovery_file("seg_1/empty", 0, b"")
        assert (tmp_path / "copy" / "shard" / "seg_1" / "postings").read_bytes() == b"abcdef"
        assert (tmp_path / "copy" / "shard" / "seg_1" / "empty").read_bytes() == b""
        with pytest.raises(ElasticError, match="is not a file of a segment"):
            copy.recovery_file("../../outside", 0, b"x")
        assert not (tmp_path / "outside").exists()
    finally:
        copy.abandon()
