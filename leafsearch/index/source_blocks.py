"""How a segment stores `_source`: compressed blocks of consecutive documents' raw JSON.

Two codecs (the index's `index.codec`, recorded as `source_codec` in each segment's meta.json):
- LZ4 (`default`, `lucene_default`; `source_codec: "lz4"`): blocks of `LZ4_BLOCK_DOCS` (32)
  documents, LZ4's block format without a dictionary, each block's raw size read off the stored
  lengths. Why: Elasticsearch's default stores fields with LZ4 for speed; on bench documents a
  read of every source costs 99 us of CPU per 1,000 documents against zstd's 272, a page of 100
  hits scattered over 5,000 documents 171 us against 370, compressing 0.33 against 0.77 us a
  document (no dictionary to train), for 87 bytes a document against 54. Blocks of 16 read a
  scattered page in 118 us but every document in 120; of 64, 238 and 90; LZ4 HC saves 10-17
  bytes a document for 5-7 times the compressing (bench/RESULTS.md "`index.codec`: LZ4 by
  default (session 25, `codec13`)");
- zstd (`best_compression`; every segment written before codecs, without the key): the layouts
  below.

Two zstd layouts, told apart by the segment's `meta.json`:
- plain: blocks of `PLAIN_BLOCK_DOCS` (32) documents, each compressed alone. Small segments (a
  refresh of a few documents) and every segment written before dictionaries use it;
- with a dictionary (`source_dict: true`, `_source.dict`): zstd trained on a sample of the
  segment's own sources, and blocks of `DICT_BLOCK_DOCS` (16) documents.

Why: a page of hits scattered over a segment (a term and a time range sorted by time: 100 hits
spread over thousands of documents) decompresses one block per hit. Measured on 200,000 bench
documents, a page of 100 hits over 5,000 documents reads its sources in 0.69 ms CPU from plain
32-document blocks, 0.46 ms from 16-document dictionary blocks and 0.31 ms from 8-document ones;
reading every document in order (scroll, export, walks) costs 0.54, 0.58 and 0.70 us per
document. 16 is the block that speeds the scattered page without slowing the sequential reads
measurably; the dictionary (16 KB per segment) also makes the data smaller (53 bytes per bench
document instead of 57). Training costs about 8 ms per segment (1,000 sampled sources),
compressing about 0.15 us more per document.

The hash layout (segments of at least `DICT_MIN_DOCS` documents, `source_buckets` in meta.json):
documents go in groups of `HASH_BUCKETS` blocks' worth (64 with dictionary blocks), and inside a
group they are stored by the bucket of their `_id`'s slice hash (`hash & 3`), then in doc order,
one block per bucket of each group (about 16 documents). Why: a sliced scroll keeps a document
in slice floorMod(hash, n), so with 2 or 4 slices a slice's documents are its buckets' blocks
only, and its worker decompresses no block for the other slices' documents (with plain doc-order
blocks, 2 slices each decompressed every block: 0.2-0.3 ms more per 1,000 documents than one
stream). A walk in doc order still reads each group's blocks together (4 blocks of about 16
instead of 4 of 16). `_source.slots` gives each document's place in its group and bucket in one
byte (`offset * HASH_BUCKETS + bucket`), `_source.starts` each block's first place among the
stored sources; older segments have neither and keep doc order.

Runs (`source_runs` in meta.json, merged segments only): the segment's documents in runs of
consecutive documents, each in the hash layout with its own block size and dictionary (groups
counted from the run's first document); `_source.runs` holds each run's first document, first
block, block size and dictionary (an index into `_source.dict`'s dictionaries, which
`_source.dict_ends` cuts; -1: none). Why: a merge copies a part's compressed blocks whose
documents are all live, as Lucene's stored-fields merge copies whole chunks, where it used to
decompress every source, train a dictionary and compress them again (2.5 of a merge's 3.5 us a
document, bench/RESULTS.md "Merges copy their parts' source blocks (session 21)"). Groups with a
deleted document, and parts in doc order, are compressed again (with the part's dictionary, so
the dictionaries are at most the parts'); runs of fewer than `COPY_MIN_DOCS` too, so a merged
segment has a few dictionaries only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import Protocol

import lz4.block
import numpy as np
import zstandard

PLAIN_BLOCK_DOCS = 32
DICT_BLOCK_DOCS = 16
#: Segments with fewer documents keep plain blocks: a dictionary would not pay for its training.
DICT_MIN_DOCS = 1024
DICT_SAMPLES = 1000
DICT_BYTES = 16 * 1024
ZSTD_LEVEL = 3
#: The COVER trainer's segment and d-mer sizes. Given, the trainer skips its search over them,
#: which doubled its time (16 against 8 ms on 1,000 bench sources, 54 bytes a document either
#: way: these are the sizes the search chose).
DICT_SEGMENT, DICT_DMER = 1024, 8
#: Buckets of the hash layout: a power of two, so slice counts dividing it read only their own.
HASH_BUCKETS = 4
#: A merge copies a run of a part's all-live groups of at least this many documents (a
#: dictionary of 16 KB a run: at most 2 bytes a document), and compresses shorter ones again.
COPY_MIN_DOCS = 8192
#: The codecs of `source_codec` in a segment's meta.json (absent: zstd, every older segment's).
ZSTD, LZ4 = "zstd", "lz4"
CODECS = (ZSTD, LZ4)
LZ4_BLOCK_DOCS = 32


def codec_of(setting: str) -> str:
    """The codec of the sources of an index whose `index.codec` is `setting` (Elasticsearch's
    values: `best_compression` is zstd, `default` and `lucene_default` LZ4)."""
    return ZSTD if setting == "best_compression" else LZ4


@dataclass
class CompressedSources:
    """The compressed blocks of a segment's sources and what reading them needs."""

    chunks: list[bytes]  # empty when they were handed to a `write` as they were compressed
    offsets: list[int]  # byte offset of each block in the concatenated chunks, and the end
    lengths: np.ndarray  # raw length of each source
    block_docs: int
    dictionary: bytes | None  # the trained zstd dictionary, None for plain blocks
    #: the hash layout: each document's offset in its group times `HASH_BUCKETS` plus its bucket
    #: (`lengths` are in stored order), and each block's first place among the stored sources
    #: and the end; both None when stored in doc order
    slots: np.ndarray | None = None
    starts: np.ndarray | None = None
    #: in runs (a merge's, `RunsWriter`): each run's first document, first block, block size and
    #: dictionary (an index into `dictionaries`, -1: none); None: one run (`dictionary`'s)
    runs: np.ndarray | None = None
    dictionaries: list[bytes] | None = None
    codec: str = ZSTD


@dataclass(frozen=True, slots=True)
class Joined:
    """Consecutive documents' sources end to end, and the length of each."""

    data: bytes
    lengths: np.ndarray  # int64

    @staticmethod
    def of(sources: Sequence[bytes]) -> Joined:
        return Joined(b"".join(sources), np.fromiter(map(len, sources), dtype=np.int64, count=len(sources)))


class Documents(Protocol):
    """Sources as `compress` reads them: samples by position, then every one in order, in runs
    that hold whole blocks (each run's length a multiple of the block but the last's), so a merge
    decompresses its parts a window at a time (`segment_build`)."""

    def __len__(self) -> int: ...

    def sample(self, positions: list[int]) -> list[bytes]: ...

    def runs(self, block: int) -> Iterator[Joined]: ...


@dataclass(frozen=True, slots=True)
class InMemory:
    """`Documents` already joined in memory: one run."""

    joined: Joined

    def __len__(self) -> int:
        return len(self.joined.lengths)

    def sample(self, positions: list[int]) -> list[bytes]:
        lengths = self.joined.lengths[positions]
        ends = np.cumsum(self.joined.lengths)[positions]
        data = self.joined.data
        return [data[e - n : e] for e, n in zip(ends.tolist(), lengths.tolist(), strict=True)]

    def runs(self, block: int) -> Iterator[Joined]:
        yield self.joined


def compress(
    sources: Sequence[bytes] | Documents,
    write: Callable[[bytes], object] | None = None,
    buckets: np.ndarray | None = None,
    dictionary: zstandard.ZstdCompressionDict | None = None,
    codec: str = ZSTD,
) -> CompressedSources:
    """Sources in blocks of `codec`: LZ4's of `LZ4_BLOCK_DOCS`, or zstd's, with a dictionary
    trained on evenly spaced samples of them when the segment is large enough and training
    succeeds (it fails on too little or too uniform data: plain blocks then), or with
    `dictionary` when given (a merge's part's: no training).
    Each block is compressed from one slice of its run's joined sources.
    Given `buckets` (each document's hash bucket, below `HASH_BUCKETS`), in the hash layout.
    Given `write`, each run's compressed blocks go to it at once and none is kept (`chunks` is
    empty): what compressing holds is then one run."""
    documents = InMemory(Joined.of(sources)) if isinstance(sources, Sequence) else sources
    compress_block: Callable[[bytes | memoryview], bytes]
    if codec == LZ4:
        block, compress_block, dictionary = LZ4_BLOCK_DOCS, _lz4_block, None
    elif dictionary is None and (dictionary := _train(documents)) is None:
        block, compress_block = PLAIN_BLOCK_DOCS, zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress
    else:
        block = DICT_BLOCK_DOCS
        compress_block = zstandard.ZstdCompressor(level=ZSTD_LEVEL, dict_data=dictionary).compress
    layout = None if buckets is None else _HashLayout(np.asarray(buckets, dtype=np.int64), block)
    chunks: list[bytes] = []
    offsets = [0]
    lengths = []
    for run in documents.runs(block if layout is None else layout.group):
        if layout is None:
            lengths.append(run.lengths)
            pieces = _blocks(run, block)
        else:
            stored_lengths, pieces = layout.stored(run)
            lengths.append(stored_lengths)
        compressed = list(map(compress_block, pieces))
        offsets += list(accumulate(map(len, compressed), initial=offsets[-1]))[1:]
        if write is None:
            chunks.extend(compressed)
        else:
            for chunk in compressed:
                write(chunk)
    all_lengths = np.concatenate(lengths) if lengths else np.empty(0, dtype=np.int64)
    return CompressedSources(
        chunks,
        offsets,
        all_lengths,
        block,
        None if dictionary is None else dictionary.as_bytes(),
        None if layout is None else layout.slots,
        None if layout is None else layout.block_starts(),
        codec=codec,
    )


@dataclass(frozen=True, slots=True)
class StoredRun:
    """Documents of a run in the hash layout as stored: each block's byte offset from the run's
    first (and the end), the sources' lengths in stored order, each document's slot and each
    block's first place from the run's first document."""

    offsets: np.ndarray
    lengths: np.ndarray
    slots: np.ndarray
    starts: np.ndarray
    block_docs: int
    dictionary: bytes | None


class RunsWriter:
    """A merged segment's sources in runs (the module's docstring), their blocks written as they
    come: runs copied from the parts (`add` of the blocks' bytes, parts of `codec` only) or
    compressed again (`compress`, in `codec`), each dictionary kept once."""

    def __init__(self, write: Callable[[bytes], object], codec: str = ZSTD) -> None:
        self.write = write  # where a copied run's blocks go before it is `add`ed
        self.codec = codec
        self._dictionaries: dict[bytes, int] = {}
        self._runs: list[tuple[int, int, int, int]] = []
        self._pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._docs = self._blocks = self._bytes = 0

    def add(self, run: StoredRun) -> None:
        """A run whose blocks were written (to `write`) since the last one was added."""
        number = -1
        if run.dictionary is not None:
            number = self._dictionaries.setdefault(run.dictionary, len(self._dictionaries))
        self._runs.append((self._docs, self._blocks, run.block_docs, number))
        self._pieces.append((run.offsets[1:] + self._bytes, run.lengths, run.slots, run.starts + self._docs))
        self._docs += len(run.lengths)
        self._blocks += len(run.offsets) - 1
        self._bytes += int(run.offsets[-1])

    def compress(self, documents: Documents, buckets: np.ndarray, dictionary: bytes | None) -> None:
        """Documents compressed again into a run of their own: with `dictionary` (the part's)
        when given, else with one trained on them (or plain blocks); LZ4's have none."""
        given = None if dictionary is None else zstandard.ZstdCompressionDict(dictionary)
        out = compress(documents, self.write, buckets, given, self.codec)
        assert out.slots is not None and out.starts is not None
        offsets = np.asarray(out.offsets, dtype=np.int64)
        self.add(StoredRun(offsets, out.lengths, out.slots, out.starts[:-1], out.block_docs, out.dictionary))

    def finish(self) -> CompressedSources:
        def joined(i: int) -> np.ndarray:
            pieces = [piece[i].astype(np.int64) for piece in self._pieces]
            return np.concatenate(pieces) if pieces else np.empty(0, np.int64)

        return CompressedSources(
            [],
            [0, *joined(0).tolist()],
            joined(1),
            LZ4_BLOCK_DOCS if self.codec == LZ4 else DICT_BLOCK_DOCS,  # (each run's own: `runs`)
            None,
            joined(2),
            np.append(joined(3), self._docs),
            np.asarray(self._runs, dtype=np.int64).reshape(-1, 4),
            list(self._dictionaries),
            self.codec,
        )


def _blocks(run: Joined, block: int) -> Iterator[memoryview]:
    """The run's blocks of `block` consecutive documents, each one slice of its joined sources."""
    ends = np.zeros(len(run.lengths) + 1, dtype=np.int64)
    np.cumsum(run.lengths, out=ends[1:])
    bounds = ends[::block].tolist()
    if len(run.lengths) % block:
        bounds.append(int(ends[-1]))
    view = memoryview(run.data)
    return (view[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True))


class _HashLayout:
    """The hash layout's order, built run by run (runs hold whole groups): each run's documents
    stably sorted by (group, bucket), one block per group and bucket, an empty bucket's block
    empty too (every group `HASH_BUCKETS` blocks: a document's block is then its group's first
    plus its bucket, `Segment._source_places`)."""

    def __init__(self, buckets: np.ndarray, block: int) -> None:
        self.buckets = buckets
        self.group = block * HASH_BUCKETS
        self.slots = np.empty(len(buckets), dtype=np.int64)
        self.done = 0  # documents of the runs before
        self._starts: list[np.ndarray] = []

    def stored(self, run: Joined) -> tuple[np.ndarray, list[bytes]]:
        """The lengths of the run's documents in stored order, and its blocks' sources."""
        count = len(run.lengths)
        keys = np.arange(count, dtype=np.int64) // self.group * HASH_BUCKETS
        keys += self.buckets[self.done : self.done + count]
        order = np.argsort(keys, kind="stable")
        offsets = np.empty(count, dtype=np.int64)  # each document's place in its group
        offsets[order] = np.arange(count) % self.group  # runs start on a group
        self.slots[self.done : self.done + count] = offsets * HASH_BUCKETS + keys % HASH_BUCKETS
        blocks = -(-count // self.group) * HASH_BUCKETS
        firsts = np.zeros(blocks + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys, minlength=blocks), out=firsts[1:])
        self._starts.append(firsts[:-1] + self.done)
        self.done += count
        ends = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(run.lengths, out=ends[1:])
        # A bytes slice per document made by `map` (no bytecode a document), joined a block at
        # a time: 0.26 against 0.43 us a document by a comprehension; a numpy gather of the
        # bytes, 0.75 (bench/RESULTS.md "The workers' builds and the server's id lookups (session 23,
        # `bulk11`)").
        slices = map(slice, ends[order].tolist(), ends[order + 1].tolist())
        docs = map(run.data.__getitem__, slices)
        return run.lengths[order], [b"".join(islice(docs, n)) for n in np.diff(firsts).tolist()]

    def block_starts(self) -> np.ndarray:
        return np.concatenate([*self._starts, [self.done]]).astype(np.int64)


def _train(documents: Documents) -> zstandard.ZstdCompressionDict | None:
    if len(documents) < DICT_MIN_DOCS:
        return None
    step = len(documents) / DICT_SAMPLES
    samples = documents.sample([int(i * step) for i in range(min(DICT_SAMPLES, len(documents)))])
    if sum(len(s) for s in samples) < 8 * DICT_BYTES:
        return None
    try:
        return zstandard.train_dictionary(DICT_BYTES, samples, k=DICT_SEGMENT, d=DICT_DMER, level=ZSTD_LEVEL)
    except zstandard.ZstdError:
        return None


def _lz4_block(data: bytes | memoryview) -> bytes:
    """A block in LZ4's block format, without its raw size (the stored lengths give it)."""
    return lz4.block.compress(data, store_size=False)


def lz4_blocks(frames: Iterable[bytes | memoryview], sizes: list[int], folder: object) -> list[bytes]:
    """LZ4 blocks decompressed, each of the raw size `sizes` gives (LZ4 takes it as a bound and
    may give fewer bytes: a block decompressing to another size is refused, as zstd's short read
    is)."""
    blocks = list(map(_lz4_of_size, frames, sizes))
    if list(map(len, blocks)) != sizes:
        raise lz4.block.LZ4BlockError(f"source blocks of {folder} are shorter than stored")
    return blocks


def _lz4_of_size(frame: bytes | memoryview, size: int) -> bytes:
    return lz4.block.decompress(frame, uncompressed_size=size) if size else b""


_EMPTY_FRAME = zstandard.ZstdCompressor().compress(b"")


def shared_dictionary(data: bytes) -> zstandard.ZstdCompressionDict:
    """A dictionary for the decompressors of several threads, its digested form (about 20 KB,
    against 16 KB for a decompressor's context) built here, once: python-zstandard builds it on
    a decompressor's first use without the interpreter's lock, so threads starting at once
    would each build one and keep all but the last until the process ends."""
    dictionary = zstandard.ZstdCompressionDict(data)
    zstandard.ZstdDecompressor(dict_data=dictionary).decompress(_EMPTY_FRAME)
    return dictionary


def decompressor(dictionary: zstandard.ZstdCompressionDict | None) -> zstandard.ZstdDecompressor:
    """A decompressor for one thread (zstd contexts must not be shared between threads; a
    `shared_dictionary` may be)."""
    if dictionary is None:
        return zstandard.ZstdDecompressor()
    return zstandard.ZstdDecompressor(dict_data=dictionary)
