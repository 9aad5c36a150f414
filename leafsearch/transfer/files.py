"""NDJSON files as the transfer commands read and write them: plain, gzip (`.gz`) or zstd (`.zst`)
chosen by the file name's extension, `-` for standard input or output.

Compressed output is written as one gzip member or zstd frame per chunk (a page of hits): a file
cut after any whole chunk is still a valid file (both formats decode concatenated members/frames
as one stream), which is what lets an interrupted export truncate its file to the last chunk it
recorded and append from there (`export.py`)."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import sys
from typing import IO, BinaryIO

import zstandard

from leafsearch.transfer.client import InputError

GZIP_LEVEL = 6
ZSTD_LEVEL = 3


def compression_of(path: str) -> str | None:
    """ "gz", "zst" or None (plain), from the name's extension."""
    if path.endswith(".gz"):
        return "gz"
    if path.endswith(".zst"):
        return "zst"
    return None


def compress_chunk(data: bytes, kind: str | None) -> bytes:
    """`data` as one self-contained member/frame of `kind` (zlib and zstd release the GIL, so page
    workers compress in parallel)."""
    if kind == "gz":
        return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
    if kind == "zst":
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
    return data


class CountingReader(io.RawIOBase):
    """A raw file that counts the bytes read from it: the progress of reading a compressed file
    is measured on its compressed bytes, whose total is the file's size."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        n = self.raw.readinto(buffer)
        self.consumed += n or 0
        return n or 0


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of consecutive zstd frames (an export writes one per piece). Unlike
    `stream_reader`, a file that ends inside a frame (cut short, corrupt) is an error, not a quiet
    end of the data."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.frame = zstandard.ZstdDecompressor().decompressobj()
        self.started = False  # the current frame has been fed bytes
        self.pending = b""
        self.offset = 0  # of the first byte of `pending` not read yet

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        while self.offset == len(self.pending):
            self.pending, self.offset = b"", 0
            compressed = self.raw.read(1 << 20)
            if not compressed:
                if self.started:
                    raise zstandard.ZstdError("the file ends inside a zstd frame (cut short?)")
                return 0
            while compressed:
                self.started = True
                self.pending += self.frame.decompress(compressed)
                if not self.frame.eof:
                    break
                compressed = self.frame.unused_data
                self.frame = zstandard.ZstdDecompressor().decompressobj()
                self.started = False
        n = min(len(buffer), len(self.pending) - self.offset)
        buffer[:n] = memoryview(self.pending)[self.offset : self.offset + n]
        self.offset += n
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def check_input(path: str) -> None:
    """Refuses a FILE that cannot be opened for reading, before a command does anything else (it is
    not opened: a pipe would lose what this read)."""
    if path == "-":
        return
    if not os.path.exists(path):
        raise InputError(f"no such file [{path}]")
    if os.path.isdir(path):
        raise InputError(f"cannot read [{path}]: Is a directory")
    if not os.access(path, os.R_OK):
        raise InputError(f"cannot read [{path}]: Permission denied")


def open_input(path: str) -> tuple[IO[bytes], CountingReader, int | None]:
    """A binary line reader over `path` (decompressed), the counter of raw bytes consumed, and the
    raw size when known (None for standard input)."""
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
        size = None
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed through the returned reader
        except FileNotFoundError:
            raise InputError(f"no such file [{path}]") from None
        except OSError as exc:
            raise InputError(f"cannot read [{path}]: {exc.strerror}") from None
        info = os.fstat(raw.fileno())
        size = info.st_size if stat.S_ISREG(info.st_mode) else None  # a pipe (`<(...)`) has none
    counter = CountingReader(raw)
    buffered = io.BufferedReader(counter, buffer_size=1 << 20)
    kind = compression_of(path)
    if kind == "gz":
        return gzip.GzipFile(fileobj=buffered, mode="rb"), counter, size  # type: ignore[return-value]
    if kind == "zst":
        return io.BufferedReader(_ZstdFrames(buffered), buffer_size=1 << 20), counter, size
    return buffered, counter, size


def definition_path(path: str) -> str:
    """Where `leafsearch export` writes the index's settings and mappings beside FILE (and where
    `leafsearch import` looks for them)."""
    return path + ".index.json"


def replace_file(path: str, data: bytes) -> None:
    """`path` replaced by `data` through a temporary file renamed over it, so a kill leaves the old
    content or the new, never half of it, and no temporary file survives an exception."""
    temporary = path + ".tmp"
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def open_output(path: str, offset: int | None) -> BinaryIO:
    """`path` for writing chunks: new (truncated) when `offset` is None, else cut back to `offset`
    (the end of the last chunk an interrupted export recorded) and appended to."""
    if path == "-":
        return sys.stdout.buffer
    if offset is None:
        return open(path, "wb")  # noqa: SIM115 - the exporter closes it
    handle = open(path, "r+b")  # noqa: SIM115
    handle.truncate(offset)
    handle.seek(offset)
    return handle
