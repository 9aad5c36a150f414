"""A segment built from documents added by column (`IndexBuffer.add_batch`, whose texts are
analysed only when the segment is built, `FieldBuffer.tokens`) is byte for byte the segment built
from the same documents added one by one (`IndexBuffer.add`, analysed when parsed), written here or
packed and written by another process; and `interning.intern` numbers terms in their byte order."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import orjson
import pytest

from leafsearch.index import interning, segment_build
from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.buffer_wire import PackedBuffer, build_packed
from leafsearch.index.interning import Spans, intern
from leafsearch.index.mapping import Mapping
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.segment import build_postings
from leafsearch.index.segment_build import segment_from_buffer
from tests.index.test_buffer_wire import _files

MAPPING = {
    "properties": {
        "msg": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "tag": {"type": "keyword"},
        "n": {"type": "long"},
        "at": {"type": "date"},
    }
}
WORDS = [
    "fox",
    "The",
    "don't",
    "u.s.a",
    "3.14",
    "1,000",
    "x_y",
    "Ünï",
    "wörd",
    "😀",
    "日本",
    "a" * 300,
    "interoperability",
    "Zwölftausendachthundert",
    "0123456789abcdef0123456789",
    "\x01",
    "",
]


def _doc(rng: random.Random) -> dict:
    doc: dict = {}
    if rng.random() < 0.9:
        doc["msg"] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
    if rng.random() < 0.8:
        doc["tag"] = rng.choice(["a", "b", "ü", "zeta", "a\x00b", "", "eight888", "a-longer-tag-"]) + str(
            rng.randint(0, 20)
        )
    if rng.random() < 0.8:
        doc["n"] = rng.randint(-(2**40), 2**40)
    if rng.random() < 0.5:
        doc["at"] = f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T00:00:00.{rng.randint(0, 999):03d}Z"
    return doc


@pytest.mark.parametrize("seed", range(6))
def test_a_buffer_added_by_column_is_the_segment_of_its_documents_added_one_by_one(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    mapping = Mapping.from_body(MAPPING)
    sources = [orjson.dumps(_doc(rng)) for _ in range(rng.randint(1, 1500))]
    by_column = IndexBuffer()
    at = 0
    while at < len(sources):  # batches of any size, and documents added one by one between them
        if rng.random() < 0.2:
            by_column.add(f"id-{at}", mapping.parse_document(sources[at], f"id-{at}"), at, 1, None)
            at += 1
            continue
        part = sources[at : at + rng.randint(1, 400)]
        batch = parse_batch(mapping, part)
        assert batch is not None
        rows = sorted(rng.sample(range(len(part)), len(part) // 2)) if rng.random() < 0.3 else None
        taken = rows if rows is not None else list(range(len(part)))
        by_column.add_batch(
            batch,
            taken,
            [f"id-{at + r}" for r in taken],
            [at + r for r in taken],
            [1] * len(taken),
            [None] * len(taken),
        )
        for row in (r for r in range(len(part)) if r not in taken):  # left out of the batch
            by_column.add(f"id-{at + row}", mapping.parse_document(part[row], "x"), at + row, 1, None)
        at += len(part)
    # The rows a batch leaves out are added one by one after it: the reference takes that order.
    order = [int(i.removeprefix("id-")) for i in by_column.ids]
    reference = IndexBuffer()
    for i in order:
        reference.add(f"id-{i}", mapping.parse_document(sources[i], f"id-{i}"), i, 1, None)
    segment_from_buffer(reference, tmp_path / "reference")
    segment_from_buffer(by_column, tmp_path / "here")
    packed = pickle.loads(pickle.dumps(PackedBuffer.pack(by_column), protocol=5))
    build_packed(packed, str(tmp_path / "there"), None)
    expected = _files(tmp_path / "reference")
    assert _files(tmp_path / "here") == expected
    assert _files(tmp_path / "there") == expected


def _expected(values: list[str]) -> tuple[list[bytes], list[int]]:
    encoded = sorted({v.encode() for v in values})
    rank = {term: i for i, term in enumerate(encoded)}
    return [t.rstrip(b"\x00") for t in encoded], [rank[v.encode()] for v in values]


def _random_values(rng: random.Random) -> list[str]:
    alphabet = rng.choice(["ab", "abü😀\x01 ", "abü😀\x00", "abcdefghijklmnopqrstuvwxyz0"])
    longest = rng.choice([3, 8, 9, 16, 17, 40, 300])
    values = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))
        for _ in range(rng.randint(0, 80))
    ]
    # A trailing NUL is lost in an 'S' array (`to_term_array` always lost it): inner ones only.
    return [v + "z" if v.endswith("\x00") else v for v in values]


def test_intern_numbers_terms_in_byte_order() -> None:
    """Values of up to 8 bytes (their own keys), longer ones (grouped by hash), values holding
    a NUL (one at a time), empty ones; the terms array is what `to_term_array` makes of them."""
    rng = random.Random(0)
    for _ in range(600):
        values = _random_values(rng)
        terms, ids = intern(values)
        expected_terms, expected_ids = _expected(values)
        assert terms.tolist() == expected_terms
        assert terms.dtype == np.dtype(f"S{max([1, *(len(v.encode()) for v in values)])}")
        assert ids.dtype == np.int64 and ids.tolist() == expected_ids
        ordered_terms, ordered_ids, by_term = interning.intern_ordered(values)
        assert ordered_terms.tobytes() == terms.tobytes() and ordered_ids.tolist() == expected_ids
        if values and max(len(v.encode()) for v in values) <= 8 and "\x00" not in "".join(values):
            assert by_term is not None  # values that are their own keys: the order is found
        if by_term is not None:  # the values' stable order by term, as postings take it
            assert by_term.tolist() == ids.argsort(kind="stable").tolist()
        if values and all("\x00" not in v for v in values):  # the same from spans of one buffer
            spans = Spans.concat([Spans.of(values[:3]), Spans.of(values[3:])])  # type: ignore[list-item]
            assert spans.strings() == values
            spans_terms, spans_ids = intern(spans)
            assert spans_terms.tobytes() == terms.tobytes() and spans_ids.tolist() == expected_ids


@pytest.mark.parametrize("seed", range(4))
def test_the_stable_order_of_uint64_keys_by_digits_is_argsorts(seed: int) -> None:
    """`interning._stable_order` (stable radix passes over 16-bit digits, skipping those every
    key shares) equals numpy's stable argsort, and `_unique_inverse` numpy's `unique`: repeated
    keys, keys that differ in one digit only, in the top bit, all alike, one, none."""
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**64, size=50, dtype=np.uint64)
    cases = [
        rng.choice(pool, size=5000),  # many repeats
        rng.integers(0, 2**64, size=3000, dtype=np.uint64),
        (rng.integers(0, 2**16, size=2000, dtype=np.uint64) << np.uint64(16 * (seed % 4))),  # one digit
        rng.choice(np.array([0, 2**63, 2**64 - 1, 1], dtype=np.uint64), size=500),
        np.full(100, 7, dtype=np.uint64),
        np.array([5], dtype=np.uint64),
        np.empty(0, dtype=np.uint64),
    ]
    for keys in cases:
        order = interning._stable_order(keys)
        assert order.tolist() == keys.argsort(kind="stable").tolist()
        distinct, ids, firsts, by_key = interning._unique_inverse(keys)
        want, want_firsts, want_ids = np.unique(keys, return_index=True, return_inverse=True)
        assert distinct.tolist() == want.tolist() and ids.tolist() == want_ids.tolist()
        assert firsts.tolist() == want_firsts.tolist()
        assert by_key.tolist() == order.tolist()


def test_intern_survives_hash_collisions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every long value hashed alike: the check against each group's first member finds it, and
    the terms are numbered one value at a time instead."""
    monkeypatch.setattr(interning, "_MIX", np.zeros(4, dtype=np.uint64))
    rng = random.Random(1)
    for _ in range(50):
        values = [v + "-padding-past-8-bytes" for v in _random_values(rng) if "\x00" not in v]
        terms, ids = intern(values)
        assert (terms.tolist(), ids.tolist()) == _expected(values)


def _hostile(rng: random.Random, i: int) -> dict:
    """A document of any shape the per-document parser takes: new fields (mapped dynamically),
    arrays, nulls, empty strings, unicode, long and huge values, an object."""
    pick = rng.random()
    texts = ["", "Ünï 日本 😀 x", "a" * 300 + " b", " ".join(rng.choices(WORDS, k=40))]
    doc: dict = {"msg": rng.choice(texts)}
    if pick < 0.3:
        doc["tag"] = [rng.choice(["", "ü", "k" * 100, f"t{i}"]) for _ in range(rng.randint(0, 4))]
    elif pick < 0.5:
        doc["tag"] = None
    else:
        doc["tag"] = rng.choice(["", "x" * rng.randint(60, 70), "😀" * 20, f"tag-{i}"])
    if rng.random() < 0.3:
        name, value = rng.choice(
            [("new_text", "fresh text"), ("new_n", 7), ("new_ns", [1, 2]), ("new_obj", {"in": "v w"})]
        )
        doc[name] = rng.choice([value, None])
    if rng.random() < 0.1:
        doc["big"] = "huge " * 20_000  # 100 KB of text (mapped as text, its keyword ignored)
    return doc


@pytest.mark.parametrize("seed", range(3))
def test_a_build_numbers_terms_as_one_value_at_a_time_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """The segment of hostile documents is byte for byte the one built with every term numbered
    one value at a time (the dict `interning` replaced)."""
    rng = random.Random(seed)
    mapping = Mapping.from_body({"dynamic": True, **MAPPING})
    buffer = IndexBuffer()
    for i in range(rng.randint(50, 400)):
        source = orjson.dumps(_hostile(rng, i))
        buffer.add(f"id-{i}", mapping.parse_document(source, f"id-{i}"), i, 1, None)
    part = [orjson.dumps(_doc(rng)) for _ in range(300)]  # and a batch by column beside them
    batch = parse_batch(mapping, part)
    assert batch is not None
    at = len(buffer)
    taken = list(range(len(part)))
    ids, seq_nos = [f"b-{r}" for r in taken], [at + r for r in taken]
    buffer.add_batch(batch, taken, ids, seq_nos, [1] * len(taken), [None] * len(taken))
    segment_from_buffer(buffer, tmp_path / "spans")

    def one_at_a_time(values: list[str] | Spans) -> tuple[np.ndarray, np.ndarray]:
        return interning.intern_by_dict(values if isinstance(values, list) else values.strings())

    def one_at_a_time_unordered(values: list[str] | Spans) -> tuple[np.ndarray, np.ndarray, None]:
        return *one_at_a_time(values), None  # (the postings then sort the term ids themselves)

    monkeypatch.setattr(segment_build, "intern", one_at_a_time)
    monkeypatch.setattr(segment_build, "intern_ordered", one_at_a_time_unordered)
    segment_from_buffer(buffer, tmp_path / "dict")
    assert _files(tmp_path / "spans") == _files(tmp_path / "dict")


@pytest.mark.parametrize("seed", range(4))
def test_postings_are_term_doc_position_ordered_whatever_the_occurrences_order(seed: int) -> None:
    """`build_postings` against a lexsort of (term, doc, occurrence): occurrences in doc order
    (a buffer's, sorted by term alone) and out of it (index-sorted docs), few and many terms
    (over the 16-bit radix path's), none and one; and given the occurrences' stable order by
    term, the same."""
    rng = np.random.default_rng(seed)
    for n, num_terms, max_doc in [(0, 0, 0), (1, 1, 1), (5_000, 40, 300), (5_000, 70_000, 300), (300, 3, 2)]:
        for in_doc_order in (True, False):
            tids = rng.integers(0, max(num_terms, 1), n)
            docs = rng.integers(0, max(max_doc, 1), n)
            if in_doc_order:
                docs.sort()
            positions = rng.integers(0, 1_000, n)
            got = build_postings(tids, docs, positions, num_terms, max_doc)
            if in_doc_order:  # given the stable order by term (the interning's), the same arrays
                by_term = tids.argsort(kind="stable")
                given = build_postings(tids, docs, positions, num_terms, max_doc, by_term)
                assert {k: v.tolist() for k, v in given.items()} == {k: v.tolist() for k, v in got.items()}
            order = np.lexsort((np.arange(n), docs, tids))
            entries, freqs = np.unique(np.stack([tids, docs]).reshape(2, n), axis=1, return_counts=True)
            per_term = np.bincount(entries[0], minlength=num_terms)
            assert got["post_offsets"].tolist() == [0, *np.cumsum(per_term).tolist()]
            assert got["post_docs"].tolist() == entries[1].tolist()
            assert got["post_freqs"].tolist() == freqs.tolist()
            assert got["positions"].tolist() == positions[order].tolist()
