"""The codec and block size of `_source` blocks, measured on bench documents in one run.

    python -m bench.source_codecs                 # 40,000 bench documents
    python -m bench.source_codecs --docs 100000

For zstd with a 16 KB dictionary trained on 1,000 sampled sources (blocks of 16, what
`index.codec: best_compression` stores) and LZ4's block format without a dictionary (fast and HC
modes, blocks of 16 to 128 documents), each row gives: bytes a document stored; the CPU to read
every source in order (zstd: one read across the frames; LZ4: one call a block, joined, as
`Segment._stored_range` reads a walk's span); the CPU of a page of 100 hits scattered over 5,000
documents (one decompression per distinct block, as `Segment.source_blocks` without the cache);
and the CPU to compress. Process CPU, best of several repetitions (a shared machine's load moves
the best least).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import lz4.block
import numpy as np
import zstandard

from bench.generate import generate
from leafsearch.index.source_blocks import DICT_BYTES, DICT_DMER, DICT_SEGMENT, ZSTD_LEVEL


def _best(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def _row(
    name: str,
    sources: list[bytes],
    per_block: int,
    compress: Callable[[bytes], bytes],
    read_all: Callable[[list[bytes], list[int]], object],
    read_one: Callable[[bytes, int], object],
    pages: list[np.ndarray],
) -> None:
    count = len(sources)
    blocks = [b"".join(sources[i : i + per_block]) for i in range(0, count, per_block)]
    sizes = list(map(len, blocks))
    stored = [compress(block) for block in blocks]

    def scattered() -> None:
        for page in pages:
            for block in np.unique(page // per_block).tolist():
                read_one(stored[block], sizes[block])

    every = _best(lambda: read_all(stored, sizes), 15)
    page = _best(scattered, 15) / len(pages)
    packing = _best(lambda: [compress(block) for block in blocks], 5)
    print(
        f"{name:<24} {sum(map(len, stored)) / count:>8.1f} {every / count * 1e9:>12.0f}"
        f" {page * 1e6:>14.0f} {packing / count * 1e9:>12.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=40_000)
    args = parser.parse_args()
    sources = [s.encode() for s in generate(args.docs).sources]
    rng = np.random.default_rng(1)
    pages = [np.sort(rng.choice(5000, 100, replace=False)) + s for s in range(0, len(sources) - 5000, 5000)]
    print(f"{len(sources):,} bench documents, {sum(map(len, sources)) / len(sources):.0f} bytes of JSON each")
    heads = ("bytes/doc", "every, us/1k", "page of 100, us", "pack, us/1k")
    print(f"{'codec, block':<24} {heads[0]:>8} {heads[1]:>12} {heads[2]:>14} {heads[3]:>12}")

    samples = sources[:: max(1, len(sources) // 1000)][:1000]
    trained = zstandard.train_dictionary(DICT_BYTES, samples, k=DICT_SEGMENT, d=DICT_DMER, level=ZSTD_LEVEL)
    packer = zstandard.ZstdCompressor(level=ZSTD_LEVEL, dict_data=trained)
    reader = zstandard.ZstdDecompressor(dict_data=trained)

    def zstd_all(stored: list[bytes], sizes: list[int]) -> None:
        out = bytearray(sum(sizes))
        reader.stream_reader(b"".join(stored), read_across_frames=True).readinto(out)

    _row(
        "zstd + dictionary, 16",
        sources,
        16,
        packer.compress,
        zstd_all,
        lambda b, _: reader.decompress(b),
        pages,
    )

    def lz4_one(block: bytes, size: int) -> bytes:
        return lz4.block.decompress(block, uncompressed_size=size)

    def lz4_all(stored: list[bytes], sizes: list[int]) -> bytes:
        return b"".join(map(lz4_one, stored, sizes))

    for per_block in (16, 32, 64, 128):

        def fast(block: bytes) -> bytes:
            return lz4.block.compress(block, store_size=False)

        _row(f"lz4, {per_block}", sources, per_block, fast, lz4_all, lz4_one, pages)
    for per_block in (32, 64):
        for level in (4, 9):

            def high(block: bytes, level: int = level) -> bytes:
                return lz4.block.compress(block, store_size=False, mode="high_compression", compression=level)

            _row(f"lz4 HC {level}, {per_block}", sources, per_block, high, lz4_all, lz4_one, pages)


if __name__ == "__main__":
    main()
