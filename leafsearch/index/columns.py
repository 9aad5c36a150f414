"""Column readers of one immutable segment: doc values, keyword ordinals and text postings.

Everything here is a read-only view over memory-mapped numpy arrays. Derived arrays (per-document
min/max for sorting, the document of each value) are cached on the column because the segment
never changes: computing them once per segment lifetime is what keeps later pages cheap.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.index import derived_files

if TYPE_CHECKING:
    from leafsearch.index.vector_graph import Graph

#: The layout of a postings file (derived_files.py): `docs` int32, `starts` int64.
_POSTINGS_FORMAT = 1

SORT_MODES = ("min", "max", "sum", "avg", "median")


def ordinal_column(col: Any) -> Any:
    """The column whose ordinals aggregations and sorts read: a text field's fielddata (callers
    have checked the mapping allows it), any other column itself."""
    return col.fielddata if isinstance(col, TextColumn) else col


def term_ordinal(terms: np.ndarray, term: str | bytes) -> int:
    """Position of a term in a sorted numpy 'S' array of UTF-8 terms, or -1 when it is absent."""
    key = term.encode() if isinstance(term, str) else term
    i = int(np.searchsorted(terms, key))
    if i < len(terms) and terms[i] == key:
        return i
    return -1


class DocValues:
    """Values of one field for every document of a segment, in compressed-sparse-row form.

    `offsets[d]:offsets[d+1]` are the positions in `values` of document `d`'s values, in
    ascending order. Single-valued fields (the common case) are stored without offsets: `values`
    then has one slot per document and `present` says which documents have a value.
    """

    def __init__(
        self,
        values: np.ndarray,
        max_doc: int,
        *,
        offsets: np.ndarray | None = None,
        present: np.ndarray | None = None,
        dtype: type | None = None,
    ) -> None:
        self.stored = values  # as the segment stores them: a keyword's ordinals in the fewest bytes
        self._dtype = dtype
        self.max_doc = max_doc
        self.offsets = offsets
        self._present = present

    @cached_property
    def values(self) -> np.ndarray:
        """The values, as `dtype` when one was given: a segment's stored narrow ints (a keyword's
        ordinals, a long's) are widened on the first read of them, not when the column opens.
        Why: a `term` filter on a keyword with postings never reads its ordinals, and widening
        them cost the first such query after a load 4 ms and 8 bytes a document in each process
        (bench/RESULTS.md, "W6 right after the load (session 23, `w6`)"); comparing ordinals
        needs no widening either (`stored`)."""
        if self._dtype is None:
            return self.stored
        return np.asarray(self.stored, dtype=self._dtype)

    @property
    def is_single(self) -> bool:
        return self.offsets is None

    @cached_property
    def counts(self) -> np.ndarray:
        """Number of values of each document (int64, one per document)."""
        if self.offsets is None:
            return self.present.astype(np.int64)
        return np.diff(np.asarray(self.offsets, dtype=np.int64))

    @cached_property
    def present(self) -> np.ndarray:
        """Whether each document has at least one value."""
        if self.offsets is None:
            if self._present is None:
                return np.ones(self.max_doc, dtype=bool)
            return np.asarray(self._present, dtype=bool)
        return self.counts > 0

    @cached_property
    def bounds(self) -> tuple[Any, Any] | None:
        """(smallest, largest) value of the column, None when no document has one. Computed once
        per segment: a range that covers both, or misses them, needs no pass over the documents
        (time-ordered data puts most segments wholly inside or outside a time range)."""
        values = np.asarray(self.values)
        if self.offsets is None and self._present is not None:
            present = self.present
            if not present.any():
                return None
            values = values[present]
        if len(values) == 0:
            return None
        return values.min(), values.max()

    @cached_property
    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        """(doc of each value, value) for every value of the column, documents ascending."""
        if self.offsets is None:
            docs = np.flatnonzero(self.present).astype(np.int32)
            return docs, np.asarray(self.values)[docs]
        docs = np.repeat(np.arange(self.max_doc, dtype=np.int32), self.counts)
        return docs, np.asarray(self.values)

    def per_doc(self, mode: str = "min") -> tuple[np.ndarray, np.ndarray]:
        """One value per document for sorting: (values, present). Missing documents hold 0."""
        cache = self.__dict__.setdefault("_per_doc", {})
        if mode in cache:
            return cache[mode]
        if mode not in SORT_MODES:
            raise ValueError(mode)
        present = self.present
        if self.offsets is None:
            vals = np.asarray(self.values)
            result = (vals, present)
        else:
            vals = np.asarray(self.values)
            offsets = np.asarray(self.offsets, dtype=np.int64)
            out_dtype = np.float64 if mode in ("avg", "median") else vals.dtype
            out = np.zeros(self.max_doc, dtype=out_dtype)
            docs = np.flatnonzero(present)
            if len(docs):
                starts = offsets[docs]
                ends = offsets[docs + 1]
                if mode == "min":
                    out[docs] = vals[starts]
                elif mode == "max":
                    out[docs] = vals[ends - 1]
                elif mode == "sum":
                    out[docs] = np.add.reduceat(vals, starts)
                elif mode == "avg":
                    out[docs] = np.add.reduceat(vals.astype(np.float64), starts) / (ends - starts)
                else:
                    lo = starts + (ends - starts - 1) // 2
                    hi = starts + (ends - starts) // 2
                    out[docs] = (vals[lo].astype(np.float64) + vals[hi].astype(np.float64)) / 2
            result = (out, present)
        cache[mode] = result
        return result

    def doc_values(self, doc: int) -> np.ndarray:
        """The values of one document (for the fetch phase: `fields`, `docvalue_fields`)."""
        if self.offsets is None:
            if not self.present[doc]:
                return np.asarray(self.values)[:0]
            return np.asarray(self.values)[doc : doc + 1]
        return np.asarray(self.values)[int(self.offsets[doc]) : int(self.offsets[doc + 1])]

    def values_of(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(number of values of each doc, their values one doc after the other): `doc_values` of a
        page of documents in a few array operations instead of one call per document."""
        docs = np.asarray(docs, dtype=np.int64)
        values = np.asarray(self.values)
        if self.offsets is None:
            present = self.present[docs]
            return present.astype(np.int64), values[docs[present]]
        offsets = np.asarray(self.offsets, dtype=np.int64)
        starts = offsets[docs]
        counts = offsets[docs + 1] - starts
        # Each value's position: its doc's start plus its rank among that doc's values.
        firsts = np.cumsum(counts) - counts
        positions = np.repeat(starts - firsts, counts) + np.arange(int(counts.sum()), dtype=np.int64)
        return counts, values[positions]


class NumericColumn:
    """A numeric field: `kind` is "long" (int64 semantics) or "double" (float64)."""

    def __init__(self, kind: str, doc_values: DocValues) -> None:
        self.kind = kind
        self.doc_values = doc_values


class KeywordColumn:
    """A keyword field: sorted unique UTF-8 terms and per-document ordinals into them."""

    def __init__(self, terms: np.ndarray, ords: DocValues, postings_file: Path | None = None) -> None:
        self.terms = terms  # numpy 'S' array, sorted ascending by bytes
        self.ords = ords
        self.postings_file = postings_file  # where `postings` is kept (derived_files.py), if anywhere

    def lookup(self, term: str | bytes) -> int:
        """Ordinal of a term, or -1 when the segment does not hold it."""
        return term_ordinal(self.terms, term)

    def term(self, ordinal: int) -> str:
        return bytes(self.terms[ordinal]).decode()

    @cached_property
    def postings(self) -> tuple[np.ndarray, np.ndarray]:
        """(docs, starts): the documents of ordinal `t` are `docs[starts[t]:starts[t + 1]]`,
        ascending, each once.

        Why: a `term` on a keyword otherwise compares every document's ordinal; with this, a
        query reads only its O(matches) documents. Derived once per segment from the ordinals (a
        stable sort, radix for fewer than 65,536 terms: O(n) to O(n log n)) and kept for the
        segment's life: 4 bytes per value plus 8 per term. A duplicated value of one document was
        already dropped when the segment was written, so no document repeats within a term.

        Kept in `postings_file` beside the segment (from `derived_files.MIN_DOCS` documents): the
        first process that needs them writes it, the others map it instead of sorting."""
        file = self.postings_file if self.ords.max_doc >= derived_files.MIN_DOCS else None
        if file is not None:
            found = self._stored_postings(file)
            if found is not None:
                return found
        derived = self._derive_postings()
        if file is None:
            return derived
        try:
            derived_files.write(
                file, {"docs": derived[0], "starts": derived[1]}, {"postings": _POSTINGS_FORMAT}
            )
        except derived_files.UNWRITTEN:
            return derived  # a full disk, the segment deleted meanwhile, memory: kept in memory
        return self._stored_postings(file) or derived

    def _stored_postings(self, file: Path) -> tuple[np.ndarray, np.ndarray] | None:
        """The postings mapped from their file, if it holds a whole set for this column."""
        found = derived_files.read(file)
        if found is None or found.meta.get("postings") != _POSTINGS_FORMAT:
            return None
        docs, starts = found.arrays.get("docs"), found.arrays.get("starts")
        if docs is None or starts is None or len(starts) != len(self.terms) + 1:
            return None
        if starts.dtype != np.int64 or int(starts[-1]) != len(docs):
            return None
        return docs, starts

    def _derive_postings(self) -> tuple[np.ndarray, np.ndarray]:
        """The postings computed from the ordinals (see `postings`)."""
        ords = self.ords
        values = np.asarray(ords.values)
        if ords.is_single:
            docs = None if ords.present.all() else np.flatnonzero(ords.present)
            if docs is not None:
                values = values[docs]
        else:
            docs = np.repeat(np.arange(ords.max_doc, dtype=np.int32), ords.counts)
        narrow = values.astype(np.uint16 if len(self.terms) <= 1 << 16 else np.int32)
        order = np.argsort(narrow, kind="stable")
        posted = (order if docs is None else docs[order]).astype(np.int32)
        starts = np.zeros(len(self.terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(narrow, minlength=len(self.terms)), out=starts[1:])
        return posted, starts

    @cached_property
    def doc_counts(self) -> np.ndarray:
        """How many of the segment's documents hold each term (int64, one per ordinal), deleted
        documents included: what a `terms` aggregation counts when a query matches every
        document of the segment (Elasticsearch reads the terms' doc frequencies then too).
        O(values) once per segment, 8 bytes per term; free when `postings` exists. A document's
        repeated value was dropped when the segment was written, so it counts once."""
        if "postings" in self.__dict__:
            return np.diff(self.postings[1])
        ords = self.ords
        values = np.asarray(ords.values)
        if ords.is_single and not ords.present.all():
            values = values[ords.present]
        return np.bincount(values, minlength=len(self.terms)).astype(np.int64)

    def docs_of(self, lo: int, hi: int) -> np.ndarray:
        """The documents holding an ordinal in [lo, hi), ascending per ordinal (sorted when the
        field is single-valued or `hi == lo + 1`). O(matches) once `postings` exists."""
        docs, starts = self.postings
        return docs[int(starts[lo]) : int(starts[hi])]

    def doc_count(self, lo: int, hi: int) -> int:
        """How many values have an ordinal in [lo, hi): O(1) once `postings` exists."""
        starts = self.postings[1]
        return int(starts[hi] - starts[lo])


class TextColumn:
    """An analyzed text field: postings with term frequencies and positions, and length norms.

    Postings of term `t` (an index into `terms`) are `post_docs[post_offsets[t]:post_offsets[t+1]]`
    with frequencies in `post_freqs` at the same places. The positions of posting entry `i` are
    `positions[pos_starts[i]:pos_starts[i] + post_freqs[i]]`. `norms` holds Lucene's one-byte
    encoding of each document's field length (0: the document has no value).
    """

    def __init__(
        self,
        terms: np.ndarray,
        post_offsets: np.ndarray,
        post_docs: np.ndarray,
        post_freqs: np.ndarray,
        positions: np.ndarray,
        norms: np.ndarray,
        doc_count: int,
        sum_total_term_freq: int,
    ) -> None:
        self.terms = terms
        self.post_offsets = post_offsets
        self.post_docs = post_docs
        self.post_freqs = post_freqs
        self.positions = positions
        self.norms = norms
        self.doc_count = doc_count
        self.sum_total_term_freq = sum_total_term_freq
        #: (the process's Fielddata, the shard folder, the field) when a segment of a shard
        #: opened it; its fielddata while held there.
        self.owner: tuple[Any, str, str] | None = None
        self.built_fielddata: KeywordColumn | None = None

    @cached_property
    def pos_starts(self) -> np.ndarray:
        starts = np.zeros(len(self.post_freqs), dtype=np.int64)
        if len(starts) > 1:
            np.cumsum(np.asarray(self.post_freqs[:-1], dtype=np.int64), out=starts[1:])
        return starts

    @property
    def fielddata(self) -> KeywordColumn:
        """The field uninverted (`fielddata: true`) as a keyword column over the same terms, so
        terms aggregations and sorts read it as they read a keyword: the one the process's
        `Fielddata` holds, built and charged to its breaker on first use (index/fielddata.py);
        built each time when the column has no owner (a segment opened alone)."""
        if self.owner is None:
            return self.uninvert()
        fielddata, shard, field = self.owner
        return fielddata.load(self, shard, field)

    def fielddata_nbytes(self) -> int:
        """What `uninvert` allocates: 4 bytes per posting and 8 per document (and one)."""
        return 4 * len(self.post_docs) + 8 * (len(self.norms) + 1)

    def uninvert(self) -> KeywordColumn:
        """Per document the ordinals of its distinct terms, ascending (a stable sort of the
        postings by document, O(postings log postings))."""
        counts = np.diff(np.asarray(self.post_offsets, dtype=np.int64))
        term_ids = np.repeat(np.arange(len(self.terms), dtype=np.int32), counts)
        docs = np.asarray(self.post_docs, dtype=np.int64)
        order = np.argsort(docs, kind="stable")  # terms stay ascending within a document
        max_doc = len(self.norms)
        offsets = np.zeros(max_doc + 1, dtype=np.int64)
        np.cumsum(np.bincount(docs, minlength=max_doc), out=offsets[1:])
        return KeywordColumn(self.terms, DocValues(term_ids[order], max_doc, offsets=offsets))

    def lookup(self, term: str | bytes) -> int:
        """Index of a term in `terms`, or -1 when the segment does not hold it."""
        return term_ordinal(self.terms, term)

    def postings(self, term: str | bytes) -> tuple[np.ndarray, np.ndarray]:
        """(docs, freqs) of a term; empty arrays when the segment does not hold it."""
        t = self.lookup(term)
        if t < 0:
            return np.empty(0, np.int32), np.empty(0, np.int32)
        a, b = int(self.post_offsets[t]), int(self.post_offsets[t + 1])
        return np.asarray(self.post_docs[a:b]), np.asarray(self.post_freqs[a:b])

    def doc_freq(self, term: str | bytes) -> int:
        t = self.lookup(term)
        if t < 0:
            return 0
        return int(self.post_offsets[t + 1] - self.post_offsets[t])

    def term_positions(self, term: str | bytes) -> tuple[np.ndarray, np.ndarray]:
        """(doc of each occurrence, position) for every occurrence of a term in the segment."""
        t = self.lookup(term)
        if t < 0:
            return np.empty(0, np.int32), np.empty(0, np.int32)
        a, b = int(self.post_offsets[t]), int(self.post_offsets[t + 1])
        freqs = np.asarray(self.post_freqs[a:b], dtype=np.int64)
        docs = np.repeat(np.asarray(self.post_docs[a:b]), freqs)
        if b == a:
            return docs, np.empty(0, np.int32)
        start = int(self.pos_starts[a])
        end = int(self.pos_starts[b - 1] + freqs[-1])
        return docs, np.asarray(self.positions[start:end])

    @cached_property
    def present(self) -> np.ndarray:
        return np.asarray(self.norms) != 0


class VectorColumn:
    """A `dense_vector` field of one segment: `docs` (ascending) hold a vector each, the rows of
    `vectors` ((len(docs), dims), float32 or int8, memory-mapped); `graph`, their HNSW graph
    when the segment has one (vector_graph.py)."""

    kind = "vector"

    def __init__(
        self, docs: np.ndarray, vectors: np.ndarray, max_doc: int, graph: Graph | None = None
    ) -> None:
        self.docs = np.asarray(docs, dtype=np.int64)
        self.vectors = vectors
        self.max_doc = max_doc
        self.graph = graph

    @cached_property
    def present(self) -> np.ndarray:
        mask = np.zeros(self.max_doc, dtype=bool)
        mask[self.docs] = True
        return mask


def merge_terms(term_arrays: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Union of sorted term arrays and, per input, the merged index of each of its terms (a merge's
    term dictionaries; a field's global ordinals over a snapshot's segments, search/sort_keys.py).

    The inputs are sorted runs, which a stable sort (timsort for byte strings) merges in about
    n log(runs) comparisons where `np.unique`'s sort takes n log n: 40% less CPU for 8 parts of
    60,000 terms (bench/RESULTS.md, "Bulk with 4 clients (session 18)")."""
    all_terms = np.concatenate([np.asarray(t) for t in term_arrays]) if term_arrays else np.empty(0, "S1")
    order = np.argsort(all_terms, kind="stable")
    ordered = all_terms[order]
    first = np.ones(len(ordered), dtype=bool)  # the first of each run of equal terms
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    merged = ordered[first]
    inverse = np.empty(len(ordered), dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    maps, pos = [], 0
    for t in term_arrays:
        maps.append(inverse[pos : pos + len(t)])
        pos += len(t)
    return merged, maps
