"""Durable pins (index/pins.py): a snapshot kept on disk through merges and a reopen of its shard,
its files let go when it is unpinned or when nothing takes it back."""

from __future__ import annotations

from pathlib import Path

import orjson
from test_engine_shard import delete, parse, put

from leafsearch.index.searcher import Searcher
from leafsearch.index.shard import Shard


def sources(searcher: Searcher) -> dict[str, dict]:
    seen = {}
    for view in searcher.views:
        ids, raw = view.segment.doc_ids(view.live_docs), view.segment.sources(view.live_docs)
        seen.update({doc_id: orjson.loads(src) for doc_id, src in zip(ids, raw, strict=True)})
    return seen


def old_snapshot_merged_away(folder: Path) -> tuple[Shard, Searcher, dict[str, dict]]:
    """A shard of 12 segments, a snapshot of them pinned as `abc`, then updates, deletes and merges
    that take those segments out of the shard."""
    shard = Shard(folder, 0, parse)
    for batch in range(12):
        for i in range(10):
            put(shard, f"{batch}-{i}", {"msg": "old", "n": batch})
        shard.refresh()
    old = shard.acquire_searcher()
    shard.pin("abc", old)
    expected = sources(old)
    for batch in range(12):
        put(shard, f"{batch}-0", {"msg": "new", "n": -1})
        delete(shard, f"{batch}-1")
    shard.refresh()
    while shard.maybe_merge():
        shard.refresh()
    assert {s.name for s in shard.segments} != {s.name for s in old.segments}
    return shard, old, expected


def test_a_pinned_snapshot_comes_back_after_a_reopen_until_unpinned(tmp_path: Path) -> None:
    shard, old, expected = old_snapshot_merged_away(tmp_path / "s")
    folders = [s.folder for s in old.segments]
    held = shard.pinned_store_bytes()
    assert held > 0 and shard.store_bytes_beyond(old.segments) > 0
    old.release()
    shard.close()  # the snapshot's reference is gone; the pin keeps its files
    assert all(f.exists() for f in folders)
    reopened = Shard(tmp_path / "s", 0, parse)
    restored = reopened.take_restored("abc")
    assert restored is not None and reopened.take_restored("abc") is None
    assert sources(restored) == expected and len(expected) == 120
    assert reopened.pinned_store_bytes() == held
    reopened.drop_restored()  # taken: not dropped
    assert all(f.exists() for f in folders)
    assert reopened.unpin("abc") and not reopened.unpin("abc")
    assert all(f.exists() for f in folders)  # the restored snapshot still reads them
    restored.release()
    assert not any(f.exists() for f in folders if f.name not in {s.name for s in reopened.segments})
    assert reopened.pinned_store_bytes() == 0
    reopened.close()


def test_pins_nothing_takes_back_are_deleted_with_their_segments(tmp_path: Path) -> None:
    shard, old, _ = old_snapshot_merged_away(tmp_path / "s")
    merged_away = [s.folder for s in old.segments if s.name not in {c.name for c in shard.segments}]
    old.release()
    shard.close()
    (tmp_path / "s" / "pins" / "def.tmp").write_bytes(b"torn")  # a crash in the middle of a pin
    reopened = Shard(tmp_path / "s", 0, parse)
    assert not (tmp_path / "s" / "pins" / "def.tmp").exists()
    reopened.drop_restored()
    assert not any(f.exists() for f in merged_away)
    assert list((tmp_path / "s" / "pins").iterdir()) == []
    assert reopened.take_restored("abc") is None
    reopened.close()
    again = Shard(tmp_path / "s", 0, parse)
    assert again.take_restored("abc") is None
    again.close()
