"""Elasticsearch's binary encoding of document ids (Uid.encodeId) and the slice hash built on it.

Sliced scrolls without a `field` assign a document to slice floorMod(murmur3(encoded id, seed
7919), max), as Elasticsearch's TermsSliceQuery does. A segment computes that hash for all its
documents the first time a sliced scroll reads it (`Segment.slice_hashes`), here, in numpy over
the segment's id terms: the ids as one byte matrix, the three encodings (packed digits, url-safe
base64 decoded, 0xff + UTF-8) and murmur3_x86_32 as column operations. Why not per id: a Python
loop over ids cost 5.4 µs a document, 5 s per million on every slice's first page in every
search process.
"""

from __future__ import annotations

import numpy as np

_UTF8 = 0xFF
_NUMERIC = 0xFE
_BASE64_ESCAPE = 0xFD
SLICE_SEED = 7919

_BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
#: Each byte's 6-bit value in url-safe base64, or 64 for a byte outside the alphabet.
_BASE64_VALUE = np.full(256, 64, dtype=np.uint8)
_BASE64_VALUE[np.frombuffer(_BASE64_ALPHABET, dtype=np.uint8)] = np.arange(64, dtype=np.uint8)
#: The last character of an id whose length is 2 or 3 mod 4 must leave no stray bits: its value's
#: low 4 (length 2) or 2 (length 3) bits are zero, as Uid.isURLBase64WithoutPadding checks.
_LAST_BITS_MASK = np.array([0, 0, 0x0F, 0x03], dtype=np.uint8)
#: Ids hashed at once: bounds the byte matrices to a few times this many x the longest id.
_CHUNK = 65_536

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _fmix(h: np.ndarray) -> np.ndarray:
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def _murmur3_x86_32(data: np.ndarray, lengths: np.ndarray, seed: int) -> np.ndarray:
    """murmur3_x86_32 of each row of `data` (uint8, n x width, zero past each row's length)."""
    n, width = data.shape
    padded = np.zeros((n, (width + 3) // 4 * 4), dtype=np.uint8)
    padded[:, :width] = data
    words = padded.view("<u4")  # n x blocks: the little-endian 32-bit blocks
    blocks = lengths // 4
    h = np.full(n, seed, dtype=np.uint32)
    for j in range(int(blocks.max(initial=0))):
        k = _rotl(words[:, j] * _C1, 15) * _C2
        mixed = _rotl(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        h = np.where(blocks > j, mixed, h)
    # The tail: the 1 to 3 bytes after the last whole block, read as one little-endian word (the
    # bytes past the length are zero).
    tail = words[np.arange(n), np.minimum(blocks, words.shape[1] - 1)]
    k = _rotl(tail * _C1, 15) * _C2
    h = np.where(lengths % 4 > 0, h ^ k, h)
    h ^= lengths.astype(np.uint32)
    return _fmix(h)


def _encode(chars: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Uid.encodeId of each id (rows of UTF-8 bytes, zero past each length): bytes and lengths."""
    n, width = chars.shape
    inside = np.arange(width) < lengths[:, None]
    encoded = np.zeros((n, width + 1), dtype=np.uint8)
    enc_lengths = lengths + 1

    # Everything else: 0xff, then the UTF-8 bytes.
    encoded[:, 0] = _UTF8
    encoded[:, 1:] = chars

    # All ASCII digits: 0xfe, then two digits a byte, 0xf closing an odd count.
    digits = np.where(inside, chars - np.uint8(48), np.uint8(0x0F))
    numeric = np.all((digits <= 9) | ~inside, axis=1) & (lengths > 0)
    if numeric.any():
        rows = np.flatnonzero(numeric)
        d = digits[rows]
        if width % 2:
            d = np.concatenate([d, np.full((len(rows), 1), 0x0F, dtype=np.uint8)], axis=1)
        packed = (d[:, 0::2] << np.uint8(4)) | d[:, 1::2]
        half = (lengths[rows] + 1) // 2
        packed[np.arange(packed.shape[1]) >= half[:, None]] = 0
        encoded[rows] = 0
        encoded[rows, 0] = _NUMERIC
        encoded[rows, 1 : 1 + packed.shape[1]] = packed
        enc_lengths[rows] = 1 + half

    # Url-safe base64 without padding: the decoded bytes, 0xfd first if they start at 0xfd or above.
    values = _BASE64_VALUE[chars]
    last = values[np.arange(n), np.maximum(lengths - 1, 0)]
    base64 = (
        ~numeric
        & np.all((values < 64) | ~inside, axis=1)
        & (lengths % 4 != 1)
        & ((last & _LAST_BITS_MASK[lengths % 4]) == 0)
        & (lengths > 0)
    )
    if base64.any():
        rows = np.flatnonzero(base64)
        groups = (width + 3) // 4
        v = np.zeros((len(rows), groups * 4), dtype=np.uint8)
        v[:, :width] = np.where(inside[rows], values[rows], np.uint8(0))
        v = v.reshape(len(rows), groups, 4)
        raw = np.empty((len(rows), groups, 3), dtype=np.uint8)
        raw[:, :, 0] = (v[:, :, 0] << np.uint8(2)) | (v[:, :, 1] >> np.uint8(4))
        raw[:, :, 1] = (v[:, :, 1] << np.uint8(4)) | (v[:, :, 2] >> np.uint8(2))
        raw[:, :, 2] = (v[:, :, 2] << np.uint8(6)) | v[:, :, 3]
        raw = raw.reshape(len(rows), groups * 3)
        raw_lengths = lengths[rows] * 3 // 4  # shorter than the id, so it fits the row
        raw[np.arange(raw.shape[1]) >= raw_lengths[:, None]] = 0
        escape = raw[:, 0] >= _BASE64_ESCAPE
        out = np.zeros((len(rows), width + 1), dtype=np.uint8)
        keep = min(raw.shape[1], width)
        plain = np.flatnonzero(~escape)
        out[plain, :keep] = raw[plain, :keep]
        escaped = np.flatnonzero(escape)
        out[escaped, 0] = _BASE64_ESCAPE
        out[escaped, 1 : 1 + keep] = raw[escaped, :keep]
        encoded[rows] = out
        enc_lengths[rows] = raw_lengths + escape
    return encoded, enc_lengths


def slice_hashes(id_terms: np.ndarray) -> np.ndarray:
    """murmur3_x86_32(Uid.encodeId(id), 7919) of each id of an 'S' array, as signed 32-bit ints."""
    n = len(id_terms)
    width = id_terms.dtype.itemsize
    hashes = np.zeros(n, dtype=np.int32)
    if width == 0:
        return hashes
    for start in range(0, n, _CHUNK):
        terms = np.ascontiguousarray(id_terms[start : start + _CHUNK])
        chars = terms.view(np.uint8).reshape(len(terms), width)
        lengths = np.char.str_len(terms).astype(np.int64)
        encoded, enc_lengths = _encode(chars, lengths)
        hashes[start : start + len(terms)] = _murmur3_x86_32(encoded, enc_lengths, SLICE_SEED).view(np.int32)
    return hashes
