"""Lucene's one-byte field-length norms (SmallFloat.intToByte4 / byte4ToInt).

BM25 scores in Elasticsearch use the length decoded from this lossy byte, not the exact length,
so leafsearch stores the same byte to rank documents in the same order with the same scores.
"""

from __future__ import annotations

import numpy as np

_NUM_FREE_VALUES = 24  # 255 - longToInt4(Integer.MAX_VALUE)


def _long_to_int4(i: np.ndarray) -> np.ndarray:
    i = i.astype(np.int64)
    num_bits = np.where(i > 0, np.floor(np.log2(np.maximum(i, 1))).astype(np.int64) + 1, 0)
    shift = np.maximum(num_bits - 4, 0)
    encoded = ((i >> shift) & 0x07) | ((shift + 1) << 3)
    return np.where(num_bits < 4, i, encoded)


def _int4_to_long(i: np.ndarray) -> np.ndarray:
    i = i.astype(np.int64)
    bits = i & 0x07
    shift = (i >> 3) - 1
    return np.where(shift == -1, bits, (bits | 0x08) << np.maximum(shift, 0))


def encode_lengths(lengths: np.ndarray) -> np.ndarray:
    """Field lengths (token counts) to norm bytes."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.where(
        lengths < _NUM_FREE_VALUES,
        lengths,
        _NUM_FREE_VALUES + _long_to_int4(np.maximum(lengths - _NUM_FREE_VALUES, 0)),
    )
    return out.astype(np.uint8)


#: Decoded field length of every norm byte: LENGTH_TABLE[norm] is what BM25 divides by avgdl.
LENGTH_TABLE: np.ndarray = np.where(
    np.arange(256) < _NUM_FREE_VALUES,
    np.arange(256),
    np.minimum(_NUM_FREE_VALUES + _int4_to_long(np.maximum(np.arange(256) - _NUM_FREE_VALUES, 0)), 2**31 - 1),
).astype(np.float32)
