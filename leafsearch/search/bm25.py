"""Lucene 9's BM25Similarity, computed the way Elasticsearch 8 scores with it.

Scores must equal Elasticsearch's to the last float bit where possible, so that hits tie and order
the same way: every step runs in float32 in Lucene's order of operations. The similarity keeps one
table per field of `1 / (k1 * ((1 - b) + b * length / avgdl))` for the 256 possible norm bytes, and
scores `weight - weight / (1 + freq * table[norm])` with `weight = boost * idf`; the `(k1 + 1)`
factor of textbook BM25 is gone since Lucene 8. Statistics are the shard's (summed over its
segments, deleted documents included), never the segment's.

Keyword and boolean fields have no norms and no frequencies: Lucene then scores with norm byte 1
and frequency 1, and its average length is the average number of values per document.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np

from leafsearch.index.columns import DocValues, KeywordColumn, NumericColumn
from leafsearch.index.norms import LENGTH_TABLE
from leafsearch.index.searcher import Searcher

K1 = np.float32(1.2)
B = np.float32(0.75)
_ONE = np.float32(1.0)

#: Norm byte Lucene assumes for fields indexed without norms.
NO_NORMS = 1


def idf(doc_freq: int, doc_count: int) -> np.float32:
    """ln(1 + (N - n + 0.5) / (n + 0.5)), in double, rounded to float as Lucene does."""
    return np.float32(math.log(1.0 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5)))


def idf_sum(doc_freqs: Iterable[int], doc_count: int) -> np.float32:
    """The idf of a phrase: the float idfs of its terms summed in double."""
    total = 0.0
    for df in doc_freqs:
        total += float(idf(df, doc_count))
    return np.float32(total)


def avg_field_length(sum_total_term_freq: int, doc_count: int) -> np.float32:
    return np.float32(sum_total_term_freq / doc_count) if doc_count else _ONE


def norm_table(avgdl: np.float32) -> np.ndarray:
    """1 / (k1 * ((1 - b) + b * LENGTH_TABLE[norm] / avgdl)) for every norm byte, in float32."""
    return _ONE / (K1 * ((_ONE - B) + B * LENGTH_TABLE / np.float32(avgdl)))


def weight(boost: float, term_idf: np.float32) -> np.float32:
    return np.float32(boost) * term_idf


def score(freqs: np.ndarray, norms: np.ndarray, weight: np.float32, table: np.ndarray) -> np.ndarray:
    """Scores of postings: `weight - weight / (1 + freq * table[norm])`, float32."""
    inverse = table[np.asarray(norms, dtype=np.intp)]
    return weight - weight / (_ONE + np.asarray(freqs, dtype=np.float32) * inverse)


def constant_score(weight: np.float32, table: np.ndarray) -> np.float32:
    """Score of a posting with frequency 1 and no norms (keyword, boolean)."""
    return weight - weight / (_ONE + _ONE * table[NO_NORMS])


# ---------------------------------------------------------------------------------------------
# Statistics

_keyword_cache: weakref.WeakKeyDictionary[KeywordColumn, tuple[int, int, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)
_shard_cache: weakref.WeakKeyDictionary[Any, dict] = weakref.WeakKeyDictionary()


def _keyword_column_stats(col: KeywordColumn) -> tuple[int, int, np.ndarray]:
    """(docs with a value, (doc, term) pairs, docs of each ordinal) of one segment's column.

    Ordinals are stored once per document and term, so counting them gives document frequencies.
    """
    stats = _keyword_cache.get(col)
    if stats is None:
        dv = col.ords
        _, ords = dv.flat
        counts = np.bincount(np.asarray(ords, dtype=np.int64), minlength=len(col.terms))
        stats = (int(np.count_nonzero(dv.present)), int(len(ords)), counts)
        _keyword_cache[col] = stats
    return stats


def _shard_memo(searcher: Searcher) -> dict:
    memo = _shard_cache.get(searcher)
    if memo is None:
        memo = _shard_cache[searcher] = {}
    return memo


def statistics_read(searcher: Any) -> dict[tuple, Any]:
    """The statistics read through this module from a shard's searcher so far, by key (DFS)."""
    return dict(_shard_memo(searcher))


def seed_statistics(searcher: Any, entries: dict[tuple, Any]) -> None:
    """Let a stand-in searcher answer these statistics as if read from it (DFS: the request's sum)."""
    _shard_memo(searcher).update(entries)


def text_doc_freq(searcher: Searcher, field: str, term: str) -> int:
    memo = _shard_memo(searcher)
    key = ("text_df", field, term)
    if key not in memo:
        memo[key] = searcher.doc_freq(field, term)
    return memo[key]


def keyword_field_stats(searcher: Searcher, field: str) -> tuple[int, int]:
    """(doc_count, sum_doc_freq) of a keyword field over the shard; without frequencies Lucene's
    sum of total term frequencies equals the sum of document frequencies."""
    memo = _shard_memo(searcher)
    key = ("kw_stats", field)
    if key not in memo:
        doc_count = pairs = 0
        for view in searcher.views:
            col = view.segment.column(field)
            if isinstance(col, KeywordColumn):
                docs, n_pairs, _ = _keyword_column_stats(col)
                doc_count += docs
                pairs += n_pairs
        memo[key] = (doc_count, pairs)
    return memo[key]


def keyword_doc_freq(searcher: Searcher, field: str, term: str) -> int:
    memo = _shard_memo(searcher)
    key = ("kw_df", field, term)
    if key not in memo:
        total = 0
        for view in searcher.views:
            col = view.segment.column(field)
            if isinstance(col, KeywordColumn):
                ordinal = col.lookup(term)
                if ordinal >= 0:
                    total += int(_keyword_column_stats(col)[2][ordinal])
        memo[key] = total
    return memo[key]


def _docs_with_value(dv: DocValues, value: int) -> int:
    if dv.is_single:
        return int(np.count_nonzero((np.asarray(dv.values) == value) & dv.present))
    docs, values = dv.flat
    return int(len(np.unique(docs[np.asarray(values) == value])))


def boolean_stats(searcher: Searcher, field: str, value: int) -> tuple[int, int, int]:
    """(doc_count, sum_doc_freq, doc_freq of `value`) of a boolean field (stored as 0/1) over the
    shard: Lucene indexes booleans as the terms "F" and "T" without norms or frequencies."""
    memo = _shard_memo(searcher)
    key = ("bool", field, value)
    if key not in memo:
        doc_count = pairs = df = 0
        for view in searcher.views:
            col = view.segment.column(field)
            if isinstance(col, NumericColumn):
                dv = col.doc_values
                doc_count += int(np.count_nonzero(dv.present))
                falses, trues = _docs_with_value(dv, 0), _docs_with_value(dv, 1)
                pairs += falses + trues
                df += trues if value else falses
        memo[key] = (doc_count, pairs, df)
    return memo[key]
