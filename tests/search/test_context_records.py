"""A context's record on disk (search/context_records.py): two files written in turn, so a write
torn by a crash leaves the record before it, which a restart reads."""

from __future__ import annotations

import pickle
from pathlib import Path

from leafsearch.search.context_records import ContextRecords


def _record(key: str, seq: int) -> dict:
    return {"key": key, "seq": seq, "cursor": [seq * 10]}


def test_the_latest_whole_record_is_read(tmp_path: Path) -> None:
    records = ContextRecords(tmp_path / "contexts")
    for seq in range(1, 6):
        records.write("a1", _record("a1", seq))
    records.write("b2", _record("b2", 1))
    assert ContextRecords(tmp_path / "contexts").load() == {"a1": _record("a1", 5), "b2": _record("b2", 1)}


def test_a_torn_write_leaves_the_record_before_it(tmp_path: Path) -> None:
    folder = tmp_path / "contexts"
    records = ContextRecords(folder)
    for seq in range(1, 4):
        records.write("a1", _record("a1", seq))
    latest = folder / "a1.ctx"  # generation 3: the first file holds the odd ones
    latest.write_bytes(latest.read_bytes()[:-5])  # cut by a crash mid-write
    reloaded = ContextRecords(folder)
    assert reloaded.load() == {"a1": _record("a1", 2)}
    assert not latest.exists()  # the torn file goes; the next write recreates it
    reloaded.write("a1", _record("a1", 3))
    assert ContextRecords(folder).load() == {"a1": _record("a1", 3)}


def test_a_record_of_the_earlier_format_is_read_and_kept_until_a_newer_one_is_whole(tmp_path: Path) -> None:
    folder = tmp_path / "contexts"
    folder.mkdir()
    (folder / "a1.ctx").write_bytes(pickle.dumps(_record("a1", 7)))  # a bare pickle
    records = ContextRecords(folder)
    assert records.load() == {"a1": _record("a1", 7)}
    records.write("a1", _record("a1", 8))
    assert pickle.loads((folder / "a1.ctx").read_bytes()) == _record("a1", 7)  # not overwritten
    assert ContextRecords(folder).load() == {"a1": _record("a1", 8)}


def test_a_removed_record_leaves_no_file(tmp_path: Path) -> None:
    folder = tmp_path / "contexts"
    records = ContextRecords(folder)
    records.write("a1", _record("a1", 1))
    records.write("a1", _record("a1", 2))
    records.remove("a1")
    assert not [p for p in folder.iterdir() if p.name != "ended.log"]
    assert ContextRecords(folder).load() == {}
