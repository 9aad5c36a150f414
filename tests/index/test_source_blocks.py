"""A segment's `_source` blocks (index/source_blocks.py) give back every source byte for byte:
plain 32-document blocks (small segments, and every segment written before dictionaries) and
8-document blocks with the segment's trained dictionary, read in any order, through the node's
block cache, and by several threads at once."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import orjson
import pytest

from leafsearch.index import source_blocks
from leafsearch.index.block_cache import BlockCache
from leafsearch.index.segment import Segment, SegmentWriter, to_term_array


def random_sources(n: int, seed: int) -> list[bytes]:
    """Log-like JSON documents of varied lengths (a dictionary learns their shared structure)."""
    rng = np.random.default_rng(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    return [
        orjson.dumps(
            {
                "id": f"{i:08d}",
                "service": f"svc-{int(rng.integers(0, 50)):02d}",
                "bytes": int(rng.integers(0, 10**6)),
                "message": " ".join(rng.choice(words, int(rng.integers(1, 20)))),
                "extra": "é" * int(rng.integers(0, 3)),
            }
        )
        for i in range(n)
    ]


def write_segment(folder: Path, sources: list[bytes]) -> Segment:
    n = len(sources)
    writer = SegmentWriter(n)
    writer.set_ids(to_term_array([str(i) for i in range(n)]), np.arange(n), np.ones(n, dtype=np.int64))
    writer.set_sources(sources)
    writer.write(folder)
    return Segment(folder)


SIZES = [0, 1, 31, 33, source_blocks.DICT_MIN_DOCS - 1, source_blocks.DICT_MIN_DOCS, 5000]


@pytest.mark.parametrize("n", SIZES)
def test_every_source_comes_back(tmp_path: Path, n: int) -> None:
    sources = random_sources(n, seed=n)
    segment = write_segment(tmp_path / "seg", sources)
    with_dict = n >= source_blocks.DICT_MIN_DOCS
    assert (segment._source_dict is not None) == with_dict
    assert segment.source_block_docs == (
        source_blocks.DICT_BLOCK_DOCS if with_dict else source_blocks.PLAIN_BLOCK_DOCS
    )
    assert segment.sources(np.arange(n)) == sources
    rng = np.random.default_rng(n)
    docs = rng.integers(0, max(n, 1), min(n, 300)) if n else np.empty(0, np.int64)
    segment.blocks = BlockCache(64 * 1024)  # scattered reads, then again from the cache
    for _ in range(2):
        assert segment.sources(docs) == [sources[d] for d in docs.tolist()]


def test_a_segment_without_the_dictionary_keys_reads_plain_blocks(tmp_path: Path, monkeypatch) -> None:
    """What every segment written before dictionaries holds: 32-document blocks, no
    `source_dict` in its meta.json, no `_source.dict` file."""
    monkeypatch.setattr(source_blocks, "DICT_MIN_DOCS", 10**9)
    sources = random_sources(3000, seed=1)
    segment = write_segment(tmp_path / "old", sources)
    meta = orjson.loads((tmp_path / "old" / "meta.json").read_bytes())
    assert "source_dict" not in meta and "source_block_docs" not in meta
    assert not (tmp_path / "old" / "_source.dict").exists()
    assert segment.source_block_docs == source_blocks.PLAIN_BLOCK_DOCS
    assert segment.sources(np.arange(2999, -1, -7)) == sources[2999::-7]


def test_sources_a_dictionary_cannot_be_trained_on_stay_plain(tmp_path: Path) -> None:
    sources = [b"{}"] * 5000
    segment = write_segment(tmp_path / "tiny", sources)
    assert segment._source_dict is None
    assert segment.sources(np.arange(0, 5000, 3)) == sources[::3]


def test_threads_read_one_dictionary_segment_at_once(tmp_path: Path) -> None:
    sources = random_sources(4000, seed=7)
    segment = write_segment(tmp_path / "seg", sources)
    segment.blocks = BlockCache(32 * 1024)  # small: threads evict each other's blocks
    failures: list[int] = []

    def read(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(30):
            docs = np.sort(rng.integers(0, 4000, 100))
            if segment.sources(docs) != [sources[d] for d in docs.tolist()]:
                failures.append(seed)
                return

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
