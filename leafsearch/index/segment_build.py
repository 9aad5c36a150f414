"""Turning documents into segments: from the indexing buffer (refresh) and from segments (merge).

Both paths reduce to the same arrays — one entry per token occurrence for text, one per value
for doc values — so postings, ordinals and doc values are built by one set of vectorized sorts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from leafsearch.index import source_blocks
from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.columns import (
    DocValues,
    KeywordColumn,
    NumericColumn,
    TextColumn,
    VectorColumn,
    merge_terms,
)
from leafsearch.index.index_sort import IndexSort, IndexSortField
from leafsearch.index.interning import intern, intern_ordered
from leafsearch.index.norms import LENGTH_TABLE
from leafsearch.index.segment import (
    Segment,
    SegmentWriter,
    build_doc_values,
    build_postings,
    distinct,
    to_term_array,
)
from leafsearch.index.vector_graph import GraphSpec


def segment_from_buffer(
    buffer: IndexBuffer, folder: Path, index_sort: IndexSort | None = None, codec: str = source_blocks.ZSTD
) -> Segment:
    """Write the buffer's documents (deleted ones included; the caller masks them) as a segment:
    in arrival order, or in `index_sort` order (ties in arrival order), in which case
    `buffer.segment_docs` says where each buffer document went; its sources in `codec`'s blocks.
    Each field's arrays are written as they are built (a streaming `SegmentWriter`), not held
    until the last one is."""
    writer_from_buffer(buffer, index_sort, folder, codec).write(folder)
    segment = Segment(folder)
    segment.write_postings()
    return segment


def writer_from_buffer(
    buffer: IndexBuffer,
    index_sort: IndexSort | None = None,
    streaming: Path | None = None,
    codec: str = source_blocks.ZSTD,
) -> SegmentWriter:
    """The arrays of the buffer's documents as a segment (see `segment_from_buffer`), unwritten
    (or, `streaming`, written into that folder's unfinished folder as they are built), with the
    segments of its `nested` child documents (a parent's children stay consecutive: an index sort
    cannot be set beside `nested` fields)."""
    max_doc = len(buffer)
    keywords = {path: intern(fb.values) for path, fb in buffer.keyword.items()}
    new_of = None
    if index_sort is not None:
        order = index_sort.order(
            [_buffer_sort_values(buffer, keywords, f, max_doc) for f in index_sort.fields]
        )
        new_of = np.empty(max_doc, dtype=np.int64)
        new_of[order] = np.arange(max_doc)
        buffer.segment_docs = new_of

    def docs(values: list[int] | np.ndarray) -> np.ndarray:
        arr = np.asarray(values, dtype=np.int64)
        return arr if new_of is None else new_of[arr]

    def in_order(values: list) -> list:
        return values if new_of is None else [values[i] for i in order.tolist()]

    writer = SegmentWriter(max_doc, streaming, codec)
    ids = buffer.ids  # (a worker's: their 'S' array already where they crossed as one, buffer_wire)
    id_terms = ids if isinstance(ids, np.ndarray) else to_term_array(ids)
    writer.set_ids(
        id_terms if new_of is None else id_terms[order],
        np.asarray(in_order(buffer.seq_nos)),
        np.asarray(in_order(buffer.versions)),
    )
    sources = buffer.sources
    if isinstance(sources, source_blocks.InMemory):  # a worker's buffer, still joined (buffer_wire)
        writer.set_sources(sources if new_of is None else sources.sample(order.tolist()))
    else:
        writer.set_sources(in_order(sources))
    for path, fb in buffer.text.items():
        tokens, token_docs, positions, length_docs, field_lengths = fb.tokens()
        terms, tids, by_term = intern_ordered(tokens)
        del tokens  # (its spans: ~3 arrays of the field's tokens, not needed by its postings)
        postings = build_postings(tids, docs(token_docs), positions, len(terms), max_doc, by_term)
        del tids, token_docs, positions, by_term  # (the next field's would be built beside them)
        lengths = np.zeros(max_doc, dtype=np.int64)
        np.add.at(lengths, docs(length_docs), field_lengths)
        writer.add_text(path, terms, postings, lengths)
    for path, fb in buffer.keyword.items():
        terms, ords = keywords[path]
        writer.add_keyword(path, terms, build_doc_values(docs(fb.all_docs()), ords, max_doc, dedupe=True))
    for path, fb in buffer.long.items():
        values = np.asarray(fb.values, dtype=np.int64)
        writer.add_numeric(path, "long", build_doc_values(docs(fb.all_docs()), values, max_doc, dedupe=False))
    for path, fb in buffer.double.items():
        values = np.asarray(fb.values, dtype=np.float64)
        writer.add_numeric(
            path, "double", build_doc_values(docs(fb.all_docs()), values, max_doc, dedupe=False)
        )
    for path, fb in buffer.vector.items():
        vector_docs = docs(fb.docs)
        by_doc = np.argsort(vector_docs, kind="stable")
        writer.add_vector(path, vector_docs[by_doc], np.stack(fb.values)[by_doc], buffer.graphs.get(path))
    if buffer.routings.count(None) != len(buffer.routings):  # (in C: most buffers have none)
        routed = [i for i, r in enumerate(buffer.routings) if r is not None]
        _add_routing(writer, docs(routed), [buffer.routings[i] for i in routed], max_doc)
    for path, (children, parents) in buffer.nested.items():
        child_folder = None if streaming is None else writer.nested_folder()
        writer.add_nested(path, writer_from_buffer(children, None, child_folder, codec), docs(parents))
    return writer


def _buffer_sort_values(
    buffer: IndexBuffer,
    keywords: dict[str, tuple[np.ndarray, np.ndarray]],
    field: IndexSortField,
    max_doc: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(per-document value, present) of an index sort field over the buffer's documents."""
    path = field.spec.field
    if path in buffer.keyword:
        values, dedupe = keywords[path][1], True
    elif path in buffer.long:
        values, dedupe = np.asarray(buffer.long[path].values, dtype=np.int64), False
    elif path in buffer.double:
        values, dedupe = np.asarray(buffer.double[path].values, dtype=np.float64), False
    else:
        return np.zeros(max_doc, dtype=np.int64), np.zeros(max_doc, dtype=bool)
    fb = buffer.keyword.get(path) or buffer.long.get(path) or buffer.double[path]
    arrays = build_doc_values(fb.all_docs(), values, max_doc, dedupe=dedupe)
    present = arrays.get("present")
    dv = DocValues(
        arrays["values"],
        max_doc,
        offsets=arrays.get("offsets"),
        present=None if present is None else np.unpackbits(present, count=max_doc).astype(bool),
    )
    return dv.per_doc(field.spec.mode)


ROUTING_FIELD = "_routing"


def _add_routing(writer: SegmentWriter, docs: np.ndarray, routings: list[str], max_doc: int) -> None:
    """Custom routing values are kept as a keyword column so merges and lookups preserve them."""
    terms, ords = intern(routings)
    writer.add_keyword(ROUTING_FIELD, terms, build_doc_values(docs, ords, max_doc, dedupe=True))


def merge_segments(
    parts: list[tuple[Segment, np.ndarray | None]],
    folder: Path,
    index_sort: IndexSort | None = None,
    codec: str = source_blocks.ZSTD,
) -> np.ndarray | None:
    """Write the live documents of several segments as one new segment.

    `parts` pairs each segment with its live-docs array (None: all live). Without an index sort
    doc order is preserved (segment order, then doc order), which keeps `_doc` order stable
    across merges, and None is returned. With one the documents are written in index-sort order,
    ties in that same order, and the result says, for each merged document, its position among
    the parts' live documents taken in order. The sources are in `codec`'s blocks: a part's
    blocks of another codec are compressed again, never copied.
    """
    writer, order = _merged_writer(parts, index_sort, folder, codec)
    writer.write(folder)
    Segment(folder).write_postings()
    return order


def _merged_writer(
    parts: list[tuple[Segment, np.ndarray | None]], index_sort: IndexSort | None, folder: Path, codec: str
) -> tuple[SegmentWriter, np.ndarray | None]:
    """The merge's writer, streaming into `folder`'s unfinished folder: each field is written as
    it is merged, so a merge holds one field's merge at a time."""
    keeps = [np.arange(s.max_doc) if live is None else np.flatnonzero(live) for s, live in parts]
    bases = np.cumsum([0] + [len(k) for k in keeps])
    max_doc = int(bases[-1])
    order = None
    new_of = np.arange(max_doc)
    if index_sort is not None:
        order = index_sort.order([_merged_sort_values(parts, keeps, f) for f in index_sort.fields])
        new_of = np.empty(max_doc, dtype=np.int64)
        new_of[order] = np.arange(max_doc)
    remaps = []
    for (seg, _), keep, base in zip(parts, keeps, bases[:-1], strict=True):
        remap = np.full(seg.max_doc, -1, dtype=np.int64)
        remap[keep] = new_of[base : base + len(keep)]
        remaps.append(remap)

    def in_order(values: np.ndarray) -> np.ndarray:
        return values if order is None else values[order]

    writer = SegmentWriter(max_doc, folder, codec)
    ids = np.concatenate(
        [np.asarray(s.id_terms)[np.asarray(s.id_rank)[k]] for (s, _), k in zip(parts, keeps, strict=True)]
    )
    seq = np.concatenate([s.seq_nos[k] for (s, _), k in zip(parts, keeps, strict=True)])
    ver = np.concatenate([s.versions[k] for (s, _), k in zip(parts, keeps, strict=True)])
    writer.set_ids(
        in_order(ids).astype(bytes) if len(ids) else to_term_array([]), in_order(seq), in_order(ver)
    )
    kinds: dict[str, str] = {}
    for seg, _ in parts:
        for path, meta in seg.field_meta.items():
            kinds[path] = meta["kind"]
    for path, kind in kinds.items():
        cols = [(seg.column(path), remap) for (seg, _), remap in zip(parts, remaps, strict=True)]
        if kind == "text":
            _merge_text(writer, path, cols, max_doc)
        elif kind == "keyword":
            _merge_keyword(writer, path, cols, max_doc)
        elif kind == "vector":
            _merge_vector(writer, path, cols, _graph_spec(parts, path))
        else:
            _merge_numeric(writer, path, kind, cols, max_doc)
    for path in dict.fromkeys(p for seg, _ in parts for p in seg.nested_paths):
        _merge_nested(writer, path, parts, remaps, codec)
    # The sources last: their compressed blocks (about a fifth of a KB a bench document) are held
    # until the segment is written, and compressed first they sat beside every field's merge.
    segments = [seg for seg, _ in parts]
    if order is not None:  # an index sort reorders them all: read at once
        every = _LiveSources(segments, keeps).every()
        writer.set_sources([every[i] for i in order.tolist()])
    elif (runs := _source_runs(parts, keeps, codec)) is not None:
        writer.set_source_runs(runs.fill)
    else:
        writer.set_sources(_LiveSources(segments, keeps))
    return writer, order


def _merge_nested(
    writer: SegmentWriter,
    path: str,
    parts: list[tuple[Segment, np.ndarray | None]],
    remaps: list[np.ndarray],
    codec: str,
) -> None:
    """The child documents of a `nested` path whose parents the merge keeps, with their parents'
    new docs: the parts' children in part order, so a parent's children stay consecutive."""
    child_parts, parents = [], []
    for (seg, live), remap in zip(parts, remaps, strict=True):
        found = seg.nested(path)
        if found is None:
            continue
        children, child_parents = found
        child_live = None if live is None else np.asarray(live)[child_parents]
        child_parts.append((children, child_live))
        kept = child_parents if child_live is None else child_parents[child_live]
        parents.append(remap[kept])
    writer.add_nested(
        path, _merged_writer(child_parts, None, writer.nested_folder(), codec)[0], _cat(parents)
    )


def _merged_sort_values(
    parts: list[tuple[Segment, np.ndarray | None]], keeps: list[np.ndarray], field: IndexSortField
) -> tuple[np.ndarray, np.ndarray]:
    """(per-document value, present) of an index sort field over the parts' live documents, in
    order; keyword values are ordinals of the union of the parts' terms."""
    path, mode = field.spec.field, field.spec.mode
    columns = [seg.column(path) for seg, _ in parts]
    if field.kind == "keyword":
        present_cols = [c for c in columns if isinstance(c, KeywordColumn)]
        _, maps = merge_terms([c.terms for c in present_cols])
        term_maps = iter(maps)
    values, present = [], []
    for col, keep in zip(columns, keeps, strict=True):
        if isinstance(col, KeywordColumn):
            ords, has = col.ords.per_doc(mode)
            values.append(next(term_maps)[np.asarray(ords)[keep]])
            present.append(has[keep])
        elif isinstance(col, NumericColumn):
            vals, has = col.doc_values.per_doc(mode)
            values.append(np.asarray(vals)[keep])
            present.append(has[keep])
        else:
            values.append(np.zeros(len(keep), dtype=np.int64))
            present.append(np.zeros(len(keep), dtype=bool))
    return _cat(values), _cat(present).astype(bool)


#: Posting entries a text field's merge holds at once (about 40 bytes each, with their positions):
#: its postings are merged and written a run of terms at a time, so its memory is this, not the
#: field's (a run is longer only for a single term with more entries).
MERGE_BLOCK_ENTRIES = 1 << 18


def _merge_text(writer: SegmentWriter, path: str, cols: list, max_doc: int) -> None:
    """Postings merged entry by entry (term, doc, frequency; positions moved in runs), a block of
    terms at a time (`MERGE_BLOCK_ENTRIES`): each part's entries and positions of a run of terms
    are one slice of its arrays, and the merged ones are appended to the segment's files."""
    present = [(c, remap) for c, remap in cols if isinstance(c, TextColumn)]
    merged, maps = merge_terms([c.terms for c, _ in present])
    per_terms = [np.diff(np.asarray(c.post_offsets, dtype=np.int64)) for c, _ in present]
    entries_per_term = np.zeros(len(merged), dtype=np.int64)
    lengths = np.zeros(max_doc, dtype=np.int64)
    for (col, remap), tmap, per_term in zip(present, maps, per_terms, strict=True):
        entries_per_term[tmap] += per_term  # a part's terms are distinct
        live = np.flatnonzero(remap >= 0)
        # Norm bytes are lossy: re-encoding a decoded length gives back the same byte, so the
        # merged segment scores exactly as its sources did.
        lengths[remap[live]] = LENGTH_TABLE[np.asarray(col.norms)[live]].astype(np.int64)
    pos_dtype = np.result_type(*[c.positions.dtype for c, _ in present]) if present else np.int64
    out_docs, out_freqs = writer.spill(np.int32), writer.spill(np.int32)
    out_positions, out_offsets = writer.spill(pos_dtype), writer.spill(np.int64)
    used_terms = []
    written = total = 0
    read = np.zeros(len(present), dtype=np.int64)  # each part's positions read so far
    bounds = _term_blocks(entries_per_term, MERGE_BLOCK_ENTRIES)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        terms, docs, freqs, starts, positions = [], [], [], [], []
        base = 0
        for k, ((col, remap), tmap, per_term) in enumerate(zip(present, maps, per_terms, strict=True)):
            t0, t1 = np.searchsorted(tmap, (lo, hi)).tolist()  # tmap ascends: the part's run
            e0, e1 = int(col.post_offsets[t0]), int(col.post_offsets[t1])
            part_freqs = np.asarray(col.post_freqs[e0:e1], dtype=np.int64)
            count = int(part_freqs.sum())
            part_docs = remap[np.asarray(col.post_docs[e0:e1], dtype=np.int64)]
            kept = part_docs >= 0
            terms.append(np.repeat(tmap[t0:t1], per_term[t0:t1])[kept])
            docs.append(part_docs[kept])
            freqs.append(part_freqs[kept])
            starts.append((np.cumsum(part_freqs) - part_freqs + base)[kept])
            positions.append(np.asarray(col.positions[read[k] : read[k] + count]))
            read[k] += count
            base += count
        entry_terms, entry_docs = _cat(terms), _cat(docs)
        order = np.argsort(entry_terms * max(max_doc, 1) + entry_docs, kind="stable")
        entry_terms, entry_docs, entry_freqs = entry_terms[order], entry_docs[order], _cat(freqs)[order]
        entry_starts = _cat(starts)[order]
        del order
        firsts_of_terms = np.flatnonzero(np.diff(entry_terms, prepend=-1))  # entry_terms is sorted
        used_terms.append(entry_terms[firsts_of_terms])
        out_offsets.append(firsts_of_terms + written)
        written += len(entry_terms)
        block_total = int(entry_freqs.sum(dtype=np.int64))
        firsts = np.cumsum(entry_freqs, dtype=np.int64) - entry_freqs
        gather = np.repeat(entry_starts - firsts, entry_freqs) + np.arange(block_total, dtype=np.int64)
        out_docs.append(entry_docs)
        out_freqs.append(entry_freqs)
        out_positions.append(_cat(positions)[gather])
        total += block_total
    out_offsets.append(np.array([written], dtype=np.int64))
    postings = {
        "post_offsets": out_offsets,
        "post_docs": out_docs,
        "post_freqs": out_freqs,
        "positions": out_positions,
    }
    writer.add_text(path, merged[_cat(used_terms)], postings, lengths)
    # Statistics must describe real token counts, not decoded norms.
    writer.fields[path]["sum_total_term_freq"] = total


def _term_blocks(entries_per_term: np.ndarray, budget: int) -> list[int]:
    """Where runs of terms of about `budget` entries start, and the end: each run at least one term."""
    ends = np.cumsum(entries_per_term)
    bounds = [0]
    while bounds[-1] < len(ends):
        before = int(ends[bounds[-1] - 1]) if bounds[-1] else 0
        bounds.append(max(int(np.searchsorted(ends, before + budget, side="right")), bounds[-1] + 1))
    return bounds


class _LiveSources:
    """The parts' live documents' sources in merged order (no index sort), as
    `source_blocks.compress` reads them (`Documents`): its samples, then runs of `WINDOW`
    documents decompressed one at a time, so a merge never holds every source at once."""

    WINDOW = 4096

    def __init__(self, segments: list[Segment], keeps: list[np.ndarray]) -> None:
        self.segments = segments
        self.keeps = keeps
        self.bases = np.cumsum([0] + [len(k) for k in keeps])

    def __len__(self) -> int:
        return int(self.bases[-1])

    def sample(self, positions: list[int]) -> list[bytes]:
        """The sources at these (ascending) positions, one read per part."""
        at = np.asarray(positions, dtype=np.int64)
        part_of = np.searchsorted(self.bases, at, side="right") - 1
        out: list[bytes] = []
        for part in np.unique(part_of).tolist():
            local = at[part_of == part] - self.bases[part]
            out.extend(self.segments[part].sources(self.keeps[part][local]))
        return out

    def runs(self, block: int) -> Iterator[source_blocks.Joined]:
        window = max(block, self.WINDOW - self.WINDOW % block)  # whole blocks of the merged segment
        for start in range(0, len(self), window):
            stop = min(start + window, len(self))
            pieces = []
            for seg, keep, base in zip(self.segments, self.keeps, self.bases[:-1].tolist(), strict=True):
                lo, hi = max(start - base, 0), min(stop - base, len(keep))
                if lo < hi:
                    pieces.append(seg.joined_sources(keep[lo:hi]))
            yield source_blocks.Joined(b"".join(p.data for p in pieces), _cat([p.lengths for p in pieces]))

    def every(self) -> list[bytes]:
        return self.sample(list(range(len(self))))


@dataclass
class _SourceRuns:
    """A merge's sources in runs (source_blocks.py): each item either a part's documents
    [start, stop) copied as stored (whole groups of one of its runs, all live, at least
    `COPY_MIN_DOCS`), or live documents of consecutive parts compressed again, with their runs'
    dictionary when they share one (None: trained on them)."""

    items: list[tuple[Segment, int, int] | tuple[bytes | None, list[Segment], list[np.ndarray]]]

    def fill(self, runs: source_blocks.RunsWriter, buckets: Callable[[int, int], np.ndarray]) -> None:
        done = 0
        for item in self.items:
            if isinstance(item[0], Segment):
                seg, start, stop = item
                runs.add(seg.stored_sources(start, stop, runs.write))
                done += stop - start
            else:
                dictionary, segments, keeps = item
                count = sum(map(len, keeps))
                runs.compress(_LiveSources(segments, keeps), buckets(done, done + count), dictionary)
                done += count


def _source_runs(
    parts: list[tuple[Segment, np.ndarray | None]], keeps: list[np.ndarray], codec: str
) -> _SourceRuns | None:
    """The merge's sources in `codec` as runs copied where they can be (a part's of that codec
    only), or None when none can (the sources are then compressed again as one run)."""
    items: list = []
    copies = 0

    def again(dictionary: bytes | None, seg: Segment, docs: np.ndarray) -> None:
        if not len(docs):
            return
        last = items[-1] if items else None
        if last is not None and not isinstance(last[0], Segment) and last[0] == dictionary:
            if last[1][-1] is seg:
                last[2][-1] = np.concatenate([last[2][-1], docs])
            else:
                last[1].append(seg)
                last[2].append(docs)
        else:
            items.append((dictionary, [seg], [docs]))

    for (seg, live), keep in zip(parts, keeps, strict=True):
        stored = seg.source_runs() if seg.source_codec == codec else []
        if not stored:
            again(None, seg, keep)
            continue
        for first, end, size, dictionary in stored:
            group = size * source_blocks.HASH_BUCKETS
            groups = -(-(end - first) // group)
            whole = np.ones(groups, dtype=bool)
            if live is not None:
                padded = np.ones(groups * group, dtype=bool)
                padded[: end - first] = live[first:end]
                whole = padded.reshape(groups, group).all(axis=1)
            at = first
            for lo, hi in _true_runs(whole):
                start, stop = first + lo * group, min(first + hi * group, end)
                if stop - start < source_blocks.COPY_MIN_DOCS:
                    continue
                again(dictionary, seg, _kept(live, at, start))
                items.append((seg, start, stop))
                copies += 1
                at = stop
            again(dictionary, seg, _kept(live, at, end))
    return _SourceRuns(items) if copies else None


def _true_runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) of each run of consecutive True values."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], flags, [False]]).astype(np.int8)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


def _kept(live: np.ndarray | None, start: int, stop: int) -> np.ndarray:
    """The live documents of [start, stop)."""
    if live is None:
        return np.arange(start, stop, dtype=np.int64)
    return np.flatnonzero(live[start:stop]) + start


def _cat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)


def _flat_kept(dv: DocValues, remap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    docs, values = dv.flat
    new_docs = remap[docs]
    keep = new_docs >= 0
    return new_docs[keep], np.asarray(values)[keep]


def _merge_keyword(writer: SegmentWriter, path: str, cols: list, max_doc: int) -> None:
    present = [(c, remap) for c, remap in cols if isinstance(c, KeywordColumn)]
    merged, maps = merge_terms([c.terms for c, _ in present])
    docs, ords = [], []
    for (col, remap), tmap in zip(present, maps, strict=True):
        d, o = _flat_kept(col.ords, remap)
        docs.append(d)
        ords.append(tmap[o.astype(np.int64)])
    d, o = _cat(docs), _cat(ords)
    used, used_ords = distinct(o)  # the terms a live document still holds
    writer.add_keyword(path, merged[used], build_doc_values(d, used_ords, max_doc, dedupe=True))


def _merge_numeric(writer: SegmentWriter, path: str, kind: str, cols: list, max_doc: int) -> None:
    dtype = np.int64 if kind == "long" else np.float64
    docs, values = [], []
    for col, remap in cols:
        if isinstance(col, NumericColumn):
            d, v = _flat_kept(col.doc_values, remap)
            docs.append(d)
            values.append(v.astype(dtype))
    writer.add_numeric(
        path,
        kind,
        build_doc_values(
            _cat(docs), np.concatenate(values) if values else np.empty(0, dtype), max_doc, dedupe=False
        ),
    )


def _graph_spec(parts: list[tuple[Segment, np.ndarray | None]], path: str) -> GraphSpec | None:
    """How the newest part that has the field built its graph (the mapping's, which cannot change)."""
    for seg, _ in reversed(parts):
        meta = seg.field_meta.get(path)
        if meta is not None and "hnsw" in meta:
            return GraphSpec.from_meta(meta["hnsw"])
    return None


def _merge_vector(writer: SegmentWriter, path: str, cols: list, graph: GraphSpec | None) -> None:
    """The kept documents' vectors, in their new doc order; their graph rebuilt."""
    present = [(c, remap) for c, remap in cols if isinstance(c, VectorColumn)]
    docs, rows = [], []
    for col, remap in present:
        new_docs = remap[col.docs]
        keep = new_docs >= 0
        docs.append(new_docs[keep])
        rows.append(np.asarray(col.vectors)[keep])
    d = _cat(docs)
    order = np.argsort(d, kind="stable")
    writer.add_vector(path, d[order], np.concatenate(rows)[order], graph)
