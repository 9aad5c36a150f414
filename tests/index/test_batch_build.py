"""A segment built from documents added by column (`IndexBuffer.add_batch`, whose texts are
analysed only when the segment is built, `FieldBuffer.tokens`) is byte for byte the segment built
from the same documents added one by one (`IndexBuffer.add`, analysed when parsed), written here or
packed and written by another process; and `_intern` numbers terms in their byte order."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import numpy as np
import orjson
import pytest

from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.buffer_wire import PackedBuffer, build_packed
from leafsearch.index.mapping import Mapping
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.segment_build import _intern, segment_from_buffer
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
    "\x01",
    "",
]


def _doc(rng: random.Random) -> dict:
    doc: dict = {}
    if rng.random() < 0.9:
        doc["msg"] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 8)))
    if rng.random() < 0.8:
        doc["tag"] = rng.choice(["a", "b", "ü", "zeta", "a\x00b", ""]) + str(rng.randint(0, 20))
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


def test_intern_numbers_terms_in_byte_order() -> None:
    rng = random.Random(0)
    for _ in range(200):
        values = [
            "".join(rng.choice("abü😀\x01 ") for _ in range(rng.randint(0, 4)))
            for _ in range(rng.randint(0, 60))
        ]
        terms, ids = _intern(values)
        encoded = sorted({v.encode() for v in values})
        assert terms.tolist() == [t.rstrip(b"\x00") for t in encoded]
        assert ids.dtype == np.int64 and len(ids) == len(values)
        assert [encoded[i] for i in ids.tolist()] == [v.encode() for v in values]
