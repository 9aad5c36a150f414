"""Immutable segments: a folder of numpy arrays, written once and memory-mapped for reading.

A segment never changes after it is written; deletes live outside it, in the live-docs arrays of
the Searchers that hold it. That is what lets a point in time or a scroll keep reading a segment
while merges replace it, and lets every derived structure (sorted orders, per-document sort
values) be cached for the segment's whole life.

Layout of a segment folder:
- `meta.json`: doc count and the fields with their storage kind and statistics.
- `_id.terms.npy` (sorted ids, 'S'), `_id.docs.npy` (doc of each sorted id), `_id.rank.npy`
  (position of each doc's id in the sorted list), `_seq_no.npy`, `_version.npy`.
- `_source.bin` (LZ4 blocks of 32 consecutive raw JSON sources, `source_codec: "lz4"` in
  `meta.json`, or zstd blocks, see `source_blocks.py`: 32 per block, or 16 per block with the
  segment's trained dictionary `_source.dict`, which `meta.json` then announces),
  `_source.blocks.npy` (byte offset of each block), `_source.lengths.npy` (raw
  length of each source, as stored); in the hash layout (`source_buckets` in `meta.json`),
  `_source.slots.npy` (each doc's place in its group and bucket) and `_source.starts.npy`;
  a merge's, in runs (`source_runs`), `_source.runs.npy` and `_source.dict_ends.npy` too, and
  `_source.dict` holds each run's dictionary end to end.
- `sort-<digest>.order` (the segment's documents sorted by a sort key, `order_files.py`) and
  `f<number>.postings` (a keyword field's documents per term, `columns.py`): derived from the
  segment by the first process that needed them and mapped by every other (`derived_files.py`);
  a keyword's of few terms are written by the segment's writer (`write_postings`).
- per field `f<number>.*.npy`: see `columns.py` for what each array means. Fields are numbered in
  `meta.json` (`fields[path].number`), so no field name, whatever a client sent, ever becomes part
  of a file name. (Segments written before numbering used `f.<path>.` and are still read.)
"""

from __future__ import annotations

import mmap
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path

import numpy as np
import orjson
import zstandard

from leafsearch.common.durable import FOLDER_MODE, fsync_dir, fsync_files, private
from leafsearch.common.intervals import one_interval
from leafsearch.index import array_files, derived_files, source_blocks, vector_graph
from leafsearch.index.block_cache import BlockCache
from leafsearch.index.columns import DocValues, KeywordColumn, NumericColumn, TextColumn, VectorColumn
from leafsearch.index.fielddata import Fielddata
from leafsearch.index.uid import slice_hashes
from leafsearch.index.vector_graph import GraphSpec

#: Array files up to this size are read into memory rather than memory-mapped.
_READ_WHOLE_BYTES = 64 * 1024
#: A keyword field of at most one term per this many documents of a segment gets its postings
#: file when the segment is written (`Segment.write_postings`).
DOCS_PER_TERM_WRITTEN = 8


def to_term_array(values: list[str] | list[bytes]) -> np.ndarray:
    """Strings to a numpy bytes array ('S'), UTF-8 encoded, so that sort order is Lucene's."""
    if values and isinstance(values[0], str):
        fixed = _fixed_width_ascii(values)  # type: ignore[arg-type]
        if fixed is not None:
            return fixed
        values = list(map(str.encode, values))  # type: ignore[arg-type]
    if not values:
        return np.empty(0, dtype="S1")
    return np.array(values, dtype=bytes)


def _fixed_width_ascii(values: list[str]) -> np.ndarray | None:
    """`to_term_array` of ASCII strings all as long as the first and without NUL (ids such as a
    log's), by one join and one encode instead of an encode and a length a string; else None.
    Joined by NUL, every string is that long exactly when there are no other NULs and one
    falls at every stride."""
    return fixed_width_terms("\x00".join(values), len(values))


def fixed_width_terms(joined: str, count: int) -> np.ndarray | None:
    """`to_term_array` of `count` strings joined by NUL when they are ASCII, all as long as the
    first and without NUL (`_fixed_width_ascii`; a worker's buffer ids cross so joined), else None."""
    width = joined.find("\x00") if count > 1 else len(joined)
    if not (
        width > 0
        and joined.isascii()
        and len(joined) == count * (width + 1) - 1
        and joined.count("\x00") == count - 1
        and joined[width :: width + 1] == "\x00" * (count - 1)
    ):
        return None
    return np.frombuffer((joined + "\x00").encode(), dtype=f"S{width + 1}").astype(f"S{width}")


def build_doc_values(docs: np.ndarray, values: np.ndarray, max_doc: int, *, dedupe: bool) -> dict:
    """Arrays of a CSR doc-values column from (doc, value) pairs in any order."""
    if not (docs[1:] > docs[:-1]).all():  # else one value a doc, in order already
        order = np.lexsort((values, docs))
        docs = docs[order]
        values = values[order]
    if dedupe and len(docs):
        keep = np.ones(len(docs), dtype=bool)
        keep[1:] = (docs[1:] != docs[:-1]) | (values[1:] != values[:-1])
        docs, values = docs[keep], values[keep]
    counts = np.bincount(docs, minlength=max_doc) if len(docs) else np.zeros(max_doc, np.int64)
    if counts.max(initial=0) <= 1:
        dense = np.zeros(max_doc, dtype=values.dtype)
        dense[docs] = values
        out = {"values": dense}
        if len(docs) < max_doc:
            out["present"] = np.packbits(counts.astype(bool))
        return out
    offsets = np.zeros(max_doc + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return {"values": values, "offsets": offsets}


#: Up to this many terms a buffer's postings are ordered by a radix sort of the term ids (16 bits).
_RADIX_TERMS = 1 << 16


def build_postings(
    term_ids: np.ndarray,
    docs: np.ndarray,
    positions: np.ndarray,
    num_terms: int,
    max_doc: int,
    by_term: np.ndarray | None = None,
) -> dict:
    """Postings arrays from one entry per token occurrence.

    Occurrences must come in (doc, position) order within each term once stably sorted by term,
    which is how both the buffer (arrival order) and a merge (segment order) supply them.
    `by_term`, when given, is that stable order by term (`interning.intern_ordered`'s).
    """
    n = len(term_ids)
    radix = num_terms <= _RADIX_TERMS or by_term is not None
    if radix and (n < 2 or bool((docs[1:] >= docs[:-1]).all())):
        # Occurrences in doc order (a buffer without an index sort): a stable sort by term alone
        # gives (term, doc, position) order, and numpy sorts 16-bit keys by radix in one pass
        # (288,000 bench tokens: 2 ms against 17 for the packed sort below), when the interning
        # did not already give it.
        order = term_ids.astype(np.uint16).argsort(kind="stable") if by_term is None else by_term
        key = term_ids[order].astype(np.int64, copy=False)
        key *= max(max_doc, 1)
        key += docs[order]
    else:
        key, order = _postings_order(term_ids, docs, num_terms, max_doc)
    positions = positions[order]
    if len(key):
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    else:
        starts = np.empty(0, np.int64)
    freqs = np.diff(np.append(starts, len(key)))
    entry_terms = key[starts] // max(max_doc, 1)
    entry_docs = key[starts] % max(max_doc, 1)
    offsets = np.zeros(num_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(entry_terms, minlength=num_terms), out=offsets[1:])
    return {
        "post_offsets": offsets,
        "post_docs": entry_docs,
        "post_freqs": freqs,
        "positions": positions,
    }


def _postings_order(
    term_ids: np.ndarray, docs: np.ndarray, num_terms: int, max_doc: int
) -> tuple[np.ndarray, np.ndarray]:
    """(term * max_doc + doc of each occurrence, sorted; the stable order that sorts them)."""
    key = term_ids.astype(np.int64)  # (a copy, computed in place: no array of it more at once)
    key *= max(max_doc, 1)
    key += docs
    n = len(key)
    if max(num_terms, 1) * max(max_doc, 1) * max(n, 1) < 2**63:
        # The stable order as one sort of (key, occurrence) packed in an int64: several times
        # cheaper than a stable argsort, which is a merge sort. In place, as above.
        key *= n
        key += np.arange(n, dtype=np.int64)
        key.sort()
        order = key % n
        key //= n
    else:
        order = np.argsort(key, kind="stable")
        key = key[order]
    return key, order


#: Derived columns no request holds that a segment keeps (`Segment.hold_derived`).
_DERIVED_COLUMNS = 8

#: Consecutive source blocks read together past which they skip the block cache (`sources`).
_UNCACHED_RUN = 16
#: Bytes of stored source blocks a merge copies at a time (`Segment.stored_sources`).
_COPY_BYTES = 256 * 1024


class SegmentWriter:
    """Collects the arrays of a new segment and writes them to a folder, fsynced (every file at
    once, when the folder is complete).

    Given its folder (`streaming`), it writes each array as it is added, and the sources as they
    are compressed, into the unfinished folder, and holds none of them: a merge's memory is then
    one field's merge at a time (and a block of a text field's postings: `Appender`), not the
    whole segment's. Either way `write` renames the folder into place only once every file is
    written and fsynced, and the files are the same."""

    def __init__(self, max_doc: int, streaming: Path | None = None, codec: str = source_blocks.ZSTD) -> None:
        """`codec`: the sources' (source_blocks.py; the index's `index.codec`)."""
        self.max_doc = max_doc
        self.codec = codec
        self.arrays: dict[str, np.ndarray] = {}
        self.fields: dict[str, dict] = {}
        self.sources: source_blocks.CompressedSources = source_blocks.compress([], codec=codec)
        #: `nested` path -> the writer of its child documents' segment (`Segment.nested`).
        self.nested: dict[str, SegmentWriter] = {}
        #: graph file name -> (the column's vectors, how to build its graph)
        self.graphs: dict[str, tuple[np.ndarray, GraphSpec]] = {}
        self._folder = streaming
        self._tmp = None if streaming is None else _begin(streaming)
        self._spills = 0
        self._sources_written = False
        self._ids: np.ndarray | None = None  # each document's id, for the sources' hash layout

    def spill(self, dtype: np.dtype | type) -> array_files.Appender:
        """An array to fill a block at a time and add as one of a field's arrays (streaming only)."""
        assert self._tmp is not None, "a spilled array needs a streaming writer"
        self._spills += 1
        return array_files.Appender(self._tmp / f"spill-{self._spills}", dtype)

    def nested_folder(self) -> Path:
        """Where the child segment of the next `add_nested` goes (streaming only)."""
        assert self._tmp is not None, "a nested folder needs a streaming writer"
        return self._tmp / f"n{len(self.nested)}"

    def _put(self, name: str, arr: np.ndarray | array_files.Appender) -> None:
        if self._tmp is None:
            assert isinstance(arr, np.ndarray), "a spilled array needs a streaming writer"
            self.arrays[name] = arr
        else:
            _save_array(self._tmp, name, arr)

    def add_nested(self, path: str, children: SegmentWriter, parents: np.ndarray) -> None:
        """The child documents of a `nested` path, written inside this segment's folder, and the
        parent doc of each (ascending: a parent's children are consecutive)."""
        self._put(f"n{len(self.nested)}.parents", np.asarray(parents, dtype=np.int64))
        self.nested[path] = children

    def set_ids(self, ids: np.ndarray, seq_nos: np.ndarray, versions: np.ndarray) -> None:
        order = np.argsort(ids, kind="stable")
        rank = np.empty(len(ids), dtype=np.int64)
        rank[order] = np.arange(len(ids))
        self._put("_id.terms", ids[order])
        self._put("_id.docs", order)
        self._put("_id.rank", rank)
        self._put("_seq_no", np.asarray(seq_nos, dtype=np.int64))
        self._put("_version", np.asarray(versions, dtype=np.int64))
        self._ids = ids

    def set_sources(self, sources: Sequence[bytes] | source_blocks.Documents) -> None:
        """The sources in doc order (after `set_ids`): in the hash layout when the segment is
        large enough for dictionary blocks (source_blocks.py)."""
        buckets = None
        if self._ids is not None and self.max_doc >= source_blocks.DICT_MIN_DOCS:
            buckets = slice_hashes(self._ids) & (source_blocks.HASH_BUCKETS - 1)
        if self._tmp is None:
            self.sources = source_blocks.compress(sources, buckets=buckets, codec=self.codec)
            return
        with open(self._tmp / "_source.bin", "wb", opener=private) as fh:
            self.sources = source_blocks.compress(sources, fh.write, buckets, codec=self.codec)
        self._sources_written = True

    def set_source_runs(
        self, fill: Callable[[source_blocks.RunsWriter, Callable[[int, int], np.ndarray]], None]
    ) -> None:
        """A merge's sources in runs (source_blocks.py; streaming, after `set_ids`): `fill` adds
        them in doc order, given the hash buckets of documents [lo, hi) for the runs it
        compresses again (copied runs keep theirs: their ids are not hashed)."""
        assert self._tmp is not None and self._ids is not None, "runs are a streaming merge's"
        ids = self._ids

        def buckets(lo: int, hi: int) -> np.ndarray:
            return slice_hashes(ids[lo:hi]) & (source_blocks.HASH_BUCKETS - 1)

        with open(self._tmp / "_source.bin", "wb", opener=private) as fh:
            runs = source_blocks.RunsWriter(fh.write, self.codec)
            fill(runs, buckets)
        self.sources = runs.finish()
        self._sources_written = True

    def _prefix(self, path: str) -> tuple[str, int]:
        """The file-name prefix of a new field's arrays: its number in this segment."""
        number = len(self.fields)
        return f"f{number}.", number

    def add_text(
        self,
        path: str,
        terms: np.ndarray,
        postings: dict[str, np.ndarray | array_files.Appender],
        lengths: np.ndarray,
    ) -> None:
        from leafsearch.index.norms import encode_lengths

        prefix, number = self._prefix(path)
        self._put(prefix + "terms", terms)
        for name, arr in postings.items():
            self._put(prefix + name, arr)
        self._put(prefix + "norms", encode_lengths(lengths))
        self.fields[path] = {
            "number": number,
            "kind": "text",
            "doc_count": int(np.count_nonzero(lengths)),
            "sum_total_term_freq": int(lengths.sum()),
        }

    def add_keyword(self, path: str, terms: np.ndarray, dv: dict) -> None:
        prefix, number = self._prefix(path)
        self._put(prefix + "terms", terms)
        for name, arr in dv.items():
            self._put(prefix + name, arr)
        self.fields[path] = {"number": number, "kind": "keyword", "single": "offsets" not in dv}

    def add_numeric(self, path: str, kind: str, dv: dict) -> None:
        prefix, number = self._prefix(path)
        for name, arr in dv.items():
            self._put(prefix + name, arr)
        self.fields[path] = {"number": number, "kind": kind, "single": "offsets" not in dv}

    def add_vector(self, path: str, docs: np.ndarray, vectors: np.ndarray, graph: GraphSpec | None) -> None:
        """A dense_vector column: the documents holding a vector (ascending) and their vectors,
        one (dims,) row each, float32 or int8; with its HNSW graph when `graph` says how and the
        column is large enough (vector_graph.py)."""
        prefix, number = self._prefix(path)
        self._put(prefix + "docs", docs)
        self._put(prefix + "vectors", vectors)
        meta = self.fields[path] = {"number": number, "kind": "vector", "dims": int(vectors.shape[1])}
        if graph is not None:
            meta["hnsw"] = graph.to_meta()
            if len(vectors) >= vector_graph.MIN_GRAPH_ROWS:
                meta["graph"] = True
                self.graphs[prefix + "hnsw.usearch"] = (vectors, graph)

    def write(self, folder: Path) -> None:
        if self._tmp is None:
            tmp = _begin(folder)
            for name, arr in self.arrays.items():
                _save_array(tmp, name, arr)
        else:
            assert folder == self._folder, "a streaming writer writes the folder it was given"
            tmp = self._tmp
        for name, (vectors, spec) in self.graphs.items():
            vector_graph.build(vectors, spec, tmp / name)
        sources = self.sources
        files = [] if self._sources_written else [("_source.bin", sources.chunks)]
        if sources.dictionary is not None:
            files.append(("_source.dict", [sources.dictionary]))
        elif sources.dictionaries:
            files.append(("_source.dict", sources.dictionaries))
        for name, chunks in files:
            with open(tmp / name, "wb", opener=private) as fh:
                for chunk in chunks:
                    fh.write(chunk)
        for name, arr in source_arrays(sources).items():
            array_files.save(tmp / f"{name}.npy", array_files.compact(arr))
        meta: dict = {"max_doc": self.max_doc, "fields": self.fields, **source_meta(sources)}
        if self.nested:  # written inside the unfinished folder: renamed into place with it
            meta["nested"] = {}
            for number, (path, children) in enumerate(self.nested.items()):
                children.write(tmp / f"n{number}")
                meta["nested"][path] = number
        with open(tmp / "meta.json", "wb", opener=private) as fh:
            fh.write(orjson.dumps(meta))
        # Every file fsynced at once (`fsync_files`), then their entries, or a power loss could
        # leave the folder without them; the nested segments' folders fsynced theirs already.
        fsync_files([path for path in tmp.iterdir() if path.is_file()])
        fsync_dir(tmp)
        os.replace(tmp, folder)
        fsync_dir(folder.parent)


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)` of non-negative ints, without its sort when they
    are dense (a walk's blocks, unordered in the hash layout; a merge's keyword ordinals): a mark
    per value in their span."""
    if not len(values):
        return values, values
    low = int(values.min())
    span = int(values.max()) - low + 1
    if span > 4 * len(values):
        return np.unique(values, return_inverse=True)
    present = np.zeros(span, dtype=bool)
    present[values - low] = True
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, rank[values - low]


#: Linux's `fault_around_bytes` (its default): a read fault of a file mapping maps every cached
#: page of the aligned window around it.
_FAULT_AROUND = 64 * 1024


def _unmap(data: mmap.mmap, start: int, end: int) -> None:
    """The pages of `data[start:end]` out of this process's resident memory (`MADV_DONTNEED` on a
    read-only shared file mapping: they stay in the page cache, and a later read maps them again
    with a minor fault). Why: a walk, an export or a merge reads every source block of a segment
    once, and the pages it touched stayed mapped, so each search worker's RSS grew by the
    compressed sources of every index it had walked (150-185 MiB of the 2-worker tree's RSS after
    a 1M-document export, bench/RESULTS.md "The transfer's peak (session 18)"). One call per batch
    of blocks; with the minor faults of the next walk's reads, 0.01-0.02 ms per 1,000 documents of
    a 1,000-document page's ~0.27 in `sources` (in process, 40,000 sources). From a fault-around
    window (`_FAULT_AROUND`) before `start`: a read's first fault mapped its whole window again,
    pages behind it too (the window is aligned in memory, not in the file)."""
    first = max(0, start - _FAULT_AROUND)
    first -= first % mmap.PAGESIZE
    if end > first:
        data.madvise(mmap.MADV_DONTNEED, first, end - first)


def source_meta(sources: source_blocks.CompressedSources) -> dict:
    """What a segment's meta.json says of its compressed sources (each key absent as in every
    segment written before it)."""
    meta: dict = {}
    if sources.codec != source_blocks.ZSTD:  # absent: zstd
        meta["source_codec"] = sources.codec
        meta["source_block_docs"] = sources.block_docs
    if sources.dictionary is not None:  # absent: plain blocks, as every older segment has
        meta["source_dict"] = True
        meta["source_block_docs"] = sources.block_docs
    if sources.slots is not None:  # absent: sources in doc order, as every older segment
        meta["source_buckets"] = source_blocks.HASH_BUCKETS
    if sources.runs is not None:  # absent: one run, as every build's segment
        meta["source_runs"] = True
    return meta


def source_arrays(sources: source_blocks.CompressedSources) -> dict[str, np.ndarray]:
    """The arrays a segment keeps of its compressed sources (their blocks are `_source.bin`)."""
    arrays = {
        "_source.blocks": np.asarray(sources.offsets, dtype=np.int64),
        "_source.lengths": np.asarray(sources.lengths, dtype=np.int64),
    }
    if sources.slots is not None and sources.starts is not None:
        arrays["_source.slots"] = sources.slots
        arrays["_source.starts"] = sources.starts
    if sources.runs is not None and sources.dictionaries is not None:
        arrays["_source.runs"] = sources.runs
        arrays["_source.dict_ends"] = np.cumsum([0, *map(len, sources.dictionaries)], dtype=np.int64)
    return arrays


def _begin(folder: Path) -> Path:
    """The unfinished folder of a segment write, created empty."""
    tmp = _unfinished(folder)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(mode=FOLDER_MODE, parents=True)
    return tmp


def _save_array(tmp: Path, name: str, arr: np.ndarray | array_files.Appender) -> None:
    path = tmp / f"{name}.npy"
    if isinstance(arr, array_files.Appender):
        arr.save(path)
    else:
        array_files.save(
            path, arr if name.endswith((".terms", ".vectors")) else array_files.compact(np.asarray(arr))
        )


def _unfinished(folder: Path) -> Path:
    """Where `SegmentWriter.write` writes the segment at `folder` before renaming it into place."""
    return folder.with_name(folder.name + ".tmp")


def discard_unfinished(folder: Path) -> None:
    """Delete what a segment write that failed left: its temporary folder, and the segment's
    folder when the failure came after the rename (opening it, or installing it). The segment was
    never installed, so nothing reads it."""
    shutil.rmtree(_unfinished(folder), ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)


def remove_segment_folder(folder: Path) -> None:
    """Delete a segment's folder. A search process may be writing a derived file into it at
    that moment (derived_files.py: the file appears after `rmtree` listed the folder, which
    then cannot be removed): a second pass removes it. What a third writer might still add is
    removed with the orphans when the shard next opens."""
    for _ in range(2):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return


class Segment:
    """Read side of one segment folder. Arrays are memory-mapped; columns are opened lazily."""

    def __init__(self, folder: Path) -> None:
        meta = orjson.loads((folder / "meta.json").read_bytes())
        # A merge's runs read their dictionaries on the first read of a source (`_source_dicts`).
        source_dict = (folder / "_source.dict").read_bytes() if meta.get("source_dict") else None
        self._setup(folder, str(folder), meta, source_dict)
        with open(folder / "_source.bin", "rb") as fh:
            if os.fstat(fh.fileno()).st_size:
                self._source_data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    def _setup(self, folder: Path, cache_key: str, meta: dict, source_dict: bytes | None) -> None:
        """The state of every segment, wherever its arrays are (a memory segment's too)."""
        self.folder = folder
        self.name = folder.name
        self._cache_key = cache_key
        self.max_doc: int = meta["max_doc"]
        self.field_meta: dict[str, dict] = meta["fields"]
        #: the codec of its source blocks (source_blocks.py); a value no writer wrote is refused here,
        #: not at the first read of a source
        self.source_codec: str = meta.get("source_codec", source_blocks.ZSTD)
        if self.source_codec not in source_blocks.CODECS:
            raise ValueError(
                f"segment [{folder}] has source blocks of an unknown codec [{self.source_codec!r}]"
            )
        self.source_block_docs: int = meta.get("source_block_docs", source_blocks.PLAIN_BLOCK_DOCS)
        #: the hash layout's buckets per group (source_blocks.py); 0: sources stored in doc order
        self._source_buckets: int = meta.get("source_buckets", 0)
        self._source_in_runs: bool = meta.get("source_runs", False)
        self._source_dict: bytes | None = source_dict
        self._columns: dict[str, object] = {}
        self._nested_numbers: dict[str, int] = meta.get("nested", {})
        self._nested: dict[str, tuple[Segment, np.ndarray]] = {}
        self._derived: OrderedDict[str, object] = OrderedDict()
        self._holds: dict[str, int] = {}  # how many requests hold each derived column
        self._derived_lock = threading.Lock()
        self.blocks: BlockCache | None = None  # the node's cache of decompressed source blocks
        #: the process's uninverted text fields, under its fielddata breaker (index/fielddata.py)
        self.fielddata: Fielddata | None = None
        self._local = threading.local()  # zstd decompressors must not be shared between threads
        self._source_data: bytes | mmap.mmap = b""

    def _load(self, name: str) -> np.ndarray:
        """An array of the segment: memory-mapped, or read whole when small (a memory map costs
        about twice the read of a small file, and a refresh's new segment, which the next query
        opens, holds only small ones)."""
        path = self.folder / f"{name}.npy"
        return array_files.load(path, mmap=os.stat(path).st_size > _READ_WHOLE_BYTES)

    def _has(self, name: str) -> bool:
        return (self.folder / f"{name}.npy").exists()

    @cached_property
    def id_terms(self) -> np.ndarray:
        return self._load("_id.terms")

    @cached_property
    def id_docs(self) -> np.ndarray:
        return self._load("_id.docs")

    @cached_property
    def id_rank(self) -> np.ndarray:
        return self._load("_id.rank")

    @cached_property
    def slice_hashes(self) -> np.ndarray:
        """Per doc: murmur3 of the encoded id with seed 7919 (sliced scroll without a field).

        Computed over the id terms on the first sliced scroll that reads this segment and kept
        for its life, so indexing never pays for it and no later request does either.
        """
        return slice_hashes(self.id_terms)[np.asarray(self.id_rank)]

    def id_slices(self, count: int) -> np.ndarray | None:
        """Per doc: floorMod(`slice_hashes`, count), read off the hash layout of the sources with
        no hashing (a document's block in its group is its hash's bucket, source_blocks.py) when
        `count` divides its buckets; None otherwise."""
        layout = self._source_layout
        if layout is None or self._source_buckets % count:
            return None
        return np.asarray(layout[0], dtype=np.int64) % count

    @cached_property
    def seq_nos(self) -> np.ndarray:
        return np.asarray(self._load("_seq_no"), dtype=np.int64)

    @cached_property
    def versions(self) -> np.ndarray:
        return np.asarray(self._load("_version"), dtype=np.int64)

    @cached_property
    def _source_blocks(self) -> np.ndarray:
        """Byte offset of each compressed block, and the end of the last."""
        return np.asarray(self._load("_source.blocks"), dtype=np.int64)

    @cached_property
    def _source_ends(self) -> np.ndarray:
        """0, then where each stored source ends in the concatenation of all of them (int64, one
        cumulative sum: 8 bytes per document). A source's place inside its decompressed block is
        then three lookups (`_source_bounds`). Why not a table of both ends per document: building
        it took a process 10 ms per million documents on its first fetch from the segment (a
        search worker's first query paid it for every large segment), for 16 bytes per document."""
        lengths = self._load("_source.lengths")
        ends = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, dtype=np.int64, out=ends[1:])
        return ends

    @cached_property
    def _source_layout(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The hash layout's slot of each document (as stored: mapped, a byte a document) and each
        block's first place among the stored sources (source_blocks.py); None: doc order."""
        if not self._source_buckets:
            return None
        slots = np.asarray(self._load("_source.slots"))  # a plain view: a memmap's indexing is slower
        return slots, np.asarray(self._load("_source.starts"), dtype=np.int64)

    @cached_property
    def _source_runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each run's first document, first block, block size and dictionary (an index into
        `_source_dicts`, -1: none): a merge's runs (source_blocks.py), else the segment as one."""
        if self._source_in_runs:
            runs = np.asarray(self._load("_source.runs"), dtype=np.int64)
            return runs[:, 0].copy(), runs[:, 1].copy(), runs[:, 2].copy(), runs[:, 3].copy()
        one = np.zeros(1, dtype=np.int64)
        return one, one, one + self.source_block_docs, one - (self._source_dict is None)

    @cached_property
    def _source_dicts(self) -> list[bytes | None]:
        if not self._source_in_runs:
            return [self._source_dict]
        ends = np.asarray(self._load("_source.dict_ends")).tolist()
        if len(ends) == 1:  # runs without a dictionary (LZ4's, zstd's plain): no `_source.dict`
            return []
        data = (self.folder / "_source.dict").read_bytes()
        return [data[a:b] for a, b in zip(ends[:-1], ends[1:], strict=True)]

    def _source_places(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(place among the stored sources, block) of each document: in the hash layout, its
        group's first place plus its offset, its group's first block plus its bucket (groups
        counted from its run's first document)."""
        layout = self._source_layout
        if layout is None:
            return docs, docs // self.source_block_docs
        buckets = self._source_buckets
        slots = layout[0][docs].astype(np.int64)
        doc_firsts, block_firsts, run_sizes, _ = self._source_run_lists
        # A walk's page or batch lies in one run: its places are arithmetic on the run's numbers
        # (a search and three gathers a document cost a merged segment's reads 90 instructions a
        # document: bench/RESULTS.md "Walks over segments merged in runs (session 22, `walk10`)").
        one = one_interval(doc_firsts, docs)
        if one is None:  # (documents of several runs, or none: a run per document)
            firsts, first_blocks, sizes, _ = self._source_runs
            run = np.searchsorted(firsts, docs, side="right") - 1
            group = sizes[run] * buckets
            local = docs - firsts[run]
            first = docs - local % group
            return first + slots // buckets, first_blocks[run] + local // group * buckets + slots % buckets
        first_doc, first_block, size = doc_firsts[one], block_firsts[one], run_sizes[one]
        local = docs - first_doc if first_doc else docs
        start = local - local % (size * buckets)  # each one's group's first, from the run's first
        places, blocks = start + slots // buckets, start // size + slots % buckets
        if first_doc:
            places += first_doc
        if first_block:
            blocks += first_block
        return places, blocks

    @cached_property
    def _source_run_lists(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """`_source_runs` as lists, for a batch's look at its run (`one_interval`)."""
        firsts, first_blocks, sizes, dictionaries = self._source_runs
        return firsts.tolist(), first_blocks.tolist(), sizes.tolist(), dictionaries.tolist()

    def _source_bounds(self, places: np.ndarray, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of the sources at these places inside their decompressed blocks."""
        ends = self._source_ends
        layout = self._source_layout
        firsts = blocks * self.source_block_docs if layout is None else layout[1][blocks]
        base = ends[firsts]  # where each one's block starts
        return ends[places] - base, ends[places + 1] - base

    def doc_id(self, doc: int) -> str:
        return bytes(self.id_terms[int(self.id_rank[doc])]).decode()

    def doc_ids(self, docs: np.ndarray) -> list[str]:
        return [b.decode() for b in self.doc_id_bytes(docs)]

    def doc_id_bytes(self, docs: np.ndarray) -> list[bytes]:
        """The UTF-8 ids of documents, undecoded (the renderer can often splice them as they are);
        gathered from the columns as plain arrays (a `np.memmap`'s indexing runs Python code)."""
        return np.asarray(self.id_terms)[np.asarray(self.id_rank)[docs]].tolist()

    def lookup_ids(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each id ('S' array), the range [lo, hi) of matching entries in `id_docs`."""
        lo = np.searchsorted(self.id_terms, ids, side="left")
        hi = np.searchsorted(self.id_terms, ids, side="right")
        return lo, hi

    def prepare_sources(self) -> None:
        """Compute now what the first fetch of a source from this segment would: where each
        source ends, the layout and runs of its blocks, its dictionaries digested. Called by the
        thread that writes or installs a merged or flushed segment (`Shard`), so that no search
        pays it: 3 to 4 ms of CPU, most of it page faults, on the first fetch from a segment of
        175,000 documents after a load (bench/RESULTS.md, "W6 right after the load (session 23,
        `w6`)"), once per segment and process. What cannot be read now (the disk, memory) is
        left to that fetch: the segment is installed either way."""
        if not self.max_doc or not self._source_data:
            return
        try:
            self._source_ends, self._source_layout, self._source_blocks, self._source_run_lists  # noqa: B018
            if (self._source_runs[3] >= 0).any():  # (runs without one have no dictionary file)
                self._source_dictionaries  # noqa: B018
        except (OSError, MemoryError):
            return

    def source_blocks(self, indexes: list[int], *, cached: bool = True) -> list[bytes]:
        """Decompressed `_source` blocks, through the node's block cache when the shard gave this
        segment one (`blocks`): one cache lookup and one store for all of them, since a page of
        scattered hits needs dozens. `cached=False` reads them without the cache, as a walk or a
        merge reads each block once. Blocks not kept in a cache have their file pages unmapped
        from this process once read (`_unmap`)."""
        cache = self.blocks if cached else None
        keys: list[tuple[object, int]] = []
        found: list[bytes | None] = [None] * len(indexes)
        missing: Sequence[int] = range(len(indexes))
        if cache is None:  # (every block read: no keys, no list of the missing ones)
            blocks = np.asarray(indexes, dtype=np.int64)
        else:
            keys = [(self._cache_key, index) for index in indexes]
            found = cache.get_many(keys)
            missing = [position for position, data in enumerate(found) if data is None]
            blocks = np.asarray([indexes[position] for position in missing], dtype=np.int64)
        if missing:
            starts = self._source_blocks[blocks].tolist()
            ends = self._source_blocks[blocks + 1].tolist()
            data = self._source_data
            _, block_firsts, _, numbers_of_runs = self._source_run_lists
            run = one_interval(block_firsts, blocks)
            if self.source_codec == source_blocks.LZ4:  # (no dictionary: the same call for every run)
                frames = map(data.__getitem__, map(slice, starts, ends))
                read = source_blocks.lz4_blocks(frames, self._raw_sizes(blocks), self.folder)
                for position, block in zip(missing, read, strict=True):
                    found[position] = block
            elif run is not None:
                decompress = self._decompressor(numbers_of_runs[run]).decompress
                for position, start, end in zip(missing, starts, ends, strict=True):
                    found[position] = decompress(data[start:end])
            else:
                _, first_blocks, _, dictionaries = self._source_runs
                numbers = dictionaries[np.searchsorted(first_blocks, blocks, side="right") - 1].tolist()
                by_number = {number: self._decompressor(number).decompress for number in set(numbers)}
                for position, start, end, number in zip(missing, starts, ends, numbers, strict=True):
                    found[position] = by_number[number](data[start:end])
            if cache is not None:
                cache.put_many([(keys[position], found[position]) for position in missing])
            elif isinstance(data, mmap.mmap):
                _unmap(data, min(starts), max(ends))
        return found  # type: ignore[return-value]

    def source_runs(self) -> list[tuple[int, int, int, bytes | None]]:
        """Each run of the hash layout (source_blocks.py): its documents [first, end), its block
        size and its dictionary; none when the sources are stored in doc order."""
        if not self._source_buckets:
            return []
        firsts, _, sizes, numbers = self._source_runs
        ends = [*firsts[1:].tolist(), self.max_doc]
        dictionaries = self._source_dicts
        return [
            (first, end, size, None if number < 0 else dictionaries[number])
            for first, end, size, number in zip(
                firsts.tolist(), ends, sizes.tolist(), numbers.tolist(), strict=True
            )
        ]

    def stored_sources(
        self, start: int, stop: int, write: Callable[[bytes], object]
    ) -> source_blocks.StoredRun:
        """Documents [start, stop), whole groups of one run of the hash layout (`source_runs`),
        as stored: their blocks' bytes, undecompressed, go to `write` (a merge copies them) a
        few hundred KB at a time, whose file pages are then unmapped (as a walk's)."""
        firsts, first_blocks, sizes, numbers = self._source_runs
        run = int(np.searchsorted(firsts, start, side="right")) - 1
        buckets = self._source_buckets
        group = int(sizes[run]) * buckets
        first = int(firsts[run])
        lo = int(first_blocks[run]) + (start - first) // group * buckets
        hi = int(first_blocks[run]) + -(-(stop - first) // group) * buckets
        offsets = self._source_blocks[lo : hi + 1]
        begin, end = int(offsets[0]), int(offsets[-1])
        data = self._source_data
        for at in range(begin, end, _COPY_BYTES):
            upto = min(at + _COPY_BYTES, end)
            write(data[at:upto])
            if isinstance(data, mmap.mmap):
                _unmap(data, at, upto)
        slots, starts = self._source_layout  # type: ignore[misc]
        number = int(numbers[run])
        return source_blocks.StoredRun(
            offsets - begin,
            np.asarray(self._load("_source.lengths")[start:stop], dtype=np.int64),
            np.array(slots[start:stop]),
            starts[lo:hi] - start,
            int(sizes[run]),
            None if number < 0 else self._source_dicts[number],
        )

    @cached_property
    def _source_dictionaries(self) -> list[zstandard.ZstdCompressionDict | None]:
        """The dictionaries as zstd takes them, shared by every thread's decompressors (a
        thread's own was 45 KB; its context alone is 16)."""
        return [
            None if data is None else source_blocks.shared_dictionary(data) for data in self._source_dicts
        ]

    def _decompressor(self, number: int) -> zstandard.ZstdDecompressor:
        """This thread's decompressor of the dictionary `number` (-1: none): zstd contexts must
        not be shared between threads."""
        mine = getattr(self._local, "zstd", None)
        if mine is None:
            mine = self._local.zstd = {}
        found = mine.get(number)
        if found is None:
            found = mine[number] = source_blocks.decompressor(
                None if number < 0 else self._source_dictionaries[number]
            )
        return found

    def sources(self, docs: np.ndarray | list[int]) -> list[bytes]:
        """Raw `_source` bytes of documents, decompressing each needed block once: a batch of a
        thousand documents costs a few dozen block reads and a thousand slices."""
        places, in_block = self._source_places(np.asarray(docs, dtype=np.int64))
        joined = self._stored_range(places, in_block)
        if joined is not None:
            data, shift = joined
            ends = self._source_ends
            starts, stops = (ends[places] - shift).tolist(), (ends[places + 1] - shift).tolist()
            return [data[start:stop] for start, stop in zip(starts, stops, strict=True)]
        needed, which = distinct(in_block)
        # A walk in index order (an export, a `_doc` scroll, a hash slice's) reads each block
        # once, and keeping them would only push scattered hits' blocks out: consecutive blocks,
        # or in the hash layout at least one of each group's.
        spread = max(self._source_buckets, 1)
        run = len(needed) >= _UNCACHED_RUN and int(needed[-1] - needed[0]) < spread * len(needed)
        blocks = self.source_blocks(needed.tolist(), cached=not run)
        starts, ends = self._source_bounds(places, in_block)
        return [
            blocks[w][s:e]
            for w, s, e in zip(which.reshape(-1).tolist(), starts.tolist(), ends.tolist(), strict=True)
        ]

    def _stored_range(self, places: np.ndarray, blocks: np.ndarray) -> tuple[bytes, int | np.ndarray] | None:
        """The stored sources of a walk's batch or page that reads every document of its blocks
        (`_UNCACHED_RUN` blocks at least, no more stored documents in them than the batch's and
        two groups'), decompressed into one buffer (zstd: one read across their frames per run;
        LZ4: one call a block) without the block cache, and where each document's stored place is
        shifted to in it (one int for a span of consecutive blocks in one run, else one per
        document); None for other reads (scattered hits). The blocks are one span (a `_doc` batch,
        a PIT page in index order: one slice of the file) or a hash slice's buckets of one (a
        sliced scroll's batch: its frames joined, ~60 KB, before the read), in one run or across
        runs. Why: a batch of
        1,000 is ~64 blocks, whose calls, objects and list of distinct blocks one read spares
        (bench/RESULTS.md "A scroll batch's blocks in one call (session 23, `scroll10`)"; a
        slice's, "A sliced scroll's blocks in one read (session 24, `slices12`)")."""
        if len(places) < _UNCACHED_RUN:
            return None
        low, high = int(blocks.min()), int(blocks.max()) + 1
        if high - low < _UNCACHED_RUN:
            return None
        _, block_firsts, run_sizes, numbers_of_runs = self._source_run_lists
        firsts, ends, offsets = self._block_firsts, self._source_ends, self._source_blocks
        most = len(places) + 2 * max(run_sizes) * max(self._source_buckets, 1)
        data = self._source_data
        run = one_interval(block_firsts, blocks)
        first, end = int(firsts[low]), int(firsts[high])
        lz4 = self.source_codec == source_blocks.LZ4
        out: bytes | bytearray
        if run is not None and end - first <= most:  # one span of one run
            shift: int | np.ndarray = int(ends[first])
            span = data[int(offsets[low]) : int(offsets[high])]
            if lz4:  # each block by one call (LZ4 has no read across blocks)
                cuts = (offsets[low : high + 1] - offsets[low]).tolist()
                frames = map(memoryview(span).__getitem__, map(slice, cuts[:-1], cuts[1:]))
                out = b"".join(
                    source_blocks.lz4_blocks(frames, self._raw_sizes(np.arange(low, high)), self.folder)
                )
            else:
                out = bytearray(int(ends[end]) - shift)  # (sized by the stored lengths: decoded in place)
                self._decompress_into(numbers_of_runs[run], span, out)
        else:  # a slice's blocks among the other slices', or blocks of several runs
            spread = max(self._source_buckets, 1)  # (the span is copied: the other slices' blocks at most)
            if high - low > spread * (len(places) + 1):  # scattered hits: their blocks not looked at
                return None
            # Which blocks of the span [low, high) are read and where each one's sources go in
            # the buffer, by arithmetic over the span's few dozen blocks rather than over the
            # documents' (a `distinct` of their blocks and gathers by it: ~30 numpy calls a batch
            # against ~22, bench/RESULTS.md "A sliced scroll's selection and blocks (session 25,
            # `slices13`)").
            rel = blocks - low
            read = np.zeros(high - low, dtype=bool)
            read[rel] = True
            needed = np.flatnonzero(read)
            span_firsts = firsts[low : high + 1]
            if (
                len(needed) < _UNCACHED_RUN
                or high - low > spread * (len(needed) + 1)
                or int(np.diff(span_firsts)[read].sum()) > most
            ):
                return None
            raw = ends[span_firsts]  # where each block's sources start among all, and the end
            sizes = np.diff(raw)
            sizes *= read
            into = np.cumsum(sizes)  # where each block's sources end in the buffer
            total = int(into[-1])
            into -= sizes  # ... and start
            shift = (raw[:-1] - into)[rel]
            # The span's bytes in one copy, cut by views: a slice of the mapping per block cost
            # 10 us more a batch of 1,000 (its page faults one by one).
            begin = int(offsets[low])
            span = memoryview(data[begin : int(offsets[high])])
            bounds = offsets[low : high + 1] - begin
            frames = list(
                map(span.__getitem__, map(slice, bounds[needed].tolist(), bounds[needed + 1].tolist()))
            )
            if lz4:
                out = b"".join(source_blocks.lz4_blocks(frames, sizes[needed].tolist(), self.folder))
            else:
                out = bytearray(total)
                self._decompress_runs_into(run, needed + low, frames, out, [*into[needed].tolist(), total])
        if isinstance(data, mmap.mmap):
            _unmap(data, int(offsets[low]), int(offsets[high]))
        return bytes(out), shift

    def _decompress_runs_into(
        self, run: int | None, needed: np.ndarray, frames: list[memoryview], out: bytearray, at: list[int]
    ) -> None:
        """zstd frames of the blocks `needed` (of the run `run`; None: of several) decompressed
        into `out`, each block at its place `at`: one read across the frames of each run."""
        numbers_of_runs = self._source_run_lists[3]
        if run is not None:
            parts = [(run, 0, len(needed))]
        else:  # each run's blocks: one read with its dictionary
            runs = np.searchsorted(self._source_runs[1], needed, side="right") - 1
            cuts = (np.flatnonzero(runs[1:] != runs[:-1]) + 1).tolist()
            parts = list(zip(runs[[0, *cuts]].tolist(), [0, *cuts], [*cuts, len(needed)], strict=True))
        view = memoryview(out)
        for part_run, a, b in parts:
            self._decompress_into(numbers_of_runs[part_run], b"".join(frames[a:b]), view[at[a] : at[b]])

    def _decompress_into(self, number: int, frames: bytes, out: bytearray | memoryview) -> None:
        """Frames of one run's blocks (dictionary `number`) decompressed by one read across
        them into `out`, which their stored lengths sized."""
        with self._decompressor(number).stream_reader(frames, read_across_frames=True) as reader:
            if reader.readinto(out) != len(out):
                raise zstandard.ZstdError(f"source blocks of {self.folder} are shorter than stored")

    def _raw_sizes(self, blocks: np.ndarray) -> list[int]:
        """The decompressed size of each of these source blocks (from the stored lengths)."""
        firsts, ends = self._block_firsts, self._source_ends
        return (ends[firsts[blocks + 1]] - ends[firsts[blocks]]).tolist()

    @cached_property
    def _block_firsts(self) -> np.ndarray:
        """Each source block's first place among the stored sources, and the end (int64)."""
        layout = self._source_layout
        if layout is not None:
            return layout[1]
        per_block = self.source_block_docs
        return np.minimum(np.arange(len(self._source_blocks), dtype=np.int64) * per_block, self.max_doc)

    def joined_sources(self, docs: np.ndarray) -> source_blocks.Joined:
        """The sources of documents (ascending) end to end, as a merge compresses them again: a
        run of consecutive documents stored in doc order is one slice of its blocks, decompressed
        without the cache (no slice per document)."""
        docs = np.asarray(docs, dtype=np.int64)
        ends = self._source_ends
        places = self._source_places(docs)[0]
        lengths = ends[places + 1] - ends[places]
        if self._source_buckets or not len(docs) or int(docs[-1] - docs[0]) != len(docs) - 1:
            return source_blocks.Joined(b"".join(self.sources(docs)), lengths)
        first, last = int(docs[0]), int(docs[-1])
        per_block = self.source_block_docs
        blocks = list(range(first // per_block, last // per_block + 1))
        base = int(ends[blocks[0] * per_block])
        data = b"".join(self.source_blocks(blocks, cached=False))
        return source_blocks.Joined(data[int(ends[first]) - base : int(ends[last + 1]) - base], lengths)

    def routings(self, docs: list[int]) -> list[str | None]:
        """The custom routing each document was indexed with (None: routed by its id)."""
        col = self.column("_routing")
        if col is None:
            return [None] * len(docs)
        out: list[str | None] = []
        for doc in docs:
            vals = col.ords.doc_values(doc)  # type: ignore[union-attr]
            out.append(col.term(int(vals[0])) if len(vals) else None)  # type: ignore[union-attr]
        return out

    def has_derived_column(self, key: str) -> bool:
        return key in self._derived

    def hold_derived(self, key: str, build) -> object:
        """A column computed from the segment (a nested sort's, search/nested_sort.py), read by
        `column(key)` until `release_derived(key)`. Of those no request holds, the last
        `_DERIVED_COLUMNS` used are kept (requests naming ever new ones keep no more); `build`
        may give None."""
        with self._derived_lock:
            if key in self._derived:
                self._derived.move_to_end(key)
                self._holds[key] = self._holds.get(key, 0) + 1
                return self._derived[key]
        col = build()
        with self._derived_lock:
            col = self._derived.setdefault(key, col)
            self._holds[key] = self._holds.get(key, 0) + 1
            self._trim_derived()
        return col

    def release_derived(self, key: str) -> None:
        with self._derived_lock:
            self._holds[key] -= 1
            if not self._holds[key]:
                del self._holds[key]
            self._trim_derived()

    def _trim_derived(self) -> None:
        unheld = [k for k in self._derived if k not in self._holds]
        for key in unheld[: max(0, len(unheld) - _DERIVED_COLUMNS)]:
            del self._derived[key]

    @property
    def nested_paths(self) -> list[str]:
        return list(self._nested_numbers)

    def nested(self, path: str) -> tuple[Segment, np.ndarray] | None:
        """The segment of a `nested` path's child documents and the parent doc of each child
        (ascending), or None when no document of this segment has that path."""
        found = self._nested.get(path)
        if found is None:
            number = self._nested_numbers.get(path)
            if number is None:
                return None
            child = Segment(self.folder / f"n{number}")
            child.blocks = self.blocks
            parents = np.asarray(self._load(f"n{number}.parents"), dtype=np.int64)
            found = self._nested.setdefault(path, (child, parents))
        return found

    def column(self, path: str) -> TextColumn | KeywordColumn | NumericColumn | VectorColumn | None:
        col = self._columns.get(path)
        if col is not None:
            return col  # type: ignore[return-value]
        meta = self.field_meta.get(path)
        if meta is None:
            return self._derived.get(path)  # type: ignore[return-value]
        prefix = f"f{meta['number']}." if "number" in meta else f"f.{path}."
        kind = meta["kind"]
        if kind == "vector":
            graph = None
            if meta.get("graph"):
                spec = GraphSpec.from_meta(meta["hnsw"])
                graph = vector_graph.Graph(self.folder / f"{prefix}hnsw.usearch", spec)
            vectors = self._load(prefix + "vectors")
            col = VectorColumn(self._load(prefix + "docs"), vectors, self.max_doc, graph)
        elif kind == "text":
            col = TextColumn(
                terms=self._load(prefix + "terms"),
                post_offsets=self._load(prefix + "post_offsets"),
                post_docs=self._load(prefix + "post_docs"),
                post_freqs=self._load(prefix + "post_freqs"),
                positions=self._load(prefix + "positions"),
                norms=self._load(prefix + "norms"),
                doc_count=meta["doc_count"],
                sum_total_term_freq=meta["sum_total_term_freq"],
            )
            if self.fielddata is not None:
                col.owner = (self.fielddata, str(self.folder.parent), path)
        elif kind == "keyword":
            col = self._keyword(self._load(prefix + "terms"), prefix, meta)
        else:
            col = NumericColumn(kind, self._doc_values(prefix, meta))
        self._columns[path] = col
        return col

    def _keyword(self, terms: np.ndarray, prefix: str, meta: dict) -> KeywordColumn:
        postings = self.folder / f"f{meta['number']}.postings" if "number" in meta else None
        return KeywordColumn(terms, self._doc_values(prefix, meta), postings)

    def write_postings(self) -> None:
        """Write the postings files of its keyword fields of at most one term per
        `DOCS_PER_TERM_WRITTEN` documents (a service, a level, a region: what filters ask; their
        postings cost at most 5 bytes a document), as its writer's last step, from columns
        opened for this and dropped after. Why: right after a load, the first of W6's queries
        reaching the segments paid 21 ms of CPU, 14 of them deriving `service`'s postings in
        each (bench/RESULTS.md, "W6 right after the load (session 23, `w6`)"). Fields of many
        terms (ids) derive theirs on first use, as before: 12 bytes a document. A file that
        cannot be written (the disk, memory) is left to that first use."""
        if self.max_doc < derived_files.MIN_DOCS:
            return  # (no postings file: derived faster than a file opens)
        for meta in self.field_meta.values():
            if meta["kind"] != "keyword" or "number" not in meta:
                continue
            prefix = f"f{meta['number']}."
            terms = self._load(prefix + "terms")
            if len(terms) * DOCS_PER_TERM_WRITTEN > self.max_doc:
                continue
            column = self._keyword(terms, prefix, meta)
            try:
                column.postings  # noqa: B018 - derived and written (or found written)
            except MemoryError:
                continue

    def _doc_values(self, prefix: str, meta: dict) -> DocValues:
        values = self._load(prefix + "values")
        dtype = np.int64 if meta["kind"] == "long" or meta["kind"] == "keyword" else None
        if meta["single"]:
            present = None
            if self._has(prefix + "present"):
                present = np.unpackbits(self._load(prefix + "present"), count=self.max_doc).astype(bool)
            return DocValues(values, self.max_doc, present=present, dtype=dtype)
        return DocValues(values, self.max_doc, offsets=self._load(prefix + "offsets"), dtype=dtype)
