"""Arrays derived from a segment, kept as immutable files beside it and memory-mapped by every
process: a segment's sort orders (order_files.py) and its keyword postings (columns.py).

Why: a segment never changes, so what is derived from it (the order of its documents by a sort
key, the documents of each keyword term) is a constant. Computed in memory, each search worker
process computed it again for itself (a `lexsort` or a stable `argsort` of the segment: tens of
milliseconds at a million documents) on its first query touching that segment, and held its own
copy: every worker was cold once per segment. Now the first process that needs such arrays
writes them into the segment's folder, and every process (the other workers, and any process
after a restart) maps the file instead: the page cache holds one copy for all of them, and the
file goes with its segment's folder (merged away, index deleted, orphans removed at recovery).
Segments under `MIN_DOCS` documents derive faster than a file opens: each process computes
their arrays itself.

Names are never a client's: `sort-<digest>.order` (a digest of the sort key, fields by their
numbers in the segment), `f<number>.postings` (the field's number).

Layout: magic (8 bytes), header length (8, little-endian), JSON header (file size, the boot it
was written in, per array its dtype, length and offset, and the caller's metadata), arrays
aligned to 64 bytes, a trailer (8). A file is written to a temporary name and renamed into
place, so a name always means a whole file; a reader still checks magic, size, header, array
bounds and trailer, and takes anything else for absent (it is then derived and written again).
Two processes writing one file at once each write their own temporary file; both hold the same
bytes, and the last rename wins. Temporary files a crash left behind are removed when the shard
opens its segments (`remove_partial_files`).

No fsync, and why that is safe: the file is a cache of what the segment already holds. Until the
machine stops, every process reads a renamed file whole from the page cache, even after its
writer died (kill -9 loses no written page). Only a power loss or a kernel crash can leave a
renamed file with pages never written (zeros of the right size), and that is a new boot: the
header records the kernel's boot id (`/proc/sys/kernel/random/boot_id`), and a file from another
boot is taken for absent and written again. Where the boot id is unknown (not Linux), files are
fsynced, with their folder, and say so (`boot: null`). Why not always fsync: two fsyncs cost 13 ms
on the bench machine, per file, on the query that first needs it.

Cost: writing is one pass over the arrays into the page cache; reading is one `mmap` and a JSON
header.
"""

from __future__ import annotations

import mmap
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from leafsearch.common.durable import fsync_dir, private

FORMAT = 1
_PARTIAL = ".partial-"
_MAGIC = b"LSDERIV\x01"
_TRAILER = b"LSDERIVE"
_ALIGN = 64
#: Segments smaller than this derive their arrays in less time than a file takes to open.
MIN_DOCS = 8192
#: What `write` raises when a file cannot be written (a full disk, the segment deleted meanwhile,
#: no memory for its buffers) while the caller's arrays are whole: the caller keeps them in memory.
UNWRITTEN = (OSError, MemoryError)


@dataclass
class Derived:
    """A file's arrays (mapped read-only) and the metadata written with them."""

    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]


def boot_id() -> str | None:
    """The running kernel's boot id (None where there is none to read)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


_BOOT = boot_id()


def write(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Write `arrays` (1-dimensional) and `meta` (JSON-able) at `path`: a temporary file renamed
    into place (fsynced first, with the folder after, only where the boot id is unknown). Raises
    one of `UNWRITTEN` when it cannot, and leaves no temporary file."""
    items = [(name, np.ascontiguousarray(arr)) for name, arr in arrays.items()]
    entries = []
    offset = 0
    for name, arr in items:
        entries.append([name, arr.dtype.str, len(arr), offset])
        offset += _padded(arr.nbytes)
    header: dict[str, Any] = {
        "format": FORMAT,
        "boot": _BOOT,
        "arrays": entries,
        "meta": meta,
        "size": 0,
    }
    while True:  # the header holds the file's size, which depends on the header's length
        body = orjson.dumps(header)
        start = _padded(16 + len(body))
        if header["size"] == start + offset + len(_TRAILER):
            break
        header["size"] = start + offset + len(_TRAILER)
    tmp = path.with_name(f"{path.name}{_PARTIAL}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb", opener=private) as fh:
            fh.write(_MAGIC + len(body).to_bytes(8, "little") + body)
            fh.write(b"\0" * (start - 16 - len(body)))
            for _, arr in items:
                data = arr.view(np.uint8).reshape(-1)
                fh.write(memoryview(data))
                fh.write(b"\0" * (_padded(arr.nbytes) - arr.nbytes))
            fh.write(_TRAILER)
            if _BOOT is None:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if _BOOT is None:
        fsync_dir(path.parent)


def read(path: Path) -> Derived | None:
    """The arrays stored at `path`, mapped read-only; None when there is no whole file there
    (absent, truncated, from another boot, or not this format), or when it cannot be mapped
    (`ENOMEM`: the process's mappings at their limit): the caller derives the arrays again."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 16 + len(_TRAILER):
                return None
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        return _parse(data, size)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def _parse(data: mmap.mmap, size: int) -> Derived | None:
    if data[:8] != _MAGIC or data[size - len(_TRAILER) :] != _TRAILER:
        return None
    length = int.from_bytes(data[8:16], "little")
    if 16 + length > size:
        return None
    header = orjson.loads(data[16 : 16 + length])
    if header.get("format") != FORMAT or header.get("size") != size:
        return None
    if header.get("boot") is not None and header["boot"] != _BOOT:
        return None  # written without fsync before the machine last started: maybe torn
    start = _padded(16 + length)
    arrays: dict[str, np.ndarray] = {}
    for name, dtype, count, offset in header["arrays"]:
        dt = np.dtype(dtype)
        if offset % _ALIGN or start + offset + count * dt.itemsize > size - len(_TRAILER):
            return None
        arrays[name] = np.frombuffer(data, dt, count, start + offset)
    return Derived(arrays, header["meta"])


def is_derived(name: str) -> bool:
    """Whether a file of a segment folder is a derived file (or one being written): a cache,
    rebuilt when missing, so a copy of the segment leaves it out (snapshots)."""
    return name.endswith((".order", ".postings")) or _PARTIAL in name


def remove_partial_files(folder: Path) -> None:
    """Delete the temporary files a crash left in a segment folder (when the shard opens
    its segments; a process still writing one then fails to rename it, and keeps its arrays in
    memory)."""
    for entry in folder.glob(f"*{_PARTIAL}*"):
        entry.unlink(missing_ok=True)


def _padded(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN
