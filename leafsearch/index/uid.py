"""Elasticsearch's binary encoding of document ids (Uid.encodeId) and the slice hash built on it.

Sliced scrolls without a `field` assign a document to slice floorMod(murmur3(encoded id, seed
7919), max), as Elasticsearch's TermsSliceQuery does. Segments store that hash per document when
they are written, so slicing a snapshot is a vectorized modulo, not a loop over ids.
"""

from __future__ import annotations

import base64

import mmh3
import numpy as np

_UTF8 = 0xFF
_NUMERIC = 0xFE
_BASE64_ESCAPE = 0xFD
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_LAST_OF_2 = frozenset("AQgw")
_LAST_OF_3 = frozenset("AEIMQUYcgkosw048")
SLICE_SEED = 7919


def _is_url_base64(doc_id: str) -> bool:
    rest = len(doc_id) & 3
    if rest == 1:
        return False
    if rest == 2 and doc_id[-1] not in _LAST_OF_2:
        return False
    if rest == 3 and doc_id[-1] not in _LAST_OF_3:
        return False
    return all(c in _BASE64_CHARS for c in doc_id)


def encode_id(doc_id: str) -> bytes:
    if doc_id.isascii() and doc_id.isdigit():
        digits = [ord(c) - 48 for c in doc_id]
        if len(digits) % 2:
            digits.append(0x0F)
        return bytes([_NUMERIC]) + bytes((digits[i] << 4) | digits[i + 1] for i in range(0, len(digits), 2))
    if _is_url_base64(doc_id):
        raw = base64.urlsafe_b64decode(doc_id + "=" * (-len(doc_id) % 4))
        return bytes([_BASE64_ESCAPE]) + raw if raw and raw[0] >= _BASE64_ESCAPE else raw
    return bytes([_UTF8]) + doc_id.encode()


def slice_hashes(doc_ids: list[str]) -> np.ndarray:
    """murmur3_x86_32(encoded id, 7919) of each id, as signed 32-bit ints."""
    return np.fromiter(
        (mmh3.hash(encode_id(i), SLICE_SEED, signed=True) for i in doc_ids),
        dtype=np.int32,
        count=len(doc_ids),
    )
