"""The translog under concurrent requests: group commit, generation rolls, nothing twice or lost."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import leafsearch.index.translog as translog_module
from leafsearch.index.translog import OP_INDEX, Translog, TranslogOp, encode_op


def record(writer: int, n: int) -> bytes:
    return encode_op(TranslogOp(OP_INDEX, f"{writer}-{n}", n, 1, None, b"{}"))


def test_concurrent_appends_syncs_and_rolls_keep_every_acknowledged_record_once(tmp_path: Path) -> None:
    """Eight writers append and sync while another thread rolls generations; the "shard lock"
    here orders appends and rolls as the shard's does. Every record whose sync returned is on
    disk exactly once, and each writer's records are in its order."""
    translog = Translog(tmp_path, 1)
    shard_lock = threading.Lock()
    acknowledged: dict[int, list[str]] = {w: [] for w in range(8)}
    stop = threading.Event()
    failures: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for n in range(200):
                with shard_lock:
                    position = translog.append(record(w, n))
                translog.sync(position)
                acknowledged[w].append(f"{w}-{n}")
        except BaseException as exc:
            failures.append(exc)

    def roller() -> None:
        while not stop.is_set():
            with shard_lock:
                translog.start_generation()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    rolling = threading.Thread(target=roller)
    rolling.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    rolling.join()
    assert not failures
    assert translog.generation > 2  # rolls happened meanwhile
    # A crash: the file is not closed; only what was written counts.
    ids = [op.doc_id for op in Translog.recover(tmp_path, 1)]
    assert len(ids) == len(set(ids)) == 8 * 200
    for w, expected in acknowledged.items():
        assert [i for i in ids if i.startswith(f"{w}-")] == expected


def test_one_fsync_covers_every_request_queued_while_it_ran(tmp_path: Path, monkeypatch) -> None:
    """Group commit: while one request's fsync runs, seven more queue their records; one more
    fsync makes all seven durable, whichever of them runs it."""
    translog = Translog(tmp_path, 1)
    real_fsync = translog_module.os.fsync
    in_first_fsync, all_queued = threading.Event(), threading.Event()
    fsyncs: list[int] = []

    def slow_disk(fd: int) -> None:
        fsyncs.append(fd)
        if len(fsyncs) == 1:
            in_first_fsync.set()
            assert all_queued.wait(timeout=30)
        real_fsync(fd)

    monkeypatch.setattr(translog_module.os, "fsync", slow_disk)
    first = threading.Thread(target=lambda: translog.sync(translog.append(record(0, 0))))
    first.start()
    assert in_first_fsync.wait(timeout=30)
    positions = [translog.append(record(w, 0)) for w in range(1, 8)]
    all_queued.set()
    others = [threading.Thread(target=translog.sync, args=(p,)) for p in positions]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join()
    assert len(fsyncs) == 2
    assert len(list(Translog.recover(tmp_path, 1))) == 8


def test_a_failed_fsync_fails_every_request_not_yet_durable(tmp_path: Path, monkeypatch) -> None:
    from leafsearch.errors import TranslogFailed

    translog = Translog(tmp_path, 1)
    translog.sync(translog.append(record(0, 0)))

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(translog_module.os, "fsync", broken)
    first = translog.append(record(0, 1))
    second = translog.append(record(0, 2))
    with pytest.raises(TranslogFailed):
        translog.sync(first)
    with pytest.raises(TranslogFailed):
        translog.sync(second)  # queued behind the failed write: never acknowledged
    with pytest.raises(TranslogFailed):
        translog.append(record(0, 3))
    assert [op.doc_id for op in Translog.recover(tmp_path, 1)] == ["0-0"]


def test_a_power_loss_at_a_generation_roll_loses_nothing_acknowledged(tmp_path: Path, monkeypatch) -> None:
    """A roll (a buffer handed over, in the indexing slot) only opens the new file: the old
    generation's queued records, its fsync and the folder's (the new name) are the next sync's.
    A power loss right after the roll may lose only what no sync returned for; after the next
    sync, every record of both generations is there, in order."""
    from power_loss import PowerLossDisk

    data = tmp_path / "data"
    (data / "translog").mkdir(parents=True)  # durable already, as a shard's folder is
    disk = PowerLossDisk(data)
    fsyncs: list[int] = []
    with disk.installed(monkeypatch):
        recorded = translog_module.os.fsync  # the simulated disk's

        def counted(fd: int) -> None:
            fsyncs.append(fd)
            recorded(fd)

        monkeypatch.setattr(translog_module.os, "fsync", counted)
        translog = Translog(data / "translog", 1)
        translog.sync(translog.append(record(0, 0)))  # acknowledged
        queued = translog.append(record(0, 1))  # not yet
        before = len(fsyncs)
        assert translog.start_generation() == 2
        assert len(fsyncs) == before  # the roll itself waits for no disk
        disk.power_loss(tmp_path / "at-the-roll")
        translog.sync(translog.append(record(0, 2)))  # acknowledges 0-1 and 0-2
        assert translog.position > queued
        disk.power_loss(tmp_path / "after-the-sync")
        assert translog.start_generation() == 3  # a roll with nothing queued, then a close
        translog.close()
        disk.power_loss(tmp_path / "after-the-close")
    at_roll = [op.doc_id for op in Translog.recover(tmp_path / "at-the-roll" / "translog", 1)]
    assert at_roll == ["0-0"]
    for crash in ("after-the-sync", "after-the-close"):
        folder = tmp_path / crash / "translog"
        assert [op.doc_id for op in Translog.recover(folder, 1)] == ["0-0", "0-1", "0-2"], crash
        assert [op.doc_id for op in Translog.recover(folder, 2)] == ["0-2"], crash  # each in its generation
    reopened = Translog(tmp_path / "after-the-sync" / "translog", 2)  # appends go on after the newest
    assert reopened.generation == 2
    reopened.close()


def test_a_folder_fsync_failing_after_a_roll_acknowledges_only_the_old_generations_records(
    tmp_path: Path, monkeypatch
) -> None:
    """The sync after a roll writes the old generation's records, then fsyncs the folder: when
    that fails, a request whose records were all in the old generation is acknowledged (they are
    durable), one with a record in the new generation fails, and the translog takes no more."""
    from leafsearch.errors import TranslogFailed

    translog = Translog(tmp_path, 1)
    old = translog.append(record(0, 0))
    translog.start_generation()
    new = translog.append(record(0, 1))

    def broken(folder: Path) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(translog_module, "fsync_dir", broken)
    with pytest.raises(TranslogFailed):
        translog.sync(new)
    translog.sync(old)  # durable before the failure
    assert translog.failed
    with pytest.raises(TranslogFailed):
        translog.append(record(0, 2))
    assert [op.doc_id for op in Translog.recover(tmp_path, 1)] == ["0-0"]
