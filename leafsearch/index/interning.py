"""Terms numbered by their byte order, from strings held as spans of one UTF-8 buffer.

A segment's build numbers every token of a text field and every keyword value: the sorted
distinct terms, and the index of each value among them. A dict lookup per value cost about
70 ns (0.8 us a bench document for the message's tokens alone); here each value is read as
big-endian 64-bit words straight from the buffer (no Python string per value), and numpy's
sort finds the distinct ones: a string without a NUL byte, zero-padded, orders as its words
do, so a value of up to 8 bytes is its own sort key, and longer ones are grouped by a hash of
their words, each group checked word for word against its first member (a collision falls
back to a dict). Cost: O(n log n) in C over n values, a few passes of n words each; memory: at
most `MAX_WORDS` words a value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leafsearch.index.segment import to_term_array

#: masks[m]: the first m bytes of a big-endian word (m = 0..8).
_MASKS = np.array([0] + [((1 << 64) - 1) ^ ((1 << (64 - 8 * m)) - 1) for m in range(1, 9)], dtype=np.uint64)
#: Values of up to this many words (64 bytes) are numbered by their words; longer ones (rare:
#: URLs, long keywords) one at a time, so the words a build holds stay within 64 bytes a value.
MAX_WORDS = 8
#: odd multipliers mixing a value's words into one hash (wrapping arithmetic)
_MIX = np.array(
    [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93], dtype=np.uint64
)


@dataclass(frozen=True, slots=True)
class Spans:
    """Strings as (start, length) spans of one UTF-8 buffer; no span holds a NUL byte."""

    data: bytes
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.starts)

    @staticmethod
    def joined(data: bytes, count: int) -> Spans | None:
        """The `count` values of `data` joined by NUL bytes; None when there are more NULs than
        separators (a value held one)."""
        if count == 0:
            return Spans(b"", np.empty(0, np.int64), np.empty(0, np.int64))
        nuls = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0)
        if len(nuls) != count - 1:
            return None
        starts = np.concatenate(([0], nuls + 1))
        ends = np.append(nuls, len(data))
        return Spans(data, starts, ends - starts)

    @staticmethod
    def of(values: list[str]) -> Spans | None:
        """The values encoded end to end; None when one holds a NUL character."""
        return Spans.joined("\x00".join(values).encode(), len(values))

    @staticmethod
    def concat(parts: list[Spans]) -> Spans:
        if len(parts) == 1:
            return parts[0]
        bases = np.cumsum([0] + [len(p.data) for p in parts[:-1]])
        return Spans(
            b"".join(p.data for p in parts),
            np.concatenate([p.starts + base for p, base in zip(parts, bases.tolist(), strict=True)]),
            np.concatenate([p.lengths for p in parts]),
        )

    def take(self, at: np.ndarray) -> Spans:
        return Spans(self.data, self.starts[at], self.lengths[at])

    def strings(self) -> list[str]:
        data = self.data
        return [
            data[a : a + n].decode() for a, n in zip(self.starts.tolist(), self.lengths.tolist(), strict=True)
        ]


def intern(values: list[str] | Spans) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values (UTF-8, an 'S' array as `segment.to_term_array` makes) and the
    index of each value among them (int64)."""
    terms, ids, _ = intern_ordered(values)
    return terms, ids


def intern_ordered(values: list[str] | Spans) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """`intern`, and the values' stable order by term when numbering found it (values of up to
    8 bytes, a text field's tokens mostly: their words are the sort keys), else None: a build's
    postings take it instead of sorting the term ids again (`segment.build_postings`)."""
    spans = Spans.of(values) if isinstance(values, list) else values
    if spans is None:
        return *intern_by_dict(values), None  # type: ignore[arg-type]
    if not len(spans):
        return np.empty(0, dtype="S1"), np.empty(0, dtype=np.int64), None
    long = spans.lengths > 8 * MAX_WORDS
    if not long.any():
        return _intern_words(spans)
    # Values over MAX_WORDS words one at a time (memory: MAX_WORDS words a value at most), the
    # two sets of terms (distinct: their lengths differ) then ordered together.
    short_at, long_at = np.flatnonzero(~long), np.flatnonzero(long)
    short_terms, short_ids, _ = _intern_words(spans.take(short_at))
    long_terms, long_ids = intern_by_dict(spans.take(long_at).strings())
    width = long_terms.dtype.itemsize  # the longest value's
    terms = np.concatenate([short_terms.astype(f"S{width}"), long_terms])
    order = np.argsort(terms, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    ids = np.empty(len(spans), dtype=np.int64)
    ids[short_at] = rank[short_ids]
    ids[long_at] = rank[len(short_terms) + long_ids]
    return terms[order], ids, None


def _intern_words(spans: Spans) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """`intern_ordered` of spans of up to MAX_WORDS words, by their words."""
    if not len(spans):
        return np.empty(0, dtype="S1"), np.empty(0, dtype=np.int64), None
    longest = int(spans.lengths.max())
    width = max(1, -(-longest // 8))
    padded = spans.data + bytes(8 * width)
    windows = np.ndarray((len(padded) - 7,), dtype=">u8", buffer=padded, strides=(1,))
    words = [
        windows[spans.starts + 8 * k].astype(np.uint64) & _MASKS[np.clip(spans.lengths - 8 * k, 0, 8)]
        for k in range(width)
    ]
    if width == 1:  # the word is the value
        keys, ids, _, order = _unique_inverse(words[0])
        return _terms([keys], longest), ids, order
    hashed = spans.lengths.astype(np.uint64)
    for k, word in enumerate(words):
        hashed = hashed * _MIX[k % len(_MIX)] + (word ^ (word >> np.uint64(29)))
    _, groups, firsts, _ = _unique_inverse(hashed)
    members = firsts[groups]
    if not all(np.array_equal(word[members], word) for word in words):  # a hash collision
        return *intern_by_dict(spans.strings()), None
    rep_words = [word[firsts] for word in words]
    order = np.lexsort(rep_words[::-1])  # by the first word, then the next...
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return _terms([word[order] for word in rep_words], longest), rank[groups], None


def _unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`np.unique(keys, return_inverse=True, return_index=True)` of uint64 keys by a stable sort
    (`_stable_order`), as (distinct keys, the index of each key among them, the first position of
    each) and that stable order: numpy's own takes a quicksort, which a token column's many
    repeats slow down (288,000 bench tokens of 5,000 distinct: 38 ms against 17,
    bench/RESULTS.md "Builds and merges by the workers (session 20)")."""
    order = _stable_order(keys)
    ordered = keys[order]
    firsts = np.empty(len(ordered), dtype=bool)
    firsts[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=firsts[1:])
    ids = np.empty(len(ordered), dtype=np.int64)
    ids[order] = np.cumsum(firsts) - 1
    return ordered[firsts], ids, order[firsts], order


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """`keys.argsort(kind="stable")` of uint64 keys, as stable sorts of their four 16-bit digits,
    the least significant first, each of which numpy does by radix (a digit every key shares is
    skipped): a few O(n) passes, where a stable argsort of 64-bit keys is a merge sort (the
    message's 288,000 bench tokens 16.6 -> 7.4 ms, bench/RESULTS.md "The workers' and the parser's
    share of a bulk (session 22, `bulk10`)")."""
    order = None
    for shift in (0, 16, 32, 48):
        digits = ((keys if order is None else keys[order]) >> np.uint64(shift)).astype(np.uint16)
        if len(digits) and digits.min() == digits.max():
            continue
        step = digits.argsort(kind="stable")
        order = step if order is None else order[step]
    return np.arange(len(keys)) if order is None else order


def _terms(words: list[np.ndarray], longest: int) -> np.ndarray:
    """The terms whose big-endian words these are, as an 'S' array as wide as the longest."""
    stacked = np.empty((len(words[0]), len(words)), dtype=">u8")
    for k, word in enumerate(words):
        stacked[:, k] = word
    return stacked.view(f"S{8 * len(words)}").ravel().astype(f"S{max(1, longest)}")


def intern_by_dict(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """`intern` one value at a time (values holding a NUL, which no span may hold)."""
    table: dict[str, int] = {}
    ids = np.array([table.setdefault(v, len(table)) for v in values], dtype=np.int64)
    terms = to_term_array(list(table))
    order = np.argsort(terms, kind="stable")
    remap = np.empty(len(order), dtype=np.int64)
    remap[order] = np.arange(len(order))
    return terms[order], remap[ids] if len(ids) else ids
