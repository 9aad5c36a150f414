"""A merge writes the same segment as a build of the parts' live documents in one buffer: the
merge by posting entries and its sources read a window at a time change nothing a search reads."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

from leafsearch.index import columns, segment_build
from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.index_sort import IndexSort, index_sort_of
from leafsearch.index.mapping import Mapping
from leafsearch.index.parsed import ParsedDoc
from leafsearch.index.segment import Segment
from leafsearch.index.segment_build import _LiveSources, merge_segments, segment_from_buffer

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"]


def _doc(rng: random.Random, i: int) -> tuple[str, ParsedDoc]:
    tokens = [rng.choice(WORDS) for _ in range(rng.randint(0, 12))]  # repeats: freqs over 1
    source = f'{{"i":{i},"msg":"{" ".join(tokens)}"}}'.encode()
    text = {"msg": (tokens, list(range(len(tokens))))} if tokens else {}
    return f"d{i}", ParsedDoc(
        source, text=text, keyword={"tag": [f"t{i % 7}"]}, long={"n": [rng.randint(0, 50)]}
    )


def _segment(docs: list[tuple[str, ParsedDoc]], folder, index_sort=None) -> Segment:
    buffer = IndexBuffer()
    for seq_no, (doc_id, parsed) in enumerate(docs):
        buffer.add(doc_id, parsed, seq_no, 1, None)
    segment_from_buffer(buffer, folder, index_sort)
    return Segment(folder)


def _index_sort(sorted_by: str | None) -> IndexSort | None:
    """The index sort by the long field `sorted_by` (None: unsorted)."""
    if sorted_by is None:
        return None
    mapping = Mapping.from_body({"properties": {sorted_by: {"type": "long"}}})
    return index_sort_of({"index.sort.field": sorted_by}, mapping, "test")


@pytest.mark.parametrize("sorted_by", [None, "n"])
def test_a_merge_writes_what_one_build_of_the_live_documents_writes(tmp_path, monkeypatch, sorted_by) -> None:
    # Windows (of 96 documents: whole blocks of the merged segment) that end inside the parts
    # and inside their blocks; the last part without deletes is read a run of blocks at a time.
    monkeypatch.setattr(_LiveSources, "WINDOW", 100)
    rng = random.Random(7)
    index_sort = _index_sort(sorted_by)
    docs = [_doc(rng, i) for i in range(3000)]
    parts, live_docs = [], []
    for k, (lo, hi) in enumerate([(0, 1100), (1100, 1200), (1200, 3000)]):
        seg = _segment(docs[lo:hi], tmp_path / f"p{k}", index_sort)
        live = np.array([rng.random() > 0.2 for _ in range(seg.max_doc)]) if k < 2 else None
        parts.append((seg, live))
        by_id = dict(docs[lo:hi])
        kept = np.arange(seg.max_doc) if live is None else np.flatnonzero(live)
        live_docs += [(i, by_id[i]) for i in seg.doc_ids(kept)]
    merge_segments(parts, tmp_path / "merged", index_sort)
    merged = Segment(tmp_path / "merged")
    if sorted_by is None:  # a build of the same documents in the same order
        built = _segment(live_docs, tmp_path / "built")
        assert merged.max_doc == built.max_doc == len(live_docs)
        assert merged.doc_ids(np.arange(merged.max_doc)) == built.doc_ids(np.arange(built.max_doc))
        assert merged.sources(np.arange(merged.max_doc)) == built.sources(np.arange(built.max_doc))
        ours, theirs = merged.column("msg"), built.column("msg")
        for name in ("terms", "post_offsets", "post_docs", "post_freqs", "positions", "norms"):
            assert np.asarray(getattr(ours, name)).tolist() == np.asarray(getattr(theirs, name)).tolist(), (
                name
            )
        assert merged.field_meta["msg"] == built.field_meta["msg"]
    # Whatever the order: each document keeps its source, and its tokens at their positions.
    sources = dict(
        zip(merged.doc_ids(np.arange(merged.max_doc)), merged.sources(np.arange(merged.max_doc)), strict=True)
    )
    assert sources == {doc_id: parsed.source for doc_id, parsed in live_docs}
    col = merged.column("msg")
    for word in WORDS:
        post_docs, _ = col.postings(word)
        found = dict(zip(merged.doc_ids(post_docs), [int(d) for d in post_docs], strict=True))
        want = {doc_id for doc_id, parsed in live_docs if word in parsed.text.get("msg", ([], []))[0]}
        assert set(found) == want
        for doc_id in sorted(want)[:20]:
            tokens = dict(live_docs)[doc_id].text["msg"][0]
            assert [p for p, t in enumerate(tokens) if t == word] == _positions_of(col, word, found[doc_id])


def _positions_of(col, word: str, doc: int) -> list[int]:
    t = col.lookup(word)
    lo, hi = int(col.post_offsets[t]), int(col.post_offsets[t + 1])
    for entry in range(lo, hi):
        if int(col.post_docs[entry]) == doc:
            start = int(col.pos_starts[entry])
            return np.asarray(col.positions[start : start + int(col.post_freqs[entry])]).tolist()
    return []


def _files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("sorted_by", "budget", "runs_of_terms"), [(None, 7, 7), ("n", 7, 7), (None, 3000, 4)]
)
def test_a_merge_written_a_block_of_terms_at_a_time_writes_the_same_files(
    tmp_path, monkeypatch, sorted_by, budget, runs_of_terms
) -> None:
    # A text field's postings merged in runs of `budget` entries (every term over 7: one term a
    # run; 3,000: two terms a run, or one), against one run of every term: the same bytes in
    # every file of the folder.
    rng = random.Random(11)
    index_sort = _index_sort(sorted_by)
    docs = [_doc(rng, i) for i in range(2500)]
    parts = []
    for k, (lo, hi) in enumerate([(0, 900), (900, 1000), (1000, 2500)]):
        seg = _segment(docs[lo:hi], tmp_path / f"p{k}", index_sort)
        parts.append((seg, np.array([rng.random() > 0.3 for _ in range(seg.max_doc)]) if k != 1 else None))
    monkeypatch.setattr(segment_build, "MERGE_BLOCK_ENTRIES", 1 << 40)
    merge_segments(parts, tmp_path / "whole", index_sort)
    monkeypatch.setattr(segment_build, "MERGE_BLOCK_ENTRIES", budget)
    runs = []
    real_blocks = segment_build._term_blocks
    monkeypatch.setattr(
        segment_build, "_term_blocks", lambda *args: runs.append(real_blocks(*args)) or runs[-1]
    )
    merge_segments(parts, tmp_path / "blocks", index_sort)
    assert len(runs[0]) - 1 == runs_of_terms
    whole, blocks = _files(tmp_path / "whole"), _files(tmp_path / "blocks")
    assert list(blocks) == list(whole)
    assert [name for name in whole if whole[name] != blocks[name]] == []


def test_a_text_fields_merge_holds_a_block_of_its_postings_not_the_field(tmp_path, monkeypatch) -> None:
    # 12,000 documents of 40 words of 500: about 430,000 posting entries and 480,000 positions,
    # merged in runs of 4,096 entries. Held whole (every entry's term, doc, frequency and start,
    # their sort, the positions gathered as int64), the field's merge took over 8 MB; in runs, what
    # it holds beyond an array of one value a document is a run's.
    monkeypatch.setattr(segment_build, "MERGE_BLOCK_ENTRIES", 4096)
    rng = random.Random(5)
    vocabulary = [f"w{i}" for i in range(500)]
    parts = []
    for k in range(3):
        buffer = IndexBuffer()
        for i in range(4000):
            tokens = [rng.choice(vocabulary) for _ in range(40)]
            source = f'{{"msg":"{" ".join(tokens)}"}}'.encode()
            parsed = ParsedDoc(source, text={"msg": (tokens, list(range(40)))})
            buffer.add(f"d{k}-{i}", parsed, k * 4000 + i, 1, None)
        segment_from_buffer(buffer, tmp_path / f"p{k}")
        parts.append((Segment(tmp_path / f"p{k}"), None))
    peaks = []
    merge_text = segment_build._merge_text

    def measured(*args) -> None:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        merge_text(*args)
        peaks.append(tracemalloc.get_traced_memory()[1] - before)

    monkeypatch.setattr(segment_build, "_merge_text", measured)
    tracemalloc.start()
    try:
        merge_segments(parts, tmp_path / "merged")
    finally:
        tracemalloc.stop()
    positions = len(Segment(tmp_path / "merged").column("msg").positions)
    assert positions == 12_000 * 40
    assert peaks[0] < positions * 8 // 2, peaks  # less than half of its positions as int64 alone


@pytest.mark.parametrize("seed", range(4))
def test_the_parts_terms_merge_into_their_sorted_union_with_each_terms_place(seed) -> None:
    """`merge_terms` (a stable sort of the parts' sorted runs) answers what `np.unique` of them
    all answers: empty parts, terms in several parts, prefixes of each other, and widths apart."""
    rng = random.Random(seed)
    alphabet = ["a", "ab", "abc", "b", "é", "z" * 30, "", "\x00x", "x\x00"]
    terms = [(rng.choice(alphabet) + str(rng.randint(0, 40))).encode() for _ in range(300)]
    parts = [sorted(set(rng.sample(terms, n))) for n in [0, 1, 50, 200, 0, 7]]
    arrays = [np.array(part, dtype=bytes) if part else np.empty(0, "S1") for part in parts]
    merged, maps = columns.merge_terms(arrays)
    want, inverse = np.unique(np.concatenate(arrays), return_inverse=True)
    assert merged.tolist() == want.tolist()
    assert np.concatenate(maps).tolist() == inverse.ravel().tolist()
    for array, where in zip(arrays, maps, strict=True):
        assert merged[where].tolist() == array.tolist()
    assert columns.merge_terms([])[0].tolist() == []
