"""Turning documents into segments: from the indexing buffer (refresh) and from segments (merge).

Both paths reduce to the same arrays — one entry per token occurrence for text, one per value
for doc values — so postings, ordinals and doc values are built by one set of vectorized sorts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from leafsearch.index.buffer import FieldBuffer, IndexBuffer
from leafsearch.index.columns import DocValues, KeywordColumn, NumericColumn, TextColumn
from leafsearch.index.norms import LENGTH_TABLE
from leafsearch.index.segment import (
    Segment,
    SegmentWriter,
    build_doc_values,
    build_postings,
    to_term_array,
)


def _intern(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique terms and the index of each value among them."""
    table: dict[str, int] = {}
    ids = np.array([table.setdefault(v, len(table)) for v in values], dtype=np.int64)
    terms = to_term_array(list(table))
    order = np.argsort(terms, kind="stable")
    remap = np.empty(len(order), dtype=np.int64)
    remap[order] = np.arange(len(order))
    return terms[order], remap[ids] if len(ids) else ids


def segment_from_buffer(buffer: IndexBuffer, folder: Path) -> Segment:
    """Write the buffer's documents (deleted ones included; the caller masks them) as a segment."""
    max_doc = len(buffer)
    writer = SegmentWriter(max_doc)
    writer.set_ids(to_term_array(buffer.ids), np.asarray(buffer.seq_nos), np.asarray(buffer.versions))
    writer.set_sources(buffer.sources)
    for path, fb in buffer.text.items():
        terms, tids = _intern(fb.values)
        postings = build_postings(
            tids,
            np.asarray(fb.docs, dtype=np.int64),
            np.asarray(fb.positions, dtype=np.int64),
            len(terms),
            max_doc,
        )
        lengths = np.zeros(max_doc, dtype=np.int64)
        np.add.at(lengths, np.asarray(fb.length_docs, dtype=np.int64), np.asarray(fb.lengths, dtype=np.int64))
        writer.add_text(path, terms, postings, lengths)
    for path, fb in buffer.keyword.items():
        terms, ords = _intern(fb.values)
        writer.add_keyword(path, terms, build_doc_values(_docs(fb), ords, max_doc, dedupe=True))
    for path, fb in buffer.long.items():
        values = np.asarray(fb.values, dtype=np.int64)
        writer.add_numeric(path, "long", build_doc_values(_docs(fb), values, max_doc, dedupe=False))
    for path, fb in buffer.double.items():
        values = np.asarray(fb.values, dtype=np.float64)
        writer.add_numeric(path, "double", build_doc_values(_docs(fb), values, max_doc, dedupe=False))
    _add_routing(writer, buffer.routings, max_doc)
    writer.write(folder)
    return Segment(folder)


def _docs(fb: FieldBuffer) -> np.ndarray:
    return np.asarray(fb.docs, dtype=np.int64)


ROUTING_FIELD = "_routing"


def _add_routing(writer: SegmentWriter, routings: list[str | None], max_doc: int) -> None:
    """Custom routing values are kept as a keyword column so merges and lookups preserve them."""
    docs = [i for i, r in enumerate(routings) if r is not None]
    if not docs:
        return
    terms, ords = _intern([routings[i] for i in docs])
    writer.add_keyword(
        ROUTING_FIELD, terms, build_doc_values(np.asarray(docs, dtype=np.int64), ords, max_doc, dedupe=True)
    )


def merge_segments(parts: list[tuple[Segment, np.ndarray | None]], folder: Path) -> Segment:
    """Write the live documents of several segments, in order, as one new segment.

    `parts` pairs each segment with its live-docs array (None: all live). Doc order is preserved
    (segment order, then doc order), which keeps `_doc` order stable across merges.
    """
    keeps = [np.arange(s.max_doc) if live is None else np.flatnonzero(live) for s, live in parts]
    bases = np.cumsum([0] + [len(k) for k in keeps])
    max_doc = int(bases[-1])
    remaps = []
    for (seg, _), keep in zip(parts, keeps, strict=True):
        remap = np.full(seg.max_doc, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        remaps.append(remap)

    writer = SegmentWriter(max_doc)
    ids = np.concatenate(
        [np.asarray(s.id_terms)[np.asarray(s.id_rank)[k]] for (s, _), k in zip(parts, keeps, strict=True)]
    )
    seq = np.concatenate([s.seq_nos[k] for (s, _), k in zip(parts, keeps, strict=True)])
    ver = np.concatenate([s.versions[k] for (s, _), k in zip(parts, keeps, strict=True)])
    writer.set_ids(ids.astype(bytes) if len(ids) else to_term_array([]), seq, ver)
    sources: list[bytes] = []
    for (seg, _), keep in zip(parts, keeps, strict=True):
        sources.extend(seg.sources(keep))
    writer.set_sources(sources)

    kinds: dict[str, str] = {}
    for seg, _ in parts:
        for path, meta in seg.field_meta.items():
            kinds[path] = meta["kind"]
    for path, kind in kinds.items():
        cols = [
            (seg.column(path), remap, base)
            for (seg, _), remap, base in zip(parts, remaps, bases[:-1], strict=True)
        ]
        if kind == "text":
            _merge_text(writer, path, cols, max_doc)
        elif kind == "keyword":
            _merge_keyword(writer, path, cols, max_doc)
        else:
            _merge_numeric(writer, path, kind, cols, max_doc)
    writer.write(folder)
    return Segment(folder)


def _merge_terms(term_arrays: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Union of sorted term arrays and, per input, the merged index of each of its terms."""
    all_terms = np.concatenate([np.asarray(t) for t in term_arrays]) if term_arrays else to_term_array([])
    merged, inverse = np.unique(all_terms, return_inverse=True)
    maps, pos = [], 0
    for t in term_arrays:
        maps.append(inverse[pos : pos + len(t)])
        pos += len(t)
    return merged, maps


def _merge_text(writer: SegmentWriter, path: str, cols: list, max_doc: int) -> None:
    present = [(c, remap, base) for c, remap, base in cols if isinstance(c, TextColumn)]
    merged, maps = _merge_terms([c.terms for c, _, _ in present])
    tids, docs, positions = [], [], []
    lengths = np.zeros(max_doc, dtype=np.int64)
    for (col, remap, base), tmap in zip(present, maps, strict=True):
        freqs = np.asarray(col.post_freqs, dtype=np.int64)
        entry_terms = np.repeat(
            np.arange(len(col.terms)), np.diff(np.asarray(col.post_offsets, dtype=np.int64))
        )
        entry_docs = remap[np.asarray(col.post_docs, dtype=np.int64)]
        occ_keep = np.repeat(entry_docs >= 0, freqs)
        tids.append(np.repeat(tmap[entry_terms], freqs)[occ_keep])
        docs.append(np.repeat(entry_docs + base, freqs)[occ_keep])
        positions.append(np.asarray(col.positions, dtype=np.int64)[occ_keep])
        kept = np.flatnonzero(remap >= 0)
        lengths[remap[kept] + base] = LENGTH_TABLE[np.asarray(col.norms)[kept]].astype(np.int64)
    # Norm bytes are lossy: re-encoding a decoded length gives back the same byte, so the
    # merged segment scores exactly as its sources did.
    all_tids = _cat(tids)
    used = np.unique(all_tids)
    remap_used = np.full(len(merged), -1, dtype=np.int64)
    remap_used[used] = np.arange(len(used))
    postings = build_postings(remap_used[all_tids], _cat(docs), _cat(positions), len(used), max_doc)
    writer.add_text(path, merged[used], postings, lengths)
    # Statistics must describe real token counts, not decoded norms.
    writer.fields[path]["sum_total_term_freq"] = int(sum(len(p) for p in positions))


def _cat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)


def _flat_kept(dv: DocValues, remap: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
    docs, values = dv.flat
    new_docs = remap[docs]
    keep = new_docs >= 0
    return new_docs[keep] + base, np.asarray(values)[keep]


def _merge_keyword(writer: SegmentWriter, path: str, cols: list, max_doc: int) -> None:
    present = [(c, remap, base) for c, remap, base in cols if isinstance(c, KeywordColumn)]
    merged, maps = _merge_terms([c.terms for c, _, _ in present])
    docs, ords = [], []
    for (col, remap, base), tmap in zip(present, maps, strict=True):
        d, o = _flat_kept(col.ords, remap, base)
        docs.append(d)
        ords.append(tmap[o.astype(np.int64)])
    d, o = _cat(docs), _cat(ords)
    used = np.unique(o)
    remap_used = np.full(len(merged), -1, dtype=np.int64)
    remap_used[used] = np.arange(len(used))
    writer.add_keyword(path, merged[used], build_doc_values(d, remap_used[o], max_doc, dedupe=True))


def _merge_numeric(writer: SegmentWriter, path: str, kind: str, cols: list, max_doc: int) -> None:
    dtype = np.int64 if kind == "long" else np.float64
    docs, values = [], []
    for col, remap, base in cols:
        if isinstance(col, NumericColumn):
            d, v = _flat_kept(col.doc_values, remap, base)
            docs.append(d)
            values.append(v.astype(dtype))
    writer.add_numeric(
        path,
        kind,
        build_doc_values(
            _cat(docs), np.concatenate(values) if values else np.empty(0, dtype), max_doc, dedupe=False
        ),
    )
