"""A background step of a shard that fails (memory above all, or the disk) fails alone (issue 24).

Each test injects the failure at one step, or at each allocation of a step in turn: writing a
segment (on the flush thread or under the lock), installing it, applying deletes, deciding and
writing a commit, publishing, rolling the translog, merging and installing a merge, closing. It
then checks that the step raised once, as Elasticsearch's error; that the shard is as it was
(realtime gets see every acknowledged write, searches the previous snapshot, nothing of the
step is left on disk); that the next attempt succeeds; and that after a crash and a reopen
every acknowledged document is there exactly once, in its last version.
"""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import leafsearch.index.commits as commits_module
import leafsearch.index.segment as segment_module
import leafsearch.index.segment_build as segment_build
import leafsearch.index.shard as shard_module
import leafsearch.index.translog as translog_module
from leafsearch.errors import FlushFailed, RefreshFailed, TranslogFailed
from leafsearch.index import merge_worker
from leafsearch.index.shard import Shard
from tests.concurrency import writers_beside_refresher
from tests.index.test_engine_shard import delete, flush_threads_done, parse, put


class Fault:
    """`target`, except that its calls numbered in `at` (from 1; None: every call) raise `error`
    instead; `when`: only the calls it holds for count (the others just run)."""

    def __init__(
        self,
        target: Callable[..., Any],
        at: set[int] | int | None = 1,
        error: BaseException | None = None,
        when: Callable[..., bool] = lambda *args, **kwargs: True,
    ) -> None:
        self.target = target
        self.at = {at} if isinstance(at, int) else at
        self.error = error if error is not None else MemoryError("injected: cannot allocate")
        self.when = when
        self.calls = 0
        self.fired = 0  # how many calls failed
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.when(*args, **kwargs):
            return self.target(*args, **kwargs)
        with self._lock:
            self.calls += 1
            failing = self.at is None or self.calls in self.at
            self.fired += failing
        if failing:
            raise self.error
        return self.target(*args, **kwargs)


class FaultyNumpy:
    """numpy as one module sees it, whose `at`-th function call raises MemoryError: an allocation
    failing at a chosen point of a step."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(np, name)
        if not callable(value) or isinstance(value, type):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.at:
                raise MemoryError(f"injected: numpy.{name} cannot allocate")
            return value(*args, **kwargs)

        return counted


@contextmanager
def numpy_failing(at: int) -> Iterator[FaultyNumpy]:
    """The shard module's numpy failing at its `at`-th call, within the block."""
    faulty = FaultyNumpy(at)
    shard_module.np = faulty  # type: ignore[assignment]
    try:
        yield faulty
    finally:
        shard_module.np = np


Expected = dict[str, dict]


def published(shard: Shard) -> Expected:
    """Every live document of the published snapshot, id -> source; an id seen twice fails."""
    searcher = shard.acquire_searcher()
    try:
        found: Expected = {}
        for view in searcher.views:
            ids = view.segment.doc_ids(view.live_docs)
            for doc_id, source in zip(ids, view.segment.sources(view.live_docs), strict=True):
                assert doc_id not in found, f"{doc_id} is published twice"
                found[doc_id] = orjson.loads(source)
        return found
    finally:
        searcher.release()


def assert_realtime(shard: Shard, expected: Expected, gone: set[str]) -> None:
    """Realtime gets answer every acknowledged write: each id's last version, deleted ids none."""
    with shard.lock:
        for doc_id, body in expected.items():
            state = shard.current(doc_id)
            assert state is not None and not state.deleted, doc_id
            assert orjson.loads(shard.get_source(state)) == body
        for doc_id in gone:
            state = shard.current(doc_id)
            assert state is None or state.deleted, doc_id


def assert_nothing_left(shard: Shard) -> None:
    """No temporary file or folder, and no segment folder the shard does not hold (but one the
    flush thread is writing)."""
    flush_threads_done(shard)
    held = set(shard._seg_refs) | {flushing.folder.name for flushing in shard._flushing}
    for entry in shard.folder.iterdir():
        assert not entry.name.endswith(".tmp"), entry.name
        if entry.name.startswith("seg_"):
            assert entry.name in held, entry.name


def close_unless_crashed(shard: Shard) -> None:
    if not shard.translog._file.closed:
        shard.close()


def crash_and_reopen(shard: Shard) -> Shard:
    """The process dies (no close, nothing more written), and the shard opens from its folder."""
    flush_threads_done(shard)
    shard.translog._file.close()
    shard.services.close()  # the dead process's flush thread and merge worker
    return Shard(shard.folder, 0, parse)


@pytest.fixture
def history(tmp_path: Path) -> Iterator[tuple[Shard, Expected, set[str]]]:
    """A shard with two committed segments, deletes applied to one and pending for the other,
    and a buffer holding new documents, overwrites of segment and buffer documents and a delete
    of a buffer document: (shard, what it must hold, ids it must not)."""
    shard = Shard(tmp_path / "s", 0, parse)
    expected: Expected = {}

    def write(doc_id: str, body: dict) -> None:
        put(shard, doc_id, body)
        expected[doc_id] = body

    def remove(doc_id: str) -> None:
        delete(shard, doc_id)
        expected.pop(doc_id)

    for i in range(8):
        write(f"a{i}", {"msg": f"first {i}", "n": i, "tag": "a"})
    shard.refresh()
    remove("a0")
    for i in range(6):
        write(f"b{i}", {"msg": f"second {i}", "n": 100 + i, "tag": "b"})
    shard.refresh()
    remove("a1")  # pending: applied at the next refresh
    remove("b0")
    write("a2", {"msg": "a2 again", "n": 2, "tag": "x"})
    write("b1", {"msg": "b1 again", "n": 101, "tag": "x"})
    for i in range(5):
        write(f"c{i}", {"msg": f"third {i}", "n": 200 + i, "tag": "c"})
    write("c1", {"msg": "c1 again", "n": 201, "tag": "x"})
    remove("c2")
    yield shard, expected, {"a0", "a1", "b0", "c2"}
    close_unless_crashed(shard)


def _failed_refresh_left_the_shard_as_it_was(
    shard: Shard, expected: Expected, gone: set[str], before: Expected
) -> Shard:
    """After a refresh failed: the shard as before it; the next refresh publishes everything;
    after a crash, everything is there again. Returns the reopened shard (to close)."""
    assert published(shard) == before
    assert_realtime(shard, expected, gone)
    assert_nothing_left(shard)
    assert shard.refresh()
    assert published(shard) == expected
    assert_realtime(shard, expected, gone)
    assert_nothing_left(shard)
    reopened = crash_and_reopen(shard)
    assert published(reopened) == expected
    assert_realtime(reopened, expected, gone)
    return reopened


def _segment_writer_fault(where: str, error: BaseException, monkeypatch: pytest.MonkeyPatch) -> Fault:
    """A fault in writing a segment from a buffer: before anything is written (`start`), with the
    temporary folder half written (`writing`), or opening the folder once renamed (`opening`)."""
    if where == "start":
        fault = Fault(shard_module.segment_from_buffer, error=error)
        monkeypatch.setattr(shard_module, "segment_from_buffer", fault)
    elif where == "writing":
        fault = Fault(segment_module.array_files.compact, at=3, error=error)
        monkeypatch.setattr(segment_module.array_files, "compact", fault)
    else:
        fault = Fault(segment_build.Segment, error=error)
        monkeypatch.setattr(segment_build, "Segment", fault)
    return fault


@pytest.mark.parametrize(
    ("where", "error"),
    [
        ("start", MemoryError("Unable to allocate 1.00 GiB for an array")),
        ("writing", MemoryError("Unable to allocate 1.00 GiB for an array")),
        ("writing", OSError(28, "No space left on device")),
        ("opening", MemoryError("Unable to allocate 1.00 GiB for an array")),
    ],
)
def test_a_segment_the_flush_thread_cannot_write_fails_one_refresh_and_the_next_publishes_it(
    history, where, error, monkeypatch
):
    """The reported failure: a MemoryError writing the buffer as a segment made every later
    refresh raise the same MemoryError (a 500 on every `_refresh`) until a restart."""
    shard, expected, gone = history
    before = published(shard)
    fault = _segment_writer_fault(where, error, monkeypatch)
    with pytest.raises(FlushFailed) as failed:
        shard.refresh()
    assert (failed.value.status, failed.value.error_type) == (500, "flush_failed_engine_exception")
    assert type(error).__name__ in failed.value.reason and fault.fired == 1
    _failed_refresh_left_the_shard_as_it_was(shard, expected, gone, before).close()


def test_a_segment_written_under_the_lock_that_fails_leaves_its_documents_in_the_buffer(history, monkeypatch):
    """Closing writes the buffer as a segment under the shard lock (as a refresh does for the
    writes that arrived while it waited, and a merge before it installs): when that fails, the
    shard still closes, raises, and every acknowledged document is in the translog it reopens."""
    shard, expected, gone = history
    _segment_writer_fault("writing", MemoryError("Unable to allocate"), monkeypatch)
    with pytest.raises(FlushFailed):
        shard.close()
    assert shard.closed and shard.translog._file.closed
    assert not [e for e in shard.folder.iterdir() if e.name.endswith(".tmp")]
    reopened = Shard(shard.folder, 0, parse)
    assert published(reopened) == expected
    assert_realtime(reopened, expected, gone)
    reopened.close()


def test_a_failed_allocation_anywhere_in_a_refresh_leaves_the_shard_as_it_was(tmp_path):
    """Each numpy call of the shard's refresh (the live docs of a new segment, copies of live-docs
    arrays for deletes, counting a snapshot's documents) fails in turn: each time the refresh
    raises an Elasticsearch error and changes nothing, and the next one publishes everything."""
    failures = 0
    for at in range(1, 100):
        folder = tmp_path / str(at)
        shard = Shard(folder, 0, parse)
        expected: Expected = {}
        for i in range(6):
            put(shard, str(i), {"n": i})
            expected[str(i)] = {"n": i}
        shard.refresh()
        delete(shard, "0")  # pending for the segment
        put(shard, "1", {"n": 10})  # an overwrite of a segment document
        put(shard, "6", {"n": 6})
        put(shard, "6", {"n": 16})  # an overwrite within the buffer
        put(shard, "7", {"n": 7})
        delete(shard, "7")  # a delete within the buffer
        expected.pop("0")
        expected.update({"1": {"n": 10}, "6": {"n": 16}})
        before = published(shard)
        try:
            with numpy_failing(at) as faulty:
                shard.refresh()
        except (RefreshFailed, FlushFailed) as exc:
            assert exc.status == 500 and "MemoryError" in exc.reason
            failures += 1
        else:
            assert faulty.calls < at  # no call failed: every point has been tried
            assert published(shard) == expected
            shard.close()
            break
        _failed_refresh_left_the_shard_as_it_was(shard, expected, {"0", "7"}, before).close()
    assert failures >= 4  # the segment's live docs, the deletes' copies, the snapshot's counts


def test_a_commit_that_cannot_be_decided_keeps_the_live_docs_files_it_would_have_named(tmp_path, monkeypatch):
    """Deciding a commit names new live-docs files for changed segments. When that fails, the
    shard must not believe the new arrays are in the files of the commit before: the next commit
    would then name a file without the latest deletes, and a restart bring them back."""
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(5):
        put(shard, str(i), {"n": i})
    shard.refresh()
    delete(shard, "0")
    shard.refresh()  # the segment's first live-docs file
    delete(shard, "1")
    monkeypatch.setattr(shard_module, "CommitPlan", Fault(shard_module.CommitPlan))
    with pytest.raises(RefreshFailed) as failed:
        shard.refresh()
    assert failed.value.error_type == "refresh_failed_engine_exception"
    expected = {str(i): {"n": i} for i in range(2, 5)}
    before = {**expected, "1": {"n": 1}}
    _failed_refresh_left_the_shard_as_it_was(shard, expected, {"0", "1"}, before).close()


def test_a_snapshot_that_cannot_be_built_leaves_the_previous_one_published(history, monkeypatch):
    shard, expected, gone = history
    before, refs = published(shard), dict(shard._seg_refs)
    monkeypatch.setattr(shard_module, "Searcher", Fault(shard_module.Searcher))
    with pytest.raises(RefreshFailed):
        shard.refresh()
    assert {name: count for name, count in shard._seg_refs.items() if name in refs} == refs
    _failed_refresh_left_the_shard_as_it_was(shard, expected, gone, before).close()


@pytest.mark.parametrize("error", [MemoryError("Unable to allocate"), OSError(28, "No space left on device")])
def test_a_commit_that_cannot_be_written_is_reported_and_written_by_the_next_refresh(
    history, error, monkeypatch
):
    """Writing the commit comes after the snapshot is published: the refresh reports it, the
    commit on disk stays the one before (and no temporary file), and the next refresh, even with
    nothing new to publish, writes it."""
    shard, expected, gone = history
    on_disk = (shard.folder / "commit.json").read_bytes()
    live_file = lambda fh, *_, **__: Path(fh.name).name.startswith("live_")  # noqa: E731
    fault = Fault(commits_module.np.save, error=error, when=live_file)
    monkeypatch.setattr(commits_module.np, "save", fault)  # the live-docs file of a deletion
    with pytest.raises(FlushFailed) as failed:
        shard.refresh()
    assert failed.value.error_type == "flush_failed_engine_exception" and fault.fired == 1
    assert published(shard) == expected
    assert (shard.folder / "commit.json").read_bytes() == on_disk
    assert not (shard.folder / "commit.json.tmp").exists()
    assert not shard.refresh()  # nothing new to publish; the commit is written
    assert not shard.commits._queue
    assert (shard.folder / "commit.json").read_bytes() != on_disk
    reopened = crash_and_reopen(shard)
    assert published(reopened) == expected
    assert_realtime(reopened, expected, gone)
    reopened.close()


def test_a_write_is_acknowledged_when_the_commit_it_decided_cannot_be_written(tmp_path, monkeypatch):
    """A write that hands a full buffer over decides a commit, which its request writes after
    its translog fsync: the write is durable then, so that commit failing does not fail it."""
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 4)
    shard = Shard(tmp_path / "s", 0, parse)
    fault = Fault(commits_module.fsync_dir, at=None, error=OSError(5, "Input/output error"))
    monkeypatch.setattr(commits_module, "fsync_dir", fault)
    expected = {}
    for i in range(10):
        put(shard, str(i), {"n": i})  # acknowledged: each returns
        expected[str(i)] = {"n": i}
    assert fault.fired
    monkeypatch.undo()
    assert shard.refresh()
    assert not shard.commits._queue
    reopened = crash_and_reopen(shard)
    assert published(reopened) == expected
    reopened.close()


def test_a_translog_generation_that_cannot_be_started_fails_no_write(tmp_path, monkeypatch):
    """Handing a full buffer over starts a translog generation. When its file cannot be
    created, the write that filled the buffer is acknowledged all the same (it is in the current
    generation), the buffer stays, and a later hand-over or refresh succeeds."""
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 4)
    shard = Shard(tmp_path / "s", 0, parse)
    fault = Fault(open, at={1, 2}, error=OSError(24, "Too many open files"))
    monkeypatch.setattr(translog_module, "open", fault, raising=False)
    expected = {}
    for i in range(8):
        put(shard, str(i), {"n": i})
        expected[str(i)] = {"n": i}
    assert fault.fired == 2 and not shard.translog.failed
    assert shard.refresh()
    assert published(shard) == expected
    reopened = crash_and_reopen(shard)
    assert published(reopened) == expected
    reopened.close()


def test_a_translog_folder_that_cannot_be_fsynced_fails_the_translog_which_recovers(tmp_path, monkeypatch):
    """The new generation's name may not survive a crash when the folder's fsync failed: the
    translog fails (what was written before is durable, the write that filled the buffer with
    it), and the next request reopens the shard from disk."""
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 4)
    shard = Shard(tmp_path / "s", 0, parse)
    fault = Fault(translog_module.fsync_dir, error=OSError(5, "Input/output error"))
    monkeypatch.setattr(translog_module, "fsync_dir", fault)
    expected = {}
    for i in range(4):
        put(shard, str(i), {"n": i})  # the fourth hands over: its generation fails
        expected[str(i)] = {"n": i}
    assert fault.fired and shard.translog.failed
    for i in range(4, 8):
        put(shard, str(i), {"n": i})  # the first recovers the shard from disk
        expected[str(i)] = {"n": i}
    assert not shard.translog.failed
    assert shard.refresh()
    assert published(shard) == expected
    reopened = crash_and_reopen(shard)
    assert published(reopened) == expected
    reopened.close()


def test_a_recovery_whose_replay_fails_is_done_again_by_the_next_request(tmp_path, monkeypatch):
    """A failed translog makes the shard reopen from disk, replaying the translog; when the
    replay runs out of memory half way, the shard stays failed (nothing half replayed is
    served), and the next request replays again."""
    shard = Shard(tmp_path / "s", 0, parse)
    expected = {str(i): {"n": i} for i in range(6)}
    for doc_id, body in expected.items():
        put(shard, doc_id, body)
    monkeypatch.setattr(shard, "_parse", Fault(parse, at=3))  # the replay's third document
    real_fsync = translog_module.os.fsync
    monkeypatch.setattr(
        translog_module.os, "fsync", Fault(real_fsync, error=OSError(5, "Input/output error"))
    )
    with pytest.raises(TranslogFailed) as failed:
        put(shard, "lost", {"n": -1})  # not acknowledged; the shard reopens, and the replay fails
    monkeypatch.setattr(translog_module.os, "fsync", real_fsync)
    assert "could not recover yet: MemoryError" in failed.value.reason and shard.translog.failed
    put(shard, "6", {"n": 6})  # replays again first
    expected["6"] = {"n": 6}
    assert_realtime(shard, expected, {"lost"})
    assert shard.refresh()
    assert published(shard) == expected
    reopened = crash_and_reopen(shard)
    assert published(reopened) == expected
    reopened.close()


# ---- merges -------------------------------------------------------------------------------


class Mergeable:
    """A shard of eleven one-refresh segments of four documents, ten of which the policy merges
    (a delete pending for the eleventh keeps it out), with deletes applied and unrefreshed
    writes. `merge` is the merge worker's `merge` run in this process; the first time it runs, a write
    deletes a document of a merged segment, as one arriving while the worker merges: the merged
    segment must carry that delete over."""

    def __init__(self, shard: Shard, expected: Expected, gone: set[str]) -> None:
        self.shard, self.expected, self.gone = shard, expected, gone

    @classmethod
    def build(cls, folder: Path) -> Mergeable:
        built = cls(Shard(folder, 0, parse), {}, set())
        for segment in range(11):
            for i in range(4):
                built.write(f"{segment}-{i}", {"msg": f"doc {segment} {i}", "n": segment * 10 + i})
            built.shard.refresh()
        built.remove("0-0")
        built.remove("5-1")
        built.shard.refresh()
        built.remove("3-2")  # pending: segment 3 stays out of the merge
        built.write("3-0", {"n": 300})  # an overwrite: its new version in the buffer
        built.write("new", {"n": 1})
        return built

    def copy(self, folder: Path) -> Mergeable:
        """The same documents in a shard opened from a copy of this one's folder (its unrefreshed
        writes replayed from the translog), at a fraction of the cost of building them."""
        shutil.copytree(self.shard.folder, folder)
        return Mergeable(Shard(folder, 0, parse), dict(self.expected), set(self.gone))

    def write(self, doc_id: str, body: dict) -> None:
        put(self.shard, doc_id, body)
        self.expected[doc_id] = body
        self.gone.discard(doc_id)

    def remove(self, doc_id: str) -> None:
        delete(self.shard, doc_id)
        self.expected.pop(doc_id)
        self.gone.add(doc_id)

    def merge(
        self,
        parts: list[tuple[Path, np.ndarray | None]],
        folder: Path,
        index_sort: Any = None,
        codec: str = "zstd",
    ) -> Any:
        if "6-3" not in self.gone:
            self.remove("6-3")
        return merge_worker._merge_folders(
            [(str(p), live) for p, live in parts], str(folder), index_sort, codec
        )

    def failed_and_changed_nothing(self, names: list[str]) -> None:
        """After a merge failed: the same segments (and the buffer's, when writing it, a step of
        its own, came before the failure), nothing of the merge on disk; the next merge and
        refresh publish everything, as does a reopen after a crash."""
        shard = self.shard
        current = [s.name for s in shard.segments]
        assert [name for name in current if name in names] == names and len(current) <= len(names) + 1
        assert not shard.merging
        assert_realtime(shard, self.expected, self.gone)
        assert_nothing_left(shard)
        assert shard.maybe_merge()
        assert len(shard.segments) < len(names)
        shard.refresh()
        assert published(shard) == self.expected
        assert_nothing_left(shard)
        reopened = crash_and_reopen(shard)
        assert published(reopened) == self.expected
        assert_realtime(reopened, self.expected, self.gone)
        reopened.close()


@pytest.fixture
def mergeable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Mergeable]:
    built = Mergeable.build(tmp_path / "s")
    monkeypatch.setattr(built.shard.services.merges, "merge", built.merge)
    yield built
    close_unless_crashed(built.shard)


def test_a_merge_that_fails_in_the_worker_leaves_no_folder_and_the_next_merges(mergeable, monkeypatch):
    names = [s.name for s in mergeable.shard.segments]

    def out_of_memory(parts, folder: Path, index_sort=None, codec="zstd"):
        half = folder.with_name(folder.name + ".tmp")  # what the worker wrote before it failed
        half.mkdir()
        (half / "ids.npy").write_bytes(b"\x93NUMPY")
        raise MemoryError("Unable to allocate 2.00 GiB for an array")

    monkeypatch.setattr(mergeable.shard.services.merges, "merge", out_of_memory)
    with pytest.raises(MemoryError):
        mergeable.shard.maybe_merge()
    monkeypatch.setattr(mergeable.shard.services.merges, "merge", mergeable.merge)
    mergeable.failed_and_changed_nothing(names)


def test_a_failed_allocation_anywhere_in_a_merge_installs_nothing(tmp_path, monkeypatch):
    """Each numpy call of the shard while it merges (counting the documents, writing the buffer
    and applying its deletes before installing, the merged segment's live docs with the deletes
    made meanwhile) fails in turn."""
    template = Mergeable.build(tmp_path / "template")
    failures = 0
    for at in range(1, 100):
        built = template.copy(tmp_path / str(at))
        monkeypatch.setattr(built.shard.services.merges, "merge", built.merge)
        names = [s.name for s in built.shard.segments]
        try:
            with numpy_failing(at) as faulty:
                built.shard.maybe_merge()
        except (FlushFailed, MemoryError):
            failures += 1
        else:
            assert faulty.calls < at  # no call failed: every point has been tried
            built.shard.refresh()
            assert published(built.shard) == built.expected
            built.shard.close()
            break
        built.failed_and_changed_nothing(names)
    assert failures >= 6
    template.shard.close()


def test_a_merge_keeps_the_buffer_and_its_commit_the_translog_that_holds_it(mergeable):
    """A merge no longer writes the buffer as a segment under the shard lock: the buffer's
    documents stay in it, and the merge's commit keeps the translog generation they are in, so
    a crash right after the merge loses none of them."""
    shard = mergeable.shard
    buffered = len(shard.buffer)
    assert buffered and shard.maybe_merge()
    assert len(shard.buffer) == buffered
    mergeable.write("after", {"n": 2})
    reopened = crash_and_reopen(shard)
    try:
        assert_realtime(reopened, mergeable.expected, mergeable.gone)
        reopened.refresh()
        assert published(reopened) == mergeable.expected
    finally:
        reopened.close()


def _commit_rename_fails(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Make every rename of a commit into place fail; returns what makes them work again."""
    replace = commits_module.os.replace
    error = OSError(5, "Input/output error")
    fault = Fault(replace, at=None, error=error, when=lambda src, dst: str(dst).endswith("commit.json"))
    monkeypatch.setattr(commits_module.os, "replace", fault)
    return lambda: monkeypatch.setattr(commits_module.os, "replace", replace)


def test_a_merge_whose_commit_cannot_be_written_keeps_the_merged_segments_until_it_is(mergeable, monkeypatch):
    """The merge is installed, but its commit is not written: the commit on disk still names the
    merged segments, so their folders stay until a later writer of commits writes it; then they
    go."""
    shard = mergeable.shard
    names = [s.name for s in shard.segments]
    repair = _commit_rename_fails(monkeypatch)
    with pytest.raises(FlushFailed):
        shard.maybe_merge()
    repair()
    merged_away = [n for n in names if n not in {s.name for s in shard.segments}]
    assert len(merged_away) == 10 and not shard.merging
    assert orjson.loads((shard.folder / "commit.json").read_bytes())["segments"] == names
    assert all((shard.folder / name).is_dir() for name in merged_away)
    assert_realtime(shard, mergeable.expected, mergeable.gone)
    shard.refresh()  # publishes the merge and writes its commit
    assert published(shard) == mergeable.expected
    assert not shard.commits._queue
    assert not any((shard.folder / name).exists() for name in merged_away)
    reopened = crash_and_reopen(shard)
    assert published(reopened) == mergeable.expected
    reopened.close()


def test_a_crash_before_a_merges_commit_is_written_reopens_the_merged_segments(mergeable, monkeypatch):
    repair = _commit_rename_fails(monkeypatch)
    with pytest.raises(FlushFailed):
        mergeable.shard.maybe_merge()
    repair()
    reopened = crash_and_reopen(mergeable.shard)
    assert published(reopened) == mergeable.expected
    assert_realtime(reopened, mergeable.expected, mergeable.gone)
    reopened.close()


# ---- several writers beside a failing flush -----------------------------------------------


def test_writers_beside_refreshes_whose_segments_fail_lose_nothing(tmp_path, monkeypatch):
    """Four writers index, overwrite and delete while full buffers are handed over and refreshes
    run; writing segments fails with MemoryError several times meanwhile. Every write is
    acknowledged (none waits on a segment), failed refreshes report it, and in the end the shard,
    and the shard reopened after a crash, hold each id's last acknowledged version once."""
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 25)
    fault = Fault(shard_module.segment_from_buffer, at={2, 3, 6, 9})
    monkeypatch.setattr(shard_module, "segment_from_buffer", fault)
    shard = Shard(tmp_path / "s", 0, parse)
    results: list[Expected] = [{} for _ in range(4)]

    def writer(w: int) -> None:
        mine = results[w]
        for round_ in range(4):
            for i in range(40):
                doc_id = f"w{w}-{i}"
                if round_ == 3 and i % 5 == 0:
                    delete(shard, doc_id)
                    mine.pop(doc_id, None)
                else:
                    body = {"n": round_ * 1000 + i, "tag": f"w{w}"}
                    put(shard, doc_id, body)
                    mine[doc_id] = body

    refresh_failures = writers_beside_refresher(
        [functools.partial(writer, w) for w in range(4)], shard.refresh
    )
    assert fault.fired >= 2
    assert all(isinstance(e, FlushFailed) for e in refresh_failures)
    monkeypatch.undo()
    expected = {k: v for mine in results for k, v in mine.items()}
    gone = {f"w{w}-{i}" for w in range(4) for i in range(0, 40, 5)} - set(expected)
    shard.refresh()
    assert published(shard) == expected
    assert_realtime(shard, expected, gone)
    assert_nothing_left(shard)
    reopened = crash_and_reopen(shard)
    assert published(reopened) == expected
    assert_realtime(reopened, expected, gone)
    reopened.close()


def test_no_failure_is_raised_twice(history, monkeypatch):
    """One failed segment write is reported by one refresh: the one after waits for the new
    attempt instead of raising the old error again."""
    shard, expected, gone = history
    fault = Fault(shard_module.segment_from_buffer)
    monkeypatch.setattr(shard_module, "segment_from_buffer", fault)
    raised: list[BaseException] = []
    for _ in range(3):
        try:
            shard.refresh()
        except FlushFailed as exc:
            raised.append(exc)
    assert len(raised) == 1 and fault.calls == 2
    assert published(shard) == expected
