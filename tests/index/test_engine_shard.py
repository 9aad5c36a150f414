"""The storage engine in-process: translog recovery, torn tails, snapshots, merges, file lifetimes."""

from __future__ import annotations

import orjson
import pytest

from leafsearch.errors import FlushFailed
from leafsearch.index.analysis import analyze
from leafsearch.index.parsed import ParsedDoc
from leafsearch.index.shard import Shard


def parse(source: bytes, doc_id: str | None = None) -> ParsedDoc:
    obj = orjson.loads(source)
    tokens = analyze(obj.get("msg", ""))
    return ParsedDoc(
        source=source,
        text={"msg": (tokens, list(range(len(tokens))))} if tokens else {},
        keyword={"tag": [obj["tag"]]} if "tag" in obj else {},
        long={"n": [obj["n"]]} if "n" in obj else {},
    )


def put(shard: Shard, doc_id: str, body: dict) -> int:
    source = orjson.dumps(body)
    with shard.writing() as point:
        prior = shard.current(doc_id)
        version = prior.version + 1 if prior is not None and prior.version > 0 else 1
        seq = shard.index(doc_id, parse(source), None, prior, version)
    shard.sync(point)
    return seq


def delete(shard: Shard, doc_id: str) -> None:
    with shard.writing() as point:
        prior = shard.current(doc_id)
        shard.delete(doc_id, prior, (prior.version + 1) if prior else 1)
    shard.sync(point)


def visible_ids(shard: Shard) -> set[str]:
    searcher = shard.acquire_searcher()
    try:
        out: set[str] = set()
        for view in searcher.views:
            out.update(view.segment.doc_ids(view.live_docs))
        return out
    finally:
        searcher.release()


def test_unrefreshed_writes_survive_reopen_without_close(tmp_path):
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(50):
        put(shard, str(i), {"msg": f"hello {i}", "n": i})
    delete(shard, "7")
    # Simulate a crash: no close(), no refresh; only the fsynced translog remains.
    shard.translog._file.close()
    reopened = Shard(tmp_path / "s", 0, parse)
    ids = visible_ids(reopened)
    assert ids == {str(i) for i in range(50)} - {"7"}
    state = reopened.current("3")
    assert state is not None and not state.deleted
    assert orjson.loads(reopened.get_source(state)) == {"msg": "hello 3", "n": 3}
    reopened.close()


def test_torn_translog_tail_is_dropped(tmp_path):
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(10):
        put(shard, str(i), {"n": i})
    shard.translog._file.close()
    tlog = sorted((tmp_path / "s" / "translog").glob("*.tlog"))[-1]
    data = tlog.read_bytes()
    tlog.write_bytes(data[:-7])  # cut the last record in the middle
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == {str(i) for i in range(9)}
    # The torn record is gone from the file: new writes append after whole records only.
    put(reopened, "x", {"n": 99})
    reopened.translog._file.close()
    again = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(again) == {str(i) for i in range(9)} | {"x"}
    again.close()


def test_snapshot_is_frozen_across_updates_deletes_and_merge(tmp_path):
    shard = Shard(tmp_path / "s", 0, parse)
    for batch in range(12):
        for i in range(10):
            put(shard, f"{batch}-{i}", {"msg": "old", "n": batch})
        shard.refresh()
    old = shard.acquire_searcher()
    old_folders = [v.segment.folder for v in old.views]
    for batch in range(12):
        put(shard, f"{batch}-0", {"msg": "new", "n": -1})
        delete(shard, f"{batch}-1")
    shard.refresh()
    while shard.maybe_merge():
        shard.refresh()
    assert len(shard.segments) < 12
    # The old snapshot still sees the old documents and their sources.
    seen = {}
    for view in old.views:
        ids, sources = view.segment.doc_ids(view.live_docs), view.segment.sources(view.live_docs)
        for doc_id, src in zip(ids, sources, strict=True):
            seen[doc_id] = orjson.loads(src)
    assert len(seen) == 120
    assert seen["0-0"] == {"msg": "old", "n": 0}
    assert seen["5-1"] == {"msg": "old", "n": 5}
    assert all(f.exists() for f in old_folders)
    old.release()
    # Released: merged-away segment folders are deleted.
    assert not all(f.exists() for f in old_folders)
    ids = visible_ids(shard)
    assert len(ids) == 108 and "3-1" not in ids
    state = shard.current("3-0")
    assert orjson.loads(shard.get_source(state)) == {"msg": "new", "n": -1}
    shard.close()


def test_merge_keeps_postings_and_doc_values(tmp_path):
    shard = Shard(tmp_path / "s", 0, parse)
    for batch in range(10):
        for i in range(5):
            put(shard, f"{batch}-{i}", {"msg": f"alpha beta w{batch}", "tag": f"t{i}", "n": batch * 10 + i})
        shard.refresh()
    delete(shard, "4-4")
    shard.refresh()
    assert shard.maybe_merge()
    shard.refresh()
    searcher = shard.acquire_searcher()
    try:
        assert len(searcher.views) == 1
        seg = searcher.views[0].segment
        assert seg.max_doc == 49
        col = seg.column("msg")
        docs, freqs = col.postings("w4")
        assert sorted(seg.doc_ids(docs)) == ["4-0", "4-1", "4-2", "4-3"]
        assert freqs.tolist() == [1, 1, 1, 1]
        assert searcher.doc_freq("msg", "alpha") == 49
        n = seg.column("n").doc_values
        assert sorted(n.values.tolist()) == sorted(
            b * 10 + i for b in range(10) for i in range(5) if (b, i) != (4, 4)
        )
        tag = seg.column("tag")
        assert tag.terms.tolist() == [b"t0", b"t1", b"t2", b"t3", b"t4"]
    finally:
        searcher.release()
    shard.close()


def test_reopen_after_clean_close_keeps_live_docs(tmp_path):
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(20):
        put(shard, str(i), {"n": i})
    shard.refresh()
    delete(shard, "4")
    put(shard, "5", {"n": 500})
    shard.close()
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == {str(i) for i in range(20)} - {"4"}
    assert orjson.loads(reopened.get_source(reopened.current("5"))) == {"n": 500}
    assert reopened.current("5").version == 2
    reopened.close()


@pytest.mark.parametrize("n", [1, 33, 64])
def test_sources_roundtrip_across_blocks(tmp_path, n):
    shard = Shard(tmp_path / "s", 0, parse)
    bodies = {str(i): {"n": i, "pad": "x" * (i % 7)} for i in range(n)}
    for doc_id, body in bodies.items():
        put(shard, doc_id, body)
    shard.refresh()
    searcher = shard.acquire_searcher()
    seg = searcher.views[0].segment
    ids, sources = seg.doc_ids(range(n)), seg.sources(list(range(n)))
    got = {d: orjson.loads(s) for d, s in zip(ids, sources, strict=True)}
    assert got == bodies
    searcher.release()
    shard.close()


def test_full_buffers_are_committed_and_recovery_replays_past_the_threshold(tmp_path, monkeypatch):
    import leafsearch.index.shard as shard_module

    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 10)
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(50):
        put(shard, str(i), {"n": i})
    # Full buffers were handed to the flush threads without a refresh (at 10 documents, or at 20
    # while the previous one was still being written: at least three hand-overs); the write after
    # they are written installs their segments and commits them, so the translog holds only what
    # came after them.
    flush_threads_done(shard)
    put(shard, "50", {"n": 50})
    committed = orjson.loads((tmp_path / "s" / "commit.json").read_bytes())["segments"]
    assert len(committed) >= 2
    shard.translog._file.close()  # crash
    # Recovery replays more operations than the threshold without committing in the middle.
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 2)
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == {str(i) for i in range(51)}
    reopened.close()


def flush_threads_done(shard: Shard) -> None:
    """Wait until the flush threads wrote what they were given: a task per thread, each waiting
    for the others, runs only once every thread is done with what came before."""
    import threading

    from leafsearch.index.shard_services import FLUSH_THREADS

    together = threading.Barrier(FLUSH_THREADS)
    pool = shard.services.flusher()
    for waiting in [pool.submit(together.wait, 30) for _ in range(FLUSH_THREADS)]:
        waiting.result()


class HeldFlush:
    """Holds the flush thread before it writes (`holding` is set once it waits): `release()` lets
    it write, `abandon()` makes the write in flight give up (as a crash would) and lets later ones
    through."""

    def __init__(self) -> None:
        import threading

        self._go = threading.Event()
        self._write = True
        self.holding = threading.Event()

    def release(self) -> None:
        self._go.set()

    def abandon(self) -> None:
        self._write = False
        self._go.set()

    def wrap(self, write):
        import threading

        def held(buffer, folder, index_sort=None, codec="zstd"):
            if threading.current_thread().name.startswith("leafsearch-flush"):
                self.holding.set()
                assert self._go.wait(30)
                if not self._write:
                    self._write = True
                    raise RuntimeError("abandoned")
            return write(buffer, folder, index_sort, codec)

        return held


@pytest.fixture
def held_flush(monkeypatch):
    import leafsearch.index.shard as shard_module

    held = HeldFlush()
    monkeypatch.setattr(shard_module, "segment_from_buffer", held.wrap(shard_module.segment_from_buffer))
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 10)
    yield held
    held.abandon()


def test_a_buffer_in_flight_stays_readable_and_writable(tmp_path, held_flush):
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(12):  # the first ten go to the flush thread, which holds them
        put(shard, str(i), {"n": i})
    (flushing,) = shard._flushing
    assert not flushing.built.done()
    # Realtime reads and version checks see the documents in flight.
    with shard.lock:
        state = shard.current("3")
        assert (state.version, orjson.loads(shard.get_source(state))) == (1, {"n": 3})
    put(shard, "3", {"n": 300})
    delete(shard, "4")
    with shard.lock:
        assert shard.current("3").version == 2 and shard.current("4").deleted
    held_flush.release()
    shard.refresh()  # installs the flushed segment with its deletes, then writes the rest
    assert visible_ids(shard) == {str(i) for i in range(12)} - {"4"}
    with shard.lock:
        assert orjson.loads(shard.get_source(shard.current("3"))) == {"n": 300}
        assert shard.current("3").version == 2
    shard.close()


def test_a_full_buffer_takes_writes_while_the_flush_threads_write_the_previous_ones(tmp_path, held_flush):
    """A write that fills the buffer while an earlier one is still being written does not wait
    for it (it would hold the shard lock, and every other write behind it, through the segment's
    disk writes): the buffer takes writes up to twice its limit, and is then handed over too while
    fewer than `MAX_FLUSHING` are; only when that many are does a write wait."""
    import threading

    from leafsearch.index.shard import MAX_FLUSHING

    shard = Shard(tmp_path / "s", 0, parse)
    # Ten handed over to the flush threads, which hold them, then twenty at a time.
    for i in range(10 + 20 * (MAX_FLUSHING - 1)):
        put(shard, str(i), {"n": i})
    flushing = shard._flushing
    assert len(flushing) == MAX_FLUSHING and len(shard.buffer) == 0
    first = 10 + 20 * (MAX_FLUSHING - 1)
    writer = threading.Thread(target=lambda: [put(shard, str(i), {"n": i}) for i in range(first, first + 19)])
    writer.start()
    writer.join(10)
    assert not writer.is_alive()  # 19 documents: past the limit, under twice it
    assert not any(f.built.done() for f in flushing) and len(shard.buffer) == 19
    stalled = threading.Thread(target=put, args=(shard, str(first + 19), {"n": first + 19}))
    stalled.start()
    stalled.join(0.2)
    assert stalled.is_alive()  # twenty: this write waits for the oldest flush
    held_flush.release()
    stalled.join(10)
    assert not stalled.is_alive()
    shard.refresh()
    assert visible_ids(shard) == {str(i) for i in range(first + 20)}
    shard.close()


def test_buffers_written_at_once_install_in_write_order(tmp_path, held_flush):
    """Two buffers on the flush threads at once, each overwriting and deleting the other's
    documents: reads see the newest state meanwhile, and once both are written their segments
    resolve every id as the writes ordered it."""
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(10):  # the first buffer
        put(shard, str(i), {"n": i})
    for i in range(5):  # the second (handed over at twice the limit): overwrites, a delete, new ids
        put(shard, str(i), {"n": 100 + i})
    delete(shard, "5")
    for i in range(10, 25):
        put(shard, str(i), {"n": i})
    assert len(shard._flushing) == 2
    put(shard, "6", {"n": 600})  # the current buffer
    with shard.lock:
        assert shard.current("3").version == 2 and shard.current("5").deleted
        assert orjson.loads(shard.get_source(shard.current("6"))) == {"n": 600}
    older, newer = shard._flushing
    newer_built = newer.built
    held_flush.release()
    newer_built.result(timeout=30)
    shard.refresh()
    assert not shard._flushing
    assert visible_ids(shard) == {str(i) for i in range(25)} - {"5"}
    with shard.lock:
        for doc_id, n, version in [("3", 103, 2), ("7", 7, 1), ("6", 600, 2), ("12", 12, 1)]:
            state = shard.current(doc_id)
            assert (state.version, orjson.loads(shard.get_source(state))) == (version, {"n": n})
        assert shard.current("5").deleted
    assert [seg.max_doc for seg in shard.segments] == [10, 20, 1]
    shard.close()


def test_a_crash_with_a_buffer_in_flight_loses_nothing(tmp_path, held_flush):
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(15):
        put(shard, str(i), {"n": i})
    put(shard, "1", {"n": 100})  # an update and a delete of documents in flight
    delete(shard, "2")
    # Crash before the flush thread wrote anything: only the fsynced translog counts.
    shard.translog._file.close()
    held_flush.abandon()
    assert isinstance(shard._flushing[0].built.exception(timeout=30), RuntimeError)  # it gave up
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == {str(i) for i in range(15)} - {"2"}
    with reopened.lock:
        state = reopened.current("1")
        assert (state.version, orjson.loads(reopened.get_source(state))) == (2, {"n": 100})
        assert reopened.current("2").deleted
    reopened.close()


def test_a_delete_keeps_its_version_across_a_refresh(tmp_path):
    shard = Shard(tmp_path / "s", 0, parse)
    put(shard, "a", {"n": 1})
    put(shard, "a", {"n": 2})
    delete(shard, "a")
    shard.refresh()  # the version map is cleared; the delete's tombstone is kept (gc_deletes)
    assert shard.current("a").deleted and shard.current("a").version == 3
    with shard.lock:
        prior = shard.current("a")
        shard.index("a", parse(b'{"n": 3}'), None, prior, prior.version + 1)
    shard.refresh()
    state = shard.current("a")
    assert (state.deleted, state.version) == (False, 4)
    assert orjson.loads(shard.get_source(state)) == {"n": 3}
    shard.close()


def test_writers_refreshes_and_reads_at_once_lose_nothing(tmp_path, monkeypatch):
    """Buffers handed to the flush thread every few writes, refreshes waiting for them outside
    the lock, realtime reads and deletes all at once: the end state is exactly what was written,
    before and after a crash."""
    import threading

    import leafsearch.index.shard as shard_module

    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 7)
    shard = Shard(tmp_path / "s", 0, parse)
    expected: dict[str, int] = {}
    expected_lock = threading.Lock()
    failures: list[BaseException] = []
    done = threading.Event()

    def writer(prefix: str) -> None:
        try:
            for i in range(300):
                doc_id = f"{prefix}{i % 40}"
                if i % 9 == 8:
                    delete(shard, doc_id)
                    with expected_lock:
                        expected.pop(doc_id, None)
                else:
                    put(shard, doc_id, {"n": i})
                    with expected_lock:
                        expected[doc_id] = i
                with shard.lock:  # a realtime read sees the write just made, wherever it lives
                    state = shard.current(doc_id)
                    if i % 9 == 8:
                        assert state is None or state.deleted
                    else:
                        assert orjson.loads(shard.get_source(state)) == {"n": i}
        except BaseException as exc:  # handed to the test thread
            failures.append(exc)

    def refresher() -> None:
        try:
            while not done.is_set():
                shard.refresh()
        except BaseException as exc:
            failures.append(exc)

    writers = [threading.Thread(target=writer, args=(p,)) for p in "ab"]
    background = threading.Thread(target=refresher)
    background.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    background.join()
    assert not failures, failures
    shard.refresh()
    assert visible_ids(shard) == set(expected)
    shard.translog._file.close()  # crash
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == set(expected)
    with reopened.lock:
        for doc_id, n in expected.items():
            assert orjson.loads(reopened.get_source(reopened.current(doc_id))) == {"n": n}
    reopened.close()


def test_a_refresh_returns_only_once_earlier_writes_are_visible(tmp_path, held_flush):
    """A second refresh that comes while the first waits for the flush thread finds nothing new in
    the buffer, yet must not return before the writes that refresh is writing are published (a
    bulk request with `?refresh=true` racing the scheduled refresh)."""
    import threading

    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(5):
        put(shard, str(i), {"n": i})
    first = threading.Thread(target=shard.refresh)
    first.start()
    while not shard._flushing:  # the first refresh has handed the buffer over
        threading.Event().wait(0.001)
    second_done = threading.Event()
    second = threading.Thread(target=lambda: (shard.refresh(), second_done.set()))
    second.start()
    assert not second_done.wait(0.2)  # held: the documents are not published yet
    held_flush.release()
    assert second_done.wait(10)
    assert visible_ids(shard) == {str(i) for i in range(5)}
    first.join()
    second.join()
    shard.close()


def test_writes_after_a_recovery_follow_every_generation_it_replayed(tmp_path, held_flush):
    """A crash with a buffer in flight leaves two translog generations; what is written after the
    restart must replay after both, so its newer versions win after a second crash."""
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(12):  # ten handed over (a new generation starts), two more after them
        put(shard, str(i), {"n": i})
    shard.translog._file.close()  # crash
    held_flush.abandon()
    assert isinstance(shard._flushing[0].built.exception(timeout=30), RuntimeError)  # gave up, not the next
    assert len(list((tmp_path / "s" / "translog").glob("translog-*.tlog"))) == 2
    reopened = Shard(tmp_path / "s", 0, parse)
    put(reopened, "11", {"n": 1100})
    delete(reopened, "3")
    reopened.translog._file.close()  # crash again
    again = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(again) == {str(i) for i in range(12)} - {"3"}
    with again.lock:
        assert orjson.loads(again.get_source(again.current("11"))) == {"n": 1100}
    again.close()


def test_a_failed_translog_write_fails_the_shard_which_recovers_from_disk_by_itself(tmp_path, monkeypatch):
    """A full disk while a write is synced: that write fails, the file keeps only whole records,
    and the shard reopens itself from disk (no restart): while the disk still fails, every write
    is refused before it changes anything; once it works again, writes are taken, the failed one
    is gone and every write acknowledged before is there, before and after a crash."""
    import errno

    import leafsearch.index.translog as translog_module
    from leafsearch.errors import TranslogFailed

    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(5):
        put(shard, str(i), {"n": i})  # acknowledged: synced
    real_fsync = translog_module.os.fsync

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(translog_module.os, "fsync", full_disk)
    with pytest.raises(TranslogFailed) as failed:
        put(shard, "5", {"n": 5})
    assert failed.value.status == 500 and failed.value.error_type == "translog_exception"
    with pytest.raises(TranslogFailed, match="could not recover yet"):
        put(shard, "6", {"n": 6})  # the disk still fails: refused, nothing applied
    with pytest.raises(TranslogFailed):
        delete(shard, "0")
    monkeypatch.setattr(translog_module.os, "fsync", real_fsync)  # space is back
    put(shard, "7", {"n": 7})
    with shard.lock:
        assert shard.current("5") is None and shard.current("6") is None
        assert not shard.current("0").deleted
    shard.refresh()
    expected = {str(i) for i in range(5)} | {"7"}
    assert visible_ids(shard) == expected
    shard.translog._file.close()  # crash
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == expected
    reopened.close()


def test_a_pit_taken_before_a_translog_failure_keeps_its_documents(tmp_path, monkeypatch):
    """The in-place recovery keeps the segments a Searcher holds: its files stay until released."""
    import errno

    import leafsearch.index.translog as translog_module
    from leafsearch.errors import TranslogFailed

    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(4):
        put(shard, str(i), {"n": i})
    shard.refresh()
    held = shard.acquire_searcher()
    real_fsync = translog_module.os.fsync

    def broken_disk(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(translog_module.os, "fsync", broken_disk)
    with pytest.raises(TranslogFailed):
        put(shard, "x", {"n": 9})
    monkeypatch.setattr(translog_module.os, "fsync", real_fsync)
    put(shard, "y", {"n": 10})
    shard.refresh()
    assert {seg.segment.folder.exists() for seg in held.views} == {True}
    held_values = [orjson.loads(src)["n"] for v in held.views for src in v.segment.sources(v.live_docs)]
    assert sorted(held_values) == [0, 1, 2, 3]
    held.release()
    assert visible_ids(shard) == {"0", "1", "2", "3", "y"}
    shard.close()


def test_a_torn_write_is_cut_back_so_no_record_follows_it(tmp_path, monkeypatch):
    import leafsearch.index.translog as translog_module

    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(3):
        put(shard, str(i), {"n": i})
    path = shard.translog._path(shard.translog.generation)
    whole = path.stat().st_size

    def torn_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(translog_module.os, "fsync", torn_fsync)
    with pytest.raises(Exception, match="Input/output error"):
        put(shard, "3", {"n": 3})
    assert path.stat().st_size == whole  # the failed write's bytes are gone from the file


def test_a_failed_segment_write_is_reported_and_tried_again(tmp_path, monkeypatch):
    """The flush thread cannot write a segment (a full disk): writes go on, the refresh that needs
    the segment reports the failure, and the next one, with room again, publishes everything."""
    import errno

    import leafsearch.index.shard as shard_module

    write = shard_module.segment_from_buffer
    attempts: list[str] = []

    def full_disk_once(buffer, folder, index_sort=None, codec="zstd"):
        if folder.parent == tmp_path / "s":  # (not another test's shard flushing in this process)
            attempts.append(folder.name)
            if len(attempts) == 1:
                raise OSError(errno.ENOSPC, "No space left on device")
        return write(buffer, folder, index_sort, codec)

    monkeypatch.setattr(shard_module, "segment_from_buffer", full_disk_once)
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 10)
    shard = Shard(tmp_path / "s", 0, parse)
    attempts.clear()  # the opening refresh wrote nothing
    for i in range(13):  # the first ten are handed over; their segment fails; writes go on
        put(shard, str(i), {"n": i})
    with pytest.raises(FlushFailed) as failed:
        shard.refresh()
    assert (failed.value.status, failed.value.error_type) == (500, "flush_failed_engine_exception")
    assert shard.refresh()  # tried again under a new folder name, then the rest is written
    assert attempts[0] != attempts[1]
    assert visible_ids(shard) == {str(i) for i in range(13)}
    shard.translog._file.close()  # crash
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == {str(i) for i in range(13)}
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.endswith(".tmp")]
    reopened.close()


class HeldCommit:
    """Holds the fsync of `commit.json.tmp` in one named thread until `release()`; `crash()` makes
    it fail instead, as if the process had died there (the commit is never renamed into place)."""

    def __init__(self, thread_name: str) -> None:
        import threading

        self.thread_name = thread_name
        self.in_fsync = threading.Event()
        self._go = threading.Event()
        self._crashed = False

    def release(self) -> None:
        self._go.set()

    def crash(self) -> None:
        self._crashed = True
        self._go.set()

    def wrap(self, fsync):
        import os
        import threading

        def held(fd: int) -> None:
            if threading.current_thread().name == self.thread_name and os.readlink(
                f"/proc/self/fd/{fd}"
            ).endswith("commit.json.tmp"):
                self.in_fsync.set()
                assert self._go.wait(30)
                if self._crashed:
                    raise OSError(5, "crashed")
            fsync(fd)

        return held


@pytest.fixture
def held_commit(monkeypatch):
    import leafsearch.index.commits as commits_module

    held = HeldCommit("refresher")
    monkeypatch.setattr(commits_module.os, "fsync", held.wrap(commits_module.os.fsync))
    yield held
    held.crash()


def test_writes_go_on_while_a_commit_is_fsynced(tmp_path, held_commit, monkeypatch):
    """A refresh writes its commit (live-docs files, commit.json, the folder: several fsyncs)
    after letting go of the shard lock, so writes, their translog fsyncs, the hand-over of a full
    buffer and realtime reads are not held behind a slow disk's commit."""
    import threading

    import leafsearch.index.shard as shard_module

    shard = Shard(tmp_path / "s", 0, parse)
    put(shard, "a", {"n": 1})
    refresher = threading.Thread(target=shard.refresh, name="refresher")
    refresher.start()
    assert held_commit.in_fsync.wait(30)
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 20)
    writer = threading.Thread(target=lambda: [put(shard, f"b{i}", {"n": i}) for i in range(30)])
    writer.start()
    try:
        writer.join(30)
        wrote = not writer.is_alive()
        if wrote:
            delete(shard, "a")
            with shard.lock:
                assert shard.current("b29").version == 1 and shard.current("a").deleted
    finally:
        held_commit.release()
    refresher.join()
    writer.join()
    assert wrote  # thirty writes, one buffer handed over, while the commit's fsync was held
    shard.refresh()
    assert visible_ids(shard) == {f"b{i}" for i in range(30)}
    shard.translog._file.close()  # crash
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == {f"b{i}" for i in range(30)}
    reopened.close()


def test_a_crash_while_commits_wait_to_be_written_loses_nothing(tmp_path, held_commit, monkeypatch):
    """Writes acknowledged while one commit is being written and others wait behind it, then a
    crash before any is renamed into place: the commit on disk is the one before, and every
    translog generation and live-docs file it needs is still there."""
    import threading

    import leafsearch.index.shard as shard_module

    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 10)
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(25):
        put(shard, str(i), {"n": i})
    delete(shard, "3")  # a live-docs file for a committed segment
    before = (tmp_path / "s" / "commit.json").read_bytes()
    refresher = threading.Thread(target=lambda: pytest.raises(FlushFailed, shard.refresh), name="refresher")
    refresher.start()
    assert held_commit.in_fsync.wait(30)
    for i in range(25, 60):  # hand-overs decide commits; none can be written yet
        put(shard, str(i), {"n": i})
    put(shard, "7", {"n": 700})
    delete(shard, "8")
    flush_threads_done(shard)
    assert len(shard.commits._queue) > 1
    shard.translog._file.close()  # crash
    held_commit.crash()
    refresher.join()
    assert (tmp_path / "s" / "commit.json").read_bytes() == before
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == {str(i) for i in range(60)} - {"3", "8"}
    with reopened.lock:
        assert orjson.loads(reopened.get_source(reopened.current("7"))) == {"n": 700}
    reopened.close()


def test_a_commit_that_fails_is_written_again_before_any_later_one(tmp_path, monkeypatch):
    """A full disk while a commit is written: the refresh reports it, and the next write of
    commits writes that one first (later ones may name the live-docs files it writes)."""
    import errno

    import leafsearch.index.commits as commits_module

    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(5):
        put(shard, str(i), {"n": i})
    shard.refresh()
    delete(shard, "1")  # the next commit writes a live-docs file
    real_fsync = commits_module.os.fsync

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(commits_module.os, "fsync", full_disk)
    with pytest.raises(FlushFailed, match="No space") as failed:
        shard.refresh()
    assert (failed.value.status, failed.value.error_type) == (500, "flush_failed_engine_exception")
    monkeypatch.setattr(commits_module.os, "fsync", real_fsync)
    delete(shard, "2")
    shard.refresh()
    assert not shard.commits._queue
    shard.translog._file.close()  # crash
    reopened = Shard(tmp_path / "s", 0, parse)
    assert visible_ids(reopened) == {"0", "3", "4"}
    assert not list((tmp_path / "s" / "translog").glob("translog-*.tlog"))[1:]
    reopened.close()


def test_a_refresh_beside_overwrites_publishes_every_document(tmp_path, monkeypatch):
    """Overwrites arriving while a refresh waits for its segment on the flush thread (the shard
    lock free): the snapshot it publishes holds each document once, never the delete of an old
    version without the new version. Each round holds the flush thread until the overwrites are
    in, then counts the snapshot the refresh published."""
    import threading

    import leafsearch
    import leafsearch.index.shard as shard_module
    from leafsearch.client import Client
    from leafsearch.indices import admin

    ids, rounds = 2000, 12
    write = shard_module.segment_from_buffer
    with leafsearch.Node(tmp_path / "n", background=False) as node:
        admin.create_index(node, "d", {"settings": {"number_of_shards": 1}})
        client = Client(node=node)

        def overwrite(value: int, start: int, end: int) -> None:
            operations: list = []
            for i in range(start, end):
                operations += [{"index": {"_index": "d", "_id": str(i)}}, {"v": value}]
            assert not client.bulk(operations=operations)["errors"]

        overwrite(0, 0, ids)
        client.indices.refresh(index="d")
        counts: list[int] = []
        for value in range(1, rounds + 1):
            held = HeldFlush()
            monkeypatch.setattr(shard_module, "segment_from_buffer", held.wrap(write))
            overwrite(value, 0, ids // 2)
            refresher = threading.Thread(target=node.indices["d"].refresh)
            refresher.start()
            assert held.holding.wait(30)  # the refresh handed its buffer over and waits for it
            # Meanwhile: overwrites of documents in the segments and in the buffer being written.
            overwrite(value, ids // 2 - 100, ids)
            held.release()
            refresher.join()
            counts.append(client.count(index="d")["count"])
        assert counts == [ids] * rounds
        client.indices.refresh(index="d")
        values = client.search(index="d", size=0, aggs={"v": {"terms": {"field": "v"}}})
        assert values["aggregations"]["v"]["buckets"] == [{"key": rounds, "doc_count": ids}]


def test_a_refresh_waits_without_the_lock_for_a_buffer_a_write_handed_over_and_publishes_it(
    tmp_path, monkeypatch
):
    """While a refresh waits for its buffer's segment, a write fills the next buffer (overwriting a
    document of the first) and hands it over. The refresh waits for that one too without holding
    the shard lock (writes go on), and publishes both: the overwrite's new version with the old
    one's delete."""
    import threading

    import leafsearch.index.shard as shard_module

    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 10)
    gates = {"seg_000001": threading.Event(), "seg_000002": threading.Event()}
    build = shard_module.segment_from_buffer

    def gated(buffer, folder, index_sort=None, codec="zstd"):
        gate = gates.get(folder.name)
        assert gate is None or gate.wait(30)
        return build(buffer, folder, index_sort, codec)

    monkeypatch.setattr(shard_module, "segment_from_buffer", gated)
    shard = Shard(tmp_path / "s", 0, parse)
    for i in range(5):
        put(shard, str(i), {"n": i})
    refresher = threading.Thread(target=shard.refresh)
    refresher.start()
    while not shard._flushing:  # the refresh has handed its buffer over
        threading.Event().wait(0.001)
    put(shard, "0", {"n": 100})
    for i in range(5, 24):  # the twentieth document hands this buffer over too
        put(shard, str(i), {"n": i})
    assert len(shard._flushing) == 2
    gates["seg_000001"].set()
    while not shard.segments:  # the refresh installed the first
        threading.Event().wait(0.001)
    writer = threading.Thread(target=put, args=(shard, "20", {"n": 20}))
    writer.start()
    writer.join(10)
    assert not writer.is_alive() and refresher.is_alive()  # the lock was free meanwhile
    gates["seg_000002"].set()
    refresher.join(10)
    assert not refresher.is_alive()
    assert visible_ids(shard) >= {str(i) for i in range(24)}
    with shard.lock:
        assert orjson.loads(shard.get_source(shard.current("0"))) == {"n": 100}
    shard.close()


def test_a_commit_written_before_an_overwrite_is_fsynced_keeps_the_acknowledged_version(
    tmp_path, monkeypatch
):
    """An overwrite retires the old version at once; its own fsync comes after. A commit decided
    meanwhile (the buffer holding the new version handed over and still being built) and written
    by another thread (a refresh's, a merge's) keeps that delete: the translog it keeps must hold
    the overwrite's record before the commit is on disk, or a crash then loses the acknowledged
    old version with the unacknowledged new one (seen as 'acknowledged, found nothing' in the
    kill -9 trials of tests/write/test_concurrent_writes.py)."""
    import threading

    import leafsearch.index.shard as shard_module

    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 10)
    build = shard_module.segment_from_buffer
    crashed = threading.Event()

    def never_written(buffer, folder, index_sort=None, codec="zstd"):  # the second segment: lost in the crash
        if folder.name == "seg_000002":
            assert crashed.wait(30)
            raise RuntimeError("crashed before the segment was written")
        return build(buffer, folder, index_sort, codec)

    monkeypatch.setattr(shard_module, "segment_from_buffer", never_written)
    shard = Shard(tmp_path / "s", 0, parse)
    put(shard, "a", {"n": 1})  # acknowledged
    assert shard.refresh()  # and committed in seg_000001
    # Writes whose fsync the crash beats: the overwrite of "a", then enough to hand the buffer over.
    for doc_id, n in [("a", 2), *((str(i), i) for i in range(10))]:
        with shard.writing():
            prior = shard.current(doc_id)
            shard.index(doc_id, parse(orjson.dumps({"n": n})), None, prior, 2 if prior else 1)
    assert [f.folder.name for f in shard._flushing] == ["seg_000002"]
    shard._write_commits()  # by a thread that syncs nothing of its own, as a refresh's or a merge's
    shard.translog._file.close()  # crash
    crashed.set()
    assert isinstance(shard._flushing[0].built.exception(timeout=30), RuntimeError)
    reopened = Shard(tmp_path / "s", 0, parse)
    with reopened.lock:
        state = reopened.current("a")
        assert state is not None and not state.deleted
        assert orjson.loads(reopened.get_source(state))["n"] in (1, 2)
    reopened.close()
