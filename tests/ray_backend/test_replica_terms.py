"""A copy refuses writes of a primary term older than one it has seen (a replaced primary that
does not know it yet), a recovering copy takes its primary's files in pieces, inside its own
folder only, and a primary's copy stops when its claim is lost or taken over: run on the actor's
classes in this process (Ray only wraps them)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from leafsearch.errors import ElasticError
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.shard_write import IndexColumns, ShardWrite
from leafsearch.ray_backend import actor as actor_module
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


class CopyMachine:
    """The recovering copy's machine in this process, for `actor._ask`: its `RecoveringCopy`, then
    the shard opened from the files. The first piece of a file it is sent waits until `go` is set
    (`waiting` is set then), so a recovery can be caught mid-copy."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.copy: RecoveringCopy | None = None
        self.opened: list[ShardActor] = []
        self.waiting, self.go = threading.Event(), threading.Event()
        self.finished = 0
        self._lock = threading.Lock()

    def ask(self, machine: object, key: object, method: str, args: tuple) -> object:
        if method == "start_recovery":
            folder, state, _, term = args
            with self._lock:
                if self.copy is not None:
                    self.copy.abandon()
                self.copy = RecoveringCopy(folder, state, 0, term)
            return None
        assert self.copy is not None
        if method == "recovery_file":
            if not self.go.is_set():
                self.waiting.set()
                assert self.go.wait(30)
            return self.copy.recovery_file(*args)
        assert method == "finish_recovery"
        copy = self.copy

        def open_shard() -> ShardActor:
            self.opened.append(ShardActor(str(copy.folder), copy.state_body, 0))
            return self.opened[-1]

        self.finished += 1
        return copy.finish(args[0], open_shard)


def test_a_copy_whose_claim_was_lost_stops_and_the_claim_that_took_it_over_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recovery's claim lost (its owner's renewal refused: `cancel_recovery`), or taken over by
    a later claim (its `recover_to`), stops the primary's copy before its next piece; the later
    claim's copy then runs to the end; an earlier or the same claim's `recover_to` is refused."""
    source = ShardActor(str(tmp_path / "source"), STATE, 0)
    machine = CopyMachine(tmp_path / "copy")
    monkeypatch.setattr(actor_module, "_ask", machine.ask)
    source.peer = lambda name: name
    folder = str(tmp_path / "copy")
    try:
        for n in range(20):
            put(source.shard, f"d{n}", {"n": n})
        source.shard.refresh()
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(source.recover_to, "m1", "r1", folder, STATE, 0, 1)
            assert machine.waiting.wait(30)  # (attempt 1 is sending its first piece)
            again = source.recover_to("m1", "r1", folder, STATE, 0, 1)
            assert isinstance(again, Refusal) and again.error.status == 409
            assert not source.cancel_recovery("r1", 2) and not source.cancel_recovery("r2", 1)
            later = pool.submit(source.recover_to, "m1", "r1", folder, STATE, 0, 2)
            machine.go.set()
            stopped, done = first.result(30), later.result(30)
        assert isinstance(stopped, Refusal) and "claim [1] was lost or taken over" in str(stopped.error)
        assert isinstance(done, dict) and done["files"] > 1 and machine.finished == 1
        assert machine.opened[-1].shard.current("d19") is not None  # (the copy has every document)
        assert source.tracked("r1")
        # The owner of claim 3 loses it mid-copy: the copy stops, nothing is finished.
        machine.go.clear()
        machine.waiting.clear()
        with ThreadPoolExecutor(1) as pool:
            third = pool.submit(source.recover_to, "m1", "r1", folder, STATE, 0, 3)
            assert machine.waiting.wait(30)
            assert source.cancel_recovery("r1", 3)
            machine.go.set()
            stopped = third.result(30)
        assert isinstance(stopped, Refusal) and "claim [3] was lost" in str(stopped.error)
        assert machine.finished == 1 and not source.tracked("r1")
        assert not source.cancel_recovery("r1", 3)  # (no longer running)
    finally:
        source.close_shard()
        for opened in machine.opened:
            opened.close_shard()
        if machine.copy is not None and machine.copy.successor is None:
            machine.copy.abandon()
